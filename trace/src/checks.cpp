// The structural invariants of a torch.profiler trace with device lanes.
// Each check is one row of a table (name, severity, description, function)
// so that adding one is local; see check_table().
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "analysis.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace {

// Counts every violation, keeps the first few with their message.
class Sink {
 public:
  Sink(CheckResult& r, int limit) : r_(r), limit_(static_cast<size_t>(std::max(limit, 0))) {}
  template <typename MakeMessage>
  void add(MakeMessage&& make_message, std::vector<EventRef> events) {
    ++r_.violations;
    if (r_.examples.size() < limit_) r_.examples.push_back({make_message(), std::move(events)});
  }
  void note(std::string text) { r_.note = std::move(text); }
  void skip(std::string why) {
    r_.status = CheckResult::kSkipped;
    r_.note = std::move(why);
  }

 private:
  CheckResult& r_;
  size_t limit_;
};

// Flows in the configured categories, grouped by (category, id).
std::vector<std::vector<uint32_t>> flow_groups(const Trace& t);

struct Context {
  const Trace& t;
  const CheckOptions& options;
  // Shared by the flow checks; computed on first use (one Context per run).
  mutable std::optional<std::vector<std::vector<uint32_t>>> flows;
  const std::vector<std::vector<uint32_t>>& flow_groups() const {
    if (!flows) flows = trace::flow_groups(t);
    return *flows;
  }
};

EventRef slice_ref(uint32_t i) { return {EventRef::kSlice, i}; }
EventRef flow_ref(uint32_t i) { return {EventRef::kFlow, i}; }

std::string us(int64_t ns) { return format_us(ns) + " us"; }

std::string name_of(const Trace& t, const Slice& s) {
  return s.name == kNoString ? std::string("<unnamed>") : "\"" + std::string(t.str(s.name)) + "\"";
}

// ---------------------------------------------------------------- checks

void check_json_valid(const Context& c, Sink& sink) {
  if (c.t.parse_error) {
    const ParseError& e = *c.t.parse_error;
    sink.add([&] { return "byte " + std::to_string(e.offset) + ": " + e.message; }, {});
  }
}

void check_events_well_formed(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (uint32_t i = 0; i < t.malformed.size(); ++i) {
    const Malformed& m = t.malformed[i];
    sink.add([&] { return (m.name != kNoString ? "\"" + std::string(t.str(m.name)) + "\": " : std::string()) + m.reason; },
             {{EventRef::kMalformed, i}});
  }
  // Only the first kMaxMalformedKept are kept; count the rest too.
  for (uint64_t k = t.malformed.size(); k < t.malformed_count; ++k) sink.add([] { return std::string(); }, {});
}

void check_device_args(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (uint32_t i : t.device_slices) {
    const Slice& s = t.slices[i];
    std::string missing;
    auto need = [&](const IntArg& a, const char* name, bool positive) {
      if (!a.present) missing += std::string(missing.empty() ? "" : "; ") + "no \"" + name + "\"";
      else if (!a.is_int) missing += std::string(missing.empty() ? "" : "; ") + "\"" + name + "\" is not an integer";
      else if (positive && a.value < 1)
        missing += std::string(missing.empty() ? "" : "; ") + "\"" + name + "\" is " + std::to_string(a.value) + ", not >= 1";
    };
    need(s.device, "device", false);
    need(s.stream, "stream", true);
    need(s.correlation, "correlation", false);
    if (!missing.empty())
      sink.add([&] { return std::string(t.str(s.cat)) + " " + name_of(t, s) + ": " + missing; }, {slice_ref(i)});
  }
}

