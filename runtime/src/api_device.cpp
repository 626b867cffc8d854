// Device entry points: count, current device, properties, synchronize.
#include <cstring>

#include "activity/recorder.h"
#include "clock.h"
#include "error.h"
#include "runtime_state.h"

using namespace openreg;

namespace {

// deadlineSteadyNs 0: no bound.
orError_t synchronizeDevice(Runtime& runtime, int device, const char* caller, uint64_t deadlineSteadyNs = 0) {
  activity::TracedCall call(OR_API_DEVICE_SYNCHRONIZE, activity::Correlation::Always);
  if (orError_t e = checkDevice(runtime, device, caller)) return call.result(e);
  if (orError_t e = beforeBlocking(caller)) return call.result(device, e);
  orError_t result = waitDeviceIdle(*runtime.devices[device], true, deadlineSteadyNs);
  if (result == orErrorShuttingDown) failShuttingDown(caller);
  activity::recordHostSync(call, OR_ACTIVITY_SYNC_DEVICE, device, {});
  return call.result(device, result);
}

}  // namespace

extern "C" {

orError_t orGetDeviceCount(int* count) {
  return guarded([&]() -> orError_t {
    if (count == nullptr) return fail(orErrorInvalidValue, "orGetDeviceCount: count is NULL");
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    *count = static_cast<int>(runtime->devices.size());
    return orSuccess;
  });
}

orError_t orSetDevice(int device) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (orError_t e = checkDevice(*runtime, device, "orSetDevice")) return e;
    setCurrentDevice(device);
    return orSuccess;
  });
}

orError_t orGetDevice(int* device) {
  return guarded([&]() -> orError_t {
    if (device == nullptr) return fail(orErrorInvalidValue, "orGetDevice: device is NULL");
    orError_t error;
    if (acquireRuntime(&error) == nullptr) return error;
    *device = currentDevice();
    return orSuccess;
  });
}

orError_t orGetDeviceProperties(orDeviceProp* prop, int device) {
  return guarded([&]() -> orError_t {
    if (prop == nullptr) return fail(orErrorInvalidValue, "orGetDeviceProperties: prop is NULL");
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    if (orError_t e = checkDevice(*runtime, device, "orGetDeviceProperties")) return e;
    *prop = runtime->devices[device]->properties;
    return orSuccess;
  });
}

orError_t orDeviceSynchronize(void) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    return synchronizeDevice(*runtime, currentDevice(), "orDeviceSynchronize");
  });
}

orError_t orDeviceSynchronizeIndex(int device) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    return synchronizeDevice(*runtime, device, "orDeviceSynchronizeIndex");
  });
}

orError_t orDeviceSynchronizeWithTimeout(int device, uint32_t timeoutMs) {
  return guarded([&]() -> orError_t {
    orError_t error;
    Runtime* runtime = acquireRuntime(&error);
    if (runtime == nullptr) return error;
    const uint64_t deadline = steadyNowNs() + uint64_t{timeoutMs} * 1000000ull;
    const orError_t result = synchronizeDevice(*runtime, device, "orDeviceSynchronizeWithTimeout", deadline);
    if (result == orErrorTimeout) {
      return fail(orErrorTimeout, "orDeviceSynchronizeWithTimeout: device %d still busy after %u ms", device,
                  timeoutMs);
    }
    return result;
  });
}

orError_t orDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  return guarded([&]() -> orError_t {
    orError_t error;
    if (acquireRuntime(&error) == nullptr) return error;
    if (leastPriority != nullptr) *leastPriority = 0;
    if (greatestPriority != nullptr) *greatestPriority = -1;
    return orSuccess;
  });
}

}  // extern "C"
