// The Kineto plugin: registered with REGISTER_PRIVATEUSE1_PROFILER when
// libopenreg_profiler.so is loaded, forwarded to Kineto by torch the first
// time a trace runs in state KINETO_PRIVATEUSE1. Kineto then keeps this one
// object for the life of the process and calls configure() for every trace.
#include <c10/util/Exception.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include "activity_api.h"
#include "session.h"

namespace openreg::profiler {

class OpenregActivityProfiler final : public libkineto::IActivityProfiler {
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

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& activityTypes, const libkineto::Config& config) override {
    return configure(0, 0, activityTypes, config);
  }

  // Never throws: an exception here would abort the whole trace.
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t tsMs, int64_t durationMs, const std::set<libkineto::ActivityType>& activityTypes,
      const libkineto::Config& /*config*/) override {
    try {
      SessionRequest request = SessionRequest::fromActivityTypes(activityTypes);
      // CPU-only traces also reach here (CPU adds PRIVATEUSE1_RUNTIME): no
      // device activity asked for, no session.
      if (!request.anyDeviceActivity()) {
        return nullptr;
      }
      request.requestedStartNs = tsMs > 0 ? tsMs * 1000000 : 0;
      request.durationNs = durationMs > 0 ? durationMs * 1000000 : 0;
      const ActivityApi& api = ActivityApi::instance();
      if (!api.available()) {
        TORCH_WARN("openreg profiler: ", api.error(), "; the openreg device lanes of this trace stay empty");
      }
      return std::make_unique<OpenregSession>(api, request);
    } catch (const std::exception& e) {
      try {
        TORCH_WARN("openreg profiler: configuring the device trace failed: ", e.what());
      } catch (...) {
      }
      return nullptr;
    } catch (...) {
      return nullptr;
    }
  }
};

REGISTER_PRIVATEUSE1_PROFILER(OpenregActivityProfiler);

} // namespace openreg::profiler
