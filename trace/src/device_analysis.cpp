// The parts of the summary that answer what HolisticTraceAnalysis answers:
// kernel classes, the temporal and idle-time breakdowns, launch statistics
// and communication. Definitions follow HTA 0.5.0; trace/README.md lists
// where and why they differ.
#include <algorithm>
#include <cctype>
#include <map>
#include <unordered_map>

#include "analysis.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

void writeLane(JsonWriter& w, const Trace& t, uint32_t lane) {
  w.key("device");
  writeKey(w, t, t.lanes[lane].pid);
  w.key("stream");
  writeKey(w, t, t.lanes[lane].tid);
}

// Calls f(lane, begin, end) for each run of t.deviceSlices on one lane
// (deviceSlices is sorted by lane, then start).
template <typename F>
void forEachDeviceLane(const Trace& t, F&& f) {
  const auto& d = t.deviceSlices;
  for (size_t k = 0; k < d.size();) {
    uint32_t lane = t.slices[d[k]].lane;
    size_t e = k;
    while (e < d.size() && t.slices[d[e]].lane == lane) ++e;
    f(lane, k, e);
    k = e;
  }
}

// ---------------------------------------------------------------- collectives

// "all_reduce", "_allgather_base", "AllReduce", "reduce_scatter_tensor" ... -> canonical.
std::string canonicalCollective(std::string_view raw) {
  std::string key;
  for (char c : raw)
    if (std::isalpha(static_cast<unsigned char>(c)))
      key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (bool again = true; again;) {
    again = false;
    for (std::string_view suffix : {"coalesced", "intotensor", "tensor", "base"}) {
      if (key.size() > suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0) {
        key.resize(key.size() - suffix.size());
        again = true;
      }
    }
  }
  static const std::map<std::string, std::string, std::less<>> kNames = {
      {"allreduce", "AllReduce"}, {"allgather", "AllGather"}, {"reducescatter", "ReduceScatter"},
      {"broadcast", "Broadcast"}, {"reduce", "Reduce"},       {"alltoall", "AllToAll"},
      {"alltoallv", "AllToAll"},  {"sendrecv", "SendRecv"},   {"send", "Send"},
      {"recv", "Recv"},           {"barrier", "Barrier"},     {"gather", "Gather"},
      {"scatter", "Scatter"}};
  auto it = kNames.find(key);
  return it != kNames.end() ? it->second : std::string(raw);
}

// ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclKernel_AllGather_RING_LL_Sum_float,
// openregComm_AllReduce_Sum_f32: the collective is the second token.
std::string collectiveFromKernelName(std::string_view name) {
  size_t a = name.find('_');
  if (a == std::string_view::npos) return std::string(name);
  size_t b = name.find('_', a + 1);
  return canonicalCollective(name.substr(a + 1, b == std::string_view::npos ? std::string_view::npos : b - a - 1));
}

// Bytes per element of a torch dtype name ("Float", "BFloat16") or a short one ("f32").
int64_t elementSize(std::string_view dtype) {
  std::string d;
  for (char c : dtype) d.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  static const std::map<std::string, int64_t, std::less<>> kSizes = {
      {"float", 4}, {"float32", 4}, {"f32", 4},     {"half", 2},  {"float16", 2}, {"f16", 2},   {"bfloat16", 2},
      {"bf16", 2},  {"double", 8},  {"float64", 8}, {"f64", 8},   {"int", 4},     {"int32", 4}, {"i32", 4},
      {"long", 8},  {"int64", 8},   {"i64", 8},     {"short", 2}, {"int16", 2},   {"i16", 2},   {"byte", 1},
      {"uint8", 1}, {"u8", 1},      {"char", 1},    {"int8", 1},  {"i8", 1},      {"bool", 1}};
  auto it = kSizes.find(d);
  return it != kSizes.end() ? it->second : 0;
}

