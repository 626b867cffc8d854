#include "trace_builder.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <iterator>
#include <tuple>
#include <unordered_map>

#include "openreg/activity.h"
#include "trace_steps.h"

namespace openreg::profiler {
namespace {

// Host timestamps are epoch ns; a runtime's value past INT64_MAX is garbage,
// kept as the latest representable time so that order and ends hold.
int64_t hostNs(uint64_t ns) { return ns > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(ns); }
int64_t callStart(const RuntimeCall& call) { return hostNs(call.start); }
int64_t callEnd(const RuntimeCall& call) { return std::max(callStart(call), hostNs(call.end)); }

// to - from for to >= from, without overflow (saturated).
int64_t elapsed(int64_t from, int64_t to) {
  const uint64_t difference = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
  return difference > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(difference);
}

const char* memoryKindName(uint8_t kind) {
  switch (kind) {
    case OR_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "Pageable";
    case OR_ACTIVITY_MEMORY_KIND_PINNED:
      return "Pinned";
    case OR_ACTIVITY_MEMORY_KIND_DEVICE:
      return "Device";
    default:
      return "Unknown";
  }
}

const char* syncTypeName(uint32_t type) {
  switch (type) {
    case OR_ACTIVITY_SYNC_STREAM:
      return "stream";
    case OR_ACTIVITY_SYNC_EVENT:
      return "event";
    case OR_ACTIVITY_SYNC_DEVICE:
      return "device";
    case OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT:
      return "stream wait event";
    default:
      return "unknown";
  }
}

// Kineto's names for CUPTI's synchronisation kinds: the row's name and its
// "cuda_sync_kind", which HolisticTraceAnalysis keys its sync edges on. The
// kinds are the device's own; only the category is named after CUDA, as
// Kineto has no other (ActivityType::CUDA_SYNC).
const char* syncKindName(uint32_t type) {
  switch (type) {
    case OR_ACTIVITY_SYNC_STREAM:
      return "Stream Sync";
    case OR_ACTIVITY_SYNC_EVENT:
      return "Event Sync";
    case OR_ACTIVITY_SYNC_DEVICE:
      return "Context Sync";
    case OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT:
      return "Stream Wait Event";
    default:
      return "Unknown Sync";
  }
}

bool waitsOnEvent(uint32_t syncType) {
  return syncType == OR_ACTIVITY_SYNC_EVENT || syncType == OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT;
}

// A sync's own args, as Kineto writes CUPTI's: the kind and, for waits on an
// event, the record they waited on (-1 where it is unknown).
void writeSyncArgs(const EventArgs& a, ArgWriter& out) {
  out.text("cuda_sync_kind", syncKindName(a.syncType));
  if (!waitsOnEvent(a.syncType)) return;
  out.integer("wait_on_stream", a.waitOnStream != 0 ? static_cast<int64_t>(a.waitOnStream) : -1);
  out.integer("wait_on_cuda_event_record_corr_id", a.waitRecordCorrelation);
  out.unsignedInteger("wait_on_cuda_event_id", a.eventId);
}

bool requested(const EmitOptions& o, DeviceOpKind kind) {
  switch (kind) {
    case DeviceOpKind::Kernel:
      return o.kernels;
    case DeviceOpKind::Memcpy:
      return o.memcpy;
    case DeviceOpKind::Memset:
      return o.memset;
    case DeviceOpKind::StreamWait:
      return o.syncs;
    case DeviceOpKind::Communication:
      return o.kernels;
  }
  return false;
}

TraceEventType eventType(DeviceOpKind kind) {
  switch (kind) {
    case DeviceOpKind::Kernel:
      return TraceEventType::Kernel;
    case DeviceOpKind::Memcpy:
      return TraceEventType::Memcpy;
    case DeviceOpKind::Memset:
      return TraceEventType::Memset;
    case DeviceOpKind::StreamWait:
      return TraceEventType::StreamWait;
    // A kernel to Kineto: it copies record_param_comms' args onto kernels
    // only, and HolisticTraceAnalysis reads communication from kernels.
    case DeviceOpKind::Communication:
      return TraceEventType::Kernel;
  }
  return TraceEventType::Kernel;
}

std::string_view deviceOpName(const DeviceOp& op) {
  switch (op.kind) {
    case DeviceOpKind::Kernel:
      return op.name != nullptr && op.name[0] != '\0' ? op.name : "unnamed kernel";
    case DeviceOpKind::Memcpy:
      return memcpyName(op.copyKind);
    case DeviceOpKind::Memset:
      return "Memset (Device)";
    case DeviceOpKind::StreamWait:
      return "Stream Wait Event";
    case DeviceOpKind::Communication:
      return op.name != nullptr && op.name[0] != '\0' ? op.name : "openregComm";
  }
  return "device op";
}

const char* orEmpty(const char* text) { return text != nullptr ? text : ""; }

// Our own keys: Kineto adds NCCL's ("Collective name", "dtype", "In msg
// nelems", ...) from the linked record_param_comms, so none may repeat them.
void writeCommunicationArgs(const EventArgs& a, ArgWriter& out) {
  out.unsignedInteger("bytes", a.bytes);
  if (a.communication == nullptr) return;
  const CommunicationInfo& c = *a.communication;
  out.text("collective", orEmpty(c.collective));
  out.text("data type", orEmpty(c.dataType));
  out.unsignedInteger("count", c.count);
  out.text("group", orEmpty(c.groupName));
  out.unsignedInteger("group size", c.groupSize);
  out.integer("rank", c.rank);
  if (c.peer >= 0) out.integer("peer", c.peer);
  out.unsignedInteger("sequence", c.sequence);
}

// GB/s = bytes per ns.
double gigabytesPerSecond(uint64_t bytes, int64_t durationNs) {
  return durationNs > 0 ? static_cast<double>(bytes) / static_cast<double>(durationNs) : 0.0;
}

// Collects args as strings, for eventArgs().
class StringArgs final : public ArgWriter {
 public:
  std::vector<TraceArg> args;
  void integer(const char* key, int64_t value) override { args.push_back({key, std::to_string(value)}); }
  void unsignedInteger(const char* key, uint64_t value) override { args.push_back({key, std::to_string(value)}); }
  void text(const char* key, const char* value) override { args.push_back({key, value, true}); }
  void boolean(const char* key, bool value) override { args.push_back({key, value ? "true" : "false"}); }
  void decimal(const char* key, double value, int decimals) override {
    args.push_back({key, decimalText(value, decimals)});
  }
  void dims(const char* key, const uint32_t (&value)[3]) override { args.push_back({key, dimsText(value)}); }
  void members(const char* json) override { args.push_back({"annotation", json}); }
};

}  // namespace

std::string dimsText(const uint32_t (&value)[3]) {
  char text[48];
  const int n = std::snprintf(text, sizeof(text), "[%u, %u, %u]", value[0], value[1], value[2]);
  return std::string(text, static_cast<size_t>(n));
}

// Fixed notation: a valid JSON number, as written to the trace.
std::string decimalText(double value, int decimals) {
  char text[48];
  const int n = std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return std::string(text, static_cast<size_t>(n));
}

const char* memcpyKindName(uint8_t copyKind) {
  switch (copyKind) {
    case OR_ACTIVITY_MEMCPY_HTOD:
      return "HtoD";
    case OR_ACTIVITY_MEMCPY_DTOH:
      return "DtoH";
    case OR_ACTIVITY_MEMCPY_DTOD:
      return "DtoD";
    case OR_ACTIVITY_MEMCPY_HTOH:
      return "HtoH";
    case OR_ACTIVITY_MEMCPY_PTOP:
      return "PtoP";
    default:
      return "Unknown";
  }
}

const char* memcpyName(uint8_t copyKind) {
  switch (copyKind) {
    case OR_ACTIVITY_MEMCPY_HTOD:
      return "Memcpy HtoD (Host -> Device)";
    case OR_ACTIVITY_MEMCPY_DTOH:
      return "Memcpy DtoH (Device -> Host)";
    case OR_ACTIVITY_MEMCPY_DTOD:
      return "Memcpy DtoD (Device -> Device)";
    case OR_ACTIVITY_MEMCPY_HTOH:
      return "Memcpy HtoH (Host -> Host)";
    case OR_ACTIVITY_MEMCPY_PTOP:
      return "Memcpy PtoP (Device -> Device)";
    default:
      return "Memcpy (Unknown)";
  }
}

EventArgs eventArgsOf(const TraceEvent& event) {
  EventArgs a;
  a.durationNs = elapsed(event.start, event.end);
  if (event.device != nullptr) {
    const DeviceOp& op = *event.device->op;
    a.source = EventArgs::Source::Device;
    a.kind = op.kind;
    a.device = op.device;
    a.stream = op.stream;
    a.correlation = event.device->traceId;
    a.status = op.status;
    switch (op.kind) {  // each kind's own fields only: they share storage
      case DeviceOpKind::Kernel:
        if (const LaunchShape* shape = event.launchShape) {
          std::copy(std::begin(shape->grid), std::end(shape->grid), a.grid);
          std::copy(std::begin(shape->block), std::end(shape->block), a.block);
          a.sharedMemBytes = shape->sharedMemBytes;
          a.streamPriority = shape->streamPriority;
          a.annotation = shape->annotation;
        }
        break;
      case DeviceOpKind::Memcpy:
        a.bytes = op.bytes;
        a.copyKind = op.copyKind;
        a.srcKind = op.srcKind;
        a.dstKind = op.dstKind;
        a.srcDevice = op.srcDevice;
        a.dstDevice = op.dstDevice;
        a.isAsync = op.isAsync;
        break;
      case DeviceOpKind::Memset:
        a.bytes = op.bytes;
        a.memsetValue = op.memsetValue;
        a.memsetElementSize = op.memsetElementSize;
        a.isAsync = op.isAsync;
        break;
      case DeviceOpKind::StreamWait:
        a.syncType = OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT;
        if (const EventWait* wait = event.eventWait) {
          a.eventId = wait->eventId;
          a.waitOnStream = wait->recordStreamId;
        }
        a.waitRecordCorrelation = event.waitRecord;
        break;
      case DeviceOpKind::Communication:
        a.bytes = op.bytes;
        a.communication = event.communication;
        break;
    }
  } else if (event.type == TraceEventType::HostSync && event.sync != nullptr) {
    const HostSync& sync = *event.sync;
    a.source = EventArgs::Source::HostSync;
    a.device = sync.device;
    a.correlation = event.id;
    a.syncType = sync.syncType;
    a.stream = sync.stream;
    a.eventId = sync.eventId;
    a.waitOnStream = sync.recordStreamId;
    a.waitRecordCorrelation = event.waitRecord;
  } else if (event.runtime != nullptr) {
    const RuntimeCall& call = *event.runtime->call;
    a.source = EventArgs::Source::Runtime;
    a.device = call.device;
    a.correlation = event.runtime->traceId;
    a.status = call.status;
    if (event.sync != nullptr) {
      a.hasSync = true;
      a.syncType = event.sync->syncType;
      a.stream = event.sync->stream;
      a.eventId = event.sync->eventId;
    }
  }
  return a;
}

void writeArgs(const EventArgs& a, ArgWriter& out) {
  if (a.source == EventArgs::Source::Device) {
    out.integer("device", a.device);
    out.unsignedInteger("stream", a.stream);
    out.integer("correlation", a.correlation);
    switch (a.kind) {
      case DeviceOpKind::Kernel:
        out.dims("grid", a.grid);
        out.dims("block", a.block);
        out.unsignedInteger("shared memory", a.sharedMemBytes);
        out.integer("stream priority", a.streamPriority);
        if (a.annotation != nullptr && a.annotation[0] != '\0') out.members(a.annotation);
        break;
      case DeviceOpKind::Memcpy:
        out.text("kind", memcpyKindName(a.copyKind));
        out.unsignedInteger("bytes", a.bytes);
        out.decimal("memory bandwidth (GB/s)", gigabytesPerSecond(a.bytes, a.durationNs), 3);
        out.text("src kind", memoryKindName(a.srcKind));
        out.text("dst kind", memoryKindName(a.dstKind));
        out.integer("src device", a.srcDevice);
        out.integer("dst device", a.dstDevice);
        out.boolean("async", a.isAsync);
        break;
      case DeviceOpKind::Memset:
        out.text("kind", "Memset");
        out.unsignedInteger("bytes", a.bytes);
        out.decimal("memory bandwidth (GB/s)", gigabytesPerSecond(a.bytes, a.durationNs), 3);
        out.unsignedInteger("value", a.memsetValue);
        out.unsignedInteger("element size", a.memsetElementSize);
        out.boolean("async", a.isAsync);
        break;
      case DeviceOpKind::StreamWait:
        writeSyncArgs(a, out);
        break;
      case DeviceOpKind::Communication:
        writeCommunicationArgs(a, out);
        break;
    }
    if (a.status != 0) out.integer("status", a.status);
  } else if (a.source == EventArgs::Source::HostSync) {
    // Kineto's layout: "stream" is the synchronised stream, -1 for waits on
    // an event or the whole device (HTA then reads no stream work into them).
    out.integer("device", a.device);
    out.integer("stream", a.syncType == OR_ACTIVITY_SYNC_STREAM ? static_cast<int64_t>(a.stream) : -1);
    out.integer("correlation", a.correlation);
    writeSyncArgs(a, out);
  } else if (a.source == EventArgs::Source::Runtime) {
    // No "stream" arg: HTA would take a host row carrying one for device work.
    out.integer("correlation", a.correlation);
    out.integer("device", a.device);
    if (a.hasSync) {
      out.text("sync", syncTypeName(a.syncType));
      if (a.stream != 0) out.unsignedInteger("sync stream", a.stream);
      if (a.eventId != 0) out.unsignedInteger("sync event", a.eventId);
    }
    if (a.status != 0) out.integer("status", a.status);
  }
  // User-range spans have none, as for CUDA: HTA counts any event with a
  // "stream" arg as a kernel and would count the span's time twice.
}

std::vector<TraceArg> eventArgs(const TraceEvent& event) {
  StringArgs args;
  writeArgs(eventArgsOf(event), args);
  return std::move(args.args);
}

namespace steps {

CorrelationIndex::CorrelationIndex(uint64_t lowest, uint64_t highest, size_t expected) {
  if (expected == 0) return;
  const uint64_t span = highest - lowest + 1;
  if (highest >= lowest && span <= 4 * static_cast<uint64_t>(expected) + 4096) {
    lowest_ = lowest;
    dense_.assign(span, kMissing);
    return;
  }
  size_t capacity = 16;
  while (capacity < expected * 2) capacity <<= 1;
  slots_.resize(capacity);
  mask_ = capacity - 1;
}

bool CorrelationIndex::insert(uint64_t key, uint32_t value) {
  if (!dense_.empty()) {
    uint32_t& slot = dense_[key - lowest_];
    if (slot != kMissing) return false;
    slot = value;
    return true;
  }
  for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    if (slots_[i].key == key) return false;
    if (slots_[i].key == 0) {
      slots_[i] = {key, value};
      return true;
    }
  }
}

uint32_t CorrelationIndex::find(uint64_t key) const {
  if (!dense_.empty()) {
    return key >= lowest_ && key - lowest_ < dense_.size() ? dense_[key - lowest_] : kMissing;
  }
  if (key == 0 || slots_.empty()) return kMissing;
  for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    if (slots_[i].key == key) return slots_[i].value;
    if (slots_[i].key == 0) return kMissing;
  }
}

