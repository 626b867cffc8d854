#include "buffers.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "../clock.h"
#include "../config.h"
#include "../runtime_state.h"
#include "recorder.h"

namespace openreg::activity {

namespace {

struct CompletedBuffer {
  uint8_t* data;
  size_t capacity;
  size_t valid;
};

struct Client {
  orActivityBufferRequestedFn requested = nullptr;
  orActivityBufferCompletedFn completed = nullptr;
  void* userData = nullptr;
};

// Leaked on purpose: thread-exit hooks and executor threads may use it while
// static destructors run.
struct State {
  std::shared_mutex clientMutex;
  Client client;

  std::mutex registryMutex;
  std::vector<std::shared_ptr<ThreadBuffer>> registry;

  std::mutex queueMutex;
  std::condition_variable queueCv;
  std::deque<CompletedBuffer> queue;
  bool stopDelivery = false;
  bool tracingChanged = false;
  std::thread deliveryThread;
  bool deliveryStarted = false;

  std::mutex deliveryMutex;  // one completed callback at a time

  std::atomic<uint64_t> dropped[kMaxDevices + 1] = {};
  std::atomic<uint64_t> droppedByKind[kStatsKinds] = {};
  std::atomic<uint64_t> writtenByExitedThreads{0};
  std::atomic<uint64_t> buffersRequested{0};
  std::atomic<uint64_t> buffersRefused{0};
  std::atomic<uint64_t> buffersCompleted{0};
  std::atomic<uint64_t> requestNs{0};
  std::atomic<uint64_t> completedNs{0};
  std::atomic<uint64_t> flushNs{0};
};

State& state() {
  static State* instance = new State();
  return *instance;
}

void enqueueCompleted(uint8_t* data, size_t capacity, size_t valid) {
  State& s = state();
  {
    std::lock_guard lock(s.queueMutex);
    s.queue.push_back({data, capacity, valid});
  }
  s.queueCv.notify_one();
}

// OPENREG_TEST_FAIL_RECORD_BUFFER_ALLOCS: the first n thread buffers fail to
// allocate, so tests reach the out-of-memory path of the writers.
void injectAllocationFailure() {
  static std::atomic<long long> left{[] {
    orError_t error;
    const Runtime* runtime = acquireRuntime(&error);
    return runtime != nullptr ? runtime->config.failRecordBufferAllocs : 0;
  }()};
  if (left.load(std::memory_order_relaxed) > 0 && left.fetch_sub(1, std::memory_order_relaxed) > 0) {
    throw std::bad_alloc();
  }
}

// Stands in for a thread buffer that could not be allocated: it never holds
// space, so every record written through it is counted as dropped.
ThreadBuffer& unallocatedBuffer() {
  static ThreadBuffer* buffer = new ThreadBuffer();
  return *buffer;
}

// The calling thread's buffer, or unallocatedBuffer() when the host is out of
// memory (an executor thread must not throw).
ThreadBuffer* threadBuffer(ThreadContext& context) noexcept {
  if (!context.buffer) {
    try {
      injectAllocationFailure();
      auto buffer = std::make_shared<ThreadBuffer>();
      buffer->threadId = currentThreadId();
      State& s = state();
      {
        std::lock_guard lock(s.registryMutex);
        s.registry.push_back(buffer);
      }
      context.buffer = std::move(buffer);
    } catch (const std::bad_alloc&) {
      return &unallocatedBuffer();
    }
  }
  return context.buffer.get();
}

// Asks the client for a buffer. Called with the thread buffer locked.
bool requestBuffer(ThreadContext& context, ThreadBuffer& buffer) {
  State& s = state();
  std::shared_lock clientLock(s.clientMutex);
  if (s.client.requested == nullptr) return false;
  uint8_t* data = nullptr;
  size_t size = 0;
  // The record takes the host-record clock; the statistics stay in ns.
  const uint64_t start = hostRecordNs();
  const uint64_t startNs = hostNowNs();
  context.insideCallback = true;
  s.client.requested(s.client.userData, &data, &size);
  context.insideCallback = false;
  s.requestNs.fetch_add(hostNowNs() - startNs, std::memory_order_relaxed);
  const uint64_t end = hostRecordNs();
  s.buffersRequested.fetch_add(1, std::memory_order_relaxed);
  if (data == nullptr || size < 1024 || (reinterpret_cast<uintptr_t>(data) & 7u) != 0) {
    s.buffersRefused.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  buffer.data = data;
  buffer.capacity = size & ~size_t{7};
  buffer.used = 0;
  if (active(OR_ACTIVITY_KIND_OVERHEAD)) {
    orActivityOverhead overhead{};
    overhead.header = {OR_ACTIVITY_KIND_OVERHEAD, sizeof(orActivityOverhead)};
    overhead.overheadKind = OR_ACTIVITY_OVERHEAD_BUFFER_REQUEST;
    overhead.threadId = buffer.threadId;
    overhead.start = start;
    overhead.end = end;
    std::memcpy(buffer.data, &overhead, sizeof(overhead));
    buffer.used = sizeof(overhead);
    ++buffer.recordsWritten;
  }
  return true;
}

// The delivery thread's clock-sample period: half the contract's interval,
// so that a thread descheduled for up to 5 ms still keeps it.
constexpr uint64_t kClockSyncPeriodNs = OR_ACTIVITY_CLOCK_SYNC_INTERVAL_NS / 2;

// The periodic samples the delivery thread takes while their kind is active.
struct PeriodicSample {
  orActivityKind kind;
  uint64_t (*periodNs)();
  void (*write)();
  uint64_t last = 0;  // steady ns

  // Steady ns until the next one is due (0: now); UINT64_MAX when inactive.
  uint64_t dueIn(uint64_t now) const {
    if (!active(kind)) return UINT64_MAX;
    const uint64_t due = last + periodNs();
    return due > now ? due - now : 0;
  }
  void takeIfDue() {
    const uint64_t now = steadyNowNs();
    if (dueIn(now) == 0) {
      write();
      last = now;
    }
  }
};

uint64_t clockSyncPeriodNs() { return kClockSyncPeriodNs; }

void deliveryLoop() {
  State& s = state();
  PeriodicSample samples[] = {{OR_ACTIVITY_KIND_CLOCK_SYNC, clockSyncPeriodNs, writeClockSyncRecords},
                              {OR_ACTIVITY_KIND_COUNTER, counterPeriodNs, writeCounterRecords}};
  for (;;) {
    {
      std::unique_lock lock(s.queueMutex);
      // While samples are traced, wake when the next one is due (a change of
      // the window or the kinds wakes the thread too).
      auto ready = [&] { return s.stopDelivery || !s.queue.empty() || s.tracingChanged; };
      const uint64_t now = steadyNowNs();
      uint64_t wait = UINT64_MAX;
      for (const PeriodicSample& sample : samples) wait = std::min(wait, sample.dueIn(now));
      if (wait != UINT64_MAX) {
        s.queueCv.wait_for(lock, std::chrono::nanoseconds(wait), ready);
      } else {
        s.queueCv.wait(lock, ready);
      }
      if (s.stopDelivery) return;
      s.tracingChanged = false;
    }
    deliverQueued();
    for (PeriodicSample& sample : samples) sample.takeIfDue();
  }
}

}  // namespace

BufferWriter::BufferWriter(ThreadContext& context) : context_(context), buffer_(threadBuffer(context)) {
  buffer_->mutex.lock();
}

void* BufferWriter::reserveSlow(size_t size, orActivityKind kind, int device) {
  ThreadBuffer& b = *buffer_;
  // A record emitted from inside a client callback would re-enter the
  // client: count it instead.
  if (context_.insideCallback || buffer_ == &unallocatedBuffer()) {
    countDrop(kind, device);
    return nullptr;
  }
  if (b.data != nullptr) {
    try {
      enqueueCompleted(b.data, b.capacity, b.used);
    } catch (const std::bad_alloc&) {  // the full buffer stays; a later record retries
      countDrop(kind, device);
      return nullptr;
    }
    b.data = nullptr;
  }
  if (!requestBuffer(context_, b) || b.used + size > b.capacity) {
    countDrop(kind, device);
    return nullptr;
  }
  void* at = b.data + b.used;
  b.used += size;
  ++b.recordsWritten;
  return at;
}

bool BufferWriter::append(const void* record, size_t size, int device) {
  const auto kind = static_cast<orActivityKind>(static_cast<const orActivityRecord*>(record)->kind);
  void* at = reserve(size, kind, device);
  if (at == nullptr) return false;
  std::memcpy(at, record, size);
  return true;
}

void retireThreadBuffer(std::shared_ptr<ThreadBuffer>& buffer) {
  State& s = state();
  {
    std::lock_guard lock(buffer->mutex);
    if (buffer->data != nullptr) {
      // Records survive their thread; an empty buffer goes back to the client.
      enqueueCompleted(buffer->data, buffer->capacity, buffer->used);
      buffer->data = nullptr;
    }
  }
  std::lock_guard lock(s.registryMutex);
  s.writtenByExitedThreads.fetch_add(buffer->recordsWritten, std::memory_order_relaxed);
  auto& r = s.registry;
  r.erase(std::remove(r.begin(), r.end(), buffer), r.end());
  buffer.reset();
}

orError_t registerClient(orActivityBufferRequestedFn requested, orActivityBufferCompletedFn completed, void* userData) {
  State& s = state();
  if ((requested == nullptr) != (completed == nullptr)) return orErrorInvalidValue;
  if (requested == nullptr) {
    // Hand everything back (including empty buffers) before forgetting the client.
    {
      std::lock_guard lock(s.registryMutex);
      for (auto& buffer : s.registry) {
        std::lock_guard bufferLock(buffer->mutex);
        if (buffer->data != nullptr) {
          enqueueCompleted(buffer->data, buffer->capacity, buffer->used);
          buffer->data = nullptr;
        }
      }
    }
    deliverQueued();
    std::unique_lock lock(s.clientMutex);
    s.client = Client{};
    return orSuccess;
  }
  {
    std::unique_lock lock(s.clientMutex);
    s.client = Client{requested, completed, userData};
  }
  std::lock_guard lock(s.queueMutex);
  if (!s.deliveryStarted) {
    s.deliveryStarted = true;
    noteRuntimeThreadsStarting();
    s.deliveryThread = std::thread(deliveryLoop);
    s.deliveryThread.detach();
  }
  return orSuccess;
}

bool clientRegistered() {
  State& s = state();
  std::shared_lock lock(s.clientMutex);
  return s.client.completed != nullptr;
}

void collectThreadBuffers() {
  State& s = state();
  std::lock_guard lock(s.registryMutex);
  for (auto& buffer : s.registry) {
    std::lock_guard bufferLock(buffer->mutex);
    if (buffer->data != nullptr && buffer->used > 0) {
      enqueueCompleted(buffer->data, buffer->capacity, buffer->used);
      buffer->data = nullptr;
    }
  }
}

void deliverQueued() {
  State& s = state();
  std::lock_guard delivery(s.deliveryMutex);
  for (;;) {
    CompletedBuffer next;
    {
      std::lock_guard lock(s.queueMutex);
      if (s.queue.empty()) return;
      next = s.queue.front();
      s.queue.pop_front();
    }
    std::shared_lock clientLock(s.clientMutex);
    if (s.client.completed == nullptr) continue;  // client gone: it freed its buffers
    const uint64_t start = hostNowNs();
    ThreadContext& context = threadContext();
    context.insideCallback = true;
    s.client.completed(s.client.userData, next.data, next.capacity, next.valid);
    context.insideCallback = false;
    s.completedNs.fetch_add(hostNowNs() - start, std::memory_order_relaxed);
    s.buffersCompleted.fetch_add(1, std::memory_order_relaxed);
  }
}

void countDrop(orActivityKind kind, int device) {
  State& s = state();
  const int slot = (device >= 0 && device < kMaxDevices) ? device : kMaxDevices;
  s.dropped[slot].fetch_add(1, std::memory_order_relaxed);
  const size_t kindSlot = (kind > 0 && size_t(kind) < kStatsKinds) ? size_t(kind) : 0;
  s.droppedByKind[kindSlot].fetch_add(1, std::memory_order_relaxed);
}

uint64_t droppedRecords(int device) {
  State& s = state();
  if (device >= 0) return s.dropped[device].load(std::memory_order_relaxed);
  uint64_t total = 0;
  for (auto& count : s.dropped) total += count.load(std::memory_order_relaxed);
  return total;
}

void fillStats(orActivityStats* stats, size_t bytes) {
  State& s = state();
  orActivityStats full{};
  full.structSize = sizeof(orActivityStats);
  full.recordsWritten = s.writtenByExitedThreads.load();
  {
    std::lock_guard lock(s.registryMutex);
    for (auto& buffer : s.registry) {
      std::lock_guard bufferLock(buffer->mutex);
      full.recordsWritten += buffer->recordsWritten;
    }
  }
  full.recordsDropped = droppedRecords(-1);
  full.buffersRequested = s.buffersRequested.load();
  full.buffersRefused = s.buffersRefused.load();
  full.buffersCompleted = s.buffersCompleted.load();
  full.bufferRequestNs = s.requestNs.load();
  full.bufferCompletedNs = s.completedNs.load();
  full.flushNs = s.flushNs.load();
  full.lateClockSyncs = lateClockSyncs();
  for (size_t kind = 0; kind < kStatsKinds; ++kind) full.recordsDroppedByKind[kind] = s.droppedByKind[kind].load();
  std::memcpy(stats, &full, std::min(bytes, sizeof(full)));
}

void addFlushTime(uint64_t ns) { state().flushNs.fetch_add(ns, std::memory_order_relaxed); }

void notifyTracingChanged() {
  State& s = state();
  {
    std::lock_guard lock(s.queueMutex);
    s.tracingChanged = true;
  }
  s.queueCv.notify_one();
}

void stopDeliveryThread() {
  State& s = state();
  {
    std::lock_guard lock(s.queueMutex);
    s.stopDelivery = true;
  }
  s.queueCv.notify_all();
}

}  // namespace openreg::activity
