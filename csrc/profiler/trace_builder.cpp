#include "trace_builder.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <iterator>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "openreg/activity.h"

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

// Correlation id (never 0) → 32-bit index. The joins look up millions of
// ids: node-based maps cost an allocation and a cache miss each. Runtimes
// hand ids out from a counter, so they usually fill a dense range: then a
// plain array indexed by (id - lowest) is used, which a trace walks almost
// in order. Otherwise, open addressing in one array.
class CorrelationIndex {
 public:
  static constexpr uint32_t kMissing = UINT32_MAX;

  // All keys lie in [lowest, highest]; at most `expected` of them.
  CorrelationIndex(uint64_t lowest, uint64_t highest, size_t expected) {
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

  // Adds key → value; if key is already there, leaves it and returns false.
  bool insert(uint64_t key, uint32_t value) {
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

  uint32_t find(uint64_t key) const {
    if (!dense_.empty()) {
      return key >= lowest_ && key - lowest_ < dense_.size() ? dense_[key - lowest_] : kMissing;
    }
    if (key == 0 || slots_.empty()) return kMissing;
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].value;
      if (slots_[i].key == 0) return kMissing;
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t value = 0;
  };
  static size_t hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }
  std::vector<uint32_t> dense_;
  uint64_t lowest_ = 0;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// The lowest and highest non-zero correlation id of some records.
template <typename Records, typename Corr>
std::pair<uint64_t, uint64_t> correlationRange(const Records& records, Corr corr) {
  uint64_t lowest = UINT64_MAX, highest = 0;
  for (const auto& r : records) {
    const uint64_t id = corr(r);
    if (id == 0) continue;
    lowest = std::min(lowest, id);
    highest = std::max(highest, id);
  }
  return {lowest, highest};
}

template <typename Records, typename Corr>
CorrelationIndex indexFor(const Records& records, Corr corr) {
  auto [lowest, highest] = correlationRange(records, corr);
  return CorrelationIndex(lowest, highest, lowest <= highest ? records.size() : 0);
}

// Sorts `items` stably by `before`. Records arrive as a few dozen sorted
// runs (one per thread buffer), so the runs are merged in one pass through
// a heap of their heads, O(n log runs), each item moved once; many short
// runs fall back to a plain stable sort.
template <typename T, typename Before>
void sortRuns(std::vector<T>& items, Before before) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i == 0 || before(items[i], items[i - 1])) starts.push_back(i);
  }
  if (starts.size() <= 1) return;
  if (starts.size() * 64 > items.size()) {
    std::stable_sort(items.begin(), items.end(), before);
    return;
  }
  starts.push_back(items.size());
  using Head = std::pair<size_t, size_t>;  // (position, end of its run)
  auto later = [&](const Head& a, const Head& b) {
    if (before(items[b.first], items[a.first])) return true;
    if (before(items[a.first], items[b.first])) return false;
    return a.first > b.first;  // stable: earlier runs first
  };
  std::priority_queue<Head, std::vector<Head>, decltype(later)> heads(later);
  for (size_t r = 0; r + 1 < starts.size(); ++r) heads.push({starts[r], starts[r + 1]});
  std::vector<T> out;
  out.reserve(items.size());
  while (!heads.empty()) {
    auto [i, end] = heads.top();
    heads.pop();
    out.push_back(std::move(items[i]));
    if (i + 1 < end) heads.push({i + 1, end});
  }
  items = std::move(out);
}

const char* memoryKindName(uint8_t kind) {
  switch (kind) {
    case OR_ACTIVITY_MEMORY_KIND_PAGEABLE: return "Pageable";
    case OR_ACTIVITY_MEMORY_KIND_PINNED: return "Pinned";
    case OR_ACTIVITY_MEMORY_KIND_DEVICE: return "Device";
    default: return "Unknown";
  }
}

