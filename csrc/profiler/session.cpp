#include "session.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include <c10/util/Exception.h>
#include <libkineto.h>
#include <output_base.h>

#include "record_buffers.h"
#include "slab_arena.h"

namespace openreg::profiler {
namespace {

using libkineto::ActivityType;

// The activity API has one client and one window: a second session that
// starts while another holds it stays inert instead of corrupting both.
std::mutex gWindowMutex;
const OpenregSession* gWindowOwner = nullptr;
std::atomic<const HostClock*> gHostClock{nullptr};

std::atomic<uint64_t> gNextGeneration{1};

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

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string jsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// Kineto 2.13 writes names into the JSON unescaped (it only turns '\\' into
// '/' and drops newlines) and replaces a name holding any non-printable byte
// by "unknown". A quote in a kernel name would break the whole file, so
// names are made safe here, keeping as much of them as possible.
std::string kinetoSafe(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"') {
      c = '\'';
    } else if (c == '\\') {
      c = '/';
    } else if (byte < 0x20 || byte >= 0x7f) {
      c = '?';
    }
  }
  return out;
}

// Appends args as the body of a JSON object, the form metadataJson() has.
class JsonArgs final : public ArgWriter {
 public:
  std::string out;
  void integer(const char* key, int64_t value) override { put(key, std::to_string(value)); }
  void unsignedInteger(const char* key, uint64_t value) override { put(key, std::to_string(value)); }
  void text(const char* key, const char* value) override {
    put(key, std::string("\"") + value + "\"");  // our values are fixed words: nothing to escape
  }
  void json(const char* key, std::string_view value) override { put(key, value); }

 private:
  void put(const char* key, std::string_view value) {
    if (!out.empty()) out += ", ";
    out += '"';
    out += key;
    out += "\": ";
    out += value;
  }
};

// Formats one arg's value, as getMetadataValue returns it (strings unquoted).
class OneArg final : public ArgWriter {
 public:
  explicit OneArg(const std::string& key) : key_(key) {}
  std::optional<std::string> value;
  bool wants(const char* key) override { return !value && key_ == key; }
  void integer(const char* key, int64_t v) override { if (wants(key)) value = std::to_string(v); }
  void unsignedInteger(const char* key, uint64_t v) override { if (wants(key)) value = std::to_string(v); }
  void text(const char* key, const char* v) override { if (wants(key)) value = v; }
  void json(const char* key, std::string_view v) override { if (wants(key)) value = std::string(v); }

 private:
  const std::string& key_;
};

// A Kineto activity that formats its args only when asked (JSON export,
// getMetadataValue), from a compact copy of its record, as Kineto's own
// CUPTI activities do. GenericTraceActivity's map of formatted strings would
// be most of what a trace costs, in time and in memory. Metadata others add
// with addMetadata is kept as well.
class OpenregActivity : public libkineto::GenericTraceActivity {
 public:
  OpenregActivity(const libkineto::TraceSpan& span, libkineto::ActivityType type, const EventArgs& args)
      : GenericTraceActivity(span, type, std::string()), args_(args) {}

  const std::string metadataJson() const override {
    JsonArgs json;
    writeArgs(args_, json);
    const std::string added = GenericTraceActivity::metadataJson();
    if (!added.empty()) json.out += (json.out.empty() ? "" : ", ") + added;
    return json.out;
  }

  const std::string getMetadataValue(const std::string& key) const override {
    OneArg one(key);
    writeArgs(args_, one);
    return one.value ? *one.value : GenericTraceActivity::getMetadataValue(key);
  }

  // GenericTraceActivity::log hands loggers a reference to copy (and a copy
  // would lose the args): pass it as what it is.
  void log(libkineto::ActivityLogger& logger) const override { logger.handleActivity(*this); }

  // From the trace's slabs only; Kineto deletes them through the virtual
  // destructor, which finds this operator delete.
  static void* operator new(size_t size, SlabArena& arena) { return arena.allocate(size); }
  static void operator delete(void* object, SlabArena&) noexcept { SlabArena::release(object); }
  static void operator delete(void* object) noexcept { SlabArena::release(object); }
  static void* operator new(size_t) = delete;

 protected:
  EventArgs args_;
};

