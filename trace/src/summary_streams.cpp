// Summary sections: utilisation per stream and per device, and the largest
// idle gaps on each device with what the host was doing meanwhile.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "analysis.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace {

HostActivity describeGap(const Trace& t, int64_t a, int64_t b) {
  HostActivity h;
  const int64_t mid = a + (b - a) / 2;
  // The host thread with the deepest stack at the midpoint is the one the
  // device was waiting on (or waiting for).
  for (uint32_t lane = 0; lane < t.lanes.size(); ++lane) {
    if (t.laneKind[lane] != LaneKind::Host) continue;
    std::vector<uint32_t> stack = t.stackAt(lane, mid);
    if (stack.size() > h.stack.size()) {
      h.stack = std::move(stack);
      h.lane = static_cast<int32_t>(lane);
    }
  }
  if (h.lane >= 0) h.text = describeHostStack(t, h.stack);

  // Calls that ran during the gap, counted at the outermost level that does
  // not span the whole gap (so aten::add is not counted again as aten::empty).
  auto enclosesGap = [&](const Slice& s) { return s.ts <= a && s.end() >= b; };
  // The stack at the midpoint is already the headline; list what else ran.
  std::vector<uint32_t> headline = h.stack;
  std::sort(headline.begin(), headline.end());
  auto eligible = [&](uint32_t i) {
    if (std::binary_search(headline.begin(), headline.end(), i)) return false;
    const Slice& s = t.slices[i];
    if (t.role(s.cat) == CategoryRole::Python) return false;
    if (enclosesGap(s) || startsWith(t.str(s.name), "ProfilerStep#")) return false;
    return std::min(s.end(), b) - std::max(s.ts, a) > 0;
  };
  std::unordered_map<uint32_t, HostActivity::Overlap> byName;
  auto count = [&](uint32_t i) {
    for (int32_t p = t.parent[i]; p != kNoSlice; p = t.parent[p]) {
      if (enclosesGap(t.slices[p])) break;
      if (eligible(static_cast<uint32_t>(p))) return;  // counted through its ancestor
    }
    const Slice& s = t.slices[i];
    HostActivity::Overlap& o = byName[s.name];
    o.name = s.name;
    o.cat = s.cat;
    ++o.count;
    o.overlapNs = saturatingAdd(o.overlapNs, std::min(s.end(), b) - std::max(s.ts, a));
  };
  for (uint32_t lane = 0; lane < t.lanes.size(); ++lane) {
    if (t.laneKind[lane] != LaneKind::Host) continue;
    if (h.lane >= 0 && lane != static_cast<uint32_t>(h.lane)) continue;
    for (uint32_t i : t.stackAt(lane, a))
      if (eligible(i)) count(i);
    const auto& v = t.laneSlices[lane];
    auto it = std::upper_bound(v.begin(), v.end(), a, [&](int64_t x, uint32_t i) { return x < t.slices[i].ts; });
    for (; it != v.end() && t.slices[*it].ts < b; ++it)
      if (eligible(*it)) count(*it);
  }
  for (auto& [name, o] : byName) h.overlapping.push_back(o);
  std::sort(h.overlapping.begin(), h.overlapping.end(), [&](const auto& x, const auto& y) {
    if (x.overlapNs != y.overlapNs) return x.overlapNs > y.overlapNs;
    return t.str(x.name) < t.str(y.name);
  });
  if (h.overlapping.size() > 5) h.overlapping.resize(5);
  return h;
}

