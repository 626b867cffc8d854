// The report's analyses: per step what bound it, the ops and kernels tables,
// and the memory curves with what was live at each peak.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "analysis.h"
#include "report_args.h"
#include "report_internal.h"

namespace openreg::trace {

namespace {

// |a \ b| for merged lists.
int64_t minusNs(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t total = 0;
  for (const Interval& i : a) total += i.end - i.start;
  return total - intersectionNs(a, b);
}

std::vector<Interval> clip(const std::vector<Interval>& merged, int64_t s, int64_t e) {
  std::vector<Interval> out;
  auto it = std::lower_bound(merged.begin(), merged.end(), s, [](const Interval& i, int64_t v) { return i.end <= v; });
  for (; it != merged.end() && it->start < e; ++it) out.push_back({std::max(it->start, s), std::min(it->end, e)});
  return out;
}

int64_t sizeNs(const std::vector<Interval>& v) {
  int64_t total = 0;
  for (const Interval& i : v) total += i.end - i.start;
  return total;
}

std::vector<Interval> unionOf(std::vector<Interval> a, const std::vector<Interval>& b) {
  a.insert(a.end(), b.begin(), b.end());
  mergeUnion(a);
  return a;
}

}  // namespace

namespace {

// Host ops and runtime calls (not the ProfilerStep ranges), merged.
std::vector<Interval> hostBusy(const Trace& t) {
  std::vector<Interval> host;
  for (uint32_t i = 0; i < t.slices.size(); ++i) {
    const Slice& s = t.slices[i];
    if (t.laneKind[s.lane] != LaneKind::Host) continue;
    const CategoryRole r = t.role(s.cat);
    if (!startsWith(t.str(s.name), "ProfilerStep#") && (r == CategoryRole::Op || r == CategoryRole::Runtime))
      host.push_back({s.ts, s.end()});
  }
  mergeUnion(host);
  return host;
}

// Device work split into compute and communication, merged; `step` >= 0: only the work that step launched.
struct DeviceWork {
  std::vector<Interval> compute, comm;
};

std::vector<DeviceWork> workByStep(const Trace& t, size_t groups, bool byStep) {
  std::vector<DeviceWork> work(groups);
  for (uint32_t i : t.deviceSlices) {
    const int32_t k = byStep ? t.stepOfSlice[i] : 0;
    if (k < 0) continue;
    const Slice& s = t.slices[i];
    auto& list = classifyKernel(t, i) == KernelClass::Communication ? work[k].comm : work[k].compute;
    list.push_back({s.ts, s.end()});
  }
  for (DeviceWork& w : work) mergeUnion(w.compute), mergeUnion(w.comm);
  return work;
}

// One row: [s, e) split into the device's compute, exposed communication,
// host-only time and idle, which add up to e - s.
void writeBreakdown(JsonWriter& w, const DeviceWork& work, const std::vector<Interval>& host, int64_t s, int64_t e) {
  const auto c = clip(work.compute, s, e), m = clip(work.comm, s, e), h = clip(host, s, e);
  const int64_t computeNs = sizeNs(c), exposedComm = minusNs(m, c);
  const auto device = unionOf(c, m);
  const int64_t deviceIdle = (e - s) - sizeNs(device);
  const int64_t hostNs = minusNs(h, device);
  const int64_t idleNs = deviceIdle - hostNs;
  const std::pair<int64_t, const char*> parts[] = {
      {computeNs, "device"}, {exposedComm, "communication"}, {hostNs, "host"}, {idleNs, "idle"}};
  const auto* bound = &parts[0];
  for (const auto& p : parts)
    if (p.first > bound->first) bound = &p;
  w.field("device_ns", computeNs).field("communication_ns", exposedComm);
  w.field("comm_total_ns", sizeNs(m)).field("host_ns", hostNs).field("idle_ns", idleNs);
  w.field("bound_by", bound->second);
}

void writeStepSpans(JsonWriter& w, const Trace& t, const Step& step) {
  w.field("host_start_ns", step.ts - t.originNs).field("host_end_ns", step.end - t.originNs);
  w.field("host_duration_ns", step.end - step.ts);
  for (const char* key : {"device_start_ns", "device_end_ns", "device_duration_ns", "lag_ns"}) {
    w.key(key);
    if (!step.hasDeviceWork) {
      w.null();
      continue;
    }
    const std::string_view k(key);
    w.value(k == "device_start_ns" ? step.deviceStart - t.originNs
            : k == "device_end_ns" ? step.deviceEnd - t.originNs
            : k == "lag_ns"        ? step.lagNs()
                                   : step.deviceEnd - step.deviceStart);
  }
  w.field("device_span_cut", step.deviceSpanCut);
}

}  // namespace

// Per step, on the trace's step clock, the work the step launched (its own
// device slices, by correlation to their launches) against its span.
void writeSteps(JsonWriter& w, const Trace& t) {
  const std::vector<Interval> host = hostBusy(t);
  w.field("steps_note", t.stepsNote);  // how the steps were found, when not from ProfilerStep#N
  w.field("step_clock", stepClockName(t.stepClock)).field("step_clock_note", t.stepClockNote);
  w.key("steps").beginArray();
  const std::vector<DeviceWork> work = workByStep(t, std::max<size_t>(t.steps.size(), 1), !t.steps.empty());
  for (size_t k = 0; k < t.steps.size(); ++k) {
    const Step& step = t.steps[k];
    const auto [s, e] = t.stepSpan(step);
    const bool onDevice = t.stepClock == StepClock::Device && step.hasDeviceWork;
    w.beginObject().field("name", t.str(step.name)).field("clock", onDevice ? "device" : "host");
    w.field("start_ns", s - t.originNs).field("end_ns", e - t.originNs).field("duration_ns", e - s);
    writeStepSpans(w, t, step);
    writeBreakdown(w, work[k], host, s, e);
    w.endObject();
  }
  if (t.steps.empty()) {
    if (auto win = profilingWindow(t)) {
      w.beginObject().field("name", "window").field("clock", "host");
      w.field("start_ns", win->start - t.originNs).field("end_ns", win->end - t.originNs);
      w.field("duration_ns", win->end - win->start);
      writeBreakdown(w, work[0], host, win->start, win->end);
      w.endObject();
    }
  }
  w.endArray();
}

void writeOpTable(JsonWriter& w, const Trace& t, const EventArgs& args, const ReportOptions& o) {
  struct Row {
    uint32_t name, dims;
    uint64_t calls = 0, kernels = 0;
    int64_t hostNs = 0, selfNs = 0, deviceNs = 0;
  };
  std::vector<Row> rows;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> index;
  std::vector<int32_t> rowOf(t.slices.size(), -1);
  for (uint32_t i = 0; i < t.slices.size(); ++i) {
    const Slice& s = t.slices[i];
    if (t.laneKind[s.lane] != LaneKind::Host || t.role(s.cat) != CategoryRole::Op) continue;
    const uint32_t dims = s.origin.index < args.dimsOf.size() ? args.dimsOf[s.origin.index] : 0;
    auto [it, inserted] = index.emplace(std::make_pair(s.name, dims), static_cast<uint32_t>(rows.size()));
    if (inserted) rows.push_back({s.name, dims});
    Row& r = rows[it->second];
    ++r.calls;
    r.hostNs = saturatingAdd(r.hostNs, s.dur);
    r.selfNs = saturatingAdd(r.selfNs, s.dur);
    rowOf[i] = static_cast<int32_t>(it->second);
  }
  for (uint32_t i = 0; i < t.slices.size(); ++i) {
    if (rowOf[i] < 0) continue;
    for (int32_t p = t.parent[i]; p != kNoSlice; p = t.parent[p]) {
      if (rowOf[p] >= 0) {
        rows[rowOf[p]].selfNs -= t.slices[i].dur;
        break;
      }
    }
  }
  for (uint32_t i : t.deviceSlices) {
    const int32_t op = t.opOfDeviceSlice(t.slices[i]);
    if (op == kNoSlice || rowOf[op] < 0) continue;
    Row& r = rows[rowOf[op]];
    r.deviceNs = saturatingAdd(r.deviceNs, t.slices[i].dur);
    ++r.kernels;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.hostNs != b.hostNs ? a.hostNs > b.hostNs : a.deviceNs > b.deviceNs;
  });
  if (rows.size() > static_cast<size_t>(o.maxTableRows)) rows.resize(static_cast<size_t>(o.maxTableRows));
  w.key("op_table").beginArray();
  for (const Row& r : rows) {
    w.beginObject().field("name", t.str(r.name)).field("input_dims", args.texts[r.dims]);
    w.field("calls", r.calls).field("host_ns", r.hostNs).field("self_host_ns", r.selfNs);
    w.field("device_ns", r.deviceNs).field("kernels", r.kernels).endObject();
  }
  w.endArray();
}

