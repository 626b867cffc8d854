#include "record_buffers.h"

#include <gtest/gtest.h>

#include <cstring>

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

TEST(RecordBuffers, ParsesIntoTheSinkOnCompletion) {
  RecordBufferPool pool(1024, 1 << 20);
  RecordSet sink;
  pool.setSink(&sink, &nextRecord);
  uint8_t* buffer = nullptr;
  size_t size = 0;
  RecordBufferPool::onRequested(&pool, &buffer, &size);
  size_t used = writeKernel(buffer, 1);
  used += writeKernel(buffer + used, 2);
  RecordBufferPool::onCompleted(&pool, buffer, size, used);
  pool.setSink(nullptr, nullptr);
  ASSERT_EQ(sink.deviceOps.size(), 2u);
  EXPECT_EQ(sink.deviceOps[1].correlationId, 2u);
}

TEST(RecordBuffers, EnforcesTheMinimumSize) {
  RecordBufferPool pool(10, 1 << 20);
  EXPECT_EQ(pool.bufferBytes(), 1024u);
}
