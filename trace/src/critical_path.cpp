// The critical-path graph of one rank's step, in HolisticTraceAnalysis's model
// (its CPGraph, critical_path_analysis.py), read from any backend's trace:
// runtime calls are found by category and linked by correlation, syncs by
// their cuda_sync rows, never by CUDA call names (except HTA's own CUDA-only
// rules: its blocking calls and its runtime lock, kept for CUDA traces).
#include "critical_path.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace openreg::trace {

namespace {

// HTA's CPGraph.BLOCKING_SYNC_CALLS and CUDA_RUNTIME_EVENTS (the calls that take
// CUDA's runtime lock).
constexpr std::string_view kBlockingCalls[] = {
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery", "cudaEventSynchronize", "cudaMemcpy",
    "cudaMemcpyAsync"};
constexpr std::string_view kLockCalls[] = {"cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync"};

template <size_t kCount>
bool oneOf(std::string_view s, const std::string_view (&list)[kCount]) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

bool isDeviceToHostCopy(const Trace& t, uint32_t slice) {
  if (classifyKernel(t, slice) != KernelClass::Memory) return false;
  const std::string_view name = t.str(t.slices[slice].name);
  for (std::string_view mark : {"DtoH", "Device -> Host", "DeviceToHost"})
    if (name.find(mark) != std::string_view::npos) return true;
  return false;
}

// (device pid, stream): one stream of one device.
using StreamKey = std::pair<int64_t, int64_t>;

struct Launch {
  int64_t runtimeTs = 0;
  uint32_t device = 0;  // the device slice
};

}  // namespace

// What every step's graph of one trace reads, built once per trace (so that many steps cost one scan).
struct CpRankIndex {
  std::unordered_set<int64_t> syncCorrelations;  // runtime calls a Stream/Event/Context Sync row waits in
  std::unordered_map<uint32_t, std::vector<uint32_t>> deviceByRuntime;  // runtime slice -> positions in deviceSlices
  std::map<StreamKey, std::vector<Launch>> launchesByStream;
  std::map<std::pair<uint32_t, int64_t>, std::vector<Launch>> launchesByThread;  // (host lane, stream)
  std::unordered_map<uint32_t, int32_t> queueAtLaunch, queueAtStart;             // by device slice
  std::pair<int64_t, int64_t> forwardBackward{-1, -1};
  std::vector<CollectiveInstance> collectives;
};

namespace {

// HTA's _get_fwd_tid/_get_bwd_tid: when exactly one host thread has ops whose
// name mentions "forward" and exactly one other has ops mentioning "autograd",
// the backward thread's ops are walked as if on the forward thread (they run
// while the forward thread waits in backward()). {-1, -1} when not.
std::pair<int64_t, int64_t> forwardBackwardLanes(const Trace& t) {
  std::vector<uint8_t> named(t.strings.size(), 0);  // bit 1: mentions forward, 2: autograd
  for (uint32_t id = 0; id < t.strings.size(); ++id) {
    const std::string_view n = t.str(id);
    named[id] =
        (n.find("forward") != std::string_view::npos ? 1 : 0) | (n.find("autograd") != std::string_view::npos ? 2 : 0);
  }
  const uint32_t cpuOp = t.strings.find("cpu_op"), annotation = t.strings.find("user_annotation");
  std::set<int64_t> tids[2];
  std::map<int64_t, uint32_t> laneOfTid;
  for (const Slice& s : t.slices) {
    if ((s.cat != cpuOp && s.cat != annotation) || s.cat == kNoString || s.name == kNoString || !named[s.name])
      continue;
    const Lane& l = t.lanes[s.lane];
    for (int k = 0; k < 2; ++k)
      if (named[s.name] & (1 << k)) tids[k].insert(l.tid.value), laneOfTid[l.tid.value] = s.lane;
  }
  if (tids[0].size() != 1 || tids[1].size() != 1 || *tids[0].begin() == *tids[1].begin()) return {-1, -1};
  return {laneOfTid[*tids[0].begin()], laneOfTid[*tids[1].begin()]};
}

// Launches per stream (for the work an event record follows) and per host
// thread and stream (for the work a stream wait precedes), and HTA's queue
// length: +1 when a call launches work on the stream, -1 when work starts.
void indexLaunches(const Trace& t, CpRankIndex& ix) {
  auto runtimeOf = [&](const Slice& s) {
    if (!s.correlation.ok()) return kNoSlice;
    auto it = t.runtimeByCorrelation.find(s.correlation.value);
    return it == t.runtimeByCorrelation.end() ? kNoSlice : static_cast<int32_t>(it->second);
  };
  std::map<StreamKey, std::vector<std::pair<int64_t, int32_t>>> changes;  // (ts, +slice+1 launch / -slice-1 start)
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    const int32_t rt = runtimeOf(s);
    if (rt == kNoSlice) continue;
    const Slice& r = t.slices[static_cast<uint32_t>(rt)];
    const StreamKey k{t.lanes[s.lane].pid.value, s.stream.ok() ? s.stream.value : t.lanes[s.lane].tid.value};
    ix.launchesByStream[k].push_back({r.ts, i});
    ix.launchesByThread[{r.lane, k.second}].push_back({r.ts, i});
    changes[k].push_back({r.ts, static_cast<int32_t>(i) + 1});
    changes[k].push_back({s.ts, -static_cast<int32_t>(i) - 1});
  }
  auto byTs = [](const Launch& a, const Launch& b) { return a.runtimeTs < b.runtimeTs; };
  for (auto& [k, v] : ix.launchesByStream) std::stable_sort(v.begin(), v.end(), byTs);
  for (auto& [k, v] : ix.launchesByThread) std::stable_sort(v.begin(), v.end(), byTs);
  for (auto& [k, v] : changes) {
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    int32_t q = 0;
    for (const auto& [ts, what] : v) {
      if (what > 0)
        ix.queueAtLaunch[static_cast<uint32_t>(what - 1)] = ++q;
      else
        ix.queueAtStart[static_cast<uint32_t>(-what - 1)] = --q;
    }
  }
}