// The message size nccl-tests reports: the gathered output for AllGather,
// the full input for ReduceScatter, else the input.
int64_t collectiveBytes(const Trace& t, const CommArgs& a, const std::string& collective, std::string_view kernel) {
  int64_t elt = a.dtype != kNoString ? elementSize(t.str(a.dtype)) : 0;
  if (elt == 0) {
    size_t last = kernel.rfind('_');
    if (last != std::string_view::npos) elt = elementSize(kernel.substr(last + 1));
  }
  const IntArg& primary = collective == "AllGather" ? a.outNelems : a.inNelems;
  const IntArg& fallback = collective == "AllGather" ? a.inNelems : a.outNelems;
  int64_t n = primary.ok() ? primary.value : fallback.ok() ? fallback.value : 0;
  return n > 0 && elt > 0 ? n * elt : 0;
}

// NCCL's bus bandwidth factors (nccl-tests doc/PERFORMANCE.md).
double busFactor(const std::string& collective, int64_t n) {
  if (n <= 0) return 0.0;
  double r = static_cast<double>(n);
  if (collective == "AllReduce") return 2.0 * (r - 1.0) / r;
  if (collective == "AllGather" || collective == "ReduceScatter" || collective == "AllToAll") return (r - 1.0) / r;
  return 1.0;
}

void writeClassTimes(JsonWriter& w, const std::array<ClassTime, kKernelClasses>& c, int64_t total) {
  w.beginObject();
  for (size_t k = 0; k < kKernelClasses; ++k) {
    w.key(kernelClassName(static_cast<KernelClass>(k))).beginObject();
    w.field("count", c[k].count).field("total_ns", c[k].totalNs).field("busy_ns", c[k].busyNs);
    w.field("share", ratio(c[k].totalNs, total));
    w.endObject();
  }
  w.endObject();
}

void writeLaunchRow(JsonWriter& w, const Trace& t, const LaunchRow& r) {
  w.key("name");
  writeName(w, t, r.name);
  w.field("launches", r.launches);
  w.field("host_ns", r.hostNs);
  w.field("avg_host_ns", r.launches ? r.hostNs / static_cast<int64_t>(r.launches) : 0);
  w.field("delay_ns", r.delayNs);
  w.field("avg_delay_ns", r.launches ? r.delayNs / static_cast<int64_t>(r.launches) : 0);
  w.field("max_delay_ns", r.maxDelayNs);
  w.field("device_ns", r.deviceNs);
  w.field("short_kernels", r.shortKernels);
  w.field("short_share", r.launches ? static_cast<double>(r.shortKernels) / static_cast<double>(r.launches) : 0.0);
  w.field("slow_launches", r.slowLaunches);
  w.field("slow_starts", r.slowStarts);
}

void addLaunch(LaunchRow& r, int64_t host, int64_t delay, int64_t device, const SummaryOptions& o) {
  ++r.launches;
  r.hostNs = saturatingAdd(r.hostNs, host);
  r.delayNs = saturatingAdd(r.delayNs, delay);
  r.deviceNs = saturatingAdd(r.deviceNs, device);
  r.maxDelayNs = std::max(r.maxDelayNs, delay);
  r.shortKernels += device < host;  // HTA: the kernel is shorter than its launch
  r.slowLaunches += host > o.slowLaunchNs;
  r.slowStarts += delay > o.slowStartNs;
}

void writeTemporalObject(JsonWriter& w, const Trace& t, const Summary& s) {
  // HTA's temporal breakdown: over the span from the first device event to
  // the last, idle is what no event covers; compute is the union of
  // compute kernels; the rest of the busy time is non-compute.
  int64_t first = 0, last = 0;
  bool any = false;
  for (uint32_t i : t.deviceSlices) {
    const Slice& sl = t.slices[i];
    if (!any || sl.ts < first) first = sl.ts;
    if (!any || sl.end() > last) last = sl.end();
    any = true;
  }
  std::vector<Interval> busy;
  for (uint32_t i : t.deviceSlices) busy.push_back({t.slices[i].ts, t.slices[i].end()});
  int64_t busyNs = mergeUnion(busy);
  int64_t span = any ? last - first : 0;
  int64_t compute = s.classes.total[static_cast<size_t>(KernelClass::Compute)].busyNs;
  w.key("temporal").beginObject();
  w.field("kernel_time_ns", span);
  w.field("idle_ns", span - busyNs);
  w.field("compute_ns", compute);
  w.field("non_compute_ns", busyNs - compute);
  w.field("idle_share", ratio(span - busyNs, span));
  w.field("compute_share", ratio(compute, span));
  w.field("non_compute_share", ratio(busyNs - compute, span));
  w.endObject();
}

