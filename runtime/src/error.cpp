#include "error.h"

#include "thread_context.h"

#include <cstdio>

namespace openreg {
orError_t failWithMessage(orError_t code, std::string message) {
  threadContext().lastError = std::move(message);
  return code;
}

orError_t fail(orError_t code, const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return failWithMessage(code, buffer);
}

orError_t failShuttingDown(const char* caller) {
  return fail(orErrorShuttingDown,
              "%s: openreg is shutting down (process exit): the work this call waits for was dropped or is still "
              "running past the exit drain timeout",
              caller);
}

}  // namespace openreg

extern "C" {

const char* orGetErrorName(orError_t error) {
  switch (error) {
    case orSuccess:
      return "orSuccess";
    case orErrorInvalidValue:
      return "orErrorInvalidValue";
    case orErrorMemoryAllocation:
      return "orErrorMemoryAllocation";
    case orErrorInitializationError:
      return "orErrorInitializationError";
    case orErrorInvalidDevice:
      return "orErrorInvalidDevice";
    case orErrorInvalidDevicePointer:
      return "orErrorInvalidDevicePointer";
    case orErrorInvalidHostPointer:
      return "orErrorInvalidHostPointer";
    case orErrorInvalidResourceHandle:
      return "orErrorInvalidResourceHandle";
    case orErrorNotReady:
      return "orErrorNotReady";
    case orErrorLaunchFailure:
      return "orErrorLaunchFailure";
    case orErrorNotSupported:
      return "orErrorNotSupported";
    case orErrorTimeout:
      return "orErrorTimeout";
    case orErrorMaxLimitReached:
      return "orErrorMaxLimitReached";
    case orErrorHostMemoryAllocation:
      return "orErrorHostMemoryAllocation";
    case orErrorNotInitialized:
      return "orErrorNotInitialized";
    case orErrorShuttingDown:
      return "orErrorShuttingDown";
    case orErrorUnknown:
      return "orErrorUnknown";
    default:
      break;
  }
  return "orErrorUnrecognized";
}

const char* orGetErrorString(orError_t error) {
  switch (error) {
    case orSuccess:
      return "no error";
    case orErrorInvalidValue:
      return "invalid argument";
    case orErrorMemoryAllocation:
      return "out of device memory";
    case orErrorInitializationError:
      return "runtime initialization failed (check OPENREG_* environment variables)";
    case orErrorInvalidDevice:
      return "invalid device index";
    case orErrorInvalidDevicePointer:
      return "not a live device allocation";
    case orErrorInvalidHostPointer:
      return "not a live pinned host allocation";
    case orErrorInvalidResourceHandle:
      return "invalid stream or event handle";
    case orErrorNotReady:
      return "work not completed yet";
    case orErrorLaunchFailure:
      return "a kernel failed";
    case orErrorNotSupported:
      return "operation not supported";
    case orErrorTimeout:
      return "timed out";
    case orErrorMaxLimitReached:
      return "no more records";
    case orErrorHostMemoryAllocation:
      return "out of host memory";
    case orErrorNotInitialized:
      return "required initialization missing";
    case orErrorShuttingDown:
      return "the runtime is shutting down (process exit) and dropped the work waited for";
    case orErrorUnknown:
      return "unknown error";
    default:
      break;
  }
  return "unrecognized error code";
}

const char* orGetLastErrorMessage(void) { return openreg::threadContext().lastError.c_str(); }

void orClearLastError(void) { openreg::threadContext().lastError.clear(); }

orError_t orRuntimeGetVersion(int* version) {
  if (version == nullptr) return openreg::fail(orErrorInvalidValue, "orRuntimeGetVersion: version is NULL");
  *version = OPENREG_RUNTIME_VERSION;
  return orSuccess;
}

}  // extern "C"
