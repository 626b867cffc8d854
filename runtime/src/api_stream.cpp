// Stream entry points.
#include <algorithm>

#include "activity/recorder.h"
#include "clock.h"
#include "error.h"
#include "runtime_state.h"
#include "thread_context.h"

using namespace openreg;

namespace {

orError_t createStream(orStream_t* handle, int priority, const char* caller) {
  if (handle == nullptr) return fail(orErrorInvalidValue, "%s: stream is NULL", caller);
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return error;
  const int index = currentDevice();
  Device& device = *runtime->devices[index];
  priority = std::clamp(priority, device.properties.streamPriorityGreatest, device.properties.streamPriorityLeast);
  std::shared_ptr<Stream> stream;
  {
    std::lock_guard lock(device.streamsMutex);
    const uint64_t id = device.streamInfo.size();
    device.streamInfo.push_back({priority, false});
    stream = std::make_shared<Stream>(index, id, priority, false, device.executor.get());
    device.streams.push_back(stream);
  }
  *handle = reinterpret_cast<orStream_t>(runtime->streams.insert(stream));
  return orSuccess;
}

// The stream getters: resolve the handle, read one property.
template <class Value, class Read>
orError_t describeStream(orStream_t stream, Value* out, const char* caller, Read read) {
  return guarded([&]() -> orError_t {
    if (out == nullptr) return fail(orErrorInvalidValue, "%s: output pointer is NULL", caller);
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    std::shared_ptr<Stream> s;
    if (orError_t e = resolveStream(*runtime, stream, caller, &s)) return e;
    *out = static_cast<Value>(read(*s));
    return orSuccess;
  });
}

}  // namespace

extern "C" {

orError_t orStreamCreate(orStream_t* stream) {
  return guarded([&] { return createStream(stream, 0, "orStreamCreate"); });
}

orError_t orStreamCreateWithPriority(orStream_t* stream, unsigned int flags, int priority) {
  return guarded([&]() -> orError_t {
    if (flags != 0) return fail(orErrorInvalidValue, "orStreamCreateWithPriority: flags must be 0, got %u", flags);
    return createStream(stream, priority, "orStreamCreateWithPriority");
  });
}

orError_t orStreamDestroy(orStream_t stream) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (stream == nullptr)
      return fail(orErrorInvalidResourceHandle, "orStreamDestroy: the default stream cannot be destroyed");
    auto found = runtime->streams.find(reinterpret_cast<uint64_t>(stream));
    if (!found) {
      return fail(orErrorInvalidResourceHandle,
                  "orStreamDestroy: stream handle %p is not a live stream (destroyed or never created)",
                  static_cast<void*>(stream));
    }
    if (found->isDefault()) {
      return fail(orErrorInvalidResourceHandle, "orStreamDestroy: the default stream of device %d cannot be destroyed",
                  found->device());
    }
    if (!runtime->streams.remove(reinterpret_cast<uint64_t>(stream))) {
      return fail(orErrorInvalidResourceHandle, "orStreamDestroy: stream %p was destroyed concurrently",
                  static_cast<void*>(stream));
    }
    found->markDestroyed();  // queued work still runs; the device keeps a reference until then
    return orSuccess;
  });
}

orError_t orDeviceGetDefaultStream(int device, orStream_t* stream) {
  return guarded([&]() -> orError_t {
    if (stream == nullptr) return fail(orErrorInvalidValue, "orDeviceGetDefaultStream: stream is NULL");
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (orError_t e = checkDevice(*runtime, device, "orDeviceGetDefaultStream")) return e;
    *stream = runtime->devices[device]->defaultStreamHandle;
    return orSuccess;
  });
}

orError_t orStreamQuery(orStream_t stream) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    std::shared_ptr<Stream> s;
    if (orError_t e = resolveStream(*runtime, stream, "orStreamQuery", &s)) return e;
    if (orError_t e = s->takeError()) return e;
    return s->completedCount() >= s->enqueuedCount() ? orSuccess : orErrorNotReady;
  });
}