void writeIdleObject(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& o) {
  w.key("idle_breakdown").beginObject();
  w.field("kernel_wait_threshold_ns", o.kernelWaitNs);
  IdleBreakdown total;
  auto fields = [&](const IdleBreakdown& b) {
    w.field("idle_ns", b.totalNs());
    w.field("host_wait_ns", b.hostWaitNs).field("kernel_wait_ns", b.kernelWaitNs).field("other_ns", b.otherNs);
    w.field("host_wait_gaps", b.hostWaitGaps)
        .field("kernel_wait_gaps", b.kernelWaitGaps)
        .field("other_gaps", b.otherGaps);
    w.field("host_wait_share", ratio(b.hostWaitNs, b.totalNs()));
    w.field("kernel_wait_share", ratio(b.kernelWaitNs, b.totalNs()));
    w.field("other_share", ratio(b.otherNs, b.totalNs()));
  };
  w.key("streams").beginArray();
  for (const IdleBreakdown& b : s.idle) {
    w.beginObject();
    w.key("device");
    writeKey(w, t, b.device);
    w.key("stream");
    writeKey(w, t, b.stream);
    fields(b);
    w.endObject();
    total.hostWaitNs += b.hostWaitNs;
    total.kernelWaitNs += b.kernelWaitNs;
    total.otherNs += b.otherNs;
    total.hostWaitGaps += b.hostWaitGaps;
    total.kernelWaitGaps += b.kernelWaitGaps;
    total.otherGaps += b.otherGaps;
  }
  w.endArray();
  w.key("total").beginObject();
  fields(total);
  w.endObject();
  w.endObject();
}

void writeLaunchesObject(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& o) {
  const size_t top = static_cast<size_t>(std::max(o.top, 0));
  w.key("launches").beginObject();
  w.field("slow_launch_threshold_ns", o.slowLaunchNs);
  w.field("slow_start_threshold_ns", o.slowStartNs);
  writeLaunchRow(w, t, s.launches.total);
  w.key("by_api").beginArray();
  for (const LaunchRow& r : s.launches.byApi) {
    w.beginObject();
    writeLaunchRow(w, t, r);
    w.endObject();
  }
  w.endArray();
  w.key("by_op").beginArray();
  for (size_t k = 0; k < s.launches.byOp.size() && k < top; ++k) {
    w.beginObject();
    writeLaunchRow(w, t, s.launches.byOp[k]);
    w.endObject();
  }
  w.endArray();
  w.endObject();
}