void check_device_lanes_match_args(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (uint32_t i : t.device_slices) {
    const Slice& s = t.slices[i];
    const Lane& lane = t.lanes[s.lane];
    bool pid_ok = !s.device.ok() || (!lane.pid.is_string && lane.pid.value == s.device.value);
    bool tid_ok = !s.stream.ok() || (!lane.tid.is_string && lane.tid.value == s.stream.value);
    if (pid_ok && tid_ok) continue;
    sink.add(
        [&] {
          return name_of(t, s) + " is on pid " + t.key_text(lane.pid) + " tid " + t.key_text(lane.tid) +
                 " but its args say device " + (s.device.ok() ? std::to_string(s.device.value) : "?") +
                 " stream " + (s.stream.ok() ? std::to_string(s.stream.value) : "?");
        },
        {slice_ref(i)});
  }
}

void check_device_lanes_below_host(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::set<Key> host_pids, device_pids;
  std::map<Key, uint32_t> example_slice;
  for (uint32_t i = 0; i < t.slices.size(); ++i) {
    const Lane& lane = t.lanes[t.slices[i].lane];
    LaneKind kind = t.lane_kind[t.slices[i].lane];
    if (kind == LaneKind::kHost) host_pids.insert(lane.pid);
    if (kind == LaneKind::kDevice && t.is_device(t.slices[i])) device_pids.insert(lane.pid);
    example_slice.emplace(lane.pid, i);
  }
  if (device_pids.empty()) {
    sink.skip("no device events");
    return;
  }
  if (host_pids.empty()) {
    sink.skip("no host events");
    return;
  }
  // A process sorts by its process_sort_index, else by its pid.
  auto sort_key = [&](const Key& pid) -> std::optional<int64_t> {
    const Trace::ProcessInfo* p = t.process(pid);
    if (p && p->sort_index) return p->sort_index;
    if (!pid.is_string) return pid.value;
    return std::nullopt;
  };
  auto evidence = [&](const Key& pid) -> EventRef {
    const Trace::ProcessInfo* p = t.process(pid);
    if (p && p->sort_meta >= 0) return {EventRef::kMeta, static_cast<uint32_t>(p->sort_meta)};
    return slice_ref(example_slice[pid]);
  };
  Key last_host;
  int64_t max_host = INT64_MIN;
  for (const Key& pid : host_pids) {
    auto k = sort_key(pid);
    if (k && *k >= max_host) {
      max_host = *k;
      last_host = pid;
    }
  }
  for (const Key& pid : device_pids) {
    auto k = sort_key(pid);
    if (!k) {
      sink.add([&] { return "device pid \"" + t.key_text(pid) + "\" has no process_sort_index and is not a number"; },
               {evidence(pid)});
    } else if (*k <= max_host) {
      sink.add(
          [&] {
            return "device pid " + t.key_text(pid) + " sorts at " + std::to_string(*k) + ", not below host pid " +
                   t.key_text(last_host) + " at " + std::to_string(max_host);
          },
          {evidence(pid), evidence(last_host)});
    }
  }
}

void check_device_rows_named(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::set<Key> seen_pids;
  std::set<uint32_t> seen_lanes;
  for (uint32_t i : t.device_slices) {
    const Slice& s = t.slices[i];
    const Key& pid = t.lanes[s.lane].pid;
    if (seen_pids.insert(pid).second) {
      const Trace::ProcessInfo* p = t.process(pid);
      if (!p || p->name == kNoString)
        sink.add([&] { return "device pid " + t.key_text(pid) + " has no process_name"; }, {slice_ref(i)});
    }
    if (seen_lanes.insert(s.lane).second && t.threads[s.lane].name == kNoString)
      sink.add(
          [&] { return "device row pid " + t.key_text(pid) + " tid " + t.key_text(t.lanes[s.lane].tid) + " has no thread_name"; },
          {slice_ref(i)});
  }
}

std::vector<std::vector<uint32_t>> flow_groups(const Trace& t) {
  std::vector<uint32_t> idx;
  for (uint32_t i = 0; i < t.flows.size(); ++i)
    if (std::find(t.flow_categories.begin(), t.flow_categories.end(), t.flows[i].cat) != t.flow_categories.end())
      idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
    const FlowPoint& x = t.flows[a];
    const FlowPoint& y = t.flows[b];
    if (x.cat != y.cat) return x.cat < y.cat;
    return x.id < y.id;
  });
  std::vector<std::vector<uint32_t>> groups;
  for (size_t k = 0; k < idx.size(); ++k) {
    const FlowPoint& f = t.flows[idx[k]];
    if (k == 0 || !(t.flows[idx[k - 1]].id == f.id) || t.flows[idx[k - 1]].cat != f.cat) groups.emplace_back();
    groups.back().push_back(idx[k]);
  }
  return groups;
}