orError_t orStreamSynchronize(orStream_t stream) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    activity::TracedCall call(OR_API_STREAM_SYNCHRONIZE, activity::Correlation::Always);
    std::shared_ptr<Stream> s;
    if (orError_t e = resolveStream(*runtime, stream, "orStreamSynchronize", &s)) return call.result(e);
    if (orError_t e = beforeBlocking("orStreamSynchronize")) return call.result(s->device(), e);
    const orError_t waited = s->waitIdle();
    const orError_t result = waited != orSuccess ? failShuttingDown("orStreamSynchronize") : s->takeError();
    activity::recordHostSync(call, OR_ACTIVITY_SYNC_STREAM, s->device(), {.streamId = s->id()});
    return call.result(s->device(), result);
  });
}

orError_t orStreamWaitEvent(orStream_t stream, orEvent_t event, unsigned int flags) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (flags != 0) return fail(orErrorInvalidValue, "orStreamWaitEvent: flags must be 0, got %u", flags);
    activity::TracedCall call(OR_API_STREAM_WAIT_EVENT, activity::Correlation::Always);
    std::shared_ptr<Stream> s;
    if (orError_t e = resolveStream(*runtime, stream, "orStreamWaitEvent", &s)) return call.result(e);
    auto e = runtime->events.find(reinterpret_cast<uint64_t>(event));
    if (!e) {
      return call.result(s->device(),
                         fail(orErrorInvalidResourceHandle, "orStreamWaitEvent: event handle %p is not a live event",
                              static_cast<void*>(event)));
    }
    RecordOrigin origin;
    const uint64_t target = e->currentTarget(&origin);
    if (target == 0) return call.result(s->device(), orSuccess);  // never recorded: nothing to wait for (as CUDA)
    Task task;
    task.kind = TaskKind::WaitEvent;
    task.event = std::move(e);
    task.wait = {target, 0, origin};
    task.correlationId = call.correlationId();
    task.recordDevice = call.correlationId() != 0 && activity::active(OR_ACTIVITY_KIND_SYNCHRONIZATION);
    s->enqueue(std::move(task));
    return call.result(s->device(), orSuccess);
  });
}

orError_t orStreamBeginBatch(orStream_t stream) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    std::shared_ptr<Stream> s;
    if (orError_t e = resolveStream(*runtime, stream, "orStreamBeginBatch", &s)) return e;
    ThreadContext& context = threadContext();
    if (context.onExecutor) {
      return fail(orErrorNotSupported, "orStreamBeginBatch: not allowed inside a kernel or host function");
    }
    s->beginBatch();
    context.openBatches.push_back(std::move(s));
    return orSuccess;
  });
}

orError_t orStreamEndBatch(orStream_t stream) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    std::shared_ptr<Stream> s;
    if (orError_t e = resolveStream(*runtime, stream, "orStreamEndBatch", &s)) return e;
    auto& open = threadContext().openBatches;
    // The innermost batch of this stream (batches on different streams may
    // end in any order).
    auto found = std::find(open.rbegin(), open.rend(), s);
    if (found == open.rend()) {
      return fail(orErrorInvalidValue, "orStreamEndBatch: this thread has no open batch on device %d stream %llu",
                  s->device(), static_cast<unsigned long long>(s->id()));
    }
    open.erase(std::next(found).base());
    s->endBatch();
    return orSuccess;
  });
}

orError_t orStreamGetId(orStream_t stream, uint64_t* streamId) {
  return describeStream(stream, streamId, "orStreamGetId", [](const Stream& s) { return s.id(); });
}

orError_t orStreamGetDevice(orStream_t stream, int* device) {
  return describeStream(stream, device, "orStreamGetDevice", [](const Stream& s) { return s.device(); });
}

orError_t orStreamGetPriority(orStream_t stream, int* priority) {
  return describeStream(stream, priority, "orStreamGetPriority", [](const Stream& s) { return s.priority(); });
}

}  // extern "C"
