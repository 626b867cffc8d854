#include "trace_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "openreg/activity.h"

using namespace openreg::profiler;

namespace {

constexpr uint64_t kHost0 = 1'700'000'000'000'000'000ull;
constexpr uint64_t kDeviceOffset = 1'000'000'000'000ull;  // device = host - kHost0 + offset

uint64_t dev(uint64_t hostNs) { return hostNs - kHost0 + kDeviceOffset; }

struct Builder {
  RecordSet records;
  uint64_t nextCorr = (1ull << 40);

  Builder() {
    for (int d = 0; d < 2; ++d) {
      records.clock[d].push_back({kHost0, dev(kHost0), 0});
      records.clock[d].push_back({kHost0 + 1'000'000'000, dev(kHost0 + 1'000'000'000), 0});
    }
  }

  // A launch at `launch` µs (host), executing [start, end) µs on (device, stream).
  uint64_t launch(DeviceOpKind kind, int device, uint64_t stream, uint64_t launchUs, uint64_t startUs, uint64_t endUs,
                  uint64_t op = 0, uint64_t user = 0) {
    const uint64_t corr = nextCorr++;
    RuntimeCall call;
    call.processId = 100;
    call.threadId = 101;
    call.device = device;
    call.correlationId = corr;
    call.start = kHost0 + launchUs * 1000;
    call.end = call.start + 1000;
    call.name = "orLaunchKernel";
    records.runtimeCalls.push_back(call);
    DeviceOp d;
    d.kind = kind;
    d.device = device;
    d.stream = stream;
    d.correlationId = corr;
    d.start = dev(kHost0 + startUs * 1000);
    d.end = dev(kHost0 + endUs * 1000);
    d.name = "kernel_a";
    if (kind == DeviceOpKind::Memcpy || kind == DeviceOpKind::Memset) {
      d.bytes = 1 << 20;  // (kernel fields share the storage)
      d.copyKind = OR_ACTIVITY_MEMCPY_HTOD;
    }
    records.deviceOps.push_back(d);
    if (op != 0) records.external.push_back({corr, op, OR_EXTERNAL_CORRELATION_KIND_OPERATOR});
    if (user != 0) records.external.push_back({corr, user, OR_EXTERNAL_CORRELATION_KIND_USER});
    return corr;
  }
};

EmitOptions window(uint64_t fromUs, uint64_t toUs) {
  EmitOptions o;
  o.windowStart = static_cast<int64_t>(kHost0 + fromUs * 1000);
  o.windowEnd = static_cast<int64_t>(kHost0 + toUs * 1000);
  return o;
}

std::optional<std::string> rangeName(uint64_t id) { return "range" + std::to_string(id); }

std::optional<TraceArg> arg(const TraceEvent& e, const std::string& key) {
  for (auto& a : eventArgs(e))
    if (a.key == key) return a;
  return std::nullopt;
}

std::vector<const TraceEvent*> ofType(const EmitResult& r, TraceEventType type) {
  std::vector<const TraceEvent*> out;
  for (const auto& e : r.events)
    if (e.type == type) out.push_back(&e);
  return out;
}

}  // namespace