std::string kernelSource(const Trace& t, uint32_t slice) {
  if (const SourceLines* src = t.sourceLinesOf(slice)) {
    std::string out;
    for (uint32_t l : src->lines) {
      if (!out.empty()) out += ", ";
      out += t.str(l);
    }
    return out;
  }
  const int32_t op = t.opOfDeviceSlice(t.slices[slice]);
  if (op == kNoSlice) return "";
  for (int32_t p = t.parent[op]; p != kNoSlice; p = t.parent[p]) {
    const Slice& frame = t.slices[p];
    if (t.role(frame.cat) != CategoryRole::Python) continue;
    if (auto line = userSourceLine(t.str(frame.name))) return line->first + " " + line->second;
  }
  return "";
}

void writeKernelTable(JsonWriter& w, const Trace& t, const ReportOptions& o) {
  struct Row {
    uint32_t name = kNoString, cat = kNoString, first = 0;
    uint64_t count = 0;
    int64_t totalNs = 0, minNs = 0, maxNs = 0;
    std::unordered_map<uint32_t, int64_t> ops;         // op name -> ns
    std::unordered_map<std::string, int64_t> sources;  // source -> ns
  };
  std::vector<Row> rows;
  std::unordered_map<uint32_t, uint32_t> index;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    auto [it, inserted] = index.emplace(s.name, static_cast<uint32_t>(rows.size()));
    if (inserted) {
      rows.emplace_back();
      rows.back().name = s.name;
      rows.back().cat = s.cat;
      rows.back().first = i;
    }
    Row& r = rows[it->second];
    r.minNs = r.count ? std::min(r.minNs, s.dur) : s.dur;
    r.maxNs = std::max(r.maxNs, s.dur);
    ++r.count;
    r.totalNs = saturatingAdd(r.totalNs, s.dur);
    const int32_t op = t.opOfDeviceSlice(s);
    r.ops[op == kNoSlice ? kNoString : t.slices[op].name] += s.dur;
    std::string src = kernelSource(t, i);
    if (!src.empty()) r.sources[src] += s.dur;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.totalNs > b.totalNs; });
  if (rows.size() > static_cast<size_t>(o.maxTableRows)) rows.resize(static_cast<size_t>(o.maxTableRows));
  w.key("kernel_table").beginArray();
  for (const Row& r : rows) {
    w.beginObject().field("name", t.str(r.name)).key("category");
    writeName(w, t, r.cat);
    w.field("class", kernelClassName(classifyKernel(t, r.first)));
    w.field("count", r.count).field("total_ns", r.totalNs).field("avg_ns", r.totalNs / static_cast<int64_t>(r.count));
    w.field("min_ns", r.minNs).field("max_ns", r.maxNs);
    // The op with the most of the kernel's time, and how many distinct ops launched it.
    const auto op =
        std::max_element(r.ops.begin(), r.ops.end(),
                         [](const std::pair<const uint32_t, int64_t>& a, const std::pair<const uint32_t, int64_t>& b) {
                           return a.second != b.second ? a.second < b.second : a.first > b.first;
                         });
    w.key("op");
    writeName(w, t, op->first);
    w.field("ops", static_cast<uint64_t>(r.ops.size()));
    const auto src = std::max_element(
        r.sources.begin(), r.sources.end(),
        [](const std::pair<const std::string, int64_t>& a, const std::pair<const std::string, int64_t>& b) {
          return a.second != b.second ? a.second < b.second : a.first > b.first;
        });
    w.key("source");
    if (src == r.sources.end())
      w.null();
    else
      w.value(src->first);
    w.endObject();
  }
  w.endArray();
}

