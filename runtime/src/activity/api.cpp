// orActivity* entry points.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "../clock.h"
#include "../error.h"
#include "../runtime_state.h"
#include "buffers.h"
#include "correlation.h"
#include "recorder.h"

using namespace openreg;
using namespace openreg::activity;

namespace {

std::mutex gSwitchMutex;
bool gTracing = false;
uint32_t gEnabledKinds = 0;

void publishActiveKinds() {
  const uint32_t kinds = gTracing ? gEnabledKinds : 0;
  const uint32_t clockSync = 1u << OR_ACTIVITY_KIND_CLOCK_SYNC;
  if ((kinds & clockSync) != 0 && (gActiveKinds.load(std::memory_order_relaxed) & clockSync) == 0) {
    restartClockSyncGaps();
  }
  gActiveKinds.store(kinds, std::memory_order_release);
  notifyTracingChanged();
}

bool validKind(orActivityKind kind) { return kind > OR_ACTIVITY_KIND_INVALID && kind < OR_ACTIVITY_KIND_COUNT; }

bool validExternalKind(orActivityExternalCorrelationKind kind) {
  return kind > OR_EXTERNAL_CORRELATION_KIND_UNKNOWN && kind < OR_EXTERNAL_CORRELATION_KIND_COUNT;
}

std::atomic<uint64_t> gNextMarkerId{1};

orError_t writeMarker(orActivityMarkerKind kind, uint64_t id, const char* name) {
  orError_t error;
  if (acquireRuntime(&error) == nullptr) return error;
  if (!active(OR_ACTIVITY_KIND_MARKER)) return orSuccess;
  orActivityMarker record{};
  record.markerKind = kind;
  record.threadId = currentThreadId();
  record.id = id;
  record.timestamp = hostRecordNs();
  record.name = name != nullptr ? internName(name) : nullptr;
  record.processId = currentProcessId();
  record.device = currentDevice();
  writeRecord(record, OR_ACTIVITY_KIND_MARKER, -1);
  return orSuccess;
}

}  // namespace