// A collective keeps its own copy of the payload: the record set that held
// it goes with the session, before Kineto writes the trace.
class OpenregCommunicationActivity final : public OpenregActivity {
 public:
  OpenregCommunicationActivity(const libkineto::TraceSpan& span, libkineto::ActivityType type,
                               const EventArgs& args, const CommunicationInfo& info)
      : OpenregActivity(span, type, args), info_(info) {
    args_.communication = &info_;
  }

 private:
  CommunicationInfo info_;
};

ActivityType kinetoType(TraceEventType type) {
  switch (type) {
    case TraceEventType::Kernel: return ActivityType::CONCURRENT_KERNEL;
    case TraceEventType::Memcpy: return ActivityType::GPU_MEMCPY;
    case TraceEventType::Memset: return ActivityType::GPU_MEMSET;
    // Kineto's only synchronisation type; torch files it under the device.
    case TraceEventType::StreamWait: return ActivityType::CUDA_SYNC;
    case TraceEventType::UserAnnotation: return ActivityType::GPU_USER_ANNOTATION;
    case TraceEventType::Runtime: return ActivityType::PRIVATEUSE1_RUNTIME;
  }
  return ActivityType::CONCURRENT_KERNEL;
}

} // namespace

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

std::string SessionRequest::describe() const {
  std::string out = "[";
  auto add = [&](bool on, const char* name) {
    if (on) out += (out.size() > 1 ? ", \"" : "\"") + std::string(name) + "\"";
  };
  add(kernels, "kernel");
  add(memcpy, "gpu_memcpy");
  add(memset, "gpu_memset");
  add(userAnnotations, "gpu_user_annotation");
  add(runtime, "privateuse1_runtime");
  add(syncs, "cuda_sync");
  return out + "]";
}