size_t CorrelationIndex::hash(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return static_cast<size_t>(key);
}

ExternalIds ExternalJoin::of(uint64_t correlationId) const {
  const uint32_t slot = index.find(correlationId);
  return slot != CorrelationIndex::kMissing ? ids[slot] : ExternalIds{};
}

ExternalJoin joinExternalIds(const ChunkedVector<ExternalRecord>& external) {
  ExternalJoin join;
  join.index = indexFor(external, [](const ExternalRecord& e) { return e.correlationId; });
  for (const ExternalRecord& e : external) {
    if (e.correlationId == 0) continue;
    uint32_t slot = join.index.find(e.correlationId);
    if (slot == CorrelationIndex::kMissing) {
      slot = static_cast<uint32_t>(join.ids.size());
      join.index.insert(e.correlationId, slot);
      join.ids.emplace_back();
    }
    if (e.kind == OR_EXTERNAL_CORRELATION_KIND_OPERATOR) {
      join.ids[slot].op = e.externalId;
    } else if (e.kind == OR_EXTERNAL_CORRELATION_KIND_USER) {
      join.ids[slot].user = e.externalId;
    }
  }
  return join;
}

ClockMaps buildClockMaps(const std::unordered_map<int32_t, std::vector<ClockPoint>>& samples, PrepareStats& stats) {
  ClockMaps clocks;
  for (const auto& [device, points] : samples) {
    ClockMap map(points);
    stats.clockSamples += points.size();
    stats.rejectedClockSamples += map.rejected();
    clocks.emplace(device, std::move(map));
  }
  return clocks;
}

