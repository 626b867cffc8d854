#include "activity_api.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <sstream>

#ifndef OPENREG_RUNTIME_SONAME
#define OPENREG_RUNTIME_SONAME "libopenreg.so"
#endif

namespace openreg::profiler {
namespace {

constexpr const char* kLibraryEnv = "OPENREG_ACTIVITY_LIBRARY";

template <typename Fn>
void resolve(void* handle, const char* symbol, Fn& slot, std::vector<std::string>* missing) {
  slot = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (slot == nullptr && missing != nullptr) {
    missing->emplace_back(symbol);
  }
}

}  // namespace

const ActivityApi& ActivityApi::instance() {
  // Leaked on purpose: the runtime's delivery thread may still call into the
  // plugin while static destructors run at exit.
  static const ActivityApi* api = [] {
    const char* path = std::getenv(kLibraryEnv);
    return new ActivityApi(path != nullptr ? path : "");
  }();
  return *api;
}

ActivityApi::ActivityApi(const std::string& libraryPath) {
  if (!libraryPath.empty()) {
    library_ = libraryPath;
    handle_ = dlopen(libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  } else {
    // Prefer the copy the backend already loaded (by soname): a second copy
    // of the runtime would be a second, idle device.
    const char* candidates[] = {OPENREG_RUNTIME_SONAME, "libopenreg.so"};
    for (const char* name : candidates) {
      handle_ = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
      if (handle_ != nullptr) {
        library_ = name;
        break;
      }
    }
    for (const char* name : candidates) {
      if (handle_ != nullptr) {
        break;
      }
      library_ = name;
      handle_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    }
  }
  if (handle_ == nullptr) {
    const char* why = dlerror();
    error_ = "cannot load the activity library '" + library_ + "'" +
             (why != nullptr ? std::string(": ") + why : std::string()) + " (set OPENREG_ACTIVITY_LIBRARY to its path)";
    return;
  }

  auto* m = &missing_;
  resolve(handle_, "orActivityEnableTracing", fn_.enableTracing, m);
  resolve(handle_, "orActivityDisableTracing", fn_.disableTracing, m);
  resolve(handle_, "orActivityEnable", fn_.enable, m);
  resolve(handle_, "orActivityDisable", fn_.disable, m);
  resolve(handle_, "orActivityRegisterCallbacks", fn_.registerCallbacks, m);
  resolve(handle_, "orActivityFlushAll", fn_.flushAll, m);
  resolve(handle_, "orActivityGetNextRecord", fn_.getNextRecord, m);
  resolve(handle_, "orActivityGetNumDroppedRecords", fn_.getNumDroppedRecords, m);
  resolve(handle_, "orActivityPushExternalCorrelationId", fn_.pushExternalCorrelationId, m);
  resolve(handle_, "orActivityPopExternalCorrelationId", fn_.popExternalCorrelationId, m);
  resolve(handle_, "orActivityGetClockSample", fn_.getClockSample, m);
  resolve(handle_, "orActivityGetTimestamp", fn_.getTimestamp, m);
  resolve(handle_, "orActivityGetVersion", fn_.getVersion, m);
  resolve(handle_, "orActivityGetDeviceCount", fn_.getDeviceCount, m);
  resolve(handle_, "orActivityGetDeviceInfo", fn_.getDeviceInfo, m);
  resolve(handle_, "orActivityGetStreamInfo", fn_.getStreamInfo, m);
  resolve(handle_, "orActivityGetStats", fn_.getStats, nullptr);
  resolve(handle_, "orGetErrorName", fn_.getErrorName, nullptr);
  resolve(handle_, "orActivityMarkerRangePush", fn_.markerRangePush, nullptr);
  resolve(handle_, "orActivityMarkerRangePop", fn_.markerRangePop, nullptr);
  resolve(handle_, "orActivityMarkerInstant", fn_.markerInstant, nullptr);
  resolve(handle_, "orActivityRegisterTimestampCallback", fn_.registerTimestampCallback, nullptr);
  resolve(handle_, "orActivitySetCounterPeriod", fn_.setCounterPeriod, nullptr);

  if (!missing_.empty()) {
    std::ostringstream msg;
    msg << "the activity library '" << library_ << "' lacks ";
    for (size_t i = 0; i < missing_.size(); ++i) {
      msg << (i == 0 ? "" : ", ") << missing_[i];
    }
    error_ = msg.str();
    return;
  }
  if (fn_.getVersion(&version_) != orSuccess || version_ < 1) {
    error_ = "the activity library '" + library_ + "' reports API version " + std::to_string(version_) +
             "; the plugin needs version 1 or later";
    return;
  }
  available_ = true;
}

ActivityApi::~ActivityApi() {
  // Never dlclose: records keep pointers to strings owned by the library.
}

std::string ActivityApi::describe(orError_t status) const {
  std::string name = fn_.getErrorName != nullptr ? fn_.getErrorName(status) : "orError";
  return name + " (" + std::to_string(static_cast<int>(status)) + ")";
}

RuntimeCounters RuntimeCounters::since(const RuntimeCounters& earlier) const {
  auto difference = [](uint64_t now, uint64_t then) { return now >= then ? now - then : 0; };
  RuntimeCounters out;
  out.lateClockSyncs = difference(lateClockSyncs, earlier.lateClockSyncs);
  for (size_t kind = 0; kind < droppedByKind.size(); ++kind) {
    out.droppedByKind[kind] = difference(droppedByKind[kind], earlier.droppedByKind[kind]);
  }
  return out;
}

std::optional<RuntimeCounters> readRuntimeCounters(const ActivityFunctions& fn) {
  if (fn.getStats == nullptr) return std::nullopt;
  orActivityStats stats{};
  stats.structSize = sizeof(stats);
  if (fn.getStats(&stats) != orSuccess || stats.structSize < sizeof(stats)) return std::nullopt;
  RuntimeCounters out;
  out.lateClockSyncs = stats.lateClockSyncs;
  std::copy(std::begin(stats.recordsDroppedByKind), std::end(stats.recordsDroppedByKind), out.droppedByKind.begin());
  return out;
}

std::string activityKindName(uint32_t kind) {
  static constexpr const char* kNames[] = {"other",          "runtime",  "kernel",          "memcpy",
                                           "memset",         "memory",   "synchronization", "external_correlation",
                                           "marker",         "overhead", "clock_sync",      "communication",
                                           "kernel_metrics", "counter"};
  static_assert(std::size(kNames) == OR_ACTIVITY_KIND_COUNT, "a name for every kind");
  if (kind < std::size(kNames)) return kNames[kind];
  return "kind_" + std::to_string(kind);
}

}  // namespace openreg::profiler
