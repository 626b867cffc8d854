// Copy and memset entry points.
#include <cstring>
#include <memory>

#include "activity/device_records.h"
#include "activity/recorder.h"
#include "collective.h"
#include "error.h"
#include "runtime_state.h"
#include "stream.h"
#include "thread_context.h"

using namespace openreg;

namespace {

struct Endpoint {
  orMemoryType type = orMemoryTypeUnregistered;
  int device = -1;
  uintptr_t base = 0;
  size_t size = 0;
};

Endpoint classify(const Runtime& runtime, const void* ptr) {
  Endpoint endpoint;
  void* base = nullptr;
  Allocation allocation;
  if (runtime.memory.find(ptr, &base, &allocation)) {
    endpoint = {allocation.type, allocation.device, reinterpret_cast<uintptr_t>(base), allocation.size};
  }
  return endpoint;
}

bool fits(const Endpoint& endpoint, const void* ptr, size_t count) {
  if (endpoint.type == orMemoryTypeUnregistered) return true;  // pageable: cannot be checked
  const uintptr_t start = reinterpret_cast<uintptr_t>(ptr);
  return count <= endpoint.size && start - endpoint.base <= endpoint.size - count;
}

uint8_t memoryKind(const Endpoint& endpoint) {
  switch (endpoint.type) {
    case orMemoryTypeDevice:
      return OR_ACTIVITY_MEMORY_KIND_DEVICE;
    case orMemoryTypeHost:
      return OR_ACTIVITY_MEMORY_KIND_PINNED;
    default:
      return OR_ACTIVITY_MEMORY_KIND_PAGEABLE;
  }
}

const char* kindName(orMemcpyKind kind) {
  switch (kind) {
    case orMemcpyHostToHost:
      return "host-to-host";
    case orMemcpyHostToDevice:
      return "host-to-device";
    case orMemcpyDeviceToHost:
      return "device-to-host";
    case orMemcpyDeviceToDevice:
      return "device-to-device";
    default:
      return "default";
  }
}

// A copy's direction, checked against the pointers' kinds; orSuccess or the
// failure (message set).
orError_t checkDirection(orMemcpyKind kind, const Endpoint& from, const Endpoint& to, const void* dst, const void* src,
                         size_t count, const char* caller) {
  const bool fromDevice = from.type == orMemoryTypeDevice;
  const bool toDevice = to.type == orMemoryTypeDevice;
  const bool expectFromDevice = kind == orMemcpyDeviceToHost || kind == orMemcpyDeviceToDevice;
  const bool expectToDevice = kind == orMemcpyHostToDevice || kind == orMemcpyDeviceToDevice;
  if (fromDevice != expectFromDevice || toDevice != expectToDevice) {
    return fail(orErrorInvalidValue, "%s: a %s copy needs a %s source and a %s destination, got %s %p and %s %p",
                caller, kindName(kind), expectFromDevice ? "device" : "host", expectToDevice ? "device" : "host",
                fromDevice ? "device" : "host", src, toDevice ? "device" : "host", dst);
  }
  if (!fits(from, src, count)) {
    return fail(orErrorInvalidValue, "%s: reading %zu bytes at %p runs past its allocation", caller, count, src);
  }
  if (!fits(to, dst, count)) {
    return fail(orErrorInvalidValue, "%s: writing %zu bytes at %p runs past its allocation", caller, count, dst);
  }
  return orSuccess;
}

uint8_t activityCopyKind(orMemcpyKind kind, const Endpoint& from, const Endpoint& to) {
  switch (kind) {
    case orMemcpyHostToDevice:
      return OR_ACTIVITY_MEMCPY_HTOD;
    case orMemcpyDeviceToHost:
      return OR_ACTIVITY_MEMCPY_DTOH;
    case orMemcpyDeviceToDevice:
      return from.device == to.device ? OR_ACTIVITY_MEMCPY_DTOD : OR_ACTIVITY_MEMCPY_PTOP;
    default:
      return OR_ACTIVITY_MEMCPY_HTOH;
  }
}

orError_t copy(void* dst, const void* src, size_t count, orMemcpyKind kind, orStream_t streamHandle, bool async,
               const char* caller) {
  if (kind < orMemcpyHostToHost || kind > orMemcpyDefault) {
    return fail(orErrorInvalidValue, "%s: unknown copy kind %d", caller, static_cast<int>(kind));
  }
  if (count == 0) return orSuccess;
  if (dst == nullptr || src == nullptr)
    return fail(orErrorInvalidValue, "%s: %s pointer is NULL", caller, dst ? "source" : "destination");
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return error;
  activity::TracedCall call(async ? OR_API_MEMCPY_ASYNC : OR_API_MEMCPY, activity::Correlation::Always);

  const Endpoint from = classify(*runtime, src);
  const Endpoint to = classify(*runtime, dst);
  const bool fromDevice = from.type == orMemoryTypeDevice;
  const bool toDevice = to.type == orMemoryTypeDevice;
  if (kind == orMemcpyDefault) {
    kind = fromDevice ? (toDevice ? orMemcpyDeviceToDevice : orMemcpyDeviceToHost)
                      : (toDevice ? orMemcpyHostToDevice : orMemcpyHostToHost);
  }
  if (orError_t e = checkDirection(kind, from, to, dst, src, count, caller)) return call.result(e);

  if (kind == orMemcpyHostToHost && !async) {
    std::memmove(dst, src, count);
    return call.result(orSuccess);
  }

  std::shared_ptr<Stream> stream;
  if (async) {
    if (orError_t e = resolveStream(*runtime, streamHandle, caller, &stream)) return call.result(e);
  } else {
    const int device = fromDevice ? from.device : (toDevice ? to.device : currentDevice());
    stream = runtime->devices[device]->defaultStream;
  }
  // Waiting is needed for synchronous copies and for device->host copies into
  // pageable memory, whose destination the caller may read at once.
  const bool wait = !async || (kind == orMemcpyDeviceToHost && to.type == orMemoryTypeUnregistered) ||
                    (kind == orMemcpyHostToHost && to.type == orMemoryTypeUnregistered);
  if (wait) {
    if (orError_t e = beforeBlocking(caller)) return call.result(stream->device(), e);
  }

  Task task;
  task.kind = TaskKind::Memcpy;
  task.isAsync = async;
  task.copy = {dst,           src, count, from.device, to.device, activityCopyKind(kind, from, to), memoryKind(from),
               memoryKind(to)};
  // A pageable source may change once we return: copy it now.
  if (async && from.type == orMemoryTypeUnregistered) {
    task.staging.reset(new uint8_t[count]);
    std::memcpy(task.staging.get(), src, count);
  }
  task.correlationId = call.correlationId();
  task.recordDevice = call.correlationId() != 0 && activity::active(OR_ACTIVITY_KIND_MEMCPY);
  const uint64_t sequence = stream->enqueue(std::move(task));
  orError_t result = orSuccess;
  if (wait) result = stream->waitFor(sequence) != orSuccess ? failShuttingDown(caller) : stream->takeError();
  return call.result(stream->device(), result);
}

orError_t memset(void* ptr, uint32_t pattern, uint32_t elementSize, size_t count, orStream_t streamHandle, bool async,
                 const char* caller) {
  if (count == 0) return orSuccess;
  if (ptr == nullptr) return fail(orErrorInvalidValue, "%s: pointer is NULL", caller);
  if (reinterpret_cast<uintptr_t>(ptr) % elementSize != 0) {
    return fail(orErrorInvalidValue, "%s: %p is not aligned to %u bytes", caller, ptr, elementSize);
  }
  const size_t bytes = count * elementSize;
  if (bytes / elementSize != count) return fail(orErrorInvalidValue, "%s: element count %zu overflows", caller, count);
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return error;
  activity::TracedCall call(async ? OR_API_MEMSET_ASYNC : OR_API_MEMSET, activity::Correlation::Always);
  const Endpoint target = classify(*runtime, ptr);
  if (target.type != orMemoryTypeDevice) {
    return call.result(fail(orErrorInvalidValue, "%s: %p is not device memory", caller, ptr));
  }
  if (!fits(target, ptr, bytes)) {
    return call.result(target.device, fail(orErrorInvalidValue, "%s: setting %zu bytes at %p runs past its allocation",
                                           caller, bytes, ptr));
  }
  std::shared_ptr<Stream> stream;
  if (async) {
    if (orError_t e = resolveStream(*runtime, streamHandle, caller, &stream)) return call.result(e);
  } else {
    if (orError_t e = beforeBlocking(caller)) return call.result(target.device, e);
    stream = runtime->devices[target.device]->defaultStream;
  }
  Task task;
  task.kind = TaskKind::Memset;
  task.memset = {ptr, bytes, pattern, elementSize};
  task.isAsync = async;
  task.correlationId = call.correlationId();
  task.recordDevice = call.correlationId() != 0 && activity::active(OR_ACTIVITY_KIND_MEMSET);
  const uint64_t sequence = stream->enqueue(std::move(task));
  orError_t result = orSuccess;
  if (!async) result = stream->waitFor(sequence) != orSuccess ? failShuttingDown(caller) : stream->takeError();
  return call.result(stream->device(), result);
}

// A collective's own staging copy: checked as orMemcpyAsync checks, run here,
// recorded on the caller's copy stream with the collective's correlation.
orError_t collectiveCopy(void* dst, const void* src, size_t count, orMemcpyKind kind, orStream_t copyStream) {
  constexpr const char* kCaller = "orCollectiveCopy";
  const RunningCollective* collective = threadContext().collective;
  if (collective == nullptr) {
    return fail(orErrorInvalidValue, "%s: called outside a collective's function (see orLaunchCollective)", kCaller);
  }
  if (kind != orMemcpyDeviceToHost && kind != orMemcpyHostToDevice) {
    return fail(orErrorInvalidValue, "%s: copy kind %d is not device-to-host or host-to-device", kCaller,
                static_cast<int>(kind));
  }
  if (count == 0) return orSuccess;
  if (dst == nullptr || src == nullptr)
    return fail(orErrorInvalidValue, "%s: %s pointer is NULL", kCaller, dst ? "source" : "destination");
  if (copyStream == nullptr) return fail(orErrorInvalidValue, "%s: the copy stream is NULL", kCaller);
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return error;
  std::shared_ptr<Stream> stream;
  if (orError_t e = resolveStream(*runtime, copyStream, kCaller, &stream)) return e;
  if (stream.get() == collective->stream) {
    return fail(orErrorInvalidValue, "%s: the copy stream is the collective's own stream (its copies would nest in it)",
                kCaller);
  }
  if (stream->device() != collective->device) {
    return fail(orErrorInvalidResourceHandle, "%s: the copy stream is on device %d, the collective on device %d",
                kCaller, stream->device(), collective->device);
  }
  const Endpoint from = classify(*runtime, src);
  const Endpoint to = classify(*runtime, dst);
  if (orError_t e = checkDirection(kind, from, to, dst, src, count, kCaller)) return e;
  const int deviceSide = kind == orMemcpyDeviceToHost ? from.device : to.device;
  if (deviceSide != collective->device) {
    return fail(orErrorInvalidValue, "%s: the device memory is on device %d, the collective runs on device %d", kCaller,
                deviceSide, collective->device);
  }
  const bool recorded = collective->call->recordCopies;
  const uint64_t start = recorded ? collective->clock->now() : 0;
  std::memcpy(dst, src, count);
  if (!recorded) return orSuccess;
  // Each copy is device work of its own (one record per correlation id, as
  // every consumer expects), joined to the collective's framework op by the
  // launching thread's external ids.
  Task task;
  task.kind = TaskKind::Memcpy;
  task.copy = {dst,           src, count, from.device, to.device, activityCopyKind(kind, from, to), memoryKind(from),
               memoryKind(to)};
  task.correlationId = activity::nextCorrelationId(threadContext());
  activity::recordExternalIds(collective->call->externalIds, task.correlationId, collective->device);
  activity::recordMemcpy(task, *stream, start, collective->clock->now());
  return orSuccess;
}

}  // namespace

