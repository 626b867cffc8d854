// Each step of prepareTrace and emitTrace on its own (trace_steps.h);
// test_trace_builder.cpp checks the two stages end to end.
#include "trace_steps.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "openreg/activity.h"

using namespace openreg::profiler;
using namespace openreg::profiler::steps;

namespace {

RuntimeCall call(uint64_t corr, uint64_t start, uint64_t end = 0) {
  RuntimeCall c;
  c.correlationId = corr;
  c.start = start;
  c.end = end != 0 ? end : start + 10;
  c.processId = 7;
  c.threadId = 8;
  c.name = "orLaunchKernel";
  return c;
}

DeviceOp kernel(uint64_t corr, int32_t device, uint64_t stream, uint64_t start, uint64_t end) {
  DeviceOp d;
  d.kind = DeviceOpKind::Kernel;
  d.correlationId = corr;
  d.device = device;
  d.stream = stream;
  d.start = start;
  d.end = end;
  d.name = "k";
  return d;
}

PreparedDeviceOp prepared(const DeviceOp& op, int64_t start, int64_t end, int32_t runtimeIndex = -1,
                          int32_t traceId = kFirstTraceId) {
  PreparedDeviceOp p;
  p.op = &op;
  p.start = start;
  p.end = end;
  p.runtimeIndex = runtimeIndex;
  p.traceId = traceId;
  return p;
}

EmitOptions window(int64_t start, int64_t end) {
  EmitOptions o;
  o.windowStart = start;
  o.windowEnd = end;
  return o;
}

}  // namespace

// ---- merging ----

TEST(TraceSteps, RunStartsCutWhereOrderBreaks) {
  const std::vector<int> items = {1, 2, 2, 0, 5, 3, 4};
  EXPECT_EQ(runStarts(items, std::less<int>()), (std::vector<size_t>{0, 3, 5}));
  EXPECT_TRUE(runStarts(std::vector<int>{}, std::less<int>()).empty());
}

TEST(TraceSteps, MergeRunsIsStableAcrossRuns) {
  // (key, tag): equal keys come out lower run first.
  const std::vector<std::vector<std::pair<int, char>>> runs = {
      {{1, 'a'}, {3, 'a'}, {5, 'a'}}, {{1, 'b'}, {2, 'b'}}, {}, {{3, 'c'}, {9, 'c'}}};
  std::vector<size_t> lengths;
  for (const auto& r : runs) lengths.push_back(r.size());
  std::string out;
  mergeRuns(
      lengths, [&](size_t run, size_t i) { return runs[run][i]; },
      [](const auto& x, const auto& y) { return x.first < y.first; },
      [&](size_t run, size_t i) { out += std::to_string(runs[run][i].first) + runs[run][i].second; });
  EXPECT_EQ(out, "1a1b2b3a3c5a9c");
}

TEST(TraceSteps, SortRunsMergesFewRunsAndSortsManyStably) {
  std::vector<std::pair<int, int>> items;
  for (int i = 0; i < 200; ++i) items.push_back({i, 0});
  for (int i = 0; i < 200; ++i) items.push_back({i, 1});
  auto byFirst = [](const auto& a, const auto& b) { return a.first < b.first; };
  sortRuns(items, byFirst);
  ASSERT_EQ(items.size(), 400u);
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(items[i], std::make_pair(static_cast<int>(i / 2), static_cast<int>(i % 2)));
  }
  std::vector<std::pair<int, int>> many = {{3, 0}, {1, 0}, {3, 1}, {2, 0}, {1, 1}};  // many short runs
  sortRuns(many, byFirst);
  EXPECT_EQ(many, (std::vector<std::pair<int, int>>{{1, 0}, {1, 1}, {2, 0}, {3, 0}, {3, 1}}));
}

// ---- prepare ----

TEST(TraceSteps, CorrelationIndexDenseAndSparse) {
  CorrelationIndex dense(100, 109, 10);
  EXPECT_TRUE(dense.dense());
  EXPECT_TRUE(dense.insert(105, 3));
  EXPECT_FALSE(dense.insert(105, 4));
  EXPECT_EQ(dense.find(105), 3u);
  EXPECT_EQ(dense.find(99), CorrelationIndex::kMissing);
  EXPECT_EQ(dense.find(110), CorrelationIndex::kMissing);

  CorrelationIndex sparse(1, 1ull << 50, 3);
  EXPECT_FALSE(sparse.dense());
  EXPECT_TRUE(sparse.insert(1, 0));
  EXPECT_TRUE(sparse.insert(1ull << 50, 1));
  EXPECT_FALSE(sparse.insert(1, 9));
  EXPECT_EQ(sparse.find(1ull << 50), 1u);
  EXPECT_EQ(sparse.find(0), CorrelationIndex::kMissing);
  EXPECT_EQ(sparse.find(12345), CorrelationIndex::kMissing);
}

