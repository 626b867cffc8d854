// Copy and memset entry points.
#include <cstring>
#include <memory>

#include "activity/recorder.h"
#include "error.h"
#include "runtime_state.h"

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
    case orMemoryTypeDevice: return OR_ACTIVITY_MEMORY_KIND_DEVICE;
    case orMemoryTypeHost: return OR_ACTIVITY_MEMORY_KIND_PINNED;
    default: return OR_ACTIVITY_MEMORY_KIND_PAGEABLE;
  }
}

const char* kindName(orMemcpyKind kind) {
  switch (kind) {
    case orMemcpyHostToHost: return "host-to-host";
    case orMemcpyHostToDevice: return "host-to-device";
    case orMemcpyDeviceToHost: return "device-to-host";
    case orMemcpyDeviceToDevice: return "device-to-device";
    default: return "default";
  }
}

orError_t copy(void* dst, const void* src, size_t count, orMemcpyKind kind, orStream_t streamHandle, bool async,
               const char* caller) {
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return error;
  if (kind < orMemcpyHostToHost || kind > orMemcpyDefault) {
    return fail(orErrorInvalidValue, "%s: unknown copy kind %d", caller, static_cast<int>(kind));
  }
  if (count == 0) return orSuccess;
  if (dst == nullptr || src == nullptr) return fail(orErrorInvalidValue, "%s: %s pointer is NULL", caller, dst ? "source" : "destination");

  const Endpoint from = classify(*runtime, src);
  const Endpoint to = classify(*runtime, dst);
  const bool fromDevice = from.type == orMemoryTypeDevice;
  const bool toDevice = to.type == orMemoryTypeDevice;
  if (kind == orMemcpyDefault) {
    kind = fromDevice ? (toDevice ? orMemcpyDeviceToDevice : orMemcpyDeviceToHost)
                      : (toDevice ? orMemcpyHostToDevice : orMemcpyHostToHost);
  }
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

  if (kind == orMemcpyHostToHost && !async) {
    std::memmove(dst, src, count);
    return orSuccess;
  }

  std::shared_ptr<Stream> stream;
  if (async) {
    if (orError_t e = resolveStream(*runtime, streamHandle, caller, &stream)) return e;
  } else {
    const int device = fromDevice ? from.device : (toDevice ? to.device : currentDevice());
    stream = runtime->devices[device]->defaultStream;
  }
  // Waiting is needed for synchronous copies and for device->host copies into
  // pageable memory, whose destination the caller may read at once.
  const bool wait = !async || (kind == orMemcpyDeviceToHost && to.type == orMemoryTypeUnregistered) ||
                    (kind == orMemcpyHostToHost && to.type == orMemoryTypeUnregistered);
  if (wait) {
    if (orError_t e = refuseOnExecutor(caller)) return e;
  }

  activity::TracedCall call(true);
  Task task;
  task.kind = TaskKind::Memcpy;
  task.isAsync = async;
  task.copy = {dst, src, count, from.device, to.device, 0, memoryKind(from), memoryKind(to)};
  switch (kind) {
    case orMemcpyHostToDevice: task.copy.copyKind = OR_ACTIVITY_MEMCPY_HTOD; break;
    case orMemcpyDeviceToHost: task.copy.copyKind = OR_ACTIVITY_MEMCPY_DTOH; break;
    case orMemcpyDeviceToDevice:
      task.copy.copyKind = from.device == to.device ? OR_ACTIVITY_MEMCPY_DTOD : OR_ACTIVITY_MEMCPY_PTOP;
      break;
    default: task.copy.copyKind = OR_ACTIVITY_MEMCPY_HTOH; break;
  }
  // A pageable source may change once we return: copy it now.
  if (async && from.type == orMemoryTypeUnregistered) {
    task.staging.reset(new uint8_t[count]);
    std::memcpy(task.staging.get(), src, count);
  }
  task.correlationId = call.correlationId();
  task.recordDevice = call.correlationId() != 0 && activity::active(OR_ACTIVITY_KIND_MEMCPY);
  const uint64_t sequence = stream->enqueue(std::move(task));
  orError_t result = orSuccess;
  if (wait) {
    stream->waitFor(sequence);
    result = stream->takeError();
  }
  call.finish(async ? OR_API_MEMCPY_ASYNC : OR_API_MEMCPY, stream->device(), result);
  return result;
}

