// Streams: order, concurrency, bounded executors, handles, synchronization.
#include <dirent.h>

#include "test_support.h"

using openreg::testing::Gate;

namespace {

int threadCount() {
  int count = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') ++count;
    }
    closedir(dir);
  }
  return count;
}

}  // namespace

TEST(Stream, WorkRunsInOrderWithinAStream) {
  orStream_t stream;
  ASSERT_OR(orStreamCreate(&stream));
  std::vector<int> order;
  for (int i = 0; i < 500; ++i) {
    ASSERT_OR(openreg::launch(stream, "append", [&order, i] { order.push_back(i); }));
  }
  ASSERT_OR(orStreamSynchronize(stream));
  ASSERT_EQ(order.size(), 500u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(order[i], i);
  ASSERT_OR(orStreamDestroy(stream));
}

TEST(Stream, LaunchReturnsBeforeTheKernelRuns) {
  Gate gate;
  std::atomic<bool> ran{false};
  ASSERT_OR(openreg::launch(nullptr, "blocked", [&] {
    gate.waitOpen();
    ran = true;
  }));
  EXPECT_EQ(orStreamQuery(nullptr), orErrorNotReady);
  EXPECT_FALSE(ran.load());
  gate.open();
  ASSERT_OR(orStreamSynchronize(nullptr));
  EXPECT_TRUE(ran.load());
  EXPECT_OR(orStreamQuery(nullptr));
}

TEST(Stream, DifferentStreamsRunConcurrently) {
  // Each kernel waits for the other to start: only possible if both run at once.
  orStream_t a, b;
  ASSERT_OR(orStreamCreate(&a));
  ASSERT_OR(orStreamCreate(&b));
  Gate aStarted, bStarted;
  std::atomic<bool> aSawB{false}, bSawA{false};
  ASSERT_OR(openreg::launch(a, "rendezvous_a", [&] {
    aStarted.open();
    aSawB = bStarted.waitOpen(std::chrono::seconds(10));
  }));
  ASSERT_OR(openreg::launch(b, "rendezvous_b", [&] {
    bStarted.open();
    bSawA = aStarted.waitOpen(std::chrono::seconds(10));
  }));
  ASSERT_OR(orStreamSynchronize(a));
  ASSERT_OR(orStreamSynchronize(b));
  EXPECT_TRUE(aSawB.load());
  EXPECT_TRUE(bSawA.load());
  ASSERT_OR(orStreamDestroy(a));
  ASSERT_OR(orStreamDestroy(b));
}

TEST(Stream, HundredsOfStreamsShareABoundedPool) {
  // Start the pools of both devices first so only streams are being added.
  for (int device = 0; device < 2; ++device) {
    ASSERT_OR(orSetDevice(device));
    ASSERT_OR(openreg::launch(nullptr, "warm", [] {}));
    ASSERT_OR(orDeviceSynchronize());
  }
  ASSERT_OR(orSetDevice(0));
  const int before = threadCount();
  std::vector<orStream_t> streams(300);
  std::atomic<int> ran{0};
  for (auto& stream : streams) {
    ASSERT_OR(orStreamCreate(&stream));
    ASSERT_OR(openreg::launch(stream, "tiny", [&] { ++ran; }));
  }
  ASSERT_OR(orDeviceSynchronize());
  EXPECT_EQ(ran.load(), 300);
  EXPECT_LE(threadCount(), before + 1) << "streams must not own threads";
  for (auto stream : streams) ASSERT_OR(orStreamDestroy(stream));
}

TEST(Stream, DeviceSynchronizeCoversEveryStream) {
  std::vector<orStream_t> streams(8);
  std::atomic<int> done{0};
  for (auto& stream : streams) {
    ASSERT_OR(orStreamCreate(&stream));
    for (int i = 0; i < 20; ++i) {
      ASSERT_OR(openreg::launch(stream, "work", [&] {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        ++done;
      }));
    }
  }
  ASSERT_OR(orDeviceSynchronize());
  EXPECT_EQ(done.load(), 160);
  for (auto stream : streams) {
    EXPECT_OR(orStreamQuery(stream));
    ASSERT_OR(orStreamDestroy(stream));
  }
}

TEST(Stream, DestroyedStreamFinishesItsWorkAndItsHandleDies) {
  orStream_t stream;
  ASSERT_OR(orStreamCreate(&stream));
  Gate gate;
  std::atomic<bool> ran{false};
  ASSERT_OR(openreg::launch(stream, "late", [&] {
    gate.waitOpen();
    ran = true;
  }));
  ASSERT_OR(orStreamDestroy(stream));
  EXPECT_EQ(orStreamQuery(stream), orErrorInvalidResourceHandle);
  EXPECT_EQ(openreg::launch(stream, "after_destroy", [] {}), orErrorInvalidResourceHandle);
  EXPECT_EQ(orStreamDestroy(stream), orErrorInvalidResourceHandle);
  gate.open();
  ASSERT_OR(orDeviceSynchronize());
  EXPECT_TRUE(ran.load()) << "work queued before destroy still runs";
}

TEST(Stream, BadHandlesAreErrorsNotCrashes) {
  auto forged = reinterpret_cast<orStream_t>(uintptr_t{0xdeadbeef});
  EXPECT_EQ(orStreamSynchronize(forged), orErrorInvalidResourceHandle);
  EXPECT_EQ(orStreamQuery(forged), orErrorInvalidResourceHandle);
  EXPECT_EQ(orLaunchKernel(
                forged, "k", [](void*, char*, size_t) { return 0; }, nullptr),
            orErrorInvalidResourceHandle);
  orEvent_t event;
  ASSERT_OR(orEventCreate(&event));
  // An event handle is not a stream handle.
  EXPECT_EQ(orStreamQuery(reinterpret_cast<orStream_t>(event)), orErrorInvalidResourceHandle);
  ASSERT_OR(orEventDestroy(event));
  EXPECT_EQ(orStreamDestroy(nullptr), orErrorInvalidResourceHandle);
  orStream_t defaultStream;
  ASSERT_OR(orDeviceGetDefaultStream(0, &defaultStream));
  EXPECT_EQ(orStreamDestroy(defaultStream), orErrorInvalidResourceHandle);
  EXPECT_EQ(orDeviceGetDefaultStream(5, &defaultStream), orErrorInvalidDevice);
}

TEST(Stream, IdsPrioritiesAndDevices) {
  orStream_t defaultStream, high, low;
  ASSERT_OR(orDeviceGetDefaultStream(1, &defaultStream));
  uint64_t id = 0;
  ASSERT_OR(orStreamGetId(defaultStream, &id));
  EXPECT_EQ(id, 1u);
  int device = -1;
  ASSERT_OR(orStreamGetDevice(defaultStream, &device));
  EXPECT_EQ(device, 1);
  ASSERT_OR(orStreamCreateWithPriority(&high, 0, -5));
  ASSERT_OR(orStreamCreateWithPriority(&low, 0, 3));
  int priority = 0;
  ASSERT_OR(orStreamGetPriority(high, &priority));
  EXPECT_EQ(priority, -1) << "clamped to the greatest priority";
  ASSERT_OR(orStreamGetPriority(low, &priority));
  EXPECT_EQ(priority, 0);
  uint64_t highId = 0, lowId = 0;
  ASSERT_OR(orStreamGetId(high, &highId));
  ASSERT_OR(orStreamGetId(low, &lowId));
  EXPECT_GE(highId, 2u);
  EXPECT_NE(highId, lowId);
  ASSERT_OR(orStreamDestroy(high));
  orStream_t again;
  ASSERT_OR(orStreamCreate(&again));
  uint64_t againId = 0;
  ASSERT_OR(orStreamGetId(again, &againId));
  EXPECT_GT(againId, lowId) << "stream ids are never reused";
  EXPECT_EQ(orStreamCreateWithPriority(&again, 1, 0), orErrorInvalidValue);
  ASSERT_OR(orStreamDestroy(low));
  ASSERT_OR(orStreamDestroy(again));
}

TEST(Stream, ManyThreadsLaunchingConcurrently) {
  constexpr int kThreads = 8, kPerThread = 2000;
  std::atomic<int> ran{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      orSetDevice(t % 2);
      orStream_t stream;
      if (orStreamCreate(&stream) != orSuccess) return;
      for (int i = 0; i < kPerThread; ++i) openreg::launch(stream, "count", [&] { ++ran; });
      orStreamSynchronize(stream);
      orStreamDestroy(stream);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ran.load(), kThreads * kPerThread);
}