const char* syncTypeName(uint32_t type) {
  switch (type) {
    case OR_ACTIVITY_SYNC_STREAM: return "stream";
    case OR_ACTIVITY_SYNC_EVENT: return "event";
    case OR_ACTIVITY_SYNC_DEVICE: return "device";
    case OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT: return "stream wait event";
    default: return "unknown";
  }
}

bool requested(const EmitOptions& o, DeviceOpKind kind) {
  switch (kind) {
    case DeviceOpKind::Kernel: return o.kernels;
    case DeviceOpKind::Memcpy: return o.memcpy;
    case DeviceOpKind::Memset: return o.memset;
    case DeviceOpKind::StreamWait: return o.syncs;
    case DeviceOpKind::Communication: return o.kernels;
  }
  return false;
}

TraceEventType eventType(DeviceOpKind kind) {
  switch (kind) {
    case DeviceOpKind::Kernel: return TraceEventType::Kernel;
    case DeviceOpKind::Memcpy: return TraceEventType::Memcpy;
    case DeviceOpKind::Memset: return TraceEventType::Memset;
    case DeviceOpKind::StreamWait: return TraceEventType::StreamWait;
    // A kernel to Kineto: it copies record_param_comms' args onto kernels
    // only, and HolisticTraceAnalysis reads communication from kernels.
    case DeviceOpKind::Communication: return TraceEventType::Kernel;
  }
  return TraceEventType::Kernel;
}

std::string_view deviceOpName(const DeviceOp& op) {
  switch (op.kind) {
    case DeviceOpKind::Kernel: return op.name != nullptr && op.name[0] != '\0' ? op.name : "unnamed kernel";
    case DeviceOpKind::Memcpy: return memcpyName(op.copyKind);
    case DeviceOpKind::Memset: return "Memset (Device)";
    case DeviceOpKind::StreamWait: return "Stream Wait Event";
    case DeviceOpKind::Communication: return op.name != nullptr && op.name[0] != '\0' ? op.name : "openregComm";
  }
  return "device op";
}

std::string_view dim3(const uint32_t (&d)[3], char (&text)[48]) {
  const int n = std::snprintf(text, sizeof(text), "[%u, %u, %u]", d[0], d[1], d[2]);
  return {text, static_cast<size_t>(n)};
}

// GB/s = bytes per ns. Fixed notation keeps it a valid JSON number.
std::string_view bandwidth(uint64_t bytes, int64_t durationNs, char (&text)[48]) {
  const double gbps = durationNs > 0 ? static_cast<double>(bytes) / static_cast<double>(durationNs) : 0.0;
  const int n = std::snprintf(text, sizeof(text), "%.3f", gbps);
  return {text, static_cast<size_t>(n)};
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

// Collects args as strings, for eventArgs().
class StringArgs final : public ArgWriter {
 public:
  std::vector<TraceArg> args;
  void integer(const char* key, int64_t value) override { args.push_back({key, std::to_string(value)}); }
  void unsignedInteger(const char* key, uint64_t value) override { args.push_back({key, std::to_string(value)}); }
  void text(const char* key, const char* value) override { args.push_back({key, value, true}); }
  void json(const char* key, std::string_view value) override { args.push_back({key, std::string(value)}); }
};

} // namespace

const char* memcpyKindName(uint8_t copyKind) {
  switch (copyKind) {
    case OR_ACTIVITY_MEMCPY_HTOD: return "HtoD";
    case OR_ACTIVITY_MEMCPY_DTOH: return "DtoH";
    case OR_ACTIVITY_MEMCPY_DTOD: return "DtoD";
    case OR_ACTIVITY_MEMCPY_HTOH: return "HtoH";
    case OR_ACTIVITY_MEMCPY_PTOP: return "PtoP";
    default: return "Unknown";
  }
}