CorrelationIndex orderRuntimeCalls(const ChunkedVector<RuntimeCall>& calls, const ExternalJoin& external,
                                   PreparedTrace& out) {
  // Each thread's buffers arrive in order, so this is usually a merge of a
  // few sorted runs.
  std::vector<const RuntimeCall*> byStart;
  byStart.reserve(calls.size());
  for (const auto& call : calls) byStart.push_back(&call);
  sortRuns(byStart, [](const RuntimeCall* a, const RuntimeCall* b) { return a->start < b->start; });
  CorrelationIndex byCorr = indexFor(calls, [](const RuntimeCall& c) { return c.correlationId; });
  out.runtime.reserve(byStart.size());
  for (const RuntimeCall* call : byStart) {
    if (call->correlationId != 0 && !byCorr.insert(call->correlationId, static_cast<uint32_t>(out.runtime.size()))) {
      ++out.stats.duplicateRecords;
      continue;
    }
    out.runtime.push_back({.call = call, .traceId = 0, .externalOp = external.of(call->correlationId).op});
  }
  return byCorr;
}

namespace {
int32_t runtimeIndexOf(const CorrelationIndex& runtimeByCorr, uint64_t correlationId) {
  const uint32_t slot = correlationId != 0 ? runtimeByCorr.find(correlationId) : CorrelationIndex::kMissing;
  return slot != CorrelationIndex::kMissing ? static_cast<int32_t>(slot) : -1;
}
}  // namespace

