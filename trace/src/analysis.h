// The three analyses over a loaded Trace. Each computes a plain struct
// (what the unit tests inspect) and renders it as JSON (what the C ABI
// returns).
#pragma once

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
};

struct KernelStat {
  uint32_t name = kNoString, cat = kNoString;
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
};

struct HostActivity {
  int32_t lane = -1;              // the host thread described, -1 if none was active
  std::vector<uint32_t> stack;    // slices enclosing the gap's midpoint, outermost first
  std::string text;               // the stack condensed: "python: f → aten::item → orStreamSynchronize"
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
  int32_t op = kNoSlice;           // innermost host op enclosing the peak
  std::vector<uint32_t> opStack;  // host ops enclosing the peak, outermost first
};

struct Summary {
  std::optional<Window> window;
  int64_t deviceTotalNs = 0;
  std::vector<KernelStat> kernels;     // by total time, descending (all)
  std::vector<OpDeviceStat> ops;       // by device time, descending (all)
  LinkStat links;
  std::vector<StreamStat> streams;     // by device, stream
  std::vector<DeviceStat> devices;
  std::vector<IdleGap> gaps;           // largest first, at most options.gaps
  std::vector<MemoryStat> memory;      // device memory (type != CPU)
  std::vector<MemoryStat> hostMemory; // CPU memory, for reference
};

Summary computeSummary(const Trace& t, const SummaryOptions& options);
std::string summaryToJson(const Trace& t, const Summary& s, const SummaryOptions& options);
// Condenses a host stack for display (see HostActivity::text).
std::string describeHostStack(const Trace& t, const std::vector<uint32_t>& stack);
const char* deviceTypeName(int64_t type);

// ---------------------------------------------------------------- checks

enum class Severity { kError, kWarning };

struct CheckOptions {
  int examples = 5;
  std::vector<std::string> skip, only;
  int64_t windowSlackNs = 0;
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
};

struct CheckResult {
  std::string name;
  Severity severity = Severity::kError;
  enum Status { kPass, kFail, kSkipped } status = kPass;
  uint64_t violations = 0;
  std::vector<Violation> examples;
  std::string note;  // e.g. why it was skipped, or what was assumed
};

struct CheckReport {
  bool ok = true;
  std::vector<CheckResult> results;
};

struct CheckInfo {
  const char* name;
  Severity severity;
  const char* description;
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

// Shared by the renderers.
void writeEventRef(JsonWriter& w, const Trace& t, const EventRef& ref);
void writeTraceInfo(JsonWriter& w, const Trace& t);

}  // namespace openreg::trace
