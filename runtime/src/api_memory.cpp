// Memory entry points: device and pinned allocation, pointer attributes.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "activity/recorder.h"
#include "clock.h"
#include "error.h"
#include "runtime_state.h"
#include "testing.h"

using namespace openreg;

namespace {

constexpr size_t kDeviceAlignment = 256;
constexpr size_t kHostAlignment = 4096;

size_t roundUp(size_t value, size_t alignment) { return (value + alignment - 1) / alignment * alignment; }

std::atomic<void (*)(void*)> gFreeHook{nullptr};

// Before memory is freed, work still queued may use it (like cudaFree), also
// a peer copy queued on another device's stream. At exit, work that still
// runs keeps it: orErrorShuttingDown, and the memory is not freed.
orError_t waitForAllDevices(Runtime& runtime, const char* caller) {
  for (auto& device : runtime.devices) {
    if (waitDeviceIdle(*device, false, 0) != orSuccess) return failShuttingDown(caller);
  }
  return orSuccess;
}

// Reserves capacity on a device; false if it would exceed it.
bool reserve(Device& device, size_t bytes) {
  size_t used = device.usedBytes.load(std::memory_order_relaxed);
  do {
    if (bytes > device.properties.totalGlobalMem - used) return false;
  } while (!device.usedBytes.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

}  // namespace

extern "C" {

orError_t orMalloc(void** ptr, size_t size) {
  return guarded([&]() -> orError_t {
    if (ptr == nullptr) return fail(orErrorInvalidValue, "orMalloc: ptr is NULL");
    *ptr = nullptr;
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (size == 0) return orSuccess;
    activity::TracedCall call(OR_API_MALLOC, activity::Correlation::IfRuntimeTraced);
    const int index = currentDevice();
    Device& device = *runtime->devices[index];
    const size_t rounded = roundUp(size, kDeviceAlignment);
    orError_t result = orSuccess;
    if (rounded < size || !reserve(device, rounded)) {
      const size_t used = device.usedBytes.load();
      const size_t total = device.properties.totalGlobalMem;
      result = fail(orErrorMemoryAllocation,
                    "orMalloc: out of memory on openreg device %d: requested %zu bytes, %zu bytes free of %zu", index,
                    size, total - std::min(used, total), total);
    } else {
      void* memory = std::aligned_alloc(kDeviceAlignment, rounded);
      if (memory == nullptr) {
        device.usedBytes.fetch_sub(rounded);
        result = fail(orErrorMemoryAllocation,
                      "orMalloc: the host backing openreg device %d could not provide %zu bytes", index, size);
      } else {
        runtime->memory.add(memory, {size, rounded, index, orMemoryTypeDevice});
        device.requestedBytes.fetch_add(size, std::memory_order_relaxed);
        *ptr = memory;
        activity::recordMemory(call, OR_ACTIVITY_MEMORY_ALLOCATE, OR_ACTIVITY_MEMORY_KIND_DEVICE, index, memory, size);
      }
    }
    return call.result(index, result);
  });
}

orError_t orFree(void* ptr) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (ptr == nullptr) return orSuccess;
    activity::TracedCall call(OR_API_FREE, activity::Correlation::IfRuntimeTraced);
    if (orError_t e = beforeBlocking("orFree")) return call.result(e);
    void* base = nullptr;
    Allocation allocation;
    if (!runtime->memory.find(ptr, &base, &allocation) || base != ptr || allocation.type != orMemoryTypeDevice) {
      return call.result(fail(orErrorInvalidDevicePointer,
                              "orFree: %p is not the start of a live device allocation (already freed, never "
                              "allocated, or an interior pointer)",
                              ptr));
    }
    if (auto hook = gFreeHook.load(std::memory_order_acquire)) hook(ptr);
    if (orError_t e = waitForAllDevices(*runtime, "orFree")) return call.result(allocation.device, e);
    Allocation removed;
    if (!runtime->memory.remove(ptr, allocation.generation, &removed)) {
      return call.result(allocation.device,
                         fail(orErrorInvalidDevicePointer,
                              "orFree: %p was freed concurrently by another thread (a double free); an allocation "
                              "that reused the address since is left alone",
                              ptr));
    }
    activity::recordMemory(call, OR_ACTIVITY_MEMORY_RELEASE, OR_ACTIVITY_MEMORY_KIND_DEVICE, removed.device, ptr,
                           removed.size);
    std::free(ptr);
    runtime->devices[removed.device]->usedBytes.fetch_sub(removed.reserved);
    runtime->devices[removed.device]->requestedBytes.fetch_sub(removed.size, std::memory_order_relaxed);
    return call.result(removed.device, orSuccess);
  });
}

