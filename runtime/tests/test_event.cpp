// Events: query, synchronize, timing, cross-stream and cross-device waits.
#include "test_support.h"

using openreg::testing::ActivityCollector;
using openreg::testing::Gate;

TEST(Event, NeverRecordedEventIsComplete) {
  orEvent_t event;
  ASSERT_OR(orEventCreate(&event));
  EXPECT_OR(orEventQuery(event));
  EXPECT_OR(orEventSynchronize(event));
  float ms;
  EXPECT_EQ(orEventElapsedTime(&ms, event, event), orErrorInvalidResourceHandle);
  ASSERT_OR(orEventDestroy(event));
  EXPECT_EQ(orEventDestroy(event), orErrorInvalidResourceHandle);
  EXPECT_EQ(orEventQuery(event), orErrorInvalidResourceHandle);
}

TEST(Event, QueryFollowsTheCapturedWork) {
  orEvent_t event;
  ASSERT_OR(orEventCreate(&event));
  Gate gate;
  ASSERT_OR(openreg::launch(nullptr, "blocked", [&] { gate.waitOpen(); }));
  ASSERT_OR(orEventRecord(event, nullptr));
  EXPECT_EQ(orEventQuery(event), orErrorNotReady);
  gate.open();
  ASSERT_OR(orEventSynchronize(event));
  EXPECT_OR(orEventQuery(event));
  ASSERT_OR(orEventDestroy(event));
}

TEST(Event, TimingIsPositiveAndAgreesWithKernelDurations) {
  ActivityCollector collector;
  ASSERT_OR(orActivityEnable(OR_ACTIVITY_KIND_KERNEL));
  ASSERT_OR(orActivityEnableTracing());
  orEvent_t start, end;
  ASSERT_OR(orEventCreate(&start));
  ASSERT_OR(orEventCreate(&end));
  // Kernels before and after the events bound them from outside, so elapsed
  // time is bracketed causally, all in the device clock the records carry.
  ASSERT_OR(openreg::launch(nullptr, "before", [] {}));
  ASSERT_OR(orEventRecord(start, nullptr));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OR(openreg::launch(nullptr, "sleepy", [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }));
  }
  ASSERT_OR(orEventRecord(end, nullptr));
  ASSERT_OR(openreg::launch(nullptr, "after", [] {}));
  ASSERT_OR(orDeviceSynchronize());
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();
  float ms = 0;
  ASSERT_OR(orEventElapsedTime(&ms, start, end));
  EXPECT_GT(ms, 0.0f);
  std::map<std::string, std::vector<orActivityKernel>> kernels;
  for (const auto& k : collector.records<orActivityKernel>(OR_ACTIVITY_KIND_KERNEL)) kernels[k.name].push_back(k);
  ASSERT_EQ(kernels["before"].size(), 1u);
  ASSERT_EQ(kernels["sleepy"].size(), 3u);
  ASSERT_EQ(kernels["after"].size(), 1u);
  uint64_t firstSleepyStart = UINT64_MAX, lastSleepyEnd = 0;
  for (const auto& k : kernels["sleepy"]) {
    firstSleepyStart = std::min(firstSleepyStart, k.start);
    lastSleepyEnd = std::max(lastSleepyEnd, k.end);
  }
  // before.end <= start event <= first sleepy start; last sleepy end <= end event <= after.start.
  const double innerMs = (lastSleepyEnd - firstSleepyStart) / 1e6;
  const double outerMs = (kernels["after"][0].start - kernels["before"][0].end) / 1e6;
  constexpr double kFloatSlackMs = 1e-3;  // ms is a float
  EXPECT_GE(ms, innerMs - kFloatSlackMs) << "the events must bracket the kernels between them";
  EXPECT_LE(ms, outerMs + kFloatSlackMs) << "the events must lie between the kernels around them";
  // Reversed order is negative, as in CUDA.
  float reversed = 0;
  ASSERT_OR(orEventElapsedTime(&reversed, end, start));
  EXPECT_FLOAT_EQ(reversed, -ms);
  ASSERT_OR(orEventDestroy(start));
  ASSERT_OR(orEventDestroy(end));
}

TEST(Event, TimingDisabledAndPendingAreReported) {
  orEvent_t plain, timed;
  ASSERT_OR(orEventCreateWithFlags(&plain, orEventDisableTiming));
  ASSERT_OR(orEventCreate(&timed));
  ASSERT_OR(orEventRecord(plain, nullptr));
  ASSERT_OR(orEventRecord(timed, nullptr));
  ASSERT_OR(orDeviceSynchronize());
  float ms;
  EXPECT_EQ(orEventElapsedTime(&ms, plain, timed), orErrorInvalidResourceHandle);
  Gate gate;
  ASSERT_OR(openreg::launch(nullptr, "blocked", [&] { gate.waitOpen(); }));
  orEvent_t pending;
  ASSERT_OR(orEventCreate(&pending));
  ASSERT_OR(orEventRecord(pending, nullptr));
  EXPECT_EQ(orEventElapsedTime(&ms, timed, pending), orErrorNotReady);
  gate.open();
  ASSERT_OR(orEventSynchronize(pending));
  EXPECT_OR(orEventElapsedTime(&ms, timed, pending));
  EXPECT_EQ(orEventCreateWithFlags(&pending, 0x80), orErrorInvalidValue);
  for (auto e : {plain, timed, pending}) ASSERT_OR(orEventDestroy(e));
}

