// C++ conveniences over the C runtime API (header only).
#pragma once

#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "openreg/runtime.h"

namespace openreg {

// Launch shape recorded with a kernel; purely descriptive on this device.
// The work fields are orLaunchConfig's (workKnown bits, flops, bytes).
struct LaunchShape {
  orDim3 grid{1, 1, 1};
  orDim3 block{1, 1, 1};
  uint32_t sharedMemBytes = 0;
  uint32_t workKnown = 0;
  uint64_t flops = 0;
  uint64_t bytesRead = 0;
  uint64_t bytesWritten = 0;

  LaunchShape& withFlops(uint64_t count) {
    workKnown |= OR_KERNEL_WORK_FLOPS;
    flops = count;
    return *this;
  }
  LaunchShape& withBytes(uint64_t read, uint64_t written) {
    workKnown |= OR_KERNEL_WORK_BYTES;
    bytesRead = read;
    bytesWritten = written;
    return *this;
  }
};

namespace detail {
template <class F>
int invokeKernel(void* userData, char* message, size_t capacity) {
  auto* body = static_cast<F*>(userData);
  try {
    (*body)();
    return 0;
  } catch (const std::exception& e) {
    std::strncpy(message, e.what(), capacity - 1);
    message[capacity - 1] = '\0';
  } catch (...) {
    std::strncpy(message, "unknown C++ exception", capacity - 1);
    message[capacity - 1] = '\0';
  }
  return 1;
}

template <class F>
void destroyKernel(void* userData) {
  delete static_cast<F*>(userData);
}
}  // namespace detail

// Queues `body` (a callable taking no arguments) as a kernel named `name`.
// The callable is moved to the heap and destroyed on an executor thread after
// it ran. An exception thrown by it becomes the kernel's failure message.
template <class F>
orError_t launch(orStream_t stream, const char* name, F&& body, LaunchShape shape = {}) {
  using Body = std::decay_t<F>;
  Body* heapBody = new (std::nothrow) Body(std::forward<F>(body));
  if (heapBody == nullptr) return orErrorHostMemoryAllocation;
  orLaunchConfig config{};
  config.structSize = sizeof(orLaunchConfig);
  config.name = name;
  config.func = &detail::invokeKernel<Body>;
  config.userData = heapBody;
  config.userDataDestroy = &detail::destroyKernel<Body>;
  config.grid = shape.grid;
  config.block = shape.block;
  config.sharedMemBytes = shape.sharedMemBytes;
  orError_t err = orLaunchKernelEx(&config, stream);
  if (err != orSuccess) delete heapBody;  // the runtime took no ownership
  return err;
}

// A batch on `stream` for the scope (orStreamBeginBatch / orStreamEndBatch):
// the tasks queued meanwhile reach the executor with one wake-up. status()
// is the begin's result; where it failed, nothing is held and the destructor
// does nothing.
class StreamBatch {
 public:
  explicit StreamBatch(orStream_t stream) : stream_(stream), status_(orStreamBeginBatch(stream)) {}
  ~StreamBatch() {
    if (status_ == orSuccess) orStreamEndBatch(stream_);
  }
  StreamBatch(const StreamBatch&) = delete;
  StreamBatch& operator=(const StreamBatch&) = delete;

  orError_t status() const { return status_; }

 private:
  orStream_t stream_;
  orError_t status_;
};

// "orErrorInvalidValue: <detail>" for an error just returned on this thread.
inline std::string describe(orError_t err) {
  std::string text = orGetErrorName(err);
  const char* detail = orGetLastErrorMessage();
  if (detail != nullptr && detail[0] != '\0') {
    text += ": ";
    text += detail;
  } else {
    text += ": ";
    text += orGetErrorString(err);
  }
  return text;
}

}  // namespace openreg
