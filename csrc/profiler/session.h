// One Kineto tracing session on the openreg device.
//
// Kineto creates a session per trace (per schedule cycle) through
// OpenregActivityProfiler::configure, calls start()/stop() around the capture
// window, then asks for metadata, processTrace() and the row descriptors.
// push/pop of correlation ids arrive from any thread, unlocked.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <IActivityProfiler.h>

#include "activity_api.h"
#include "device_metrics.h"
#include "record_buffers.h"
#include "records.h"
#include "trace_builder.h"

namespace openreg::common {
class JsonWriter;
}

namespace openreg::profiler {

// What a trace asked of the device, from Kineto's activity types.
struct SessionRequest {
  bool kernels = false;
  bool memcpy = false;
  bool memset = false;
  bool userAnnotations = false;
  bool runtime = false;
  bool syncs = false;
  int64_t requestedStartNs = 0;  // ts_ms, 0 if none
  int64_t durationNs = 0;        // duration_ms, 0 if none
  // A trace whose output Kineto writes itself (on-demand, Dynolog), not one
  // torch.profiler collects in memory: only there do ts_ms and duration_ms
  // bound the trace; torch's synchronous path passes placeholders.
  bool onDemand = false;
  // An on-demand request's own words, for its messages and the metadata.
  bool typesByDefault = false;  // it named no ACTIVITY_TYPES (Kineto's default set)
  std::string logFile;          // ACTIVITIES_LOG_FILE as given (Kineto adds _<pid>)
  std::string traceId;          // REQUEST_TRACE_ID
  int iterations = 0;           // ACTIVITIES_ITERATIONS of an iteration-based request, else 0
  int startIteration = -1;      // Kineto's step count where it starts (after any roundup), else -1
  // What torch's _ExperimentalConfig passed on through Kineto's config text,
  // as the plugin received it: custom_profiler_config (CUSTOM_CONFIG) and
  // profiler_metrics / profiler_measure_per_kernel (CUPTI_PROFILER_METRICS,
  // CUPTI_PROFILER_ENABLE_PER_KERNEL). Recorded in the trace's metadata.
  std::string customConfig;
  std::optional<std::string> profilerMetrics, perKernel;
  MetricsRequest metrics;  // parsed from profilerMetrics and perKernel

  bool anyDeviceActivity() const { return kernels || memcpy || memset || userAnnotations; }
  static SessionRequest fromActivityTypes(const std::set<libkineto::ActivityType>& types);
  // The requested types as a JSON array of Kineto's names.
  void writeTypes(common::JsonWriter& out) const;
  std::string describe() const;
};

// Where a session's stop and processTrace time went (debug line, benchmarks).
struct SessionTimings {
  int64_t stopNs = 0;        // stop(): close the window, flush, unregister
  int64_t flushNs = 0;       // of which orActivityFlushAll(FORCED)
  uint64_t tailBuffers = 0;  // buffers still queued for parsing when stop() was done with the runtime
  int64_t tailParseNs = 0;   // from stop() until the last of them was parsed
  int64_t tailWaitNs = 0;    // how long getMetadata/processTrace waited for that
  int64_t parseNs = 0;       // parsing all the trace's buffers (on the session's parsing thread)
  int64_t parseCpuNs = 0;    // of which on a core
  int64_t prepareNs = 0;     // joins by correlation id, clock mapping
  int64_t emitNs = 0;        // filters, flows, rows, and the Kineto activities built from them
  uint64_t records = 0;      // records parsed
  uint64_t recordBytes = 0;  // bytes of those records in the activity buffers
  uint64_t activities = 0;   // activities handed to the logger
};

// A host clock other than CLOCK_REALTIME for the runtime's host records.
// torch.profiler stamps its ops with the TSC and maps them to epoch ns along
// one line when the trace ends; CLOCK_REALTIME wanders off that line by
// hundreds of ns (more in a VM), enough for a launch to cross the end of the
// op before it. So, as Kineto does with CUPTI's timestamp callback, the
// session has the runtime stamp host records with torch's clock
// (orActivityRegisterTimestampCallback, when the library has it) and maps
// them to epoch ns the way torch maps its ops.
class HostClock {
 public:
  // One trace's map from stamp() values to epoch ns, measured around its window.
  class Trace {
   public:
    virtual ~Trace() = default;
    // Called once, after the window closed; says in *source which map it is.
    virtual std::function<int64_t(uint64_t)> finish(std::string* source) = 0;
  };
  virtual ~HostClock() = default;
  virtual orActivityTimestampFn stamp() const = 0;
  // Called just before the window opens.
  virtual std::unique_ptr<Trace> begin() const = 0;
};

// Process-wide; sessions started afterwards use it. nullptr (the default):
// host records stay in CLOCK_REALTIME. The clock must outlive the sessions.
void setHostClock(const HostClock* clock);

// The activity API's one tracing window (it has one client): at most one
// session holds it at a time; a second one that starts meanwhile stays inert
// instead of corrupting both. Held until the lease is released or destroyed.
class WindowLease {
 public:
  // A held lease, or an empty one if another lease holds the window.
  static WindowLease tryAcquire();

