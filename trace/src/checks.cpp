// The structural invariants of a torch.profiler trace with device lanes.
// Each check is one row of a table (name, severity, description, function)
// so that adding one is local; see checkTable().
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "analysis.h"
#include "checks_internal.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace checks {

// ---------------------------------------------------------------- checks

void checkJsonValid(const Context& c, Sink& sink) {
  if (c.t.parseError) {
    const ParseError& e = *c.t.parseError;
    sink.add([&] { return "byte " + std::to_string(e.offset) + ": " + e.message; }, {});
  }
}

void checkEventsWellFormed(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (uint32_t i = 0; i < t.malformed.size(); ++i) {
    const Malformed& m = t.malformed[i];
    sink.add(
        [&] { return (m.name != kNoString ? "\"" + std::string(t.str(m.name)) + "\": " : std::string()) + m.reason; },
        {{EventRef::kMalformed, i}});
  }
  // Only the first kMaxMalformedKept are kept; count the rest too.
  for (uint64_t k = t.malformed.size(); k < t.malformedCount; ++k) sink.add([] { return std::string(); }, {});
}

// The categories every consumer knows as device work; vendor categories
// (inferred ones, MTIA's mtia_ccp_events) also carry sync and DMA records
// that HTA may rightly treat as host-side.
bool standardDeviceCategory(const Trace& t, uint32_t cat) {
  std::string_view c = t.str(cat);
  return c == "kernel" || c == "gpu_memcpy" || c == "gpu_memset";
}

void checkDeviceArgs(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    std::string missing;
    bool breaks = false;
    auto need = [&](const IntArg& a, const char* name, bool positive, bool required) {
      std::string problem;
      if (!a.present)
        problem = std::string("no \"") + name + "\"";
      else if (!a.isInt)
        problem = std::string("\"") + name + "\" is not an integer";
      else if (positive && a.value < 1)
        problem = std::string("\"") + name + "\" is " + std::to_string(a.value) + ", not >= 1";
      else
        return;
      // stream 0 is still a device event to HTA (stream >= 0): it only loses
      // iterations and the call graph (those need stream > 0).
      if (required && (!a.present || !a.isInt)) breaks = true;
      missing += (missing.empty() ? "" : "; ") + problem;
    };
    need(s.device, "device", false, false);
    need(s.stream, "stream", true, true);
    need(s.correlation, "correlation", false, standardDeviceCategory(t, s.cat));
    if (!missing.empty())
      sink.add([&] { return std::string(t.str(s.cat)) + " " + nameOf(t, s) + ": " + missing; }, {sliceRef(i)}, !breaks);
  }
}

void checkDeviceLanesMatchArgs(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    const Lane& lane = t.lanes[s.lane];
    bool pidOk = !s.device.ok() || (!lane.pid.isString && lane.pid.value == s.device.value);
    bool tidOk = !s.stream.ok() || (!lane.tid.isString && lane.tid.value == s.stream.value);
    if (pidOk && tidOk) continue;
    sink.add(
        [&] {
          return nameOf(t, s) + " is on pid " + t.keyText(lane.pid) + " tid " + t.keyText(lane.tid) +
                 " but its args say device " + (s.device.ok() ? std::to_string(s.device.value) : "?") + " stream " +
                 (s.stream.ok() ? std::to_string(s.stream.value) : "?");
        },
        {sliceRef(i)});
  }
}

