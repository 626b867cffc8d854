#include "record_buffers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>
#include <utility>
#include <vector>

using namespace openreg::profiler;

namespace {

orError_t nextRecord(const uint8_t* buffer, size_t validSize, const orActivityRecord** record) {
  size_t offset = *record == nullptr
                      ? 0
                      : static_cast<size_t>(reinterpret_cast<const uint8_t*>(*record) - buffer) + (*record)->size;
  if (offset >= validSize) return orErrorMaxLimitReached;
  *record = reinterpret_cast<const orActivityRecord*>(buffer + offset);
  return orSuccess;
}

size_t writeKernel(uint8_t* buffer, uint64_t corr) {
  orActivityKernel k{};
  k.header = {OR_ACTIVITY_KIND_KERNEL, sizeof(k)};
  k.correlationId = corr;
  std::memcpy(buffer, &k, sizeof(k));
  return sizeof(k);
}

// As the runtime does: asks the pool for a buffer, writes one kernel record
// into it and hands it back. The buffer, or nullptr if the pool refused.
uint8_t* completeOneKernel(RecordBufferPool& pool, uint64_t corr) {
  uint8_t* buffer = nullptr;
  size_t size = 0;
  RecordBufferPool::onRequested(&pool, &buffer, &size);
  if (buffer != nullptr) RecordBufferPool::onCompleted(&pool, buffer, size, writeKernel(buffer, corr));
  return buffer;
}

}  // namespace

TEST(RecordBuffers, RefusesPastTheLimitAndRecycles) {
  RecordBufferPool pool(4096, 2 * 4096);
  uint8_t* a = nullptr;
  uint8_t* b = nullptr;
  uint8_t* c = nullptr;
  size_t size = 0;
  RecordBufferPool::onRequested(&pool, &a, &size);
  EXPECT_EQ(size, 4096u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 8, 0u);
  RecordBufferPool::onRequested(&pool, &b, &size);
  RecordBufferPool::onRequested(&pool, &c, &size);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(c, nullptr) << "third buffer exceeds the limit";
  EXPECT_EQ(size, 0u);
  RecordBufferPool::onCompleted(&pool, a, 4096, 0);
  RecordBufferPool::onRequested(&pool, &c, &size);
  EXPECT_EQ(c, a) << "completed buffers are reused";
  RecordBufferPool::onCompleted(&pool, b, 4096, 0);
  RecordBufferPool::onCompleted(&pool, c, 4096, 0);
  BufferStats stats = pool.takeStats();
  EXPECT_EQ(stats.requested, 4u);
  EXPECT_EQ(stats.refused, 1u);
  EXPECT_EQ(stats.completed, 3u);
  EXPECT_EQ(stats.discarded, 3u) << "no sink was set";
}

TEST(RecordBuffers, CompletedBuffersAreParsedByTheQueueInOrder) {
  RecordBufferPool pool(1024, 1 << 20);
  RecordSet sink;
  ParseQueue queue(pool, &nextRecord, sink);
  pool.setQueue(&queue);
  uint8_t* first = nullptr;
  uint8_t* second = nullptr;
  size_t size = 0;
  RecordBufferPool::onRequested(&pool, &first, &size);
  RecordBufferPool::onRequested(&pool, &second, &size);
  const size_t firstUsed = writeKernel(first, 1) + writeKernel(first + sizeof(orActivityKernel), 2);
  const size_t secondUsed = writeKernel(second, 3);
  RecordBufferPool::onCompleted(&pool, first, size, firstUsed);
  RecordBufferPool::onCompleted(&pool, second, size, secondUsed);
  pool.setQueue(nullptr);
  const ParseQueue::Result& result = queue.finish();
  EXPECT_EQ(result.buffers, 2u);
  EXPECT_EQ(result.error, nullptr);
  EXPECT_EQ(result.unparsedBuffers, 0u);
  ASSERT_EQ(sink.deviceOps.size(), 3u);
  EXPECT_EQ(sink.deviceOps[0].correlationId, 1u);
  EXPECT_EQ(sink.deviceOps[2].correlationId, 3u) << "parsed in the order they completed";
  EXPECT_EQ(queue.finish().buffers, 2u) << "finishing again gives the same result";
  const BufferStats stats = pool.takeStats();
  EXPECT_EQ(stats.completed, 2u);
  EXPECT_EQ(stats.discarded, 0u);
  EXPECT_EQ(stats.recordBytes, firstUsed + secondUsed);
  uint8_t* reused = nullptr;
  RecordBufferPool::onRequested(&pool, &reused, &size);
  EXPECT_TRUE(reused == first || reused == second) << "parsed buffers come back for reuse";
  RecordBufferPool::onCompleted(&pool, reused, size, 0);
  EXPECT_EQ(pool.takeStats().discarded, 1u) << "without a queue, completed buffers are dropped";
}

// A NextRecordFn whose first call, on the queue's thread, waits for open():
// the queue's thread is then known to be busy with buffer 1.
struct ParserGate {
  static inline std::atomic<bool> inside{false}, opened{false};
  static void reset() {
    inside = false;
    opened = false;
  }
  static orError_t next(const uint8_t* buffer, size_t validSize, const orActivityRecord** record) {
    if (!inside.exchange(true)) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!opened && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    }
    return nextRecord(buffer, validSize, record);
  }
  static bool waitInside() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!inside && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    return inside;
  }
};