void writeCommunicationObject(JsonWriter& w, const Trace& t, const Summary& s) {
  const Communication& c = s.communication;
  w.key("communication").beginObject();
  w.key("rank");
  if (t.rank)
    w.value(*t.rank);
  else
    w.null();
  w.key("world_size");
  if (t.worldSize)
    w.value(*t.worldSize);
  else
    w.null();
  w.field("comm_ns", c.commNs);
  w.field("compute_ns", c.computeNs);
  w.field("overlap_ns", c.overlapNs);
  w.field("exposed_ns", c.commNs - c.overlapNs);
  w.field("overlap_share", ratio(c.overlapNs, c.commNs));
  w.key("collectives").beginArray();
  for (const CollectiveStat& k : c.collectives) {
    w.beginObject();
    w.field("collective", k.collective);
    w.field("calls", k.calls);
    w.field("bytes", k.bytes);
    w.field("device_ns", k.deviceNs);
    w.key("group_size");
    if (k.groupSize > 0)
      w.value(k.groupSize);
    else
      w.null();
    // GB/s = bytes per ns.
    w.key("algbw_gbps");
    if (k.bytes > 0 && k.deviceNs > 0)
      w.value(ratio(k.bytes, k.deviceNs));
    else
      w.null();
    w.key("busbw_gbps");
    if (k.bytes > 0 && k.deviceNs > 0 && k.groupSize > 0)
      w.value(ratio(k.bytes, k.deviceNs) * busFactor(k.collective, k.groupSize));
    else
      w.null();
    w.endObject();
  }
  w.endArray();
  w.key("instances").beginArray();
  for (const CollectiveInstance& in : c.instances) {
    const Slice& sl = t.slices[in.slice];
    w.beginObject();
    w.field("collective", in.collective);
    w.key("seq");
    if (in.seq >= 0)
      w.value(in.seq);
    else
      w.null();
    w.key("group");
    writeName(w, t, in.group);
    w.key("kernel");
    writeName(w, t, sl.name);
    writeLane(w, t, sl.lane);
    w.field("ts_ns", sl.ts);  // absolute: ranks of one run share the clock
    w.field("duration_ns", sl.dur);
    w.field("bytes", in.bytes);
    w.endObject();
  }
  w.endArray();
  w.endObject();
}

}  // namespace

int64_t intersectionNs(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t out = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t lo = std::max(a[i].start, b[j].start), hi = std::min(a[i].end, b[j].end);
    if (hi > lo) out = saturatingAdd(out, hi - lo);
    (a[i].end < b[j].end ? i : j)++;
  }
  return out;
}

const char* kernelClassName(KernelClass c) {
  switch (c) {
    case KernelClass::Compute:
      return "compute";
    case KernelClass::Communication:
      return "communication";
    case KernelClass::Memory:
      return "memory";
    case KernelClass::Other:
      break;
  }
  return "other";
}

KernelClass classifyKernel(const Trace& t, uint32_t slice) {
  const Slice& s = t.slices[slice];
  std::string_view name = t.str(s.name);
  // HTA: ^nccl.*Kernel; we add RCCL, HCCL, our own collectives and any
  // device event that carries record_param_comms' "Collective name".
  if (startsWith(name, "nccl") || startsWith(name, "rccl") || startsWith(name, "hccl") ||
      startsWith(name, "openregComm_"))
    return KernelClass::Communication;
  if (const CommArgs* a = t.commArgsOf(slice); a && a->collective != kNoString) return KernelClass::Communication;
  std::string_view cat = t.str(s.cat);
  if (startsWith(name, "Memcpy") || startsWith(name, "Memset") || startsWith(name, "dma") || cat == "gpu_memcpy" ||
      cat == "gpu_memset")
    return KernelClass::Memory;
  // HTA's OTHER: names that mention a copy or a sync without being one.
  if (contains(name, "Memcpy") || contains(name, "Sync")) return KernelClass::Other;
  return KernelClass::Compute;
}

KernelClasses computeKernelClasses(const Trace& t) {
  KernelClasses out;
  std::array<std::vector<Interval>, kKernelClasses> all, lane;
  forEachDeviceLane(t, [&](uint32_t laneId, size_t b, size_t e) {
    KernelClasses::PerStream ps;
    ps.lane = laneId;
    for (auto& v : lane) v.clear();
    for (size_t k = b; k < e; ++k) {
      uint32_t i = t.deviceSlices[k];
      const Slice& s = t.slices[i];
      size_t c = static_cast<size_t>(classifyKernel(t, i));
      ++ps.byClass[c].count;
      ps.byClass[c].totalNs = saturatingAdd(ps.byClass[c].totalNs, s.dur);
      lane[c].push_back({s.ts, s.end()});
      all[c].push_back({s.ts, s.end()});
    }
    for (size_t c = 0; c < kKernelClasses; ++c) {
      ps.byClass[c].busyNs = mergeUnion(lane[c]);
      out.total[c].count += ps.byClass[c].count;
      out.total[c].totalNs = saturatingAdd(out.total[c].totalNs, ps.byClass[c].totalNs);
    }
    out.streams.push_back(ps);
  });
  for (size_t c = 0; c < kKernelClasses; ++c) out.total[c].busyNs = mergeUnion(all[c]);
  return out;
}