void checkDeviceLanesBelowHost(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::set<Key> hostPids, devicePids;
  std::map<Key, uint32_t> exampleSlice;
  for (uint32_t i = 0; i < t.slices.size(); ++i) {
    const Lane& lane = t.lanes[t.slices[i].lane];
    LaneKind kind = t.laneKind[t.slices[i].lane];
    if (kind == LaneKind::Host) hostPids.insert(lane.pid);
    if (kind == LaneKind::Device && t.isDevice(t.slices[i])) devicePids.insert(lane.pid);
    exampleSlice.emplace(lane.pid, i);
  }
  if (devicePids.empty()) {
    sink.skip("no device events");
    return;
  }
  if (hostPids.empty()) {
    sink.skip("no host events");
    return;
  }
  // A process sorts by its process_sort_index, else by its pid.
  auto sortKey = [&](const Key& pid) -> std::optional<int64_t> {
    const Trace::ProcessInfo* p = t.process(pid);
    if (p && p->sortIndex) return p->sortIndex;
    if (!pid.isString) return pid.value;
    return std::nullopt;
  };
  auto evidence = [&](const Key& pid) -> EventRef {
    const Trace::ProcessInfo* p = t.process(pid);
    if (p && p->sortMeta >= 0) return {EventRef::kMeta, static_cast<uint32_t>(p->sortMeta)};
    return sliceRef(exampleSlice[pid]);
  };
  Key lastHost;
  int64_t maxHost = INT64_MIN;
  for (const Key& pid : hostPids) {
    auto k = sortKey(pid);
    if (k && *k >= maxHost) {
      maxHost = *k;
      lastHost = pid;
    }
  }
  for (const Key& pid : devicePids) {
    auto k = sortKey(pid);
    if (!k) {
      sink.add([&] { return "device pid \"" + t.keyText(pid) + "\" has no process_sort_index and is not a number"; },
               {evidence(pid)});
    } else if (*k <= maxHost) {
      sink.add(
          [&] {
            return "device pid " + t.keyText(pid) + " sorts at " + std::to_string(*k) + ", not below host pid " +
                   t.keyText(lastHost) + " at " + std::to_string(maxHost);
          },
          {evidence(pid), evidence(lastHost)});
    }
  }
}

void checkDeviceRowsNamed(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::set<Key> seenPids;
  std::set<uint32_t> seenLanes;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    const Key& pid = t.lanes[s.lane].pid;
    if (seenPids.insert(pid).second) {
      const Trace::ProcessInfo* p = t.process(pid);
      if (!p || p->name == kNoString)
        sink.add([&] { return "device pid " + t.keyText(pid) + " has no process_name"; }, {sliceRef(i)});
    }
    if (seenLanes.insert(s.lane).second && t.threads[s.lane].name == kNoString)
      sink.add(
          [&] {
            return "device row pid " + t.keyText(pid) + " tid " + t.keyText(t.lanes[s.lane].tid) +
                   " has no thread_name";
          },
          {sliceRef(i)});
  }
}

