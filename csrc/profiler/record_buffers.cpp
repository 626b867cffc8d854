#include "record_buffers.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <string>
#include <exception>
#include <new>
#include <utility>

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

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
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
  try {
    // Room for every buffer in the free list, so recycle() never allocates
    // (it runs on the parsing thread, which must not throw).
    if (buffer != nullptr) free_.reserve((allocatedBytes_ + bufferBytes_) / bufferBytes_);
  } catch (const std::bad_alloc&) {
    std::free(buffer);
    buffer = nullptr;
  }
  if (buffer == nullptr) {
    ++stats_.refused;
    return nullptr;
  }
  allocatedBytes_ += bufferBytes_;
  stats_.peakBytes = std::max(stats_.peakBytes, allocatedBytes_);
  return buffer;
}

void RecordBufferPool::recycle(uint8_t* buffer) {
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
  {
    std::lock_guard<std::mutex> guard(pool->poolMutex_);
    ++pool->stats_.completed;
    pool->stats_.recordBytes += validSize;
  }
  {
    std::lock_guard<std::mutex> guard(pool->queueMutex_);
    if (pool->queue_ != nullptr) {
      pool->queue_->push(buffer, validSize);
      return;
    }
  }
  {
    std::lock_guard<std::mutex> guard(pool->poolMutex_);
    ++pool->stats_.discarded;
  }
  pool->recycle(buffer);
}

void RecordBufferPool::setQueue(ParseQueue* queue) {
  std::lock_guard<std::mutex> guard(queueMutex_);
  queue_ = queue;
}

void RecordBufferPool::detachQueue(const ParseQueue* queue) {
  std::lock_guard<std::mutex> guard(queueMutex_);
  if (queue_ == queue) queue_ = nullptr;
}

BufferStats RecordBufferPool::takeStats() {
  std::lock_guard<std::mutex> guard(poolMutex_);
  BufferStats out = stats_;
  stats_ = BufferStats{};
  stats_.peakBytes = allocatedBytes_;
  return out;
}

void RecordBufferPool::trim() {
  std::lock_guard<std::mutex> guard(poolMutex_);
  for (uint8_t* buffer : free_) {
    std::free(buffer);
    allocatedBytes_ -= bufferBytes_;
  }
  free_.clear();
}

ParseQueue::ParseQueue(RecordBufferPool& pool, NextRecordFn next, RecordSet& sink)
    : pool_(pool), next_(next), sink_(sink) {
  thread_ = std::thread([this] { run(); });
}

ParseQueue::~ParseQueue() { finish(); }

void ParseQueue::push(uint8_t* buffer, size_t validSize) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    try {
      if (!closed_) {  // after close the thread may be gone: not queued, counted
        queued_.push_back({buffer, validSize});
        ready_.notify_one();
        return;
      }
    } catch (const std::bad_alloc&) {
      // No memory to queue it: the runtime's callback must not throw.
    }
    ++notQueued_;
  }
  pool_.recycle(buffer);
}

void ParseQueue::close() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (closed_) return;
  closed_ = true;
  closedAtNs_ = steadyNs();
  queuedAtClose_ = queued_.size();
  ready_.notify_one();
}

const ParseQueue::Result& ParseQueue::finish() {
  close();
  if (thread_.joinable()) {
    const int64_t start = steadyNs();
    thread_.join();
    result_.finishWaitNs = steadyNs() - start;
  }
  std::lock_guard<std::mutex> guard(mutex_);
  result_.unparsedBuffers += std::exchange(notQueued_, 0);
  return result_;
}

void ParseQueue::run() {
  for (;;) {
    Queued next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return !queued_.empty() || closed_; });
      if (queued_.empty()) break;  // closed, and everything parsed
      next = queued_.front();
      queued_.pop_front();
    }
    parseOne(next);
  }
  std::lock_guard<std::mutex> guard(mutex_);
  result_.tailBuffers = queuedAtClose_;
  result_.tailNs = steadyNs() - closedAtNs_;
}

void ParseQueue::parseOne(const Queued& buffer) {
  const int64_t start = steadyNs();
  const uint64_t cpuStart = threadCpuNs();
  try {
    if (next_ != nullptr) parseBuffer(next_, buffer.data, buffer.validSize, sink_);
  } catch (const std::exception& e) {
    // Out of host memory, most likely: the buffer's records (or the rest of
    // them) are lost, and said so. A static message: copying e.what() could throw too.
    result_.error = std::strcmp(e.what(), "std::bad_alloc") == 0 ? "out of host memory" : "parsing failed";
    ++result_.unparsedBuffers;
  }
  result_.parseCpuNs += static_cast<int64_t>(threadCpuNs() - cpuStart);
  result_.parseNs += steadyNs() - start;
  ++result_.buffers;
  pool_.recycle(buffer.data);
}

}  // namespace openreg::profiler
