// The device guard: how c10 and autograd switch devices, streams and events.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "backend/CachingAllocator.h"
#include "backend/Check.h"
#include "backend/Device.h"
#include "backend/Stream.h"

namespace openreg::backend {
namespace {

orEvent_t asEvent(void* event) { return static_cast<orEvent_t>(event); }

struct OpenRegGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kType, "openreg guard got a ", device.type(), " device");
    return makeDevice(backend::exchangeDevice(device.index()));
  }

  c10::Device getDevice() const override { return makeDevice(currentDevice()); }

  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kType, "openreg guard got a ", device.type(), " device");
    setCurrentDevice(device.index());
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override { orSetDevice(device.index()); }

  c10::Stream getStream(c10::Device device) const override { return currentStream(device.index()); }

  c10::Stream getDefaultStream(c10::Device device) const override { return defaultStream(device.index()); }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool isHighPriority) const override {
    return streamFromPool(device.index(), isHighPriority ? streamPriorityRange().second : 0);
  }

  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return streamFromPool(device.index(), priority);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override { return exchangeCurrentStream(stream); }

  c10::DeviceIndex deviceCount() const noexcept override { return backend::deviceCount(); }

  void* getStreamNativeHandle(const c10::Stream stream) const override {
    return static_cast<void*>(nativeStream(stream));
  }

  bool isStreamCapturing(const c10::Stream& /*stream*/) const override { return false; }

  // Events are created lazily at their first record, on the stream's device.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex deviceIndex,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(deviceIndex == -1 || deviceIndex == stream.device_index(), "openreg: event device ",
                static_cast<int>(deviceIndex), " does not match the recording stream's device ", stream.device());
    if (*event == nullptr) {
      DeviceScope scope(stream.device_index());
      orEvent_t created = nullptr;
      const unsigned flags = flag == c10::EventFlag::BACKEND_DEFAULT ? orEventDefault : orEventDisableTiming;
      OPENREG_CHECK(orEventCreateWithFlags(&created, flags));
      *event = created;
    }
    OPENREG_CHECK(orEventRecord(asEvent(*event), nativeStream(stream)));
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;
    OPENREG_CHECK(orStreamWaitEvent(nativeStream(stream), asEvent(event), 0));
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    const orError_t err = orEventQuery(asEvent(event));
    if (err == orErrorNotReady) return false;
    OPENREG_CHECK(err);
    return true;
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*deviceIndex*/) const noexcept override {
    if (event != nullptr) orEventDestroy(asEvent(event));
  }

  void synchronizeEvent(void* event) const override {
    if (event == nullptr) return;
    OPENREG_CHECK(orEventSynchronize(asEvent(event)));
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*deviceIndex*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "openreg: both events must be recorded before computing elapsed time");
    float ms = 0.0f;
    OPENREG_CHECK(orEventElapsedTime(&ms, asEvent(start), asEvent(end)));
    return static_cast<double>(ms);
  }

  bool queryStream(const c10::Stream& stream) const override {
    const orError_t err = orStreamQuery(nativeStream(stream));
    if (err == orErrorNotReady) return false;
    OPENREG_CHECK(err);
    return true;
  }

  void synchronizeStream(const c10::Stream& stream) const override { backend::synchronizeStream(stream); }

  void synchronizeDevice(const c10::DeviceIndex deviceIndex) const override {
    checkNotForkedChild();
    checkDeviceIndex(deviceIndex);
    OPENREG_CHECK(orDeviceSynchronizeIndex(deviceIndex));
  }

  // Autograd and Futures promise cross-stream safety through this call: the
  // default no-op would let the allocator reuse the memory too early.
  void recordDataPtrOnStream(const c10::DataPtr& dataPtr, const c10::Stream& stream) const override {
    deviceAllocator()->recordStream(dataPtr, stream);
  }

  c10::DeviceCapability getDeviceCapability(c10::Device /*device*/) const override {
    return c10::DeviceCapability();  // every scalar type: kernels run through ATen's CPU code
  }
};

}  // namespace
}  // namespace openreg::backend

C10_REGISTER_GUARD_IMPL(PrivateUse1, openreg::backend::OpenRegGuardImpl);