std::vector<std::vector<uint32_t>> flowGroups(const Trace& t) {
  std::vector<uint32_t> idx;
  for (uint32_t i = 0; i < t.flows.size(); ++i)
    if (std::find(t.flowCategories.begin(), t.flowCategories.end(), t.flows[i].cat) != t.flowCategories.end())
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

void splitGroup(const Trace& t, const std::vector<uint32_t>& g, std::vector<uint32_t>& starts,
                std::vector<uint32_t>& finishes) {
  starts.clear();
  finishes.clear();
  for (uint32_t i : g) {
    if (t.flows[i].ph == 's') starts.push_back(i);
    if (t.flows[i].ph == 'f') finishes.push_back(i);
  }
}

void checkFlowPairs(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> starts, finishes;
  for (const auto& g : c.flowGroups()) {
    splitGroup(t, g, starts, finishes);
    if (starts.size() == 1 && finishes.size() == 1) continue;
    std::vector<EventRef> refs;
    for (uint32_t i : g)
      if (refs.size() < 4) refs.push_back(flowRef(i));
    // A second start makes viewers draw the arrow from the wrong slice
    // (Perfetto: flow_duplicate_id); a missing half or extra finishes only
    // lose arrows, as Kineto's own traces do.
    sink.add(
        [&] {
          return "flow id " + t.keyText(t.flows[g[0]].id) + ": " + std::to_string(starts.size()) + " start(s), " +
                 std::to_string(finishes.size()) + " finish(es); expected exactly one of each";
        },
        std::move(refs), starts.size() <= 1);
  }
}

void checkFlowForward(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> starts, finishes;
  for (const auto& g : c.flowGroups()) {
    splitGroup(t, g, starts, finishes);
    if (starts.empty()) continue;
    const FlowPoint& s = t.flows[starts[0]];
    for (uint32_t fi : finishes) {
      const FlowPoint& f = t.flows[fi];
      if (f.ts >= s.ts) continue;
      sink.add([&] { return "flow id " + t.keyText(s.id) + " ends " + us(s.ts - f.ts) + " before it starts"; },
               {flowRef(starts[0]), flowRef(fi)});
    }
  }
}

void checkFlowDistinctLanes(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> starts, finishes;
  for (const auto& g : c.flowGroups()) {
    splitGroup(t, g, starts, finishes);
    if (starts.empty()) continue;
    const FlowPoint& s = t.flows[starts[0]];
    for (uint32_t fi : finishes) {
      if (t.flows[fi].lane != s.lane) continue;
      const Lane& lane = t.lanes[s.lane];
      sink.add(
          [&] {
            return "flow id " + t.keyText(s.id) + " starts and ends on the same lane (pid " + t.keyText(lane.pid) +
                   ", tid " + t.keyText(lane.tid) + ")";
          },
          {flowRef(starts[0]), flowRef(fi)});
    }
  }
}

void checkFlowStartInHostSlice(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (const auto& g : c.flowGroups()) {
    for (uint32_t i : g) {
      const FlowPoint& f = t.flows[i];
      if (f.ph != 's') continue;
      if (t.laneKind[f.lane] != LaneKind::Host) {
        sink.add([&] { return "flow id " + t.keyText(f.id) + " starts on a lane that is not a host thread"; },
                 {flowRef(i)});
        continue;
      }
      if (t.innermostAt(f.lane, f.ts, kAnyRole) == kNoSlice)
        sink.add([&] { return "flow id " + t.keyText(f.id) + " starts outside any slice of its thread"; },
                 {flowRef(i)});
    }
  }
}

void checkFlowFinishBound(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (const auto& g : c.flowGroups()) {
    for (uint32_t i : g) {
      const FlowPoint& f = t.flows[i];
      if (f.ph != 'f') continue;
      if (f.bindsEnclosing) {
        if (t.innermostAt(f.lane, f.ts, kAnyRole) == kNoSlice)
          sink.add([&] { return "flow id " + t.keyText(f.id) + " finishes (bp \"e\") outside any slice of its row"; },
                   {flowRef(i)});
        continue;
      }
      // Without "bp":"e" viewers bind the next slice that begins on the row.
      const auto& v = t.laneSlices[f.lane];  // sorted by start: the last starts latest
      bool later = !v.empty() && t.slices[v.back()].ts >= f.ts;
      if (!later)
        sink.add([&] { return "flow id " + t.keyText(f.id) + " finishes with no slice at or after it on its row"; },
                 {flowRef(i)});
    }
  }
}

void checkDeviceRowsDisjoint(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> row;
  for (size_t k = 0; k < t.deviceSlices.size();) {
    uint32_t lane = t.slices[t.deviceSlices[k]].lane;
    row.clear();
    for (; k < t.deviceSlices.size() && t.slices[t.deviceSlices[k]].lane == lane; ++k) row.push_back(t.deviceSlices[k]);
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
              return nameOf(t, s) + (nested ? " lies inside " : " overlaps ") + nameOf(t, h) + " by " +
                     us(std::min(s.end(), h.end()) - s.ts) + " on the same stream";
            },
            {sliceRef(holder), sliceRef(row[j])});
      }
      if (s.end() > h.end()) holder = row[j];
    }
  }
}

// Walks every row of `kind` keeping the slices still open, and reports each
// slice that starts inside the innermost open one and ends after it. Only the
// slices `takesPart` accepts are walked; `reported` picks the crossings that
// belong to the calling check, `artifact` those that only warn.
template <class TakesPart, class Reported, class Artifact>
void reportCrossings(const Trace& t, LaneKind kind, Sink& sink, TakesPart takesPart, Reported reported,
                     Artifact artifact) {
  std::vector<uint32_t> open;
  for (uint32_t lane = 0; lane < t.lanes.size(); ++lane) {
    if (t.laneKind[lane] != kind) continue;
    open.clear();
    for (uint32_t i : t.laneSlices[lane]) {
      const Slice& s = t.slices[i];
      if (!takesPart(s)) continue;
      while (!open.empty() && t.slices[open.back()].end() <= s.ts) open.pop_back();
      if (!open.empty()) {
        const Slice& top = t.slices[open.back()];
        if (s.end() > top.end() && reported(s, top)) {
          sink.add(
              [&] { return nameOf(t, s) + " crosses the end of " + nameOf(t, top) + " by " + us(s.end() - top.end()); },
              {sliceRef(open.back()), sliceRef(i)}, artifact(s, top));
        }
      }
      open.push_back(i);
    }
  }
}