TEST(Event, RecordOnAnotherDevicesStreamIsRejected) {
  orEvent_t event;
  ASSERT_OR(orEventCreate(&event));  // device 0
  orStream_t other;
  ASSERT_OR(orDeviceGetDefaultStream(1, &other));
  EXPECT_EQ(orEventRecord(event, other), orErrorInvalidResourceHandle);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("device 0"), std::string::npos);
  ASSERT_OR(orEventDestroy(event));
}

// The consumer stream must not run past the wait until the producer's
// captured work completed. Exercised within a device and across devices.
void checkCrossStreamWait(int producerDevice, int consumerDevice) {
  ASSERT_OR(orSetDevice(producerDevice));
  orStream_t producer;
  ASSERT_OR(orStreamCreate(&producer));
  orEvent_t ready;
  ASSERT_OR(orEventCreateWithFlags(&ready, orEventDisableTiming));
  ASSERT_OR(orSetDevice(consumerDevice));
  orStream_t consumer;
  ASSERT_OR(orStreamCreate(&consumer));

  Gate gate;
  std::atomic<int> step{0};
  std::atomic<int> consumerSawStep{-1};
  ASSERT_OR(openreg::launch(producer, "produce", [&] {
    gate.waitOpen();
    step = 1;
  }));
  ASSERT_OR(orEventRecord(ready, producer));
  ASSERT_OR(orStreamWaitEvent(consumer, ready, 0));
  ASSERT_OR(openreg::launch(consumer, "consume", [&] { consumerSawStep = step.load(); }));

  // Give a broken runtime the chance to run the consumer early.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(consumerSawStep.load(), -1) << "the consumer ran before the event it waits on";
  EXPECT_EQ(orStreamQuery(consumer), orErrorNotReady);
  gate.open();
  ASSERT_OR(orStreamSynchronize(consumer));
  EXPECT_EQ(consumerSawStep.load(), 1);
  ASSERT_OR(orStreamDestroy(producer));
  ASSERT_OR(orStreamDestroy(consumer));
  ASSERT_OR(orEventDestroy(ready));
  ASSERT_OR(orSetDevice(0));
}

TEST(Event, CrossStreamWaitReallyWaits) { checkCrossStreamWait(0, 0); }
TEST(Event, CrossDeviceWaitReallyWaits) { checkCrossStreamWait(0, 1); }

TEST(Event, WaitsDoNotExhaustTheExecutorPool) {
  // More blocked streams than executor threads: parked waits hold no thread,
  // so the producer still gets to run.
  orDeviceProp prop;
  ASSERT_OR(orGetDeviceProperties(&prop, 0));
  const int waiters = prop.executorThreads * 4;
  orStream_t producer;
  ASSERT_OR(orStreamCreate(&producer));
  orEvent_t ready;
  ASSERT_OR(orEventCreate(&ready));
  Gate gate;
  ASSERT_OR(openreg::launch(producer, "produce", [&] { gate.waitOpen(); }));
  ASSERT_OR(orEventRecord(ready, producer));
  std::vector<orStream_t> consumers(waiters);
  std::atomic<int> consumed{0};
  for (auto& consumer : consumers) {
    ASSERT_OR(orStreamCreate(&consumer));
    ASSERT_OR(orStreamWaitEvent(consumer, ready, 0));
    ASSERT_OR(openreg::launch(consumer, "consume", [&] { ++consumed; }));
  }
  orStream_t independent;
  ASSERT_OR(orStreamCreate(&independent));
  std::atomic<bool> independentRan{false};
  ASSERT_OR(openreg::launch(independent, "independent", [&] { independentRan = true; }));
  ASSERT_OR(orStreamSynchronize(independent));
  EXPECT_TRUE(independentRan.load());
  EXPECT_EQ(consumed.load(), 0);
  gate.open();
  ASSERT_OR(orDeviceSynchronize());
  EXPECT_EQ(consumed.load(), waiters);
  for (auto consumer : consumers) ASSERT_OR(orStreamDestroy(consumer));
  ASSERT_OR(orStreamDestroy(producer));
  ASSERT_OR(orStreamDestroy(independent));
  ASSERT_OR(orEventDestroy(ready));
}

TEST(Event, DestroyingAnEventWithPendingWorkIsSafe) {
  orEvent_t event;
  ASSERT_OR(orEventCreate(&event));
  Gate gate;
  ASSERT_OR(openreg::launch(nullptr, "blocked", [&] { gate.waitOpen(); }));
  ASSERT_OR(orEventRecord(event, nullptr));
  orStream_t other;
  ASSERT_OR(orStreamCreate(&other));
  ASSERT_OR(orStreamWaitEvent(other, event, 0));
  ASSERT_OR(orEventDestroy(event));
  gate.open();
  ASSERT_OR(orStreamSynchronize(other));
  ASSERT_OR(orStreamDestroy(other));
}