class RankBuilder {
 public:
  RankBuilder(CpGraph& g, uint32_t rank, const CpRankIndex& ix, const CpOptions& o)
      : g_(g), rank_(rank), t_(*g.traces[rank]), ix_(ix), step_(g.steps[rank]), options_(o) {}

  void build() {
    selectEvents();
    lockEdges();
    const auto [fwd, bwd] = ix_.forwardBackward;
    for (uint32_t lane = 0; lane < t_.laneSlices.size(); ++lane)
      if (t_.laneKind[lane] == LaneKind::Host && static_cast<int64_t>(lane) != bwd)
        stackEdges(lane, static_cast<int64_t>(lane) == fwd ? bwd : -1);
    deviceEdges();
  }

 private:
  bool inWindow(const Slice& s) const { return s.ts >= step_.start && s.ts <= step_.end && s.dur > 0; }
  int32_t eventOf(uint32_t slice) const {
    auto it = eventOfSlice_.find(slice);
    return it == eventOfSlice_.end() ? -1 : static_cast<int32_t>(it->second);
  }
  const CpNode& node(uint32_t i) const { return g_.nodes[i]; }
  const CpEvent& event(uint32_t i) const { return g_.events[i]; }
  int32_t runtimeOf(const Slice& s) const {
    if (!s.correlation.ok()) return kNoSlice;
    auto it = t_.runtimeByCorrelation.find(s.correlation.value);
    return it == t_.runtimeByCorrelation.end() ? kNoSlice : static_cast<int32_t>(it->second);
  }

  void selectEvents();
  void lockEdges();
  void stackEdges(uint32_t lane, int64_t mergedLane);
  void deviceEdges();
  void syncRow(uint32_t slice);
  void deviceWork(uint32_t ev);
  int32_t previousLaunch(int64_t device, int64_t stream, int64_t beforeTs) const;
  int32_t nextLaunch(uint32_t hostLane, int64_t stream, int64_t afterTs) const;

  CpGraph& g_;
  uint32_t rank_;
  const Trace& t_;
  const CpRankIndex& ix_;
  const CpStep& step_;
  const CpOptions& options_;
  std::unordered_map<uint32_t, uint32_t> eventOfSlice_;
  std::vector<uint32_t> hostEvents_;   // events of host ops and runtime calls
  std::vector<uint32_t> deviceOrder_;  // device events and sync rows, in HTA's processing order
  std::vector<bool> lockEvent_;        // by event index - first event of this rank
  uint32_t firstEvent_ = 0;
  std::map<StreamKey, uint32_t> lastOnStream_;         // end node
  std::unordered_map<uint32_t, uint32_t> kernelSync_;  // dest device slice -> src device slice
  std::unordered_set<uint32_t> waitedCopies_;          // copies their runtime call waited for
};