void split_group(const Trace& t, const std::vector<uint32_t>& g, std::vector<uint32_t>& starts,
                 std::vector<uint32_t>& finishes) {
  starts.clear();
  finishes.clear();
  for (uint32_t i : g) {
    if (t.flows[i].ph == 's') starts.push_back(i);
    if (t.flows[i].ph == 'f') finishes.push_back(i);
  }
}

void check_flow_pairs(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> starts, finishes;
  for (const auto& g : c.flow_groups()) {
    split_group(t, g, starts, finishes);
    if (starts.size() == 1 && finishes.size() == 1) continue;
    std::vector<EventRef> refs;
    for (uint32_t i : g)
      if (refs.size() < 4) refs.push_back(flow_ref(i));
    sink.add(
        [&] {
          return "flow id " + t.key_text(t.flows[g[0]].id) + ": " + std::to_string(starts.size()) + " start(s), " +
                 std::to_string(finishes.size()) + " finish(es); expected exactly one of each";
        },
        std::move(refs));
  }
}

void check_flow_forward(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> starts, finishes;
  for (const auto& g : c.flow_groups()) {
    split_group(t, g, starts, finishes);
    if (starts.empty()) continue;
    const FlowPoint& s = t.flows[starts[0]];
    for (uint32_t fi : finishes) {
      const FlowPoint& f = t.flows[fi];
      if (f.ts >= s.ts) continue;
      sink.add([&] { return "flow id " + t.key_text(s.id) + " ends " + us(s.ts - f.ts) + " before it starts"; },
               {flow_ref(starts[0]), flow_ref(fi)});
    }
  }
}

void check_flow_distinct_lanes(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> starts, finishes;
  for (const auto& g : c.flow_groups()) {
    split_group(t, g, starts, finishes);
    if (starts.empty()) continue;
    const FlowPoint& s = t.flows[starts[0]];
    for (uint32_t fi : finishes) {
      if (t.flows[fi].lane != s.lane) continue;
      const Lane& lane = t.lanes[s.lane];
      sink.add(
          [&] {
            return "flow id " + t.key_text(s.id) + " starts and ends on the same lane (pid " + t.key_text(lane.pid) +
                   ", tid " + t.key_text(lane.tid) + ")";
          },
          {flow_ref(starts[0]), flow_ref(fi)});
    }
  }
}

void check_flow_start_in_host_slice(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (const auto& g : c.flow_groups()) {
    for (uint32_t i : g) {
      const FlowPoint& f = t.flows[i];
      if (f.ph != 's') continue;
      if (t.lane_kind[f.lane] != LaneKind::kHost) {
        sink.add([&] { return "flow id " + t.key_text(f.id) + " starts on a lane that is not a host thread"; },
                 {flow_ref(i)});
        continue;
      }
      if (t.innermost_at(f.lane, f.ts, kAnyRole) == kNoSlice)
        sink.add([&] { return "flow id " + t.key_text(f.id) + " starts outside any slice of its thread"; },
                 {flow_ref(i)});
    }
  }
}

void check_flow_finish_bound(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (const auto& g : c.flow_groups()) {
    for (uint32_t i : g) {
      const FlowPoint& f = t.flows[i];
      if (f.ph != 'f') continue;
      if (f.binds_enclosing) {
        if (t.innermost_at(f.lane, f.ts, kAnyRole) == kNoSlice)
          sink.add([&] { return "flow id " + t.key_text(f.id) + " finishes (bp \"e\") outside any slice of its row"; },
                   {flow_ref(i)});
        continue;
      }
      // Without "bp":"e" viewers bind the next slice that begins on the row.
      const auto& v = t.lane_slices[f.lane];  // sorted by start: the last starts latest
      bool later = !v.empty() && t.slices[v.back()].ts >= f.ts;
      if (!later)
        sink.add([&] { return "flow id " + t.key_text(f.id) + " finishes with no slice at or after it on its row"; },
                 {flow_ref(i)});
    }
  }
}