extern "C" {

orError_t orActivityEnableTracing(void) {
  return guarded([&]() -> orError_t {
    orError_t error;
    if (acquireRuntime(&error) == nullptr) return error;
    calibrateHostClock();
    {
      std::lock_guard lock(gSwitchMutex);
      gTracing = true;
      publishActiveKinds();
    }
    writeClockSyncRecords();
    writeCounterRecords();
    return orSuccess;
  });
}

orError_t orActivityDisableTracing(void) {
  return guarded([&]() -> orError_t {
    // A last clock sample closes the window so the mapping spans all of it;
    // a last counter sample ends every counter's last interval.
    writeClockSyncRecords();
    writeCounterRecords();
    std::lock_guard lock(gSwitchMutex);
    gTracing = false;
    publishActiveKinds();
    return orSuccess;
  });
}

orError_t orActivityEnable(orActivityKind kind) {
  return guarded([&]() -> orError_t {
    if (!validKind(kind))
      return fail(orErrorInvalidValue, "orActivityEnable: unknown activity kind %d", static_cast<int>(kind));
    std::lock_guard lock(gSwitchMutex);
    gEnabledKinds |= 1u << kind;
    publishActiveKinds();
    return orSuccess;
  });
}

orError_t orActivityDisable(orActivityKind kind) {
  return guarded([&]() -> orError_t {
    if (!validKind(kind))
      return fail(orErrorInvalidValue, "orActivityDisable: unknown activity kind %d", static_cast<int>(kind));
    std::lock_guard lock(gSwitchMutex);
    gEnabledKinds &= ~(1u << kind);
    publishActiveKinds();
    return orSuccess;
  });
}

orError_t orActivityRegisterCallbacks(orActivityBufferRequestedFn requested, orActivityBufferCompletedFn completed,
                                      void* userData) {
  return guarded([&]() -> orError_t {
    if (insideClientCallback()) {
      return fail(orErrorNotSupported, "orActivityRegisterCallbacks: not allowed inside a buffer callback");
    }
    if ((requested == nullptr) != (completed == nullptr)) {
      return fail(orErrorInvalidValue, "orActivityRegisterCallbacks: give both callbacks, or neither to unregister");
    }
    {
      std::lock_guard lock(gSwitchMutex);
      if (gTracing) {
        return fail(orErrorNotSupported, "orActivityRegisterCallbacks: disable tracing before changing the client");
      }
    }
    return registerClient(requested, completed, userData);
  });
}

orError_t orActivityRegisterTimestampCallback(orActivityTimestampFn fn) {
  return guarded([&]() -> orError_t {
    std::lock_guard lock(gSwitchMutex);
    if (gTracing) {
      return fail(orErrorNotSupported,
                  "orActivityRegisterTimestampCallback: disable tracing before changing the clock");
    }
    gHostRecordClock.store(fn, std::memory_order_relaxed);
    return orSuccess;
  });
}

orError_t orActivityFlushAll(uint32_t flags) {
  return guarded([&]() -> orError_t {
    if (insideClientCallback())
      return fail(orErrorNotSupported, "orActivityFlushAll: not allowed inside a buffer callback");
    if ((flags & ~static_cast<uint32_t>(OR_ACTIVITY_FLUSH_FORCED)) != 0) {
      return fail(orErrorInvalidValue, "orActivityFlushAll: unknown flags 0x%x", flags);
    }
    if (!clientRegistered()) {
      return fail(orErrorNotInitialized, "orActivityFlushAll: no client registered (orActivityRegisterCallbacks)");
    }
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (orError_t e = beforeBlocking("orActivityFlushAll")) return e;
    const uint64_t start = hostNowNs();
    orError_t result = orSuccess;
    if (flags & OR_ACTIVITY_FLUSH_FORCED) {
      // Device work queued before now writes its records when it completes.
      const uint64_t deadline = steadyNowNs() + runtime->config.flushTimeoutMs * 1000000ull;
      for (auto& device : runtime->devices) {
        if (waitDeviceIdle(*device, false, deadline) == orErrorTimeout) {
          result =
              fail(orErrorTimeout,
                   "orActivityFlushAll: device %d did not finish its queued work within %llu ms; delivered what exists",
                   device->index, static_cast<unsigned long long>(runtime->config.flushTimeoutMs));
        }
      }
      collectThreadBuffers();
    }
    deliverQueued();
    addFlushTime(hostNowNs() - start);
    return result;
  });
}

orError_t orActivityGetNextRecord(const uint8_t* buffer, size_t validSize, const orActivityRecord** record) {
  if (record == nullptr || (buffer == nullptr && validSize != 0)) return orErrorInvalidValue;
  if ((reinterpret_cast<uintptr_t>(buffer) & 7u) != 0) return orErrorInvalidValue;
  size_t offset;
  if (*record == nullptr) {
    offset = 0;
  } else {
    const auto* current = reinterpret_cast<const uint8_t*>(*record);
    if (current < buffer || current >= buffer + validSize) return orErrorInvalidValue;
    const size_t at = static_cast<size_t>(current - buffer);
    if (validSize - at < sizeof(orActivityRecord)) return orErrorInvalidValue;
    const uint32_t size = (*record)->size;
    if (size < sizeof(orActivityRecord) || size % 8 != 0 || size > validSize - at) return orErrorInvalidValue;
    offset = at + size;
  }
  if (offset == validSize) return orErrorMaxLimitReached;
  if (validSize - offset < sizeof(orActivityRecord)) return orErrorInvalidValue;
  const auto* next = reinterpret_cast<const orActivityRecord*>(buffer + offset);
  if (next->size < sizeof(orActivityRecord) || next->size % 8 != 0 || next->size > validSize - offset) {
    return orErrorInvalidValue;
  }
  *record = next;
  return orSuccess;
}

orError_t orActivityGetNumDroppedRecords(int device, uint64_t* dropped) {
  return guarded([&]() -> orError_t {
    if (dropped == nullptr) return fail(orErrorInvalidValue, "orActivityGetNumDroppedRecords: dropped is NULL");
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (device != -1) {
      if (orError_t e = checkDevice(*runtime, device, "orActivityGetNumDroppedRecords")) return e;
    }
    *dropped = droppedRecords(device);
    return orSuccess;
  });
}

orError_t orActivityGetStats(orActivityStats* stats) {
  return guarded([&]() -> orError_t {
    if (stats == nullptr || stats->structSize < 8) {
      return fail(orErrorInvalidValue, "orActivityGetStats: stats is NULL or its structSize is unset");
    }
    fillStats(stats, stats->structSize);
    return orSuccess;
  });
}

orError_t orActivityPushExternalCorrelationId(orActivityExternalCorrelationKind kind, uint64_t id) {
  return guarded([&]() -> orError_t {
    if (!validExternalKind(kind)) {
      return fail(orErrorInvalidValue, "orActivityPushExternalCorrelationId: unknown kind %d", static_cast<int>(kind));
    }
    pushExternalId(kind, id);
    return orSuccess;
  });
}

orError_t orActivityPopExternalCorrelationId(orActivityExternalCorrelationKind kind, uint64_t* lastId) {
  return guarded([&]() -> orError_t {
    if (!validExternalKind(kind)) {
      return fail(orErrorInvalidValue, "orActivityPopExternalCorrelationId: unknown kind %d", static_cast<int>(kind));
    }
    if (!popExternalId(kind, lastId)) {
      return fail(orErrorInvalidValue, "orActivityPopExternalCorrelationId: the kind %d stack of this thread is empty",
                  static_cast<int>(kind));
    }
    return orSuccess;
  });
}

orError_t orActivityGetClockSample(int device, orActivityClockSample* sample) {
  return guarded([&]() -> orError_t {
    if (sample == nullptr) return fail(orErrorInvalidValue, "orActivityGetClockSample: sample is NULL");
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (orError_t e = checkDevice(*runtime, device, "orActivityGetClockSample")) return e;
    const ClockPair pair = sampleClocks();
    sample->hostTimestamp = pair.hostNs;
    sample->deviceTimestamp = runtime->devices[device]->clock.at(pair.steadyNs);
    sample->uncertainty = pair.uncertaintyNs;
    return orSuccess;
  });
}

orError_t orActivityGetTimestamp(uint64_t* timestamp) {
  if (timestamp == nullptr) return fail(orErrorInvalidValue, "orActivityGetTimestamp: timestamp is NULL");
  *timestamp = hostRecordNs();
  return orSuccess;
}

orError_t orActivityMarkerRangePush(const char* name) {
  return guarded([&]() -> orError_t {
    if (name == nullptr) return fail(orErrorInvalidValue, "orActivityMarkerRangePush: name is NULL");
    const uint64_t id = gNextMarkerId.fetch_add(1, std::memory_order_relaxed);
    threadContext().markerStack.push_back(id);
    return writeMarker(OR_ACTIVITY_MARKER_RANGE_START, id, name);
  });
}

orError_t orActivityMarkerRangePop(void) {
  return guarded([&]() -> orError_t {
    auto& markerStack = threadContext().markerStack;
    if (markerStack.empty()) {
      return fail(orErrorInvalidValue, "orActivityMarkerRangePop: no range is open on this thread");
    }
    const uint64_t id = markerStack.back();
    markerStack.pop_back();
    return writeMarker(OR_ACTIVITY_MARKER_RANGE_END, id, nullptr);
  });
}

orError_t orActivityMarkerInstant(const char* name) {
  return guarded([&]() -> orError_t {
    if (name == nullptr) return fail(orErrorInvalidValue, "orActivityMarkerInstant: name is NULL");
    return writeMarker(OR_ACTIVITY_MARKER_INSTANT, gNextMarkerId.fetch_add(1, std::memory_order_relaxed), name);
  });
}

orError_t orActivityGetVersion(uint32_t* version) {
  if (version == nullptr) return fail(orErrorInvalidValue, "orActivityGetVersion: version is NULL");
  *version = OR_ACTIVITY_API_VERSION;
  return orSuccess;
}

orError_t orActivityIsActive(orActivityKind kind, int* active) {
  if (active == nullptr || !validKind(kind)) {
    return fail(orErrorInvalidValue, "orActivityIsActive: %s", active == nullptr ? "active is NULL" : "unknown kind");
  }
  *active = activity::active(kind) ? 1 : 0;
  return orSuccess;
}

orError_t orActivitySetCounterPeriod(uint64_t periodNs) {
  return guarded([&]() -> orError_t {
    if (periodNs < OR_ACTIVITY_COUNTER_PERIOD_MIN_NS || periodNs > OR_ACTIVITY_COUNTER_PERIOD_MAX_NS) {
      return fail(orErrorInvalidValue, "orActivitySetCounterPeriod: %llu ns is outside [%llu, %llu]",
                  static_cast<unsigned long long>(periodNs), OR_ACTIVITY_COUNTER_PERIOD_MIN_NS,
                  OR_ACTIVITY_COUNTER_PERIOD_MAX_NS);
    }
    std::lock_guard lock(gSwitchMutex);
    if (gTracing) return fail(orErrorNotSupported, "orActivitySetCounterPeriod: the tracing window is open");
    setCounterPeriodNs(periodNs);
    return orSuccess;
  });
}

orError_t orActivityPublishCounter(int device, orActivityCounterKind counter, uint64_t value) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (orError_t e = checkDevice(*runtime, device, "orActivityPublishCounter")) return e;
    if (counter != OR_COUNTER_MEMORY_ALLOCATED) {
      return fail(orErrorInvalidValue,
                  "orActivityPublishCounter: counter %d is not one a client publishes (only "
                  "OR_COUNTER_MEMORY_ALLOCATED; the runtime measures the others)",
                  static_cast<int>(counter));
    }
    // UINT64_MAX marks "never published": the largest value reads one below.
    runtime->devices[device]->publishedAllocatedBytes.store(value == UINT64_MAX ? value - 1 : value,
                                                            std::memory_order_relaxed);
    return orSuccess;
  });
}

