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

const char* roleName(CategoryRole r) {
  switch (r) {
    case CategoryRole::Device:
      return "device";
    case CategoryRole::Runtime:
      return "runtime";
    case CategoryRole::Annotation:
      return "annotation";
    case CategoryRole::Op:
      return "op";
    case CategoryRole::Python:
      return "python";
    case CategoryRole::Span:
      return "span";
    case CategoryRole::Other:
      break;
  }
  return "other";
}

void writeSliceBrief(JsonWriter& w, const Trace& t, uint32_t i) {
  const Slice& s = t.slices[i];
  w.beginObject();
  w.key("name");
  writeName(w, t, s.name);
  w.key("category");
  writeName(w, t, s.cat);
  w.field("start_ns", s.ts - t.originNs);
  w.field("duration_ns", s.dur);
  w.field("event_index", s.origin.index);
  w.endObject();
}

void writeMemory(JsonWriter& w, const Trace& t, const std::vector<MemoryStat>& stats) {
  w.beginArray();
  for (const MemoryStat& m : stats) {
    w.beginObject();
    w.field("device_type", m.deviceType);
    w.field("device_type_name", deviceTypeName(m.deviceType));
    w.field("device_id", m.deviceId);
    w.field("events", m.events);
    w.field("allocations", m.allocations);
    w.field("frees", m.frees);
    w.field("peak_bytes", m.peakBytes);
    w.field("peak_ns", m.peakTs - t.originNs);
    w.field("final_bytes", m.finalBytes);
    w.field("peak_event_index", m.peakEvent >= 0 ? t.memory[m.peakEvent].origin.index : 0u);
    w.key("op");
    if (m.op == kNoSlice)
      w.null();
    else
      writeSliceBrief(w, t, static_cast<uint32_t>(m.op));
    w.key("op_stack").beginArray();
    for (uint32_t i : m.opStack) w.value(t.str(t.slices[i].name));
    w.endArray();
    w.endObject();
  }
  w.endArray();
}

}  // namespace

bool startsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

double ratio(int64_t num, int64_t den) { return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 0.0; }

void writeKey(JsonWriter& w, const Trace& t, const Key& k) {
  if (k.isString)
    w.value(t.str(static_cast<uint32_t>(k.value)));
  else
    w.value(k.value);
}

void writeName(JsonWriter& w, const Trace& t, uint32_t id) {
  if (id == kNoString)
    w.null();
  else
    w.value(t.str(id));
}

