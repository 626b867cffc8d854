// The synchronisation rules (checks_sync.cpp) and device_rows_nest's sync
// artifact: a trace with every kind of sync row is quiet, and each planted
// defect is caught by its rule alone.
#include <gtest/gtest.h>

#include <set>

#include "analysis.h"
#include "trace_builder.h"

namespace openreg::trace {
namespace {

using testing::kHostPid;
using testing::kHostTid;
using testing::TraceBuilder;

// Where the synced trace puts its sync traffic; tests move one thing.
struct Plan {
  int64_t recordTs = 41'000;        // orEventRecord (correlation 14) on stream 7
  int64_t waitRecord = 14;          // the record the wait and the event sync name
  int64_t reluTs = 60'000;          // relu on stream 7, launched at 50 us
  int64_t reluDur = 2'000;          //
  int64_t streamSyncDur = 4'000;    // the Stream Sync row from 59 us (its call lasts 4 us)
  int64_t contextSyncDur = 2'000;   // the Context Sync row from 64 us
  std::string streamSyncArgs = "";  // replaces the Stream Sync row's args when set
  std::string streamSyncName = "";  // replaces its name (not its kind) when set
};

// clean() of test_checks.cpp and then, as openreg's plugin writes them, an
// event record on stream 7, a wait of stream 8 on it, an event sync, a
// stream sync waiting for relu, and a device sync; each with its runtime call.
TraceBuilder synced(const Plan& p = {}) {
  TraceBuilder b;
  b.lanes(0, {7, 8}).span(0, 100'000);
  b.launch("aten::mm", "gemm", 1'000, 20'000, 5'000, 0, 7, 11, 2);
  b.launch("aten::add", "add", 12'000, 26'000, 3'000, 0, 7, 12, 3);
  b.launch("aten::mul", "mul", 30'000, 32'000, 4'000, 0, 8, 13, 4);
  b.runtime("orEventRecord", p.recordTs, 1'000, 14, 0);
  b.runtime("orStreamWaitEvent", 43'000, 1'000, 15, 0);
  b.sync("Stream Wait Event", 43'000, 1'000, 0, 8, 15, TraceBuilder::waitArgs(7, p.waitRecord, 1));
  b.runtime("orEventSynchronize", 45'000, 2'000, 16, 0);
  b.sync("Event Sync", 45'000, 2'000, 0, -1, 16, TraceBuilder::waitArgs(7, p.waitRecord, 1));
  b.launch("aten::relu", "relu", 48'000, p.reluTs, p.reluDur, 0, 7, 19, 5);
  b.runtime("orStreamSynchronize", 59'000, 4'000, 17, 0);
  if (!p.streamSyncName.empty()) {
    b.raw(R"({"ph":"X","cat":"cuda_sync","name":")" + p.streamSyncName +
          R"(","pid":0,"tid":7,"ts":59.000,"dur":4.000,"args":{"cuda_sync_kind":"Stream Sync","device":0,)"
          R"("stream":7,"correlation":17}})");
  } else {
    b.sync("Stream Sync", 59'000, p.streamSyncDur, 0, 7, 17, "", p.streamSyncArgs);
  }
  b.runtime("orDeviceSynchronize", 64'000, 2'000, 18, 0);
  return b.sync("Context Sync", 64'000, p.contextSyncDur, 0, -1, 18);
}

const CheckResult& result(const CheckReport& r, const std::string& name) {
  for (const CheckResult& c : r.results)
    if (c.name == name) return c;
  throw std::runtime_error("no check " + name);
}

// Checks with findings, failing or only warning.
std::set<std::string> reacting(const CheckReport& r) {
  std::set<std::string> out;
  for (const CheckResult& c : r.results)
    if (c.status == CheckResult::kFail || c.status == CheckResult::kWarn) out.insert(c.name);
  return out;
}

CheckReport check(const TraceBuilder& b, const CheckOptions& o = {}) { return runChecks(*b.load(), o); }

// One rule fails, with `n` findings; nothing else reacts.
void expectOnlyFailing(const CheckReport& r, const std::string& name, uint64_t n) {
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(reacting(r), std::set<std::string>{name});
  EXPECT_EQ(result(r, name).status, CheckResult::kFail);
  EXPECT_EQ(result(r, name).violations, n);
  EXPECT_EQ(result(r, name).warnings, 0u);
}

std::string firstMessage(const CheckReport& r, const std::string& name) {
  const CheckResult& c = result(r, name);
  return c.examples.empty() ? std::string() : c.examples[0].message;
}

TEST(SyncChecks, ArgsAreRead) {
  auto t = synced().load();
  size_t waits = 0;
  for (uint32_t i = 0; i < t->slices.size(); ++i) {
    const SyncArgs* a = t->syncArgsOf(i);
    if (t->str(t->slices[i].cat) != "cuda_sync") {
      EXPECT_EQ(a, nullptr);
      continue;
    }
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(t->str(a->kind), t->str(t->slices[i].name));
    if (!a->waitOnRecordCorrelation.present) continue;
    ++waits;
    EXPECT_EQ(a->waitOnRecordCorrelation.value, 14);
    EXPECT_EQ(a->waitOnStream.value, 7);
    EXPECT_EQ(a->waitOnEventId.value, 1);
  }
  EXPECT_EQ(waits, 2u);
}

TEST(SyncChecks, SyncedTracePassesEverything) {
  CheckReport r = check(synced());
  EXPECT_TRUE(r.ok);
  for (const CheckResult& c : r.results) EXPECT_EQ(c.status, CheckResult::kPass) << c.name << ": " << c.note;
  CheckReport strict = check(synced(), {.strict = true});
  EXPECT_TRUE(strict.ok);
}

TEST(SyncChecks, RowWithoutKind) {
  Plan p;
  p.streamSyncArgs = R"("device":0,"stream":7,"correlation":17)";
  CheckReport r = check(synced(p));
  expectOnlyFailing(r, "sync_rows_described", 1);
  EXPECT_EQ(firstMessage(r, "sync_rows_described"), "sync row \"Stream Sync\": no string \"cuda_sync_kind\"");
}

TEST(SyncChecks, RowWithoutCorrelationOrStream) {
  Plan p;
  p.streamSyncArgs = R"("cuda_sync_kind":"Stream Sync","device":0)";
  CheckReport r = check(synced(p));
  expectOnlyFailing(r, "sync_rows_described", 1);
  EXPECT_EQ(firstMessage(r, "sync_rows_described"),
            "sync row \"Stream Sync\": no integer \"correlation\"; no integer \"stream\"");
}

TEST(SyncChecks, StreamSyncOnNoStream) {
  Plan p;
  p.streamSyncArgs = R"("cuda_sync_kind":"Stream Sync","device":0,"stream":-1,"correlation":17)";
  CheckReport r = check(synced(p));
  expectOnlyFailing(r, "sync_rows_described", 1);
  EXPECT_EQ(firstMessage(r, "sync_rows_described"), "sync row \"Stream Sync\": \"stream\" is -1, not a stream");
}

TEST(SyncChecks, RowWhoseCorrelationNamesNoCall) {
  Plan p;
  p.streamSyncArgs = R"("cuda_sync_kind":"Stream Sync","device":0,"stream":7,"correlation":99)";
  CheckReport r = check(synced(p));
  expectOnlyFailing(r, "sync_rows_described", 1);
  EXPECT_EQ(firstMessage(r, "sync_rows_described"),
            "sync row \"Stream Sync\": \"correlation\" 99 names no runtime call");
}

TEST(SyncChecks, RowNamedOtherThanItsKind) {
  Plan p;
  p.streamSyncName = "orStreamSynchronize wait";
  CheckReport r = check(synced(p));
  expectOnlyFailing(r, "sync_rows_described", 1);
  EXPECT_EQ(firstMessage(r, "sync_rows_described"),
            "sync row \"orStreamSynchronize wait\": its name differs from its \"cuda_sync_kind\" \"Stream Sync\"");
}

TEST(SyncChecks, UnknownKindAndEventWaitWithoutRecordArgs) {
  TraceBuilder b = synced();
  b.runtime("orStreamWaitEvent", 67'000, 1'000, 20, 0);
  b.sync("Stream Wait Event", 67'000, 1'000, 0, 8, 20);  // no wait_on_* args
  b.runtime("orStreamQuery", 69'000, 1'000, 21, 0);
  b.sync("Stream Query", 69'000, 1'000, 0, 8, 21);
  CheckReport r = check(b);
  expectOnlyFailing(r, "sync_rows_described", 2);
  const CheckResult& c = result(r, "sync_rows_described");
  ASSERT_EQ(c.examples.size(), 2u);
  EXPECT_EQ(c.examples[0].message,
            "sync row \"Stream Wait Event\": no integer \"wait_on_cuda_event_record_corr_id\"; no integer "
            "\"wait_on_stream\"");
  EXPECT_EQ(c.examples[1].message, "sync row \"Stream Query\": unknown \"cuda_sync_kind\" \"Stream Query\"");
}

TEST(SyncChecks, WaitOnARecordNotInTheTraceWarns) {
  Plan p;
  p.waitRecord = 9;  // no runtime call has correlation 9
  CheckReport r = check(synced(p));
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(reacting(r), std::set<std::string>{"sync_wait_record_known"});
  const CheckResult& c = result(r, "sync_wait_record_known");
  EXPECT_EQ(c.status, CheckResult::kWarn);
  EXPECT_EQ(c.warnings, 2u);  // the stream wait and the event sync
  EXPECT_EQ(firstMessage(r, "sync_wait_record_known"),
            "\"Stream Wait Event\" waits on record 9, which is no runtime call");
  CheckReport strict = check(synced(p), {.strict = true});
  EXPECT_EQ(result(strict, "sync_wait_record_known").status, CheckResult::kFail);
}

TEST(SyncChecks, WaitOnAnUnknownRecordIsNoFinding) {
  Plan p;
  p.waitRecord = -1;  // Kineto's "the producer did not see the record"
  CheckReport r = check(synced(p));
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(reacting(r), std::set<std::string>{});
  EXPECT_EQ(result(r, "sync_wait_record_known").status, CheckResult::kPass);
  EXPECT_EQ(result(r, "sync_wait_record_known").note,
            "2 of 2 waits name no record (-1): their producer did not see it (made before the capture window, or "
            "never recorded)");
  // Nothing names a record in the trace: the order rule has nothing to judge.
  EXPECT_EQ(result(r, "sync_record_before_wait").status, CheckResult::kSkipped);
}

TEST(SyncChecks, RecordAfterItsWait) {
  Plan p;
  p.recordTs = 47'000;  // after the wait (43 us) and the event sync (45 us) calls
  CheckReport r = check(synced(p));
  expectOnlyFailing(r, "sync_record_before_wait", 2);
  EXPECT_EQ(firstMessage(r, "sync_record_before_wait"),
            "\"Stream Wait Event\" waits on record \"orEventRecord\" that starts 4.000 us after the wait");
  EXPECT_EQ(result(r, "sync_record_before_wait").examples[0].events.size(), 3u);
}

TEST(SyncChecks, RecordAtItsWaitsStartIsInOrder) {
  Plan p;
  p.recordTs = 43'000;  // as the wait call, to the ns (µs-rounded traces do this)
  CheckReport r = check(synced(p));
  EXPECT_EQ(result(r, "sync_record_before_wait").status, CheckResult::kPass);
}

TEST(SyncChecks, StreamSyncEndsWhileItsStreamRuns) {
  Plan p;
  p.reluTs = 56'000;  // runs 56..62 us; the sync row (59..61 us) lies inside it
  p.reluDur = 6'000;
  p.streamSyncDur = 2'000;
  CheckReport r = check(synced(p));
  expectOnlyFailing(r, "sync_after_stream_work", 1);
  EXPECT_EQ(firstMessage(r, "sync_after_stream_work"),
            "\"Stream Sync\" ends 1.000 us before \"relu\", launched before the sync call, ends on its stream");
}

TEST(SyncChecks, ContextSyncEndsWhileAnotherStreamRuns) {
  TraceBuilder b = synced();
  // Launched from a second thread at 60 us onto stream 8, running until 67 us:
  // the device sync called at 64 us returns at 66 us.
  b.thread(kHostPid, kHostTid + 1, "thread 1002");
  b.op("aten::sub", 60'000, 1'500, 6, "cpu_op", kHostPid, kHostTid + 1);
  b.runtime("orLaunchKernel", 60'200, 1'000, 22, 6, kHostPid, kHostTid + 1);
  b.kernel("sub", 62'000, 5'000, 0, 8, 22, 6);
  CheckReport r = check(b);
  expectOnlyFailing(r, "sync_after_stream_work", 1);
  EXPECT_EQ(firstMessage(r, "sync_after_stream_work"),
            "\"Context Sync\" ends 1.000 us before \"sub\", launched before the sync call, ends on its device");
}

TEST(SyncChecks, WorkWithoutALaunchRowCountsFromItsStart) {
  Plan p;
  p.reluTs = 55'500;  // relu runs 55.5..57.5 us
  TraceBuilder b = synced(p);
  // Running from before the stream sync's call (59 us) until 64 us, with no
  // runtime row to say when it was launched: it was enqueued before it ran.
  b.kernel("unlaunched", 58'000, 6'000, 0, 7, 99, 5);
  CheckReport r = check(b);
  EXPECT_EQ(reacting(r), (std::set<std::string>{"sync_after_stream_work", "device_events_launched"}));
  EXPECT_EQ(result(r, "sync_after_stream_work").violations, 1u);
  EXPECT_EQ(firstMessage(r, "sync_after_stream_work"),
            "\"Stream Sync\" ends 1.000 us before \"unlaunched\", launched before the sync call, ends on its stream");
}

TEST(SyncChecks, WorkLaunchedDuringTheSyncIsNotWaitedFor) {
  TraceBuilder b = synced();
  // Launched from a second thread while the stream sync (59..63 us) waits.
  b.thread(kHostPid, kHostTid + 1, "thread 1002");
  b.op("aten::sub", 60'000, 1'500, 6, "cpu_op", kHostPid, kHostTid + 1);
  b.runtime("orLaunchKernel", 60'200, 1'000, 22, 6, kHostPid, kHostTid + 1);
  b.kernel("sub", 63'500, 1'000, 0, 7, 22, 6);
  CheckReport r = check(b);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(reacting(r), std::set<std::string>{});
}

TEST(SyncChecks, KernelBeforeItsLaunch) {
  TraceBuilder b = synced();
  b.op("aten::neg", 70'000, 10'000, 7);
  b.runtime("orLaunchKernel", 72'000, 5'000, 23, 7);
  b.kernel("neg", 71'500, 1'000, 0, 7, 23, 7);  // no arrow: flow_forward would see it too
  CheckReport r = check(b);
  expectOnlyFailing(r, "device_after_launch", 1);
  EXPECT_EQ(firstMessage(r, "device_after_launch"), "\"neg\" starts 0.500 us before its launch \"orLaunchKernel\"");
}

TEST(SyncChecks, StreamSyncCrossingTheWorkItWaitsForOnlyWarns) {
  Plan p;
  p.reluTs = 56'000;  // runs 56..62 us; the sync row (59..63 us) starts inside it and ends after
  p.reluDur = 6'000;
  CheckReport r = check(synced(p));
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(reacting(r), std::set<std::string>{"device_rows_nest"});
  const CheckResult& c = result(r, "device_rows_nest");
  EXPECT_EQ(c.status, CheckResult::kWarn);
  EXPECT_EQ(c.warnings, 1u);
  ASSERT_EQ(c.examples.size(), 1u);
  EXPECT_TRUE(c.examples[0].artifact);
  EXPECT_FALSE(check(synced(p), {.strict = true}).ok);
}

TEST(SyncChecks, WorkCrossingASyncRowStillFails) {
  Plan p;
  p.reluTs = 61'000;  // starts inside the sync row (59..63 us), ends at 65 us
  p.reluDur = 4'000;
  CheckReport r = check(synced(p));
  EXPECT_FALSE(r.ok);
  const CheckResult& c = result(r, "device_rows_nest");
  EXPECT_EQ(c.status, CheckResult::kFail);
  EXPECT_EQ(c.violations, 1u);
  // ...and the sync ends before relu, which it waited for.
  EXPECT_EQ(reacting(r), (std::set<std::string>{"device_rows_nest", "sync_after_stream_work"}));
}

TEST(SyncChecks, RulesSkipWithoutSyncRows) {
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 100'000);
  b.launch("aten::mm", "gemm", 1'000, 20'000, 5'000, 0, 7, 11, 2);
  CheckReport r = check(b);
  for (const char* name :
       {"sync_rows_described", "sync_record_before_wait", "sync_after_stream_work", "sync_wait_record_known"})
    EXPECT_EQ(result(r, name).status, CheckResult::kSkipped) << name;
  EXPECT_EQ(result(r, "device_after_launch").status, CheckResult::kPass);
}

}  // namespace
}  // namespace openreg::trace
