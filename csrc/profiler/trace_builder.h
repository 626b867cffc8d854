// Records → trace events, with no Kineto types involved.
//
// Two stages, because Kineto asks for the trace's metadata before it hands
// over the capture window:
//   prepare(): join runtime calls, device work and external ids by correlation
//              id, map device time to host time, drop duplicates, give every
//              submission a per-trace id;
//   emit():    keep what was requested and lies in the window, add flows and
//              user-range spans, and make each stream row a clean timeline.
//
// Both run over millions of records at the end of a trace, so neither copies
// a record nor builds a string per event: prepared entries point into the
// RecordSet, events point into the PreparedTrace, and an event's args are
// written on demand (writeArgs) straight into the consumer's format.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "clock_map.h"
#include "records.h"

namespace openreg::profiler {

// Per-trace ids start here so that they never equal a torch op's correlation
// id: torch treats an unlinked host record whose id matches an op as that op
// and would credit it with the op's device time.
constexpr int32_t kFirstTraceId = 1 << 30;

// Rows of host waits on a device start here, above any stream id.
constexpr int64_t kHostWaitRowBase = int64_t{1} << 30;

// Both kept small: a trace has one of each per kernel.
struct PreparedDeviceOp {
  const DeviceOp* op = nullptr;  // in the RecordSet prepareTrace read
  int64_t start = 0;             // host epoch ns
  int64_t end = 0;
  int32_t traceId = 0;
  int32_t runtimeIndex = -1;  // into PreparedTrace::runtime, if the launch is known
  ExternalIds external;
};

struct PreparedRuntime {
  const RuntimeCall* call = nullptr;  // in the RecordSet prepareTrace read
  int32_t traceId = 0;
  int32_t syncIndex = -1;   // into PreparedTrace::hostSyncs, for sync calls
  uint64_t externalOp = 0;  // the op that made the call (user ranges mark device work only)
};

// A host sync with the runtime calls it belongs to (indices into
// PreparedTrace::runtime, or -1 where the call is not in the records).
struct PreparedHostSync {
  HostSync sync;
  int32_t runtimeIndex = -1;  // the synchronising call
  int32_t recordIndex = -1;   // event syncs: the orEventRecord waited on
};

struct PrepareStats {
  uint64_t duplicateRecords = 0;
  uint64_t unmappedDeviceOps = 0;    // no clock samples for their device
  uint64_t streamZeroDeviceOps = 0;  // kept, but the API numbers streams from 1
  uint64_t rejectedClockSamples = 0;
  uint64_t clockSamples = 0;
};

// Valid while the RecordSet it was prepared from is alive and unchanged.
struct PreparedTrace {
  std::vector<PreparedDeviceOp> deviceOps;  // by host start
  std::vector<PreparedRuntime> runtime;     // by host start
  std::vector<PreparedHostSync> hostSyncs;
  // Per RecordSet::eventWaits: the orEventRecord call waited on (index into
  // runtime), or -1.
  std::vector<int32_t> eventWaitRecords;
  const RecordSet* records = nullptr;  // the set read, for side tables (communications)
  PrepareStats stats;
};

PreparedTrace prepareTrace(const RecordSet& records);
// The prepared trace points into the records: they must outlive it.
PreparedTrace prepareTrace(RecordSet&& records) = delete;

// What the session was asked to collect (Kineto's activity types).
struct EmitOptions {
  bool kernels = true;
  bool memcpy = true;
  bool memset = true;
  bool syncs = true;            // stream waits on stream rows, host syncs on their own rows
  bool userAnnotations = true;  // record_function ranges mirrored on stream rows
  bool runtime = true;          // host launch rows
  int64_t windowStart = 0;      // host epoch ns, inclusive
  int64_t windowEnd = 0;
  int64_t notBefore = 0;  // deferred start (ts_ms); 0 if none
};

enum class TraceEventType { Kernel, Memcpy, Memset, StreamWait, HostSync, UserAnnotation, Runtime };

// Valid while the PreparedTrace (and the EmitResult, for range names) it came
// from is alive.
struct TraceEvent {
  TraceEventType type = TraceEventType::Kernel;
  std::string_view name;  // a literal, a runtime-owned name, or EmitResult::rangeNames
  int64_t start = 0;      // host epoch ns
  int64_t end = 0;
  int64_t pid = 0;  // device index, or the host process id
  int64_t tid = 0;  // stream id, or the host thread id
  int32_t threadId = 0;
  int32_t id = 0;       // per-trace correlation id
  uint32_t flowId = 0;  // 0 (no arrow) or the id
  bool flowStart = false;
  uint64_t linkedOp = 0;   // external op id to link through Kineto, 0 = none
  uint64_t userRange = 0;  // user annotations: the record_function's id
  // Where the args come from: device work, or a host runtime call (with the
  // host sync it made, if any). Both null for user-range spans.
  const PreparedDeviceOp* device = nullptr;
  const PreparedRuntime* runtime = nullptr;
  const HostSync* sync = nullptr;                    // a sync call's runtime row, or a host sync's own row
  const EventWait* eventWait = nullptr;              // stream waits
  int32_t waitRecord = -1;                           // event waits: the emitted orEventRecord row's id, -1 if none
  const CommunicationInfo* communication = nullptr;  // device collectives
  const LaunchShape* launchShape = nullptr;          // kernels
};

// What an event's args are made of, self-contained (no pointers), so a
// Kineto activity can keep it after the records are gone and format its args
// only if they are asked for.
struct EventArgs {
  enum class Source : uint8_t { None, Device, Runtime, HostSync, Count };
  Source source = Source::None;  // None: user-range spans, which have no args
  DeviceOpKind kind = DeviceOpKind::Kernel;
  uint8_t copyKind = 0;
  uint8_t srcKind = 0;
  uint8_t dstKind = 0;
  bool isAsync = false;
  bool hasSync = false;    // runtime calls that synchronised
  uint8_t unusedByte = 0;  // no padding: ActivityShape compares bytes
  int32_t device = 0;      // where the work ran, or the device a call addressed
  int32_t correlation = 0;
  int32_t status = 0;
  int32_t streamPriority = 0;
  int32_t srcDevice = -1;
  int32_t dstDevice = -1;
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t sharedMemBytes = 0;
  uint32_t memsetValue = 0;
  uint32_t memsetElementSize = 0;
  uint32_t syncType = 0;
  uint64_t stream = 0;  // where the work ran, or the stream a call synchronised
  uint64_t bytes = 0;
  uint64_t eventId = 0;                // the event a stream waited for, or a call synchronised
  uint64_t waitOnStream = 0;           // event waits: the stream the event was recorded on (0: unknown)
  int64_t waitRecordCorrelation = -1;  // event waits: the record's row id, -1 if not in the trace
  int64_t durationNs = 0;
  // Collectives only, the one pointer: into the RecordSet while the trace is
  // built; the ActivityStore points a collective's shape at its own copy.
  const CommunicationInfo* communication = nullptr;
  // Kernels: LaunchShape::annotation (owned by the runtime), or nullptr.
  const char* annotation = nullptr;