void joinHostSyncs(const ChunkedVector<HostSync>& syncs, const CorrelationIndex& runtimeByCorr, PreparedTrace& out) {
  CorrelationIndex seen = indexFor(syncs, [](const HostSync& h) { return h.correlationId; });
  for (const auto& sync : syncs) {
    if (sync.correlationId != 0 && !seen.insert(sync.correlationId, 0)) {
      ++out.stats.duplicateRecords;
      continue;
    }
    const PreparedHostSync prepared{.sync = sync,
                                    .runtimeIndex = runtimeIndexOf(runtimeByCorr, sync.correlationId),
                                    .recordIndex = runtimeIndexOf(runtimeByCorr, sync.recordCorrelationId)};
    if (prepared.runtimeIndex >= 0) {
      out.runtime[static_cast<size_t>(prepared.runtimeIndex)].syncIndex = static_cast<int32_t>(out.hostSyncs.size());
    }
    out.hostSyncs.push_back(prepared);
  }
}

void joinEventWaits(const ChunkedVector<EventWait>& waits, const CorrelationIndex& runtimeByCorr, PreparedTrace& out) {
  out.eventWaitRecords.reserve(waits.size());
  for (const EventWait& wait : waits) {
    out.eventWaitRecords.push_back(runtimeIndexOf(runtimeByCorr, wait.recordCorrelationId));
  }
}

void mapDeviceOps(const ChunkedVector<DeviceOp>& ops, const ClockMaps& clocks, const ExternalJoin& external,
                  const CorrelationIndex& runtimeByCorr, PreparedTrace& out) {
  CorrelationIndex seen = indexFor(ops, [](const DeviceOp& d) { return d.correlationId; });
  out.deviceOps.reserve(ops.size());
  const ClockMap* clock = nullptr;
  int32_t clockDevice = INT32_MIN;
  size_t segment = 0;  // where the last op fell in its device's clock map
  for (const auto& op : ops) {
    if (op.correlationId != 0 && !seen.insert(op.correlationId, 0)) {
      ++out.stats.duplicateRecords;
      continue;
    }
    if (op.device != clockDevice) {
      auto it = clocks.find(op.device);
      clock = it != clocks.end() ? &it->second : nullptr;
      clockDevice = op.device;
      segment = 0;
    }
    std::optional<int64_t> start, end;
    if (clock != nullptr) {
      start = clock->toHost(op.start, segment);
      end = clock->toHost(op.end, segment);
    }
    if (!start || !end) {
      ++out.stats.unmappedDeviceOps;
      continue;
    }
    // A library's mistake, kept (nothing is dropped) but counted and reported.
    if (op.stream == 0) ++out.stats.streamZeroDeviceOps;
    PreparedDeviceOp p;
    p.op = &op;
    p.start = *start;
    p.end = std::max(*start, *end);
    p.external = external.of(op.correlationId);
    const uint32_t rt = runtimeByCorr.find(op.correlationId);
    if (rt != CorrelationIndex::kMissing) p.runtimeIndex = static_cast<int32_t>(rt);
    out.deviceOps.push_back(p);
  }
}