TEST(Event, WaitBetweenQueuedKernelsKeepsStreamOrder) {
  // The executor takes queued work in batches; a wait inside the queue must
  // split the batch: work before it runs, work after it waits.
  orStream_t producer, consumer;
  ASSERT_OR(orStreamCreate(&producer));
  ASSERT_OR(orStreamCreate(&consumer));
  orEvent_t ready;
  ASSERT_OR(orEventCreate(&ready));
  Gate gate;
  std::mutex mutex;
  std::vector<std::string> order;
  auto note = [&](const char* what) {
    std::lock_guard lock(mutex);
    order.push_back(what);
  };
  ASSERT_OR(openreg::launch(producer, "produce", [&] {
    gate.waitOpen();
    note("produce");
  }));
  ASSERT_OR(orEventRecord(ready, producer));
  Gate consumerIdle;
  ASSERT_OR(openreg::launch(consumer, "hold", [&] { consumerIdle.waitOpen(); }));
  for (const char* name : {"before_1", "before_2"})
    ASSERT_OR(openreg::launch(consumer, name, [&, name] { note(name); }));
  ASSERT_OR(orStreamWaitEvent(consumer, ready, 0));
  for (const char* name : {"after_1", "after_2"}) ASSERT_OR(openreg::launch(consumer, name, [&, name] { note(name); }));
  consumerIdle.open();  // the consumer's queue is now taken as a whole
  // Wait (bounded, generously) for the work before the wait to run, then give
  // a broken runtime the chance to run what follows it too.
  for (int i = 0; i < 10000; ++i) {
    {
      std::lock_guard lock(mutex);
      if (order.size() >= 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::lock_guard lock(mutex);
    EXPECT_EQ(order, (std::vector<std::string>{"before_1", "before_2"}));
  }
  gate.open();
  ASSERT_OR(orStreamSynchronize(consumer));
  EXPECT_EQ(order, (std::vector<std::string>{"before_1", "before_2", "produce", "after_1", "after_2"}));
  ASSERT_OR(orStreamDestroy(producer));
  ASSERT_OR(orStreamDestroy(consumer));
  ASSERT_OR(orEventDestroy(ready));
}

TEST(Event, AWaitKeepsTheCaptureItSawWhenTheEventIsRecordedAgainElsewhere) {
  // As in CUDA, a stream waits for the capture that was latest when it was
  // told to wait; a later capture on another stream completing first must not
  // release it.
  orStream_t slow, fast, waiter;
  ASSERT_OR(orStreamCreate(&slow));
  ASSERT_OR(orStreamCreate(&fast));
  ASSERT_OR(orStreamCreate(&waiter));
  orEvent_t event;
  ASSERT_OR(orEventCreate(&event));
  Gate gate;
  ASSERT_OR(openreg::launch(slow, "held", [&] { gate.waitOpen(); }));
  ASSERT_OR(orEventRecord(event, slow));
  ASSERT_OR(orStreamWaitEvent(waiter, event, 0));
  std::atomic<bool> ran{false};
  ASSERT_OR(openreg::launch(waiter, "after_slow", [&] { ran = true; }));
  ASSERT_OR(orEventRecord(event, fast));
  ASSERT_OR(orStreamSynchronize(fast));
  ASSERT_OR(orEventSynchronize(event));  // the latest capture, on `fast`, is done
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(ran.load()) << "released by the capture on another stream";
  EXPECT_EQ(orStreamQuery(waiter), orErrorNotReady);
  gate.open();
  ASSERT_OR(orStreamSynchronize(waiter));
  EXPECT_TRUE(ran.load());
  for (auto s : {slow, fast, waiter}) ASSERT_OR(orStreamDestroy(s));
  ASSERT_OR(orEventDestroy(event));
}

// CUDA's order: once an event recorded last on a stream is done, the stream
// has no work left, and once the stream is synchronized the event is done.
// The record used to complete before the stream counted its batch.
TEST(Event, TheStreamIsIdleOnceItsLastEventIsDone) {
  orStream_t stream;
  ASSERT_OR(orStreamCreate(&stream));
  orEvent_t event;
  ASSERT_OR(orEventCreate(&event));
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 3; ++i) ASSERT_OR(openreg::launch(stream, "small", [] {}));
    ASSERT_OR(orEventRecord(event, stream));
    ASSERT_OR(orEventSynchronize(event));
    ASSERT_EQ(orStreamQuery(stream), orSuccess) << "round " << round;
    for (int i = 0; i < 3; ++i) ASSERT_OR(openreg::launch(stream, "small", [] {}));
    ASSERT_OR(orEventRecord(event, stream));
    ASSERT_OR(orStreamSynchronize(stream));
    ASSERT_EQ(orEventQuery(event), orSuccess) << "round " << round;
  }
  ASSERT_OR(orEventDestroy(event));
  ASSERT_OR(orStreamDestroy(stream));
}
