// The parsed trace: compact event records, lanes, string table and the
// indexes that the summary, checks and timeline share. Built once by
// loadTrace(), then read-only (safe to share between threads).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "json_reader.h"

namespace openreg::trace {

inline constexpr uint32_t kNoString = 0xFFFFFFFFu;
inline constexpr int32_t kNoSlice = -1;

// Interned strings; ids are dense and stable, views stay valid for the
// table's lifetime.
class StringTable {
 public:
  uint32_t intern(std::string_view s);
  // kNoString when absent.
  uint32_t find(std::string_view s) const;
  std::string_view view(uint32_t id) const { return id == kNoString ? std::string_view() : views_[id]; }
  size_t size() const { return views_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  struct Eq {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const noexcept { return a == b; }
  };
  char* allocate(size_t n);

  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t blockLeft_ = 0;
  char* blockPos_ = nullptr;
  std::vector<std::string_view> views_;
  std::unordered_map<std::string_view, uint32_t, Hash, Eq> ids_;
};

// A pid, tid or flow id: chrome traces allow numbers and strings.
struct Key {
  int64_t value = 0;
  bool isString = false;  // value is then a StringTable id
  bool operator==(const Key&) const = default;
  bool operator<(const Key& o) const { return isString != o.isString ? !isString : value < o.value; }
};

struct Lane {
  Key pid, tid;
  bool operator==(const Lane&) const = default;
};

enum class LaneKind : uint8_t { Host, Device, Other };

// Roles a category plays; see LoadOptions.
enum class CategoryRole : uint8_t { Other, Device, Runtime, Annotation, Op, Python, Span };

// An integer argument as found in "args".
struct IntArg {
  int64_t value = 0;
  bool present = false;
  bool isInt = false;  // false: present but a string, a fraction, a bool...
  bool ok() const { return present && isInt; }
};

// Where an event came from, for reports.
struct Origin {
  uint64_t offset = 0;  // byte offset of the event's '{' in the decompressed file
  uint32_t index = 0;   // position in traceEvents
};

struct Slice {              // ph "X"
  int64_t ts = 0, dur = 0;  // ns
  int64_t end() const { return ts + dur; }
  Origin origin;
  uint32_t lane = 0;
  uint32_t name = kNoString, cat = kNoString;
  IntArg externalId, device, stream, correlation;
};

// The record_param_comms args Kineto copies onto communication kernels
// (and that openreg's collectives carry). Kept beside the slices, since few
// events have them.
struct CommArgs {
  uint32_t slice = 0;                          // index into Trace::slices
  uint32_t collective = kNoString;             // "Collective name"
  uint32_t dtype = kNoString;                  // "dtype"
  uint32_t group = kNoString;                  // "Process Group Name"
  IntArg inNelems, outNelems, groupSize, seq;  // "In msg nelems", ..., "Seq"
};

// The model source lines a compiled kernel fused: args "source_lines", each
// "file:line" (openreg's Inductor kernels carry them). Kept beside the
// slices, since few events have them.
struct SourceLines {
  uint32_t slice = 0;           // index into Trace::slices
  std::vector<uint32_t> lines;  // the strings, in the order written
};

// Kineto's synchronisation args (CUPTI's sync records, openreg's sync rows):
// "cuda_sync_kind" and, for waits on an event, the record waited on. Kept
// beside the slices, since few events have them.
struct SyncArgs {
  uint32_t slice = 0;              // index into Trace::slices
  uint32_t kind = kNoString;       // "cuda_sync_kind" (kNoString: absent or not a string)
  IntArg waitOnStream;             // "wait_on_stream"
  IntArg waitOnRecordCorrelation;  // "wait_on_cuda_event_record_corr_id"
  IntArg waitOnEventId;            // "wait_on_cuda_event_id"
};

struct FlowPoint {  // ph "s", "t", "f"
  int64_t ts = 0;
  Origin origin;
  Key id;
  uint32_t lane = 0;
  uint32_t name = kNoString, cat = kNoString;
  char ph = 0;
  bool bindsEnclosing = false;  // "bp":"e"
};

struct MemoryPoint {  // ph "i", name "[memory]"
  int64_t ts = 0;
  Origin origin;
  uint32_t lane = 0;
  IntArg deviceType, deviceId, totalAllocated, bytes;
};

// A numeric arg kept as written: counter series and metrics may be fractions
// or exceed int64 (CUPTI's instruction counts).
struct NumArg {
  uint32_t key = kNoString;
  double value = 0;
};

// One sample of a counter track (ph "C"): its args are the series' values,
// each holding from ts until the track's next sample of that series.
struct CounterPoint {
  int64_t ts = 0;
  Origin origin;
  Key pid;
  uint32_t name = kNoString, cat = kNoString;
  uint32_t firstArg = 0, argCount = 0;  // into Trace::numArgs
};

// The category of per-kernel metrics: openreg's, and Kineto's CUPTI range
// profiler's (CUDA_PROFILER_RANGE).
inline constexpr std::string_view kMetricCategory = "cuda_profiler_range";

// A complete event of kMetricCategory: metrics of a kernel (or of a range of
// kernels), not device work. Kept apart from the slices, so that no analysis
// of device time counts it beside the kernel it measures.
struct MetricRange {
  int64_t ts = 0, dur = 0;  // ns
  Origin origin;
  Lane lane;
  uint32_t name = kNoString;
  IntArg correlation;                   // the kernel's, for an exact join
  uint32_t firstArg = 0, argCount = 0;  // into Trace::numArgs
};

// An entry of the document's "deviceProperties": the peaks a backend declares.
struct DeviceProperties {
  int64_t id = 0;
  uint32_t name = kNoString;
  std::optional<double> peakFlops, peakBytesPerS;  // "peakFlopsPerSecond", "peakBytesPerSecond"
};

struct MetaEvent {  // ph "M"
  Origin origin;
  uint32_t lane = 0;
  uint32_t name = kNoString;    // "process_name", "thread_sort_index", ...
  uint32_t strArg = kNoString;  // args.name / args.labels
  IntArg sortIndex;
};

struct Malformed {
  Origin origin;
  std::string reason;
  uint32_t name = kNoString;  // the event's "name", when it had one
};

// A training step (steps.cpp). torch.profiler's schedule marks each with a
// ProfilerStep#N host range. An on-demand trace (Kineto writes it for a
// daemon's request, with no profile() in the program) has none: its steps are
// read off the optimizer, each ending where an Optimizer.step#... range ends.
struct Step {
  int64_t ts = 0, end = 0;
  // N of ProfilerStep#N. An optimizer step's: Kineto's step count when the
  // trace gives it (openreg's on-demand metadata), else 1, 2, ... in the trace.
  int64_t number = 0;
  uint32_t name = kNoString;  // "ProfilerStep#N", "iteration N"
  int32_t range = kNoSlice;   // the ProfilerStep#N slice; kNoSlice for an optimizer step
  // The device span: from the start of the first device work launched in
  // the host range [ts, end) to the end of the last, cut where the next
  // step's work begins when they overlap on the device. None without device work.
  bool hasDeviceWork = false;
  bool deviceSpanCut = false;  // the next step's work began before this one's ended
  int64_t deviceStart = 0, deviceEnd = 0;
  // How far the device is behind the host when the step's host range ends
  // (negative: the step's device work was done before it ended).
  int64_t lagNs() const { return hasDeviceWork ? deviceEnd - end : 0; }
};

enum class StepSource : uint8_t { None, ProfilerSteps, OptimizerSteps };

// Which of a step's two spans "step time" and its breakdown use (steps.cpp).
enum class StepClock : uint8_t { Host, Device };
// "host" or "device".
const char* stepClockName(StepClock clock);

// openreg's metadata of an on-demand trace ("openreg_profiler": {"on_demand": ...}).
struct OnDemandInfo {
  int64_t iterations = 0;       // of an iteration-based request; 0: duration-based
  int64_t startIteration = -1;  // Kineto's step count where it started, -1 if not known
};

struct LoadOptions {
  std::vector<std::string> deviceCategories{"kernel", "gpu_memcpy", "gpu_memset"};
  bool inferDeviceCategories = true;
  // Empty: every category ending in "_runtime" or "_driver".
  std::vector<std::string> runtimeCategories;
  bool runtimeCategoriesGiven = false;
  // On device rows but not device work: may enclose work, never count as busy.
  std::vector<std::string> annotationCategories{"gpu_user_annotation", "cuda_sync"};
  std::vector<std::string> opCategories{"cpu_op", "user_annotation"};
  std::vector<std::string> flowCategories{"ac2g"};
  size_t bufferSize = JsonReader::kDefaultBufferSize;
};

struct ParseError {
  uint64_t offset = 0;
  std::string message;
};

class Trace {
 public:
  // ---- raw content, in file order ----
  StringTable strings;
  std::vector<Lane> lanes;
  std::vector<Slice> slices;
  std::vector<FlowPoint> flows;
  std::vector<MemoryPoint> memory;
  std::vector<MetaEvent> meta;
  std::vector<CommArgs> commArgs;        // by slice index, ascending
  std::vector<SourceLines> sourceLines;  // by slice index, ascending
  std::vector<SyncArgs> syncArgs;        // by slice index, ascending
  std::vector<CounterPoint> counters;    // in file order
  std::vector<MetricRange> metricRanges;
  std::vector<NumArg> numArgs;  // the args of counters and metric ranges
  std::vector<DeviceProperties> deviceProperties;
  // distributedInfo (torch.profiler writes it once torch.distributed runs).
  std::optional<int64_t> rank, worldSize;
  uint32_t distBackend = kNoString;
  std::vector<Malformed> malformed;  // first kMaxMalformedKept
  uint64_t malformedCount = 0;
  static constexpr size_t kMaxMalformedKept = 1000;