void assignTraceIds(PreparedTrace& out) {
  std::vector<std::pair<int64_t, uint32_t>> unlaunched;  // (start, index)
  for (size_t i = 0; i < out.deviceOps.size(); ++i) {
    if (out.deviceOps[i].runtimeIndex < 0) unlaunched.emplace_back(out.deviceOps[i].start, static_cast<uint32_t>(i));
  }
  std::sort(unlaunched.begin(), unlaunched.end());
  int64_t next = kFirstTraceId;
  // Past 2^30 submissions in one trace ids run out: 0 means "no id, no
  // arrow" rather than a repeated one.
  auto nextId = [&] { return next <= INT32_MAX ? static_cast<int32_t>(next++) : 0; };
  size_t u = 0;
  for (auto& rt : out.runtime) {
    // Runtime calls first at equal times, as launches precede their work.
    for (; u < unlaunched.size() && unlaunched[u].first < callStart(*rt.call); ++u) {
      out.deviceOps[unlaunched[u].second].traceId = nextId();
    }
    rt.traceId = nextId();
  }
  for (; u < unlaunched.size(); ++u) out.deviceOps[unlaunched[u].second].traceId = nextId();
  for (auto& p : out.deviceOps) {
    if (p.runtimeIndex >= 0) p.traceId = out.runtime[static_cast<size_t>(p.runtimeIndex)].traceId;
  }
}

RuntimeSelection selectRuntime(const PreparedTrace& prepared, const EmitOptions& options, EmitStats& stats) {
  RuntimeSelection selection;
  selection.inWindow.assign(prepared.runtime.size(), 0);
  selection.emitted.assign(prepared.runtime.size(), 0);
  for (size_t i = 0; i < prepared.runtime.size(); ++i) {
    const RuntimeCall& call = *prepared.runtime[i].call;
    const int64_t start = callStart(call);
    selection.inWindow[i] = start >= options.windowStart && callEnd(call) <= options.windowEnd;
    if (!options.runtime) {
      ++stats.notRequested;
    } else if (!selection.inWindow[i]) {
      ++stats.outOfWindow;
    } else if (options.notBefore != 0 && start < options.notBefore) {
      ++stats.beforeRequestedStart;
    } else {
      selection.emitted[i] = 1;
    }
  }
  return selection;
}

bool fixCausality(RowWork& work, int64_t launch, EmitStats& stats) {
  if (work.start >= launch) return false;
  ++stats.causalityFixes;
  stats.maxCausalityFixNs = std::max(stats.maxCausalityFixNs, elapsed(work.start, launch));
  work.start = launch;
  return true;
}

RowMap selectRowWork(const PreparedTrace& prepared, const EmitOptions& options,
                     const std::vector<char>& runtimeInWindow, EmitStats& stats) {
  RowMap rows;
  // Each row is sized once, for all its work (usually what is kept).
  std::map<RowKey, size_t> perRow;
  for (const auto& p : prepared.deviceOps) ++perRow[{p.op->device, p.op->stream}];
  std::vector<RowWork>* row = nullptr;
  RowKey rowKey{INT32_MIN, 0};
  for (size_t i = 0; i < prepared.deviceOps.size(); ++i) {
    const PreparedDeviceOp& p = prepared.deviceOps[i];
    const DeviceOp& op = *p.op;
    const bool wanted = requested(options, op.kind);
    // Annotations are spans over kernels, copies and memsets, so those are
    // kept for the spans even when they are not emitted themselves.
    const bool neededForSpans = options.userAnnotations && op.kind != DeviceOpKind::StreamWait;
    if (!wanted && !neededForSpans) {
      ++stats.notRequested;
      continue;
    }
    if (p.start < options.windowStart || p.end > options.windowEnd) {
      if (wanted) {
        ++stats.outOfWindow;
        if (p.runtimeIndex >= 0 && runtimeInWindow[static_cast<size_t>(p.runtimeIndex)]) {
          ++stats.launchedInWindowButOutside;
        }
      }
      continue;
    }
    if (options.notBefore != 0 && p.start < options.notBefore) {
      if (wanted) ++stats.beforeRequestedStart;
      continue;
    }
    if (!wanted) ++stats.notRequested;
    RowWork work{p.start, static_cast<uint32_t>(i), wanted};
    if (p.runtimeIndex >= 0) {
      fixCausality(work, callStart(*prepared.runtime[static_cast<size_t>(p.runtimeIndex)].call), stats);
    }
    if (row == nullptr || rowKey.first != op.device || rowKey.second != op.stream) {
      rowKey = {op.device, op.stream};
      row = &rows[rowKey];
      if (row->empty()) row->reserve(perRow[rowKey]);
    }
    row->push_back(work);
  }
  return rows;
}