orError_t orActivityGetDeviceCount(int* count) { return orGetDeviceCount(count); }

orError_t orActivityGetDeviceInfo(int device, orActivityDeviceInfo* info) {
  return guarded([&]() -> orError_t {
    if (info == nullptr || info->structSize < 8) {
      return fail(orErrorInvalidValue, "orActivityGetDeviceInfo: info is NULL or its structSize is unset");
    }
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (orError_t e = checkDevice(*runtime, device, "orActivityGetDeviceInfo")) return e;
    const orDeviceProp& p = runtime->devices[device]->properties;
    orActivityDeviceInfo full{};
    full.structSize = sizeof(full);
    full.index = device;
    std::snprintf(full.name, sizeof(full.name), "%s", p.name);
    full.totalMemory = p.totalGlobalMem;
    full.computeUnits = p.multiProcessorCount;
    full.clockRateKHz = p.clockRate;
    full.executorThreads = p.executorThreads;
    full.peakFlopsPerSecond = runtime->devices[device]->peakFlopsPerSecond;
    full.peakBytesPerSecond = runtime->devices[device]->peakBytesPerSecond;
    const size_t bytes = info->structSize < sizeof(full) ? info->structSize : sizeof(full);
    const uint32_t callerSize = info->structSize;
    std::memcpy(info, &full, bytes);
    info->structSize = callerSize;
    return orSuccess;
  });
}