// What is still queued at close() is parsed after it, in order, and counted
// as the tail; finish() waits for it.
TEST(RecordBuffers, BuffersQueuedAtCloseAreParsedAfterIt) {
  ParserGate::reset();
  RecordBufferPool pool(1024, 64 * 1024);
  RecordSet sink;
  ParseQueue queue(pool, &ParserGate::next, sink);
  pool.setQueue(&queue);
  for (uint64_t corr = 1; corr <= 40; ++corr) {
    ASSERT_NE(completeOneKernel(pool, corr), nullptr);
    if (corr == 1) ASSERT_TRUE(ParserGate::waitInside());
  }
  pool.setQueue(nullptr);
  queue.close();  // returns at once: the thread is still held on buffer 1
  EXPECT_EQ(sink.deviceOps.size(), 0u);
  ParserGate::opened = true;
  const ParseQueue::Result& result = queue.finish();
  EXPECT_EQ(result.tailBuffers, 39u) << "buffers 2 to 40 were queued at close";
  EXPECT_EQ(result.buffers, 40u);
  ASSERT_EQ(sink.deviceOps.size(), 40u);
  for (uint64_t corr = 1; corr <= 40; ++corr) EXPECT_EQ(sink.deviceOps[corr - 1].correlationId, corr);
}

// A session that starts while the last one's parser is still busy: each
// queue gets its own buffers, and the first one's still come back.
TEST(RecordBuffers, ASecondQueueCollectsWhileTheFirstStillParses) {
  ParserGate::reset();
  RecordBufferPool pool(1024, 64 * 1024);
  RecordSet firstSink, secondSink;
  ParseQueue first(pool, &ParserGate::next, firstSink);
  pool.setQueue(&first);
  auto complete = [&](uint64_t corr) { ASSERT_NE(completeOneKernel(pool, corr), nullptr); };
  complete(1);
  ASSERT_TRUE(ParserGate::waitInside());
  complete(2);
  complete(3);
  pool.setQueue(nullptr);
  first.close();
  ParseQueue second(pool, &nextRecord, secondSink);
  pool.setQueue(&second);
  for (uint64_t corr = 101; corr <= 110; ++corr) complete(corr);
  pool.setQueue(nullptr);
  EXPECT_EQ(second.finish().buffers, 10u);
  ParserGate::opened = true;
  EXPECT_EQ(first.finish().buffers, 3u);
  ASSERT_EQ(firstSink.deviceOps.size(), 3u);
  ASSERT_EQ(secondSink.deviceOps.size(), 10u);
  EXPECT_EQ(firstSink.deviceOps[2].correlationId, 3u);
  EXPECT_EQ(secondSink.deviceOps[0].correlationId, 101u);
  pool.trim();
  size_t size = 0;
  std::vector<uint8_t*> all(64, nullptr);
  for (uint8_t*& buffer : all) {  // the whole limit again: nothing leaked
    RecordBufferPool::onRequested(&pool, &buffer, &size);
    EXPECT_NE(buffer, nullptr);
  }
  for (uint8_t* buffer : all) RecordBufferPool::onCompleted(&pool, buffer, size, 0);
}

TEST(RecordBuffers, AFailedParseIsReportedAndTheBufferStillComesBack) {
  RecordBufferPool pool(1024, 1024);
  RecordSet sink;
  auto failing = [](const uint8_t*, size_t, const orActivityRecord**) -> orError_t { throw std::bad_alloc(); };
  ParseQueue queue(pool, failing, sink);
  pool.setQueue(&queue);
  uint8_t* const buffer = completeOneKernel(pool, 1);
  ASSERT_NE(buffer, nullptr);
  pool.setQueue(nullptr);
  const ParseQueue::Result& result = queue.finish();
  EXPECT_EQ(result.unparsedBuffers, 1u);
  ASSERT_NE(result.error, nullptr);
  EXPECT_STREQ(result.error, "out of host memory");
  uint8_t* again = nullptr;
  size_t size = 0;
  RecordBufferPool::onRequested(&pool, &again, &size);
  EXPECT_EQ(again, buffer) << "the only buffer the limit allows was given back";
  RecordBufferPool::onCompleted(&pool, again, size, 0);
}

// The runtime's delivery thread (and orActivityFlushAll's caller) only queue.
TEST(RecordBuffers, ParsingNeverRunsOnTheThreadThatCompletesTheBuffer) {
  static std::atomic<std::thread::id> parsedOn{};
  RecordBufferPool pool(1024, 1 << 20);
  RecordSet sink;
  auto noting = [](const uint8_t* buffer, size_t validSize, const orActivityRecord** record) {
    parsedOn.store(std::this_thread::get_id());
    return nextRecord(buffer, validSize, record);
  };
  ParseQueue queue(pool, noting, sink);
  pool.setQueue(&queue);
  ASSERT_NE(completeOneKernel(pool, 7), nullptr);
  pool.setQueue(nullptr);
  queue.finish();
  ASSERT_EQ(sink.deviceOps.size(), 1u);
  EXPECT_NE(parsedOn.load(), std::thread::id{});
  EXPECT_NE(parsedOn.load(), std::this_thread::get_id());
}

TEST(RecordBuffers, EnforcesTheMinimumSize) {
  RecordBufferPool pool(10, 1 << 20);
  EXPECT_EQ(pool.bufferBytes(), 1024u);
}