TEST(TraceBuilder, JoinsLaunchDeviceWorkAndOp) {
  Builder b;
  b.launch(DeviceOpKind::Kernel, 0, 1, 10, 20, 30, /*op=*/42);
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, window(0, 1000), rangeName);
  auto kernels = ofType(r, TraceEventType::Kernel);
  auto runtime = ofType(r, TraceEventType::Runtime);
  ASSERT_EQ(kernels.size(), 1u);
  ASSERT_EQ(runtime.size(), 1u);
  const TraceEvent& k = *kernels[0];
  const TraceEvent& rt = *runtime[0];
  EXPECT_EQ(k.start, static_cast<int64_t>(kHost0 + 20'000));
  EXPECT_EQ(k.end, static_cast<int64_t>(kHost0 + 30'000));
  EXPECT_EQ(k.pid, 0);
  EXPECT_EQ(k.tid, 1);
  EXPECT_EQ(k.linkedOp, 42u);
  EXPECT_EQ(rt.linkedOp, 42u);
  // One per-trace id for the pair, far from torch's op ids, and a flow.
  EXPECT_EQ(k.id, rt.id);
  EXPECT_GE(k.id, kFirstTraceId);
  EXPECT_EQ(k.flowId, static_cast<uint32_t>(k.id));
  EXPECT_FALSE(k.flowStart);
  EXPECT_EQ(rt.flowId, k.flowId);
  EXPECT_TRUE(rt.flowStart);
  EXPECT_EQ(rt.pid, 100);
  EXPECT_EQ(rt.tid, 101);
  ASSERT_TRUE(arg(k, "stream"));
  EXPECT_EQ(arg(k, "correlation")->value, std::to_string(k.id));
  EXPECT_EQ(arg(k, "grid")->value, "[0, 0, 0]");
  EXPECT_FALSE(arg(rt, "stream")) << "host rows must not look like device work to HTA";
}

// A kernel launched with an annotation (where a compiled kernel came from)
// carries its members as args, after the ones every kernel has.
TEST(TraceBuilder, KernelAnnotationsBecomeArgs) {
  Builder b;
  b.launch(DeviceOpKind::Kernel, 0, 1, 10, 20, 30, /*op=*/42);
  b.launch(DeviceOpKind::Kernel, 0, 1, 11, 31, 40, /*op=*/43);
  LaunchShape shape;
  shape.annotation = "\"source_lines\": [\"model.py:7\"], \"fused_aten_ops\": [\"aten::gelu\"]";
  b.records.deviceOps[0].launchShape = b.records.internLaunchShape(shape);
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, window(0, 1000), rangeName);
  auto kernels = ofType(r, TraceEventType::Kernel);
  ASSERT_EQ(kernels.size(), 2u);
  const auto annotated = eventArgs(*kernels[0]);
  ASSERT_FALSE(annotated.empty());
  EXPECT_EQ(annotated.back().key, "annotation");
  EXPECT_EQ(annotated.back().value, shape.annotation);
  EXPECT_FALSE(arg(*kernels[1], "annotation"));
}

TEST(TraceBuilder, NamesCopiesLikeCuda) {
  Builder b;
  b.launch(DeviceOpKind::Memcpy, 0, 1, 1, 2, 3);
  b.launch(DeviceOpKind::Memset, 0, 1, 4, 5, 6);
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, window(0, 1000), rangeName);
  auto copies = ofType(r, TraceEventType::Memcpy);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0]->name, "Memcpy HtoD (Host -> Device)");
  EXPECT_EQ(arg(*copies[0], "bytes")->value, "1048576");
  EXPECT_EQ(arg(*copies[0], "kind")->value, "HtoD");
  EXPECT_TRUE(arg(*copies[0], "kind")->quoted);
  // 1 MiB in 1 µs = 1048.576 GB/s.
  EXPECT_EQ(arg(*copies[0], "memory bandwidth (GB/s)")->value, "1048.576");
  EXPECT_EQ(ofType(r, TraceEventType::Memset).at(0)->name, "Memset (Device)");
}