void RankBuilder::selectEvents() {
  firstEvent_ = static_cast<uint32_t>(g_.events.size());
  const uint32_t annotation = t_.strings.find("user_annotation");
  std::vector<uint32_t> host;  // host ops and runtime calls that start in the step, in file order
  for (uint32_t lane = 0; lane < t_.laneSlices.size(); ++lane) {
    if (t_.laneKind[lane] != LaneKind::Host) continue;
    const auto& v = t_.laneSlices[lane];
    auto it =
        std::lower_bound(v.begin(), v.end(), step_.start, [&](uint32_t i, int64_t ts) { return t_.slices[i].ts < ts; });
    for (; it != v.end() && t_.slices[*it].ts <= step_.end; ++it) {
      const Slice& s = t_.slices[*it];
      const CategoryRole r = t_.role(s.cat);
      if (s.dur > 0 && (r == CategoryRole::Runtime || (r == CategoryRole::Op && s.cat != annotation)))
        host.push_back(*it);
    }
  }
  std::sort(host.begin(), host.end());
  std::vector<uint32_t> device;  // positions in deviceSlices of the work they launched
  for (uint32_t i : host) {
    eventOfSlice_[i] = g_.addEvent(rank_, i, false);
    hostEvents_.push_back(eventOfSlice_[i]);
    if (auto d = ix_.deviceByRuntime.find(i); d != ix_.deviceByRuntime.end())
      device.insert(device.end(), d->second.begin(), d->second.end());
  }
  std::sort(device.begin(), device.end());
  for (uint32_t position : device) {
    const uint32_t i = t_.deviceSlices[position];
    const auto rt = static_cast<uint32_t>(runtimeOf(t_.slices[i]));
    CpEvent& call = g_.events[eventOfSlice_.at(rt)];
    call.launches = true;
    // A device-to-host copy that ended before its call returned: the host waited for its data (a synchronous
    // copy, a copy to pageable memory), whatever the call is named. Not a memset or a copy to the device: those
    // often just run faster than their call returns.
    if (isDeviceToHostCopy(t_, i) && t_.slices[i].end() <= t_.slices[rt].end())
      waitedCopies_.insert(i), call.blocking = true;
    eventOfSlice_[i] = g_.addEvent(rank_, i, true), deviceOrder_.push_back(i);
  }
  for (const SyncArgs& a : t_.syncArgs) {
    if (t_.laneKind[t_.slices[a.slice].lane] == LaneKind::Host) continue;
    const int32_t rt = runtimeOf(t_.slices[a.slice]);
    const bool wait = t_.str(a.kind != kNoString ? a.kind : t_.slices[a.slice].name) == "Stream Wait Event";
    if (rt != kNoSlice && (wait || eventOfSlice_.count(static_cast<uint32_t>(rt)))) deviceOrder_.push_back(a.slice);
  }
  // Device work by start, sync rows by end (HTA: a Stream Sync overlaps the copy it waits for).
  auto key = [&](uint32_t i) {
    const Slice& s = t_.slices[i];
    return t_.isDevice(s) ? s.ts : s.end();
  };
  std::stable_sort(deviceOrder_.begin(), deviceOrder_.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  lockEvent_.assign(g_.events.size() - firstEvent_, false);
  for (uint32_t e = firstEvent_; e < g_.events.size(); ++e) {
    CpEvent& ev = g_.events[e];
    if (ev.device) continue;
    const Slice& s = t_.slices[ev.slice];
    const std::string_view name = t_.str(s.name);
    lockEvent_[e - firstEvent_] = t_.role(s.cat) == CategoryRole::Runtime && oneOf(name, kLockCalls);
    ev.blocking = ev.blocking || oneOf(name, kBlockingCalls) ||
                  (s.correlation.ok() && ix_.syncCorrelations.count(s.correlation.value));
  }
}

// HTA's _construct_graph_from_cuda_runtime_events: calls that take CUDA's runtime
// lock run one at a time, in the order they end, across threads.
void RankBuilder::lockEdges() {
  std::vector<uint32_t> points;
  for (uint32_t e : hostEvents_)
    if (lockEvent_[e - firstEvent_]) points.push_back(event(e).startNode), points.push_back(event(e).endNode);
  std::stable_sort(points.begin(), points.end(), [&](uint32_t a, uint32_t b) {
    if (node(a).ts != node(b).ts) return node(a).ts < node(b).ts;
    return event(node(a).event).slice < event(node(b).event).slice;
  });
  std::vector<uint32_t> starts;
  int64_t last = -1;
  for (uint32_t p : points) {
    if (node(p).isStart) {
      starts.push_back(p);
    } else {
      while (!starts.empty()) {
        const uint32_t s = starts.back();
        starts.pop_back();
        if (node(s).event == node(p).event)
          g_.addEdge(s, p, CpEdgeType::Operator, static_cast<int32_t>(node(p).event));
        else
          g_.addEdge(s, p, CpEdgeType::Dependency);
      }
      if (last >= 0 && !node(static_cast<uint32_t>(last)).isStart)
        g_.addEdge(static_cast<uint32_t>(last), p, CpEdgeType::Dependency);
    }
    last = p;
  }
}

// HTA's _construct_graph_from_call_stack: a depth-first walk of the thread's
// nested ops; each step from one point to the next is an edge, weighted inside
// an op (attributed to it), zero between top-level ops and at the end of a
// blocking call.
void RankBuilder::stackEdges(uint32_t lane, int64_t mergedLane) {
  std::vector<uint32_t> slices;
  for (uint32_t i : t_.laneSlices[lane])
    if (eventOfSlice_.count(i)) slices.push_back(i);
  if (mergedLane >= 0) {
    for (uint32_t i : t_.laneSlices[static_cast<uint32_t>(mergedLane)])
      if (eventOfSlice_.count(i)) slices.push_back(i);
    std::stable_sort(slices.begin(), slices.end(), [&](uint32_t a, uint32_t b) {
      const Slice& x = t_.slices[a];
      const Slice& y = t_.slices[b];
      return x.ts != y.ts ? x.ts < y.ts : x.dur > y.dur;
    });
  }
  std::vector<uint32_t> stack;  // events
  int64_t last = -1;
  auto lock = [&](uint32_t n) { return lockEvent_[node(n).event - firstEvent_]; };
  auto shares = [&](uint32_t a, uint32_t b) { return lock(a) && lock(b) && (node(a).isStart || !node(b).isStart); };
  auto exitTop = [&] {
    const uint32_t e = stack.back();
    stack.pop_back();
    const uint32_t end = event(e).endNode;
    if (last >= 0 && !shares(static_cast<uint32_t>(last), end))
      g_.addEdge(static_cast<uint32_t>(last), end, CpEdgeType::Operator, static_cast<int32_t>(e), event(e).blocking);
    last = end;
  };
  for (uint32_t i : slices) {
    const int32_t ev = eventOf(i);
    const Slice& s = t_.slices[i];
    while (!stack.empty()) {
      const Slice& top = g_.slice(event(stack.back()));
      if (top.ts <= s.ts && s.end() <= top.end()) break;
      exitTop();
    }
    const uint32_t start = event(static_cast<uint32_t>(ev)).startNode;
    if (last >= 0 && !shares(static_cast<uint32_t>(last), start)) {
      if (stack.empty())
        g_.addEdge(static_cast<uint32_t>(last), start, CpEdgeType::Dependency);
      else
        g_.addEdge(static_cast<uint32_t>(last), start, CpEdgeType::Operator, static_cast<int32_t>(stack.back()));
    }
    last = start;
    stack.push_back(static_cast<uint32_t>(ev));
  }
  while (!stack.empty()) exitTop();
}

int32_t RankBuilder::previousLaunch(int64_t device, int64_t stream, int64_t beforeTs) const {
  auto it = ix_.launchesByStream.find({device, stream});
  if (it == ix_.launchesByStream.end()) return kNoSlice;
  const auto& v = it->second;
  auto at =
      std::upper_bound(v.begin(), v.end(), beforeTs, [](int64_t ts, const Launch& l) { return ts < l.runtimeTs; });
  return at == v.begin() ? kNoSlice : static_cast<int32_t>((at - 1)->device);
}

int32_t RankBuilder::nextLaunch(uint32_t hostLane, int64_t stream, int64_t afterTs) const {
  auto it = ix_.launchesByThread.find({hostLane, stream});
  if (it == ix_.launchesByThread.end()) return kNoSlice;
  const auto& v = it->second;
  auto at = std::lower_bound(v.begin(), v.end(), afterTs, [](const Launch& l, int64_t ts) { return l.runtimeTs < ts; });
  return at == v.end() ? kNoSlice : static_cast<int32_t>(at->device);
}

void RankBuilder::deviceEdges() {
  for (uint32_t i : deviceOrder_) {
    if (t_.isDevice(t_.slices[i]))
      deviceWork(eventOfSlice_.at(i));
    else
      syncRow(i);
  }
}

// HTA's handle_cuda_sync.
void RankBuilder::syncRow(uint32_t slice) {
  const Slice& s = t_.slices[slice];
  const SyncArgs* a = t_.syncArgsOf(slice);
  const std::string_view kind = t_.str(a->kind != kNoString ? a->kind : s.name);
  const auto rt = static_cast<uint32_t>(runtimeOf(s));
  const int32_t rtEvent = eventOf(rt);
  const int64_t device = t_.lanes[s.lane].pid.value;
  if (kind == "Stream Wait Event" || kind == "Event Sync") {
    if (!a->waitOnRecordCorrelation.ok() || !a->waitOnStream.ok()) return;
    auto rec = t_.runtimeByCorrelation.find(a->waitOnRecordCorrelation.value);
    if (rec == t_.runtimeByCorrelation.end()) return;
    const int32_t src = previousLaunch(device, a->waitOnStream.value, t_.slices[rec->second].ts);
    if (src == kNoSlice) return;
    if (kind == "Stream Wait Event") {
      if (!s.stream.ok()) return;
      const int32_t dest = nextLaunch(t_.slices[rt].lane, s.stream.value, t_.slices[rt].ts);
      if (dest != kNoSlice) kernelSync_[static_cast<uint32_t>(dest)] = static_cast<uint32_t>(src);
      return;
    }
    const int32_t srcEvent = eventOf(static_cast<uint32_t>(src));
    if (srcEvent >= 0 && rtEvent >= 0)
      g_.addEdge(event(static_cast<uint32_t>(srcEvent)).endNode, event(static_cast<uint32_t>(rtEvent)).endNode,
                 CpEdgeType::Sync);
    return;
  }
  if (rtEvent < 0) return;
  const uint32_t hostEnd = event(static_cast<uint32_t>(rtEvent)).endNode;
  if (kind == "Context Sync") {
    for (const auto& [k, end] : lastOnStream_)
      if (k.first == device) g_.addEdge(end, hostEnd, CpEdgeType::Sync);
  } else if (kind == "Stream Sync" && s.stream.ok()) {
    auto it = lastOnStream_.find({device, s.stream.value});
    if (it != lastOnStream_.end()) g_.addEdge(it->second, hostEnd, CpEdgeType::Sync);
  }
}

// HTA's loop over GPU kernels: the work's span, a wait scheduled by a stream
// wait, then a launch delay when the stream was empty at launch, else the gap
// after the previous work on the stream.
void RankBuilder::deviceWork(uint32_t ev) {
  const CpEvent e = event(ev);
  const Slice& s = t_.slices[e.slice];
  g_.addEdge(e.startNode, e.endNode, CpEdgeType::Operator, static_cast<int32_t>(ev));
  const StreamKey k{t_.lanes[s.lane].pid.value, s.stream.ok() ? s.stream.value : t_.lanes[s.lane].tid.value};
  const auto lastIt = lastOnStream_.find(k);
  const int64_t lastEnd = lastIt == lastOnStream_.end() ? INT64_MIN : node(lastIt->second).ts;
  int64_t syncEnd = INT64_MIN;
  bool syncPending = false;
  if (auto ks = kernelSync_.find(e.slice); ks != kernelSync_.end()) {
    const int32_t src = eventOf(ks->second);
    if (src >= 0) {
      const uint32_t srcEnd = event(static_cast<uint32_t>(src)).endNode;
      g_.addEdge(srcEnd, e.startNode, CpEdgeType::Sync);
      syncEnd = node(srcEnd).ts;
      syncPending = true;
    }
    kernelSync_.erase(ks);
  }
  const auto rt = static_cast<uint32_t>(runtimeOf(s));
  const CpEvent& launch = event(eventOfSlice_.at(rt));
  const int64_t launchTs = t_.slices[rt].ts;
  const auto ql = ix_.queueAtLaunch.find(e.slice), qs = ix_.queueAtStart.find(e.slice);
  const bool emptyQueue =
      ql != ix_.queueAtLaunch.end() && ql->second == 1 && qs != ix_.queueAtStart.end() && qs->second == 0;
  if (emptyQueue && lastEnd < launchTs && (!syncPending || syncEnd < launchTs)) {
    g_.addEdge(launch.startNode, e.startNode, CpEdgeType::LaunchDelay);
  } else if (lastIt != lastOnStream_.end() && s.ts - lastEnd < options_.kernelKernelMaxGapNs &&
             (!syncPending || syncEnd < lastEnd)) {
    g_.addEdge(lastIt->second, e.startNode, CpEdgeType::KernelKernel, static_cast<int32_t>(node(lastIt->second).event));
  }
  if (waitedCopies_.count(e.slice)) g_.addEdge(e.endNode, launch.endNode, CpEdgeType::Sync);
  lastOnStream_[k] = e.endNode;
}

// The k-th host range named `name` (by start), over host lanes.
// The `instance`-th step named `name` (Trace::steps: ProfilerSteps, or an
// on-demand trace's optimizer steps), else the `instance`-th host range of
// that name (by start); nullopt when neither.
std::optional<CpStep> findStep(const Trace& t, std::string_view name, int64_t instance) {
  if (const Step* step = t.stepNamed(name, instance))
    return CpStep{step->range == kNoSlice ? CpStep::kWholeTrace : static_cast<uint32_t>(step->range), step->ts,
                  step->end};
  const uint32_t id = t.strings.find(name);
  if (id == kNoString) return std::nullopt;
  std::vector<uint32_t> found;
  for (uint32_t i = 0; i < t.slices.size(); ++i)
    if (t.slices[i].name == id && t.laneKind[t.slices[i].lane] == LaneKind::Host) found.push_back(i);
  std::stable_sort(found.begin(), found.end(), [&](uint32_t a, uint32_t b) { return t.slices[a].ts < t.slices[b].ts; });
  if (instance < 0 || static_cast<size_t>(instance) >= found.size()) return std::nullopt;
  const Slice& range = t.slices[found[instance]];
  return CpStep{found[instance], range.ts, range.end()};
}

// Another rank's step for the first rank's optimizer step (an on-demand trace's): the one overlapping it most in
// time. Their numbers agree only when both traces started on the same iteration (Kineto's count, which a
// duration-based request does not give); ranks step together (their collectives hold them), so the same step
// on two ranks overlaps for most of the shorter one, while a neighbour overlaps only by the ranks' skew. Throws
// CpStepMissing when no step overlaps the first rank's for half the shorter of the two (this rank's trace
// began after, or ended before, that step: the windows of the ranks' traces differ at their edges).
std::optional<CpStep> overlappingStep(const Trace& t, const CpStep& first, const std::string& firstLabel,
                                      const std::string& label) {
  const Step* best = nullptr;
  int64_t bestOverlap = 0;
  for (const Step& step : t.steps) {
    const int64_t overlap = std::min(step.end, first.end) - std::max(step.ts, first.start);
    const int64_t shorter = std::min(step.end - step.ts, first.end - first.start);
    if (overlap > bestOverlap && 2 * overlap >= shorter) best = &step, bestOverlap = overlap;
  }
  if (!best)
    throw CpStepMissing(label + " has no step at the time of " + firstLabel +
                        "'s: the ranks' on-demand traces cover different stretches (ask every rank in one "
                        "request, with dyno's --profile-start-time or --profile-start-iteration-roundup)");
  return CpStep{CpStep::kWholeTrace, best->ts, best->end};
}

// The first start and the last end of the trace's events.
std::pair<int64_t, int64_t> traceSpan(const Trace& t) {
  std::pair<int64_t, int64_t> span{INT64_MAX, INT64_MIN};
  for (const Slice& s : t.slices) span.first = std::min(span.first, s.ts), span.second = std::max(span.second, s.end());
  return span;
}

std::string rankLabel(const std::vector<const Trace*>& traces, size_t i) {
  if (traces.size() == 1) return "the trace";
  const auto& r = traces[i]->rank;
  std::string label = r ? "rank " : "rank #";  // appended, not "rank " + ...: GCC 12 warns falsely (-Wrestrict)
  return label.append(std::to_string(r ? *r : static_cast<int64_t>(i)));
}

// The name of the step the options ask for: a range, the step numbered <step>, or the first step of `first`.
std::string stepNameOf(const CpOptions& o, const std::vector<const Trace*>& first, const std::string& label) {
  std::string name;
  if (!o.range.empty())
    name = o.range;
  else if (o.step >= 0)
    name = stepNamedByNumber(first, o.step);
  else
    for (size_t i = 0; i < first.size() && name.empty(); ++i) name = firstStepName(*first[i]);
  if (name.empty())
    throw std::invalid_argument("no steps in " + label +
                                " (no ProfilerStep#N ranges, nor the Optimizer.step# ranges "
                                "an on-demand trace's steps are read off): name a record_function range with --range "
                                "NAME, or take the whole trace with --whole-trace");
  return name;
}

void findWholeTraceSteps(CpGraph& g) {
  g.stepName = "whole trace";
  for (const Trace* t : g.traces) {
    CpStep s;
    std::tie(s.start, s.end) = traceSpan(*t);
    g.steps.push_back(s);
  }
}

// The other ranks' steps are matched to the first rank's by time: an on-demand trace's optimizer steps, which
// have no number the ranks share (overlappingStep).
bool stepsMatchedByTime(const CpGraph& g, const CpOptions& o) {
  return o.range.empty() && g.traces[0]->stepSource == StepSource::OptimizerSteps;
}

// Every rank's window of the step g.stepName: by name, or, for an on-demand trace's steps, by time.
void findNamedSteps(CpGraph& g, const CpOptions& o) {
  const auto& traces = g.traces;
  g.steps.clear();
  for (size_t i = 0; i < traces.size(); ++i) {
    const int64_t instance = o.range.empty() ? 0 : i < o.rankInstances.size() ? o.rankInstances[i] : o.instance;
    const bool byTime = i > 0 && stepsMatchedByTime(g, o);
    const std::optional<CpStep> step =
        byTime ? overlappingStep(*traces[i], g.steps[0], rankLabel(traces, 0), rankLabel(traces, i))
               : findStep(*traces[i], g.stepName, instance);
    if (!step)
      throw CpStepMissing("\"" + g.stepName + "\"" +
                          (instance ? " (instance " + std::to_string(instance) + ")" : std::string()) + " is not in " +
                          rankLabel(traces, i) + ": no host range of that name");
    g.steps.push_back(*step);
  }
}

// The default step of ranks' on-demand traces: the first of the first rank's steps that every rank's trace holds
// (the ranks' windows differ at their edges). Throws the first step's CpStepMissing when none is in every trace.
void findFirstCommonStep(CpGraph& g, const CpOptions& o) {
  std::optional<CpStepMissing> firstMissing;
  for (const Step& step : g.traces[0]->steps) {
    g.stepName = std::string(g.traces[0]->str(step.name));
    try {
      findNamedSteps(g, o);
      return;
    } catch (const CpStepMissing& e) {
      if (!firstMissing) firstMissing = e;
    }
  }
  throw *firstMissing;
}

void findSteps(CpGraph& g, const CpOptions& o) {
  if (o.wholeTrace) return findWholeTraceSteps(g);
  g.stepName = stepNameOf(o, {g.traces[0]}, rankLabel(g.traces, 0));
  if (o.step < 0 && g.traces.size() > 1 && stepsMatchedByTime(g, o)) return findFirstCommonStep(g, o);
  findNamedSteps(g, o);
}

// Rank traces must be one run: one world size and distinct ranks (checked before looking for the step)...
void checkRanks(const std::vector<const Trace*>& traces) {
  std::unordered_set<int64_t> ranks;
  for (size_t i = 0; i < traces.size() && traces.size() > 1; ++i) {
    const Trace& t = *traces[i];
    if (t.worldSize != traces[0]->worldSize)
      throw std::invalid_argument("rank traces from different runs: " + rankLabel(traces, 0) + " has world size " +
                                  (traces[0]->worldSize ? std::to_string(*traces[0]->worldSize) : "unknown") + ", " +
                                  rankLabel(traces, i) + " " +
                                  (t.worldSize ? std::to_string(*t.worldSize) : "unknown"));
    if (t.rank && !ranks.insert(*t.rank).second)
      throw std::invalid_argument("rank traces from different runs: two traces of rank " + std::to_string(*t.rank) +
                                  " (several profiling cycles or runs in one folder? give one trace per rank)");
  }
}

// ... profiled at the same time: their traces overlap (a rank's range need not overlap another's: ranks out of
// step run the same range at different times).
void checkSameRun(const std::vector<const Trace*>& traces) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const Trace* t : traces) spans.push_back(traceSpan(*t));
  for (size_t i = 1; i < traces.size(); ++i) {
    if (std::max(spans[0].first, spans[i].first) <= std::min(spans[0].second, spans[i].second)) continue;
    throw std::invalid_argument("rank traces from different runs: " + rankLabel(traces, 0) + " and " +
                                rankLabel(traces, i) + " were not recorded at the same time (they start at " +
                                formatUs(spans[0].first) + " us and " + formatUs(spans[i].first) + " us)");
  }
}