void check_device_rows_disjoint(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> row;
  for (size_t k = 0; k < t.device_slices.size();) {
    uint32_t lane = t.slices[t.device_slices[k]].lane;
    row.clear();
    for (; k < t.device_slices.size() && t.slices[t.device_slices[k]].lane == lane; ++k) row.push_back(t.device_slices[k]);
    // Shorter first at equal starts: an instant kernel followed by a longer
    // one at the same ns is in-order execution, not overlap.
    std::sort(row.begin(), row.end(), [&](uint32_t a, uint32_t b) {
      const Slice& x = t.slices[a];
      const Slice& y = t.slices[b];
      if (x.ts != y.ts) return x.ts < y.ts;
      if (x.dur != y.dur) return x.dur < y.dur;
      return a < b;
    });
    uint32_t holder = row[0];
    for (size_t j = 1; j < row.size(); ++j) {
      const Slice& s = t.slices[row[j]];
      const Slice& h = t.slices[holder];
      if (s.ts < h.end()) {
        bool nested = s.end() <= h.end();
        sink.add(
            [&] {
              return name_of(t, s) + (nested ? " lies inside " : " overlaps ") + name_of(t, h) + " by " +
                     us(std::min(s.end(), h.end()) - s.ts) + " on the same stream";
            },
            {slice_ref(holder), slice_ref(row[j])});
      }
      if (s.end() > h.end()) holder = row[j];
    }
  }
}

// Annotations may enclose device work, but nothing on a device row may
// cross another slice's boundary (viewers drop or spill such slices).
void check_device_rows_nest(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> open;
  for (uint32_t lane = 0; lane < t.lanes.size(); ++lane) {
    if (t.lane_kind[lane] != LaneKind::kDevice) continue;
    open.clear();
    for (uint32_t i : t.lane_slices[lane]) {
      const Slice& s = t.slices[i];
      while (!open.empty() && t.slices[open.back()].end() <= s.ts) open.pop_back();
      if (!open.empty()) {
        const Slice& top = t.slices[open.back()];
        // Device-versus-device overlap belongs to device_rows_disjoint.
        if (s.end() > top.end() && !(t.is_device(s) && t.is_device(top)))
          sink.add([&] { return name_of(t, s) + " crosses the end of " + name_of(t, top) + " by " + us(s.end() - top.end()); },
                   {slice_ref(open.back()), slice_ref(i)});
      }
      open.push_back(i);
    }
  }
}

void check_host_rows_nest(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> open;
  for (uint32_t lane = 0; lane < t.lanes.size(); ++lane) {
    if (t.lane_kind[lane] != LaneKind::kHost) continue;
    open.clear();
    for (uint32_t i : t.lane_slices[lane]) {
      const Slice& s = t.slices[i];
      // torch's own Python-frame events straddle op boundaries (record_function
      // enters inside a frame); only the ops and calls themselves must nest.
      if (t.role(s.cat) == CategoryRole::kPython) continue;
      while (!open.empty() && t.slices[open.back()].end() <= s.ts) open.pop_back();
      if (!open.empty() && s.end() > t.slices[open.back()].end()) {
        const Slice& top = t.slices[open.back()];
        sink.add([&] { return name_of(t, s) + " crosses the end of " + name_of(t, top) + " by " + us(s.end() - top.end()); },
                 {slice_ref(open.back()), slice_ref(i)});
      }
      open.push_back(i);
    }
  }
}