orError_t orActivityGetStreamInfo(int device, uint64_t streamId, orActivityStreamInfo* info) {
  return guarded([&]() -> orError_t {
    if (info == nullptr || info->structSize < 8) {
      return fail(orErrorInvalidValue, "orActivityGetStreamInfo: info is NULL or its structSize is unset");
    }
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (orError_t e = checkDevice(*runtime, device, "orActivityGetStreamInfo")) return e;
    Device& d = *runtime->devices[device];
    orActivityStreamInfo full{};
    full.structSize = sizeof(full);
    full.device = device;
    full.streamId = streamId;
    {
      std::lock_guard lock(d.streamsMutex);
      if (streamId == 0 || streamId >= d.streamInfo.size()) {
        return fail(orErrorInvalidValue, "orActivityGetStreamInfo: device %d never had stream %llu", device,
                    static_cast<unsigned long long>(streamId));
      }
      full.priority = d.streamInfo[streamId].priority;
      full.isDefault = d.streamInfo[streamId].isDefault ? 1 : 0;
    }
    const size_t bytes = info->structSize < sizeof(full) ? info->structSize : sizeof(full);
    const uint32_t callerSize = info->structSize;
    std::memcpy(info, &full, bytes);
    info->structSize = callerSize;
    return orSuccess;
  });
}

}  // extern "C"