int64_t mergeUnion(std::vector<Interval>& iv) {
  std::sort(iv.begin(), iv.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  size_t out = 0;
  for (const Interval& x : iv) {
    if (out > 0 && x.start <= iv[out - 1].end) {
      iv[out - 1].end = std::max(iv[out - 1].end, x.end);
    } else {
      iv[out++] = x;
    }
  }
  iv.resize(out);
  int64_t busy = 0;
  for (const Interval& x : iv) busy = saturatingAdd(busy, x.end - x.start);
  return busy;
}

const char* deviceTypeName(int64_t type) {
  // c10::DeviceType values (torch._C._autograd.DeviceType).
  switch (type) {
    case 0:
      return "CPU";
    case 1:
      return "CUDA";
    case 6:
      return "HIP";
    case 9:
      return "XLA";
    case 12:
      return "XPU";
    case 13:
      return "MPS";
    case 14:
      return "Meta";
    case 15:
      return "HPU";
    case 19:
      return "MTIA";
    case 20:
      return "PrivateUse1";
    default:
      return "unknown";
  }
}

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

std::optional<Window> profilingWindow(const Trace& t) {
  bool have = false;
  Window w;
  for (const Slice& s : t.slices) {
    if (t.role(s.cat) != CategoryRole::Span) continue;
    if (!have || s.ts < w.start) w.start = s.ts;
    if (!have || s.end() > w.end) w.end = s.end();
    have = true;
  }
  if (have) {
    w.source = "trace_span";
    if (t.recordWindowEnd && *t.recordWindowEnd > w.end) {
      w.end = *t.recordWindowEnd;
      w.source = "trace_span+record_window_end";
    }
    return w;
  }
  for (const Slice& s : t.slices) {
    if (t.laneKind[s.lane] != LaneKind::Host) continue;
    if (!have || s.ts < w.start) w.start = s.ts;
    if (!have || s.end() > w.end) w.end = s.end();
    have = true;
  }
  if (!have) return std::nullopt;
  w.source = "host_events";
  return w;
}

Summary computeSummary(const Trace& t, const SummaryOptions& options) {
  Summary s;
  s.window = profilingWindow(t);

  // Kernels by name.
  std::unordered_map<uint32_t, KernelStat> kernels;
  for (uint32_t i : t.deviceSlices) {
    const Slice& sl = t.slices[i];
    KernelStat& k = kernels[sl.name];
    if (k.count == 0) {
      k.name = sl.name;
      k.cat = sl.cat;
      k.firstSlice = i;
      k.minNs = k.maxNs = sl.dur;
    }
    ++k.count;
    k.totalNs = saturatingAdd(k.totalNs, sl.dur);
    k.minNs = std::min(k.minNs, sl.dur);
    k.maxNs = std::max(k.maxNs, sl.dur);
    s.deviceTotalNs = saturatingAdd(s.deviceTotalNs, sl.dur);
  }
  for (auto& [name, k] : kernels) s.kernels.push_back(k);
  std::sort(s.kernels.begin(), s.kernels.end(), [&](const KernelStat& a, const KernelStat& b) {
    if (a.totalNs != b.totalNs) return a.totalNs > b.totalNs;
    return t.str(a.name) < t.str(b.name);
  });

  // Device time per op, and how much device work is linked to an op.
  std::unordered_map<uint32_t, OpDeviceStat> ops;
  std::map<uint32_t, LinkStat::PerCategory> perCat;
  std::vector<uint8_t> opSeen(t.slices.size(), 0);
  for (uint32_t i : t.deviceSlices) {
    const Slice& sl = t.slices[i];
    bool viaCorrelation = false;
    int32_t op = t.opOfDeviceSlice(sl, &viaCorrelation);
    uint32_t key = op == kNoSlice ? kNoString : t.slices[op].name;
    OpDeviceStat& st = ops[key];
    st.name = key;
    st.deviceNs = saturatingAdd(st.deviceNs, sl.dur);
    ++st.deviceEvents;
    LinkStat::PerCategory& pc = perCat[sl.cat];
    pc.cat = sl.cat;
    ++pc.events;
    ++s.links.deviceEvents;
    if (op != kNoSlice) {
      ++s.links.linked;
      ++pc.linked;
      ++(viaCorrelation ? s.links.viaCorrelation : s.links.viaExternalId);
      if (!opSeen[op]) {
        opSeen[op] = 1;
        ++st.opInstances;
      }
    }
  }
  for (auto& [k, v] : ops) s.ops.push_back(v);
  std::sort(s.ops.begin(), s.ops.end(), [&](const OpDeviceStat& a, const OpDeviceStat& b) {
    if (a.deviceNs != b.deviceNs) return a.deviceNs > b.deviceNs;
    return t.str(a.name) < t.str(b.name);
  });
  for (auto& [cat, pc] : perCat) s.links.byCategory.push_back(pc);

  // Streams (deviceSlices is grouped by lane) and devices.
  std::map<Key, std::vector<Interval>> perDevice;
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
    const Key& pid = t.lanes[lane].pid;
    auto& all = perDevice[pid];
    all.insert(all.end(), intervals.begin(), intervals.end());
    DeviceStat& d = devices[pid];
    if (d.streams == 0 || st.firstNs < d.firstNs) d.firstNs = st.firstNs;
    if (d.streams == 0 || st.lastNs > d.lastNs) d.lastNs = st.lastNs;
    d.device = pid;
    ++d.streams;
    d.events += st.events;
    s.streams.push_back(st);
  }
  std::sort(s.streams.begin(), s.streams.end(), [&](const StreamStat& a, const StreamStat& b) {
    const Lane& x = t.lanes[a.lane];
    const Lane& y = t.lanes[b.lane];
    if (!(x.pid == y.pid)) return x.pid < y.pid;
    return x.tid < y.tid;
  });

  std::vector<IdleGap> gaps;
  for (auto& [pid, iv] : perDevice) {
    DeviceStat& d = devices[pid];
    d.busyNs = mergeUnion(iv);
    for (size_t k = 1; k < iv.size(); ++k) gaps.push_back(IdleGap{pid, iv[k - 1].end, iv[k].start, {}});
    s.devices.push_back(d);
  }
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

  // Memory: the peak of "Total Allocated" per device.
  std::map<std::pair<int64_t, int64_t>, std::vector<uint32_t>> groups;
  for (uint32_t i = 0; i < t.memory.size(); ++i) {
    const MemoryPoint& m = t.memory[i];
    if (!m.deviceType.ok() || !m.totalAllocated.ok()) continue;
    groups[{m.deviceType.value, m.deviceId.ok() ? m.deviceId.value : -1}].push_back(i);
  }
  for (auto& [key, idx] : groups) {
    std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return t.memory[a].ts < t.memory[b].ts; });
    MemoryStat ms;
    ms.deviceType = key.first;
    ms.deviceId = key.second;
    for (uint32_t i : idx) {
      const MemoryPoint& m = t.memory[i];
      ++ms.events;
      if (m.bytes.ok() && m.bytes.value > 0) ++ms.allocations;
      if (m.bytes.ok() && m.bytes.value < 0) ++ms.frees;
      if (ms.peakEvent < 0 || m.totalAllocated.value > ms.peakBytes) {
        ms.peakBytes = m.totalAllocated.value;
        ms.peakTs = m.ts;
        ms.peakEvent = static_cast<int32_t>(i);
      }
      ms.finalBytes = m.totalAllocated.value;
    }
    const MemoryPoint& peak = t.memory[ms.peakEvent];
    ms.op = t.innermostAt(peak.lane, peak.ts, roleBit(CategoryRole::Op));
    for (uint32_t i : t.stackAt(peak.lane, peak.ts))
      if (t.role(t.slices[i].cat) == CategoryRole::Op) ms.opStack.push_back(i);
    (key.first == 0 ? s.hostMemory : s.memory).push_back(std::move(ms));
  }

  s.classes = computeKernelClasses(t);
  s.idle = computeIdleBreakdown(t, options);
  auto byLane = [&](uint32_t a, uint32_t b) {
    const Lane& x = t.lanes[a];
    const Lane& y = t.lanes[b];
    if (!(x.pid == y.pid)) return x.pid < y.pid;
    return x.tid < y.tid;
  };
  std::sort(s.classes.streams.begin(), s.classes.streams.end(),
            [&](const auto& a, const auto& b) { return byLane(a.lane, b.lane); });
  s.launches = computeLaunchStats(t, options);
  s.communication = computeCommunication(t);
  return s;
}

