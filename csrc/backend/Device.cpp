#include "backend/Device.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <string>

#include "backend/Check.h"

namespace openreg::backend {

namespace {

struct RuntimeStatus {
  int count = 0;
  orError_t error = orSuccess;
  std::string message;
};

// The runtime reads its configuration once; remember the outcome so that
// deviceCount() stays cheap and noexcept.
const RuntimeStatus& runtimeStatus() {
  static const RuntimeStatus kStatus = [] {
    RuntimeStatus s;
    s.error = orGetDeviceCount(&s.count);
    if (s.error != orSuccess) {
      s.message = openreg::describe(s.error);
      s.count = 0;
    }
    return s;
  }();
  return kStatus;
}

std::atomic<bool> gInitialized{false};
std::atomic<bool> gForkedChild{false};

void markForkedChild() {
  if (gInitialized.load(std::memory_order_relaxed)) gForkedChild.store(true, std::memory_order_relaxed);
}

const int kAtforkRegistered = pthread_atfork(nullptr, nullptr, &markForkedChild);

}  // namespace

c10::DeviceIndex deviceCount() noexcept {
  try {
    return static_cast<c10::DeviceIndex>(runtimeStatus().count);
  } catch (...) {
    return 0;
  }
}

void checkNotForkedChild() {
  TORCH_CHECK(!gForkedChild.load(std::memory_order_relaxed),
              "openreg: the device cannot be used in a forked child of a process that had started it; use the ",
              "'spawn' start method for multiprocessing");
}

void initRuntime() {
  checkNotForkedChild();
  const RuntimeStatus& status = runtimeStatus();
  TORCH_CHECK(status.error == orSuccess, "openreg: the device runtime failed to start: ", status.message);
  gInitialized.store(true, std::memory_order_release);
}

bool runtimeInitialized() noexcept { return gInitialized.load(std::memory_order_acquire); }

void checkDeviceIndex(c10::DeviceIndex index) {
  const auto count = deviceCount();
  TORCH_CHECK(index >= 0 && index < count, "openreg: invalid device index ", static_cast<int>(index), " (there ",
              count == 1 ? "is " : "are ", static_cast<int>(count), " openreg device", count == 1 ? "" : "s", ")");
}

c10::DeviceIndex currentDevice() {
  int device = 0;
  OPENREG_CHECK(orGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

void setCurrentDevice(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  OPENREG_CHECK(orSetDevice(index));
}

c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) {
  const auto previous = currentDevice();
  if (index != previous) setCurrentDevice(index);
  return previous;
}

DeviceScope::~DeviceScope() {
  // Best effort: a destructor must not throw, and the index was valid before.
  orSetDevice(previous_);
}

}  // namespace openreg::backend
