// Batches (orStreamBeginBatch / orStreamEndBatch): held work, hand-over,
// nesting, blocking calls inside a batch, misuse, threads.
#include "test_support.h"

using openreg::testing::Gate;

namespace {

// Long enough for an executor to run a task it was handed: held work that
// runs within it was not held.
constexpr auto kSettle = std::chrono::milliseconds(50);

// Polls until `flag` is set, bounded so a stall fails instead of hanging.
bool becomesTrue(const std::atomic<bool>& flag, std::chrono::seconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

class Batch : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_OR(orStreamCreate(&stream_)); }
  void TearDown() override { EXPECT_OR(orStreamDestroy(stream_)); }

  orError_t launchSetting(std::atomic<bool>& flag) {
    return openreg::launch(stream_, "set_flag", [&flag] { flag = true; });
  }

  orStream_t stream_ = nullptr;
};

}  // namespace

TEST_F(Batch, WorkQueuedInABatchWaitsForItsEnd) {
  std::atomic<bool> ran{false};
  ASSERT_OR(orStreamBeginBatch(stream_));
  ASSERT_OR(launchSetting(ran));
  std::this_thread::sleep_for(kSettle);
  EXPECT_FALSE(ran.load()) << "work in an open batch reached the executor";
  EXPECT_EQ(orStreamQuery(stream_), orErrorNotReady);
  ASSERT_OR(orStreamEndBatch(stream_));
  EXPECT_TRUE(becomesTrue(ran)) << "the batch ended but its work never ran";
}

TEST_F(Batch, OrderIsKeptAroundAndInsideTheBatch) {
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) ASSERT_OR(openreg::launch(stream_, "append", [&order, i] { order.push_back(i); }));
  ASSERT_OR(orStreamBeginBatch(stream_));
  for (int i = 5; i < 10; ++i) ASSERT_OR(openreg::launch(stream_, "append", [&order, i] { order.push_back(i); }));
  ASSERT_OR(orStreamEndBatch(stream_));
  for (int i = 10; i < 15; ++i) ASSERT_OR(openreg::launch(stream_, "append", [&order, i] { order.push_back(i); }));
  ASSERT_OR(orStreamSynchronize(stream_));
  ASSERT_EQ(order.size(), 15u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(order[i], i);
}

TEST_F(Batch, NestedBatchesHandOverWhenTheOutermostEnds) {
  std::atomic<bool> ran{false};
  ASSERT_OR(orStreamBeginBatch(stream_));
  ASSERT_OR(orStreamBeginBatch(stream_));
  ASSERT_OR(launchSetting(ran));
  ASSERT_OR(orStreamEndBatch(stream_));
  std::this_thread::sleep_for(kSettle);
  EXPECT_FALSE(ran.load()) << "the inner end handed the work over";
  ASSERT_OR(orStreamEndBatch(stream_));
  EXPECT_TRUE(becomesTrue(ran));
}

TEST_F(Batch, BlockingCallsInsideABatchHandTheWorkOver) {
  // Each would wait forever for work only this thread could release.
  ASSERT_OR(orStreamBeginBatch(stream_));
  std::atomic<bool> first{false}, second{false}, third{false};
  ASSERT_OR(launchSetting(first));
  ASSERT_OR(orStreamSynchronize(stream_));
  EXPECT_TRUE(first.load());

  ASSERT_OR(launchSetting(second));
  ASSERT_OR(orDeviceSynchronize());
  EXPECT_TRUE(second.load());

  orEvent_t event;
  ASSERT_OR(orEventCreate(&event));
  ASSERT_OR(launchSetting(third));
  ASSERT_OR(orEventRecord(event, stream_));
  ASSERT_OR(orEventSynchronize(event));
  EXPECT_TRUE(third.load());
  ASSERT_OR(orEventDestroy(event));

  // A synchronous copy waits on the device's default stream.
  ASSERT_OR(orStreamBeginBatch(nullptr));
  void* device = nullptr;
  ASSERT_OR(orMalloc(&device, sizeof(int)));
  const int value = 7;
  int back = 0;
  ASSERT_OR(orMemcpyAsync(device, &value, sizeof(int), orMemcpyHostToDevice, nullptr));
  ASSERT_OR(orMemcpy(&back, device, sizeof(int), orMemcpyDeviceToHost));
  EXPECT_EQ(back, 7);
  ASSERT_OR(orStreamEndBatch(nullptr));
  ASSERT_OR(orFree(device));

  // The batch is still open: work queued after the hand-over is held again.
  std::atomic<bool> later{false};
  ASSERT_OR(launchSetting(later));
  std::this_thread::sleep_for(kSettle);
  EXPECT_FALSE(later.load());
  ASSERT_OR(orStreamEndBatch(stream_));
  EXPECT_TRUE(becomesTrue(later));
}

