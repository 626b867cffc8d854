// orLaunchCollective: a launch whose device record is COMMUNICATION.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>

#include "activity/recorder.h"
#include "collective.h"
#include "error.h"
#include "runtime_state.h"
#include "stream.h"
#include "task.h"
#include "thread_context.h"

namespace openreg {
namespace {

const char* internOrEmpty(const char* text) { return activity::internName(text != nullptr ? text : ""); }

// Runs the caller's transfer; returns its status and fills message on failure.
int invokeTransfer(const CollectiveCall& call, char* message, size_t capacity) {
  try {
    return call.func(call.userData, message, capacity);
  } catch (const std::exception& e) {
    std::snprintf(message, capacity, "collective threw: %s", e.what());
  } catch (...) {
    std::snprintf(message, capacity, "collective threw an unknown exception");
  }
  return -1;
}

void writeCommunicationRecord(const CollectiveCall& call, const Stream& stream, const Task& task, int device,
                              int result, uint64_t start, uint64_t end) {
  orActivityCommunication record{};
  record.device = device;
  record.status = result == 0 ? orSuccess : orErrorLaunchFailure;
  record.streamId = stream.id();
  record.correlationId = task.correlationId;
  record.start = start;
  record.end = end;
  record.name = call.name;
  record.collective = call.collective;
  record.dataType = call.dataType;
  record.groupName = call.groupName;
  record.count = call.count;
  record.bytes = call.bytes;
  record.sequence = call.sequence;
  record.groupSize = call.groupSize;
  record.rank = call.rank;
  record.peer = call.peer;
  activity::writeRecord(record, OR_ACTIVITY_KIND_COMMUNICATION, device);
}

orError_t launchCollective(const orCollectiveConfig& config, orStream_t streamHandle) {
  if (config.name == nullptr) return fail(orErrorInvalidValue, "orLaunchCollective: name is NULL");
  if (config.func == nullptr) {
    return fail(orErrorInvalidValue, "orLaunchCollective: collective '%s' has a NULL function", config.name);
  }
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return error;
  activity::TracedCall traced(OR_API_LAUNCH_COLLECTIVE, activity::Correlation::Always);
  std::shared_ptr<Stream> stream;
  if (orError_t e = resolveStream(*runtime, streamHandle, "orLaunchCollective", &stream)) return traced.result(e);
  auto call = std::make_unique<CollectiveCall>(
      CollectiveCall{activity::internName(config.name),
                     internOrEmpty(config.collective),
                     internOrEmpty(config.dataType),
                     internOrEmpty(config.groupName),
                     config.count,
                     config.bytes,
                     config.sequence,
                     config.groupSize,
                     config.rank,
                     config.peer,
                     config.func,
                     config.userData,
                     config.userDataDestroy,
                     traced.correlationId() != 0 && activity::active(OR_ACTIVITY_KIND_MEMCPY),
                     {}});
  if (call->recordCopies) activity::currentExternalIds(call->externalIds);
  Task task;
  task.kind = TaskKind::Collective;
  task.kernel = {call->name, nullptr, call.release(), nullptr, {1, 1, 1}, {1, 1, 1}, 0};
  task.correlationId = traced.correlationId();
  task.recordDevice = traced.correlationId() != 0 && activity::active(OR_ACTIVITY_KIND_COMMUNICATION);
  stream->enqueue(std::move(task));
  return traced.result(stream->device(), orSuccess);
}

}  // namespace

void dropCollective(Task& task) {
  std::unique_ptr<CollectiveCall> call(static_cast<CollectiveCall*>(task.kernel.userData));
  task.kernel.userData = nullptr;
  if (call->userDataDestroy == nullptr) return;
  try {
    call->userDataDestroy(call->userData);
  } catch (...) {}
}

void runCollective(Stream& stream, Task& task, int device, const DeviceClockModel& clock) {
  std::unique_ptr<CollectiveCall> call(static_cast<CollectiveCall*>(task.kernel.userData));
  task.kernel.userData = nullptr;
  const uint64_t start = task.recordDevice ? clock.now() : 0;
  char message[512];
  message[0] = '\0';
  const RunningCollective running{&stream, device, call.get(), &clock};
  ThreadContext& context = threadContext();
  context.collective = &running;
  const int result = invokeTransfer(*call, message, sizeof(message));
  context.collective = nullptr;
  const uint64_t end = task.recordDevice ? clock.now() : 0;
  if (call->userDataDestroy != nullptr) {
    try {
      call->userDataDestroy(call->userData);
    } catch (...) {}
  }
  if (result != 0) {
    message[sizeof(message) - 1] = '\0';
    char text[768];
    std::snprintf(text, sizeof(text), "collective '%s' failed on device %d stream %llu: %s", call->name, device,
                  static_cast<unsigned long long>(stream.id()), message[0] != '\0' ? message : "(no reason given)");
    stream.setError(orErrorLaunchFailure, text);
  }
  if (task.recordDevice) writeCommunicationRecord(*call, stream, task, device, result, start, end);
}

}  // namespace openreg

extern "C" {

orError_t orLaunchCollective(const orCollectiveConfig* config, orStream_t stream) {
  return openreg::guarded([&]() -> orError_t {
    if (config == nullptr) return openreg::fail(orErrorInvalidValue, "orLaunchCollective: config is NULL");
    orCollectiveConfig copy{};
    const size_t known = config->structSize < sizeof(copy) ? config->structSize : sizeof(copy);
    if (known < sizeof(copy)) {
      return openreg::fail(orErrorInvalidValue, "orLaunchCollective: structSize %u is too small", config->structSize);
    }
    std::memcpy(&copy, config, known);
    return openreg::launchCollective(copy, stream);
  });
}

}  // extern "C"
