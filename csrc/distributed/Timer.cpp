// DDP's runtime statistics on openreg (avg forward / backward compute and
// communication times in DDP's logging data): a c10d::Timer that records
// device events, as CUDA's does. Registered when this module loads, which is
// before any DDP can exist (it needs a process group).
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace openreg::distributed {
namespace {

constexpr int64_t kNanosPerMilli = 1000000;

class OpenRegTimer final : public c10d::Timer {
 public:
  explicit OpenRegTimer(c10::Device device) : device_(device) {}

  void record(Event event) override {
    Timer::record(event);
    c10::DeviceGuard guard(device_);
    c10::impl::VirtualGuardImpl impl(device_.type());
    Slot& slot = slotOf(event);
    slot.event.record(impl.getStream(device_));
    slot.recorded = true;
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    Slot& first = slotOf(start);
    Slot& last = slotOf(end);
    // Nothing to measure when an event was not recorded (e.g. no gradient to sync).
    if (!first.recorded || !last.recorded) return std::nullopt;
    c10::DeviceGuard guard(device_);
    first.event.synchronize();
    last.event.synchronize();
    const double ms = first.event.elapsedTime(last.event);
    if (ms < 0) return std::nullopt;
    return static_cast<int64_t>(ms * kNanosPerMilli);
  }

 private:
  struct Slot {
    c10::Event event{c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT};
    bool recorded = false;
  };

  Slot& slotOf(Event event) {
    switch (event) {
      case Event::kForwardStart:
        return forwardStart_;
      case Event::kBackwardComputeStart:
        return backwardComputeStart_;
      case Event::kBackwardComputeEnd:
        return backwardComputeEnd_;
      case Event::kBackwardCommStart:
        return backwardCommStart_;
      case Event::kBackwardCommEnd:
        return backwardCommEnd_;
    }
    TORCH_INTERNAL_ASSERT(false, "unknown DDP timer event");
  }

  const c10::Device device_;
  Slot forwardStart_;
  Slot backwardComputeStart_;
  Slot backwardComputeEnd_;
  Slot backwardCommStart_;
  Slot backwardCommEnd_;
};

}  // namespace
}  // namespace openreg::distributed

namespace c10d {  // where the registry's registerer type lives
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, openreg::distributed::OpenRegTimer)
}  // namespace c10d
