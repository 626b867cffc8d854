// PrivateUse1 hooks: what ATen asks of the backend outside kernels.
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <ATen/core/CachingHostAllocator.h>

#include <openreg/runtime.h>

#include "backend/Device.h"
#include "backend/Generator.h"
#include "backend/HostAllocator.h"
#include "backend/aten/Resize.h"

namespace openreg::backend {
namespace {

struct OpenRegHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }

  bool isAvailable() const override { return deviceCount() > 0; }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex deviceIndex) const override {
    return defaultGenerator(deviceIndex);
  }

  at::Generator getNewGenerator(c10::DeviceIndex deviceIndex) const override { return newGenerator(deviceIndex); }

  at::Device getDeviceFromPtr(void* data) const override {
    orPointerAttributes attributes{};
    const orError_t err = orPointerGetAttributes(&attributes, data);
    TORCH_CHECK(err == orSuccess && attributes.type == orMemoryTypeDevice, "openreg: pointer ", data,
                " is not openreg device memory");
    return makeDevice(static_cast<c10::DeviceIndex>(attributes.device));
  }

  bool isPinnedPtr(const void* data) const override { return isPinnedPointer(data); }

  at::Allocator* getPinnedMemoryAllocator() const override { return at::getHostAllocator(at::kPrivateUse1); }

  bool hasPrimaryContext(c10::DeviceIndex deviceIndex) const override {
    return runtimeInitialized() && deviceIndex >= 0 && deviceIndex < deviceCount();
  }

  void init() const override { initRuntime(); }

  c10::DeviceIndex deviceCount() const override { return backend::deviceCount(); }

  void setCurrentDevice(c10::DeviceIndex device) const override { backend::setCurrentDevice(device); }

  c10::DeviceIndex getCurrentDevice() const override { return currentDevice(); }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override { return backend::exchangeDevice(device); }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return backend::exchangeDevice(device);
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resizeStorageBytes(storage.unsafeGetStorageImpl(), newsize);
  }
};

// Registered once, when the library loads.
const bool kHooksRegistered = [] {
  at::RegisterPrivateUse1HooksInterface(new OpenRegHooks());
  return true;
}();

}  // namespace
}  // namespace openreg::backend