void check_device_events_in_window(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  auto w = profiling_window(t);
  if (!w) {
    sink.skip("no profiling window: no Trace span and no host events");
    return;
  }
  sink.note("window from " + w->source + ": [" + format_us(w->start) + ", " + format_us(w->end) + "] us");
  const int64_t lo = w->start - c.options.window_slack_ns;
  const int64_t hi = w->end + c.options.window_slack_ns;
  for (uint32_t i : t.device_slices) {
    const Slice& s = t.slices[i];
    if (s.ts < lo)
      sink.add([&] { return name_of(t, s) + " starts " + us(w->start - s.ts) + " before the profiling window"; },
               {slice_ref(i)});
    else if (s.end() > hi)
      sink.add([&] { return name_of(t, s) + " ends " + us(s.end() - w->end) + " after the profiling window"; },
               {slice_ref(i)});
  }
}

void check_correlation_unique(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<std::pair<int64_t, uint32_t>> ids;
  for (uint32_t i : t.device_slices)
    if (t.slices[i].correlation.ok()) ids.emplace_back(t.slices[i].correlation.value, i);
  std::sort(ids.begin(), ids.end());
  for (size_t k = 0; k < ids.size();) {
    size_t e = k + 1;
    while (e < ids.size() && ids[e].first == ids[k].first) ++e;
    if (e - k > 1) {
      std::vector<EventRef> refs;
      for (size_t j = k; j < e && refs.size() < 4; ++j) refs.push_back(slice_ref(ids[j].second));
      size_t n = e - k;
      int64_t id = ids[k].first;
      sink.add([&] { return "correlation " + std::to_string(id) + " is shared by " + std::to_string(n) + " device events"; },
               std::move(refs));
    }
    k = e;
  }
}

void check_device_events_linked(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (uint32_t i : t.device_slices) {
    const Slice& s = t.slices[i];
    if (t.op_of_device_slice(s) != kNoSlice) continue;
    sink.add([&] { return name_of(t, s) + " is linked to no host op (neither by External id nor through its launch)"; },
             {slice_ref(i)});
  }
}

void check_device_events_launched(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  if (t.runtime_categories.empty()) {
    sink.skip("no runtime category in the trace");
    return;
  }
  for (uint32_t i : t.device_slices) {
    const Slice& s = t.slices[i];
    if (s.correlation.ok() && t.runtime_by_correlation.count(s.correlation.value)) continue;
    sink.add([&] { return name_of(t, s) + " has no host runtime call with its correlation"; }, {slice_ref(i)});
  }
}

struct CheckEntry {
  CheckInfo info;
  void (*run)(const Context&, Sink&);
  bool needs_valid_json;
};

const std::vector<CheckEntry>& entries() {
  static const std::vector<CheckEntry> kEntries = {
      {{"json_valid", Severity::kError, "the file is valid JSON (UTF-8) with a traceEvents array"}, check_json_valid, false},
      {{"events_well_formed", Severity::kError,
        "every event has a ph; complete events have numeric ts, dur >= 0, pid and tid; flows have an id"},
       check_events_well_formed, true},
      {{"device_args", Severity::kError,
        "device events (kernels, copies, memsets) carry integer device, stream >= 1 and correlation args"},
       check_device_args, true},
      {{"device_lanes_below_host", Severity::kError,
        "every device process sorts after every host process (process_sort_index, else pid)"},
       check_device_lanes_below_host, true},
      {{"flow_pairs", Severity::kError, "every flow (ac2g) id has exactly one start and one finish"}, check_flow_pairs, true},
      {{"flow_forward", Severity::kError, "no flow finishes before it starts"}, check_flow_forward, true},
      {{"flow_distinct_lanes", Severity::kError, "a flow's start and finish are on different (pid, tid) lanes"},
       check_flow_distinct_lanes, true},
      {{"flow_start_in_host_slice", Severity::kError,
        "every flow start lies inside a complete event of its host thread"},
       check_flow_start_in_host_slice, true},
      {{"device_rows_disjoint", Severity::kError,
        "device events on one stream row never overlap, partially or by nesting (a stream runs one thing at a time)"},
       check_device_rows_disjoint, true},
      {{"device_rows_nest", Severity::kError,
        "annotations on device rows nest with the device events (no partial overlap)"},
       check_device_rows_nest, true},
      {{"device_events_in_window", Severity::kError, "device events lie inside the profiling window"},
       check_device_events_in_window, true},
      {{"correlation_unique", Severity::kError, "no two device events share a correlation id"}, check_correlation_unique,
       true},
      {{"device_lanes_match_args", Severity::kWarning, "a device event's pid is its device arg and its tid its stream arg"},
       check_device_lanes_match_args, true},
      {{"device_rows_named", Severity::kWarning, "device processes have a process_name and stream rows a thread_name"},
       check_device_rows_named, true},
      {{"flow_finish_bound", Severity::kWarning, "every flow finish binds to a slice of its row"}, check_flow_finish_bound,
       true},
      {{"device_events_linked", Severity::kWarning, "every device event is linked to the host op that launched it"},
       check_device_events_linked, true},
      {{"device_events_launched", Severity::kWarning,
        "every device event has a host runtime call with the same correlation"},
       check_device_events_launched, true},
      {{"host_rows_nest", Severity::kWarning, "complete events on a host thread, Python frames aside, nest (no partial overlap)"},
       check_host_rows_nest, true},
  };
  return kEntries;
}