// Annotations may enclose device work, but nothing on a device row may
// cross another slice's boundary (viewers drop or spill such slices).
void checkDeviceRowsNest(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  // Device-versus-device overlap belongs to device_rows_disjoint. A sync row
  // is the host's wait drawn on the stream it waits for (Kineto's "Stream
  // Sync" at tid = stream): starting while that stream's work runs and ending
  // after it is its normal shape, and Perfetto moves the sync, not the work.
  reportCrossings(
      t, LaneKind::Device, sink, [](const Slice&) { return true; },
      [&](const Slice& s, const Slice& top) { return !(t.isDevice(s) && t.isDevice(top)); },
      [&](const Slice& s, const Slice& top) { return isSyncRow(t, s) && t.isDevice(top); });
}

void checkHostRowsNest(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  // torch's own Python-frame events straddle op boundaries (record_function
  // enters inside a frame); only the ops and calls themselves must nest.
  reportCrossings(
      t, LaneKind::Host, sink, [&](const Slice& s) { return t.role(s.cat) != CategoryRole::Python; },
      [](const Slice&, const Slice&) { return true; }, [](const Slice&, const Slice&) { return false; });
}

void checkDeviceEventsInWindow(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  auto w = profilingWindow(t);
  if (!w) {
    sink.skip("no profiling window: no Trace span and no host events");
    return;
  }
  sink.note("window from " + w->source + ": [" + formatUs(w->start) + ", " + formatUs(w->end) + "] us");
  const int64_t lo = w->start - c.options.windowSlackNs;
  const int64_t hi = w->end + c.options.windowSlackNs;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    if (s.ts < lo)
      sink.add([&] { return nameOf(t, s) + " starts " + us(w->start - s.ts) + " before the profiling window"; },
               {sliceRef(i)});
    else if (s.end() > hi)
      sink.add([&] { return nameOf(t, s) + " ends " + us(s.end() - w->end) + " after the profiling window"; },
               {sliceRef(i)});
  }
}

void checkCorrelationUnique(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<std::pair<int64_t, uint32_t>> ids;
  for (uint32_t i : t.deviceSlices)
    if (t.slices[i].correlation.ok()) ids.emplace_back(t.slices[i].correlation.value, i);
  std::sort(ids.begin(), ids.end());
  for (size_t k = 0; k < ids.size();) {
    size_t e = k + 1;
    while (e < ids.size() && ids[e].first == ids[k].first) ++e;
    if (e - k > 1) {
      std::vector<EventRef> refs;
      for (size_t j = k; j < e && refs.size() < 4; ++j) refs.push_back(sliceRef(ids[j].second));
      size_t n = e - k;
      int64_t id = ids[k].first;
      // One launch split into several records of the same work (MTIA's DMA
      // requests) pairs correctly; different work under one id does not.
      const Slice& first = t.slices[ids[k].second];
      bool sameWork = true;
      for (size_t j = k + 1; j < e; ++j) {
        const Slice& o = t.slices[ids[j].second];
        sameWork = sameWork && o.name == first.name && o.externalId.present == first.externalId.present &&
                   o.externalId.value == first.externalId.value;
      }
      sink.add(
          [&] {
            return "correlation " + std::to_string(id) + " is shared by " + std::to_string(n) + " device events" +
                   (sameWork ? " of the same work" : " of different work");
          },
          std::move(refs), sameWork);
    }
    k = e;
  }
}

void checkDeviceEventsLinked(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    if (t.opOfDeviceSlice(s) != kNoSlice) continue;
    sink.add([&] { return nameOf(t, s) + " is linked to no host op (neither by External id nor through its launch)"; },
             {sliceRef(i)});
  }
}

void checkDeviceEventsLaunched(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  if (t.runtimeCategories.empty()) {
    sink.skip("no runtime category in the trace");
    return;
  }
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    if (s.correlation.ok() && t.runtimeByCorrelation.count(s.correlation.value)) continue;
    sink.add([&] { return nameOf(t, s) + " has no host runtime call with its correlation"; }, {sliceRef(i)});
  }
}

constexpr const char* kViewers = "Perfetto, chrome://tracing";

