// Device enumeration and the calling thread's current device.
#pragma once

#include <c10/core/Device.h>

namespace openreg::backend {

// Upper bound on devices the runtime can expose (OPENREG_DEVICE_COUNT <= 16).
constexpr int kMaxDevices = 16;

// Number of devices; 0 when the runtime cannot start (its error is then
// reported by initRuntime()). Never throws.
c10::DeviceIndex deviceCount() noexcept;

// Starts the runtime if needed; throws a RuntimeError naming the cause (for
// example a malformed OPENREG_* variable) when it cannot.
void initRuntime();
// True once initRuntime() succeeded in this process.
bool runtimeInitialized() noexcept;

// A thread count from the environment variable `variable` (OPENREG_HOST_THREADS,
// OPENREG_KERNEL_THREADS): 0 when unset or empty, -1 when it is not a whole
// number from 1 to 1024. Reads the environment; never throws.
int threadCountSetting(const char* variable) noexcept;

// The runtime's executor threads do not survive fork(): a child of a process
// that had started the device (initRuntime) must not use it. True in such a
// child (CUDA's "bad fork"); async-signal-safe to set, cheap to read.
bool inForkedChild() noexcept;
// Throws a RuntimeError naming the cause (and the 'spawn' start method) in
// such a child.
void checkNotForkedChild();

// Throws a RuntimeError unless 0 <= index < deviceCount().
void checkDeviceIndex(c10::DeviceIndex index);

// The calling thread's current device (starts at 0, per thread).
c10::DeviceIndex currentDevice();
void setCurrentDevice(c10::DeviceIndex index);
// Sets the device and returns the previous one; no runtime call if unchanged.
c10::DeviceIndex exchangeDevice(c10::DeviceIndex index);

inline c10::Device makeDevice(c10::DeviceIndex index) { return c10::Device(c10::DeviceType::PrivateUse1, index); }

// Scoped device switch for code outside ATen's DeviceGuard machinery.
class DeviceScope {
 public:
  explicit DeviceScope(c10::DeviceIndex index) : previous_(exchangeDevice(index)) {}
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

}  // namespace openreg::backend