const char* memcpyName(uint8_t copyKind) {
  switch (copyKind) {
    case OR_ACTIVITY_MEMCPY_HTOD: return "Memcpy HtoD (Host -> Device)";
    case OR_ACTIVITY_MEMCPY_DTOH: return "Memcpy DtoH (Device -> Host)";
    case OR_ACTIVITY_MEMCPY_DTOD: return "Memcpy DtoD (Device -> Device)";
    case OR_ACTIVITY_MEMCPY_HTOH: return "Memcpy HtoH (Host -> Host)";
    case OR_ACTIVITY_MEMCPY_PTOP: return "Memcpy PtoP (Device -> Device)";
    default: return "Memcpy (Unknown)";
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
    std::copy(std::begin(op.grid), std::end(op.grid), a.grid);
    std::copy(std::begin(op.block), std::end(op.block), a.block);
    a.sharedMemBytes = op.sharedMemBytes;
    a.streamPriority = op.streamPriority;
    a.bytes = op.bytes;
    a.copyKind = op.copyKind;
    a.srcKind = op.srcKind;
    a.dstKind = op.dstKind;
    a.srcDevice = op.srcDevice;
    a.dstDevice = op.dstDevice;
    a.memsetValue = op.memsetValue;
    a.memsetElementSize = op.memsetElementSize;
    a.isAsync = op.isAsync;
    a.eventId = op.eventId;
    a.communication = event.communication;
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
  char text[48];
  if (a.source == EventArgs::Source::Device) {
    out.integer("device", a.device);
    out.unsignedInteger("stream", a.stream);
    out.integer("correlation", a.correlation);
    switch (a.kind) {
      case DeviceOpKind::Kernel:
        if (out.wants("grid")) out.json("grid", dim3(a.grid, text));
        if (out.wants("block")) out.json("block", dim3(a.block, text));
        out.unsignedInteger("shared memory", a.sharedMemBytes);
        out.integer("stream priority", a.streamPriority);
        break;
      case DeviceOpKind::Memcpy:
        out.text("kind", memcpyKindName(a.copyKind));
        out.unsignedInteger("bytes", a.bytes);
        if (out.wants("memory bandwidth (GB/s)")) {
          out.json("memory bandwidth (GB/s)", bandwidth(a.bytes, a.durationNs, text));
        }
        out.text("src kind", memoryKindName(a.srcKind));
        out.text("dst kind", memoryKindName(a.dstKind));
        out.integer("src device", a.srcDevice);
        out.integer("dst device", a.dstDevice);
        out.json("async", a.isAsync ? "true" : "false");
        break;
      case DeviceOpKind::Memset:
        out.text("kind", "Memset");
        out.unsignedInteger("bytes", a.bytes);
        if (out.wants("memory bandwidth (GB/s)")) {
          out.json("memory bandwidth (GB/s)", bandwidth(a.bytes, a.durationNs, text));
        }
        out.unsignedInteger("value", a.memsetValue);
        out.unsignedInteger("element size", a.memsetElementSize);
        out.json("async", a.isAsync ? "true" : "false");
        break;
      case DeviceOpKind::StreamWait:
        out.unsignedInteger("event", a.eventId);
        break;
      case DeviceOpKind::Communication:
        writeCommunicationArgs(a, out);
        break;
    }
    if (a.status != 0) out.integer("status", a.status);
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

PreparedTrace prepareTrace(const RecordSet& records) {
  PreparedTrace out;
  out.records = &records;

  // External ids by correlation id; a later record for the same kind wins.
  std::vector<ExternalIds> externalIds;
  CorrelationIndex externalIndex = indexFor(records.external, [](const ExternalRecord& e) { return e.correlationId; });
  for (const ExternalRecord& e : records.external) {
    if (e.correlationId == 0) continue;
    uint32_t slot = externalIndex.find(e.correlationId);
    if (slot == CorrelationIndex::kMissing) {
      slot = static_cast<uint32_t>(externalIds.size());
      externalIndex.insert(e.correlationId, slot);
      externalIds.emplace_back();
    }
    if (e.kind == OR_EXTERNAL_CORRELATION_KIND_OPERATOR) {
      externalIds[slot].op = e.externalId;
    } else if (e.kind == OR_EXTERNAL_CORRELATION_KIND_USER) {
      externalIds[slot].user = e.externalId;
    }
  }
  auto externalOf = [&](uint64_t corr) {
    const uint32_t slot = externalIndex.find(corr);
    return slot != CorrelationIndex::kMissing ? externalIds[slot] : ExternalIds{};
  };

  std::unordered_map<int32_t, ClockMap> clocks;
  for (const auto& [device, points] : records.clock) {
    ClockMap map(points);
    out.stats.clockSamples += points.size();
    out.stats.rejectedClockSamples += map.rejected();
    clocks.emplace(device, std::move(map));
  }

  // Runtime calls, by host start (each thread's buffers arrive in order, so
  // this is usually a merge of a few sorted runs), one per correlation id.
  std::vector<const RuntimeCall*> calls;
  calls.reserve(records.runtimeCalls.size());
  for (const auto& call : records.runtimeCalls) calls.push_back(&call);
  auto callBefore = [](const RuntimeCall* a, const RuntimeCall* b) { return a->start < b->start; };
  sortRuns(calls, callBefore);
  CorrelationIndex runtimeByCorr = indexFor(records.runtimeCalls, [](const RuntimeCall& c) { return c.correlationId; });
  out.runtime.reserve(calls.size());
  for (const RuntimeCall* call : calls) {
    if (call->correlationId != 0 &&
        !runtimeByCorr.insert(call->correlationId, static_cast<uint32_t>(out.runtime.size()))) {
      ++out.stats.duplicateRecords;
      continue;
    }
    out.runtime.push_back({.call = call, .traceId = 0, .external = externalOf(call->correlationId)});
  }

  CorrelationIndex syncByCorr = indexFor(records.hostSyncs, [](const HostSync& h) { return h.correlationId; });
  for (const auto& sync : records.hostSyncs) {
    if (sync.correlationId != 0 &&
        !syncByCorr.insert(sync.correlationId, static_cast<uint32_t>(out.hostSyncs.size()))) {
      ++out.stats.duplicateRecords;
      continue;
    }
    out.hostSyncs.push_back(sync);
  }
  if (!out.hostSyncs.empty()) {
    for (auto& rt : out.runtime) {
      const uint32_t slot = syncByCorr.find(rt.call->correlationId);
      if (slot != CorrelationIndex::kMissing) rt.syncIndex = slot;
    }
  }

  // Device work: one record per correlation id, mapped to host time.
  CorrelationIndex seenDeviceCorr = indexFor(records.deviceOps, [](const DeviceOp& d) { return d.correlationId; });
  out.deviceOps.reserve(records.deviceOps.size());
  const ClockMap* clock = nullptr;
  int32_t clockDevice = INT32_MIN;
  for (const auto& op : records.deviceOps) {
    if (op.correlationId != 0 && !seenDeviceCorr.insert(op.correlationId, 0)) {
      ++out.stats.duplicateRecords;
      continue;
    }
    if (op.device != clockDevice) {
      auto it = clocks.find(op.device);
      clock = it != clocks.end() ? &it->second : nullptr;
      clockDevice = op.device;
    }
    std::optional<int64_t> start, end;
    if (clock != nullptr) {
      start = clock->toHost(op.start);
      end = clock->toHost(op.end);
    }
    if (!start || !end) {
      ++out.stats.unmappedDeviceOps;
      continue;
    }
    PreparedDeviceOp p;
    p.op = &op;
    p.start = *start;
    p.end = std::max(*start, *end);
    p.external = externalOf(op.correlationId);
    const uint32_t rt = runtimeByCorr.find(op.correlationId);
    if (rt != CorrelationIndex::kMissing) p.runtimeIndex = rt;
    out.deviceOps.push_back(p);
  }

  // Per-trace ids in submission order: a launch and its device work share
  // one; device work whose launch is unknown gets its own (at its start).
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

  auto deviceBefore = [](const PreparedDeviceOp& a, const PreparedDeviceOp& b) {
    return a.start != b.start ? a.start < b.start : a.end < b.end;
  };
  sortRuns(out.deviceOps, deviceBefore);
  return out;
}

void emitTrace(const PreparedTrace& prepared, const EmitOptions& options, const UserRangeLookup& userRange,
               EmitResult& result, const EventSink& sink) {
  EmitStats& stats = result.stats;
  auto inWindow = [&](int64_t start, int64_t end) {
    return start >= options.windowStart && end <= options.windowEnd;
  };

  // Host launch rows.
  std::vector<char> runtimeEmitted(prepared.runtime.size(), 0);
  std::vector<char> runtimeInWindow(prepared.runtime.size(), 0);
  for (size_t i = 0; i < prepared.runtime.size(); ++i) {
    const RuntimeCall& call = *prepared.runtime[i].call;
    const int64_t start = callStart(call);
    const int64_t end = callEnd(call);
    runtimeInWindow[i] = inWindow(start, end);
    if (!options.runtime) {
      ++stats.notRequested;
    } else if (!runtimeInWindow[i]) {
      ++stats.outOfWindow;
    } else if (options.notBefore != 0 && start < options.notBefore) {
      ++stats.beforeRequestedStart;
    } else {
      runtimeEmitted[i] = 1;
    }
  }

  // Device work inside the window, with its final host times, one list per
  // stream row. Prepared work is sorted by start, so each row is too.
  struct Chosen {
    const PreparedDeviceOp* op;
    int64_t start;
    int64_t end;
    bool emit;
  };
  std::map<std::pair<int32_t, uint64_t>, std::vector<Chosen>> rowWork;
  std::vector<Chosen>* row = nullptr;
  std::pair<int32_t, uint64_t> rowKey{INT32_MIN, 0};
  for (const auto& p : prepared.deviceOps) {
    const DeviceOp& op = *p.op;
    const bool wanted = requested(options, op.kind);
    // Annotations are spans over kernels, copies and memsets, so those are
    // kept for the spans even when they are not emitted themselves.
    const bool neededForSpans = options.userAnnotations && op.kind != DeviceOpKind::StreamWait;
    if (!wanted && !neededForSpans) {
      ++stats.notRequested;
      continue;
    }
    if (!inWindow(p.start, p.end)) {
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
    if (!wanted) {
      ++stats.notRequested;
    }
    Chosen c{&p, p.start, p.end, wanted};
    // Work cannot start before it was submitted; a mapped start a little
    // earlier is clock error within the samples' uncertainty. Moving only the
    // start keeps the row free of new overlaps.
    if (p.runtimeIndex >= 0) {
      const int64_t launch = callStart(*prepared.runtime[static_cast<size_t>(p.runtimeIndex)].call);
      if (c.start < launch) {
        ++stats.causalityFixes;
        stats.maxCausalityFixNs = std::max(stats.maxCausalityFixNs, elapsed(c.start, launch));
        c.start = launch;
        c.end = std::max(c.end, c.start);
      }
    }
    if (row == nullptr || rowKey.first != op.device || rowKey.second != op.stream) {
      rowKey = {op.device, op.stream};
      row = &rowWork[rowKey];
    }
    row->push_back(c);
  }

  // What is emitted, as compact keys in runs that are each in emission
  // order (by start, enclosing events first); the runs are merged at the end
  // and each event is built only as it is handed to the sink.
  struct Key {
    int64_t start;
    int64_t end;
    uint32_t source;  // a row's number, then kRuntime, then kAnnotation
    uint32_t index;
  };
  auto keyBefore = [](const Key& a, const Key& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; };
  std::vector<Key> keys;
  keys.reserve(prepared.runtime.size() + prepared.deviceOps.size());
  std::vector<size_t> runStarts;
  auto closeRun = [&](size_t begin) {
    if (!std::is_sorted(keys.begin() + static_cast<std::ptrdiff_t>(begin), keys.end(), keyBefore)) {
      std::stable_sort(keys.begin() + static_cast<std::ptrdiff_t>(begin), keys.end(), keyBefore);
    }
    if (keys.size() > begin) runStarts.push_back(begin);
  };

  // A stream runs one thing at a time: rounding in the clock map must not
  // make neighbours overlap on its row.
  std::vector<const std::vector<Chosen>*> rows;
  std::vector<char> runtimeHasFlow(prepared.runtime.size(), 0);
  for (auto& [key, work] : rowWork) {
    auto byTime = [](const Chosen& a, const Chosen& b) { return std::tie(a.start, a.end) < std::tie(b.start, b.end); };
    if (!std::is_sorted(work.begin(), work.end(), byTime)) {
      std::stable_sort(work.begin(), work.end(), byTime);  // causality fixes can reorder
    }
    for (size_t i = 1; i < work.size(); ++i) {
      if (work[i].start < work[i - 1].end) {
        ++stats.rowOverlapFixes;
        work[i].start = work[i - 1].end;
        work[i].end = std::max(work[i].end, work[i].start);
      }
    }
    const auto source = static_cast<uint32_t>(rows.size());
    rows.push_back(&work);
    const size_t begin = keys.size();
    for (size_t i = 0; i < work.size(); ++i) {
      const Chosen& c = work[i];
      if (!c.emit) continue;
      const PreparedDeviceOp& p = *c.op;
      if (p.traceId != 0 && p.runtimeIndex >= 0 && runtimeEmitted[static_cast<size_t>(p.runtimeIndex)]) {
        runtimeHasFlow[static_cast<size_t>(p.runtimeIndex)] = 1;
        ++stats.flows;
      }
      keys.push_back({c.start, c.end, source, static_cast<uint32_t>(i)});
    }
    if (keys.size() > begin) result.rows[key] += keys.size() - begin;
    closeRun(begin);
  }
  const auto kRuntime = static_cast<uint32_t>(rows.size());
  const uint32_t kAnnotation = kRuntime + 1;

  {
    const size_t begin = keys.size();
    for (size_t i = 0; i < prepared.runtime.size(); ++i) {
      if (!runtimeEmitted[i]) continue;
      const RuntimeCall& call = *prepared.runtime[i].call;
      keys.push_back({callStart(call), callEnd(call),
                      kRuntime, static_cast<uint32_t>(i)});
    }
    closeRun(begin);
  }

  // record_function ranges on the stream rows they cover: the innermost
  // range of each piece of work (the top of the user stack at submission),
  // spanning that range's work on one row, as Kineto does for CUDA.
  std::vector<TraceEvent> annotations;
  if (options.userAnnotations) {
    struct Span {
      int32_t device;
      uint64_t stream;
      uint64_t user;
      int64_t start;
      int64_t end;
    };
    std::map<std::tuple<int32_t, uint64_t, uint64_t>, Span> spans;
    for (const auto& [key, work] : rowWork) {
      for (const auto& c : work) {
        const PreparedDeviceOp& p = *c.op;
        if (p.external.user == 0 || p.op->kind == DeviceOpKind::StreamWait) {
          continue;
        }
        auto [it, inserted] = spans.emplace(std::make_tuple(key.first, key.second, p.external.user),
                                            Span{key.first, key.second, p.external.user, c.start, c.end});
        if (!inserted) {
          it->second.start = std::min(it->second.start, c.start);
          it->second.end = std::max(it->second.end, c.end);
        }
      }
    }
    std::vector<Span> ordered;
    ordered.reserve(spans.size());
    for (const auto& [key, span] : spans) {
      ordered.push_back(span);
    }
    // Per row, outer spans first; a span that crosses another's end (ranges
    // on two threads interleaving on one stream) cannot nest and is dropped.
    std::sort(ordered.begin(), ordered.end(), [](const Span& a, const Span& b) {
      // (end compared reversed, not negated: -INT64_MIN overflows)
      return std::make_tuple(a.device, a.stream, a.start, b.end) <
          std::make_tuple(b.device, b.stream, b.start, a.end);
    });
    std::vector<const Span*> open;
    for (size_t i = 0; i < ordered.size(); ++i) {
      const Span& s = ordered[i];
      if (i == 0 || ordered[i - 1].device != s.device || ordered[i - 1].stream != s.stream) {
        open.clear();
      }
      while (!open.empty() && open.back()->end <= s.start) {
        open.pop_back();
      }
      if (!open.empty() && s.end > open.back()->end) {
        ++stats.annotationOverlapsDropped;
        continue;
      }
      std::optional<std::string> name = userRange ? userRange(s.user) : std::nullopt;
      if (!name) {
        ++stats.annotationsWithoutRange;
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
      annotations.push_back(e);
    }
    const size_t begin = keys.size();
    for (size_t i = 0; i < annotations.size(); ++i) {
      keys.push_back({annotations[i].start, annotations[i].end, kAnnotation, static_cast<uint32_t>(i)});
    }
    closeRun(begin);
  }

  auto build = [&](const Key& k) -> TraceEvent {
    if (k.source == kAnnotation) return annotations[k.index];
    TraceEvent e;
    e.start = k.start;
    e.end = k.end;
    if (k.source == kRuntime) {
      const PreparedRuntime& rt = prepared.runtime[k.index];
      const RuntimeCall& call = *rt.call;
      e.type = TraceEventType::Runtime;
      e.name = call.name != nullptr && call.name[0] != '\0' ? call.name : "openreg runtime call";
      e.pid = call.processId;
      e.tid = call.threadId;
      e.threadId = static_cast<int32_t>(call.threadId);
      e.id = rt.traceId;
      e.linkedOp = rt.external.op;
      e.runtime = &rt;
      if (rt.syncIndex >= 0) e.sync = &prepared.hostSyncs[static_cast<size_t>(rt.syncIndex)];
      if (runtimeHasFlow[k.index]) {
        e.flowId = static_cast<uint32_t>(rt.traceId);
        e.flowStart = true;
      }
      return e;
    }
    const PreparedDeviceOp& p = *(*rows[k.source])[k.index].op;
    e.type = eventType(p.op->kind);
    e.name = deviceOpName(*p.op);
    e.pid = p.op->device;
    e.tid = static_cast<int64_t>(p.op->stream);
    e.id = p.traceId;
    e.device = &p;
    e.communication = prepared.records != nullptr ? prepared.records->communicationOf(*p.op) : nullptr;
    // Stream waits are not device work of the op: linking them would credit
    // waiting time to it in key_averages().
    if (p.op->kind != DeviceOpKind::StreamWait) {
      e.linkedOp = p.external.op;
    }
    if (p.traceId != 0 && p.runtimeIndex >= 0 && runtimeEmitted[static_cast<size_t>(p.runtimeIndex)]) {
      e.flowId = static_cast<uint32_t>(p.traceId);
    }
    return e;
  };

  // Merge the runs, stable across them: device rows, launches, spans.
  runStarts.push_back(keys.size());
  using Head = std::pair<size_t, size_t>;  // (position in keys, end of its run)
  auto later = [&](const Head& a, const Head& b) {
    if (keyBefore(keys[b.first], keys[a.first])) return true;
    if (keyBefore(keys[a.first], keys[b.first])) return false;
    return a.first > b.first;
  };
  std::priority_queue<Head, std::vector<Head>, decltype(later)> heads(later);
  for (size_t r = 0; r + 1 < runStarts.size(); ++r) heads.push({runStarts[r], runStarts[r + 1]});
  while (!heads.empty()) {
    auto [i, end] = heads.top();
    heads.pop();
    sink(build(keys[i]));
    ++stats.emitted;
    if (i + 1 < end) heads.push({i + 1, end});
  }
}

EmitResult emitTrace(const PreparedTrace& prepared, const EmitOptions& options,
                     const UserRangeLookup& userRange) {
  EmitResult result;
  emitTrace(prepared, options, userRange, result, [&](const TraceEvent& e) { result.events.push_back(e); });
  return result;
}

} // namespace openreg::profiler