TEST(TraceSteps, ExternalIdsJoinByKindLaterWins) {
  ChunkedVector<ExternalRecord> external;
  external.push_back({5, 100, OR_EXTERNAL_CORRELATION_KIND_OPERATOR});
  external.push_back({5, 7, OR_EXTERNAL_CORRELATION_KIND_USER});
  external.push_back({5, 101, OR_EXTERNAL_CORRELATION_KIND_OPERATOR});
  external.push_back({0, 55, OR_EXTERNAL_CORRELATION_KIND_OPERATOR});  // no correlation: ignored
  const ExternalJoin join = joinExternalIds(external);
  EXPECT_EQ(join.of(5).op, 101u);
  EXPECT_EQ(join.of(5).user, 7u);
  EXPECT_EQ(join.of(0).op, 0u);
  EXPECT_EQ(join.of(6).op, 0u);
  EXPECT_EQ(join.ids.size(), 1u);
}

TEST(TraceSteps, ClockMapsCountTheirSamples) {
  std::unordered_map<int32_t, std::vector<ClockPoint>> samples;
  samples[0] = {{1000, 10, 0}, {2000, 1010, 0}};
  samples[1] = {{1000, 10, 0}};
  PrepareStats stats;
  const ClockMaps maps = buildClockMaps(samples, stats);
  EXPECT_EQ(maps.size(), 2u);
  EXPECT_EQ(stats.clockSamples, 3u);
  EXPECT_EQ(maps.at(0).toHost(510), 1500);
}

TEST(TraceSteps, RuntimeCallsByStartFirstOfEachCorrelation) {
  ChunkedVector<RuntimeCall> calls;
  calls.push_back(call(1, 300));
  calls.push_back(call(2, 100));  // a second thread's run
  calls.push_back(call(1, 200));  // delivered twice
  calls.push_back(call(0, 150));  // no correlation: kept
  ChunkedVector<ExternalRecord> external;
  external.push_back({2, 42, OR_EXTERNAL_CORRELATION_KIND_OPERATOR});
  PreparedTrace out;
  const CorrelationIndex byCorr = orderRuntimeCalls(calls, joinExternalIds(external), out);
  ASSERT_EQ(out.runtime.size(), 3u);
  EXPECT_EQ(out.runtime[0].call->start, 100u);
  EXPECT_EQ(out.runtime[0].externalOp, 42u);
  EXPECT_EQ(out.runtime[1].call->start, 150u);
  EXPECT_EQ(out.runtime[2].call->start, 200u) << "the earlier of the two copies is kept";
  EXPECT_EQ(out.stats.duplicateRecords, 1u);
  EXPECT_EQ(byCorr.find(1), 2u);
  EXPECT_EQ(byCorr.find(2), 0u);
}

TEST(TraceSteps, HostSyncsJoinTheirCalls) {
  ChunkedVector<RuntimeCall> calls;
  calls.push_back(call(1, 100));
  calls.push_back(call(2, 200));
  ChunkedVector<HostSync> syncs;
  const HostSync sync{.syncType = OR_ACTIVITY_SYNC_EVENT, .device = 0, .correlationId = 2, .recordCorrelationId = 1};
  syncs.push_back(sync);
  syncs.push_back(sync);  // twice
  PreparedTrace out;
  const CorrelationIndex byCorr = orderRuntimeCalls(calls, ExternalJoin{}, out);
  joinHostSyncs(syncs, byCorr, out);
  ASSERT_EQ(out.hostSyncs.size(), 1u);
  EXPECT_EQ(out.stats.duplicateRecords, 1u);
  EXPECT_EQ(out.runtime[0].syncIndex, -1);
  EXPECT_EQ(out.runtime[1].syncIndex, 0);
  EXPECT_EQ(out.hostSyncs[0].runtimeIndex, 1);
  EXPECT_EQ(out.hostSyncs[0].recordIndex, 0) << "the record call it waited on";
}

