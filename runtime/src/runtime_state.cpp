#include "runtime_state.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "activity/recorder.h"
#include "error.h"
#include "thread_context.h"

namespace openreg {
namespace {

// fork() copies only the calling thread: a child of a process whose runtime
// had started threads has the runtime's state but none of its executors or
// delivery thread, so any wait would hang and queued work never runs.
std::atomic<bool> gThreadsStarted{false};
std::atomic<bool> gForkedAfterThreads{false};

void markForkedChild() {
  if (gThreadsStarted.load(std::memory_order_relaxed)) gForkedAfterThreads.store(true, std::memory_order_relaxed);
}

// At exit, let queued work finish before libraries it may call into (torch)
// are torn down; if it does not finish in time, drop what is left.
void drainAtExit() {
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return;
  const uint64_t deadline = steadyNowNs() + runtime->config.exitDrainTimeoutMs * 1000000ull;
  for (auto& device : runtime->devices) {
    if (waitDeviceIdle(*device, false, deadline) == orErrorTimeout) {
      std::fprintf(stderr, "openreg: device %d still busy at exit after %llu ms; dropping its queued work\n",
                   device->index, static_cast<unsigned long long>(runtime->config.exitDrainTimeoutMs));
    }
  }
  // Drop what is left; then no wait may hang on it (runtime.h, "At exit").
  for (auto& device : runtime->devices) device->executor->discardPendingWork();
  for (auto& device : runtime->devices) {
    for (auto& stream : device->snapshotStreams()) stream->abandon();
  }
  Event::abandonBlockedWaits();
  activity::shutdownDelivery();
}

Runtime* createRuntime() {
  auto* runtime = new Runtime();
  runtime->config = readConfigFromEnvironment();
  if (!runtime->config.error.empty()) return runtime;  // every call reports it
  const Config& config = runtime->config;
  const uint64_t origin = steadyNowNs();
  for (int index = 0; index < config.deviceCount; ++index) {
    auto device = std::make_unique<Device>();
    device->index = index;
    orDeviceProp& p = device->properties;
    std::snprintf(p.name, sizeof(p.name), "OpenReg Simulated Accelerator");
    p.totalGlobalMem = config.deviceMemoryBytes;
    p.multiProcessorCount = 8 * config.workersPerDevice;
    p.clockRate = 1500000;
    p.executorThreads = config.workersPerDevice;
    p.streamPriorityLeast = 0;
    p.streamPriorityGreatest = -1;
    device->peakFlopsPerSecond =
        config.peakFlopsPerSecond > 0 ? config.peakFlopsPerSecond : 2.0 * p.multiProcessorCount * p.clockRate * 1000.0;
    device->peakBytesPerSecond =
        config.peakBytesPerSecond > 0 ? config.peakBytesPerSecond : 16.0 * p.executorThreads * p.clockRate * 1000.0;
    // Each device has its own counter: same rate model, different offset.
    device->clock.offsetNs = config.clockOffsetNs + static_cast<uint64_t>(index) * 1000000000ull;
    device->clock.originSteadyNs = origin;
    device->clock.skewPpm = config.clockSkewPpm;
    device->clock.driftPpmPerS = config.clockDriftPpmPerS;
    device->executor = std::make_unique<Executor>(index, config.workersPerDevice, &device->clock);
    device->defaultStream = std::make_shared<Stream>(index, 1, 0, true, device->executor.get());
    device->streamInfo.resize(2);
    device->streamInfo[1] = {0, true};
    device->streams.push_back(device->defaultStream);
    device->defaultStreamHandle = reinterpret_cast<orStream_t>(runtime->streams.insert(device->defaultStream));
    runtime->devices.push_back(std::move(device));
  }
  std::atexit(drainAtExit);
  return runtime;
}

}  // namespace

void noteRuntimeThreadsStarting() {
  static const int kAtforkRegistered = pthread_atfork(nullptr, nullptr, &markForkedChild);
  (void)kAtforkRegistered;
  gThreadsStarted.store(true, std::memory_order_relaxed);
}

Runtime* acquireRuntime(orError_t* error) {
  if (__builtin_expect(gForkedAfterThreads.load(std::memory_order_relaxed), 0)) {
    *error = fail(orErrorInitializationError,
                  "openreg runtime: cannot re-initialize the device in a forked subprocess: this process is a forked "
                  "child of one whose runtime had started its threads, which do not survive fork(). Start worker "
                  "processes with the 'spawn' or 'forkserver' method");
    return nullptr;
  }
  static Runtime* runtime = createRuntime();
  if (!runtime->config.error.empty()) {
    *error = fail(orErrorInitializationError, "openreg runtime configuration: %s", runtime->config.error.c_str());
    return nullptr;
  }
  *error = orSuccess;
  return runtime;
}

int currentDevice() { return threadContext().currentDevice; }
void setCurrentDevice(int device) { threadContext().currentDevice = device; }

orError_t checkDevice(const Runtime& runtime, int device, const char* caller) {
  const int count = static_cast<int>(runtime.devices.size());
  if (device < 0 || device >= count) {
    return fail(orErrorInvalidDevice, "%s: device %d is out of range (openreg has %d device%s: 0..%d)", caller, device,
                count, count == 1 ? "" : "s", count - 1);
  }
  return orSuccess;
}

orError_t resolveStream(Runtime& runtime, orStream_t handle, const char* caller, std::shared_ptr<Stream>* stream) {
  if (handle == nullptr) {
    *stream = runtime.devices[currentDevice()]->defaultStream;
    return orSuccess;
  }
  const auto value = reinterpret_cast<uint64_t>(handle);
  ThreadContext& context = threadContext();
  if (context.cachedStreamHandle == value && !context.cachedStream->destroyed()) {
    *stream = context.cachedStream;
    return orSuccess;
  }
  *stream = runtime.streams.find(value);
  if (*stream) {
    context.cachedStreamHandle = value;
    context.cachedStream = *stream;
  } else {
    return fail(orErrorInvalidResourceHandle, "%s: stream handle %p is not a live stream (destroyed or never created)",
                caller, static_cast<void*>(handle));
  }
  return orSuccess;
}

orError_t beforeBlocking(const char* caller) {
  ThreadContext& context = threadContext();
  if (context.onExecutor) {
    return fail(orErrorNotSupported,
                "%s: blocking calls are not allowed inside a kernel or host function (it would wait on its own device)",
                caller);
  }
  for (auto& stream : context.openBatches) stream->handOver();
  return orSuccess;
}

std::vector<std::shared_ptr<Stream>> Device::snapshotStreams() {
  std::vector<std::shared_ptr<Stream>> result;
  std::lock_guard lock(streamsMutex);
  size_t kept = 0;
  for (auto& weak : streams) {
    if (auto stream = weak.lock()) {
      result.push_back(stream);
      streams[kept++] = weak;
    }
  }
  streams.resize(kept);
  return result;
}

orError_t waitDeviceIdle(Device& device, bool takeErrors, uint64_t deadlineSteadyNs) {
  const auto streams = device.snapshotStreams();
  // All idle before any failure is taken, so a timeout loses none of them.
  for (auto& stream : streams) {
    if (orError_t error = stream->waitIdle(deadlineSteadyNs)) return error;
  }
  if (!takeErrors) return orSuccess;
  // Report one failure per call; later ones stay for the next sync.
  for (auto& stream : streams) {
    if (orError_t error = stream->takeError(); error != orSuccess) return error;
  }
  return orSuccess;
}

void MemoryRegistry::add(void* base, Allocation allocation) {
  std::unique_lock lock(mutex_);
  allocation.generation = nextGeneration_++;
  allocations_[reinterpret_cast<uintptr_t>(base)] = allocation;
}

bool MemoryRegistry::remove(void* base, uint64_t generation, Allocation* removed) {
  std::unique_lock lock(mutex_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(base));
  if (it == allocations_.end() || it->second.generation != generation) return false;
  *removed = it->second;
  allocations_.erase(it);
  return true;
}

bool MemoryRegistry::find(const void* ptr, void** base, Allocation* allocation) const {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock lock(mutex_);
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) return false;
  --it;
  if (address >= it->first + it->second.size) return false;
  *base = reinterpret_cast<void*>(it->first);
  *allocation = it->second;
  return true;
}

}  // namespace openreg
