// The process-wide runtime: devices, their executors and streams, the handle
// tables and the allocation registry. Created on the first API call and
// intentionally never destroyed, so executor threads and late callers (thread
// exit, atexit) never see it torn down.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "clock.h"
#include "config.h"
#include "event.h"
#include "executor.h"
#include "handles.h"
#include "openreg/runtime.h"
#include "stream.h"

namespace openreg {

struct StreamInfo {
  int priority = 0;
  bool isDefault = false;
};

struct Device {
  int index = 0;
  orDeviceProp properties{};
  DeviceClockModel clock;
  std::unique_ptr<Executor> executor;
  std::atomic<size_t> usedBytes{0};
  // For COUNTER records: live orMalloc bytes as requested; the allocator's
  // published MEMORY_ALLOCATED (UINT64_MAX: never published).
  std::atomic<uint64_t> requestedBytes{0};
  std::atomic<uint64_t> publishedAllocatedBytes{UINT64_MAX};
  double peakFlopsPerSecond = 0;
  double peakBytesPerSecond = 0;

  std::shared_ptr<Stream> defaultStream;
  orStream_t defaultStreamHandle = nullptr;

  std::mutex streamsMutex;
  std::vector<std::weak_ptr<Stream>> streams;  // every stream that may hold work
  std::vector<StreamInfo> streamInfo;          // indexed by stream id, never shrinks

  // Every stream of the device (live, or destroyed with work still queued).
  std::vector<std::shared_ptr<Stream>> snapshotStreams();
};

struct Allocation {
  size_t size = 0;      // as requested: the bound copies are checked against
  size_t reserved = 0;  // rounded up: what the device capacity is charged
  int device = -1;      // -1 for pinned host memory
  orMemoryType type = orMemoryTypeUnregistered;
  uint64_t generation = 0;  // set by MemoryRegistry::add, unique per allocation
};

class MemoryRegistry {
 public:
  void add(void* base, Allocation allocation);
  // Removes the allocation at base if it is still the one `find` returned
  // (same generation): a stale pointer never removes a later allocation that
  // reused its address.
  bool remove(void* base, uint64_t generation, Allocation* removed);
  // Finds the allocation containing ptr.
  bool find(const void* ptr, void** base, Allocation* allocation) const;

 private:
  mutable std::shared_mutex mutex_;
  std::map<uintptr_t, Allocation> allocations_;
  uint64_t nextGeneration_ = 1;
};

constexpr uint64_t kStreamHandleTag = 0x5;
constexpr uint64_t kEventHandleTag = 0xE;

struct Runtime {
  Config config;
  std::vector<std::unique_ptr<Device>> devices;
  HandleTable<Stream, kStreamHandleTag> streams;
  HandleTable<Event, kEventHandleTag> events;
  MemoryRegistry memory;
  std::atomic<uint64_t> nextEventId{1};
};

// The runtime, or nullptr with the thread's error set: a bad configuration,
// or a process forked after the runtime had started threads (runtime.h).
Runtime* acquireRuntime(orError_t* error);

// Called before the runtime starts a thread of its own (executor workers, the
// activity delivery thread). From then on a fork()ed child's runtime refuses
// every call with orErrorInitializationError instead of waiting on threads it
// does not have. Thread-safe.
void noteRuntimeThreadsStarting();

// The calling thread's current device (starts at 0).
int currentDevice();
void setCurrentDevice(int device);

// Validates a device index, setting the error message if it is bad.
orError_t checkDevice(const Runtime& runtime, int device, const char* caller);

// Resolves a stream handle; NULL means the current device's default stream.
orError_t resolveStream(Runtime& runtime, orStream_t handle, const char* caller, std::shared_ptr<Stream>* stream);

// Called before a host thread blocks on the device. Refuses on executor
// threads (a kernel waiting on the device it runs on would deadlock), and hands
// over the work of the thread's open batches (orStreamBeginBatch), which the
// wait could otherwise be waiting for.
orError_t beforeBlocking(const char* caller);

// Waits for all streams of a device; collects the first sticky failure if
// takeErrors. Times out after deadlineSteadyNs (0 = never); at exit, a wait
// cut short returns orErrorShuttingDown. No message is set for either.
orError_t waitDeviceIdle(Device& device, bool takeErrors, uint64_t deadlineSteadyNs);

}  // namespace openreg