TEST(TraceSteps, DeviceOpsMappedJoinedAndDeduplicated) {
  ChunkedVector<DeviceOp> ops;
  ops.push_back(kernel(1, 0, 1, 110, 120));
  ops.push_back(kernel(1, 0, 1, 110, 120));  // twice
  ops.push_back(kernel(2, 3, 1, 110, 120));  // device 3 has no clock
  ops.push_back(kernel(4, 0, 1, 150, 140));  // ends before it starts
  std::unordered_map<int32_t, std::vector<ClockPoint>> samples;
  samples[0] = {{1000, 100, 0}, {2000, 1100, 0}};  // host = device + 900
  PrepareStats clockStats;
  const ClockMaps clocks = buildClockMaps(samples, clockStats);
  ChunkedVector<ExternalRecord> external;
  external.push_back({1, 42, OR_EXTERNAL_CORRELATION_KIND_OPERATOR});
  external.push_back({1, 9, OR_EXTERNAL_CORRELATION_KIND_USER});
  CorrelationIndex runtimeByCorr(1, 4, 4);
  runtimeByCorr.insert(1, 5);
  PreparedTrace out;
  mapDeviceOps(ops, clocks, joinExternalIds(external), runtimeByCorr, out);
  ASSERT_EQ(out.deviceOps.size(), 2u);
  EXPECT_EQ(out.stats.duplicateRecords, 1u);
  EXPECT_EQ(out.stats.unmappedDeviceOps, 1u);
  EXPECT_EQ(out.deviceOps[0].start, 1010);
  EXPECT_EQ(out.deviceOps[0].end, 1020);
  EXPECT_EQ(out.deviceOps[0].runtimeIndex, 5);
  EXPECT_EQ(out.deviceOps[0].external.op, 42u);
  EXPECT_EQ(out.deviceOps[0].external.user, 9u);
  EXPECT_EQ(out.deviceOps[1].runtimeIndex, -1);
  EXPECT_EQ(out.deviceOps[1].end, out.deviceOps[1].start) << "an end before the start is clamped";
}

TEST(TraceSteps, TraceIdsInSubmissionOrder) {
  ChunkedVector<RuntimeCall> calls;
  calls.push_back(call(1, 100));
  calls.push_back(call(2, 300));
  PreparedTrace out;
  orderRuntimeCalls(calls, ExternalJoin{}, out);
  const DeviceOp a = kernel(1, 0, 1, 0, 0), b = kernel(9, 0, 1, 0, 0), c = kernel(8, 0, 1, 0, 0);
  out.deviceOps.push_back(prepared(a, 110, 120, /*runtimeIndex=*/0, 0));
  out.deviceOps.push_back(prepared(b, 200, 210, -1, 0));  // unlaunched, between the two launches
  out.deviceOps.push_back(prepared(c, 400, 410, -1, 0));  // unlaunched, after both
  assignTraceIds(out);
  EXPECT_EQ(out.runtime[0].traceId, kFirstTraceId);
  EXPECT_EQ(out.deviceOps[0].traceId, kFirstTraceId) << "work shares its launch's id";
  EXPECT_EQ(out.deviceOps[1].traceId, kFirstTraceId + 1);
  EXPECT_EQ(out.runtime[1].traceId, kFirstTraceId + 2);
  EXPECT_EQ(out.deviceOps[2].traceId, kFirstTraceId + 3);
}

// ---- emit ----

TEST(TraceSteps, RuntimeSelectionCountsWhatIsLeftOut) {
  ChunkedVector<RuntimeCall> calls;
  calls.push_back(call(1, 50));   // before the window
  calls.push_back(call(2, 110));  // before notBefore
  calls.push_back(call(3, 200));  // emitted
  calls.push_back(call(4, 995));  // ends past the window
  PreparedTrace trace;
  orderRuntimeCalls(calls, ExternalJoin{}, trace);
  EmitOptions o = window(100, 1000);
  o.notBefore = 150;
  EmitStats stats;
  const RuntimeSelection s = selectRuntime(trace, o, stats);
  EXPECT_EQ(s.inWindow, (std::vector<char>{0, 1, 1, 0}));
  EXPECT_EQ(s.emitted, (std::vector<char>{0, 0, 1, 0}));
  EXPECT_EQ(stats.outOfWindow, 2u);
  EXPECT_EQ(stats.beforeRequestedStart, 1u);
  o.runtime = false;
  EmitStats off;
  EXPECT_EQ(selectRuntime(trace, o, off).emitted, (std::vector<char>{0, 0, 0, 0}));
  EXPECT_EQ(off.notRequested, 4u);
}