OpenregSession::OpenregSession(const ActivityApi& api, SessionRequest request)
    : api_(api), request_(request), generation_(gNextGeneration.fetch_add(1)) {
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
  try {
    if (state_ == State::Running) {
      stop();
    }
  } catch (...) {
    // A destructor must not throw; stop() already recorded what went wrong.
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

void OpenregSession::enableKinds(bool on) {
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
  set(OR_ACTIVITY_KIND_CLOCK_SYNC, true);
  set(OR_ACTIVITY_KIND_OVERHEAD, true);
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
  for (auto& [device, points] : records_.clock) {
    for (auto& point : points) {
      if (reference == 0) reference = point.host;
      point.host = epoch(point.host);
    }
  }
  for (auto& [device, point] : directClockSamples_) point.host = epoch(point.host);
  // Overhead is a sum of durations in the clock's units.
  if (reference != 0 && records_.overheadNs > 0) {
    records_.overheadNs = epoch(reference + records_.overheadNs) - epoch(reference);
  }
  hostClockToEpoch_ = nullptr;
}

void OpenregSession::start() {
  if (state_ != State::Configured) {
    if (state_ != State::Inert) {
      addError("start() called on a session that already started", true);
    }
    return;
  }
  {
    std::lock_guard<std::mutex> guard(gWindowMutex);
    if (gWindowOwner != nullptr) {
      state_ = State::Inert;
      addError(
          "another openreg profiling session is already collecting (profilers nested or run from two "
          "threads); this trace gets no device activity",
          true);
      return;
    }
    gWindowOwner = this;
    ownsWindow_ = true;
  }
  const auto& fn = api_.fn();
  auto& pool = bufferPool();
  pool.takeStats();  // start counting from this session
  pool.setSink(&records_, fn.getNextRecord);
  if (orError_t rc = fn.registerCallbacks(&RecordBufferPool::onRequested, &RecordBufferPool::onCompleted, &pool);
      rc != orSuccess) {
    pool.setSink(nullptr, nullptr);
    {
      std::lock_guard<std::mutex> guard(gWindowMutex);
      gWindowOwner = nullptr;
      ownsWindow_ = false;
    }
    state_ = State::Inert;
    addError("orActivityRegisterCallbacks failed: " + api_.describe(rc) + "; this trace gets no device activity",
             true);
    return;
  }
  enableKinds(true);
  fn.getNumDroppedRecords(-1, &droppedAtStart_);
  useHostClock();
  takeClockSamples();
  startedNs_ = nowNs();
  if (orError_t rc = fn.enableTracing(); rc != orSuccess) {
    addError("orActivityEnableTracing failed: " + api_.describe(rc), true);
  }
  state_ = State::Running;
}

void OpenregSession::stop() {
  if (state_ != State::Running) {
    if (state_ == State::Configured) {
      // Kineto stops sessions it never started when a trace is abandoned.
      state_ = State::Stopped;
    }
    return;
  }
  const auto& fn = api_.fn();
  stoppedNs_ = nowNs();
  fn.disableTracing();
  // Forced: also the partly filled buffers, after the device work queued in
  // the window has run. The runtime bounds the wait; no sleeping here.
  const orError_t flushed = fn.flushAll(OR_ACTIVITY_FLUSH_FORCED);
  timings_.flushNs = nowNs() - stoppedNs_;
  if (orError_t rc = flushed; rc != orSuccess) {
    ++flushTimeouts_;
    addError("orActivityFlushAll failed: " + api_.describe(rc) +
                 "; device work still running was left out of the trace",
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
  auto& pool = bufferPool();
  pool.setSink(nullptr, nullptr);
  const BufferStats bufferStats = pool.takeStats();
  buffersRefused_ = bufferStats.refused;
  buffersCompleted_ = bufferStats.completed;
  timings_.recordBytes = bufferStats.recordBytes;
  timings_.records = records_.recordsParsed;
  pool.trim();

  uint64_t droppedNow = droppedAtStart_;
  fn.getNumDroppedRecords(-1, &droppedNow);
  droppedByRuntime_ = droppedNow >= droppedAtStart_ ? droppedNow - droppedAtStart_ : 0;
  {
    std::lock_guard<std::mutex> guard(gWindowMutex);
    if (gWindowOwner == this) gWindowOwner = nullptr;
    ownsWindow_ = false;
  }
  state_ = State::Stopped;
  timings_.stopNs = nowNs() - stoppedNs_;

  if (droppedByRuntime_ > 0) {
    addError(std::to_string(droppedByRuntime_) +
                 " activity records were dropped by the runtime (" + std::to_string(buffersRefused_) +
                 " buffer requests refused at the OPENREG_PROFILER_BUFFER_LIMIT_MB limit); the device "
                 "lanes of this trace are incomplete",
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
    convertHostTimes();
    for (const auto& [device, point] : directClockSamples_) {
      records_.clock[device].push_back(point);
    }
    directClockSamples_.clear();
    const int64_t begin = nowNs();
    prepared_ = prepareTrace(records_);
    timings_.prepareNs = nowNs() - begin;
    preparedDone_ = true;
    if (prepared_.stats.unmappedDeviceOps > 0) {
      addError(std::to_string(prepared_.stats.unmappedDeviceOps) +
                   " device activities had no clock samples for their device and were left out",
               true);
    }
  }
  return prepared_;
}

void OpenregSession::emitStatsWarnings(const EmitStats& stats) {
  if (stats.launchedInWindowButOutside > 0) {
    addError(std::to_string(stats.launchedInWindowButOutside) +
                 " device activities launched in the profiled region finished after it ended and were left "
                 "out; synchronize the device before leaving the profiler",
             true);
  }
  if (stats.annotationOverlapsDropped > 0) {
    addError(std::to_string(stats.annotationOverlapsDropped) +
                 " record_function ranges interleaved on one stream and could not be drawn as nested spans",
             false);
  }
}

void OpenregSession::processTrace(libkineto::ActivityLogger& logger) {
  processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, startedNs_,
               stoppedNs_);
}

void OpenregSession::processTrace(libkineto::ActivityLogger& logger,
                                  libkineto::getLinkedActivityCallback getLinkedActivity, int64_t startTime,
                                  int64_t endTime) {
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
  // in place, and never copied (handleGenericActivity would copy it).
  auto buffer = std::make_unique<libkineto::CpuTraceBuffer>();
  SlabArena arena;
  buffer->span = libkineto::TraceSpan(startTime, endTime, "openreg");
  buffer->span.iteration = 0;
  buffer->gpuOpCount = 0;
  // Kernel names are interned by the runtime: one safe copy per name.
  std::unordered_map<const char*, std::string> safeNames;
  auto safeName = [&](std::string_view name) -> std::string {
    auto it = safeNames.find(name.data());
    if (it != safeNames.end() && it->second.size() == name.size()) return it->second;
    std::string safe = kinetoSafe(name);
    if (safeNames.size() < 4096) safeNames.emplace(name.data(), safe);
    return safe;
  };
  // A launch and its device work ask for the same op; Kineto's lookup is a
  // hash map, this direct-mapped cache halves the calls.
  struct LinkedSlot {
    uint64_t id = 0;
    const libkineto::ITraceActivity* activity = nullptr;
  };
  std::vector<LinkedSlot> linkedCache(1024);
  auto linkedOp = [&](uint64_t id) {
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
  emitTrace(trace, options, rangeName, result, [&](const TraceEvent& event) {
    OpenregActivity* made =
        event.communication != nullptr
            ? new (arena) OpenregCommunicationActivity(buffer->span, kinetoType(event.type), eventArgsOf(event),
                                                       *event.communication)
            : new (arena) OpenregActivity(buffer->span, kinetoType(event.type), eventArgsOf(event));
    auto& act = *buffer->activities.emplace_back(made);
    act.activityName = safeName(event.name);
    act.startTime = event.start;
    act.endTime = event.end;
    if (event.type == TraceEventType::UserAnnotation) {
      // Kineto widens these by 1 ns each side when writing JSON; undo it so
      // the span does not poke out of the work it covers. Its id is the
      // range's own, which Kineto writes as "External id", as for CUDA.
      if (static_cast<uint64_t>(act.endTime) - static_cast<uint64_t>(act.startTime) >= 2) {  // end >= start
        act.startTime += 1;
        act.endTime -= 1;
      }
      act.id = static_cast<int32_t>(event.userRange);
    } else {
      act.id = event.id;
    }
    act.device = static_cast<int32_t>(event.pid);
    act.resource = static_cast<int32_t>(event.tid);
    act.threadId = event.threadId;
    if (event.flowId != 0) {
      act.flow.id = event.flowId;
      act.flow.type = libkineto::kLinkAsyncCpuGpu;
      act.flow.start = event.flowStart ? 1 : 0;
    }
    if (event.linkedOp != 0) {
      act.linked = linkedOp(event.linkedOp);
    }
    if (event.device != nullptr) ++buffer->gpuOpCount;
    logger.handleActivity(act);
  });
  // Kineto draws this buffer's span as a row of its own ("openreg (0)"):
  // the capture window, with the device activities counted.
  buffer->span.opCount = buffer->gpuOpCount;
  traceBuffer_ = std::move(buffer);
  timings_.emitNs = nowNs() - emitStart;
  timings_.activities = result.stats.emitted;
  rows_ = std::move(result.rows);
  emitStats_ = result.stats;
  if (std::getenv("OPENREG_PROFILER_DEBUG") != nullptr) {
    // One JSON line for tests and bug reports: what processTrace decided.
    const EmitStats& st = emitStats_;
    std::fprintf(stderr,
                 "openreg profiler emit stats: {\"window_start\": %" PRId64 ", \"window_end\": %" PRId64
                 ", \"emitted\": %" PRIu64 ", \"not_requested\": %" PRIu64 ", \"outside_window\": %" PRIu64
                 ", \"launched_inside_ended_outside\": %" PRIu64 ", \"before_requested_start\": %" PRIu64
                 ", \"flows\": %" PRIu64 ", \"causality_fixes\": %" PRIu64 ", \"max_causality_fix_ns\": %" PRId64
                 ", \"row_overlap_fixes\": %" PRIu64 ", \"annotation_overlaps_dropped\": %" PRIu64
                 ", \"annotations_without_range\": %" PRIu64 ", \"records\": %" PRIu64
                 ", \"record_bytes\": %" PRIu64 ", \"stop_ms\": %.3f, \"flush_ms\": %.3f, \"prepare_ms\": %.3f"
                 ", \"emit_ms\": %.3f, \"process_ms\": %.3f}\n",
                 startTime, endTime, st.emitted, st.notRequested, st.outOfWindow, st.launchedInWindowButOutside,
                 st.beforeRequestedStart, st.flows, st.causalityFixes, st.maxCausalityFixNs, st.rowOverlapFixes,
                 st.annotationOverlapsDropped, st.annotationsWithoutRange, timings_.records, timings_.recordBytes,
                 timings_.stopNs / 1e6, timings_.flushNs / 1e6, timings_.prepareNs / 1e6, timings_.emitNs / 1e6,
                 (nowNs() - processStart) / 1e6);
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
  return libkineto::DeviceInfo{
      .id = device.index,
      .sortIndex = libkineto::kExceedMaxPid + device.index,
      .name = kinetoSafe("openreg:" + std::to_string(device.index) + " (" + device.name + ")"),
      .label = "openreg " + std::to_string(device.index)};
}

std::unique_ptr<libkineto::DeviceInfo> OpenregSession::getDeviceInfo() {
  if (devices_.empty()) {
    // No library (or no device): still name the lane, so Kineto does not
    // invent "GPU 0..15" rows, and say why it is empty.
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
        .id = 0,
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
  std::string out;
  for (const auto& device : devices_) {
    if (!out.empty()) out += ",";
    out += "\n      {\"id\": " + std::to_string(device.index) + ", \"name\": " + jsonString(device.name) +
        ", \"backend\": \"openreg\", \"totalGlobalMem\": " + std::to_string(device.info.totalMemory) +
        ", \"computeUnits\": " + std::to_string(device.info.computeUnits) +
        ", \"clockRateKHz\": " + std::to_string(device.info.clockRateKHz) +
        ", \"executorThreads\": " + std::to_string(device.info.executorThreads) + "}";
  }
  return out;
}

std::unordered_map<std::string, std::string> OpenregSession::getMetadata() {
  std::unordered_map<std::string, std::string> out;
  if (state_ == State::Inert) {
    const auto errs = errors();
    out["openreg_profiler_error"] = jsonString(errs.empty() ? "device tracing inactive" : errs.front());
    return out;
  }
  // Kineto asks before processTrace: window figures use this session's own
  // start/stop times, a few microseconds inside Kineto's window.
  const PreparedTrace& trace = prepared();
  uint64_t outside = 0;
  for (const auto& op : trace.deviceOps) {
    if (op.start < startedNs_ || op.end > stoppedNs_) ++outside;
  }
  const uint64_t dropped = droppedByRuntime_;
  out["openreg_dropped_records"] = std::to_string(dropped);
  std::ostringstream s;
  s << "{\"library\": " << jsonString(api_.library()) << ", \"api_version\": " << api_.version()
    << ", \"requested\": " << request_.describe() << ", \"records\": " << records_.recordsParsed
    << ", \"device_activities\": " << trace.deviceOps.size() << ", \"runtime_calls\": " << trace.runtime.size()
    << ", \"dropped_by_runtime\": " << dropped << ", \"buffers_refused\": " << buffersRefused_
    << ", \"buffers_completed\": " << buffersCompleted_ << ", \"unknown_records\": " << records_.unknownKinds
    << ", \"truncated_records\": " << records_.truncatedRecords
    << ", \"malformed_buffers\": " << records_.malformedBuffers
    << ", \"duplicates\": " << trace.stats.duplicateRecords
    << ", \"unmapped_device_activities\": " << trace.stats.unmappedDeviceOps
    << ", \"clock_samples\": " << trace.stats.clockSamples
    << ", \"rejected_clock_samples\": " << trace.stats.rejectedClockSamples
    << ", \"device_activities_outside_window\": " << outside << ", \"flush_failures\": " << flushTimeouts_
    << ", \"tracing_overhead_ns\": " << records_.overheadNs
    << ", \"host_clock\": " << jsonString(hostClockSource_)
    << ", \"requested_start_ms\": " << request_.requestedStartNs / 1000000
    << ", \"requested_duration_ms\": " << request_.durationNs / 1000000
    << ", \"deferred_start\": " << (deferredStart() ? "true" : "false") << "}";
  out["openreg_profiler"] = s.str();
  return out;
}

} // namespace openreg::profiler