  WindowLease() = default;
  WindowLease(WindowLease&& other) noexcept;
  WindowLease& operator=(WindowLease&& other) noexcept;
  WindowLease(const WindowLease&) = delete;
  WindowLease& operator=(const WindowLease&) = delete;
  ~WindowLease() { release(); }

  bool held() const { return held_; }
  // Lets the window go (if held); the lease is empty afterwards.
  void release() noexcept;

 private:
  bool held_ = false;
};

// Where the on-demand trace Kineto drives now stands (at most one: Kineto
// runs one on-demand request at a time).
struct OnDemandStatus {
  enum class Phase { Requested, Collecting, Collected };
  Phase phase = Phase::Requested;  // configured; start()ed; stop()ped, not yet written
  int iterations = 0;              // of an iteration-based request; 0: duration-based
  int64_t endNs = 0;               // when a duration-based one ends (epoch ns), 0 if not known
  std::string logFile;
  std::string traceId;
};

class OpenregSession final : public libkineto::IActivityProfilerSession {
 public:
  OpenregSession(const ActivityApi& api, SessionRequest request);
  ~OpenregSession() override;

  void start() override;
  void stop() override;

  // torch.profiler's toggle_collection_dynamic for PrivateUse1, which torch
  // 2.13 hands to Kineto for CUDA only: stops (or resumes) recording device
  // work and runtime calls of the running session, if one is running; work
  // launched while off is absent from the trace, work launched before stays.
  // Returns false when no session is running. Any thread.
  static bool toggleRunningCollection(bool on);
  // The on-demand trace in progress, if any. Any thread.
  static std::optional<OnDemandStatus> onDemandStatus();
  // The process is exiting: the on-demand trace in progress (if any) ends
  // now. `early`: before its requested iterations, which its metadata says.
  static void markOnDemandEndingAtExit(bool early);
  std::vector<std::string> errors() override;

  void processTrace(libkineto::ActivityLogger& logger) override;
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback getLinkedActivity,
                    int64_t startTime, int64_t endTime) override;

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override;
  std::vector<libkineto::ResourceInfo> getResourceInfos() override;
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override;

  void pushCorrelationId(uint64_t id) override;
  void popCorrelationId() override;
  void pushUserCorrelationId(uint64_t id) override;
  void popUserCorrelationId() override;

  std::string getDeviceProperties() override;
  std::unordered_map<std::string, std::string> getMetadata() override;

  const SessionTimings& timings() const { return timings_; }

 private:
  struct DeviceDescription {
    int32_t index = 0;
    std::string name;
    orActivityDeviceInfo info{};
  };