orError_t memset(void* ptr, uint32_t pattern, uint32_t elementSize, size_t count, orStream_t streamHandle, bool async,
                 const char* caller) {
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return error;
  if (count == 0) return orSuccess;
  if (ptr == nullptr) return fail(orErrorInvalidValue, "%s: pointer is NULL", caller);
  if (reinterpret_cast<uintptr_t>(ptr) % elementSize != 0) {
    return fail(orErrorInvalidValue, "%s: %p is not aligned to %u bytes", caller, ptr, elementSize);
  }
  const size_t bytes = count * elementSize;
  if (bytes / elementSize != count) return fail(orErrorInvalidValue, "%s: element count %zu overflows", caller, count);
  const Endpoint target = classify(*runtime, ptr);
  if (target.type != orMemoryTypeDevice) {
    return fail(orErrorInvalidValue, "%s: %p is not device memory", caller, ptr);
  }
  if (!fits(target, ptr, bytes)) {
    return fail(orErrorInvalidValue, "%s: setting %zu bytes at %p runs past its allocation", caller, bytes, ptr);
  }
  std::shared_ptr<Stream> stream;
  if (async) {
    if (orError_t e = resolveStream(*runtime, streamHandle, caller, &stream)) return e;
  } else {
    if (orError_t e = refuseOnExecutor(caller)) return e;
    stream = runtime->devices[target.device]->defaultStream;
  }
  activity::TracedCall call(true);
  Task task;
  task.kind = TaskKind::Memset;
  task.memset = {ptr, bytes, pattern, elementSize};
  task.isAsync = async;
  task.correlationId = call.correlationId();
  task.recordDevice = call.correlationId() != 0 && activity::active(OR_ACTIVITY_KIND_MEMSET);
  const uint64_t sequence = stream->enqueue(std::move(task));
  orError_t result = orSuccess;
  if (!async) {
    stream->waitFor(sequence);
    result = stream->takeError();
  }
  call.finish(async ? OR_API_MEMSET_ASYNC : OR_API_MEMSET, stream->device(), result);
  return result;
}

}  // namespace

extern "C" {

orError_t orMemcpy(void* dst, const void* src, size_t count, orMemcpyKind kind) {
  return guarded([&] { return copy(dst, src, count, kind, nullptr, false, "orMemcpy"); });
}

orError_t orMemcpyAsync(void* dst, const void* src, size_t count, orMemcpyKind kind, orStream_t stream) {
  return guarded([&] { return copy(dst, src, count, kind, stream, true, "orMemcpyAsync"); });
}

orError_t orMemset(void* devPtr, int value, size_t count) {
  return guarded([&] {
    return memset(devPtr, static_cast<uint8_t>(value), 1, count, nullptr, false, "orMemset");
  });
}

orError_t orMemsetAsync(void* devPtr, int value, size_t count, orStream_t stream) {
  return guarded([&] {
    return memset(devPtr, static_cast<uint8_t>(value), 1, count, stream, true, "orMemsetAsync");
  });
}

orError_t orMemsetD16Async(void* devPtr, uint16_t value, size_t count, orStream_t stream) {
  return guarded([&] { return memset(devPtr, value, 2, count, stream, true, "orMemsetD16Async"); });
}

orError_t orMemsetD32Async(void* devPtr, uint32_t value, size_t count, orStream_t stream) {
  return guarded([&] { return memset(devPtr, value, 4, count, stream, true, "orMemsetD32Async"); });
}

}  // extern "C"