TEST(TraceSteps, RowWorkByRowWithCausalityFixed) {
  ChunkedVector<RuntimeCall> calls;
  calls.push_back(call(1, 300));
  PreparedTrace trace;
  orderRuntimeCalls(calls, ExternalJoin{}, trace);
  DeviceOp copy = kernel(2, 0, 2, 0, 0);
  copy.kind = DeviceOpKind::Memcpy;
  const DeviceOp k1 = kernel(1, 0, 1, 0, 0), k2 = kernel(3, 1, 1, 0, 0), late = kernel(4, 0, 1, 0, 0);
  trace.deviceOps.push_back(prepared(k1, 290, 310, /*runtimeIndex=*/0));  // mapped 10 ns before its launch
  trace.deviceOps.push_back(prepared(copy, 320, 330));
  trace.deviceOps.push_back(prepared(k2, 340, 350));
  trace.deviceOps.push_back(prepared(late, 990, 1200));  // ends after the window
  EmitOptions o = window(100, 1000);
  o.memcpy = false;  // still kept, for the spans
  EmitStats stats;
  const RowMap rows = selectRowWork(trace, o, {1}, stats);
  ASSERT_EQ(rows.size(), 3u);
  const auto& row01 = rows.at({0, 1});
  ASSERT_EQ(row01.size(), 1u);
  EXPECT_EQ(row01[0].start, 300);
  EXPECT_EQ(row01[0].end(trace), 310);
  EXPECT_TRUE(row01[0].emit);
  ASSERT_EQ(rows.at({0, 2}).size(), 1u);
  EXPECT_FALSE(rows.at({0, 2})[0].emit);
  EXPECT_EQ(stats.causalityFixes, 1u);
  EXPECT_EQ(stats.maxCausalityFixNs, 10);
  EXPECT_EQ(stats.notRequested, 1u);
  EXPECT_EQ(stats.outOfWindow, 1u);
  EXPECT_EQ(stats.launchedInWindowButOutside, 0u) << "its launch is unknown";

  o.userAnnotations = false;  // then nothing keeps the copy
  EmitStats noSpans;
  EXPECT_EQ(selectRowWork(trace, o, {1}, noSpans).count({0, 2}), 0u);
}

TEST(TraceSteps, FixCausalityMovesOnlyEarlyStarts) {
  const DeviceOp k = kernel(1, 0, 1, 0, 0);
  PreparedTrace trace;
  trace.deviceOps = {prepared(k, 100, 105), prepared(k, 120, 130), prepared(k, 110, 115)};
  EmitStats stats;
  RowWork early{100, 0, true};
  EXPECT_TRUE(fixCausality(early, 110, stats));
  EXPECT_EQ(early.start, 110);
  EXPECT_EQ(early.end(trace), 110) << "a start moved past the end takes the end along";
  RowWork fine{120, 1, true};
  EXPECT_FALSE(fixCausality(fine, 110, stats));
  EXPECT_EQ(fine.start, 120);
  EXPECT_EQ(fine.end(trace), 130);
  RowWork atLaunch{110, 2, true};
  EXPECT_FALSE(fixCausality(atLaunch, 110, stats));
  EXPECT_EQ(stats.causalityFixes, 1u);
  EXPECT_EQ(stats.maxCausalityFixNs, 10);
}

TEST(TraceSteps, FixRowsSortsAndRemovesOverlaps) {
  const DeviceOp k = kernel(1, 0, 1, 0, 0);
  PreparedTrace trace;
  trace.deviceOps = {prepared(k, 30, 40), prepared(k, 10, 20), prepared(k, 15, 25), prepared(k, 18, 19)};
  RowMap rows;
  rows[{0, 1}] = {{30, 0, true}, {10, 1, true}, {15, 2, true}, {18, 3, true}};
  EmitStats stats;
  fixRows(rows, trace, stats);
  const auto& row = rows[{0, 1}];
  std::vector<std::pair<int64_t, int64_t>> times;
  for (const auto& w : row) times.push_back({w.start, w.end(trace)});
  EXPECT_EQ(times, (std::vector<std::pair<int64_t, int64_t>>{{10, 20}, {20, 25}, {25, 25}, {30, 40}}));
  EXPECT_EQ(stats.rowOverlapFixes, 2u);
}

