#include "recorder.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_set>

#include "../clock.h"
#include "../runtime_state.h"
#include "buffers.h"
#include "correlation.h"

namespace openreg::activity {

std::atomic<uint32_t> gActiveKinds{0};

namespace {

std::atomic<uint64_t> gNextCorrelationId{1};

// Ids are handed to threads in blocks so concurrent launches do not contend
// on one counter.
constexpr uint64_t kCorrelationBlock = 256;

}  // namespace

uint64_t nextCorrelationId(ThreadContext& context) {
  if (context.nextCorrelation == context.correlationEnd) {
    context.nextCorrelation = gNextCorrelationId.fetch_add(kCorrelationBlock, std::memory_order_relaxed);
    context.correlationEnd = context.nextCorrelation + kCorrelationBlock;
  }
  return context.nextCorrelation++;
}

uint32_t currentThreadId() {
  ThreadContext& context = threadContext();
  if (context.threadId == 0) context.threadId = static_cast<uint32_t>(::syscall(SYS_gettid));
  return context.threadId;
}

namespace {
// getpid() is a system call on current glibc: cache it, refreshed after fork.
std::atomic<uint32_t> gProcessId{0};
void forgetProcessId() { gProcessId.store(0, std::memory_order_relaxed); }
}  // namespace

uint32_t currentProcessId() {
  uint32_t pid = gProcessId.load(std::memory_order_relaxed);
  if (pid == 0) {
    static const bool kRegistered = (pthread_atfork(nullptr, nullptr, forgetProcessId), true);
    (void)kRegistered;
    pid = static_cast<uint32_t>(::getpid());
    gProcessId.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

void recordApiCall(ThreadContext& context, uint32_t kinds, orActivityApiId api, int device, uint64_t correlationId,
                   uint64_t start, orError_t status) {
  static const char* const kNames[OR_API_COUNT] = {"orInvalid",
                                                   "orLaunchKernel",
                                                   "orMemcpy",
                                                   "orMemcpyAsync",
                                                   "orMemset",
                                                   "orMemsetAsync",
                                                   "orMalloc",
                                                   "orFree",
                                                   "orMallocHost",
                                                   "orFreeHost",
                                                   "orStreamSynchronize",
                                                   "orEventSynchronize",
                                                   "orDeviceSynchronize",
                                                   "orEventRecord",
                                                   "orStreamWaitEvent",
                                                   "orLaunchHostFunc",
                                                   "orLaunchCollective"};
  constexpr uint32_t kHostKinds = (1u << OR_ACTIVITY_KIND_RUNTIME) | (1u << OR_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  if ((kinds & kHostKinds) == 0) return;  // the id was only for device records
  const uint64_t end = hostRecordFastNs(context.clock);
  if (device == kCurrentDeviceOfCaller) device = context.currentDevice;
  if (context.threadId == 0) currentThreadId();
  BufferWriter writer(context);
  // Fields are written one by one (no zero-fill first): this is the launch path.
  if ((kinds >> OR_ACTIVITY_KIND_EXTERNAL_CORRELATION) & 1u) {
    for (int kind = 1; kind < OR_EXTERNAL_CORRELATION_KIND_COUNT; ++kind) {
      if (context.externalDepth[kind] == 0) continue;
      auto* record = static_cast<orActivityExternalCorrelation*>(
          writer.reserveRecord(sizeof(orActivityExternalCorrelation), OR_ACTIVITY_KIND_EXTERNAL_CORRELATION, device));
      if (record == nullptr) continue;
      record->header = {OR_ACTIVITY_KIND_EXTERNAL_CORRELATION, sizeof(orActivityExternalCorrelation)};
      record->externalKind = static_cast<uint32_t>(kind);
      record->reserved = 0;
      record->externalId = context.externalTop[kind];
      record->correlationId = correlationId;
    }
  }
  if ((kinds >> OR_ACTIVITY_KIND_RUNTIME) & 1u) {
    auto* record = static_cast<orActivityRuntime*>(
        writer.reserveRecord(sizeof(orActivityRuntime), OR_ACTIVITY_KIND_RUNTIME, device));
    if (record == nullptr) return;
    record->header = {OR_ACTIVITY_KIND_RUNTIME, sizeof(orActivityRuntime)};
    record->apiId = api;
    record->processId = currentProcessId();
    record->threadId = context.threadId;
    record->device = device;
    record->correlationId = correlationId;
    record->start = start;
    record->end = end;
    record->name = (api > 0 && api < OR_API_COUNT) ? kNames[api] : kNames[0];
    record->status = status;
    record->reserved = 0;
  }
}

void currentExternalIds(uint64_t (&ids)[OR_EXTERNAL_CORRELATION_KIND_COUNT]) {
  const ThreadContext& context = threadContext();
  for (int kind = 0; kind < OR_EXTERNAL_CORRELATION_KIND_COUNT; ++kind) {
    ids[kind] = context.externalDepth[kind] > 0 ? context.externalTop[kind] : 0;
  }
}

void recordExternalIds(const uint64_t (&ids)[OR_EXTERNAL_CORRELATION_KIND_COUNT], uint64_t correlationId, int device) {
  if (!active(OR_ACTIVITY_KIND_EXTERNAL_CORRELATION)) return;
  for (int kind = 1; kind < OR_EXTERNAL_CORRELATION_KIND_COUNT; ++kind) {
    if (ids[kind] == 0) continue;
    orActivityExternalCorrelation record{};
    record.externalKind = static_cast<uint32_t>(kind);
    record.externalId = ids[kind];
    record.correlationId = correlationId;
    writeRecord(record, OR_ACTIVITY_KIND_EXTERNAL_CORRELATION, device);
  }
}

void recordHostSync(const TracedCall& call, orActivitySyncType type, int device, const SyncTarget& target) {
  if (!call.traced() || !active(OR_ACTIVITY_KIND_SYNCHRONIZATION)) return;
  orActivitySynchronization record{};
  record.syncType = type;
  record.clockDomain = OR_ACTIVITY_CLOCK_HOST;
  record.device = device;
  record.threadId = currentThreadId();
  record.streamId = target.streamId;
  record.eventId = target.eventId;
  record.recordCorrelationId = target.origin.correlationId;
  record.recordStreamId = target.origin.streamId;
  record.correlationId = call.correlationId();
  record.start = call.start();
  record.end = hostRecordNs();
  writeRecord(record, OR_ACTIVITY_KIND_SYNCHRONIZATION, device);
}

void recordMemory(const TracedCall& call, orActivityMemoryOp op, orActivityMemoryKind kind, int device,
                  const void* address, size_t bytes) {
  if (!call.traced() || !active(OR_ACTIVITY_KIND_MEMORY)) return;
  orActivityMemory record{};
  record.memoryOp = op;
  record.memoryKind = kind;
  record.device = device;
  record.address = reinterpret_cast<uint64_t>(address);
  record.bytes = bytes;
  record.timestamp = hostRecordNs();
  record.correlationId = call.correlationId();
  record.processId = currentProcessId();
  record.threadId = currentThreadId();
  writeRecord(record, OR_ACTIVITY_KIND_MEMORY, device);
}

bool write(const void* record, size_t size, int device) {
  BufferWriter writer(threadContext());
  return writer.append(record, size, device);
}

namespace {

// When each device's previous CLOCK_SYNC sample in this window was taken, on
// the steady clock (0: none yet): the gaps are real time whatever clock the
// client gave the host records (torch's TSC ticks are not ns). The mutex also
// orders the samples, so the gaps counted are those between the records.
struct ClockSyncGaps {
  std::mutex mutex;
  uint64_t previousSteadyNs[kMaxDevices] = {};
  std::atomic<uint64_t> late{0};
};

ClockSyncGaps& clockSyncGaps() {
  static ClockSyncGaps* gaps = new ClockSyncGaps();
  return *gaps;
}

}  // namespace

void restartClockSyncGaps() {
  ClockSyncGaps& gaps = clockSyncGaps();
  std::lock_guard lock(gaps.mutex);
  std::fill(std::begin(gaps.previousSteadyNs), std::end(gaps.previousSteadyNs), 0);
}

uint64_t lateClockSyncs() { return clockSyncGaps().late.load(std::memory_order_relaxed); }

void writeClockSyncRecords() {
  if (!active(OR_ACTIVITY_KIND_CLOCK_SYNC)) return;
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return;
  ClockSyncGaps& gaps = clockSyncGaps();
  std::lock_guard lock(gaps.mutex);
  // Again under the lock: the window may have closed while this thread
  // waited, and a sample written after it would be counted but never read.
  if (!active(OR_ACTIVITY_KIND_CLOCK_SYNC)) return;
  BufferWriter writer(threadContext());
  for (auto& device : runtime->devices) {
    const ClockPair pair = sampleClocks();
    uint64_t& previous = gaps.previousSteadyNs[device->index];
    if (previous != 0 && pair.steadyNs > previous && pair.steadyNs - previous > OR_ACTIVITY_CLOCK_SYNC_INTERVAL_NS) {
      gaps.late.fetch_add(1, std::memory_order_relaxed);
    }
    previous = pair.steadyNs;
    orActivityClockSync record{};
    record.header = {OR_ACTIVITY_KIND_CLOCK_SYNC, sizeof(record)};
    record.device = device->index;
    record.hostTimestamp = pair.hostNs;
    record.deviceTimestamp = device->clock.at(pair.steadyNs);
    record.uncertainty = pair.uncertaintyNs;
    writer.append(&record, sizeof(record), device->index);
  }
}

namespace {

std::atomic<uint64_t> gCounterPeriodNs{OR_ACTIVITY_COUNTER_PERIOD_DEFAULT_NS};
// Serialises samplers (the delivery thread, the window's opening and
// closing), so one device's samples stay in time order.
std::mutex gCounterMutex;

void appendCounter(BufferWriter& writer, int device, orActivityCounterKind counter, uint64_t streamId,
                   uint64_t timestamp, uint64_t value) {
  orActivityCounter record{};
  record.header = {OR_ACTIVITY_KIND_COUNTER, sizeof(record)};
  record.device = device;
  record.counter = counter;
  record.streamId = streamId;
  record.timestamp = timestamp;
  record.value = value;
  writer.append(&record, sizeof(record), device);
}

void sampleDevice(BufferWriter& writer, Device& device, uint64_t timestamp) {
  const uint64_t allocated = device.publishedAllocatedBytes.load(std::memory_order_relaxed);
  if (allocated != UINT64_MAX)
    appendCounter(writer, device.index, OR_COUNTER_MEMORY_ALLOCATED, 0, timestamp, allocated);
  appendCounter(writer, device.index, OR_COUNTER_MEMORY_RESERVED, 0, timestamp,
                device.requestedBytes.load(std::memory_order_relaxed));
  appendCounter(writer, device.index, OR_COUNTER_COPY_BYTES, 0, timestamp, device.executor->copiedBytes());
  for (const auto& stream : device.snapshotStreams()) {
    const uint64_t enqueued = stream->enqueuedCount();
    const uint64_t completed = stream->completedCount();
    appendCounter(writer, device.index, OR_COUNTER_QUEUED_TASKS, stream->id(), timestamp,
                  enqueued > completed ? enqueued - completed : 0);
  }
}

}  // namespace

uint64_t counterPeriodNs() { return gCounterPeriodNs.load(std::memory_order_relaxed); }
void setCounterPeriodNs(uint64_t periodNs) { gCounterPeriodNs.store(periodNs, std::memory_order_relaxed); }

void writeCounterRecords() {
  if (!active(OR_ACTIVITY_KIND_COUNTER)) return;
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return;
  std::lock_guard lock(gCounterMutex);
  if (!active(OR_ACTIVITY_KIND_COUNTER)) return;  // closed meanwhile (see writeClockSyncRecords)
  BufferWriter writer(threadContext());
  const uint64_t timestamp = hostRecordNs();
  for (auto& device : runtime->devices) sampleDevice(writer, *device, timestamp);
}

namespace {

// Interned names live forever; a small per-thread cache keyed by the caller's
// pointer (and checked by content) keeps launches off the global lock.
struct NameTable {
  std::mutex mutex;
  std::unordered_set<std::string> names;
};

NameTable& nameTable() {
  static NameTable* table = new NameTable();
  return *table;
}

}  // namespace

const char* internName(const char* name) {
  constexpr size_t kSize = ThreadContext::kNameCacheSize;
  const size_t slot = (reinterpret_cast<uintptr_t>(name) >> 3) % kSize;
  ThreadContext::NameCacheEntry& entry = threadContext().nameCache[slot];
  if (entry.key == name && std::strcmp(entry.interned, name) == 0) return entry.interned;
  NameTable& table = nameTable();
  const char* interned;
  {
    std::lock_guard lock(table.mutex);
    interned = table.names.emplace(name).first->c_str();
  }
  entry = {name, interned};
  return interned;
}

void shutdownDelivery() { stopDeliveryThread(); }

}  // namespace openreg::activity
