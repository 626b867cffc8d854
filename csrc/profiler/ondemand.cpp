#include "ondemand.h"

#include <c10/util/Exception.h>
#include <libkineto.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "kineto_config.h"

namespace openreg::profiler {
namespace {

int64_t epochNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Until Kineto is idle again (it has written its on-demand trace), at most
// until `deadlineNs` (epoch ns). False when it is still busy then.
bool waitUntilKinetoIdle(int64_t deadlineNs) {
  auto& kineto = libkineto::api().activityProfiler();
  while (kineto.isActive()) {
    if (epochNs() > deadlineNs) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// An iteration-based trace ends on Kineto's step count: the steps the
// optimizer's hook would have counted, counted now.
void stepUntilCollected(int iterations) {
  for (int i = 0; i <= iterations; ++i) {
    const auto status = OpenregSession::onDemandStatus();
    if (!status || status->phase != OnDemandStatus::Phase::Collecting) return;
    libkineto::api().activityProfiler().step();
  }
}

}  // namespace

void handPluginToKinetoInDaemonMode() {
  try {
    if (libkineto::isDaemonEnvVarSet()) {
      torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().onKinetoInit();
    }
  } catch (const std::exception& e) {
    try {
      TORCH_WARN("openreg profiler: daemon mode: handing the plugin to Kineto failed (", e.what(),
                 "); on-demand traces will have no openreg device rows");
    } catch (...) {}
  } catch (...) {}
}

void describeClientConfig(const libkineto::Config& config, SessionRequest& request) {
  request.customConfig = config.getCustomConfig();
  const std::string& text = config.source();
  if (auto metrics = configValue(text, "CUPTI_PROFILER_METRICS")) request.profilerMetrics = std::string(*metrics);
  if (auto perKernel = configValue(text, "CUPTI_PROFILER_ENABLE_PER_KERNEL"))
    request.perKernel = std::string(*perKernel);
}

void describeOnDemandRequest(const libkineto::Config& config, SessionRequest& request) {
  request.typesByDefault = !configNamesActivityTypes(config.source());
  if (request.typesByDefault) request.runtime = true;
  request.logFile = config.activitiesLogFile();
  request.traceId = config.requestTraceID();
  if (config.hasProfileStartIteration()) {
    // Kineto has set the iteration it starts on (a multiple of the request's
    // roundup) by the time it configures the trace: the same on every rank.
    request.iterations = config.activitiesRunIterations();
    request.startIteration = config.profileStartIteration();
  }
}

OnDemandExit endOnDemandTraceAtExit(int64_t graceMs) {
  const auto status = OpenregSession::onDemandStatus();
  if (!status || !libkineto::api().isProfilerInitialized()) return kOnDemandNone;
  const std::string which =
      "the on-demand trace (REQUEST_TRACE_ID=" + status->traceId + ", log file " + status->logFile + ")";
  if (status->phase == OnDemandStatus::Phase::Requested) {
    OpenregSession::markOnDemandEndingAtExit(false);
    TORCH_WARN("openreg profiler: the process exits before ", which,
               " started: nothing was traced (Kineto may leave an empty .tmp file)");
    return kOnDemandNotStarted;
  }
  int64_t deadline = epochNs() + graceMs * 1000000;
  const bool byIterations = status->phase == OnDemandStatus::Phase::Collecting && status->iterations > 0;
  OpenregSession::markOnDemandEndingAtExit(byIterations);
  if (byIterations) {
    TORCH_WARN("openreg profiler: the process exits during ", which, ", before its ", status->iterations,
               " iterations ended: ending it now; its last iterations hold no work");
    stepUntilCollected(status->iterations);
  } else if (status->phase == OnDemandStatus::Phase::Collecting && status->endNs > 0) {
    const int64_t left = std::max<int64_t>(0, status->endNs - epochNs());
    deadline += left;
    TORCH_WARN("openreg profiler: the process exits during ", which, ": waiting ", left / 1000000, " ms for its end");
  }
  if (!waitUntilKinetoIdle(deadline)) {
    TORCH_WARN("openreg profiler: ", which, " was not written within ", graceMs,
               " ms of its end; the process exits without it");
    return kOnDemandNotWritten;
  }
  return kOnDemandWritten;
}

}  // namespace openreg::profiler

// For torch_openreg's exit hook (ctypes, which lets go of the GIL): see
// endOnDemandTraceAtExit. Returns its OnDemandExit.
extern "C" __attribute__((visibility("default"))) int openregProfilerEndOnDemandTrace(int64_t graceMs) {
  try {
    return openreg::profiler::endOnDemandTraceAtExit(graceMs);
  } catch (...) {
    return openreg::profiler::kOnDemandNotWritten;
  }
}