std::vector<IdleBreakdown> computeIdleBreakdown(const Trace& t, const SummaryOptions& o) {
  struct Row {
    Key device, stream;
    int64_t ts;
    uint32_t slice;
  };
  std::vector<Row> rows;
  rows.reserve(t.deviceSlices.size());
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    const Lane& lane = t.lanes[s.lane];
    rows.push_back({lane.pid, s.stream.ok() ? Key{s.stream.value, false} : lane.tid, s.ts, i});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (!(a.device == b.device)) return a.device < b.device;
    if (!(a.stream == b.stream)) return a.stream < b.stream;
    return a.ts < b.ts;
  });
  std::vector<IdleBreakdown> out;
  for (size_t b = 0; b < rows.size();) {
    size_t e = b;
    while (e < rows.size() && rows[e].device == rows[b].device && rows[e].stream == rows[b].stream) ++e;
    IdleBreakdown r;
    r.device = rows[b].device;
    r.stream = rows[b].stream;
    // The running end of the busy stream: HTA uses the previous event's end,
    // which makes overlapping records (MTIA) give negative idle time.
    int64_t busyUntil = t.slices[rows[b].slice].end();
    for (size_t k = b + 1; k < e; ++k) {
      const Slice& s = t.slices[rows[k].slice];
      int64_t gap = s.ts - busyUntil;
      int64_t previousEnd = busyUntil;
      busyUntil = std::max(busyUntil, s.end());
      if (gap <= 0) continue;
      bool hostWait = false;
      if (s.correlation.ok()) {
        auto it = t.runtimeByCorrelation.find(s.correlation.value);
        // Launched after the stream ran dry: the host was late.
        hostWait = it != t.runtimeByCorrelation.end() && t.slices[it->second].ts > previousEnd;
      }
      if (hostWait) {
        r.hostWaitNs += gap;
        ++r.hostWaitGaps;
      } else if (gap < o.kernelWaitNs) {
        r.kernelWaitNs += gap;
        ++r.kernelWaitGaps;
      } else {
        r.otherNs += gap;
        ++r.otherGaps;
      }
    }
    out.push_back(r);
    b = e;
  }
  return out;
}

LaunchStats computeLaunchStats(const Trace& t, const SummaryOptions& o) {
  LaunchStats out;
  std::unordered_map<uint32_t, LaunchRow> byApi, byOp;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    if (!s.correlation.ok()) continue;
    auto it = t.runtimeByCorrelation.find(s.correlation.value);
    if (it == t.runtimeByCorrelation.end()) continue;
    const Slice& launch = t.slices[it->second];
    int64_t delay = std::max<int64_t>(0, s.ts - launch.end());  // HTA clips at 0 too
    int32_t op = t.opOfDeviceSlice(s);
    uint32_t opName = op == kNoSlice ? kNoString : t.slices[op].name;
    addLaunch(out.total, launch.dur, delay, s.dur, o);
    LaunchRow& api = byApi[launch.name];
    api.name = launch.name;
    addLaunch(api, launch.dur, delay, s.dur, o);
    LaunchRow& perOp = byOp[opName];
    perOp.name = opName;
    addLaunch(perOp, launch.dur, delay, s.dur, o);
  }
  auto sorted = [&](std::unordered_map<uint32_t, LaunchRow>& m, auto key) {
    std::vector<LaunchRow> v;
    for (auto& [k, r] : m) v.push_back(r);
    std::sort(v.begin(), v.end(), [&](const LaunchRow& a, const LaunchRow& b) {
      if (key(a) != key(b)) return key(a) > key(b);
      return t.str(a.name) < t.str(b.name);
    });
    return v;
  };
  out.byApi = sorted(byApi, [](const LaunchRow& r) { return r.hostNs; });
  out.byOp = sorted(byOp, [](const LaunchRow& r) { return saturatingAdd(r.hostNs, r.delayNs); });
  return out;
}

