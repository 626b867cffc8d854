#include "session.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <exception>
#include <unordered_map>
#include <utility>

#include <malloc.h>

#include <c10/util/Exception.h>
#include <libkineto.h>
#include <output_base.h>

#include "activity_store.h"
#include "openreg/common/json_writer.h"
#include "record_buffers.h"

namespace openreg::profiler {
namespace {

// Host-wait rows sort after every stream row (stream ids are far smaller).
constexpr int64_t kHostSyncRowSortBase = int64_t{1} << 40;

using libkineto::ActivityType;

std::atomic<bool> gWindowHeld{false};  // see WindowLease
// The session between start() and stop(), for toggleRunningCollection.
std::mutex gRunningMutex;
OpenregSession* gRunning = nullptr;
std::atomic<const HostClock*> gHostClock{nullptr};

std::atomic<uint64_t> gNextGeneration{1};

// The on-demand session Kineto holds now (see OpenregSession::onDemandStatus).
std::mutex gOnDemandMutex;
OpenregSession* gOnDemand = nullptr;

RecordBufferPool& bufferPool() {
  // Leaked: the runtime may deliver a buffer while statics are destroyed.
  static auto* pool =
      new RecordBufferPool(RecordBufferPool::bufferBytesFromEnv(), RecordBufferPool::limitBytesFromEnv());
  return *pool;
}

// Per-thread count of the ids this thread pushed for one session, so a pop
// that belongs to an older session (or arrives without a push) is not
// forwarded to the runtime's stack.
struct ThreadPushes {
  uint64_t generation = 0;
  uint32_t depth[OR_EXTERNAL_CORRELATION_KIND_COUNT] = {};
};
thread_local ThreadPushes tPushes;

// glibc keeps freed heap memory (up to 64 MB at the top once large blocks
// have come and gone): the joins' temporaries (and the record buffers that
// stop() let go) would stay resident while the activities, which live in
// slabs of their own, are built. Hands the free pages back, once per trace.
void giveBackFreedMemory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A JSON string literal, as metadata values are JSON text.
std::string jsonString(std::string_view text) {
  std::string out;
  common::appendJsonString(out, text);
  return out;
}

}  // namespace

WindowLease WindowLease::tryAcquire() {
  WindowLease lease;
  bool free = false;
  lease.held_ = gWindowHeld.compare_exchange_strong(free, true);
  return lease;
}

WindowLease::WindowLease(WindowLease&& other) noexcept : held_(std::exchange(other.held_, false)) {}

WindowLease& WindowLease::operator=(WindowLease&& other) noexcept {
  if (this != &other) {
    release();
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

void WindowLease::release() noexcept {
  if (held_) {
    held_ = false;
    gWindowHeld.store(false);
  }
}

SessionRequest SessionRequest::fromActivityTypes(const std::set<ActivityType>& types) {
  SessionRequest r;
  r.kernels = types.count(ActivityType::CONCURRENT_KERNEL) > 0;
  r.memcpy = types.count(ActivityType::GPU_MEMCPY) > 0;
  r.memset = types.count(ActivityType::GPU_MEMSET) > 0;
  r.userAnnotations = types.count(ActivityType::GPU_USER_ANNOTATION) > 0;
  r.runtime = types.count(ActivityType::PRIVATEUSE1_RUNTIME) > 0;
  r.syncs = r.kernels || types.count(ActivityType::CUDA_SYNC) > 0;
  return r;
}

void SessionRequest::writeTypes(common::JsonWriter& out) const {
  out.beginArray();
  const std::pair<bool, const char*> types[] = {{kernels, "kernel"},
                                                {memcpy, "gpu_memcpy"},
                                                {memset, "gpu_memset"},
                                                {userAnnotations, "gpu_user_annotation"},
                                                {runtime, "privateuse1_runtime"},
                                                {syncs, "cuda_sync"}};
  for (const auto& [on, name] : types) {
    if (on) out.value(name);
  }
  out.endArray();
}

std::string SessionRequest::describe() const {
  common::JsonWriter out;
  writeTypes(out);
  return out.take();
}

OpenregSession::OpenregSession(const ActivityApi& api, SessionRequest request)
    : api_(api), request_(std::move(request)), generation_(gNextGeneration.fetch_add(1)) {
  if (request_.onDemand) {
    std::lock_guard<std::mutex> guard(gOnDemandMutex);
    gOnDemand = this;
  }
  if (!api_.available()) {
    state_ = State::Inert;
    addError(api_.error(), false);  // configure() already warned
    return;
  }
  int count = 0;
  if (orError_t rc = api_.fn().getDeviceCount(&count); rc != orSuccess) {
    addError("orActivityGetDeviceCount failed: " + api_.describe(rc), true);
    count = 0;
  }
  for (int d = 0; d < count; ++d) {
    DeviceDescription desc;
    desc.index = d;
    desc.info.structSize = sizeof(orActivityDeviceInfo);
    if (api_.fn().getDeviceInfo(d, &desc.info) == orSuccess) {
      desc.name = std::string(desc.info.name, strnlen(desc.info.name, sizeof(desc.info.name)));
    }
    if (desc.name.empty()) {
      desc.name = "openreg device";
    }
    devices_.push_back(std::move(desc));
  }
}

OpenregSession::~OpenregSession() {
  if (request_.onDemand) {
    std::lock_guard<std::mutex> guard(gOnDemandMutex);
    if (gOnDemand == this) gOnDemand = nullptr;
  }
  try {
    if (state_ == State::Running) {
      stop();
    }
    warnIfCancelled();
  } catch (...) {
    // A destructor must not throw; stop() already recorded what went wrong.
  }
  if (parseQueue_) {                              // an abandoned trace: stopped, never read
    bufferPool().detachQueue(parseQueue_.get());  // in case stop() did not get that far
    parseQueue_.reset();                          // joins the thread that writes records_
    bufferPool().trim();                          // the buffers it gave back
  }
}

void OpenregSession::addError(const std::string& message, bool warn) {
  {
    std::lock_guard<std::mutex> guard(errorsMutex_);
    errors_.push_back(message);
  }
  if (warn) {
    TORCH_WARN("openreg profiler: ", message);
  }
}

std::vector<std::string> OpenregSession::errors() {
  std::lock_guard<std::mutex> guard(errorsMutex_);
  return errors_;
}

std::optional<OnDemandStatus> OpenregSession::onDemandStatus() {
  std::lock_guard<std::mutex> guard(gOnDemandMutex);
  if (gOnDemand == nullptr) return std::nullopt;
  const SessionRequest& request = gOnDemand->request_;
  OnDemandStatus status;
  status.phase = gOnDemand->onDemandPhase_.load();
  status.iterations = request.iterations;
  if (request.iterations == 0 && request.requestedStartNs > 0 && request.durationNs > 0) {
    status.endNs = request.requestedStartNs + request.durationNs;
  }
  status.logFile = request.logFile;
  status.traceId = request.traceId;
  return status;
}

void OpenregSession::markOnDemandEndingAtExit(bool early) {
  std::lock_guard<std::mutex> guard(gOnDemandMutex);
  if (gOnDemand == nullptr) return;
  gOnDemand->endingAtExit_ = true;
  if (early) gOnDemand->endedEarly_ = true;
}

void OpenregSession::warnIfCancelled() const {
  if (!request_.onDemand || processed_ || endingAtExit_) return;
  TORCH_WARN("openreg profiler: the on-demand trace (REQUEST_TRACE_ID=", request_.traceId, ", log file ",
             request_.logFile,
             ") was cancelled before it was written: a torch.profiler.profile started in this process, and Kineto "
             "stops an on-demand trace for it (its own message is hidden at daemon mode's log level); request the "
             "trace again once that profile() has ended");
}

void OpenregSession::writeClientConfig(common::JsonWriter& out) const {
  out.key("client_config").beginObject().field("custom_config", request_.customConfig);
  for (const auto& [key, value] : {std::pair{"profiler_metrics", &request_.profilerMetrics},
                                   std::pair{"profiler_measure_per_kernel", &request_.perKernel}}) {
    out.key(key);
    value->has_value() ? out.value(**value) : out.null();
  }
  out.endObject();
}

void OpenregSession::applyCounterPeriod() {
  const char* value = std::getenv("OPENREG_COUNTER_PERIOD_US");
  if (value == nullptr || !request_.metrics.anyCounter()) return;
  char* end = nullptr;
  const unsigned long long us = std::strtoull(value, &end, 10);
  if (end == value || *end != '\0') {
    addError(std::string("OPENREG_COUNTER_PERIOD_US='") + value +
                 "' is not a whole number of microseconds; the "
                 "counters keep the library's period",
             true);
    return;
  }
  if (api_.fn().setCounterPeriod == nullptr) {
    addError("the activity library '" + api_.library() +
                 "' cannot set its counter period (it lacks "
                 "orActivitySetCounterPeriod); OPENREG_COUNTER_PERIOD_US is ignored",
             true);
    return;
  }
  if (orError_t rc = api_.fn().setCounterPeriod(us * 1000ull); rc != orSuccess) {
    addError(std::string("OPENREG_COUNTER_PERIOD_US=") + value + " was refused: " + api_.describe(rc) +
                 "; the counters keep the library's period",
             true);
  }
}

namespace {

// Totals per device of the kernels in [start, end] that have metrics.
std::map<int32_t, KernelMetricTotals> kernelMetricTotals(const PreparedTrace& trace, int64_t start, int64_t end) {
  std::map<int32_t, KernelMetricTotals> out;
  if (trace.records == nullptr || trace.records->kernelMetrics.empty()) return out;
  const auto byCorrelation = kernelMetricsByCorrelation(trace.records->kernelMetrics);
  for (const PreparedDeviceOp& op : trace.deviceOps) {
    if (op.op->kind != DeviceOpKind::Kernel || op.start < start || op.end > end) continue;
    const auto it = byCorrelation.find(op.op->correlationId);
    if (it == byCorrelation.end()) continue;
    const KernelMetrics& m = *it->second;
    KernelMetricTotals& t = out[op.op->device];
    ++t.kernels;
    t.kernelNs += op.end - op.start;
    t.busyNs += m.busyNs;
    if (m.known & OR_KERNEL_WORK_FLOPS) {
      ++t.kernelsWithFlops;
      t.flops += m.flops;
    }
    if (m.known & OR_KERNEL_WORK_BYTES) {
      ++t.kernelsWithBytes;
      t.bytesRead += m.bytesRead;
      t.bytesWritten += m.bytesWritten;
    }
  }
  return out;
}

void writeMetricNames(common::JsonWriter& out, const MetricsRequest& request) {
  out.key("kernel").beginArray();
  for (int m = 0; m < static_cast<int>(KernelMetric::Count); ++m) {
    if (request.wants(static_cast<KernelMetric>(m))) out.value(kernelMetricName(static_cast<KernelMetric>(m)));
  }
  out.endArray().key("counters").beginArray();
  for (int m = 0; m < static_cast<int>(CounterMetric::Count); ++m) {
    if (request.wants(static_cast<CounterMetric>(m))) out.value(counterMetricName(static_cast<CounterMetric>(m)));
  }
  out.endArray();
}

void writeTotals(common::JsonWriter& out, int32_t device, const KernelMetricTotals& t) {
  out.beginObject()
      .field("device", device)
      .field("kernels", t.kernels)
      .field("kernels_with_flops", t.kernelsWithFlops)
      .field("kernels_with_bytes", t.kernelsWithBytes)
      .field("flops", t.flops)
      .field("bytes_read", t.bytesRead)
      .field("bytes_written", t.bytesWritten)
      .field("busy_ns", t.busyNs)
      .field("kernel_ns", t.kernelNs);
  const double seconds = static_cast<double>(t.kernelNs) / 1e9;
  if (seconds > 0) {
    out.key("flops_per_s").valueFixed(static_cast<double>(t.flops) / seconds, 0);
    out.key("bytes_per_s").valueFixed(static_cast<double>(t.bytesRead + t.bytesWritten) / seconds, 0);
  }
  out.endObject();
}

}  // namespace

void OpenregSession::writeMetrics(common::JsonWriter& out, const PreparedTrace& trace) const {
  const MetricsRequest& request = request_.metrics;
  out.key("metrics");
  if (request.empty()) {
    out.null();
    return;
  }
  out.beginObject();
  writeMetricNames(out, request);
  out.field("per_kernel", request.perKernel).field("refused", metricsRefused_).key("totals").beginArray();
  if (request.anyKernelMetric()) {
    for (const auto& [device, totals] : kernelMetricTotals(trace, startedNs_, stoppedNs_))
      writeTotals(out, device, totals);
  }
  out.endArray().endObject();
}

void OpenregSession::emitCounters(libkineto::ActivityLogger& logger, libkineto::CpuTraceBuffer& buffer,
                                  int64_t windowStart, int64_t windowEnd) const {
  if (!request_.metrics.anyCounter()) return;
  for (const CounterEvent& event :
       buildCounterEvents(records_.counterSamples, request_.metrics, windowStart, windowEnd)) {
    // Kineto 2.13 writes this type's activities as counter events ("ph": "C").
    auto activity = std::make_unique<libkineto::GenericTraceActivity>(
        buffer.span, libkineto::ActivityType::MTIA_COUNTERS, counterMetricName(event.metric));
    activity->startTime = event.timestamp;
    activity->endTime = event.timestamp;
    activity->device = event.device;
    activity->resource = 0;
    for (const auto& [series, value] : event.series) activity->addCounterValue(series, value);
    logger.handleActivity(*activity);
    buffer.activities.push_back(std::move(activity));
  }
}

void OpenregSession::writeOnDemand(common::JsonWriter& out) const {
  out.key("on_demand");
  if (!request_.onDemand) {
    out.null();
    return;
  }
  out.beginObject()
      .field("trace_id", request_.traceId)
      .field("log_file", request_.logFile)
      .field("iterations", request_.iterations)
      .field("start_iteration", request_.startIteration)
      .field("types_by_default", request_.typesByDefault)
      .field("ended_early_at_exit", endedEarly_.load())
      .endObject();
}

bool OpenregSession::toggleRunningCollection(bool on) {
  std::lock_guard<std::mutex> guard(gRunningMutex);
  if (gRunning == nullptr) return false;
  gRunning->enableKinds(on, /*collectedOnly=*/true);
  return true;
}

void OpenregSession::enableKinds(bool on, bool collectedOnly) {
  const auto& fn = api_.fn();
  auto set = [&](orActivityKind kind, bool wanted) {
    if (wanted) (on ? fn.enable : fn.disable)(kind);
  };
  const bool deviceWork = request_.anyDeviceActivity();
  // User-range spans are built from kernels, copies and memsets.
  set(OR_ACTIVITY_KIND_KERNEL, request_.kernels || request_.userAnnotations);
  // Collectives are kernels to Kineto. A version-1 runtime refuses the kind; no harm.
  set(OR_ACTIVITY_KIND_COMMUNICATION, request_.kernels || request_.userAnnotations);
  set(OR_ACTIVITY_KIND_MEMCPY, request_.memcpy || request_.userAnnotations);
  set(OR_ACTIVITY_KIND_MEMSET, request_.memset || request_.userAnnotations);
  set(OR_ACTIVITY_KIND_SYNCHRONIZATION, request_.syncs || request_.runtime);
  set(OR_ACTIVITY_KIND_RUNTIME, request_.runtime);
  set(OR_ACTIVITY_KIND_EXTERNAL_CORRELATION, deviceWork || request_.runtime);
  set(OR_ACTIVITY_KIND_CLOCK_SYNC, !collectedOnly);
  set(OR_ACTIVITY_KIND_OVERHEAD, !collectedOnly);
  // A library older than version 3 refuses these kinds: said once, in a warning.
  auto setMetric = [&](orActivityKind kind, bool wanted) {
    if (wanted && (on ? fn.enable : fn.disable)(kind) != orSuccess && on) metricsRefused_ = true;
  };
  setMetric(OR_ACTIVITY_KIND_KERNEL_METRICS, request_.metrics.anyKernelMetric() && request_.kernels);
  setMetric(OR_ACTIVITY_KIND_COUNTER, request_.metrics.anyCounter() && !collectedOnly);
}

void OpenregSession::takeClockSamples() {
  for (const auto& device : devices_) {
    orActivityClockSample sample{};
    if (api_.fn().getClockSample(device.index, &sample) == orSuccess) {
      directClockSamples_.push_back(
          {device.index, ClockPoint{sample.hostTimestamp, sample.deviceTimestamp, sample.uncertainty}});
    }
  }
}

void setHostClock(const HostClock* clock) { gHostClock.store(clock); }

// Before the window opens: host records of this trace take the HostClock.
void OpenregSession::useHostClock() {
  const HostClock* clock = gHostClock.load();
  const auto& fn = api_.fn();
  if (clock == nullptr || fn.registerTimestampCallback == nullptr) return;
  if (orError_t rc = fn.registerTimestampCallback(clock->stamp()); rc != orSuccess) {
    addError("orActivityRegisterTimestampCallback failed: " + api_.describe(rc) +
                 "; host records stay in CLOCK_REALTIME and may be off torch's ops by a few hundred ns",
             true);
    return;
  }
  hostClockTrace_ = clock->begin();
}

// Host times of the records, in the HostClock's units, to epoch ns.
void OpenregSession::convertHostTimes() {
  if (!hostClockToEpoch_) return;
  const auto& toEpoch = hostClockToEpoch_;
  auto epoch = [&](uint64_t t) { return static_cast<uint64_t>(std::max<int64_t>(0, toEpoch(t))); };
  uint64_t reference = 0;
  for (auto& call : records_.runtimeCalls) {
    if (reference == 0) reference = call.start;
    call.start = epoch(call.start);
    call.end = epoch(call.end);
  }
  for (auto& sync : records_.hostSyncs) {
    sync.start = epoch(sync.start);
    sync.end = epoch(sync.end);
  }
  for (auto& [device, points] : records_.clock) {
    for (auto& point : points) {
      if (reference == 0) reference = point.host;
      point.host = epoch(point.host);
    }
  }
  for (auto& [device, point] : directClockSamples_) point.host = epoch(point.host);
  for (auto& sample : records_.counterSamples) sample.timestamp = epoch(sample.timestamp);
  // Overhead is a sum of durations in the clock's units.
  if (reference != 0 && records_.overheadNs > 0) {
    records_.overheadNs = epoch(reference + records_.overheadNs) - epoch(reference);
  }
  hostClockToEpoch_ = nullptr;
}

void OpenregSession::start() {
  if (state_ == State::Configured) onDemandPhase_ = OnDemandStatus::Phase::Collecting;
  if (state_ != State::Configured) {
    if (state_ != State::Inert) {
      addError("start() called on a session that already started", true);
    }
    return;
  }
  window_ = WindowLease::tryAcquire();
  if (!window_.held()) {
    state_ = State::Inert;
    addError(
        "another openreg profiling session is already collecting (profilers nested or run from two "
        "threads); this trace gets no device activity",
        true);
    return;
  }
  const auto& fn = api_.fn();
  auto& pool = bufferPool();
  try {
    parseQueue_ = std::make_unique<ParseQueue>(pool, fn.getNextRecord, records_);
  } catch (const std::exception& e) {  // no thread to be had, or no memory
    window_.release();
    state_ = State::Inert;
    addError(std::string("could not start the thread that parses activity records (") + e.what() +
                 "); this trace gets no device activity",
             true);
    return;
  }
  pool.takeStats();  // start counting from this session
  pool.setQueue(parseQueue_.get());
  if (orError_t rc = fn.registerCallbacks(&RecordBufferPool::onRequested, &RecordBufferPool::onCompleted, &pool);
      rc != orSuccess) {
    pool.setQueue(nullptr);
    parseQueue_.reset();
    window_.release();
    state_ = State::Inert;
    addError("orActivityRegisterCallbacks failed: " + api_.describe(rc) + "; this trace gets no device activity", true);
    return;
  }
  applyCounterPeriod();
  enableKinds(true);
  if (metricsRefused_) {
    addError("the activity library '" + api_.library() + "' (API version " + std::to_string(api_.version()) +
                 ") refused the kernel-metric or counter records (version 3); this trace has none of the "
                 "requested metrics",
             true);
  }
  fn.getNumDroppedRecords(-1, &droppedAtStart_);
  countersAtStart_ = readRuntimeCounters(fn);
  useHostClock();
  takeClockSamples();
  startedNs_ = nowNs();
  if (orError_t rc = fn.enableTracing(); rc != orSuccess) {
    addError("orActivityEnableTracing failed: " + api_.describe(rc), true);
  }
  state_ = State::Running;
  std::lock_guard<std::mutex> guard(gRunningMutex);
  gRunning = this;
}

void OpenregSession::stop() {
  onDemandPhase_ = OnDemandStatus::Phase::Collected;
  if (state_ != State::Running) {
    if (state_ == State::Configured) {
      // Kineto stops sessions it never started when a trace is abandoned.
      state_ = State::Stopped;
    }
    return;
  }
  {
    std::lock_guard<std::mutex> guard(gRunningMutex);
    if (gRunning == this) gRunning = nullptr;
  }
  const auto& fn = api_.fn();
  auto& pool = bufferPool();
  stoppedNs_ = nowNs();
  fn.disableTracing();
  // Forced: also the partly filled buffers, after the device work queued in
  // the window has run. The runtime bounds the wait; no sleeping here.
  const orError_t flushed = fn.flushAll(OR_ACTIVITY_FLUSH_FORCED);
  timings_.flushNs = nowNs() - stoppedNs_;
  if (orError_t rc = flushed; rc != orSuccess) {
    ++flushTimeouts_;
    addError(
        "orActivityFlushAll failed: " + api_.describe(rc) + "; device work still running was left out of the trace",
        true);
  }
  takeClockSamples();
  if (hostClockTrace_) {
    fn.registerTimestampCallback(nullptr);
    hostClockToEpoch_ = hostClockTrace_->finish(&hostClockSource_);
    hostClockTrace_.reset();
  }
  enableKinds(false);
  // Unregistering delivers anything still pending.
  fn.registerCallbacks(nullptr, nullptr, nullptr);
  pool.setQueue(nullptr);
  const BufferStats bufferStats = pool.takeStats();
  buffersRefused_ = bufferStats.refused;
  buffersCompleted_ = bufferStats.completed;
  timings_.recordBytes = bufferStats.recordBytes;
  // Every buffer is in the queue: what is left of it is parsed after stop()
  // returns, and prepared() waits for that (finishParsing).
  if (parseQueue_) parseQueue_->close();

  uint64_t droppedNow = droppedAtStart_;
  fn.getNumDroppedRecords(-1, &droppedNow);
  droppedByRuntime_ = droppedNow >= droppedAtStart_ ? droppedNow - droppedAtStart_ : 0;
  if (const auto countersNow = readRuntimeCounters(fn); countersNow && countersAtStart_) {
    countersInWindow_ = countersNow->since(*countersAtStart_);
  }
  window_.release();
  state_ = State::Stopped;
  timings_.stopNs = nowNs() - stoppedNs_;

  if (droppedByRuntime_ > 0) {
    const std::string byKind = describeDropsByKind();
    addError(std::to_string(droppedByRuntime_) + " activity records were dropped by the runtime" +
                 (byKind.empty() ? "" : " (" + byKind + ")") + "; " + std::to_string(buffersRefused_) +
                 " buffer requests were refused at the OPENREG_PROFILER_BUFFER_LIMIT_MB limit; the device "
                 "lanes of this trace are incomplete",
             true);
  }
}

void OpenregSession::finishParsing() {
  if (!parseQueue_) return;  // stop() has detached it: prepared()'s callers stop a running session first
  const ParseQueue::Result parsed = parseQueue_->finish();
  parseQueue_.reset();
  bufferPool().trim();  // the buffers it gave back
  timings_.tailBuffers = parsed.tailBuffers;
  timings_.tailParseNs = parsed.tailNs;
  timings_.tailWaitNs = parsed.finishWaitNs;
  timings_.parseNs = parsed.parseNs;
  timings_.parseCpuNs = parsed.parseCpuNs;
  timings_.records = records_.recordsParsed;
  if (parsed.unparsedBuffers > 0) {
    addError(std::to_string(parsed.unparsedBuffers) + " activity buffers were not parsed (" +
                 (parsed.error != nullptr ? parsed.error
                                          : "handed back after the window closed, or no memory to queue them") +
                 "); their records are missing from the trace",
             true);
  }
  if (records_.malformedBuffers > 0 || records_.truncatedRecords > 0) {
    addError(std::to_string(records_.malformedBuffers) + " malformed buffers and " +
                 std::to_string(records_.truncatedRecords) + " truncated records were skipped",
             true);
  }
}

const PreparedTrace& OpenregSession::prepared() {
  if (!preparedDone_) {
    finishParsing();
    convertHostTimes();
    for (const auto& [device, point] : directClockSamples_) {
      records_.clock[device].push_back(point);
    }
    directClockSamples_.clear();
    const int64_t begin = nowNs();
    prepared_ = prepareTrace(records_);
    timings_.prepareNs = nowNs() - begin;
    preparedDone_ = true;
    records_.external.clear();  // joined: the prepared trace has its own copy
    giveBackFreedMemory();
    counts_.deviceActivities = prepared_.deviceOps.size();
    counts_.runtimeCalls = prepared_.runtime.size();
    // Against this session's own start/stop, a few microseconds inside Kineto's window.
    for (const auto& op : prepared_.deviceOps) {
      if (op.start < startedNs_ || op.end > stoppedNs_) ++counts_.outsideWindow;
    }
    if (prepared_.stats.unmappedDeviceOps > 0) {
      addError(std::to_string(prepared_.stats.unmappedDeviceOps) +
                   " device activities had no clock samples for their device and were left out",
               true);
    }
    if (prepared_.stats.streamZeroDeviceOps > 0) {
      addError(std::to_string(prepared_.stats.streamZeroDeviceOps) +
                   " device activities came on stream 0 from the activity library, which numbers streams "
                   "from 1; they are kept on a 'Stream 0' row",
               true);
    }
  }
  return prepared_;
}

void OpenregSession::emitStatsWarnings(const EmitStats& stats) {
  if (stats.launchedInWindowButOutside > 0) {
    // As Kineto leaves out CUDA's. An iteration-based on-demand trace ends in
    // the optimizer's step hook, while the device still runs that step.
    addError(std::to_string(stats.launchedInWindowButOutside) +
                 " device activities launched in the profiled region finished after it ended and were left out" +
                 (request_.onDemand ? " (an on-demand trace ends while the device still runs the last step's work)"
                                    : "; synchronize the device before leaving the profiler"),
             true);
  }
  if (stats.annotationOverlapsDropped > 0) {
    addError(std::to_string(stats.annotationOverlapsDropped) +
                 " record_function ranges interleaved on one stream and could not be drawn as nested spans",
             false);
  }
}

void OpenregSession::writeDebugLine(int64_t windowStart, int64_t windowEnd, int64_t processNs) const {
  const EmitStats& st = emitStats_;
  const SessionTimings& t = timings_;
  common::JsonWriter w;
  w.beginObject()
      .field("window_start", windowStart)
      .field("window_end", windowEnd)
      .field("emitted", st.emitted)
      .field("not_requested", st.notRequested)
      .field("outside_window", st.outOfWindow)
      .field("launched_inside_ended_outside", st.launchedInWindowButOutside)
      .field("before_requested_start", st.beforeRequestedStart)
      .field("flows", st.flows)
      .field("causality_fixes", st.causalityFixes)
      .field("max_causality_fix_ns", st.maxCausalityFixNs)
      .field("row_overlap_fixes", st.rowOverlapFixes)
      .field("annotation_overlaps_dropped", st.annotationOverlapsDropped)
      .field("annotations_without_range", st.annotationsWithoutRange)
      .field("records", t.records)
      .field("record_bytes", t.recordBytes);
  const std::pair<const char*, int64_t> millis[] = {{"stop_ms", t.stopNs},          {"flush_ms", t.flushNs},
                                                    {"tail_wait_ms", t.tailWaitNs}, {"prepare_ms", t.prepareNs},
                                                    {"emit_ms", t.emitNs},          {"process_ms", processNs}};
  for (const auto& [key, ns] : millis) w.key(key).valueFixed(static_cast<double>(ns) / 1e6, 3);
  w.endObject();
  std::fprintf(stderr, "openreg profiler emit stats: %s\n", w.str().c_str());
}

void OpenregSession::processTrace(libkineto::ActivityLogger& logger) {
  processTrace(
      logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, startedNs_, stoppedNs_);
}

void OpenregSession::processTrace(libkineto::ActivityLogger& logger,
                                  libkineto::getLinkedActivityCallback getLinkedActivity, int64_t startTime,
                                  int64_t endTime) {
  processed_ = true;  // Kineto writes the trace after this
  if (state_ == State::Inert || emitted_) {
    return;
  }
  if (state_ == State::Running) {
    stop();  // the callbacks must be done writing records_ before we read it
  }
  const int64_t processStart = nowNs();
  const PreparedTrace& trace = prepared();
  EmitOptions options;
  options.kernels = request_.kernels;
  options.memcpy = request_.memcpy;
  options.memset = request_.memset;
  options.syncs = request_.syncs;
  options.userAnnotations = request_.userAnnotations;
  options.runtime = request_.runtime;
  options.windowStart = startTime;
  options.windowEnd = endTime;
  if (deferredStart()) {
    options.notBefore = request_.requestedStartNs;
    if (request_.durationNs > 0) {
      options.windowEnd = std::min(endTime, request_.requestedStartNs + request_.durationNs);
    }
  }

  // torch keeps correlation ids as int32; truncate the same way.
  auto linked = [&](uint64_t externalId) -> const libkineto::ITraceActivity* {
    return getLinkedActivity ? getLinkedActivity(static_cast<int32_t>(externalId)) : nullptr;
  };
  // Kineto keeps a pointer to each activity (handleActivity) and takes this
  // buffer over afterwards (getTraceBuffer), so each activity is built once,
  // in place, and never copied (handleGenericActivity would copy it). The
  // buffer's one entry is the store that owns them.
  auto buffer = std::make_unique<libkineto::CpuTraceBuffer>();
  buffer->span = libkineto::TraceSpan(startTime, endTime, "openreg");
  buffer->span.iteration = 0;
  buffer->gpuOpCount = 0;
  auto owned = std::make_unique<ActivityStore>(buffer->span);
  ActivityStore& store = *owned;
  buffer->activities.push_back(std::move(owned));
  // A launch and its device work ask for the same op; Kineto's lookup is a
  // hash map, this direct-mapped cache halves the calls.
  struct LinkedSlot {
    uint64_t id = 0;
    const libkineto::ITraceActivity* activity = nullptr;
  };
  std::vector<LinkedSlot> linkedCache(1024);
  auto linkedOp = [&](uint64_t id) -> const libkineto::ITraceActivity* {
    if (id == 0) return nullptr;
    LinkedSlot& slot = linkedCache[id % linkedCache.size()];
    if (slot.id != id) slot = {id, linked(id)};
    return slot.activity;
  };

  const int64_t emitStart = nowNs();
  EmitResult result;
  auto rangeName = [&](uint64_t userId) -> std::optional<std::string> {
    const auto* range = linked(userId);
    return range != nullptr ? std::optional<std::string>(range->name()) : std::nullopt;
  };
  const MetricsRequest& metrics = request_.metrics;
  std::unordered_map<uint64_t, const KernelMetrics*> kernelMetrics;
  if (metrics.perKernel && metrics.anyKernelMetric())
    kernelMetrics = kernelMetricsByCorrelation(records_.kernelMetrics);
  store.setMetricsRequest(metrics);
  emitTrace(trace, options, rangeName, result, [&](const TraceEvent& event) {
    const OpenregActivity& activity = store.add(event, linkedOp(event.linkedOp));
    if (!kernelMetrics.empty() && event.type == TraceEventType::Kernel && event.device != nullptr) {
      if (auto it = kernelMetrics.find(event.device->op->correlationId); it != kernelMetrics.end()) {
        store.attachKernelMetrics(activity, *it->second);
      }
    }
    logger.handleActivity(activity);
    if (event.device != nullptr) ++buffer->gpuOpCount;
  });
  store.doneBuilding();
  emitCounters(logger, *buffer, options.windowStart, options.windowEnd);
  // The activities have what they need: the records and joins go now, not
  // when Kineto destroys the session.
  const PrepareStats prepareStats = prepared_.stats;
  prepared_ = PreparedTrace{};
  prepared_.stats = prepareStats;
  records_.releaseRecords();
  // Kineto draws this buffer's span as a row of its own ("openreg (0)"):
  // the capture window, with the device activities counted.
  buffer->span.opCount = buffer->gpuOpCount;
  traceBuffer_ = std::move(buffer);
  timings_.emitNs = nowNs() - emitStart;
  timings_.activities = result.stats.emitted;
  rows_ = std::move(result.rows);
  hostSyncRows_ = std::move(result.hostSyncRows);
  emitStats_ = result.stats;
  if (std::getenv("OPENREG_PROFILER_DEBUG") != nullptr) {
    // One JSON line for tests and bug reports: what processTrace decided.
    writeDebugLine(startTime, endTime, nowNs() - processStart);
  }
  emitted_ = true;
  emitStatsWarnings(emitStats_);

  // getDeviceInfo() names device 0; the others are named here.
  for (size_t i = 1; i < devices_.size(); ++i) {
    logger.handleDeviceInfo(deviceInfo(devices_[i]), startTime);
  }
}

bool OpenregSession::deferredStart() const {
  // Kineto's synchronous path (torch.profiler) passes ts = now + 7 s and a
  // default duration whatever the real window is; a schedule whose warm-up
  // outlasts those 7 s starts the session after ts, so timing alone cannot
  // tell the two apart. Only an on-demand trace that started at or after ts
  // leaves out its warm-up before ts and its overrun past ts + duration.
  return request_.onDemand && request_.requestedStartNs > 0 && startedNs_ >= request_.requestedStartNs;
}

libkineto::DeviceInfo OpenregSession::deviceInfo(const DeviceDescription& device) const {
  return libkineto::DeviceInfo{.id = device.index,
                               .sortIndex = libkineto::kExceedMaxPid + device.index,
                               .name = kinetoSafe("openreg:" + std::to_string(device.index) + " (" + device.name + ")"),
                               .label = "openreg " + std::to_string(device.index)};
}

std::unique_ptr<libkineto::DeviceInfo> OpenregSession::getDeviceInfo() {
  if (devices_.empty()) {
    // No library (or no device): still name the lane, so Kineto does not
    // invent "GPU 0..15" rows, and say why it is empty.
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{.id = 0,
                                                                         .sortIndex = libkineto::kExceedMaxPid,
                                                                         .name = "openreg (device tracing unavailable)",
                                                                         .label = "openreg"});
  }
  return std::make_unique<libkineto::DeviceInfo>(deviceInfo(devices_.front()));
}

std::string OpenregSession::streamName(int32_t device, uint64_t stream) const {
  std::string name = "Stream " + std::to_string(stream);
  if (api_.available()) {
    orActivityStreamInfo info{};
    info.structSize = sizeof(info);
    if (api_.fn().getStreamInfo(device, stream, &info) == orSuccess) {
      if (info.isDefault) {
        name += " (default)";
      } else if (info.priority != 0) {
        name += " (priority " + std::to_string(info.priority) + ")";
      }
    }
  }
  return name;
}

std::vector<libkineto::ResourceInfo> OpenregSession::getResourceInfos() {
  std::vector<libkineto::ResourceInfo> out;
  for (const auto& [key, count] : rows_) {
    const auto& [device, stream] = key;
    out.push_back(libkineto::ResourceInfo{.id = static_cast<int64_t>(stream),
                                          .sortIndex = static_cast<int64_t>(stream),
                                          .deviceId = device,
                                          .name = kinetoSafe(streamName(device, stream))});
  }
  // Host waits below the streams, one row per waiting thread.
  for (const auto& [key, thread] : hostSyncRows_) {
    const auto& [device, row] = key;
    out.push_back(libkineto::ResourceInfo{.id = row,
                                          .sortIndex = kHostSyncRowSortBase + row,
                                          .deviceId = device,
                                          .name = "Host waits (thread " + std::to_string(thread) + ")"});
  }
  return out;
}

std::unique_ptr<libkineto::CpuTraceBuffer> OpenregSession::getTraceBuffer() {
  // The activities the logger points at: Kineto keeps them as long as the trace.
  return std::move(traceBuffer_);
}

void OpenregSession::pushExternal(orActivityExternalCorrelationKind kind, uint64_t id) {
  if (!api_.available()) {
    return;
  }
  if (tPushes.generation != generation_) {
    tPushes = ThreadPushes{};
    tPushes.generation = generation_;
  }
  if (api_.fn().pushExternalCorrelationId(kind, id) == orSuccess) {
    ++tPushes.depth[kind];
  }
}

void OpenregSession::popExternal(orActivityExternalCorrelationKind kind) {
  if (!api_.available() || tPushes.generation != generation_ || tPushes.depth[kind] == 0) {
    return;
  }
  --tPushes.depth[kind];
  api_.fn().popExternalCorrelationId(kind, nullptr);
}

void OpenregSession::pushCorrelationId(uint64_t id) { pushExternal(OR_EXTERNAL_CORRELATION_KIND_OPERATOR, id); }
void OpenregSession::popCorrelationId() { popExternal(OR_EXTERNAL_CORRELATION_KIND_OPERATOR); }
void OpenregSession::pushUserCorrelationId(uint64_t id) { pushExternal(OR_EXTERNAL_CORRELATION_KIND_USER, id); }
void OpenregSession::popUserCorrelationId() { popExternal(OR_EXTERNAL_CORRELATION_KIND_USER); }

std::string OpenregSession::getDeviceProperties() {
  // Kineto joins the sessions' texts with commas inside its "deviceProperties" array.
  std::string out;
  for (const auto& device : devices_) {
    common::JsonWriter w;
    w.beginObject()
        .field("id", device.index)
        .field("name", device.name)
        .field("backend", "openreg")
        .field("totalGlobalMem", device.info.totalMemory)
        .field("computeUnits", device.info.computeUnits)
        .field("clockRateKHz", device.info.clockRateKHz)
        .field("executorThreads", device.info.executorThreads);
    // Declared peaks, for rooflines (0: the library declares none; an older
    // one leaves them so).
    if (device.info.peakFlopsPerSecond > 0) w.key("peakFlopsPerSecond").valueFixed(device.info.peakFlopsPerSecond, 0);
    if (device.info.peakBytesPerSecond > 0) w.key("peakBytesPerSecond").valueFixed(device.info.peakBytesPerSecond, 0);
    w.endObject();
    if (!out.empty()) out += ",";
    out += w.str();
  }
  return out;
}

std::string OpenregSession::describeDropsByKind() const {
  if (!countersInWindow_) return "";
  std::string out;
  for (size_t kind = 0; kind < countersInWindow_->droppedByKind.size(); ++kind) {
    if (const uint64_t n = countersInWindow_->droppedByKind[kind]; n > 0) {
      out += (out.empty() ? "" : ", ") + activityKindName(kind) + " " + std::to_string(n);
    }
  }
  return out;
}

void OpenregSession::writeRuntimeCounters(common::JsonWriter& out) const {
  out.key("late_clock_syncs");
  if (countersInWindow_) {
    out.value(countersInWindow_->lateClockSyncs);
  } else {
    out.null();
  }
  out.key("dropped_by_kind");
  if (!countersInWindow_) {
    out.null();
    return;
  }
  out.beginObject();
  for (size_t kind = 0; kind < countersInWindow_->droppedByKind.size(); ++kind) {
    if (const uint64_t n = countersInWindow_->droppedByKind[kind]; n > 0) out.field(activityKindName(kind), n);
  }
  out.endObject();
}

std::unordered_map<std::string, std::string> OpenregSession::getMetadata() {
  std::unordered_map<std::string, std::string> out;
  if (state_ == State::Inert) {
    const auto errs = errors();
    out["openreg_profiler_error"] = jsonString(errs.empty() ? "device tracing inactive" : errs.front());
    return out;
  }
  if (state_ == State::Running) {
    stop();  // as processTrace does: the records are not complete before
  }
  // Kineto asks before processTrace.
  const PreparedTrace& trace = prepared();
  const uint64_t outside = counts_.outsideWindow;
  const uint64_t dropped = droppedByRuntime_;
  out["openreg_dropped_records"] = std::to_string(dropped);
  common::JsonWriter w;
  w.beginObject().field("library", api_.library()).field("api_version", api_.version()).key("requested");
  request_.writeTypes(w);
  w.field("records", records_.recordsParsed)
      .field("device_activities", counts_.deviceActivities)
      .field("runtime_calls", counts_.runtimeCalls)
      .field("dropped_by_runtime", dropped);
  writeRuntimeCounters(w);
  w.field("buffers_refused", buffersRefused_)
      .field("buffers_completed", buffersCompleted_)
      .field("unknown_records", records_.unknownKinds)
      .field("truncated_records", records_.truncatedRecords)
      .field("malformed_buffers", records_.malformedBuffers)
      .field("duplicates", trace.stats.duplicateRecords)
      .field("unmapped_device_activities", trace.stats.unmappedDeviceOps)
      .field("device_activities_on_stream_0", trace.stats.streamZeroDeviceOps)
      .field("clock_samples", trace.stats.clockSamples)
      .field("rejected_clock_samples", trace.stats.rejectedClockSamples)
      .field("device_activities_outside_window", outside)
      .field("flush_failures", flushTimeouts_)
      .field("tracing_overhead_ns", records_.overheadNs)
      .field("host_clock", hostClockSource_)
      .field("requested_start_ms", request_.requestedStartNs / 1000000)
      .field("requested_duration_ms", request_.durationNs / 1000000)
      .field("deferred_start", deferredStart());
  writeOnDemand(w);
  writeClientConfig(w);
  writeMetrics(w, trace);
  w.endObject();
  out["openreg_profiler"] = w.take();
  return out;
}

}  // namespace openreg::profiler