TEST_F(Batch, WaitingCallsRunWhatTheyQueueInsideABatch) {
  // The stream is idle when each call queues its task, so the task is held:
  // the call must hand it over itself, after queueing it.
  ASSERT_OR(orStreamBeginBatch(nullptr));
  void* device = nullptr;
  ASSERT_OR(orMalloc(&device, sizeof(int)));
  ASSERT_OR(orDeviceSynchronize());
  ASSERT_OR(orMemset(device, 3, sizeof(int)));
  int back = 0;
  ASSERT_OR(orMemcpy(&back, device, sizeof(int), orMemcpyDeviceToHost));
  EXPECT_EQ(back, 0x03030303);
  const int value = 9;
  ASSERT_OR(orMemcpy(device, &value, sizeof(int), orMemcpyHostToDevice));
  ASSERT_OR(orMemcpy(&back, device, sizeof(int), orMemcpyDeviceToHost));
  EXPECT_EQ(back, 9);
  ASSERT_OR(orStreamEndBatch(nullptr));
  ASSERT_OR(orFree(device));
}

TEST_F(Batch, AnotherThreadsSynchronizeHandsHeldWorkOver) {
  std::atomic<bool> ran{false};
  ASSERT_OR(orStreamBeginBatch(stream_));
  ASSERT_OR(launchSetting(ran));
  orError_t synced = orErrorNotReady;
  std::thread([&] { synced = orStreamSynchronize(stream_); }).join();
  EXPECT_EQ(synced, orSuccess);
  EXPECT_TRUE(ran.load());
  ASSERT_OR(orStreamEndBatch(stream_));
}

TEST_F(Batch, AStreamAlreadyRunningKeepsRunningDuringABatch) {
  Gate gate;
  std::atomic<bool> gated{false}, queued{false};
  ASSERT_OR(openreg::launch(stream_, "gated", [&] {
    gate.waitOpen();
    gated = true;
  }));
  ASSERT_OR(orStreamBeginBatch(stream_));
  ASSERT_OR(launchSetting(queued));
  gate.open();
  // The executor serving the stream takes what was queued behind its task.
  EXPECT_TRUE(becomesTrue(queued)) << "work queued behind a running task stalled in the batch";
  EXPECT_TRUE(gated.load());
  ASSERT_OR(orStreamEndBatch(stream_));
  ASSERT_OR(orStreamSynchronize(stream_));
}

TEST_F(Batch, EndingABatchThisThreadDidNotOpenIsAnError) {
  EXPECT_EQ(orStreamEndBatch(stream_), orErrorInvalidValue);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("has no open batch"), std::string::npos)
      << orGetLastErrorMessage();

  ASSERT_OR(orStreamBeginBatch(stream_));
  orError_t fromOther = orSuccess;
  std::thread([&] { fromOther = orStreamEndBatch(stream_); }).join();
  EXPECT_EQ(fromOther, orErrorInvalidValue);
  // Still open here, and still this thread's to end.
  std::atomic<bool> ran{false};
  ASSERT_OR(launchSetting(ran));
  ASSERT_OR(orStreamEndBatch(stream_));
  EXPECT_TRUE(becomesTrue(ran));
  EXPECT_EQ(orStreamEndBatch(stream_), orErrorInvalidValue);
}

TEST_F(Batch, BadHandlesAndExecutorThreadsAreRefused) {
  auto* bogus = reinterpret_cast<orStream_t>(uintptr_t{0xdead0});
  EXPECT_EQ(orStreamBeginBatch(bogus), orErrorInvalidResourceHandle);
  EXPECT_EQ(orStreamEndBatch(bogus), orErrorInvalidResourceHandle);

  std::atomic<int> inKernel{orSuccess};
  ASSERT_OR(openreg::launch(stream_, "begins_a_batch", [&] { inKernel = orStreamBeginBatch(nullptr); }));
  ASSERT_OR(orStreamSynchronize(stream_));
  EXPECT_EQ(inKernel.load(), orErrorNotSupported);
}

TEST_F(Batch, AThreadThatExitsWithABatchOpenEndsIt) {
  std::atomic<bool> ran{false};
  std::thread([&] {
    ASSERT_OR(orStreamBeginBatch(stream_));
    ASSERT_OR(launchSetting(ran));
  }).join();
  ASSERT_TRUE(becomesTrue(ran)) << "work held by a thread that exited never ran";
  ASSERT_OR(orStreamSynchronize(stream_));
}

TEST_F(Batch, ManyThreadsBatchingSharedAndOwnStreams) {
  constexpr int kThreads = 6, kBatches = 300, kPerBatch = 4;
  std::atomic<int> ran{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      orStream_t own;
      if (orStreamCreate(&own) != orSuccess) return;
      for (int b = 0; b < kBatches; ++b) {
        orStream_t target = (b + t) % 2 == 0 ? own : stream_;
        const openreg::StreamBatch batch(target);
        if (batch.status() != orSuccess) return;
        for (int i = 0; i < kPerBatch; ++i) openreg::launch(target, "count", [&] { ++ran; });
      }
      orStreamSynchronize(own);
      orStreamDestroy(own);
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_OR(orStreamSynchronize(stream_));
  EXPECT_EQ(ran.load(), kThreads * kBatches * kPerBatch);
}