  void addError(const std::string& message, bool warn);
  // Switches the record kinds this trace asked for; `collectedOnly` leaves
  // the clock samples and overhead records alone (a toggle, not a stop).
  void enableKinds(bool on, bool collectedOnly = false);
  void takeClockSamples();
  void useHostClock();
  void convertHostTimes();
  // Waits until every buffer of the window is parsed into records_.
  void finishParsing();
  const PreparedTrace& prepared();
  bool deferredStart() const;
  libkineto::DeviceInfo deviceInfo(const DeviceDescription& device) const;
  std::string streamName(int32_t device, uint64_t stream) const;
  void pushExternal(orActivityExternalCorrelationKind kind, uint64_t id);
  void popExternal(orActivityExternalCorrelationKind kind);
  void emitStatsWarnings(const EmitStats& stats);
  // "runtime 3, kernel 12" for the drop warning; "" when not known.
  std::string describeDropsByKind() const;
  // late_clock_syncs and dropped_by_kind of the metadata (null when not known).
  void writeRuntimeCounters(common::JsonWriter& out) const;
  // The "on_demand" field of the metadata (null for other traces).
  void writeOnDemand(common::JsonWriter& out) const;
  // What torch's _ExperimentalConfig passed on ("client_config" in the metadata).
  void writeClientConfig(common::JsonWriter& out) const;
  // OPENREG_COUNTER_PERIOD_US, if set, as the library's counter period.
  void applyCounterPeriod();
  // The "metrics" field of the metadata: what was asked, the totals per device.
  void writeMetrics(common::JsonWriter& out, const PreparedTrace& trace) const;
  // Counter tracks as Kineto counter activities (in `buffer`, handed to `logger`).
  void emitCounters(libkineto::ActivityLogger& logger, libkineto::CpuTraceBuffer& buffer, int64_t windowStart,
                    int64_t windowEnd) const;
  // Says so when Kineto drops this on-demand trace unwritten.
  void warnIfCancelled() const;
  // OPENREG_PROFILER_DEBUG's line on stderr.
  void writeDebugLine(int64_t windowStart, int64_t windowEnd, int64_t processNs) const;

  const ActivityApi& api_;
  const SessionRequest request_;
  const uint64_t generation_;  // tells this session's pushes from older ones
  std::vector<DeviceDescription> devices_;

  enum class State { Configured, Running, Stopped, Inert };
  State state_ = State::Configured;
  // An on-demand trace's phase, read by onDemandStatus() from other threads.
  std::atomic<OnDemandStatus::Phase> onDemandPhase_{OnDemandStatus::Phase::Requested};
  std::atomic<bool> processed_{false};     // processTrace ran: Kineto is writing the trace
  std::atomic<bool> endingAtExit_{false};  // markOnDemandEndingAtExit()
  std::atomic<bool> endedEarly_{false};    // ... with early = true
  WindowLease window_;                     // held from start() to stop()
  int64_t startedNs_ = 0;
  int64_t stoppedNs_ = 0;

  std::unique_ptr<HostClock::Trace> hostClockTrace_;   // while the window is open
  std::function<int64_t(uint64_t)> hostClockToEpoch_;  // set at stop when the runtime used a HostClock
  std::string hostClockSource_ = "CLOCK_REALTIME";     // in the trace's metadata
  RecordSet records_;                                  // filled by parseQueue_'s thread
  std::unique_ptr<ParseQueue> parseQueue_;             // parses into records_, from start() until finishParsing()
  std::vector<std::pair<int32_t, ClockPoint>> directClockSamples_;
  uint64_t droppedAtStart_ = 0;
  uint64_t droppedByRuntime_ = 0;
  std::optional<RuntimeCounters> countersAtStart_;  // empty: the library cannot tell
  std::optional<RuntimeCounters> countersInWindow_;
  uint64_t buffersRefused_ = 0;
  uint64_t buffersCompleted_ = 0;
  uint64_t flushTimeouts_ = 0;
  bool metricsRefused_ = false;  // the library refused KERNEL_METRICS or COUNTER (older than version 3)
  SessionTimings timings_;

  bool preparedDone_ = false;
  PreparedTrace prepared_;  // emptied (but its stats) once processTrace has built the activities
  struct PreparedCounts {
    uint64_t deviceActivities = 0;
    uint64_t runtimeCalls = 0;
    uint64_t outsideWindow = 0;  // device activities outside start()..stop()
  } counts_;
  bool emitted_ = false;
  EmitStats emitStats_;
  std::map<std::pair<int32_t, uint64_t>, uint64_t> rows_;
  std::map<std::pair<int32_t, int64_t>, uint32_t> hostSyncRows_;  // EmitResult::hostSyncRows
  std::unique_ptr<libkineto::CpuTraceBuffer> traceBuffer_;        // what processTrace handed to the logger

  std::mutex errorsMutex_;
  std::vector<std::string> errors_;
};

}  // namespace openreg::profiler
