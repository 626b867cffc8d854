// The three analyses over a loaded Trace. Each computes a plain struct
// (what the unit tests inspect) and renders it as JSON (what the C ABI
// returns).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "openreg/common/json_writer.h"
#include "trace_model.h"

namespace openreg::trace {

using common::JsonWriter;

// ---------------------------------------------------------------- window

// The profiling window: the Kineto "Trace" span(s), extended to the
// "Record Window End" marker (torch closes its span a moment before the
// device capture window ends); without spans, the extent of host events.
struct Window {
  int64_t start = 0, end = 0;
  std::string source;  // "trace_span", "trace_span+record_window_end", "host_events"
};
std::optional<Window> profilingWindow(const Trace& t);

// ---------------------------------------------------------------- summary

struct SummaryOptions {
  int top = 10;
  int gaps = 5;
  // HTA's consecutive_kernel_delay: a gap shorter than this between two
  // kernels already queued is launch overhead ("kernel wait"). HTA's default
  // of 30 applies to its timestamps, which are whole microseconds.
  int64_t kernelWaitNs = 30'000;
  // HTA's runtime_cutoff and launch_delay_cutoff (its outlier thresholds).
  int64_t slowLaunchNs = 50'000;
  int64_t slowStartNs = 100'000;
  // The roofline's peaks for every device; each overrides deviceProperties'.
  std::optional<double> peakFlops, peakBytesPerS;
};

struct Interval {
  int64_t start, end;
};
// Sorts and merges into the union in place; returns the covered time.
int64_t mergeUnion(std::vector<Interval>& iv);
// Time covered by both of two merged (sorted, disjoint) lists.
int64_t intersectionNs(const std::vector<Interval>& a, const std::vector<Interval>& b);

// Kernel classes as HTA names them (its KernelType, OTHER included).
enum class KernelClass : uint8_t { Compute, Communication, Memory, Other };
inline constexpr size_t kKernelClasses = 4;
KernelClass classifyKernel(const Trace& t, uint32_t slice);
const char* kernelClassName(KernelClass c);

struct ClassTime {
  uint64_t count = 0;
  int64_t totalNs = 0;  // sum of durations
  int64_t busyNs = 0;   // union of the intervals
};
struct KernelClasses {
  std::array<ClassTime, kKernelClasses> total{};
  struct PerStream {
    uint32_t lane = 0;
    std::array<ClassTime, kKernelClasses> byClass{};
  };
  std::vector<PerStream> streams;  // by device, stream
};

// Idle time between device events on one stream, as HTA's idle time
// breakdown splits it (see trace/README.md for where we differ).
struct IdleBreakdown {
  // HTA groups by the "stream" arg; a device event without one counts on its row's tid.
  Key device, stream;
  int64_t hostWaitNs = 0, kernelWaitNs = 0, otherNs = 0;
  uint64_t hostWaitGaps = 0, kernelWaitGaps = 0, otherGaps = 0;
  int64_t totalNs() const { return hostWaitNs + kernelWaitNs + otherNs; }
};

// Launches: a runtime call paired with its device event by correlation.
struct LaunchRow {
  uint32_t name = kNoString;  // the runtime call, or the op
  uint64_t launches = 0, shortKernels = 0, slowLaunches = 0, slowStarts = 0;
  int64_t hostNs = 0, delayNs = 0, deviceNs = 0, maxDelayNs = 0;
};
struct LaunchStats {
  LaunchRow total;
  std::vector<LaunchRow> byApi;  // by host time, descending
  std::vector<LaunchRow> byOp;   // worst first: most launch overhead (host + delay)
};

struct CollectiveStat {
  std::string collective;  // canonical: AllReduce, AllGather, ReduceScatter, ...
  uint64_t calls = 0;
  int64_t bytes = 0;  // 0 when no event said its size
  int64_t deviceNs = 0;
  int64_t groupSize = 0;  // 0 when unknown
};
struct CollectiveInstance {
  uint32_t slice = 0;
  std::string collective;
  int64_t seq = -1;  // -1: none in the trace
  uint32_t group = kNoString;
  int64_t bytes = 0;
};
struct Communication {
  std::vector<CollectiveStat> collectives;           // by device time, descending
  int64_t commNs = 0, computeNs = 0, overlapNs = 0;  // unions over the whole trace
  std::vector<CollectiveInstance> instances;         // in start order
};

struct KernelStat {
  uint32_t name = kNoString, cat = kNoString;
  uint32_t firstSlice = 0;  // its class is that of its first event
  uint64_t count = 0;
  int64_t totalNs = 0, minNs = 0, maxNs = 0;
};

struct OpDeviceStat {
  uint32_t name = kNoString;  // kNoString: device work linked to no op
  int64_t deviceNs = 0;
  uint64_t deviceEvents = 0;
  uint64_t opInstances = 0;
};

struct LinkStat {
  uint64_t deviceEvents = 0, linked = 0, viaExternalId = 0, viaCorrelation = 0;
  struct PerCategory {
    uint32_t cat = kNoString;
    uint64_t events = 0, linked = 0;
  };
  std::vector<PerCategory> byCategory;
};

struct StreamStat {
  uint32_t lane = 0;
  uint64_t events = 0;
  int64_t busyNs = 0, firstNs = 0, lastNs = 0;
};

struct DeviceStat {
  Key device;
  uint64_t streams = 0, events = 0;
  int64_t busyNs = 0, firstNs = 0, lastNs = 0;
  std::vector<Interval> busy;  // the union of its streams' work, sorted
};

struct HostActivity {
  int32_t lane = -1;            // the host thread described, -1 if none was active
  std::vector<uint32_t> stack;  // slices enclosing the gap's midpoint, outermost first
  std::string text;             // the stack condensed: "python: f → aten::item → orStreamSynchronize"
  struct Overlap {
    uint32_t name = kNoString, cat = kNoString;
    uint64_t count = 0;
    int64_t overlapNs = 0;
  };
  std::vector<Overlap> overlapping;  // host calls inside the gap, most time first
};

struct IdleGap {
  Key device;
  int64_t startNs = 0, endNs = 0;
  HostActivity host;
};

struct MemoryStat {
  int64_t deviceType = 0, deviceId = 0;
  uint64_t events = 0, allocations = 0, frees = 0;
  int64_t peakBytes = 0, peakTs = 0, finalBytes = 0;
  int32_t peakEvent = -1;         // index into Trace::memory
  int32_t op = kNoSlice;          // innermost host op enclosing the peak
  std::vector<uint32_t> opStack;  // host ops enclosing the peak, outermost first
};

// Device time per model source line (summary_source_lines.cpp).
struct SourceLineStat {
  std::string source;    // "file:line"
  std::string function;  // "" when unknown (compiled kernels name lines only)
  int64_t deviceNs = 0;
  uint64_t events = 0;  // device events that ran code of this line
};
struct SourceAttribution {
  // How the device events were attributed: by the kernel's "source_lines"
  // (compiled), by the innermost user frame of the Python stack around the
  // launching op (eager, with_stack), or not at all.
  uint64_t compiledEvents = 0, stackEvents = 0, unattributedEvents = 0;
  int64_t compiledNs = 0, stackNs = 0, unattributedNs = 0;
  std::vector<SourceLineStat> lines;  // by device time, descending (all)
};

// ---------------------------------------------------------------- roofline (summary_roofline.cpp)

// Where a metric range's time came from.
enum class RangeTime : uint8_t {
  Kernel,      // the kernel event it measures (same correlation, else same row, ts and dur)
  Kernels,     // a device total ("kernels" arg): the summed durations of the kernels inside it
  Range,       // its own duration: no kernel event to match
  CuptiSplit,  // unknown: Kineto's CUPTI range profiler splits its span evenly among its ranges
};
const char* rangeTimeName(RangeTime r);

// One metric range, read: each value only when the range carries it.
struct RangeMetrics {
  uint32_t range = 0;  // index into Trace::metricRanges
  std::optional<double> flops, bytesRead, bytesWritten, busyNs;
  bool flopsFromSass = false;      // summed from CUPTI's SASS instruction counters
  std::optional<int64_t> kernels;  // a device total's "kernels"
  RangeTime time = RangeTime::Range;
  int64_t timeNs = 0;  // unknown for CuptiSplit
};
// Every range of the trace, in file order, with its time found.
std::vector<RangeMetrics> readRangeMetrics(const Trace& t);

// The ranges of one kernel name on one device, summed. A value is known only
// when every range had it (a partial sum would pass for the whole).
struct RooflineRow {
  uint32_t name = kNoString;
  bool deviceTotal = false;  // openreg's one range per device ("kernels" arg)
  uint64_t count = 0;        // ranges
  int64_t kernels = 0;       // kernels they cover
  uint8_t timeBases = 0;     // bit set of 1 << RangeTime
  std::optional<double> flops, bytesRead, bytesWritten, busyNs;
  std::optional<int64_t> timeNs;
  std::optional<double> bytes() const;  // read + written
};

// What a row achieved against its device's peaks: each null when a value it
// needs is unknown.
struct RooflineRates {
  std::optional<double> intensity;  // FLOP per byte
  std::optional<double> flopsPerS, bytesPerS, peakFlopsShare, peakBytesShare, attainableFlopsPerS, rooflineShare;
  const char* bound = nullptr;  // "memory" (intensity below the ridge), "compute", or null
};

struct RooflineDevice {
  Key device;
  uint32_t name = kNoString;  // from deviceProperties
  std::optional<double> peakFlops, peakBytesPerS;
  const char *peakFlopsSource = nullptr, *peakBytesSource = nullptr;  // "options", "deviceProperties"
  uint64_t ranges = 0, flopsRanges = 0, sassRanges = 0;               // all, with FLOPs, with FLOPs from SASS counters
  std::vector<RooflineRow> rows;        // per kernel name: most time first, then most FLOPs
  RooflineRow total;                    // its kernels' rows together (its device total without them)
  std::vector<std::string> notes;       // what is unknown and why, in words
  std::optional<double> ridge() const;  // peakFlops / peakBytesPerS
};

struct Roofline {
  uint64_t ranges = 0;
  std::vector<RooflineDevice> devices;  // by device
  std::vector<std::string> notes;       // trace-wide: what is missing
};
Roofline computeRoofline(const Trace& t, const SummaryOptions& options);
RooflineRates rooflineRates(const RooflineRow& row, const RooflineDevice& device);

// ---------------------------------------------------------------- counter tracks (summary_counters.cpp)

struct CounterSeriesStat {
  uint32_t name = kNoString;
  uint64_t samples = 0;
  double min = 0, max = 0, last = 0;
  // Weighted by how long each value held (until the series' next sample);
  // null when all its samples share one timestamp.
  std::optional<double> mean;
  int64_t firstTs = 0, lastTs = 0;
};

// The samples of one counter name on one pid (Chrome's and Perfetto's track).
struct CounterTrack {
  Key device;  // the pid
  uint32_t name = kNoString, cat = kNoString;
  std::vector<uint32_t> points;           // into Trace::counters, by ts (file order among equals)
  std::vector<CounterSeriesStat> series;  // in the order they first appear
};
// By device, then name.
std::vector<CounterTrack> computeCounterTracks(const Trace& t);

struct Summary {
  std::optional<Window> window;
  int64_t deviceTotalNs = 0;
  std::vector<KernelStat> kernels;  // by total time, descending (all)
  std::vector<OpDeviceStat> ops;    // by device time, descending (all)
  LinkStat links;
  std::vector<StreamStat> streams;  // by device, stream
  std::vector<DeviceStat> devices;
  std::vector<IdleGap> gaps;           // largest first, at most options.gaps
  std::vector<MemoryStat> memory;      // device memory (type != CPU)
  std::vector<MemoryStat> hostMemory;  // CPU memory, for reference
  KernelClasses classes;
  std::vector<IdleBreakdown> idle;  // by device, stream
  LaunchStats launches;
  Communication communication;
  SourceAttribution sourceLines;
  Roofline roofline;
  std::vector<CounterTrack> counters;
};

// The HTA-style parts of the summary (device_analysis.cpp).
KernelClasses computeKernelClasses(const Trace& t);
std::vector<IdleBreakdown> computeIdleBreakdown(const Trace& t, const SummaryOptions& options);
LaunchStats computeLaunchStats(const Trace& t, const SummaryOptions& options);
Communication computeCommunication(const Trace& t);

// One section of the summary: it fills its part of Summary and writes its
// keys of the JSON object. The sections run, and their keys appear, in the
// order of summarySections(); a section may read what an earlier one
// computed. Adding a section: its fields in Summary, its two functions, one
// row in the table (summary.cpp).
struct SummarySection {
  const char* name;
  void (*compute)(const Trace& t, const SummaryOptions& options, Summary& s);  // null: nothing to compute
  void (*write)(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
};
const std::vector<SummarySection>& summarySections();

// The sections, by the file that holds them.
namespace sections {
// summary.cpp
void writeTrace(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
void computeWindow(const Trace& t, const SummaryOptions& options, Summary& s);
void writeWindow(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
// summary_device_time.cpp: top kernels; device time per op and the linked share
void computeKernels(const Trace& t, const SummaryOptions& options, Summary& s);
void writeKernels(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
void computeOps(const Trace& t, const SummaryOptions& options, Summary& s);
void writeOps(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
// summary_streams.cpp: utilisation per stream and device; idle gaps
void computeStreams(const Trace& t, const SummaryOptions& options, Summary& s);
void writeStreams(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
void computeIdleGaps(const Trace& t, const SummaryOptions& options, Summary& s);
void writeIdleGaps(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
// device_analysis.cpp: what HTA reports
void computeKernelClasses(const Trace& t, const SummaryOptions& options, Summary& s);
void writeKernelClasses(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
void writeTemporal(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
void computeIdleBreakdown(const Trace& t, const SummaryOptions& options, Summary& s);
void writeIdleBreakdown(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
void computeLaunches(const Trace& t, const SummaryOptions& options, Summary& s);
void writeLaunches(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
void computeCommunication(const Trace& t, const SummaryOptions& options, Summary& s);
void writeCommunication(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
// summary_source_lines.cpp: device time per model source line
void computeSourceLines(const Trace& t, const SummaryOptions& options, Summary& s);
void writeSourceLines(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
// summary_memory.cpp: the peak of device and host memory
void computeMemory(const Trace& t, const SummaryOptions& options, Summary& s);
void writeMemory(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
// critical_path_json.cpp: the critical path of the first ProfilerStep, in short
void writeCriticalPath(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
// summary_roofline.cpp: FLOPs, bytes and rates per kernel against the peaks
void computeRoofline(const Trace& t, const SummaryOptions& options, Summary& s);
void writeRoofline(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
// summary_counters.cpp: min, max, last and mean of every counter series
void computeCounters(const Trace& t, const SummaryOptions& options, Summary& s);
void writeCounters(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options);
}  // namespace sections

// A python_function name "path(line): function" of user code (not
// <built-in>, not under torch/, site-packages/ or Python's own lib/python3.*/):
// {"path:line", function}; nullopt otherwise.
std::optional<std::pair<std::string, std::string>> userSourceLine(std::string_view frame);

Summary computeSummary(const Trace& t, const SummaryOptions& options);
std::string summaryToJson(const Trace& t, const Summary& s, const SummaryOptions& options);
// Condenses a host stack for display (see HostActivity::text).
std::string describeHostStack(const Trace& t, const std::vector<uint32_t>& stack);
const char* deviceTypeName(int64_t type);

// ---------------------------------------------------------------- checks

enum class Severity { Error, Warning };

struct CheckOptions {
  int examples = 5;
  std::vector<std::string> skip, only;
  int64_t windowSlackNs = 0;
  // Every finding fails, known artifacts and warning-level checks included:
  // for openreg's own traces, which have none of those artifacts.
  bool strict = false;
};

// An event named in a violation.
struct EventRef {
  enum Kind { kSlice, kFlow, kMemory, kMeta, kMalformed } kind;
  uint32_t index;  // into the matching Trace vector
};

struct Violation {
  std::string message;
  std::vector<EventRef> events;
  // A known artifact of real Kineto traces that breaks no consumer: reported
  // as a warning unless CheckOptions::strict.
  bool artifact = false;
};

struct CheckResult {
  std::string name;
  Severity severity = Severity::Error;
  // kWarn: findings, none of which breaks a consumer (an artifact, or a
  // warning-level check); only strict makes them fail.
  enum Status { kPass, kFail, kWarn, kSkipped } status = kPass;
  uint64_t violations = 0;  // findings that fail
  uint64_t warnings = 0;    // findings that only warn
  std::vector<Violation> examples;
  std::string note;  // e.g. why it was skipped, or what was assumed
};

struct CheckReport {
  bool ok = true;
  bool strict = false;
  std::vector<CheckResult> results;
};

struct CheckInfo {
  const char* name;
  Severity severity;
  const char* description;
  const char* consumer;  // who reads what this check protects
  const char* breaks;    // what that consumer shows or loses when it fails
  const char* artifact;  // the findings that only warn, and why; "" if none
};
const std::vector<CheckInfo>& checkTable();

// Throws std::invalid_argument for an unknown name in skip/only.
CheckReport runChecks(const Trace& t, const CheckOptions& options);
std::string checkReportToJson(const Trace& t, const CheckReport& r);
std::string checkTableToJson();

// ---------------------------------------------------------------- timeline

struct TimelineOptions {
  int width = 2000;
};
std::string timelineJson(const Trace& t, const TimelineOptions& options);

// Shared by the analyses and renderers.
bool startsWith(std::string_view s, std::string_view prefix);
double ratio(int64_t num, int64_t den);  // 0 when den <= 0
void writeKey(JsonWriter& w, const Trace& t, const Key& k);
void writeName(JsonWriter& w, const Trace& t, uint32_t id);  // null for kNoString
void writeEventRef(JsonWriter& w, const Trace& t, const EventRef& ref);
void writeTraceInfo(JsonWriter& w, const Trace& t);
// {name, category, start_ns, duration_ns, event_index} of a slice.
void writeSliceBrief(JsonWriter& w, const Trace& t, uint32_t slice);

}  // namespace openreg::trace