void fixRows(RowMap& rows, const PreparedTrace& prepared, EmitStats& stats) {
  auto byTime = [&](const RowWork& a, const RowWork& b) {
    return a.start != b.start ? a.start < b.start : a.end(prepared) < b.end(prepared);
  };
  for (auto& [key, work] : rows) {
    if (!std::is_sorted(work.begin(), work.end(), byTime)) {
      std::stable_sort(work.begin(), work.end(), byTime);  // causality fixes can reorder
    }
    for (size_t i = 1; i < work.size(); ++i) {
      const int64_t previousEnd = work[i - 1].end(prepared);
      if (work[i].start < previousEnd) {
        ++stats.rowOverlapFixes;
        work[i].start = previousEnd;
      }
    }
  }
}

bool hasLaunchFlow(const PreparedDeviceOp& op, const std::vector<char>& runtimeEmitted) {
  return op.traceId != 0 && op.runtimeIndex >= 0 && runtimeEmitted[static_cast<size_t>(op.runtimeIndex)];
}

std::vector<char> markFlows(const RowMap& rows, const PreparedTrace& prepared, const std::vector<char>& runtimeEmitted,
                            EmitStats& stats) {
  std::vector<char> launchHasFlow(runtimeEmitted.size(), 0);
  for (const auto& [key, work] : rows) {
    for (const RowWork& w : work) {
      if (!w.emit || !hasLaunchFlow(w.op(prepared), runtimeEmitted)) continue;
      launchHasFlow[static_cast<size_t>(w.op(prepared).runtimeIndex)] = 1;
      ++stats.flows;
    }
  }
  return launchHasFlow;
}

namespace {

struct Span {
  int32_t device;
  uint64_t stream;
  uint64_t user;
  int64_t start;
  int64_t end;
};

// Each user range's extent on each row it covers, per row outer spans first.
std::vector<Span> userRangeExtents(const RowMap& rows, const PreparedTrace& prepared) {
  std::map<std::tuple<int32_t, uint64_t, uint64_t>, Span> spans;
  for (const auto& [key, work] : rows) {
    for (const auto& w : work) {
      const PreparedDeviceOp& p = w.op(prepared);
      if (p.external.user == 0 || p.op->kind == DeviceOpKind::StreamWait) continue;
      auto [it, inserted] = spans.emplace(std::make_tuple(key.first, key.second, p.external.user),
                                          Span{key.first, key.second, p.external.user, w.start, w.end(prepared)});
      if (!inserted) {
        it->second.start = std::min(it->second.start, w.start);
        it->second.end = std::max(it->second.end, w.end(prepared));
      }
    }
  }
  std::vector<Span> ordered;
  ordered.reserve(spans.size());
  for (const auto& [key, span] : spans) ordered.push_back(span);
  std::sort(ordered.begin(), ordered.end(), [](const Span& a, const Span& b) {
    // (end compared reversed, not negated: -INT64_MIN overflows)
    return std::make_tuple(a.device, a.stream, a.start, b.end) < std::make_tuple(b.device, b.stream, b.start, a.end);
  });
  return ordered;
}

}  // namespace

std::vector<TraceEvent> buildSpans(const RowMap& rows, const PreparedTrace& prepared, const UserRangeLookup& userRange,
                                   EmitResult& result) {
  const std::vector<Span> ordered = userRangeExtents(rows, prepared);
  std::vector<TraceEvent> spans;
  std::vector<const Span*> open;  // the enclosing spans on the current row
  for (size_t i = 0; i < ordered.size(); ++i) {
    const Span& s = ordered[i];
    if (i == 0 || ordered[i - 1].device != s.device || ordered[i - 1].stream != s.stream) open.clear();
    while (!open.empty() && open.back()->end <= s.start) open.pop_back();
    // Ranges on two threads interleaving on one stream cannot nest.
    if (!open.empty() && s.end > open.back()->end) {
      ++result.stats.annotationOverlapsDropped;
      continue;
    }
    std::optional<std::string> name = userRange ? userRange(s.user) : std::nullopt;
    if (!name) {
      ++result.stats.annotationsWithoutRange;
      continue;
    }
    open.push_back(&s);
    TraceEvent e;
    e.type = TraceEventType::UserAnnotation;
    e.name = result.rangeNames.emplace_back(std::move(*name));
    e.start = s.start;
    e.end = s.end;
    e.pid = s.device;
    e.tid = static_cast<int64_t>(s.stream);
    e.userRange = s.user;
    ++result.rows[{s.device, s.stream}];
    spans.push_back(e);
  }
  return spans;
}

std::vector<size_t> EmitRuns::lengths() const {
  std::vector<size_t> out;
  out.reserve(rows.size() + 2);
  for (const auto* row : rows) out.push_back(row->size());
  out.push_back(launches.size());
  out.push_back(spans.size());
  return out;
}

namespace {

// Puts `items` in emission order (`before`) when they are ordered by start
// already, as the prepared launches are: then only items sharing a start can
// be out of order (the longer goes first), so each such group is sorted on
// its own. Host clocks tick coarsely enough for consecutive launches to share
// a start, and a stable sort of a million launches was a third of emit.
template <typename T, typename Start, typename Before>
void orderEqualStarts(std::vector<T>& items, Start start, Before before) {
  if (std::is_sorted(items.begin(), items.end(), before)) return;
  const bool byStart =
      std::is_sorted(items.begin(), items.end(), [&](const T& a, const T& b) { return start(a) < start(b); });
  if (!byStart) {
    std::stable_sort(items.begin(), items.end(), before);
    return;
  }
  for (size_t i = 0; i < items.size();) {
    size_t j = i + 1;
    while (j < items.size() && start(items[j]) == start(items[i])) ++j;
    if (j - i > 1) std::stable_sort(items.begin() + i, items.begin() + j, before);
    i = j;
  }
}

}  // namespace