  uint64_t eventCount = 0;
  uint64_t bytesRead = 0;
  std::array<uint64_t, 256> phaseCounts{};  // by the ph character
  std::optional<int64_t> recordWindowEnd;   // "Record Window End" instant
  std::optional<OnDemandInfo> onDemand;     // openreg's on-demand metadata, when the trace has it
  std::optional<ParseError> parseError;
  bool hasTraceEvents = false;

  // ---- classification (buildIndexes) ----
  LoadOptions options;
  std::vector<CategoryRole> categoryRole;  // by string id
  std::vector<LaneKind> laneKind;          // by lane
  std::vector<uint32_t> deviceCategories, runtimeCategories, annotationCategories, opCategories,
      flowCategories;  // resolved string ids

  // ---- indexes ----
  // Slices of each lane sorted by (ts, longer first, file order).
  std::vector<std::vector<uint32_t>> laneSlices;
  // Innermost slice on the same lane that fully encloses each slice.
  std::vector<int32_t> parent;
  std::unordered_map<int64_t, uint32_t> opByExternalId;
  std::unordered_map<int64_t, uint32_t> runtimeByCorrelation;
  std::vector<uint32_t> deviceSlices;  // sorted by (lane, ts)
  // Earliest timestamp: reported times are relative to it.
  int64_t originNs = 0;
  // The trace's steps, by start (steps.cpp), where they came from, and how
  // they were read, in words for the tools to print ("" for ProfilerSteps).
  std::vector<Step> steps;
  StepSource stepSource = StepSource::None;
  std::string stepsNote;
  // The step each device slice was launched in (index into steps), by slice
  // index; -1 for other slices and for device work launched outside every step.
  std::vector<int32_t> stepOfSlice;
  // The span the tools take for a step: the device's when the device lags
  // the host by more than a small share of the step, and why, in words.
  StepClock stepClock = StepClock::Host;
  std::string stepClockNote;
  // A step's start and end on the trace's step clock.
  std::pair<int64_t, int64_t> stepSpan(const Step& step) const;
  // The `instance`-th step named `name` (several traces of a rank repeat no
  // name; one trace may), or nullptr.
  const Step* stepNamed(std::string_view name, int64_t instance = 0) const;