std::vector<CheckEntry> generalEntries() {
  return {
      {{"json_valid", Severity::Error, "the file is valid JSON (UTF-8) with a traceEvents array",
        "every consumer (Perfetto, chrome://tracing, HTA, torch-tb-profiler)",
        "the file does not open, or opens cut short at the error", ""},
       checkJsonValid,
       false},
      {{"events_well_formed", Severity::Error,
        "every event has a ph; complete events have numeric ts, dur >= 0, pid and tid; flows have an id",
        "Perfetto's and chrome://tracing's JSON import; HTA's loader",
        "Perfetto drops the event (json_parser_failure); HTA drops events without dur; flows without id are lost", ""},
       checkEventsWellFormed,
       true},
      {{"device_args", Severity::Error,
        "device events (kernels, copies, memsets) carry integer device, stream >= 1 and correlation args",
        "HolisticTraceAnalysis (a GPU event is one with integer stream >= 0 and correlation >= 0)",
        "without an integer stream, or a kernel/copy/memset without a correlation, HTA counts the event as host "
        "work: it is missing from the kernel, temporal and idle breakdowns",
        "stream 0 (HIP's default stream: HTA keeps it but gives it no iteration or call graph), a missing device "
        "(only torch-tb-profiler reads it), and vendor records without a correlation (MTIA's event_wait/record)"},
       checkDeviceArgs,
       true},
      {{"device_lanes_below_host", Severity::Warning,
        "every device process sorts after every host process (process_sort_index, else pid)", kViewers,
        "device rows are drawn above the host threads instead of below them, as Kineto lays out CUDA traces "
        "(layout only: nothing is lost)",
        ""},
       checkDeviceLanesBelowHost,
       true},
      {{"flow_pairs", Severity::Error, "every flow (ac2g) id has exactly one start and one finish", kViewers,
        "a flow id with two starts draws its arrow from the wrong slice (Perfetto counts flow_duplicate_id; "
        "chrome://tracing keys flows by id alone)",
        "a start without finish, a finish without start, or several finishes: Kineto writes such halves itself "
        "for runtime calls with no device work and for split DMA; viewers simply draw no arrow"},
       checkFlowPairs,
       true},
      {{"flow_forward", Severity::Error, "no flow finishes before it starts", kViewers,
        "the launch arrow points back in time: the device work appears to cause its own launch", ""},
       checkFlowForward,
       true},
      {{"flow_distinct_lanes", Severity::Error, "a flow's start and finish are on different (pid, tid) lanes", kViewers,
        "the host-to-device arrow loops on one row and links no device work", ""},
       checkFlowDistinctLanes,
       true},
      {{"flow_start_in_host_slice", Severity::Error, "every flow start lies inside a complete event of its host thread",
        kViewers,
        "chrome://tracing reports 'does not start at an actual slice' and drops the arrow; Perfetto counts "
        "flow_no_enclosing_slice",
        ""},
       checkFlowStartInHostSlice,
       true},
      {{"device_rows_disjoint", Severity::Error,
        "device events on one stream row never overlap, partially or by nesting (a stream runs one thing at a time)",
        "Perfetto (slices must nest per pid/tid); HTA's stream utilisation",
        "Perfetto moves a partly overlapping slice to an overflow track (slice_spill_overlapping_complete_event; "
        "older versions lost it); HTA counts the overlapped time twice in the kernel breakdown",
        ""},
       checkDeviceRowsDisjoint,
       true},
      {{"device_rows_nest", Severity::Error,
        "annotations on device rows nest with the device events (no partial overlap)", "Perfetto, HTA",
        "a sync span or annotation partly overlapping a kernel or copy on the same row spills to an overflow "
        "track in Perfetto (lost before 2026-06), so the row no longer shows what ran",
        "a sync row (cuda_sync) that starts while device work runs on its row and ends after it: Kineto draws the "
        "host's wait on the stream it waits for (Stream Sync at tid = stream); Perfetto moves the sync span, not the "
        "work"},
       checkDeviceRowsNest,
       true},
      {{"device_events_in_window", Severity::Warning, "device events lie inside the profiling window",
        "the profiler plugin's clock mapping (openreg's own contract; no viewer breaks)",
        "nothing is lost in a viewer; Kineto drops device records outside the window, so one outside means its "
        "device timestamps were mapped to the host clock wrongly",
        ""},
       checkDeviceEventsInWindow,
       true},
      {{"correlation_unique", Severity::Error, "no two device events share a correlation id",
        "HTA (pairs device work with its launch by correlation); torch's linked attribution",
        "two different kernels under one correlation are both paired with one launch: HTA's launch delays and "
        "the op that launched them are wrong for one of them",
        "several records of the same work under one id (MTIA splits one DMA into requests): each pairs with its "
        "own launch correctly"},
       checkCorrelationUnique,
       true},
      {{"device_lanes_match_args", Severity::Warning,
        "a device event's pid is its device arg and its tid its stream arg",
        "torch-tb-profiler (warns when pid != args.device)", "a warning there; HTA reads the args, viewers the lanes",
        ""},
       checkDeviceLanesMatchArgs,
       true},
      {{"device_rows_named", Severity::Warning, "device processes have a process_name and stream rows a thread_name",
        kViewers, "rows are labelled with bare numbers", ""},
       checkDeviceRowsNamed,
       true},
      {{"flow_finish_bound", Severity::Warning, "every flow finish binds to a slice of its row", kViewers,
        "the arrow ends nowhere and is not drawn", ""},
       checkFlowFinishBound,
       true},
      {{"device_events_linked", Severity::Warning, "every device event is linked to the host op that launched it",
        "torch's key_averages() and events() (linked attribution); HTA's op-to-kernel views",
        "the event's time is attributed to no op (no 'Self DEVICE' time)", ""},
       checkDeviceEventsLinked,
       true},
      {{"device_events_launched", Severity::Warning,
        "every device event has a host runtime call with the same correlation",
        "HTA's launch statistics and idle-time breakdown",
        "no launch delay and no host-wait attribution for that event", ""},
       checkDeviceEventsLaunched,
       true},
      {{"host_rows_nest", Severity::Error,
        "complete events on a host thread, Python frames aside, nest (no partial overlap)",
        "Perfetto (slices must nest per pid/tid); HTA's call stacks",
        "a partly overlapping op or runtime call spills to an overflow track in Perfetto and breaks HTA's "
        "call-stack parent links",
        ""},
       checkHostRowsNest,
       true},
  };
}