// Steps, else host ranges, named `name` in the trace.
int64_t countHostRanges(const Trace& t, std::string_view name) {
  const uint32_t id = t.strings.find(name);
  if (id == kNoString) return 0;
  int64_t n = 0;
  for (const Step& step : t.steps) n += step.name == id;
  if (n > 0) return n;
  for (const Slice& s : t.slices) n += s.name == id && t.laneKind[s.lane] == LaneKind::Host;
  return n;
}

// The traces given, grouped by rank (a trace without distributedInfo is a rank of its own), in the order of each
// rank's first trace; each group in time order.
std::vector<std::vector<uint32_t>> rankGroups(const std::vector<const Trace*>& traces) {
  std::vector<std::vector<uint32_t>> groups;
  std::unordered_map<int64_t, size_t> groupOfRank;
  for (uint32_t i = 0; i < traces.size(); ++i) {
    const std::optional<int64_t>& rank = traces[i]->rank;
    if (rank) {
      const auto [it, fresh] = groupOfRank.emplace(*rank, groups.size());
      if (!fresh) {
        groups[it->second].push_back(i);
        continue;
      }
    }
    groups.push_back({i});
  }
  for (auto& group : groups)
    std::stable_sort(group.begin(), group.end(),
                     [&](uint32_t a, uint32_t b) { return traces[a]->originNs < traces[b]->originNs; });
  return groups;
}