  CategoryRole role(uint32_t cat) const { return cat < categoryRole.size() ? categoryRole[cat] : CategoryRole::Other; }
  bool isDevice(const Slice& s) const { return role(s.cat) == CategoryRole::Device; }
  std::string_view str(uint32_t id) const { return strings.view(id); }
  std::string keyText(const Key& k) const;
  // The communication args of slice i, or nullptr.
  const CommArgs* commArgsOf(uint32_t slice) const;
  // The source lines of slice i, or nullptr.
  const SourceLines* sourceLinesOf(uint32_t slice) const;
  // The synchronisation args of slice i, or nullptr.
  const SyncArgs* syncArgsOf(uint32_t slice) const;

  // Innermost slice on `lane` containing t (inclusive ends) whose role is in
  // `roles` (a bit set of 1 << CategoryRole), or kNoSlice.
  int32_t innermostAt(uint32_t lane, int64_t t, uint32_t roles) const;
  // Slices on `lane` enclosing t, outermost first.
  std::vector<uint32_t> stackAt(uint32_t lane, int64_t t) const;
  // The host op a device slice belongs to: via "External id", else via its
  // runtime launch (same correlation). kNoSlice when unlinked.
  int32_t opOfDeviceSlice(const Slice& s, bool* viaCorrelation = nullptr) const;