void writeTraceInfo(JsonWriter& w, const Trace& t) {
  w.key("trace").beginObject();
  w.field("events", t.eventCount);
  w.field("bytes", t.bytesRead);
  w.field("origin_ns", t.originNs);
  w.field("origin_us", formatUs(t.originNs));
  w.key("phases").beginObject();
  for (size_t ph = 0; ph < t.phaseCounts.size(); ++ph)
    if (t.phaseCounts[ph]) w.field(std::string(1, static_cast<char>(ph)), t.phaseCounts[ph]);
  w.endObject();
  std::map<uint32_t, uint64_t> cats;
  for (const Slice& s : t.slices) ++cats[s.cat];
  w.key("categories").beginArray();
  for (auto& [cat, n] : cats) {
    w.beginObject();
    w.key("name");
    writeName(w, t, cat);
    w.field("role", roleName(t.role(cat)));
    w.field("complete_events", n);
    w.endObject();
  }
  w.endArray();
  auto names = [&](const char* key, const std::vector<uint32_t>& ids) {
    w.key(key).beginArray();
    for (uint32_t id : ids) w.value(t.str(id));
    w.endArray();
  };
  names("device_categories", t.deviceCategories);
  names("runtime_categories", t.runtimeCategories);
  names("annotation_categories", t.annotationCategories);
  names("op_categories", t.opCategories);
  names("flow_categories", t.flowCategories);
  uint64_t host = 0, device = 0;
  for (size_t lane = 0; lane < t.lanes.size(); ++lane) {
    if (t.laneSlices[lane].empty()) continue;  // metadata-only lanes
    host += t.laneKind[lane] == LaneKind::Host;
    device += t.laneKind[lane] == LaneKind::Device;
  }
  w.field("host_lanes", host);
  w.field("device_lanes", device);
  w.field("malformed_events", t.malformedCount);
  w.key("parse_error");
  if (t.parseError) {
    w.beginObject().field("offset", t.parseError->offset).field("message", t.parseError->message).endObject();
  } else {
    w.null();
  }
  w.endObject();
}

