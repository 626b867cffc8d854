// The Kineto session against the replay activity library, without Python:
// misuse (stop before start, two sessions, destruction while running), the
// int32 truncation of op ids, and what reaches the logger.
#include "session.h"

#include "activity_store.h"
#include "slab_arena.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <set>
#include <thread>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <libkineto.h>
#include <output_base.h>

using namespace openreg::profiler;
using libkineto::ActivityType;

namespace {

std::string replayPath() {
  const char* dir = std::getenv("OPENREG_REPLAY_DIR");
  return std::string(dir != nullptr ? dir : ".") + "/libopenreg_activity_replay.so";
}

// The replay library's test controls, from the same loaded instance.
struct Replay {
  void* handle = dlopen(replayPath().c_str(), RTLD_NOW | RTLD_LOCAL);
  int (*submit)(int, int, uint64_t, const char*, uint64_t, uint64_t,
                int) = reinterpret_cast<decltype(submit)>(dlsym(handle, "orReplaySubmit"));
  int (*synchronize)() = reinterpret_cast<decltype(synchronize)>(dlsym(handle, "orReplaySynchronize"));
  int (*isTracing)() = reinterpret_cast<decltype(isTracing)>(dlsym(handle, "orReplayIsTracing"));
  int (*registered)() = reinterpret_cast<decltype(registered)>(dlsym(handle, "orReplayRegistered"));
  int (*depth)(int) = reinterpret_cast<decltype(depth)>(dlsym(handle, "orReplayExternalDepth"));
};

class RecordingLogger : public libkineto::ActivityLogger {
 public:
  // Owned by the session's trace buffer (Kineto keeps the pointers too).
  std::vector<const libkineto::ITraceActivity*> activities;
  std::vector<int64_t> devices;

  void handleDeviceInfo(const libkineto::DeviceInfo& info, int64_t) override { devices.push_back(info.id); }
  void handleResourceInfo(const libkineto::ResourceInfo&, int64_t) override {}
  void handleOverheadInfo(const OverheadInfo&, int64_t) override {}
  void handleTraceSpan(const libkineto::TraceSpan&) override {}
  // Handed over by reference (Kineto keeps the pointer), never to be copied.
  void handleActivity(const libkineto::ITraceActivity& a) override {
    ASSERT_NE(dynamic_cast<const OpenregActivity*>(&a), nullptr);
    activities.push_back(&a);
  }
  void handleGenericActivity(const libkineto::GenericTraceActivity&) override {
    FAIL() << "handleGenericActivity makes Kineto copy the activity";
  }
  void handleTraceStart(const std::unordered_map<std::string, std::string>&, const std::string&) override {}
  void finalizeMemoryTrace(const std::string&, const libkineto::Config&) override {}
  void finalizeTrace(const libkineto::Config&, std::unique_ptr<libkineto::ActivityBuffers> buffers, int64_t,
                     std::unordered_map<std::string, std::vector<std::string>>&) override {
    (void)buffers.release();  // never called here; the type is incomplete
  }

  std::vector<const libkineto::ITraceActivity*> ofType(ActivityType type) const {
    std::vector<const libkineto::ITraceActivity*> out;
    for (const auto* a : activities)
      if (a->type() == type) out.push_back(a);
    return out;
  }
};

SessionRequest everything() {
  return SessionRequest::fromActivityTypes({ActivityType::CPU_OP, ActivityType::CONCURRENT_KERNEL,
                                            ActivityType::GPU_MEMCPY, ActivityType::GPU_MEMSET,
                                            ActivityType::GPU_USER_ANNOTATION, ActivityType::PRIVATEUSE1_RUNTIME});
}

int64_t now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class SessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (api == nullptr) api = new ActivityApi(replayPath());  // once, also under --gtest_repeat
  }
  static const ActivityApi* api;
  Replay replay_;

  // `count` kernels of 1 us on device 1, stream 1, then a device synchronize.
  void launchKernels(int count, const char* name) {
    for (int k = 0; k < count; ++k) ASSERT_EQ(replay_.submit(1, 0, 1, name, 0, 1'000, 0), 0);
    replay_.synchronize();
  }
};
const ActivityApi* SessionTest::api = nullptr;

}  // namespace