extern "C" {

orError_t orCollectiveCopy(void* dst, const void* src, size_t count, orMemcpyKind kind, orStream_t copyStream) {
  return guarded([&] { return collectiveCopy(dst, src, count, kind, copyStream); });
}

orError_t orMemcpy(void* dst, const void* src, size_t count, orMemcpyKind kind) {
  return guarded([&] { return copy(dst, src, count, kind, nullptr, false, "orMemcpy"); });
}

orError_t orMemcpyAsync(void* dst, const void* src, size_t count, orMemcpyKind kind, orStream_t stream) {
  return guarded([&] { return copy(dst, src, count, kind, stream, true, "orMemcpyAsync"); });
}

orError_t orMemset(void* devPtr, int value, size_t count) {
  return guarded([&] { return memset(devPtr, static_cast<uint8_t>(value), 1, count, nullptr, false, "orMemset"); });
}

orError_t orMemsetAsync(void* devPtr, int value, size_t count, orStream_t stream) {
  return guarded([&] { return memset(devPtr, static_cast<uint8_t>(value), 1, count, stream, true, "orMemsetAsync"); });
}

orError_t orMemsetD16Async(void* devPtr, uint16_t value, size_t count, orStream_t stream) {
  return guarded([&] { return memset(devPtr, value, 2, count, stream, true, "orMemsetD16Async"); });
}

orError_t orMemsetD32Async(void* devPtr, uint32_t value, size_t count, orStream_t stream) {
  return guarded([&] { return memset(devPtr, value, 4, count, stream, true, "orMemsetD32Async"); });
}

}  // extern "C"