void writeHostActivity(JsonWriter& w, const Trace& t, const HostActivity& host) {
  w.beginObject();
  w.key("thread");
  if (host.lane >= 0) {
    const Lane& lane = t.lanes[host.lane];
    w.beginObject();
    w.key("pid");
    writeKey(w, t, lane.pid);
    w.key("tid");
    writeKey(w, t, lane.tid);
    w.key("name");
    writeName(w, t, t.threads[host.lane].name);
    w.endObject();
  } else {
    w.null();
  }
  w.field("text", host.text);
  w.key("stack").beginArray();
  for (uint32_t i : host.stack) writeSliceBrief(w, t, i);
  w.endArray();
  w.key("overlapping").beginArray();
  for (const auto& o : host.overlapping) {
    w.beginObject();
    w.key("name");
    writeName(w, t, o.name);
    w.key("category");
    writeName(w, t, o.cat);
    w.field("count", o.count);
    w.field("overlap_ns", o.overlapNs);
    w.endObject();
  }
  w.endArray();
  w.endObject();
}

}  // namespace

std::string describeHostStack(const Trace& t, const std::vector<uint32_t>& stack) {
  auto name = [&](uint32_t i) { return t.str(t.slices[i].name); };
  auto isPython = [&](uint32_t i) { return t.role(t.slices[i].cat) == CategoryRole::Python; };
  // ProfilerStep#N encloses everything in a step; it says nothing about the gap.
  auto isStep = [&](uint32_t i) { return startsWith(name(i), "ProfilerStep#"); };
  size_t firstCall = 0;
  while (firstCall < stack.size() && (isPython(stack[firstCall]) || isStep(stack[firstCall]))) ++firstCall;

  std::vector<std::string_view> parts;
  std::string python;
  // The deepest frame of the user's own code says more than a builtin or a
  // torch internal does; fall back to the deepest frame.
  int deepestUser = -1, deepestAny = -1;
  for (size_t k = 0; k < firstCall; ++k) {
    if (!isPython(stack[k])) continue;
    std::string_view n = name(stack[k]);
    deepestAny = static_cast<int>(k);
    if (!startsWith(n, "<") && n.find("torch/") == std::string_view::npos) deepestUser = static_cast<int>(k);
  }
  const int pick = deepestUser >= 0 ? deepestUser : deepestAny;
  if (pick >= 0) {
    python = "python: " + std::string(name(stack[pick]));
    parts.push_back(python);
  }
  std::vector<std::string_view> steps;
  for (size_t k = 0; k < stack.size(); ++k) {
    if (isStep(stack[k]))
      steps.push_back(name(stack[k]));
    else if (k >= firstCall && !isPython(stack[k]))
      parts.push_back(name(stack[k]));
  }
  std::string out;
  if (parts.empty() && !steps.empty()) return std::string(steps.back()) + ", outside any op";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k) out += " \xE2\x86\x92 ";  // →
    out += parts[k];
  }
  return out;
}