TEST(WindowLease, OneHolderAtATimeUntilReleased) {
  WindowLease first = WindowLease::tryAcquire();
  ASSERT_TRUE(first.held());
  EXPECT_FALSE(WindowLease::tryAcquire().held()) << "the window is taken";
  WindowLease moved = std::move(first);
  EXPECT_FALSE(first.held());
  EXPECT_TRUE(moved.held());
  EXPECT_FALSE(WindowLease::tryAcquire().held()) << "moving a lease keeps the window taken";
  moved.release();
  EXPECT_FALSE(moved.held());
  {
    WindowLease scoped = WindowLease::tryAcquire();
    EXPECT_TRUE(scoped.held());
  }
  WindowLease again = WindowLease::tryAcquire();
  EXPECT_TRUE(again.held()) << "a destroyed lease lets the window go";
}

TEST(SessionRequest, OnlyDeviceTypesAskForASession) {
  EXPECT_FALSE(SessionRequest::fromActivityTypes(
                   {ActivityType::CPU_OP, ActivityType::PRIVATEUSE1_RUNTIME, ActivityType::PRIVATEUSE1_DRIVER})
                   .anyDeviceActivity());
  EXPECT_TRUE(SessionRequest::fromActivityTypes({ActivityType::GPU_MEMSET}).anyDeviceActivity());
}

