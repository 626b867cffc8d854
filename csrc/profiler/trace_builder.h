// Records → trace events, with no Kineto types involved.
//
// Two stages, because Kineto asks for the trace's metadata before it hands
// over the capture window:
//   prepare(): join runtime calls, device work and external ids by correlation
//              id, map device time to host time, drop duplicates, give every
//              submission a per-trace id;
//   emit():    keep what was requested and lies in the window, add flows and
//              user-range spans, and make each stream row a clean timeline.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "clock_map.h"
#include "records.h"

namespace openreg::profiler {

// Per-trace ids start here so that they never equal a torch op's correlation
// id: torch treats an unlinked host record whose id matches an op as that op
// and would credit it with the op's device time.
constexpr int32_t kFirstTraceId = 1 << 30;

struct PreparedDeviceOp {
  DeviceOp op;
  int64_t start = 0;  // host epoch ns
  int64_t end = 0;
  int32_t traceId = 0;
  ExternalIds external;
  int64_t runtimeIndex = -1;  // into PreparedTrace::runtime, if the launch is known
};

struct PreparedRuntime {
  RuntimeCall call;
  int32_t traceId = 0;
  ExternalIds external;
  int64_t syncIndex = -1;  // into PreparedTrace::hostSyncs, for sync calls
};

struct PrepareStats {
  uint64_t duplicateRecords = 0;
  uint64_t unmappedDeviceOps = 0;  // no clock samples for their device
  uint64_t rejectedClockSamples = 0;
  uint64_t clockSamples = 0;
};

struct PreparedTrace {
  std::vector<PreparedDeviceOp> deviceOps;
  std::vector<PreparedRuntime> runtime;
  std::vector<HostSync> hostSyncs;
  PrepareStats stats;
};

PreparedTrace prepareTrace(const RecordSet& records);

// What the session was asked to collect (Kineto's activity types).
struct EmitOptions {
  bool kernels = true;
  bool memcpy = true;
  bool memset = true;
  bool syncs = true;            // stream waits on device rows
  bool userAnnotations = true;  // record_function ranges mirrored on stream rows
  bool runtime = true;          // host launch rows
  int64_t windowStart = 0;      // host epoch ns, inclusive
  int64_t windowEnd = 0;
  int64_t notBefore = 0;        // deferred start (ts_ms); 0 if none
};

enum class TraceEventType { Kernel, Memcpy, Memset, StreamWait, UserAnnotation, Runtime };

struct TraceArg {
  std::string key;
  std::string value;
  bool quoted = false;  // else value is raw JSON
};

struct TraceEvent {
  TraceEventType type = TraceEventType::Kernel;
  std::string name;
  int64_t start = 0;  // host epoch ns
  int64_t end = 0;
  int64_t pid = 0;    // device index, or the host process id
  int64_t tid = 0;    // stream id, or the host thread id
  int32_t threadId = 0;
  int32_t id = 0;     // per-trace correlation id
  uint32_t flowId = 0;
  bool flowStart = false;
  uint64_t linkedOp = 0;  // external op id to link through Kineto, 0 = none
  uint64_t userRange = 0; // user annotations: the record_function's id
  std::vector<TraceArg> args;
};

struct EmitStats {
  uint64_t emitted = 0;
  uint64_t notRequested = 0;
  uint64_t outOfWindow = 0;
  uint64_t launchedInWindowButOutside = 0;  // device work that ended after the window
  uint64_t beforeRequestedStart = 0;
  uint64_t causalityFixes = 0;  // device starts moved up to their launch
  int64_t maxCausalityFixNs = 0;
  uint64_t rowOverlapFixes = 0;  // starts moved past the previous op on a row
  uint64_t annotationsWithoutRange = 0;  // user range unknown to Kineto
  uint64_t annotationOverlapsDropped = 0;
  uint64_t flows = 0;
};

// Name of the host range behind a user correlation id, if Kineto knows it.
using UserRangeLookup = std::function<std::optional<std::string>(uint64_t userId)>;

struct EmitResult {
  std::vector<TraceEvent> events;  // sorted by start
  EmitStats stats;
  // (device, stream) of every stream row that holds an event.
  std::map<std::pair<int32_t, uint64_t>, uint64_t> rows;
};

EmitResult emitTrace(const PreparedTrace& prepared, const EmitOptions& options,
                     const UserRangeLookup& userRange);

// "Memcpy HtoD (Host -> Device)" and friends, named as CUDA names them.
std::string memcpyName(uint8_t copyKind);
const char* memcpyKindName(uint8_t copyKind);

} // namespace openreg::profiler
