#include "record_buffers.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <string>

namespace openreg::profiler {
namespace {

// CPU time of the calling thread: with the wall time, it tells a parse that
// was slow (page faults on fresh record memory count here) from one that was
// waiting for a core.
uint64_t threadCpuNs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

constexpr size_t kMinBufferBytes = 1024;
constexpr size_t kAlignment = 8;

// A positive integer from the environment, times unit; fallback (in units)
// when unset or malformed.
size_t envSize(const char* name, size_t fallback, size_t unit) {
  const char* text = std::getenv(name);
  unsigned long long value = fallback;
  if (text != nullptr && *text != '\0') {
    char* end = nullptr;
    unsigned long long parsed = std::strtoull(text, &end, 10);
    if (end != text && *end == '\0' && parsed > 0) {
      value = parsed;
    }
  }
  return static_cast<size_t>(value) * unit;
}

}  // namespace

RecordBufferPool::RecordBufferPool(size_t bufferBytes, size_t limitBytes)
    : bufferBytes_((std::max(bufferBytes, kMinBufferBytes) + kAlignment - 1) / kAlignment * kAlignment),
      limitBytes_(limitBytes) {}

RecordBufferPool::~RecordBufferPool() { trim(); }

size_t RecordBufferPool::bufferBytesFromEnv() { return envSize("OPENREG_PROFILER_BUFFER_KB", 1024, 1024); }

size_t RecordBufferPool::limitBytesFromEnv() { return envSize("OPENREG_PROFILER_BUFFER_LIMIT_MB", 256, 1024 * 1024); }

uint8_t* RecordBufferPool::acquire() {
  std::lock_guard<std::mutex> guard(poolMutex_);
  ++stats_.requested;
  if (!free_.empty()) {
    uint8_t* buffer = free_.back();
    free_.pop_back();
    return buffer;
  }
  if (allocatedBytes_ + bufferBytes_ > limitBytes_) {
    ++stats_.refused;
    return nullptr;
  }
  auto* buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, bufferBytes_));
  if (buffer == nullptr) {
    ++stats_.refused;
    return nullptr;
  }
  allocatedBytes_ += bufferBytes_;
  stats_.peakBytes = std::max(stats_.peakBytes, allocatedBytes_);
  return buffer;
}

void RecordBufferPool::release(uint8_t* buffer) {
  std::lock_guard<std::mutex> guard(poolMutex_);
  free_.push_back(buffer);
}

void RecordBufferPool::onRequested(void* userData, uint8_t** buffer, size_t* size) {
  auto* pool = static_cast<RecordBufferPool*>(userData);
  *buffer = pool->acquire();
  *size = *buffer != nullptr ? pool->bufferBytes_ : 0;
}

void RecordBufferPool::onCompleted(void* userData, uint8_t* buffer, size_t /*size*/, size_t validSize) {
  auto* pool = static_cast<RecordBufferPool*>(userData);
  if (buffer == nullptr) {
    return;
  }
  uint64_t parseNs = 0, parseCpuNs = 0;
  {
    std::lock_guard<std::mutex> guard(pool->sinkMutex_);
    if (pool->sink_ != nullptr && pool->next_ != nullptr) {
      const auto start = std::chrono::steady_clock::now();
      const uint64_t cpuStart = threadCpuNs();
      parseBuffer(pool->next_, buffer, validSize, *pool->sink_);
      parseCpuNs = threadCpuNs() - cpuStart;
      parseNs = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    } else {
      std::lock_guard<std::mutex> statsGuard(pool->poolMutex_);
      ++pool->stats_.discarded;
    }
  }
  {
    std::lock_guard<std::mutex> guard(pool->poolMutex_);
    ++pool->stats_.completed;
    pool->stats_.recordBytes += validSize;
    pool->stats_.parseNs += parseNs;
    pool->stats_.parseCpuNs += parseCpuNs;
  }
  pool->release(buffer);
}

void RecordBufferPool::setSink(RecordSet* sink, NextRecordFn next) {
  std::lock_guard<std::mutex> guard(sinkMutex_);
  sink_ = sink;
  next_ = next;
}

BufferStats RecordBufferPool::takeStats() {
  std::lock_guard<std::mutex> guard(poolMutex_);
  BufferStats out = stats_;
  stats_ = BufferStats{};
  stats_.peakBytes = allocatedBytes_;
  return out;
}

BufferStats RecordBufferPool::peekStats() {
  std::lock_guard<std::mutex> guard(poolMutex_);
  return stats_;
}

void RecordBufferPool::trim() {
  std::lock_guard<std::mutex> guard(poolMutex_);
  for (uint8_t* buffer : free_) {
    std::free(buffer);
    allocatedBytes_ -= bufferBytes_;
  }
  free_.clear();
}

}  // namespace openreg::profiler
