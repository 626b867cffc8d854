// The Kineto plugin: registered with REGISTER_PRIVATEUSE1_PROFILER when
// libopenreg_profiler.so is loaded, forwarded to Kineto by torch the first
// time a trace runs in state KINETO_PRIVATEUSE1, or at once in daemon mode
// (ondemand.h). Kineto then keeps this one object for the life of the process
// and calls configure() for every trace.
#include <c10/util/ApproximateClock.h>
#include <c10/util/Exception.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <cstdlib>

#include "activity_api.h"
#include "ondemand.h"
#include "session.h"

namespace libkineto {
// Exported by libtorch_cpu, declared in a Kineto header the wheel does not
// ship: the map from c10::getApproximateTime() to epoch ns that torch
// installs for the trace it is ending (finalizeTrace), before Kineto stops
// the plugin's session. Kineto converts CUPTI's TSC timestamps with it.
std::function<int64_t(uint64_t)>& get_time_converter();  // NOLINT(readability-identifier-naming): Kineto's name
}  // namespace libkineto

namespace openreg::profiler {

// torch.profiler's own clock: c10::getApproximateTime() (the TSC on x86),
// mapped to epoch ns when a trace ends by a line through pairs measured at
// its two ends. Host records stamped with it and mapped with torch's own line
// nest exactly with torch's ops.
class TorchHostClock final : public HostClock {
 public:
  orActivityTimestampFn stamp() const override {
    return [] { return static_cast<uint64_t>(c10::getApproximateTime()); };
  }

  std::unique_ptr<Trace> begin() const override { return std::make_unique<Pairs>(); }

 private:
  class Pairs final : public Trace {
   public:
    std::function<int64_t(uint64_t)> finish(std::string* source) override {
      auto ownLine = converter_.makeConverter();  // through the pairs taken at begin() and now
      std::function<int64_t(uint64_t)> own = [ownLine](uint64_t t) {
        return static_cast<int64_t>(ownLine(static_cast<c10::approx_time_t>(t)));
      };
      // torch's line for this trace, if it set one: it maps now to now.
      std::function<int64_t(uint64_t)> torchLine = libkineto::get_time_converter();
      if (!torchLine || !near(torchLine, own, static_cast<uint64_t>(c10::getApproximateTime()))) {
        *source = "TSC, own line";  // a session Kineto drives without torch's profiler
        return own;
      }
      if (near(torchLine, own, beginStamp_)) {
        *source = "torch.profiler's TSC line";
        return torchLine;
      }
      // torch drew its line from a later point than this window's start:
      // Kineto starts an on-demand trace's sessions before torch's own
      // collection, whose line starts there and maps earlier stamps to
      // nonsense (it subtracts unsigned TSC values). No torch op lies before
      // that point, so ours serves there.
      *source = "torch.profiler's TSC line, own line before torch's collection began";
      return [torchLine, own](uint64_t t) {
        const int64_t theirs = torchLine(t);
        return std::llabs(theirs - own(t)) < kToleranceNs ? theirs : own(t);
      };
    }

   private:
    static constexpr int64_t kToleranceNs = 1000000;

    static bool near(const std::function<int64_t(uint64_t)>& line, const std::function<int64_t(uint64_t)>& own,
                     uint64_t stamp) {
      return std::llabs(line(stamp) - own(stamp)) < kToleranceNs;
    }

    c10::ApproximateClockToUnixTimeConverter converter_;  // measures the start pairs
    uint64_t beginStamp_ = static_cast<uint64_t>(c10::getApproximateTime());
  };
};

class OpenregActivityProfiler final : public libkineto::IActivityProfiler {
  struct BadRequest : std::runtime_error {
    using std::runtime_error::runtime_error;
  };

 public:
  const std::string& name() const override {
    static const std::string kName = "openreg";
    return kName;
  }

  const std::set<libkineto::ActivityType>& availableActivities() const override {
    static const std::set<libkineto::ActivityType> kTypes = {
        libkineto::ActivityType::CONCURRENT_KERNEL,   libkineto::ActivityType::GPU_MEMCPY,
        libkineto::ActivityType::GPU_MEMSET,          libkineto::ActivityType::GPU_USER_ANNOTATION,
        libkineto::ActivityType::PRIVATEUSE1_RUNTIME, libkineto::ActivityType::CUDA_SYNC};
    return kTypes;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& activityTypes,
                                                                 const libkineto::Config& config) override {
    return configure(0, 0, activityTypes, config);
  }

  // Throws only for a request that cannot be honoured as asked (an unknown
  // metric name): torch then raises it as a RuntimeError from profile().
  // Anything else that fails is a warning and a trace without device rows.
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t tsMs, int64_t durationMs,
                                                                 const std::set<libkineto::ActivityType>& activityTypes,
                                                                 const libkineto::Config& config) override {
    try {
      SessionRequest request = SessionRequest::fromActivityTypes(activityTypes);
      // CPU-only traces also reach here (CPU adds PRIVATEUSE1_RUNTIME): no
      // device activity asked for, no session.
      if (!request.anyDeviceActivity()) {
        return nullptr;
      }
      request.requestedStartNs = tsMs > 0 ? tsMs * 1000000 : 0;
      request.durationNs = durationMs > 0 ? durationMs * 1000000 : 0;
      request.onDemand = !config.activitiesLogToMemory();
      if (request.onDemand) describeOnDemandRequest(config, request);
      describeClientConfig(config, request);
      std::string error;
      auto metrics = parseMetricsRequest(request.profilerMetrics.value_or(""), request.perKernel, &error);
      if (!metrics) throw BadRequest(error);
      request.metrics = *metrics;
      const ActivityApi& api = ActivityApi::instance();
      if (!api.available()) {
        TORCH_WARN("openreg profiler: ", api.error(), "; the openreg device lanes of this trace stay empty");
      }
      return std::make_unique<OpenregSession>(api, request);
    } catch (const BadRequest& e) {
      TORCH_CHECK(false, e.what());
    } catch (const std::exception& e) {
      try {
        TORCH_WARN("openreg profiler: configuring the device trace failed: ", e.what());
      } catch (...) {}
      return nullptr;
    } catch (...) {
      return nullptr;
    }
  }
};

REGISTER_PRIVATEUSE1_PROFILER(OpenregActivityProfiler);

}  // namespace openreg::profiler

// For torch_openreg's toggle_collection_dynamic (ctypes): 1 if a running
// session was toggled, 0 if none is running. Any thread.
extern "C" __attribute__((visibility("default"))) int openregProfilerToggleCollection(int enable) {
  return openreg::profiler::OpenregSession::toggleRunningCollection(enable != 0) ? 1 : 0;
}

namespace openreg::profiler {

// Set when the plugin library loads, before Kineto can start a session.
const bool kHostClockSet = [] {
  static const TorchHostClock kClock;
  if (std::getenv("OPENREG_PROFILER_REALTIME_HOST_CLOCK") == nullptr) setHostClock(&kClock);
  return true;
}();

// In daemon mode, the plugin goes to Kineto now (ondemand.h). After the
// registrar and the host clock above: same file, so in that order.
const bool kHandedToDaemonMode = [] {
  handPluginToKinetoInDaemonMode();
  return true;
}();

}  // namespace openreg::profiler