const char* severity_name(Severity s) { return s == Severity::kError ? "error" : "warning"; }
const char* status_name(CheckResult::Status s) {
  switch (s) {
    case CheckResult::kPass: return "pass";
    case CheckResult::kFail: return "fail";
    case CheckResult::kSkipped: return "skipped";
  }
  return "?";
}

void write_int_arg(JsonWriter& w, const char* name, const IntArg& a) {
  if (!a.present) return;
  w.key(name);
  if (a.is_int) w.value(a.value);
  else w.value("<not an integer>");
}

}  // namespace

const std::vector<CheckInfo>& check_table() {
  static const std::vector<CheckInfo> kInfos = [] {
    std::vector<CheckInfo> v;
    for (const CheckEntry& e : entries()) v.push_back(e.info);
    return v;
  }();
  return kInfos;
}

CheckReport run_checks(const Trace& t, const CheckOptions& options) {
  auto known = [](const std::string& name) {
    for (const CheckEntry& e : entries())
      if (name == e.info.name) return true;
    return false;
  };
  for (const auto* list : {&options.skip, &options.only})
    for (const std::string& n : *list)
      if (!known(n)) throw std::invalid_argument("unknown check \"" + n + "\"");

  CheckReport report;
  Context ctx{t, options, std::nullopt};
  for (const CheckEntry& e : entries()) {
    CheckResult r;
    r.name = e.info.name;
    r.severity = e.info.severity;
    bool selected = options.only.empty() ||
                    std::find(options.only.begin(), options.only.end(), r.name) != options.only.end();
    bool skipped = std::find(options.skip.begin(), options.skip.end(), r.name) != options.skip.end();
    Sink sink(r, options.examples);
    if (!selected || skipped) {
      sink.skip("not selected");
    } else if (e.needs_valid_json && t.parse_error) {
      sink.skip("the trace is not valid JSON");
    } else {
      e.run(ctx, sink);
      if (r.status != CheckResult::kSkipped) r.status = r.violations ? CheckResult::kFail : CheckResult::kPass;
    }
    if (r.status == CheckResult::kFail && (r.severity == Severity::kError || options.strict)) report.ok = false;
    report.results.push_back(std::move(r));
  }
  return report;
}