EmitRuns orderRuns(RowMap& rows, const PreparedTrace& prepared, const RuntimeSelection& runtime,
                   std::vector<TraceEvent> spans, EmitResult& result) {
  auto workBefore = [&](const RowWork& a, const RowWork& b) {
    return emitBefore(a.start, a.end(prepared), b.start, b.end(prepared));
  };
  EmitRuns out;
  for (auto& [key, work] : rows) {
    std::erase_if(work, [](const RowWork& w) { return !w.emit; });
    // Rows are by (start, end) already; only zero-length work at a start can differ.
    if (!std::is_sorted(work.begin(), work.end(), workBefore)) std::stable_sort(work.begin(), work.end(), workBefore);
    if (!work.empty()) result.rows[key] += work.size();
    out.rows.push_back(&work);
  }
  for (size_t i = 0; i < prepared.runtime.size(); ++i) {
    if (runtime.emitted[i]) out.launches.push_back(static_cast<uint32_t>(i));
  }
  auto launchBefore = [&](uint32_t a, uint32_t b) {
    const RuntimeCall& x = *prepared.runtime[a].call;
    const RuntimeCall& y = *prepared.runtime[b].call;
    return emitBefore(callStart(x), callEnd(x), callStart(y), callEnd(y));
  };
  orderEqualStarts(
      out.launches, [&](uint32_t i) { return callStart(*prepared.runtime[i].call); }, launchBefore);
  out.spans = std::move(spans);
  std::stable_sort(out.spans.begin(), out.spans.end(),
                   [](const TraceEvent& a, const TraceEvent& b) { return emitBefore(a.start, a.end, b.start, b.end); });
  return out;
}

TraceEvent runtimeEvent(const PreparedTrace& prepared, size_t index, bool flowStart) {
  const PreparedRuntime& rt = prepared.runtime[index];
  const RuntimeCall& call = *rt.call;
  TraceEvent e;
  e.type = TraceEventType::Runtime;
  e.name = call.name != nullptr && call.name[0] != '\0' ? call.name : "openreg runtime call";
  e.start = callStart(call);
  e.end = callEnd(call);
  e.pid = call.processId;
  e.tid = call.threadId;
  e.threadId = static_cast<int32_t>(call.threadId);
  e.id = rt.traceId;
  e.linkedOp = rt.externalOp;
  e.runtime = &rt;
  if (rt.syncIndex >= 0) e.sync = &prepared.hostSyncs[static_cast<size_t>(rt.syncIndex)].sync;
  if (flowStart) {
    e.flowId = static_cast<uint32_t>(rt.traceId);
    e.flowStart = true;
  }
  return e;
}

TraceEvent deviceEvent(const PreparedTrace& prepared, const RowWork& work, bool flowEnd) {
  const PreparedDeviceOp& p = work.op(prepared);
  TraceEvent e;
  e.type = eventType(p.op->kind);
  e.name = deviceOpName(*p.op);
  e.start = work.start;
  e.end = work.end(prepared);
  e.pid = p.op->device;
  e.tid = static_cast<int64_t>(p.op->stream);
  e.id = p.traceId;
  e.device = &p;
  if (prepared.records != nullptr) {
    e.communication = prepared.records->communicationOf(*p.op);
    e.launchShape = prepared.records->launchShapeOf(*p.op);
    e.eventWait = prepared.records->eventWaitOf(*p.op);
  }
  // Linked as CUDA's are (a stream wait's External id is its op's); torch's
  // post-processing keeps a wait out of the op's device time
  // (torch_openreg/_profiler.py).
  e.linkedOp = p.external.op;
  if (flowEnd) e.flowId = static_cast<uint32_t>(p.traceId);
  return e;
}

int32_t emittedRowId(const PreparedTrace& prepared, int32_t runtimeIndex, const std::vector<char>& runtimeEmitted) {
  if (runtimeIndex < 0 || !runtimeEmitted[static_cast<size_t>(runtimeIndex)]) return -1;
  return prepared.runtime[static_cast<size_t>(runtimeIndex)].traceId;
}

int32_t waitRecordRowId(const PreparedTrace& prepared, const DeviceOp& op, const std::vector<char>& runtimeEmitted) {
  if (op.kind != DeviceOpKind::StreamWait || op.eventId >= prepared.eventWaitRecords.size()) return -1;
  return emittedRowId(prepared, prepared.eventWaitRecords[op.eventId], runtimeEmitted);
}

namespace {
bool keepHostSync(int64_t start, int64_t end, const EmitOptions& options, EmitStats& stats) {
  if (!options.syncs) {
    ++stats.notRequested;
  } else if (start < options.windowStart || end > options.windowEnd) {
    ++stats.outOfWindow;
  } else if (options.notBefore != 0 && start < options.notBefore) {
    ++stats.beforeRequestedStart;
  } else {
    return true;
  }
  return false;
}
}  // namespace

