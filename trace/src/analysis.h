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
std::optional<Window> profiling_window(const Trace& t);

// ---------------------------------------------------------------- summary

struct SummaryOptions {
  int top = 10;
  int gaps = 5;
};

struct KernelStat {
  uint32_t name = kNoString, cat = kNoString;
  uint64_t count = 0;
  int64_t total_ns = 0, min_ns = 0, max_ns = 0;
};

struct OpDeviceStat {
  uint32_t name = kNoString;  // kNoString: device work linked to no op
  int64_t device_ns = 0;
  uint64_t device_events = 0;
  uint64_t op_instances = 0;
};

struct LinkStat {
  uint64_t device_events = 0, linked = 0, via_external_id = 0, via_correlation = 0;
  struct PerCategory {
    uint32_t cat = kNoString;
    uint64_t events = 0, linked = 0;
  };
  std::vector<PerCategory> by_category;
};

struct StreamStat {
  uint32_t lane = 0;
  uint64_t events = 0;
  int64_t busy_ns = 0, first_ns = 0, last_ns = 0;
};

struct DeviceStat {
  Key device;
  uint64_t streams = 0, events = 0;
  int64_t busy_ns = 0, first_ns = 0, last_ns = 0;
};

struct HostActivity {
  int32_t lane = -1;              // the host thread described, -1 if none was active
  std::vector<uint32_t> stack;    // slices enclosing the gap's midpoint, outermost first
  std::string text;               // the stack condensed: "python: f → aten::item → orStreamSynchronize"
  struct Overlap {
    uint32_t name = kNoString, cat = kNoString;
    uint64_t count = 0;
    int64_t overlap_ns = 0;
  };
  std::vector<Overlap> overlapping;  // host calls inside the gap, most time first
};

struct IdleGap {
  Key device;
  int64_t start_ns = 0, end_ns = 0;
  HostActivity host;
};

struct MemoryStat {
  int64_t device_type = 0, device_id = 0;
  uint64_t events = 0, allocations = 0, frees = 0;
  int64_t peak_bytes = 0, peak_ts = 0, final_bytes = 0;
  int32_t peak_event = -1;         // index into Trace::memory
  int32_t op = kNoSlice;           // innermost host op enclosing the peak
  std::vector<uint32_t> op_stack;  // host ops enclosing the peak, outermost first
};

struct Summary {
  std::optional<Window> window;
  int64_t device_total_ns = 0;
  std::vector<KernelStat> kernels;     // by total time, descending (all)
  std::vector<OpDeviceStat> ops;       // by device time, descending (all)
  LinkStat links;
  std::vector<StreamStat> streams;     // by device, stream
  std::vector<DeviceStat> devices;
  std::vector<IdleGap> gaps;           // largest first, at most options.gaps
  std::vector<MemoryStat> memory;      // device memory (type != CPU)
  std::vector<MemoryStat> host_memory; // CPU memory, for reference
};

Summary compute_summary(const Trace& t, const SummaryOptions& options);
std::string summary_to_json(const Trace& t, const Summary& s, const SummaryOptions& options);
// Condenses a host stack for display (see HostActivity::text).
std::string describe_host_stack(const Trace& t, const std::vector<uint32_t>& stack);
const char* device_type_name(int64_t type);

// ---------------------------------------------------------------- checks

enum class Severity { kError, kWarning };

struct CheckOptions {
  int examples = 5;
  std::vector<std::string> skip, only;
  int64_t window_slack_ns = 0;
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
const std::vector<CheckInfo>& check_table();

// Throws std::invalid_argument for an unknown name in skip/only.
CheckReport run_checks(const Trace& t, const CheckOptions& options);
std::string check_report_to_json(const Trace& t, const CheckReport& r);
std::string check_table_to_json();

// ---------------------------------------------------------------- timeline

struct TimelineOptions {
  int width = 2000;
};
std::string timeline_json(const Trace& t, const TimelineOptions& options);

// Shared by the renderers.
void write_event_ref(JsonWriter& w, const Trace& t, const EventRef& ref);
void write_trace_info(JsonWriter& w, const Trace& t);

}  // namespace openreg::trace