orError_t orMallocHost(void** ptr, size_t size) {
  return guarded([&]() -> orError_t {
    if (ptr == nullptr) return fail(orErrorInvalidValue, "orMallocHost: ptr is NULL");
    *ptr = nullptr;
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (size == 0) return orSuccess;
    activity::TracedCall call(OR_API_MALLOC_HOST, activity::Correlation::IfRuntimeTraced);
    const size_t rounded = roundUp(size, kHostAlignment);
    void* memory = rounded >= size ? std::aligned_alloc(kHostAlignment, rounded) : nullptr;
    orError_t result = orSuccess;
    if (memory == nullptr) {
      result = fail(orErrorHostMemoryAllocation, "orMallocHost: could not pin %zu bytes of host memory", size);
    } else {
      runtime->memory.add(memory, {size, rounded, -1, orMemoryTypeHost});
      *ptr = memory;
      activity::recordMemory(call, OR_ACTIVITY_MEMORY_ALLOCATE, OR_ACTIVITY_MEMORY_KIND_PINNED, -1, memory, size);
    }
    return call.result(-1, result);
  });
}

orError_t orFreeHost(void* ptr) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (ptr == nullptr) return orSuccess;
    activity::TracedCall call(OR_API_FREE_HOST, activity::Correlation::IfRuntimeTraced);
    if (orError_t e = beforeBlocking("orFreeHost")) return call.result(-1, e);
    void* base = nullptr;
    Allocation allocation;
    if (!runtime->memory.find(ptr, &base, &allocation) || base != ptr || allocation.type != orMemoryTypeHost) {
      return call.result(-1, fail(orErrorInvalidHostPointer,
                                  "orFreeHost: %p is not the start of a live pinned allocation (already freed, "
                                  "never allocated, or an interior pointer)",
                                  ptr));
    }
    // Asynchronous copies on any device may still read or write it.
    if (orError_t e = waitForAllDevices(*runtime, "orFreeHost")) return call.result(-1, e);
    Allocation removed;
    if (!runtime->memory.remove(ptr, allocation.generation, &removed)) {
      return call.result(-1, fail(orErrorInvalidHostPointer, "orFreeHost: %p was freed concurrently", ptr));
    }
    activity::recordMemory(call, OR_ACTIVITY_MEMORY_RELEASE, OR_ACTIVITY_MEMORY_KIND_PINNED, -1, ptr, removed.size);
    std::free(ptr);
    return call.result(-1, orSuccess);
  });
}

orError_t orMemGetInfoIndex(int device, size_t* freeBytes, size_t* totalBytes) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (orError_t e = checkDevice(*runtime, device, "orMemGetInfo")) return e;
    const Device& d = *runtime->devices[device];
    const size_t total = d.properties.totalGlobalMem;
    const size_t used = std::min(d.usedBytes.load(), total);
    if (freeBytes != nullptr) *freeBytes = total - used;
    if (totalBytes != nullptr) *totalBytes = total;
    return orSuccess;
  });
}

orError_t orMemGetInfo(size_t* freeBytes, size_t* totalBytes) {
  return orMemGetInfoIndex(currentDevice(), freeBytes, totalBytes);
}

orError_t orPointerGetAttributes(orPointerAttributes* attributes, const void* ptr) {
  return guarded([&]() -> orError_t {
    if (attributes == nullptr) return fail(orErrorInvalidValue, "orPointerGetAttributes: attributes is NULL");
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    void* base = nullptr;
    Allocation allocation;
    if (ptr != nullptr && runtime->memory.find(ptr, &base, &allocation)) {
      *attributes = {allocation.type, allocation.device, base, allocation.size};
    } else {
      *attributes = {orMemoryTypeUnregistered, -1, nullptr, 0};
    }
    return orSuccess;
  });
}

void orTestingSetFreeHook(void (*hook)(void* ptr)) { gFreeHook.store(hook, std::memory_order_release); }

}  // extern "C"
