#include "recorder.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
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
thread_local uint64_t tlsNextCorrelation = 0;
thread_local uint64_t tlsCorrelationEnd = 0;

thread_local uint32_t tlsThreadId = 0;

}  // namespace

uint64_t nextCorrelationId() {
  if (tlsNextCorrelation == tlsCorrelationEnd) {
    tlsNextCorrelation = gNextCorrelationId.fetch_add(kCorrelationBlock, std::memory_order_relaxed);
    tlsCorrelationEnd = tlsNextCorrelation + kCorrelationBlock;
  }
  return tlsNextCorrelation++;
}

uint32_t currentThreadId() {
  if (tlsThreadId == 0) tlsThreadId = static_cast<uint32_t>(::syscall(SYS_gettid));
  return tlsThreadId;
}

uint32_t currentProcessId() { return static_cast<uint32_t>(::getpid()); }

uint64_t TracedCall::hostNow() { return hostNowNs(); }

void recordApiCall(orActivityApiId api, int device, uint64_t correlationId, uint64_t start, uint64_t end,
                   orError_t status) {
  static const char* const kNames[OR_API_COUNT] = {
      "orInvalid",          "orLaunchKernel",      "orMemcpy",
      "orMemcpyAsync",      "orMemset",            "orMemsetAsync",
      "orMalloc",           "orFree",              "orMallocHost",
      "orFreeHost",         "orStreamSynchronize", "orEventSynchronize",
      "orDeviceSynchronize", "orEventRecord",      "orStreamWaitEvent",
      "orLaunchHostFunc"};
  BufferWriter writer;
  if (active(OR_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
    orActivityExternalCorrelationKind kinds[OR_EXTERNAL_CORRELATION_KIND_COUNT];
    uint64_t ids[OR_EXTERNAL_CORRELATION_KIND_COUNT];
    const int count = topExternalIds(kinds, ids, OR_EXTERNAL_CORRELATION_KIND_COUNT);
    for (int i = 0; i < count; ++i) {
      orActivityExternalCorrelation record{};
      record.header = {OR_ACTIVITY_KIND_EXTERNAL_CORRELATION, sizeof(record)};
      record.externalKind = kinds[i];
      record.externalId = ids[i];
      record.correlationId = correlationId;
      writer.append(&record, sizeof(record), device);
    }
  }
  if (active(OR_ACTIVITY_KIND_RUNTIME)) {
    orActivityRuntime record{};
    record.header = {OR_ACTIVITY_KIND_RUNTIME, sizeof(record)};
    record.apiId = api;
    record.processId = currentProcessId();
    record.threadId = currentThreadId();
    record.device = device;
    record.correlationId = correlationId;
    record.start = start;
    record.end = end;
    record.name = (api > 0 && api < OR_API_COUNT) ? kNames[api] : kNames[0];
    record.status = status;
    writer.append(&record, sizeof(record), device);
  }
}

bool write(const void* record, size_t size, int device) {
  BufferWriter writer;
  return writer.append(record, size, device);
}

void writeClockSyncRecords() {
  if (!active(OR_ACTIVITY_KIND_CLOCK_SYNC)) return;
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return;
  BufferWriter writer;
  for (auto& device : runtime->devices) {
    const ClockPair pair = sampleClocks();
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

struct NameCacheEntry {
  const char* key = nullptr;
  const char* interned = nullptr;
};
constexpr size_t kNameCacheSize = 64;
thread_local NameCacheEntry tlsNameCache[kNameCacheSize];

}  // namespace

const char* internName(const char* name) {
  const size_t slot = (std::hash<const void*>{}(name) >> 4) % kNameCacheSize;
  NameCacheEntry& entry = tlsNameCache[slot];
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