namespace {

struct Curve {
  int64_t deviceType, deviceId;
  std::vector<uint32_t> points;  // into t.memory
};

void writeCurvePoints(JsonWriter& w, const Trace& t, const EventArgs& args, const std::vector<uint32_t>& pts,
                      size_t peakAt, const ReportOptions& o) {
  // Buckets by position; each keeps its highest point (the peak always survives).
  const size_t n = pts.size(), limit = std::max<size_t>(2, static_cast<size_t>(o.memoryPoints));
  std::vector<size_t> keep;
  if (n <= limit) {
    for (size_t k = 0; k < n; ++k) keep.push_back(k);
  } else {
    for (size_t b = 0; b < limit; ++b) {
      const size_t lo = b * n / limit, hi = (b + 1) * n / limit;
      size_t best = lo;
      for (size_t k = lo; k < hi; ++k) {
        if (k == peakAt) {
          best = k;
          break;
        }
        if (t.memory[pts[k]].totalAllocated.value > t.memory[pts[best]].totalAllocated.value) best = k;
      }
      keep.push_back(best);
    }
    keep.push_back(n - 1);
  }
  std::vector<int64_t> ts, alloc, reserved;
  bool anyReserved = false;
  for (size_t k : keep) {
    const MemoryPoint& m = t.memory[pts[k]];
    ts.push_back(m.ts - t.originNs);
    alloc.push_back(m.totalAllocated.value);
    auto it = args.memory.find(m.origin.index);
    const int64_t r = it == args.memory.end() ? -1 : it->second.reserved;
    anyReserved |= r >= 0;
    reserved.push_back(r);
  }
  auto arr = [&](const char* name, const std::vector<int64_t>& v) {
    w.key(name).beginArray();
    for (int64_t x : v) w.value(x);
    w.endArray();
  };
  arr("t_ns", ts);
  arr("allocated", alloc);
  if (anyReserved)
    arr("reserved", reserved);
  else
    w.key("reserved").null();
}

void writeLiveAtPeak(JsonWriter& w, const Trace& t, const EventArgs& args, const std::vector<uint32_t>& pts,
                     size_t peakAt, const ReportOptions& o) {
  struct Live {
    int64_t bytes;
    uint32_t point;
  };
  std::unordered_map<int64_t, Live> live;
  bool addrs = false;
  for (size_t k = 0; k <= peakAt && k < pts.size(); ++k) {
    const MemoryPoint& m = t.memory[pts[k]];
    auto it = args.memory.find(m.origin.index);
    if (it == args.memory.end() || !it->second.hasAddr || !m.bytes.ok()) continue;
    addrs = true;
    if (m.bytes.value > 0)
      live[it->second.addr] = {m.bytes.value, pts[k]};
    else
      live.erase(it->second.addr);
  }
  std::vector<Live> v;
  for (auto& [addr, l] : live) v.push_back(l);
  std::sort(v.begin(), v.end(), [&](const Live& a, const Live& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : t.memory[a.point].ts < t.memory[b.point].ts;
  });
  w.field("live_allocations", static_cast<uint64_t>(v.size()));
  w.field("live_known", addrs);
  if (v.size() > static_cast<size_t>(o.liveAtPeak)) v.resize(static_cast<size_t>(o.liveAtPeak));
  w.key("live_at_peak").beginArray();
  for (const Live& l : v) {
    const MemoryPoint& m = t.memory[l.point];
    const int32_t op = t.innermostAt(m.lane, m.ts, roleBit(CategoryRole::Op));
    w.beginObject().field("bytes", l.bytes).field("t_ns", m.ts - t.originNs).key("op");
    writeName(w, t, op == kNoSlice ? kNoString : t.slices[op].name);
    w.endObject();
  }
  w.endArray();
}

}  // namespace

