// The activity tracing API, resolved at run time.
//
// The plugin never links the device library: a vendor can put other hardware
// behind the same C API, and a missing or older library must degrade to an
// empty device lane instead of failing to load. Only the types of
// openreg/activity.h are used at compile time.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "openreg/activity.h"

namespace openreg::profiler {

// Function pointers for every orActivity* entry point the plugin calls, plus
// the two runtime.h helpers it uses to word errors.
struct ActivityFunctions {
  decltype(&::orActivityEnableTracing) enableTracing = nullptr;
  decltype(&::orActivityDisableTracing) disableTracing = nullptr;
  decltype(&::orActivityEnable) enable = nullptr;
  decltype(&::orActivityDisable) disable = nullptr;
  decltype(&::orActivityRegisterCallbacks) registerCallbacks = nullptr;
  decltype(&::orActivityFlushAll) flushAll = nullptr;
  decltype(&::orActivityGetNextRecord) getNextRecord = nullptr;
  decltype(&::orActivityGetNumDroppedRecords) getNumDroppedRecords = nullptr;
  decltype(&::orActivityPushExternalCorrelationId) pushExternalCorrelationId = nullptr;
  decltype(&::orActivityPopExternalCorrelationId) popExternalCorrelationId = nullptr;
  decltype(&::orActivityGetClockSample) getClockSample = nullptr;
  decltype(&::orActivityGetTimestamp) getTimestamp = nullptr;
  decltype(&::orActivityGetVersion) getVersion = nullptr;
  decltype(&::orActivityGetDeviceCount) getDeviceCount = nullptr;
  decltype(&::orActivityGetDeviceInfo) getDeviceInfo = nullptr;
  decltype(&::orActivityGetStreamInfo) getStreamInfo = nullptr;
  // Optional: the plugin works without them.
  decltype(&::orActivityGetStats) getStats = nullptr;
  decltype(&::orGetErrorName) getErrorName = nullptr;
  decltype(&::orActivityMarkerRangePush) markerRangePush = nullptr;
  decltype(&::orActivityMarkerRangePop) markerRangePop = nullptr;
  decltype(&::orActivityMarkerInstant) markerInstant = nullptr;
  decltype(&::orActivityRegisterTimestampCallback) registerTimestampCallback = nullptr;
  decltype(&::orActivitySetCounterPeriod) setCounterPeriod = nullptr;  // version 3
};

// One loaded (or failed) activity library. Immutable once constructed, so the
// function pointers can be read from any thread without locking.
class ActivityApi {
 public:
  // The process-wide instance: OPENREG_ACTIVITY_LIBRARY if set, else
  // libopenreg next to the plugin (its RUNPATH is $ORIGIN). Loaded once.
  static const ActivityApi& instance();

  // Loads a specific library (tests). An empty path means the default search.
  explicit ActivityApi(const std::string& libraryPath);
  ~ActivityApi();
  ActivityApi(const ActivityApi&) = delete;
  ActivityApi& operator=(const ActivityApi&) = delete;

  bool available() const { return available_; }
  const ActivityFunctions& fn() const { return fn_; }
  // The library that was asked for or found (path or soname).
  const std::string& library() const { return library_; }
  uint32_t version() const { return version_; }
  // Empty when available(); otherwise one sentence naming the library and
  // what is wrong with it (not found, missing symbols, version).
  const std::string& error() const { return error_; }
  const std::vector<std::string>& missingSymbols() const { return missing_; }

  // "orErrorTimeout (11)" etc.; works without the optional orGetErrorName.
  std::string describe(orError_t status) const;

 private:
  void* handle_ = nullptr;
  bool available_ = false;
  ActivityFunctions fn_;
  std::string library_;
  uint32_t version_ = 0;
  std::string error_;
  std::vector<std::string> missing_;
};

// The runtime's cumulative counters that a trace reports for its window.
struct RuntimeCounters {
  uint64_t lateClockSyncs = 0;
  std::array<uint64_t, OR_ACTIVITY_STATS_KINDS> droppedByKind{};

  // What happened between `earlier` and this reading.
  RuntimeCounters since(const RuntimeCounters& earlier) const;
};

// Empty when the library has no orActivityGetStats, it fails, or the library
// predates these fields (the structSize it reports does not cover them).
std::optional<RuntimeCounters> readRuntimeCounters(const ActivityFunctions& fn);

// "kernel", "clock_sync", ... for an orActivityKind; "other" for slot 0 of
// recordsDroppedByKind (kinds past its slots), "kind_<n>" for unknown kinds.
std::string activityKindName(uint32_t kind);

}  // namespace openreg::profiler