  // From the "M" events; the first of duplicates wins.
  struct ProcessInfo {
    uint32_t name = kNoString, labels = kNoString;
    std::optional<int64_t> sortIndex;
    int32_t sortMeta = -1;  // index into meta of the process_sort_index event
  };
  struct ThreadInfo {
    uint32_t name = kNoString;
    std::optional<int64_t> sortIndex;
  };
  std::map<Key, ProcessInfo> processes;
  std::vector<ThreadInfo> threads;  // by lane
  const ProcessInfo* process(const Key& pid) const {
    auto it = processes.find(pid);
    return it == processes.end() ? nullptr : &it->second;
  }

  uint32_t laneId(const Lane& lane);
  // The lane's id, or nullopt when no event is on it.
  std::optional<uint32_t> findLane(const Lane& lane) const;
  // The numeric args of a counter sample or a metric range.
  std::span<const NumArg> argsOf(uint32_t firstArg, uint32_t argCount) const {
    return {numArgs.data() + firstArg, argCount};
  }

 private:
  struct LaneHash {
    size_t operator()(const Lane& l) const noexcept {
      uint64_t h = static_cast<uint64_t>(l.pid.value) * 0x9E3779B97F4A7C15ull;
      h ^= static_cast<uint64_t>(l.tid.value) + 0x7F4A7C15u + (h << 6) + (h >> 2);
      return static_cast<size_t>(h ^ (l.pid.isString ? 1 : 0) ^ (l.tid.isString ? 2 : 0));
    }
  };
  std::unordered_map<Lane, uint32_t, LaneHash> laneIds_;
};

inline constexpr uint32_t roleBit(CategoryRole r) { return 1u << static_cast<uint32_t>(r); }
inline constexpr uint32_t kAnyRole = 0xFFFFFFFFu;

// Fills t.steps, t.stepSource, t.stepsNote, the steps' device spans,
// t.stepOfSlice and the step clock (steps.cpp); part of loading.
void buildSteps(Trace& t);
// The steps alone (t.steps, t.stepSource, t.stepsNote).
void findSteps(Trace& t);

// Parses the document from `reader`. A JSON error is kept in
// trace.parseError (events read before it stay); I/O errors throw IoError.
std::unique_ptr<Trace> loadTrace(JsonReader& reader, const LoadOptions& options);
std::unique_ptr<Trace> loadTraceFile(const std::string& path, const LoadOptions& options);
std::unique_ptr<Trace> loadTraceBuffer(const void* data, size_t size, const LoadOptions& options);

// Sums of durations saturate instead of overflowing on hostile input.
inline int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

// Formats ns as Kineto writes µs: "123.456".
std::string formatUs(int64_t ns);
// "12.345 ms" for ns (three decimals, truncated as formatUs).
std::string formatMs(int64_t ns);

}  // namespace openreg::trace