void writeMemoryCurves(JsonWriter& w, const Trace& t, const EventArgs& args, const ReportOptions& o) {
  std::map<std::pair<int64_t, int64_t>, std::vector<uint32_t>> groups;
  for (uint32_t i = 0; i < t.memory.size(); ++i) {
    const MemoryPoint& m = t.memory[i];
    if (!m.totalAllocated.ok()) continue;
    groups[{m.deviceType.ok() ? m.deviceType.value : -1, m.deviceId.ok() ? m.deviceId.value : -1}].push_back(i);
  }
  w.key("memory").beginArray();
  for (auto& [key, pts] : groups) {
    std::stable_sort(pts.begin(), pts.end(), [&](uint32_t a, uint32_t b) { return t.memory[a].ts < t.memory[b].ts; });
    size_t peakAt = 0;
    for (size_t k = 0; k < pts.size(); ++k)
      if (t.memory[pts[k]].totalAllocated.value > t.memory[pts[peakAt]].totalAllocated.value) peakAt = k;
    const MemoryPoint& peak = t.memory[pts[peakAt]];
    w.beginObject().field("device_type", key.first).field("device_type_name", deviceTypeName(key.first));
    w.field("device_id", key.second).field("events", static_cast<uint64_t>(pts.size()));
    w.field("peak_bytes", peak.totalAllocated.value).field("peak_ns", peak.ts - t.originNs);
    const int32_t op = t.innermostAt(peak.lane, peak.ts, roleBit(CategoryRole::Op));
    w.key("peak_op");
    writeName(w, t, op == kNoSlice ? kNoString : t.slices[op].name);
    writeCurvePoints(w, t, args, pts, peakAt, o);
    writeLiveAtPeak(w, t, args, pts, peakAt, o);
    w.endObject();
  }
  w.endArray();
}

}  // namespace openreg::trace
