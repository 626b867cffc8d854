// Legacy ProfilerStubs for torch.autograd.profiler.profile(use_device="openreg")
// in its fallback state (KINETO_PRIVATEUSE1_FALLBACK): torch records an event
// on the current stream at each op's entry and exit and asks elapsed() for
// the device time between them.
//
// Events go through c10's generic Event (the backend's device guard), so this
// file needs no runtime header: whatever the backend maps c10 events to is
// what is timed.
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <atomic>

#include "activity_api.h"

namespace openreg::profiler {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

constexpr auto kDeviceType = c10::DeviceType::PrivateUse1;

class OpenregProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  // torch calls this without a try/catch around it: failures must not escape.
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpuNs) const override {
    try {
      c10::impl::VirtualGuardImpl guard(kDeviceType);
      const c10::Device current = guard.getDevice();
      if (device != nullptr) {
        *device = current.index();
      }
      // BACKEND_DEFAULT: an event with timing, which elapsed() needs.
      auto* recorded = new c10::Event(kDeviceType, c10::EventFlag::BACKEND_DEFAULT);
      *event = ProfilerVoidEventStub(recorded, [](void* p) { delete static_cast<c10::Event*>(p); });
      if (cpuNs != nullptr) {
        *cpuNs = c10::getTime();
      }
      recorded->record(guard.getStream(current));
    } catch (const std::exception& e) {
      if (event != nullptr) {
        event->reset();
      }
      warnOnce(std::string("recording a device event failed: ") + e.what());
    }
  }

  // Microseconds between two recorded events, after both completed.
  float elapsed(const ProfilerVoidEventStub* event, const ProfilerVoidEventStub* event2) const override {
    if (event == nullptr || event2 == nullptr || !*event || !*event2) {
      return 0.0f;  // record() failed and already warned
    }
    const auto* start = static_cast<const c10::Event*>(event->get());
    const auto* end = static_cast<const c10::Event*>(event2->get());
    start->synchronize();
    end->synchronize();
    return static_cast<float>(start->elapsedTime(*end) * 1000.0);
  }

  void mark(const char* name) const override {
    const auto& api = ActivityApi::instance();
    if (api.available() && api.fn().markerInstant != nullptr && name != nullptr) {
      api.fn().markerInstant(name);
    }
  }

  void rangePush(const char* name) const override {
    const auto& api = ActivityApi::instance();
    if (api.available() && api.fn().markerRangePush != nullptr && name != nullptr) {
      api.fn().markerRangePush(name);
    }
  }

  void rangePop() const override {
    const auto& api = ActivityApi::instance();
    if (api.available() && api.fn().markerRangePop != nullptr) {
      api.fn().markerRangePop();
    }
  }

  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    c10::impl::VirtualGuardImpl guard(kDeviceType);
    const c10::Device original = guard.getDevice();
    const auto count = static_cast<int>(guard.deviceCount());
    try {
      for (int d = 0; d < count; ++d) {
        guard.setDevice(c10::Device(kDeviceType, static_cast<c10::DeviceIndex>(d)));
        op(d);
      }
    } catch (...) {
      guard.uncheckedSetDevice(original);
      throw;
    }
    guard.setDevice(original);
  }

  void synchronize() const override {
    c10::impl::VirtualGuardImpl guard(kDeviceType);
    const auto count = static_cast<int>(guard.deviceCount());
    for (int d = 0; d < count; ++d) {
      guard.synchronizeDevice(static_cast<c10::DeviceIndex>(d));
    }
  }

 private:
  static void warnOnce(const std::string& message) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      TORCH_WARN("openreg profiler (legacy path): ", message, "; affected ops show no device time");
    }
  }
};

struct RegisterStubs {
  RegisterStubs() {
    static OpenregProfilerStubs stubs;  // must outlive every profiler
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
RegisterStubs registerStubs;

}  // namespace
}  // namespace openreg::profiler
