// Event entry points.
#include "activity/recorder.h"
#include "clock.h"
#include "error.h"
#include "runtime_state.h"

using namespace openreg;

namespace {

orError_t findEvent(Runtime& runtime, orEvent_t handle, const char* caller, std::shared_ptr<Event>* event) {
  *event = runtime.events.find(reinterpret_cast<uint64_t>(handle));
  if (!*event) {
    return fail(orErrorInvalidResourceHandle, "%s: event handle %p is not a live event (destroyed or never created)",
                caller, static_cast<void*>(handle));
  }
  return orSuccess;
}

}  // namespace

extern "C" {

orError_t orEventCreateWithFlags(orEvent_t* event, unsigned int flags) {
  return guarded([&]() -> orError_t {
    if (event == nullptr) return fail(orErrorInvalidValue, "orEventCreate: event is NULL");
    if ((flags & ~static_cast<unsigned>(orEventDisableTiming)) != 0) {
      return fail(orErrorInvalidValue, "orEventCreateWithFlags: unknown flags 0x%x", flags);
    }
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    auto created = std::make_shared<Event>(currentDevice(), runtime->nextEventId.fetch_add(1),
                                           (flags & orEventDisableTiming) == 0);
    *event = reinterpret_cast<orEvent_t>(runtime->events.insert(std::move(created)));
    return orSuccess;
  });
}

orError_t orEventCreate(orEvent_t* event) { return orEventCreateWithFlags(event, orEventDefault); }

orError_t orEventDestroy(orEvent_t event) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    // Pending records and waits keep their own reference.
    if (!runtime->events.remove(reinterpret_cast<uint64_t>(event))) {
      return fail(orErrorInvalidResourceHandle, "orEventDestroy: event handle %p is not a live event (double destroy?)",
                  static_cast<void*>(event));
    }
    return orSuccess;
  });
}

orError_t orEventRecord(orEvent_t event, orStream_t stream) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    activity::TracedCall call(OR_API_EVENT_RECORD, activity::Correlation::IfRuntimeTraced);
    std::shared_ptr<Event> e;
    if (orError_t err = findEvent(*runtime, event, "orEventRecord", &e)) return call.result(err);
    std::shared_ptr<Stream> s;
    if (orError_t err = resolveStream(*runtime, stream, "orEventRecord", &s)) return call.result(err);
    if (s->device() != e->device()) {
      return call.result(s->device(), fail(orErrorInvalidResourceHandle,
                                           "orEventRecord: event was created on device %d but the stream belongs "
                                           "to device %d",
                                           e->device(), s->device()));
    }
    Task task;
    task.kind = TaskKind::EventRecord;
    task.wait = {e->beginRecord({call.correlationId(), s->id()}), 0, {}};
    task.event = std::move(e);
    s->enqueue(std::move(task));
    return call.result(s->device(), orSuccess);
  });
}

orError_t orEventQuery(orEvent_t event) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    std::shared_ptr<Event> e;
    if (orError_t err = findEvent(*runtime, event, "orEventQuery", &e)) return err;
    return e->reached(e->currentTarget()) ? orSuccess : orErrorNotReady;
  });
}

orError_t orEventSynchronize(orEvent_t event) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    activity::TracedCall call(OR_API_EVENT_SYNCHRONIZE, activity::Correlation::Always);
    std::shared_ptr<Event> e;
    if (orError_t err = findEvent(*runtime, event, "orEventSynchronize", &e)) return call.result(err);
    if (orError_t err = beforeBlocking("orEventSynchronize")) return call.result(e->device(), err);
    RecordOrigin origin;
    const uint64_t target = e->currentTarget(&origin);
    const orError_t result = e->waitFor(target) != orSuccess ? failShuttingDown("orEventSynchronize") : orSuccess;
    activity::recordHostSync(call, OR_ACTIVITY_SYNC_EVENT, e->device(), {.eventId = e->id(), .origin = origin});
    return call.result(e->device(), result);
  });
}

orError_t orEventElapsedTime(float* ms, orEvent_t start, orEvent_t end) {
  return guarded([&]() -> orError_t {
    if (ms == nullptr) return fail(orErrorInvalidValue, "orEventElapsedTime: ms is NULL");
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    std::shared_ptr<Event> first, second;
    if (orError_t err = findEvent(*runtime, start, "orEventElapsedTime", &first)) return err;
    if (orError_t err = findEvent(*runtime, end, "orEventElapsedTime", &second)) return err;
    if (!first->timing() || !second->timing()) {
      return fail(orErrorInvalidResourceHandle, "orEventElapsedTime: an event was created with orEventDisableTiming");
    }
    if (first->device() != second->device()) {
      return fail(orErrorInvalidValue, "orEventElapsedTime: events belong to devices %d and %d, whose clocks differ",
                  first->device(), second->device());
    }
    uint64_t t0 = 0, t1 = 0;
    bool recorded0 = false, recorded1 = false;
    const bool done0 = first->completedTimestamp(&t0, &recorded0);
    const bool done1 = second->completedTimestamp(&t1, &recorded1);
    if (!recorded0 || !recorded1) {
      return fail(orErrorInvalidResourceHandle, "orEventElapsedTime: the %s event was never recorded",
                  !recorded0 ? "start" : "end");
    }
    if (!done0 || !done1) return orErrorNotReady;
    *ms = static_cast<float>((static_cast<double>(t1) - static_cast<double>(t0)) / 1e6);
    return orSuccess;
  });
}

}  // extern "C"