void write_event_ref(JsonWriter& w, const Trace& t, const EventRef& ref) {
  auto lane = [&](uint32_t id) {
    const Lane& l = t.lanes[id];
    w.key("pid");
    if (l.pid.is_string) w.value(t.str(static_cast<uint32_t>(l.pid.value)));
    else w.value(l.pid.value);
    w.key("tid");
    if (l.tid.is_string) w.value(t.str(static_cast<uint32_t>(l.tid.value)));
    else w.value(l.tid.value);
  };
  auto str_or_null = [&](const char* key, uint32_t id) {
    w.key(key);
    if (id == kNoString) w.null();
    else w.value(t.str(id));
  };
  w.beginObject();
  switch (ref.kind) {
    case EventRef::kSlice: {
      const Slice& s = t.slices[ref.index];
      w.field("index", s.origin.index).field("offset", s.origin.offset).field("ph", "X");
      str_or_null("cat", s.cat);
      str_or_null("name", s.name);
      lane(s.lane);
      w.field("ts", format_us(s.ts)).field("dur", format_us(s.dur));
      w.key("args").beginObject();
      write_int_arg(w, "External id", s.external_id);
      write_int_arg(w, "device", s.device);
      write_int_arg(w, "stream", s.stream);
      write_int_arg(w, "correlation", s.correlation);
      w.endObject();
      break;
    }
    case EventRef::kFlow: {
      const FlowPoint& f = t.flows[ref.index];
      w.field("index", f.origin.index).field("offset", f.origin.offset).field("ph", std::string(1, f.ph));
      w.key("id");
      if (f.id.is_string) w.value(t.str(static_cast<uint32_t>(f.id.value)));
      else w.value(f.id.value);
      str_or_null("cat", f.cat);
      str_or_null("name", f.name);
      lane(f.lane);
      w.field("ts", format_us(f.ts));
      if (f.binds_enclosing) w.field("bp", "e");
      break;
    }
    case EventRef::kMemory: {
      const MemoryPoint& m = t.memory[ref.index];
      w.field("index", m.origin.index).field("offset", m.origin.offset).field("ph", "i").field("name", "[memory]");
      lane(m.lane);
      w.field("ts", format_us(m.ts));
      w.key("args").beginObject();
      write_int_arg(w, "Device Type", m.device_type);
      write_int_arg(w, "Device Id", m.device_id);
      write_int_arg(w, "Total Allocated", m.total_allocated);
      write_int_arg(w, "Bytes", m.bytes);
      w.endObject();
      break;
    }
    case EventRef::kMeta: {
      const MetaEvent& m = t.meta[ref.index];
      w.field("index", m.origin.index).field("offset", m.origin.offset).field("ph", "M");
      str_or_null("name", m.name);
      lane(m.lane);
      w.key("args").beginObject();
      write_int_arg(w, "sort_index", m.sort_index);
      if (m.str_arg != kNoString) w.field("name", t.str(m.str_arg));
      w.endObject();
      break;
    }
    case EventRef::kMalformed: {
      const Malformed& m = t.malformed[ref.index];
      w.field("index", m.origin.index).field("offset", m.origin.offset).field("problem", m.reason);
      if (m.name != kNoString) w.field("name", t.str(m.name));
      break;
    }
  }
  w.endObject();
}

std::string check_report_to_json(const Trace& t, const CheckReport& r) {
  JsonWriter w;
  w.beginObject();
  w.field("ok", r.ok);
  write_trace_info(w, t);
  w.key("checks").beginArray();
  const auto& table = check_table();
  for (size_t k = 0; k < r.results.size(); ++k) {
    const CheckResult& c = r.results[k];
    w.beginObject();
    w.field("name", c.name);
    w.field("severity", severity_name(c.severity));
    w.field("description", table[k].description);
    w.field("status", status_name(c.status));
    w.field("violations", c.violations);
    if (!c.note.empty()) w.field("note", c.note);
    w.key("examples").beginArray();
    for (const Violation& v : c.examples) {
      w.beginObject();
      w.field("message", v.message);
      w.key("events").beginArray();
      for (const EventRef& e : v.events) write_event_ref(w, t, e);
      w.endArray();
      w.endObject();
    }
    w.endArray();
    w.endObject();
  }
  w.endArray();
  w.endObject();
  return w.take();
}

std::string check_table_to_json() {
  JsonWriter w;
  w.beginArray();
  for (const CheckInfo& c : check_table())
    w.beginObject().field("name", c.name).field("severity", severity_name(c.severity)).field("description", c.description).endObject();
  w.endArray();
  return w.take();
}

}  // namespace openreg::trace