  bool operator==(const EventArgs&) const = default;
};

EventArgs eventArgsOf(const TraceEvent& event);

// Receives an event's args in a fixed order, each as what it is; the writer
// formats it (JSON, or text). Keys are literals.
class ArgWriter {
 public:
  virtual ~ArgWriter() = default;
  virtual void integer(const char* key, int64_t value) = 0;
  virtual void unsignedInteger(const char* key, uint64_t value) = 0;
  virtual void text(const char* key, const char* value) = 0;  // plain text: a JSON string
  virtual void boolean(const char* key, bool value) = 0;
  // A number written with exactly `decimals` digits after the point.
  virtual void decimal(const char* key, double value, int decimals) = 0;
  // A CUDA-style dim3: a list of three numbers.
  virtual void dims(const char* key, const uint32_t (&value)[3]) = 0;
  // Members of a JSON object, written as they are (a kernel's annotation,
  // which its launcher guarantees is valid JSON).
  virtual void members(const char* json) = 0;
};

// The text forms of dims and decimals ("[4, 1, 1]", "1048.576"), as
// getMetadataValue and eventArgs give them.
std::string dimsText(const uint32_t (&value)[3]);
std::string decimalText(double value, int decimals);

// device/stream/correlation (HTA keys device work on them) and what each
// kind of work adds; launches get correlation/device and their sync.
void writeArgs(const EventArgs& args, ArgWriter& out);

// The same args as strings, for tests and debugging.
struct TraceArg {
  std::string key;
  std::string value;
  bool quoted = false;  // else value is raw JSON
};
std::vector<TraceArg> eventArgs(const TraceEvent& event);

struct EmitStats {
  uint64_t emitted = 0;
  uint64_t notRequested = 0;
  uint64_t outOfWindow = 0;
  uint64_t launchedInWindowButOutside = 0;  // device work that ended after the window
  uint64_t beforeRequestedStart = 0;
  uint64_t causalityFixes = 0;  // device starts moved up to their launch
  int64_t maxCausalityFixNs = 0;
  uint64_t rowOverlapFixes = 0;          // starts moved past the previous op on a row
  uint64_t annotationsWithoutRange = 0;  // user range unknown to Kineto
  uint64_t annotationOverlapsDropped = 0;
  uint64_t flows = 0;
};

// Name of the host range behind a user correlation id, if Kineto knows it.
using UserRangeLookup = std::function<std::optional<std::string>(uint64_t userId)>;

struct EmitResult {
  std::vector<TraceEvent> events;  // by start, enclosing events first at equal starts
  EmitStats stats;
  // (device, stream) of every stream row that holds an event.
  std::map<std::pair<int32_t, uint64_t>, uint64_t> rows;
  // (device, row) of every host-sync row: the host thread whose waits it holds.
  std::map<std::pair<int32_t, int64_t>, uint32_t> hostSyncRows;
  std::deque<std::string> rangeNames;  // what user-range spans' names point at
};

EmitResult emitTrace(const PreparedTrace& prepared, const EmitOptions& options, const UserRangeLookup& userRange);

// The same, handing each event to `sink` in order instead of keeping it: a
// trace of millions of events is never held twice. Fills result's stats,
// rows and range names; leaves result.events alone.
using EventSink = std::function<void(const TraceEvent&)>;
void emitTrace(const PreparedTrace& prepared, const EmitOptions& options, const UserRangeLookup& userRange,
               EmitResult& result, const EventSink& sink);
void emitTrace(PreparedTrace&& prepared, const EmitOptions& options, const UserRangeLookup& userRange,
               EmitResult& result, const EventSink& sink) = delete;
// Events point into the prepared trace: it must outlive them.
EmitResult emitTrace(PreparedTrace&& prepared, const EmitOptions& options, const UserRangeLookup& userRange) = delete;

// "Memcpy HtoD (Host -> Device)" and friends, named as CUDA names them.
const char* memcpyName(uint8_t copyKind);
const char* memcpyKindName(uint8_t copyKind);

}  // namespace openreg::profiler