std::vector<TraceEvent> hostSyncEvents(const PreparedTrace& prepared, const EmitOptions& options,
                                       const std::vector<char>& runtimeEmitted, EmitResult& result) {
  std::vector<TraceEvent> events;
  std::map<std::pair<int32_t, uint32_t>, int64_t> rowOfThread;  // (device, host thread) → row
  std::map<int32_t, int64_t> rowsOnDevice;
  for (const PreparedHostSync& p : prepared.hostSyncs) {
    const HostSync& sync = p.sync;
    const int64_t start = hostNs(sync.start);
    const int64_t end = std::max(start, hostNs(sync.end));
    if (!keepHostSync(start, end, options, result.stats)) continue;
    TraceEvent e;
    if (sync.syncType == OR_ACTIVITY_SYNC_STREAM) {
      e.tid = static_cast<int64_t>(sync.stream);  // Kineto moves it to the stream's "(sync)" row
    } else {
      auto [row, added] = rowOfThread.try_emplace({sync.device, sync.threadId}, 0);
      if (added) {
        row->second = kHostWaitRowBase + rowsOnDevice[sync.device]++;
        result.hostSyncRows[{sync.device, row->second}] = sync.threadId;
      }
      e.tid = row->second;
    }
    e.type = TraceEventType::HostSync;
    e.name = syncKindName(sync.syncType);
    e.start = start;
    e.end = end;
    e.pid = sync.device;
    if (p.runtimeIndex >= 0) {
      const PreparedRuntime& call = prepared.runtime[static_cast<size_t>(p.runtimeIndex)];
      e.id = call.traceId;
      e.linkedOp = call.externalOp;  // the op that waited, as CUDA's sync rows name it
    }
    e.sync = &sync;
    e.waitRecord = emittedRowId(prepared, p.recordIndex, runtimeEmitted);
    events.push_back(e);
  }
  return events;
}

}  // namespace steps

PreparedTrace prepareTrace(const RecordSet& records) {
  PreparedTrace out;
  out.records = &records;
  const steps::ExternalJoin external = steps::joinExternalIds(records.external);
  const steps::ClockMaps clocks = steps::buildClockMaps(records.clock, out.stats);
  const steps::CorrelationIndex runtimeByCorr = steps::orderRuntimeCalls(records.runtimeCalls, external, out);
  steps::joinHostSyncs(records.hostSyncs, runtimeByCorr, out);
  steps::joinEventWaits(records.eventWaits, runtimeByCorr, out);
  steps::mapDeviceOps(records.deviceOps, clocks, external, runtimeByCorr, out);
  steps::assignTraceIds(out);
  steps::sortRuns(out.deviceOps, [](const PreparedDeviceOp& a, const PreparedDeviceOp& b) {
    return a.start != b.start ? a.start < b.start : a.end < b.end;
  });
  return out;
}

void emitTrace(const PreparedTrace& prepared, const EmitOptions& options, const UserRangeLookup& userRange,
               EmitResult& result, const EventSink& sink) {
  const steps::RuntimeSelection runtime = steps::selectRuntime(prepared, options, result.stats);
  steps::RowMap rows = steps::selectRowWork(prepared, options, runtime.inWindow, result.stats);
  steps::fixRows(rows, prepared, result.stats);
  const std::vector<char> launchHasFlow = steps::markFlows(rows, prepared, runtime.emitted, result.stats);
  std::vector<TraceEvent> spans =
      options.userAnnotations ? steps::buildSpans(rows, prepared, userRange, result) : std::vector<TraceEvent>{};
  // Host syncs have rows of their own: they are merged with the spans.
  for (const TraceEvent& sync : steps::hostSyncEvents(prepared, options, runtime.emitted, result)) {
    spans.push_back(sync);
  }
  const steps::EmitRuns runs = steps::orderRuns(rows, prepared, runtime, std::move(spans), result);
  struct Times {
    int64_t start, end;
  };
  auto at = [&](size_t run, size_t i) -> Times {
    if (run == runs.spanRun()) return {runs.spans[i].start, runs.spans[i].end};
    if (run == runs.launchRun()) {
      const RuntimeCall& call = *prepared.runtime[runs.launches[i]].call;
      return {callStart(call), callEnd(call)};
    }
    const steps::RowWork& work = (*runs.rows[run])[i];
    return {work.start, work.end(prepared)};
  };
  auto before = [](const Times& a, const Times& b) { return steps::emitBefore(a.start, a.end, b.start, b.end); };
  // Merged stably across the runs: device rows, launches, spans.
  steps::mergeRuns(runs.lengths(), at, before, [&](size_t run, size_t i) {
    if (run == runs.spanRun()) {
      sink(runs.spans[i]);
    } else if (run == runs.launchRun()) {
      const uint32_t launch = runs.launches[i];
      sink(steps::runtimeEvent(prepared, launch, launchHasFlow[launch]));
    } else {
      const steps::RowWork& work = (*runs.rows[run])[i];
      TraceEvent event = steps::deviceEvent(prepared, work, steps::hasLaunchFlow(work.op(prepared), runtime.emitted));
      event.waitRecord = steps::waitRecordRowId(prepared, *work.op(prepared).op, runtime.emitted);
      sink(event);
    }
    ++result.stats.emitted;
  });
}

EmitResult emitTrace(const PreparedTrace& prepared, const EmitOptions& options, const UserRangeLookup& userRange) {
  EmitResult result;
  emitTrace(prepared, options, userRange, result, [&](const TraceEvent& e) { result.events.push_back(e); });
  return result;
}

}  // namespace openreg::profiler