TEST(TraceSteps, FlowsNeedBothEndsEmitted) {
  const DeviceOp k = kernel(1, 0, 1, 0, 0);
  const PreparedDeviceOp launched = prepared(k, 10, 20, 0), hidden = prepared(k, 20, 30, 1),
                         noId = prepared(k, 30, 40, 0, /*traceId=*/0), unlaunched = prepared(k, 40, 50);
  PreparedTrace trace;
  trace.deviceOps = {launched, hidden, noId, unlaunched};
  RowMap rows;
  rows[{0, 1}] = {{10, 0, true}, {20, 1, true}, {30, 2, true}, {40, 3, true}, {50, 0, false}};
  EmitStats stats;
  const std::vector<char> emitted = {1, 0};
  EXPECT_EQ(markFlows(rows, trace, emitted, stats), (std::vector<char>{1, 0}));
  EXPECT_EQ(stats.flows, 1u);
  EXPECT_TRUE(hasLaunchFlow(launched, emitted));
  EXPECT_FALSE(hasLaunchFlow(hidden, emitted));
  EXPECT_FALSE(hasLaunchFlow(noId, emitted));
  EXPECT_FALSE(hasLaunchFlow(unlaunched, emitted));
}

TEST(TraceSteps, SpansNestPerRowAndCountWhatCannot) {
  const DeviceOp k = kernel(1, 0, 1, 0, 0);
  DeviceOp wait = k;
  wait.kind = DeviceOpKind::StreamWait;
  auto withUser = [](PreparedDeviceOp p, uint64_t user) {
    p.external.user = user;
    return p;
  };
  PreparedTrace trace;
  trace.deviceOps = {withUser(prepared(k, 10, 20), 7),    withUser(prepared(k, 20, 30), 8),
                     withUser(prepared(k, 30, 40), 7),    withUser(prepared(k, 35, 50), 9),
                     withUser(prepared(wait, 50, 90), 7), withUser(prepared(k, 5, 6), 7),
                     withUser(prepared(k, 7, 8), 66)};
  RowMap rows;
  // Range 7 spans 10..40 and nests 8 (20..30); 9 crosses 7's end; the wait is no work.
  rows[{0, 1}] = {{10, 0, true}, {20, 1, true}, {30, 2, false}, {35, 3, true}, {50, 4, true}};
  rows[{0, 2}] = {{5, 5, true}, {7, 6, true}};
  EmitResult result;
  auto names = [](uint64_t id) -> std::optional<std::string> {
    return id == 66 ? std::nullopt : std::optional<std::string>("r" + std::to_string(id));
  };
  const std::vector<TraceEvent> spans = buildSpans(rows, trace, names, result);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].name, "r7");
  EXPECT_EQ(spans[0].start, 10);
  EXPECT_EQ(spans[0].end, 40);
  EXPECT_EQ(spans[1].name, "r8");
  EXPECT_EQ(spans[2].tid, 2);
  EXPECT_EQ(spans[2].userRange, 7u);
  EXPECT_EQ(spans[2].type, TraceEventType::UserAnnotation);
  EXPECT_EQ(result.stats.annotationOverlapsDropped, 1u);
  EXPECT_EQ(result.stats.annotationsWithoutRange, 1u);
  EXPECT_EQ(result.rows.at({0, 1}), 2u);
  EXPECT_EQ(result.rows.at({0, 2}), 1u);
  EXPECT_EQ(result.rangeNames.size(), 3u);
}