TEST_F(SessionTest, LinksThroughTruncatedOpIdsAndFlows) {
  ASSERT_TRUE(api->available()) << api->error();
  OpenregSession session(*api, everything());
  const uint64_t opId = (1ull << 32) + 42;  // torch keeps the low 32 bits
  const int64_t begin = now();
  session.pushCorrelationId(opId);
  session.start();
  ASSERT_EQ(replay_.submit(1, 0, 1, "k", 0, 10'000, 0), 0);
  ASSERT_EQ(replay_.submit(2, 0, 1, "", 4096, 10'000, 1), 0);
  replay_.synchronize();
  session.popCorrelationId();
  session.stop();
  const int64_t end = now();
  EXPECT_EQ(replay_.depth(1), 0) << "push/pop reached the runtime's stack";

  libkineto::TraceSpan span(0, 0, "test");
  libkineto::GenericTraceActivity op(span, ActivityType::CPU_OP, "aten::op");
  op.id = 42;
  std::vector<int32_t> asked;
  RecordingLogger logger;
  session.processTrace(
      logger,
      [&](int32_t id) -> const libkineto::ITraceActivity* {
        asked.push_back(id);
        return id == 42 ? &op : nullptr;
      },
      begin, end);

  auto kernels = logger.ofType(ActivityType::CONCURRENT_KERNEL);
  auto copies = logger.ofType(ActivityType::GPU_MEMCPY);
  auto launches = logger.ofType(ActivityType::PRIVATEUSE1_RUNTIME);
  ASSERT_EQ(kernels.size(), 1u);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(kernels[0]->linkedActivity(), &op);
  EXPECT_EQ(copies[0]->linkedActivity(), &op);
  EXPECT_EQ(copies[0]->name(), "Memcpy HtoD (Host -> Device)");
  EXPECT_NE(std::find(asked.begin(), asked.end(), 42), asked.end());
  // Two launches with flows, one device sync without.
  int flows = 0;
  for (const auto* l : launches) {
    if (l->flowId() != 0) {
      ++flows;
      EXPECT_TRUE(l->flowStart());
      EXPECT_EQ(l->flowType(), static_cast<int>(libkineto::kLinkAsyncCpuGpu));
    }
  }
  EXPECT_EQ(flows, 2);
  EXPECT_FALSE(kernels[0]->flowStart());
  EXPECT_NE(kernels[0]->flowId(), copies[0]->flowId());
  EXPECT_EQ(kernels[0]->resourceId(), 1);
  // Args are formatted when asked for: as a value, and as the JSON args.
  EXPECT_EQ(kernels[0]->getMetadataValue("correlation"), std::to_string(kernels[0]->correlationId()));
  EXPECT_EQ(kernels[0]->getMetadataValue("stream"), "1");
  EXPECT_EQ(kernels[0]->getMetadataValue("grid"), "[4, 1, 1]");  // what the replay library writes
  EXPECT_EQ(copies[0]->getMetadataValue("kind"), "HtoD");
  EXPECT_EQ(kernels[0]->getMetadataValue("no such key"), "");
  // Laid out as Kineto lays out its own args: "key": value, joined by ", ".
  const std::string json = kernels[0]->metadataJson();
  EXPECT_EQ(json, "\"device\": 0, \"stream\": 1, \"correlation\": " + std::to_string(kernels[0]->correlationId()) +
                      ", \"grid\": [4, 1, 1], \"block\": " + kernels[0]->getMetadataValue("block") +
                      ", \"shared memory\": " + kernels[0]->getMetadataValue("shared memory") +
                      ", \"stream priority\": 0")
      << json;
  EXPECT_NE(copies[0]->metadataJson().find("\"kind\": \"HtoD\", \"bytes\": "), std::string::npos);
  EXPECT_EQ(kernels[0]->traceSpan()->name, "openreg");

  auto info = session.getDeviceInfo();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->sortIndex, libkineto::kExceedMaxPid);
  auto rows = session.getResourceInfos();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "Stream 1 (default)");
  // The device sync: a row of its own below the streams, as Kineto writes CUPTI's.
  EXPECT_EQ(rows[1].id, kHostWaitRowBase);
  EXPECT_GT(rows[1].sortIndex, rows[0].sortIndex);
  EXPECT_EQ(rows[1].name.rfind("Host waits (thread ", 0), 0u) << rows[1].name;
  const auto syncs = logger.ofType(ActivityType::CUDA_SYNC);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(syncs[0]->name(), "Context Sync");
  EXPECT_EQ(syncs[0]->resourceId(), kHostWaitRowBase);
  // Linked to the op that waited, so the row's External id names it, as CUDA's sync rows do; not hidden, so
  // prof.events() lists it as the trace does (its time is kept out of the device time in Python).
  EXPECT_EQ(syncs[0]->linkedActivity(), &op);
  EXPECT_EQ(syncs[0]->getMetadataValue("hidden"), "") << "in prof.events(), as in the trace";
  EXPECT_EQ(kernels[0]->getMetadataValue("hidden"), "");
  EXPECT_EQ(syncs[0]->metadataJson(),
            "\"device\": 0, \"stream\": -1, \"correlation\": " + std::to_string(syncs[0]->correlationId()) +
                ", \"cuda_sync_kind\": \"Context Sync\"");
  EXPECT_EQ(session.getMetadata().at("openreg_dropped_records"), "0");
  // The buffer Kineto takes over owns what the logger points at: its one
  // entry is the store of the activities, which outlive the session and go
  // with the buffer.
  auto buffer = session.getTraceBuffer();
  ASSERT_NE(buffer, nullptr);
  ASSERT_EQ(buffer->activities.size(), 1u);
  ASSERT_NE(dynamic_cast<const ActivityStore*>(buffer->activities[0].get()), nullptr);
  EXPECT_EQ(buffer->span.startTime, begin);
  EXPECT_EQ(buffer->span.endTime, end);
  EXPECT_EQ(buffer->gpuOpCount, 2);
  EXPECT_EQ(session.getTraceBuffer(), nullptr) << "handed over once";
}

TEST_F(SessionTest, ActivitiesLiveAsLongAsTheTraceBuffer) {
  const size_t slabsBefore = SlabArena::slabsInUse();
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer;
  RecordingLogger logger;
  {
    OpenregSession session(*api, everything());
    const int64_t begin = now();
    session.start();
    launchKernels(3000, "kernel_name_past_small_strings");
    session.stop();
    const std::string before = session.getMetadata().at("openreg_profiler");
    EXPECT_NE(before.find("\"device_activities\":3000,"), std::string::npos) << before;
    session.processTrace(
        logger, [](int32_t) { return nullptr; }, begin, now());
    // The records are gone (the activities have what they need); the figures stay.
    EXPECT_EQ(session.getMetadata().at("openreg_profiler"), before);
    buffer = session.getTraceBuffer();
  }
  // The session is gone; the activities are not.
  const auto kernels = logger.ofType(ActivityType::CONCURRENT_KERNEL);
  ASSERT_EQ(kernels.size(), 3000u);
  EXPECT_EQ(kernels.back()->name(), "kernel_name_past_small_strings");
  EXPECT_EQ(kernels.back()->getMetadataValue("stream"), "1");
  EXPECT_GT(SlabArena::slabsInUse(), slabsBefore);
  buffer.reset();
  EXPECT_EQ(SlabArena::slabsInUse(), slabsBefore) << "the activities' memory goes with the buffer";
}

// stop() leaves what is still queued to the session's parsing thread (the
// training thread calls stop() in Kineto's on-demand traces); what reads the
// records waits for it.
TEST_F(SessionTest, RecordsStillQueuedAtStopReachTheTrace) {
  OpenregSession session(*api, everything());
  session.start();
  launchKernels(2000, "tail_kernel");
  session.stop();
  const std::string metadata = session.getMetadata().at("openreg_profiler");
  EXPECT_NE(metadata.find("\"device_activities\":2000,"), std::string::npos) << metadata;
  EXPECT_GE(session.timings().records, 2000u);
  RecordingLogger logger;
  session.processTrace(
      logger, [](int32_t) { return nullptr; }, 0, now());
  EXPECT_EQ(logger.ofType(ActivityType::CONCURRENT_KERNEL).size(), 2000u);
}

// Asked before stop(), as processTrace may be: the session stops first.
TEST_F(SessionTest, MetadataAskedWhileRunningStopsTheSessionFirst) {
  OpenregSession session(*api, everything());
  session.start();
  launchKernels(500, "early_kernel");
  const std::string metadata = session.getMetadata().at("openreg_profiler");
  EXPECT_NE(metadata.find("\"device_activities\":500,"), std::string::npos) << metadata;
  EXPECT_EQ(replay_.isTracing(), 0);
  EXPECT_EQ(replay_.registered(), 0);
  OpenregSession next(*api, everything());  // the buffers go to the new session only
  next.start();
  launchKernels(7, "next_kernel");
  next.stop();
  const std::string nextMetadata = next.getMetadata().at("openreg_profiler");
  EXPECT_NE(nextMetadata.find("\"device_activities\":7,"), std::string::npos) << nextMetadata;
}

TEST_F(SessionTest, ASessionStartedWhileTheLastOneParsesKeepsToItsOwnRecords) {
  auto first = std::make_unique<OpenregSession>(*api, everything());
  first->start();
  launchKernels(3000, "first_kernel");
  first->stop();
  OpenregSession second(*api, everything());
  second.start();
  EXPECT_TRUE(second.errors().empty()) << "the window is free once stop() returns";
  launchKernels(1000, "second_kernel");
  second.stop();
  const std::string firstMetadata = first->getMetadata().at("openreg_profiler");
  const std::string secondMetadata = second.getMetadata().at("openreg_profiler");
  EXPECT_NE(firstMetadata.find("\"device_activities\":3000,"), std::string::npos) << firstMetadata;
  EXPECT_NE(secondMetadata.find("\"device_activities\":1000,"), std::string::npos) << secondMetadata;
  // Destroyed unprocessed, as Kineto does with an abandoned trace.
  first.reset();
}

TEST_F(SessionTest, AStoppedSessionDestroyedUnprocessedWaitsForItsParse) {
  for (int round = 0; round < 3; ++round) {
    OpenregSession session(*api, everything());
    session.start();
    launchKernels(3000, "abandoned_kernel");
    session.stop();
  }  // the destructor joins the parser before the records go
  EXPECT_EQ(replay_.registered(), 0);
}

TEST_F(SessionTest, StopBeforeStartAndStartTwiceAreHarmless) {
  OpenregSession early(*api, everything());
  early.stop();
  early.start();  // after stop: refused, recorded
  EXPECT_FALSE(early.errors().empty());
  EXPECT_EQ(replay_.isTracing(), 0);

  OpenregSession twice(*api, everything());
  twice.start();
  twice.start();
  EXPECT_EQ(twice.errors().size(), 1u);
  twice.stop();
  twice.stop();
  EXPECT_EQ(replay_.isTracing(), 0);
  EXPECT_EQ(replay_.registered(), 0);
}

TEST_F(SessionTest, ASecondSessionStaysInertWhileTheFirstCollects) {
  OpenregSession first(*api, everything());
  OpenregSession second(*api, everything());
  first.start();
  second.start();
  ASSERT_EQ(second.errors().size(), 1u);
  EXPECT_NE(second.errors()[0].find("already collecting"), std::string::npos);
  EXPECT_EQ(replay_.isTracing(), 1) << "the first session keeps its window";
  second.stop();
  EXPECT_EQ(replay_.isTracing(), 1);
  first.stop();
  EXPECT_EQ(replay_.isTracing(), 0);
  EXPECT_EQ(second.getMetadata().count("openreg_profiler_error"), 1u);
}

// What torch cannot do (two threads profiling at once crash it, see the
// README), the plugin must survive: sessions on two threads starting,
// stopping and converting at the same time. One of them owns the window at
// a time; the other stays inert; no record appears twice; the device is
// left as found.
TEST_F(SessionTest, SessionsOnTwoThreadsAtOnce) {
  constexpr int kRounds = 40;
  constexpr int kKernelsPerRound = 3;
  std::atomic<int> owned{0}, inert{0};
  std::atomic<uint64_t> kernelsSeen{0};
  std::atomic<int> failures{0};
  auto worker = [&] {
    Replay mine;
    for (int round = 0; round < kRounds; ++round) {
      OpenregSession session(*api, everything());
      const int64_t begin = now();
      session.pushCorrelationId(1);
      session.start();
      for (int k = 0; k < kKernelsPerRound; ++k) mine.submit(1, 0, 1, "k", 0, 1'000, 0);
      mine.synchronize();
      session.popCorrelationId();
      session.stop();
      RecordingLogger logger;
      session.processTrace(
          logger, [](int32_t) { return nullptr; }, begin, now());
      const auto kernels = logger.ofType(ActivityType::CONCURRENT_KERNEL);
      std::set<int64_t> ids;
      for (const auto* k : kernels) ids.insert(k->correlationId());
      if (ids.size() != kernels.size()) ++failures;  // a record twice
      // Owned or inert by what the session says; an owner may also warn about
      // the other thread's kernels, launched in its window and ending after it.
      const auto errors = session.errors();
      const bool wasInert = std::any_of(errors.begin(), errors.end(), [](const std::string& e) {
        return e.find("already collecting") != std::string::npos;
      });
      if (!wasInert) {
        ++owned;
        if (kernels.size() < kKernelsPerRound) ++failures;  // its own work is in its window
      } else {
        ++inert;
        if (!kernels.empty()) ++failures;
      }
      kernelsSeen += kernels.size();
      session.getTraceBuffer();
    }
  };
  std::thread a(worker), b(worker);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(owned + inert, 2 * kRounds);
  EXPECT_GE(owned.load(), 1);
  EXPECT_LE(kernelsSeen.load(), uint64_t{2 * kRounds * kKernelsPerRound}) << "no kernel counted twice";
  EXPECT_EQ(replay_.isTracing(), 0);
  EXPECT_EQ(replay_.registered(), 0);
}

TEST_F(SessionTest, DestroyingARunningSessionClosesTheWindow) {
  {
    OpenregSession session(*api, everything());
    session.start();
    EXPECT_EQ(replay_.isTracing(), 1);
  }
  EXPECT_EQ(replay_.isTracing(), 0);
  EXPECT_EQ(replay_.registered(), 0);
  OpenregSession next(*api, everything());
  next.start();
  EXPECT_TRUE(next.errors().empty());
  next.stop();
}

TEST_F(SessionTest, UnmatchedPopsAreNotForwarded) {
  OpenregSession session(*api, everything());
  session.popCorrelationId();
  session.popUserCorrelationId();
  session.pushUserCorrelationId(7);
  EXPECT_EQ(replay_.depth(2), 1);
  session.popUserCorrelationId();
  session.popUserCorrelationId();
  EXPECT_EQ(replay_.depth(2), 0);
}

TEST(SessionWithoutLibrary, NamesTheLaneAndTheCause) {
  ActivityApi missing("/nonexistent/libopenreg.so");
  OpenregSession session(missing, everything());
  session.pushCorrelationId(1);
  session.start();
  session.popCorrelationId();
  session.stop();
  RecordingLogger logger;
  session.processTrace(
      logger, [](int32_t) { return nullptr; }, 0, now());
  EXPECT_TRUE(logger.activities.empty());
  auto info = session.getDeviceInfo();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->name, "openreg (device tracing unavailable)");
  auto meta = session.getMetadata();
  EXPECT_NE(meta.at("openreg_profiler_error").find("/nonexistent/libopenreg.so"), std::string::npos);
  EXPECT_EQ(meta.at("openreg_profiler_error").front(), '"');
}

// torch.profiler's synchronous path passes ts ~ now + 7 s and a 500 ms
// duration whatever the window is; a schedule's warm-up longer than 7 s then
// starts the session after ts. Only an on-demand trace may be clipped to
// [ts, ts + duration]; the synchronous one keeps its whole window.
TEST_F(SessionTest, DeferredStartBoundsOnlyOnDemandTraces) {
  ASSERT_TRUE(api->available()) << api->error();
  for (const bool onDemand : {false, true}) {
    SessionRequest request = everything();
    request.requestedStartNs = now() - 2'000'000'000;  // ts two seconds ago
    request.durationNs = 500'000'000;                  // ended 1.5 s ago
    request.onDemand = onDemand;
    OpenregSession session(*api, request);
    const int64_t begin = now();
    session.start();
    ASSERT_EQ(replay_.submit(1, 0, 1, "k", 0, 10'000, 0), 0);
    replay_.synchronize();
    session.stop();
    const int64_t end = now();
    RecordingLogger logger;
    session.processTrace(
        logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, begin, end);
    EXPECT_EQ(logger.ofType(ActivityType::CONCURRENT_KERNEL).size(), onDemand ? 0u : 1u) << onDemand;
    const std::string meta = session.getMetadata().at("openreg_profiler");
    EXPECT_NE(meta.find(onDemand ? "\"deferred_start\":true" : "\"deferred_start\":false"), std::string::npos) << meta;
  }
}

namespace {

// Collects the warnings the session gives (TORCH_WARN) instead of printing them.
class WarningsSeen : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override { messages.push_back(warning.msg()); }
  std::vector<std::string> messages;
};

SessionRequest onDemandRequest(int iterations) {
  SessionRequest request = everything();
  request.onDemand = true;
  request.traceId = "42";
  request.logFile = "/tmp/trace.json";
  request.iterations = iterations;
  return request;
}

}  // namespace

// The on-demand trace in progress (what the exit hook reads) follows its
// session: configured, collecting, collected; gone with the session.
TEST_F(SessionTest, OnDemandStatusFollowsItsSession) {
  ASSERT_TRUE(api->available()) << api->error();
  EXPECT_FALSE(OpenregSession::onDemandStatus());
  {
    OpenregSession synchronous(*api, everything());
    EXPECT_FALSE(OpenregSession::onDemandStatus()) << "a profile() session is no on-demand trace";
  }
  auto session = std::make_unique<OpenregSession>(*api, onDemandRequest(5));
  auto status = OpenregSession::onDemandStatus();
  ASSERT_TRUE(status);
  EXPECT_EQ(status->phase, OnDemandStatus::Phase::Requested);
  EXPECT_EQ(status->iterations, 5);
  EXPECT_EQ(status->traceId, "42");
  session->start();
  EXPECT_EQ(OpenregSession::onDemandStatus()->phase, OnDemandStatus::Phase::Collecting);
  session->stop();
  EXPECT_EQ(OpenregSession::onDemandStatus()->phase, OnDemandStatus::Phase::Collected);
  RecordingLogger logger;
  OpenregSession::markOnDemandEndingAtExit(true);
  (void)session->getMetadata();
  session->processTrace(
      logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, now() - 1'000'000, now());
  const std::string meta = session->getMetadata().at("openreg_profiler");
  EXPECT_NE(meta.find(R"("on_demand":{"trace_id":"42","log_file":"/tmp/trace.json","iterations":5,)"),
            std::string::npos)
      << meta;
  EXPECT_NE(meta.find(R"("ended_early_at_exit":true)"), std::string::npos) << meta;
  session.reset();
  EXPECT_FALSE(OpenregSession::onDemandStatus());
}

// Kineto drops an on-demand session unprocessed when a profile() takes over
// (its own warning is hidden in daemon mode): the session says so, naming the
// trace. A processed one, or one ending at exit, says nothing.
TEST_F(SessionTest, ACancelledOnDemandTraceSaysSo) {
  ASSERT_TRUE(api->available()) << api->error();
  WarningsSeen seen;
  c10::WarningUtils::WarningHandlerGuard guard(&seen);
  {
    OpenregSession session(*api, onDemandRequest(0));
    session.start();
    session.stop();
  }
  ASSERT_EQ(seen.messages.size(), 1u);
  EXPECT_NE(seen.messages[0].find("the on-demand trace (REQUEST_TRACE_ID=42, log file /tmp/trace.json) was "
                                  "cancelled before it was written"),
            std::string::npos)
      << seen.messages[0];
  {
    OpenregSession session(*api, onDemandRequest(0));
    session.start();
    RecordingLogger logger;
    session.processTrace(
        logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, now() - 1'000'000, now());
  }
  {
    OpenregSession session(*api, onDemandRequest(3));
    session.start();
    OpenregSession::markOnDemandEndingAtExit(false);
  }
  EXPECT_EQ(seen.messages.size(), 1u);
}