TEST(TraceBuilder, IdsAreUniqueAndDuplicatesDropped) {
  Builder b;
  for (int i = 0; i < 50; ++i) b.launch(DeviceOpKind::Kernel, i % 2, 1 + i % 3, 10 * i, 10 * i + 2, 10 * i + 5);
  // The same records delivered twice.
  auto copy = b.records.deviceOps;
  b.records.deviceOps.append(copy);
  auto rcopy = b.records.runtimeCalls;
  b.records.runtimeCalls.append(rcopy);
  auto prepared = prepareTrace(b.records);
  EXPECT_EQ(prepared.stats.duplicateRecords, 100u);
  auto r = emitTrace(prepared, window(0, 10'000), rangeName);
  std::set<int32_t> ids;
  std::set<uint32_t> flowEnds;
  for (const auto* k : ofType(r, TraceEventType::Kernel)) {
    EXPECT_TRUE(ids.insert(k->id).second);
    EXPECT_TRUE(flowEnds.insert(k->flowId).second);
  }
  EXPECT_EQ(ids.size(), 50u);
  EXPECT_EQ(r.stats.flows, 50u);
}

TEST(TraceBuilder, KeepsOnlyTheWindowAndCountsTheRest) {
  Builder b;
  b.launch(DeviceOpKind::Kernel, 0, 1, 5, 6, 8);      // before
  b.launch(DeviceOpKind::Kernel, 0, 1, 20, 25, 30);   // inside
  b.launch(DeviceOpKind::Kernel, 0, 1, 90, 95, 130);  // launched inside, ends after
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, window(10, 100), rangeName);
  auto kernels = ofType(r, TraceEventType::Kernel);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0]->start, static_cast<int64_t>(kHost0 + 25'000));
  EXPECT_EQ(r.stats.launchedInWindowButOutside, 1u);
  // The launch at 90 µs stays, without an arrow to a kernel that is not there.
  auto runtime = ofType(r, TraceEventType::Runtime);
  ASSERT_EQ(runtime.size(), 2u);
  EXPECT_EQ(std::count_if(runtime.begin(), runtime.end(), [](const TraceEvent* e) { return e->flowId != 0; }), 1);
  for (const auto& e : r.events) {
    EXPECT_GE(e.start, static_cast<int64_t>(kHost0 + 10'000));
    EXPECT_LE(e.end, static_cast<int64_t>(kHost0 + 100'000));
  }
}

TEST(TraceBuilder, HonoursRequestedTypes) {
  Builder b;
  b.launch(DeviceOpKind::Kernel, 0, 1, 1, 2, 3);
  b.launch(DeviceOpKind::Memcpy, 0, 1, 4, 5, 6);
  EmitOptions o = window(0, 1000);
  o.memcpy = false;
  o.runtime = false;
  o.userAnnotations = false;
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, o, rangeName);
  EXPECT_EQ(ofType(r, TraceEventType::Kernel).size(), 1u);
  EXPECT_TRUE(ofType(r, TraceEventType::Memcpy).empty());
  EXPECT_TRUE(ofType(r, TraceEventType::Runtime).empty());
  EXPECT_EQ(ofType(r, TraceEventType::Kernel)[0]->flowId, 0u) << "no flow without its host end";
}

TEST(TraceBuilder, DeferredStartExcludesWarmup) {
  Builder b;
  b.launch(DeviceOpKind::Kernel, 0, 1, 1, 2, 3);
  b.launch(DeviceOpKind::Kernel, 0, 1, 50, 51, 52);
  EmitOptions o = window(0, 1000);
  o.notBefore = static_cast<int64_t>(kHost0 + 40'000);
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, o, rangeName);
  EXPECT_EQ(ofType(r, TraceEventType::Kernel).size(), 1u);
  EXPECT_EQ(r.stats.beforeRequestedStart, 2u);  // the early kernel and its launch
}

TEST(TraceBuilder, DeviceWorkNeverStartsBeforeItsLaunch) {
  Builder b;
  // Clock error maps the kernel 300 ns before its launch.
  const uint64_t corr = b.launch(DeviceOpKind::Kernel, 0, 1, 10, 10, 20);
  b.records.deviceOps.back().start -= 300;
  (void)corr;
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, window(0, 1000), rangeName);
  auto k = ofType(r, TraceEventType::Kernel).at(0);
  auto rt = ofType(r, TraceEventType::Runtime).at(0);
  EXPECT_GE(k->start, rt->start);
  EXPECT_EQ(r.stats.causalityFixes, 1u);
  EXPECT_EQ(r.stats.maxCausalityFixNs, 300);
}

TEST(TraceBuilder, StreamRowsNeverOverlap) {
  Builder b;
  b.launch(DeviceOpKind::Kernel, 0, 1, 1, 10, 20);
  b.launch(DeviceOpKind::Kernel, 0, 1, 2, 19, 30);  // 1 µs of rounding overlap
  b.launch(DeviceOpKind::Kernel, 0, 2, 3, 15, 25);  // other stream: fine
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, window(0, 1000), rangeName);
  EXPECT_EQ(r.stats.rowOverlapFixes, 1u);
  std::map<std::pair<int64_t, int64_t>, std::vector<const TraceEvent*>> rows;
  for (const auto* k : ofType(r, TraceEventType::Kernel)) rows[{k->pid, k->tid}].push_back(k);
  for (auto& [row, events] : rows) {
    for (size_t i = 1; i < events.size(); ++i) EXPECT_LE(events[i - 1]->end, events[i]->start);
  }
  EXPECT_EQ(r.rows.size(), 2u);
}

TEST(TraceBuilder, UserRangesBecomeNestedSpansOnTheirRows) {
  Builder b;
  b.launch(DeviceOpKind::Kernel, 0, 1, 1, 10, 20, 1, /*user=*/7);
  b.launch(DeviceOpKind::Kernel, 0, 1, 2, 20, 30, 2, 8);  // inner range
  b.launch(DeviceOpKind::Kernel, 0, 1, 3, 30, 40, 3, 7);
  b.launch(DeviceOpKind::Kernel, 0, 2, 4, 30, 40, 4, 7);  // same range, other stream
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, window(0, 1000), rangeName);
  auto spans = ofType(r, TraceEventType::UserAnnotation);
  ASSERT_EQ(spans.size(), 3u);
  std::map<std::pair<std::string, int64_t>, const TraceEvent*> byName;
  for (const auto* s : spans) byName[{std::string(s->name), s->tid}] = s;
  const auto* outer = byName.at({"range7", 1});
  EXPECT_EQ(outer->start, static_cast<int64_t>(kHost0 + 10'000));
  EXPECT_EQ(outer->end, static_cast<int64_t>(kHost0 + 40'000));
  EXPECT_EQ(outer->userRange, 7u);
  EXPECT_EQ(byName.at({"range8", 1})->start, static_cast<int64_t>(kHost0 + 20'000));
  EXPECT_EQ(byName.at({"range7", 2})->start, static_cast<int64_t>(kHost0 + 30'000));
  EXPECT_EQ(outer->linkedOp, 0u) << "spans must not be credited as op device time";
}

TEST(TraceBuilder, InterleavedRangesThatCannotNestAreDroppedAndCounted) {
  Builder b;
  b.launch(DeviceOpKind::Kernel, 0, 1, 1, 10, 20, 1, 7);
  b.launch(DeviceOpKind::Kernel, 0, 1, 2, 20, 30, 2, 8);
  b.launch(DeviceOpKind::Kernel, 0, 1, 3, 30, 40, 3, 7);
  b.launch(DeviceOpKind::Kernel, 0, 1, 4, 40, 50, 4, 8);
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, window(0, 1000), rangeName);
  EXPECT_EQ(ofType(r, TraceEventType::UserAnnotation).size(), 1u);
  EXPECT_EQ(r.stats.annotationOverlapsDropped, 1u);
}

TEST(TraceBuilder, UnknownRangesAreCountedNotInvented) {
  Builder b;
  b.launch(DeviceOpKind::Kernel, 0, 1, 1, 10, 20, 1, 7);
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, window(0, 1000), [](uint64_t) -> std::optional<std::string> { return std::nullopt; });
  EXPECT_TRUE(ofType(r, TraceEventType::UserAnnotation).empty());
  EXPECT_EQ(r.stats.annotationsWithoutRange, 1u);
}

TEST(TraceBuilder, DeviceWorkWithoutClockSamplesIsCounted) {
  Builder b;
  b.launch(DeviceOpKind::Kernel, 5, 1, 1, 10, 20);  // device 5 has no samples
  auto prepared = prepareTrace(b.records);
  EXPECT_EQ(prepared.stats.unmappedDeviceOps, 1u);
  EXPECT_TRUE(prepared.deviceOps.empty());
}

// Linked to the op that waited, as CUDA's sync rows are (no device time of it: torch_openreg/_profiler.py).
TEST(TraceBuilder, StreamWaitsNameTheOpThatWaited) {
  Builder b;
  b.launch(DeviceOpKind::StreamWait, 0, 2, 1, 10, 20, /*op=*/5);
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, window(0, 1000), rangeName);
  auto waits = ofType(r, TraceEventType::StreamWait);
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0]->linkedOp, 5u);
  EXPECT_EQ(waits[0]->name, "Stream Wait Event");
  EXPECT_NE(waits[0]->flowId, 0u);
}

TEST(TraceBuilder, HostSyncsAnnotateTheirRuntimeRow) {
  Builder b;
  RuntimeCall call;
  call.correlationId = 77;
  call.start = kHost0 + 5000;
  call.end = kHost0 + 9000;
  call.name = "orStreamSynchronize";
  b.records.runtimeCalls.push_back(call);
  b.records.hostSyncs.push_back({.syncType = OR_ACTIVITY_SYNC_STREAM, .device = 0, .stream = 3, .correlationId = 77});
  auto prepared = prepareTrace(b.records);
  auto r = emitTrace(prepared, window(0, 1000), rangeName);
  auto rows = ofType(r, TraceEventType::Runtime);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(arg(*rows[0], "sync")->value, "stream");
  EXPECT_EQ(arg(*rows[0], "sync stream")->value, "3");
  EXPECT_EQ(rows[0]->flowId, 0u);
}

// A runtime call named `name` at [startUs, endUs) on host thread `thread`.
uint64_t addCall(Builder& b, const char* name, uint64_t startUs, uint64_t endUs, uint32_t thread = 101) {
  RuntimeCall call;
  call.processId = 100;
  call.threadId = thread;
  call.correlationId = b.nextCorr++;
  call.start = kHost0 + startUs * 1000;
  call.end = kHost0 + endUs * 1000;
  call.name = name;
  b.records.runtimeCalls.push_back(call);
  return call.correlationId;
}

std::string argValue(const TraceEvent& e, const std::string& key) {
  const auto a = arg(e, key);
  return a ? a->value : "<absent>";
}

TEST(TraceBuilder, HostSyncsGetSyncRowsInKinetosSchema) {
  Builder b;
  const uint64_t record = addCall(b, "orEventRecord", 10, 11);
  const uint64_t eventSync = addCall(b, "orEventSynchronize", 20, 40);
  const uint64_t streamSync = addCall(b, "orStreamSynchronize", 50, 60);
  const uint64_t deviceSync = addCall(b, "orDeviceSynchronize", 70, 80, /*thread=*/202);
  auto sync = [&](uint32_t type, uint64_t corr, uint64_t fromUs, uint64_t toUs, uint32_t thread) {
    return HostSync{.syncType = type,
                    .device = 1,
                    .threadId = thread,
                    .correlationId = corr,
                    .start = kHost0 + fromUs * 1000,
                    .end = kHost0 + toUs * 1000};
  };
  HostSync event = sync(OR_ACTIVITY_SYNC_EVENT, eventSync, 21, 39, 101);
  event.eventId = 9;
  event.recordCorrelationId = record;
  event.recordStreamId = 3;
  HostSync stream = sync(OR_ACTIVITY_SYNC_STREAM, streamSync, 51, 59, 101);
  stream.stream = 4;
  b.records.hostSyncs.push_back(event);
  b.records.hostSyncs.push_back(stream);
  b.records.hostSyncs.push_back(sync(OR_ACTIVITY_SYNC_DEVICE, deviceSync, 71, 79, 202));
  b.records.external.push_back({streamSync, 77, OR_EXTERNAL_CORRELATION_KIND_OPERATOR});  // made inside op 77
  const auto prepared = prepareTrace(b.records);
  const auto r = emitTrace(prepared, window(0, 1000), rangeName);
  const auto rows = ofType(r, TraceEventType::HostSync);
  ASSERT_EQ(rows.size(), 3u);
  const auto runtime = ofType(r, TraceEventType::Runtime);
  ASSERT_EQ(runtime.size(), 4u);
  // Event sync: the record it waited on by that record's row id, and the stream it was recorded on.
  EXPECT_EQ(rows[0]->name, "Event Sync");
  EXPECT_EQ(rows[0]->start, static_cast<int64_t>(kHost0 + 21'000));
  EXPECT_EQ(rows[0]->end, static_cast<int64_t>(kHost0 + 39'000));
  EXPECT_EQ(rows[0]->pid, 1);
  EXPECT_EQ(rows[0]->tid, kHostWaitRowBase);
  EXPECT_EQ(rows[0]->id, runtime[1]->id) << "its correlation is its call's";
  EXPECT_EQ(argValue(*rows[0], "stream"), "-1");
  EXPECT_EQ(argValue(*rows[0], "cuda_sync_kind"), "Event Sync");
  EXPECT_EQ(argValue(*rows[0], "wait_on_stream"), "3");
  EXPECT_EQ(argValue(*rows[0], "wait_on_cuda_event_record_corr_id"), std::to_string(runtime[0]->id));
  EXPECT_EQ(argValue(*rows[0], "wait_on_cuda_event_id"), "9");
  // Stream sync: at its stream (Kineto's writer moves it beside the stream), no wait_on args.
  EXPECT_EQ(rows[1]->name, "Stream Sync");
  EXPECT_EQ(rows[1]->tid, 4);
  EXPECT_EQ(argValue(*rows[1], "stream"), "4");
  EXPECT_EQ(argValue(*rows[1], "wait_on_stream"), "<absent>");
  // Another thread's wait: a row of its own.
  EXPECT_EQ(rows[2]->name, "Context Sync");
  EXPECT_EQ(rows[2]->tid, kHostWaitRowBase + 1);
  EXPECT_EQ(argValue(*rows[2], "cuda_sync_kind"), "Context Sync");
  EXPECT_EQ(r.hostSyncRows.size(), 2u);
  EXPECT_EQ(r.hostSyncRows.at({1, kHostWaitRowBase}), 101u);
  EXPECT_EQ(r.hostSyncRows.at({1, kHostWaitRowBase + 1}), 202u);
  // Linked as their calls are: the stream sync to the op that made it, the others (no op) to none.
  EXPECT_EQ(rows[0]->linkedOp, 0u);
  EXPECT_EQ(rows[1]->linkedOp, 77u);
  EXPECT_EQ(runtime[2]->linkedOp, 77u);
  EXPECT_EQ(rows[2]->linkedOp, 0u);
}

TEST(TraceBuilder, HostSyncsHonourTheWindowAndTheRequest) {
  Builder b;
  const uint64_t call = addCall(b, "orDeviceSynchronize", 500, 600);
  b.records.hostSyncs.push_back({.syncType = OR_ACTIVITY_SYNC_DEVICE,
                                 .device = 0,
                                 .threadId = 101,
                                 .correlationId = call,
                                 .start = kHost0 + 501'000,
                                 .end = kHost0 + 599'000});
  const auto prepared = prepareTrace(b.records);
  auto outside = emitTrace(prepared, window(0, 400), rangeName);
  EXPECT_TRUE(ofType(outside, TraceEventType::HostSync).empty());
  EXPECT_EQ(outside.stats.outOfWindow, 2u) << "the call and its sync";
  EmitOptions noSyncs = window(0, 1000);
  noSyncs.syncs = false;
  auto unrequested = emitTrace(prepared, noSyncs, rangeName);
  EXPECT_TRUE(ofType(unrequested, TraceEventType::HostSync).empty());
  EXPECT_EQ(unrequested.stats.notRequested, 1u);
  EXPECT_TRUE(unrequested.hostSyncRows.empty());
}

TEST(TraceBuilder, StreamWaitsNameTheRecordTheyWaitedOn) {
  Builder b;
  const uint64_t record = addCall(b, "orEventRecord", 5, 6);
  const uint64_t corr = b.launch(DeviceOpKind::StreamWait, 0, 2, 10, 12, 30);
  DeviceOp& wait = b.records.deviceOps.back();
  wait.eventId = b.records.eventWaits.size();
  b.records.eventWaits.push_back({.eventId = 4, .recordCorrelationId = record, .recordStreamId = 1});
  (void)corr;
  const auto prepared = prepareTrace(b.records);
  const auto r = emitTrace(prepared, window(0, 1000), rangeName);
  const auto waits = ofType(r, TraceEventType::StreamWait);
  ASSERT_EQ(waits.size(), 1u);
  const auto runtime = ofType(r, TraceEventType::Runtime);
  ASSERT_EQ(runtime.size(), 2u);
  EXPECT_EQ(argValue(*waits[0], "cuda_sync_kind"), "Stream Wait Event");
  EXPECT_EQ(argValue(*waits[0], "wait_on_stream"), "1");
  EXPECT_EQ(argValue(*waits[0], "wait_on_cuda_event_record_corr_id"), std::to_string(runtime[0]->id));
  EXPECT_EQ(argValue(*waits[0], "wait_on_cuda_event_id"), "4");
  // A record before the window is not in the trace: the wait names none (-1), not a missing row.
  const auto late = emitTrace(prepared, window(8, 1000), rangeName);
  const auto lateWaits = ofType(late, TraceEventType::StreamWait);
  ASSERT_EQ(lateWaits.size(), 1u);
  EXPECT_EQ(argValue(*lateWaits[0], "wait_on_cuda_event_record_corr_id"), "-1");
  EXPECT_EQ(argValue(*lateWaits[0], "wait_on_stream"), "1");
}

TEST(TraceBuilder, CommunicationIsAKernelLinkedToItsOpWithItsPayload) {
  Builder b;
  const uint64_t corr = b.launch(DeviceOpKind::Communication, 1, 2, 10, 20, 30, /*op=*/77);
  DeviceOp& op = b.records.deviceOps.back();
  op.name = "openregComm_AllReduce_Sum_f32";
  op.bytes = 1 << 20;
  op.eventId = b.records.communications.size();
  b.records.communications.push_back({.collective = "allreduce",
                                      .dataType = "f32",
                                      .groupName = "0",
                                      .count = 1024,
                                      .sequence = 3,
                                      .groupSize = 2,
                                      .rank = 1,
                                      .peer = -1});
  auto prepared = prepareTrace(b.records);
  EmitOptions kernelsOnly = window(0, 1000);
  auto r = emitTrace(prepared, kernelsOnly, rangeName);
  auto kernels = ofType(r, TraceEventType::Kernel);
  ASSERT_EQ(kernels.size(), 1u);
  const TraceEvent& k = *kernels[0];
  EXPECT_EQ(k.name, "openregComm_AllReduce_Sum_f32");
  EXPECT_EQ(k.linkedOp, 77u) << "linked, so Kineto copies record_param_comms' args onto it";
  EXPECT_NE(k.flowId, 0u);
  EXPECT_EQ(k.pid, 1);
  EXPECT_EQ(k.tid, 2);
  EXPECT_EQ(arg(k, "collective")->value, "allreduce");
  EXPECT_EQ(arg(k, "data type")->value, "f32");
  EXPECT_EQ(arg(k, "count")->value, "1024");
  EXPECT_EQ(arg(k, "bytes")->value, "1048576");
  EXPECT_EQ(arg(k, "group")->value, "0");
  EXPECT_EQ(arg(k, "group size")->value, "2");
  EXPECT_EQ(arg(k, "rank")->value, "1");
  EXPECT_EQ(arg(k, "sequence")->value, "3");
  EXPECT_FALSE(arg(k, "peer")) << "only point-to-point has a peer";
  EXPECT_FALSE(arg(k, "grid")) << "no kernel launch shape";
  // None of Kineto's own keys, which it adds from the linked op.
  EXPECT_FALSE(arg(k, "dtype"));
  EXPECT_FALSE(arg(k, "Collective name"));
  EXPECT_EQ(arg(k, "stream")->value, "2");
  (void)corr;
  // Without kernels requested there is no communication event either.
  EmitOptions noKernels = window(0, 1000);
  noKernels.kernels = false;
  noKernels.userAnnotations = false;
  EXPECT_TRUE(ofType(emitTrace(prepared, noKernels, rangeName), TraceEventType::Kernel).empty());
}