std::string summaryToJson(const Trace& t, const Summary& s, const SummaryOptions& options) {
  JsonWriter w;
  const size_t top = static_cast<size_t>(std::max(options.top, 0));
  w.beginObject();
  writeTraceInfo(w, t);
  w.key("window");
  if (s.window) {
    w.beginObject();
    w.field("start_ns", s.window->start - t.originNs);
    w.field("end_ns", s.window->end - t.originNs);
    w.field("duration_ns", s.window->end - s.window->start);
    w.field("source", s.window->source);
    w.endObject();
  } else {
    w.null();
  }
  w.field("device_total_ns", s.deviceTotalNs);
  w.field("kernel_names", static_cast<uint64_t>(s.kernels.size()));

  w.key("top_kernels").beginArray();
  for (size_t k = 0; k < s.kernels.size() && k < top; ++k) {
    const KernelStat& ks = s.kernels[k];
    w.beginObject();
    w.key("name");
    writeName(w, t, ks.name);
    w.key("category");
    writeName(w, t, ks.cat);
    w.field("class", kernelClassName(classifyKernel(t, ks.firstSlice)));
    w.field("count", ks.count);
    w.field("total_ns", ks.totalNs);
    w.field("avg_ns", ks.totalNs / static_cast<int64_t>(ks.count));
    w.field("min_ns", ks.minNs);
    w.field("max_ns", ks.maxNs);
    w.field("share", ratio(ks.totalNs, s.deviceTotalNs));
    w.endObject();
  }
  w.endArray();

  w.key("ops").beginArray();
  for (size_t k = 0; k < s.ops.size() && k < top; ++k) {
    const OpDeviceStat& o = s.ops[k];
    w.beginObject();
    w.key("name");
    writeName(w, t, o.name);
    w.field("linked", o.name != kNoString);
    w.field("device_ns", o.deviceNs);
    w.field("device_events", o.deviceEvents);
    w.field("op_instances", o.opInstances);
    w.field("share", ratio(o.deviceNs, s.deviceTotalNs));
    w.endObject();
  }
  w.endArray();

  w.key("links").beginObject();
  w.field("device_events", s.links.deviceEvents);
  w.field("linked", s.links.linked);
  w.field("share",
          s.links.deviceEvents ? static_cast<double>(s.links.linked) / static_cast<double>(s.links.deviceEvents) : 0.0);
  w.field("via_external_id", s.links.viaExternalId);
  w.field("via_correlation", s.links.viaCorrelation);
  w.key("by_category").beginArray();
  for (const auto& pc : s.links.byCategory) {
    w.beginObject();
    w.key("category");
    writeName(w, t, pc.cat);
    w.field("events", pc.events);
    w.field("linked", pc.linked);
    w.field("share", pc.events ? static_cast<double>(pc.linked) / static_cast<double>(pc.events) : 0.0);
    w.endObject();
  }
  w.endArray();
  w.endObject();

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

  w.key("idle_gaps").beginArray();
  for (const IdleGap& g : s.gaps) {
    w.beginObject();
    w.key("device");
    writeKey(w, t, g.device);
    w.field("start_ns", g.startNs - t.originNs);
    w.field("end_ns", g.endNs - t.originNs);
    w.field("duration_ns", g.endNs - g.startNs);
    w.key("host").beginObject();
    w.key("thread");
    if (g.host.lane >= 0) {
      const Lane& lane = t.lanes[g.host.lane];
      w.beginObject();
      w.key("pid");
      writeKey(w, t, lane.pid);
      w.key("tid");
      writeKey(w, t, lane.tid);
      w.key("name");
      writeName(w, t, t.threads[g.host.lane].name);
      w.endObject();
    } else {
      w.null();
    }
    w.field("text", g.host.text);
    w.key("stack").beginArray();
    for (uint32_t i : g.host.stack) writeSliceBrief(w, t, i);
    w.endArray();
    w.key("overlapping").beginArray();
    for (const auto& o : g.host.overlapping) {
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
    w.endObject();
  }
  w.endArray();

  writeDeviceAnalyses(w, t, s, options);

  w.key("memory");
  writeMemory(w, t, s.memory);
  w.key("host_memory");
  writeMemory(w, t, s.hostMemory);
  w.endObject();
  return w.take();
}

}  // namespace openreg::trace