std::string groupLabel(const std::vector<const Trace*>& traces, const std::vector<uint32_t>& group) {
  const auto& r = traces[group[0]]->rank;
  return (r ? "rank " + std::to_string(*r) : "trace #" + std::to_string(group[0])) + "'s " +
         std::to_string(group.size()) + " traces";
}

}  // namespace

std::string stepNamedByNumber(const std::vector<const Trace*>& traces, int64_t n) {
  for (const Trace* t : traces)
    for (const Step& step : t->steps)
      if (step.number == n) return std::string(t->str(step.name));
  return "ProfilerStep#" + std::to_string(n);
}

std::string firstStepName(const Trace& t) {
  return t.steps.empty() ? std::string() : std::string(t.str(t.steps[0].name));
}

CpTraceChoice chooseRankTraces(const std::vector<const Trace*>& traces, const CpOptions& o) {
  CpTraceChoice choice;
  const std::vector<std::vector<uint32_t>> groups = rankGroups(traces);
  if (groups.size() == traces.size()) {
    for (uint32_t i = 0; i < traces.size(); ++i) choice.traces.push_back(i);
    return choice;
  }
  if (o.wholeTrace)
    throw std::invalid_argument("the whole trace of several traces of one rank (" + groupLabel(traces, groups[0]) +
                                "?): give one trace per rank, or name a step");
  std::vector<const Trace*> first;
  for (uint32_t i : groups[0]) first.push_back(traces[i]);
  const std::string name = stepNameOf(o, first, groupLabel(traces, groups[0]));
  for (const auto& group : groups) {
    int64_t wanted = o.range.empty() ? 0 : o.instance, holders = 0;
    for (uint32_t i : group) {
      const int64_t n = countHostRanges(*traces[i], name);
      if (wanted >= 0 && wanted < n) choice.traces.push_back(i), choice.instances.push_back(wanted);
      wanted -= n;
      holders += n > 0;
    }
    if (wanted >= 0)
      throw CpStepMissing("\"" + name + "\"" + (o.instance ? " (instance " + std::to_string(o.instance) + ")" : "") +
                          " is not in " + groupLabel(traces, group) + ": no host range of that name");
    if (o.range.empty() && holders > 1)
      throw std::invalid_argument("rank traces from different runs: " + std::to_string(holders) + " of " +
                                  groupLabel(traces, group) + " hold " + name + " (give the traces of one run)");
  }
  return choice;
}