const std::vector<CheckEntry>& entries() {
  static const std::vector<CheckEntry> kEntries = [] {
    std::vector<CheckEntry> all = generalEntries();
    for (const CheckEntry& e : syncEntries()) all.push_back(e);
    return all;
  }();
  return kEntries;
}

const char* severityName(Severity s) { return s == Severity::Error ? "error" : "warning"; }
const char* statusName(CheckResult::Status s) {
  switch (s) {
    case CheckResult::kPass:
      return "pass";
    case CheckResult::kFail:
      return "fail";
    case CheckResult::kWarn:
      return "warn";
    case CheckResult::kSkipped:
      return "skipped";
  }
  return "?";
}

void writeIntArg(JsonWriter& w, const char* name, const IntArg& a) {
  if (!a.present) return;
  w.key(name);
  if (a.isInt)
    w.value(a.value);
  else
    w.value("<not an integer>");
}

}  // namespace checks

using namespace checks;

const std::vector<CheckInfo>& checkTable() {
  static const std::vector<CheckInfo> kInfos = [] {
    std::vector<CheckInfo> v;
    for (const CheckEntry& e : entries()) v.push_back(e.info);
    return v;
  }();
  return kInfos;
}

CheckReport runChecks(const Trace& t, const CheckOptions& options) {
  auto known = [](const std::string& name) {
    for (const CheckEntry& e : entries())
      if (name == e.info.name) return true;
    return false;
  };
  for (const auto* list : {&options.skip, &options.only})
    for (const std::string& n : *list)
      if (!known(n)) throw std::invalid_argument("unknown check \"" + n + "\"");

  CheckReport report;
  report.strict = options.strict;
  Context ctx{t, options, std::nullopt};
  for (const CheckEntry& e : entries()) {
    CheckResult r;
    r.name = e.info.name;
    r.severity = e.info.severity;
    bool selected =
        options.only.empty() || std::find(options.only.begin(), options.only.end(), r.name) != options.only.end();
    bool skipped = std::find(options.skip.begin(), options.skip.end(), r.name) != options.skip.end();
    Sink sink(r, options.examples, options.strict);
    if (!selected || skipped) {
      sink.skip("not selected");
    } else if (e.needsValidJson && t.parseError) {
      sink.skip("the trace is not valid JSON");
    } else {
      e.run(ctx, sink);
      if (r.status != CheckResult::kSkipped)
        r.status = r.violations ? CheckResult::kFail : r.warnings ? CheckResult::kWarn : CheckResult::kPass;
    }
    if (r.status == CheckResult::kFail) report.ok = false;
    report.results.push_back(std::move(r));
  }
  return report;
}

