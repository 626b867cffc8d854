// Kernel and host-function launch.
#include <cstddef>
#include <cstring>

#include "activity/recorder.h"
#include "error.h"
#include "runtime_state.h"

using namespace openreg;

namespace {

orError_t launch(const orLaunchConfig& config, orStream_t streamHandle) {
  if (config.name == nullptr) return fail(orErrorInvalidValue, "orLaunchKernel: kernel name is NULL");
  if (config.func == nullptr) {
    return fail(orErrorInvalidValue, "orLaunchKernel: kernel '%s' has a NULL function", config.name);
  }
  orError_t error;
  Runtime* runtime = acquireRuntime(&error);
  if (runtime == nullptr) return error;
  activity::TracedCall call(OR_API_LAUNCH_KERNEL, activity::Correlation::Always);
  std::shared_ptr<Stream> stream;
  if (orError_t e = resolveStream(*runtime, streamHandle, "orLaunchKernel", &stream)) return call.result(e);
  Task task;
  task.kind = TaskKind::Kernel;
  task.kernel = {activity::internName(config.name),
                 config.func,
                 config.userData,
                 config.userDataDestroy,
                 config.grid,
                 config.block,
                 config.sharedMemBytes,
                 config.annotation != nullptr ? activity::internName(config.annotation) : nullptr};
  task.correlationId = call.correlationId();
  task.recordDevice = call.correlationId() != 0 && activity::active(OR_ACTIVITY_KIND_KERNEL);
  task.recordMetrics = task.recordDevice && activity::active(OR_ACTIVITY_KIND_KERNEL_METRICS);
  if (task.recordMetrics) {
    task.workload = {config.workKnown & (OR_KERNEL_WORK_FLOPS | OR_KERNEL_WORK_BYTES), config.flops, config.bytesRead,
                     config.bytesWritten};
  }
  stream->enqueue(std::move(task));
  return call.result(stream->device(), orSuccess);
}

}  // namespace

extern "C" {

orError_t orLaunchKernel(orStream_t stream, const char* name, orKernelFunc func, void* userData) {
  return guarded([&] {
    orLaunchConfig config{};
    config.structSize = sizeof(config);
    config.name = name;
    config.func = func;
    config.userData = userData;
    config.grid = {1, 1, 1};
    config.block = {1, 1, 1};
    return launch(config, stream);
  });
}

orError_t orLaunchKernelEx(const orLaunchConfig* config, orStream_t stream) {
  return guarded([&]() -> orError_t {
    if (config == nullptr) return fail(orErrorInvalidValue, "orLaunchKernelEx: config is NULL");
    // Accept older, shorter configs: fields past structSize read as zero.
    orLaunchConfig copy{};
    const size_t known = config->structSize < sizeof(copy) ? config->structSize : sizeof(copy);
    if (known < offsetof(orLaunchConfig, grid)) {
      return fail(orErrorInvalidValue, "orLaunchKernelEx: structSize %u is too small", config->structSize);
    }
    std::memcpy(&copy, config, known);
    if (known < offsetof(orLaunchConfig, block)) copy.grid = {1, 1, 1};
    if (known < offsetof(orLaunchConfig, sharedMemBytes)) copy.block = {1, 1, 1};
    // (annotation and the work fields past an older structSize read as NULL
    // and 0: copy was zeroed.)
    return launch(copy, stream);
  });
}

orError_t orLaunchHostFunc(orStream_t streamHandle, orHostFunc func, void* userData) {
  return guarded([&]() -> orError_t {
    if (func == nullptr) return fail(orErrorInvalidValue, "orLaunchHostFunc: func is NULL");
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    activity::TracedCall call(OR_API_LAUNCH_HOST_FUNC, activity::Correlation::IfRuntimeTraced);
    std::shared_ptr<Stream> stream;
    if (orError_t e = resolveStream(*runtime, streamHandle, "orLaunchHostFunc", &stream)) return call.result(e);
    Task task;
    task.kind = TaskKind::HostFunc;
    task.hostFunc = {func, userData};
    stream->enqueue(std::move(task));
    return call.result(stream->device(), orSuccess);
  });
}

}  // extern "C"