const char* cpEdgeTypeName(CpEdgeType t) {
  switch (t) {
    case CpEdgeType::Operator:
      return "operator";
    case CpEdgeType::Dependency:
      return "dependency";
    case CpEdgeType::LaunchDelay:
      return "launch_delay";
    case CpEdgeType::KernelKernel:
      return "kernel_kernel_delay";
    case CpEdgeType::Sync:
      return "sync_dependency";
    case CpEdgeType::Collective:
      return "collective";
  }
  return "?";
}

uint32_t CpGraph::addEvent(uint32_t rank, uint32_t slice, bool device) {
  const Slice& s = traces[rank]->slices[slice];
  CpEvent e;
  e.rank = rank;
  e.slice = slice;
  e.device = device;
  const auto id = static_cast<uint32_t>(events.size());
  e.startNode = static_cast<uint32_t>(nodes.size());
  nodes.push_back({s.ts, id, true});
  e.endNode = static_cast<uint32_t>(nodes.size());
  nodes.push_back({s.end(), id, false});
  events.push_back(e);
  return id;
}

void CpGraph::addEdge(uint32_t from, uint32_t to, CpEdgeType type, int32_t event, bool zeroWeight) {
  const bool weighted = !zeroWeight && type != CpEdgeType::Dependency && type != CpEdgeType::Sync;
  // HTA drops sub-microsecond negative weights (ns rounding); a later point never shortens the path.
  int64_t gap = 0;
  if (__builtin_sub_overflow(nodes[to].ts, nodes[from].ts, &gap)) gap = nodes[to].ts > nodes[from].ts ? INT64_MAX : 0;
  const int64_t w = weighted ? std::max<int64_t>(0, gap) : 0;
  edges.push_back({from, to, w, event, type});
}