TEST(TraceSteps, RunsHoldOnlyEmittedWorkInEmissionOrder) {
  ChunkedVector<RuntimeCall> calls;
  calls.push_back(call(1, 100, 200));
  calls.push_back(call(2, 100, 300));  // same start, encloses the first: goes first
  calls.push_back(call(3, 150));
  PreparedTrace trace;
  orderRuntimeCalls(calls, ExternalJoin{}, trace);
  RuntimeSelection runtime{{1, 1, 1}, {1, 1, 0}};
  const DeviceOp k = kernel(1, 0, 1, 0, 0);
  trace.deviceOps = {prepared(k, 10, 10), prepared(k, 10, 20), prepared(k, 20, 30)};
  RowMap rows;
  rows[{0, 1}] = {{10, 0, true}, {10, 1, true}, {20, 2, false}};
  TraceEvent span;
  span.start = 5;
  span.end = 50;
  EmitResult result;
  const EmitRuns runs = orderRuns(rows, trace, runtime, {span}, result);
  ASSERT_EQ(runs.rows.size(), 1u);
  ASSERT_EQ(runs.rows[0]->size(), 2u);
  EXPECT_EQ((*runs.rows[0])[0].end(trace), 20) << "enclosing first at an equal start";
  EXPECT_EQ(runs.launches, (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(runs.lengths(), (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(runs.launchRun(), 1u);
  EXPECT_EQ(runs.spanRun(), 2u);
  EXPECT_EQ(result.rows.at({0, 1}), 2u);
}

// Launches sharing a start (a coarse host clock) are put longest first within
// their group, whatever their order in the prepared trace.
TEST(TraceSteps, LaunchesAtEqualStartsLongestFirst) {
  ChunkedVector<RuntimeCall> calls;
  calls.push_back(call(1, 100, 110));
  calls.push_back(call(2, 100, 190));
  calls.push_back(call(3, 100, 150));
  calls.push_back(call(4, 150, 160));
  calls.push_back(call(5, 200, 210));
  calls.push_back(call(6, 200, 300));
  PreparedTrace trace;
  orderRuntimeCalls(calls, ExternalJoin{}, trace);
  RuntimeSelection all{std::vector<char>(6, 1), std::vector<char>(6, 1)};
  RowMap rows;
  EmitResult result;
  EXPECT_EQ(orderRuns(rows, trace, all, {}, result).launches, (std::vector<uint32_t>{1, 2, 0, 3, 5, 4}));

  // Not by start at all (never so from prepareTrace): sorted whole.
  PreparedTrace unordered;
  for (size_t i : {4, 0, 1}) unordered.runtime.push_back({.call = &calls[i]});
  RuntimeSelection three{std::vector<char>(3, 1), std::vector<char>(3, 1)};
  EXPECT_EQ(orderRuns(rows, unordered, three, {}, result).launches, (std::vector<uint32_t>{2, 1, 0}));
}

TEST(TraceSteps, EventsCarryTheirJoins) {
  ChunkedVector<RuntimeCall> calls;
  calls.push_back(call(1, 100));
  ChunkedVector<ExternalRecord> external;
  external.push_back({1, 42, OR_EXTERNAL_CORRELATION_KIND_OPERATOR});
  ChunkedVector<HostSync> syncs;
  syncs.push_back({.syncType = OR_ACTIVITY_SYNC_STREAM, .device = 0, .stream = 3, .correlationId = 1});
  PreparedTrace trace;
  const CorrelationIndex byCorr = orderRuntimeCalls(calls, joinExternalIds(external), trace);
  joinHostSyncs(syncs, byCorr, trace);
  trace.runtime[0].traceId = kFirstTraceId;
  const TraceEvent launch = runtimeEvent(trace, 0, true);
  EXPECT_EQ(launch.type, TraceEventType::Runtime);
  EXPECT_EQ(launch.name, "orLaunchKernel");
  EXPECT_EQ(launch.start, 100);
  EXPECT_EQ(launch.end, 110);
  EXPECT_EQ(launch.pid, 7);
  EXPECT_EQ(launch.tid, 8);
  EXPECT_EQ(launch.threadId, 8);
  EXPECT_EQ(launch.linkedOp, 42u);
  EXPECT_EQ(launch.flowId, static_cast<uint32_t>(kFirstTraceId));
  EXPECT_TRUE(launch.flowStart);
  EXPECT_EQ(launch.sync, &trace.hostSyncs[0].sync);
  EXPECT_EQ(runtimeEvent(trace, 0, false).flowId, 0u);

  DeviceOp wait = kernel(1, 2, 5, 0, 0);
  wait.kind = DeviceOpKind::StreamWait;
  PreparedTrace work;
  work.deviceOps.push_back(prepared(wait, 120, 140, 0));
  work.deviceOps[0].external.op = 42;
  const TraceEvent e = deviceEvent(work, {130, 0, true}, true);
  EXPECT_EQ(e.type, TraceEventType::StreamWait);
  EXPECT_EQ(e.name, "Stream Wait Event");
  EXPECT_EQ(e.start, 130);
  EXPECT_EQ(e.end, 140);
  EXPECT_EQ(e.pid, 2);
  EXPECT_EQ(e.tid, 5);
  EXPECT_EQ(e.linkedOp, 42u) << "named by the op that waited, as CUDA's sync rows are";
  EXPECT_EQ(e.flowId, static_cast<uint32_t>(kFirstTraceId));
  EXPECT_FALSE(e.flowStart);
  EXPECT_EQ(e.device, &work.deviceOps[0]);
}