void writeEventRef(JsonWriter& w, const Trace& t, const EventRef& ref) {
  auto lane = [&](uint32_t id) {
    const Lane& l = t.lanes[id];
    w.key("pid");
    if (l.pid.isString)
      w.value(t.str(static_cast<uint32_t>(l.pid.value)));
    else
      w.value(l.pid.value);
    w.key("tid");
    if (l.tid.isString)
      w.value(t.str(static_cast<uint32_t>(l.tid.value)));
    else
      w.value(l.tid.value);
  };
  auto strOrNull = [&](const char* key, uint32_t id) {
    w.key(key);
    if (id == kNoString)
      w.null();
    else
      w.value(t.str(id));
  };
  w.beginObject();
  switch (ref.kind) {
    case EventRef::kSlice: {
      const Slice& s = t.slices[ref.index];
      w.field("index", s.origin.index).field("offset", s.origin.offset).field("ph", "X");
      strOrNull("cat", s.cat);
      strOrNull("name", s.name);
      lane(s.lane);
      w.field("ts", formatUs(s.ts)).field("dur", formatUs(s.dur));
      w.key("args").beginObject();
      writeIntArg(w, "External id", s.externalId);
      writeIntArg(w, "device", s.device);
      writeIntArg(w, "stream", s.stream);
      writeIntArg(w, "correlation", s.correlation);
      w.endObject();
      break;
    }
    case EventRef::kFlow: {
      const FlowPoint& f = t.flows[ref.index];
      w.field("index", f.origin.index).field("offset", f.origin.offset).field("ph", std::string(1, f.ph));
      w.key("id");
      if (f.id.isString)
        w.value(t.str(static_cast<uint32_t>(f.id.value)));
      else
        w.value(f.id.value);
      strOrNull("cat", f.cat);
      strOrNull("name", f.name);
      lane(f.lane);
      w.field("ts", formatUs(f.ts));
      if (f.bindsEnclosing) w.field("bp", "e");
      break;
    }
    case EventRef::kMemory: {
      const MemoryPoint& m = t.memory[ref.index];
      w.field("index", m.origin.index).field("offset", m.origin.offset).field("ph", "i").field("name", "[memory]");
      lane(m.lane);
      w.field("ts", formatUs(m.ts));
      w.key("args").beginObject();
      writeIntArg(w, "Device Type", m.deviceType);
      writeIntArg(w, "Device Id", m.deviceId);
      writeIntArg(w, "Total Allocated", m.totalAllocated);
      writeIntArg(w, "Bytes", m.bytes);
      w.endObject();
      break;
    }
    case EventRef::kMeta: {
      const MetaEvent& m = t.meta[ref.index];
      w.field("index", m.origin.index).field("offset", m.origin.offset).field("ph", "M");
      strOrNull("name", m.name);
      lane(m.lane);
      w.key("args").beginObject();
      writeIntArg(w, "sort_index", m.sortIndex);
      if (m.strArg != kNoString) w.field("name", t.str(m.strArg));
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

std::string checkReportToJson(const Trace& t, const CheckReport& r) {
  JsonWriter w;
  w.beginObject();
  w.field("ok", r.ok);
  w.field("strict", r.strict);
  writeTraceInfo(w, t);
  w.key("checks").beginArray();
  const auto& table = checkTable();
  for (size_t k = 0; k < r.results.size(); ++k) {
    const CheckResult& c = r.results[k];
    w.beginObject();
    w.field("name", c.name);
    w.field("severity", severityName(c.severity));
    w.field("description", table[k].description);
    w.field("status", statusName(c.status));
    w.field("violations", c.violations);
    w.field("warnings", c.warnings);
    w.field("consumer", table[k].consumer);
    if (!c.note.empty()) w.field("note", c.note);
    if (c.status == CheckResult::kFail) w.field("breaks", table[k].breaks);
    if (c.status == CheckResult::kWarn && *table[k].artifact) w.field("artifact", table[k].artifact);
    w.key("examples").beginArray();
    for (const Violation& v : c.examples) {
      w.beginObject();
      w.field("message", v.message);
      w.field("artifact", v.artifact);
      w.key("events").beginArray();
      for (const EventRef& e : v.events) writeEventRef(w, t, e);
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

std::string checkTableToJson() {
  JsonWriter w;
  w.beginArray();
  for (const CheckInfo& c : checkTable())
    w.beginObject()
        .field("name", c.name)
        .field("severity", severityName(c.severity))
        .field("description", c.description)
        .field("consumer", c.consumer)
        .field("breaks", c.breaks)
        .field("artifact", c.artifact)
        .endObject();
  w.endArray();
  return w.take();
}

}  // namespace openreg::trace