std::shared_ptr<const CpRankIndex> indexForCriticalPath(const Trace& t) {
  auto ix = std::make_shared<CpRankIndex>();
  for (const SyncArgs& a : t.syncArgs) {
    const std::string_view kind = t.str(a.kind != kNoString ? a.kind : t.slices[a.slice].name);
    if (kind == "Stream Sync" || kind == "Event Sync" || kind == "Context Sync")
      if (t.slices[a.slice].correlation.ok()) ix->syncCorrelations.insert(t.slices[a.slice].correlation.value);
  }
  for (uint32_t position = 0; position < t.deviceSlices.size(); ++position) {
    const Slice& s = t.slices[t.deviceSlices[position]];
    if (!s.correlation.ok()) continue;
    auto rt = t.runtimeByCorrelation.find(s.correlation.value);
    if (rt != t.runtimeByCorrelation.end()) ix->deviceByRuntime[rt->second].push_back(position);
  }
  indexLaunches(t, *ix);
  ix->forwardBackward = forwardBackwardLanes(t);
  ix->collectives = computeCommunication(t).instances;
  return ix;
}

const std::vector<CollectiveInstance>& collectivesOf(const CpGraph& g, uint32_t rank) {
  return g.indexes[rank]->collectives;
}

CpGraph buildRankGraphs(const std::vector<const Trace*>& traces, const CpOptions& options,
                        const std::vector<std::shared_ptr<const CpRankIndex>>& indexes) {
  if (traces.empty()) throw std::invalid_argument("no trace given");
  CpGraph g;
  g.traces = traces;
  for (size_t i = 0; i < traces.size(); ++i)
    if (traces[i]->deviceSlices.empty())
      throw std::invalid_argument(rankLabel(traces, i) +
                                  " has no device rows (no kernel, copy or memset events): the critical path "
                                  "follows host work into the device, so it needs a trace with device activity");
  checkRanks(traces);
  g.indexes = indexes;
  for (uint32_t r = static_cast<uint32_t>(g.indexes.size()); r < traces.size(); ++r)
    g.indexes.push_back(indexForCriticalPath(*traces[r]));
  checkSameRun(traces);
  findSteps(g, options);
  for (uint32_t r = 0; r < traces.size(); ++r) RankBuilder(g, r, *g.indexes[r], options).build();
  return g;
}

}  // namespace openreg::trace