namespace sections {

// deviceSlices is grouped by lane: one run per stream.
void computeStreams(const Trace& t, const SummaryOptions& /*options*/, Summary& s) {
  std::map<Key, DeviceStat> devices;
  std::vector<Interval> intervals;
  for (size_t k = 0; k < t.deviceSlices.size();) {
    uint32_t lane = t.slices[t.deviceSlices[k]].lane;
    StreamStat st;
    st.lane = lane;
    intervals.clear();
    for (; k < t.deviceSlices.size() && t.slices[t.deviceSlices[k]].lane == lane; ++k) {
      const Slice& sl = t.slices[t.deviceSlices[k]];
      if (st.events == 0 || sl.ts < st.firstNs) st.firstNs = sl.ts;
      if (st.events == 0 || sl.end() > st.lastNs) st.lastNs = sl.end();
      ++st.events;
      intervals.push_back({sl.ts, sl.end()});
    }
    st.busyNs = mergeUnion(intervals);
    DeviceStat& d = devices[t.lanes[lane].pid];
    if (d.streams == 0 || st.firstNs < d.firstNs) d.firstNs = st.firstNs;
    if (d.streams == 0 || st.lastNs > d.lastNs) d.lastNs = st.lastNs;
    d.device = t.lanes[lane].pid;
    ++d.streams;
    d.events += st.events;
    d.busy.insert(d.busy.end(), intervals.begin(), intervals.end());
    s.streams.push_back(st);
  }
  std::sort(s.streams.begin(), s.streams.end(), [&](const StreamStat& a, const StreamStat& b) {
    const Lane& x = t.lanes[a.lane];
    const Lane& y = t.lanes[b.lane];
    if (!(x.pid == y.pid)) return x.pid < y.pid;
    return x.tid < y.tid;
  });
  for (auto& [pid, d] : devices) {
    d.busyNs = mergeUnion(d.busy);
    s.devices.push_back(std::move(d));
  }
}

void writeStreams(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& /*options*/) {
  w.key("streams").beginArray();
  for (const StreamStat& st : s.streams) {
    const Lane& lane = t.lanes[st.lane];
    w.beginObject();
    w.key("device");
    writeKey(w, t, lane.pid);
    w.key("stream");
    writeKey(w, t, lane.tid);
    w.key("name");
    writeName(w, t, t.threads[st.lane].name);
    w.field("events", st.events);
    w.field("busy_ns", st.busyNs);
    w.field("first_ns", st.firstNs - t.originNs);
    w.field("last_ns", st.lastNs - t.originNs);
    w.field("span_ns", st.lastNs - st.firstNs);
    // Against the device's active span, so that streams compare with each other.
    int64_t deviceSpan = 0;
    for (const DeviceStat& d : s.devices)
      if (d.device == lane.pid) deviceSpan = d.lastNs - d.firstNs;
    w.field("utilization", ratio(st.busyNs, deviceSpan));
    w.field("own_span_utilization", ratio(st.busyNs, st.lastNs - st.firstNs));
    w.endObject();
  }
  w.endArray();

  w.key("devices").beginArray();
  for (const DeviceStat& d : s.devices) {
    const Trace::ProcessInfo* p = t.process(d.device);
    w.beginObject();
    w.key("device");
    writeKey(w, t, d.device);
    w.key("name");
    writeName(w, t, p ? p->name : kNoString);
    w.field("streams", d.streams);
    w.field("events", d.events);
    w.field("busy_ns", d.busyNs);
    w.field("first_ns", d.firstNs - t.originNs);
    w.field("last_ns", d.lastNs - t.originNs);
    w.field("span_ns", d.lastNs - d.firstNs);
    w.field("idle_ns", d.lastNs - d.firstNs - d.busyNs);
    w.field("utilization", ratio(d.busyNs, d.lastNs - d.firstNs));
    w.endObject();
  }
  w.endArray();
}

// The gaps between each device's busy intervals (computeStreams), largest first.
void computeIdleGaps(const Trace& t, const SummaryOptions& options, Summary& s) {
  std::vector<IdleGap> gaps;
  for (const DeviceStat& d : s.devices)
    for (size_t k = 1; k < d.busy.size(); ++k)
      gaps.push_back(IdleGap{d.device, d.busy[k - 1].end, d.busy[k].start, {}});
  size_t keep = std::min(gaps.size(), static_cast<size_t>(std::max(options.gaps, 0)));
  std::partial_sort(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(keep), gaps.end(),
                    [](const IdleGap& a, const IdleGap& b) {
                      int64_t da = a.endNs - a.startNs, db = b.endNs - b.startNs;
                      if (da != db) return da > db;
                      return a.startNs < b.startNs;
                    });
  gaps.resize(keep);
  for (IdleGap& g : gaps) g.host = describeGap(t, g.startNs, g.endNs);
  s.gaps = std::move(gaps);
}

void writeIdleGaps(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& /*options*/) {
  w.key("idle_gaps").beginArray();
  for (const IdleGap& g : s.gaps) {
    w.beginObject();
    w.key("device");
    writeKey(w, t, g.device);
    w.field("start_ns", g.startNs - t.originNs);
    w.field("end_ns", g.endNs - t.originNs);
    w.field("duration_ns", g.endNs - g.startNs);
    w.key("host");
    writeHostActivity(w, t, g.host);
    w.endObject();
  }
  w.endArray();
}

}  // namespace sections

}  // namespace openreg::trace