Communication computeCommunication(const Trace& t) {
  Communication out;
  std::map<std::string, CollectiveStat> stats;
  std::vector<Interval> comm, compute;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    KernelClass c = classifyKernel(t, i);
    if (c == KernelClass::Compute) compute.push_back({s.ts, s.end()});
    if (c != KernelClass::Communication) continue;
    comm.push_back({s.ts, s.end()});
    const CommArgs* a = t.commArgsOf(i);
    std::string_view kernel = t.str(s.name);
    CollectiveInstance in;
    in.slice = i;
    in.collective =
        a && a->collective != kNoString ? canonicalCollective(t.str(a->collective)) : collectiveFromKernelName(kernel);
    if (a) {
      in.bytes = collectiveBytes(t, *a, in.collective, kernel);
      in.seq = a->seq.ok() ? a->seq.value : -1;
      in.group = a->group;
    } else {
      in.bytes = collectiveBytes(t, CommArgs{}, in.collective, kernel);
    }
    CollectiveStat& st = stats[in.collective];
    st.collective = in.collective;
    ++st.calls;
    st.bytes = saturatingAdd(st.bytes, in.bytes);
    st.deviceNs = saturatingAdd(st.deviceNs, s.dur);
    int64_t n = a && a->groupSize.ok() ? a->groupSize.value : t.worldSize.value_or(0);
    st.groupSize = std::max(st.groupSize, n);
    out.instances.push_back(std::move(in));
  }
  std::stable_sort(out.instances.begin(), out.instances.end(),
                   [&](const auto& x, const auto& y) { return t.slices[x.slice].ts < t.slices[y.slice].ts; });
  for (auto& [name, st] : stats) out.collectives.push_back(st);
  std::sort(out.collectives.begin(), out.collectives.end(), [](const auto& x, const auto& y) {
    if (x.deviceNs != y.deviceNs) return x.deviceNs > y.deviceNs;
    return x.collective < y.collective;
  });
  out.commNs = mergeUnion(comm);
  out.computeNs = mergeUnion(compute);
  out.overlapNs = intersectionNs(comm, compute);
  return out;
}

namespace sections {

void computeKernelClasses(const Trace& t, const SummaryOptions& /*options*/, Summary& s) {
  s.classes = trace::computeKernelClasses(t);
  std::sort(s.classes.streams.begin(), s.classes.streams.end(), [&](const auto& a, const auto& b) {
    const Lane& x = t.lanes[a.lane];
    const Lane& y = t.lanes[b.lane];
    if (!(x.pid == y.pid)) return x.pid < y.pid;
    return x.tid < y.tid;
  });
}

void writeKernelClasses(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& /*options*/) {
  w.key("kernel_classes").beginObject();
  w.key("total");
  writeClassTimes(w, s.classes.total, s.deviceTotalNs);
  w.key("streams").beginArray();
  for (const auto& ps : s.classes.streams) {
    int64_t total = 0;
    for (const ClassTime& c : ps.byClass) total = saturatingAdd(total, c.totalNs);
    w.beginObject();
    writeLane(w, t, ps.lane);
    w.key("classes");
    writeClassTimes(w, ps.byClass, total);
    w.endObject();
  }
  w.endArray();
  w.endObject();
}

void writeTemporal(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& /*options*/) {
  writeTemporalObject(w, t, s);
}

void computeIdleBreakdown(const Trace& t, const SummaryOptions& options, Summary& s) {
  s.idle = trace::computeIdleBreakdown(t, options);
}

void writeIdleBreakdown(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options) {
  writeIdleObject(w, t, s, options);
}

void computeLaunches(const Trace& t, const SummaryOptions& options, Summary& s) {
  s.launches = computeLaunchStats(t, options);
}

void writeLaunches(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options) {
  writeLaunchesObject(w, t, s, options);
}

void computeCommunication(const Trace& t, const SummaryOptions& /*options*/, Summary& s) {
  s.communication = trace::computeCommunication(t);
}

void writeCommunication(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& /*options*/) {
  writeCommunicationObject(w, t, s);
}

}  // namespace sections

}  // namespace openreg::trace
