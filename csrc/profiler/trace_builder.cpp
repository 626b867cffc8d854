#include "trace_builder.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <climits>
#include <tuple>
#include <unordered_map>

#include "openreg/activity.h"

namespace openreg::profiler {
namespace {

std::string number(uint64_t v) { return std::to_string(v); }
std::string number(int64_t v) { return std::to_string(v); }

std::string dim3(const uint32_t (&d)[3]) {
  return "[" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + "]";
}

// GB/s = bytes per ns. Fixed notation keeps it a valid JSON number.
std::string bandwidth(uint64_t bytes, int64_t durationNs) {
  char text[64];
  double gbps = durationNs > 0 ? static_cast<double>(bytes) / static_cast<double>(durationNs) : 0.0;
  std::snprintf(text, sizeof(text), "%.3f", gbps);
  return text;
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
  }
  return false;
}

TraceEventType eventType(DeviceOpKind kind) {
  switch (kind) {
    case DeviceOpKind::Kernel: return TraceEventType::Kernel;
    case DeviceOpKind::Memcpy: return TraceEventType::Memcpy;
    case DeviceOpKind::Memset: return TraceEventType::Memset;
    case DeviceOpKind::StreamWait: return TraceEventType::StreamWait;
  }
  return TraceEventType::Kernel;
}

void deviceArgs(const PreparedDeviceOp& p, int64_t start, int64_t end, std::vector<TraceArg>& args) {
  const DeviceOp& op = p.op;
  // device/stream/correlation: what HTA and viewers key device work on.
  args.push_back({"device", number(static_cast<int64_t>(op.device))});
  args.push_back({"stream", number(op.stream)});
  args.push_back({"correlation", number(static_cast<int64_t>(p.traceId))});
  switch (op.kind) {
    case DeviceOpKind::Kernel:
      args.push_back({"grid", dim3(op.grid)});
      args.push_back({"block", dim3(op.block)});
      args.push_back({"shared memory", number(static_cast<uint64_t>(op.sharedMemBytes))});
      args.push_back({"stream priority", number(static_cast<int64_t>(op.streamPriority))});
      break;
    case DeviceOpKind::Memcpy:
      args.push_back({"kind", memcpyKindName(op.copyKind), true});
      args.push_back({"bytes", number(op.bytes)});
      args.push_back({"memory bandwidth (GB/s)", bandwidth(op.bytes, end - start)});
      args.push_back({"src kind", memoryKindName(op.srcKind), true});
      args.push_back({"dst kind", memoryKindName(op.dstKind), true});
      args.push_back({"src device", number(static_cast<int64_t>(op.srcDevice))});
      args.push_back({"dst device", number(static_cast<int64_t>(op.dstDevice))});
      args.push_back({"async", op.isAsync ? "true" : "false"});
      break;
    case DeviceOpKind::Memset:
      args.push_back({"kind", "Memset", true});
      args.push_back({"bytes", number(op.bytes)});
      args.push_back({"memory bandwidth (GB/s)", bandwidth(op.bytes, end - start)});
      args.push_back({"value", number(static_cast<uint64_t>(op.memsetValue))});
      args.push_back({"element size", number(static_cast<uint64_t>(op.memsetElementSize))});
      args.push_back({"async", op.isAsync ? "true" : "false"});
      break;
    case DeviceOpKind::StreamWait:
      args.push_back({"event", number(op.eventId)});
      break;
  }
  if (op.status != 0) {
    args.push_back({"status", number(static_cast<int64_t>(op.status))});
  }
}

std::string deviceOpName(const DeviceOp& op) {
  switch (op.kind) {
    case DeviceOpKind::Kernel: return op.name != nullptr && op.name[0] != '\0' ? op.name : "unnamed kernel";
    case DeviceOpKind::Memcpy: return memcpyName(op.copyKind);
    case DeviceOpKind::Memset: return "Memset (Device)";
    case DeviceOpKind::StreamWait: return "Stream Wait Event";
  }
  return "device op";
}

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

std::string memcpyName(uint8_t copyKind) {
  switch (copyKind) {
    case OR_ACTIVITY_MEMCPY_HTOD: return "Memcpy HtoD (Host -> Device)";
    case OR_ACTIVITY_MEMCPY_DTOH: return "Memcpy DtoH (Device -> Host)";
    case OR_ACTIVITY_MEMCPY_DTOD: return "Memcpy DtoD (Device -> Device)";
    case OR_ACTIVITY_MEMCPY_HTOH: return "Memcpy HtoH (Host -> Host)";
    case OR_ACTIVITY_MEMCPY_PTOP: return "Memcpy PtoP (Device -> Device)";
    default: return "Memcpy (Unknown)";
  }
}

PreparedTrace prepareTrace(const RecordSet& records) {
  PreparedTrace out;
  auto externalOf = [&](uint64_t corr) {
    auto it = records.external.find(corr);
    return it != records.external.end() ? it->second : ExternalIds{};
  };

  std::unordered_map<int32_t, ClockMap> clocks;
  for (const auto& [device, points] : records.clock) {
    ClockMap map(points);
    out.stats.clockSamples += points.size();
    out.stats.rejectedClockSamples += map.rejected();
    clocks.emplace(device, std::move(map));
  }

  // Runtime calls, in host order, one per correlation id.
  std::vector<RuntimeCall> calls = records.runtimeCalls;
  std::stable_sort(calls.begin(), calls.end(),
                   [](const RuntimeCall& a, const RuntimeCall& b) { return a.start < b.start; });
  std::unordered_map<uint64_t, size_t> runtimeByCorr;
  for (const auto& call : calls) {
    if (call.correlationId != 0) {
      if (!runtimeByCorr.emplace(call.correlationId, out.runtime.size()).second) {
        ++out.stats.duplicateRecords;
        continue;
      }
    }
    out.runtime.push_back({.call = call, .traceId = 0, .external = externalOf(call.correlationId)});
  }

  std::unordered_map<uint64_t, size_t> syncByCorr;
  for (const auto& sync : records.hostSyncs) {
    if (sync.correlationId != 0 && !syncByCorr.emplace(sync.correlationId, out.hostSyncs.size()).second) {
      ++out.stats.duplicateRecords;
      continue;
    }
    out.hostSyncs.push_back(sync);
  }
  for (auto& rt : out.runtime) {
    auto it = syncByCorr.find(rt.call.correlationId);
    if (rt.call.correlationId != 0 && it != syncByCorr.end()) {
      rt.syncIndex = static_cast<int64_t>(it->second);
    }
  }

  // Device work: one record per correlation id, mapped to host time.
  std::unordered_map<uint64_t, bool> seenDeviceCorr;
  for (const auto& op : records.deviceOps) {
    if (op.correlationId != 0 && !seenDeviceCorr.emplace(op.correlationId, true).second) {
      ++out.stats.duplicateRecords;
      continue;
    }
    auto clock = clocks.find(op.device);
    std::optional<int64_t> start, end;
    if (clock != clocks.end()) {
      start = clock->second.toHost(op.start);
      end = clock->second.toHost(op.end);
    }
    if (!start || !end) {
      ++out.stats.unmappedDeviceOps;
      continue;
    }
    PreparedDeviceOp p;
    p.op = op;
    p.start = *start;
    p.end = std::max(*start, *end);
    p.external = externalOf(op.correlationId);
    auto rt = runtimeByCorr.find(op.correlationId);
    if (op.correlationId != 0 && rt != runtimeByCorr.end()) {
      p.runtimeIndex = static_cast<int64_t>(rt->second);
    }
    out.deviceOps.push_back(p);
  }

  // Per-trace ids in submission order: a launch and its device work share
  // one; device work whose launch is unknown gets its own.
  std::vector<std::tuple<int64_t, int, size_t>> order;  // (time, 0=runtime/1=device, index)
  order.reserve(out.runtime.size() + out.deviceOps.size());
  for (size_t i = 0; i < out.runtime.size(); ++i) {
    order.emplace_back(static_cast<int64_t>(out.runtime[i].call.start), 0, i);
  }
  for (size_t i = 0; i < out.deviceOps.size(); ++i) {
    if (out.deviceOps[i].runtimeIndex < 0) {
      order.emplace_back(out.deviceOps[i].start, 1, i);
    }
  }
  std::sort(order.begin(), order.end());
  int64_t next = kFirstTraceId;
  for (const auto& [time, kind, index] : order) {
    // Past 2^30 submissions in one trace ids run out: 0 means "no id, no
    // arrow" rather than a repeated one.
    const int32_t id = next <= INT32_MAX ? static_cast<int32_t>(next++) : 0;
    if (kind == 0) {
      out.runtime[index].traceId = id;
    } else {
      out.deviceOps[index].traceId = id;
    }
  }
  for (auto& p : out.deviceOps) {
    if (p.runtimeIndex >= 0) {
      p.traceId = out.runtime[static_cast<size_t>(p.runtimeIndex)].traceId;
    }
  }
  std::stable_sort(out.deviceOps.begin(), out.deviceOps.end(),
                   [](const PreparedDeviceOp& a, const PreparedDeviceOp& b) { return a.start < b.start; });
  return out;
}

EmitResult emitTrace(const PreparedTrace& prepared, const EmitOptions& options,
                     const UserRangeLookup& userRange) {
  EmitResult result;
  EmitStats& stats = result.stats;
  auto inWindow = [&](int64_t start, int64_t end) {
    return start >= options.windowStart && end <= options.windowEnd;
  };

  // Host launch rows.
  std::vector<char> runtimeEmitted(prepared.runtime.size(), 0);
  std::vector<char> runtimeInWindow(prepared.runtime.size(), 0);
  for (size_t i = 0; i < prepared.runtime.size(); ++i) {
    const auto& call = prepared.runtime[i].call;
    const auto start = static_cast<int64_t>(call.start);
    const auto end = static_cast<int64_t>(std::max(call.start, call.end));
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

  // Device work inside the window, with its final host times.
  struct Chosen {
    const PreparedDeviceOp* op;
    int64_t start;
    int64_t end;
    bool emit;
  };
  std::vector<Chosen> chosen;
  chosen.reserve(prepared.deviceOps.size());
  for (const auto& p : prepared.deviceOps) {
    const bool wanted = requested(options, p.op.kind);
    // Annotations are spans over kernels, copies and memsets, so those are
    // kept for the spans even when they are not emitted themselves.
    const bool neededForSpans = options.userAnnotations && p.op.kind != DeviceOpKind::StreamWait;
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
      const auto launch = static_cast<int64_t>(prepared.runtime[static_cast<size_t>(p.runtimeIndex)].call.start);
      if (c.start < launch) {
        ++stats.causalityFixes;
        stats.maxCausalityFixNs = std::max(stats.maxCausalityFixNs, launch - c.start);
        c.start = launch;
        c.end = std::max(c.end, c.start);
      }
    }
    chosen.push_back(c);
  }

  // A stream runs one thing at a time: rounding in the clock map must not
  // make neighbours overlap on its row.
  std::sort(chosen.begin(), chosen.end(), [](const Chosen& a, const Chosen& b) {
    return std::tie(a.op->op.device, a.op->op.stream, a.start, a.end) <
        std::tie(b.op->op.device, b.op->op.stream, b.start, b.end);
  });
  for (size_t i = 1; i < chosen.size(); ++i) {
    Chosen& prev = chosen[i - 1];
    Chosen& cur = chosen[i];
    if (prev.op->op.device == cur.op->op.device && prev.op->op.stream == cur.op->op.stream &&
        cur.start < prev.end) {
      ++stats.rowOverlapFixes;
      cur.start = prev.end;
      cur.end = std::max(cur.end, cur.start);
    }
  }

  std::vector<char> runtimeHasFlow(prepared.runtime.size(), 0);
  for (const auto& c : chosen) {
    if (!c.emit) {
      continue;
    }
    const PreparedDeviceOp& p = *c.op;
    TraceEvent e;
    e.type = eventType(p.op.kind);
    e.name = deviceOpName(p.op);
    e.start = c.start;
    e.end = c.end;
    e.pid = p.op.device;
    e.tid = static_cast<int64_t>(p.op.stream);
    e.id = p.traceId;
    // Stream waits are not device work of the op: linking them would credit
    // waiting time to it in key_averages().
    if (p.op.kind != DeviceOpKind::StreamWait) {
      e.linkedOp = p.external.op;
    }
    if (p.traceId != 0 && p.runtimeIndex >= 0 && runtimeEmitted[static_cast<size_t>(p.runtimeIndex)]) {
      e.flowId = static_cast<uint32_t>(p.traceId);
      e.flowStart = false;
      runtimeHasFlow[static_cast<size_t>(p.runtimeIndex)] = 1;
      ++stats.flows;
    }
    deviceArgs(p, c.start, c.end, e.args);
    ++result.rows[{p.op.device, p.op.stream}];
    result.events.push_back(std::move(e));
  }

  for (size_t i = 0; i < prepared.runtime.size(); ++i) {
    if (!runtimeEmitted[i]) {
      continue;
    }
    const PreparedRuntime& rt = prepared.runtime[i];
    TraceEvent e;
    e.type = TraceEventType::Runtime;
    e.name = rt.call.name != nullptr && rt.call.name[0] != '\0' ? rt.call.name : "openreg runtime call";
    e.start = static_cast<int64_t>(rt.call.start);
    e.end = static_cast<int64_t>(std::max(rt.call.start, rt.call.end));
    e.pid = rt.call.processId;
    e.tid = rt.call.threadId;
    e.threadId = static_cast<int32_t>(rt.call.threadId);
    e.id = rt.traceId;
    e.linkedOp = rt.external.op;
    if (runtimeHasFlow[i]) {
      e.flowId = static_cast<uint32_t>(rt.traceId);
      e.flowStart = true;
    }
    // No "stream" arg: HTA would take a host row carrying one for device work.
    e.args.push_back({"correlation", number(static_cast<int64_t>(rt.traceId))});
    e.args.push_back({"device", number(static_cast<int64_t>(rt.call.device))});
    if (rt.syncIndex >= 0) {
      const HostSync& sync = prepared.hostSyncs[static_cast<size_t>(rt.syncIndex)];
      e.args.push_back({"sync", syncTypeName(sync.syncType), true});
      if (sync.stream != 0) e.args.push_back({"sync stream", number(sync.stream)});
      if (sync.eventId != 0) e.args.push_back({"sync event", number(sync.eventId)});
    }
    if (rt.call.status != 0) {
      e.args.push_back({"status", number(static_cast<int64_t>(rt.call.status))});
    }
    result.events.push_back(std::move(e));
  }

  // record_function ranges on the stream rows they cover: the innermost
  // range of each piece of work (the top of the user stack at submission),
  // spanning that range's work on one row, as Kineto does for CUDA.
  if (options.userAnnotations) {
    struct Span {
      int32_t device;
      uint64_t stream;
      uint64_t user;
      int64_t start;
      int64_t end;
    };
    std::map<std::tuple<int32_t, uint64_t, uint64_t>, Span> spans;
    for (const auto& c : chosen) {
      const PreparedDeviceOp& p = *c.op;
      if (p.external.user == 0 || p.op.kind == DeviceOpKind::StreamWait) {
        continue;
      }
      auto key = std::make_tuple(p.op.device, p.op.stream, p.external.user);
      auto [it, inserted] = spans.emplace(key, Span{p.op.device, p.op.stream, p.external.user, c.start, c.end});
      if (!inserted) {
        it->second.start = std::min(it->second.start, c.start);
        it->second.end = std::max(it->second.end, c.end);
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
      return std::make_tuple(a.device, a.stream, a.start, -a.end) <
          std::make_tuple(b.device, b.stream, b.start, -b.end);
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
      e.name = *name;
      e.start = s.start;
      e.end = s.end;
      e.pid = s.device;
      e.tid = static_cast<int64_t>(s.stream);
      // No device/stream/correlation args, as for CUDA: HTA counts any
      // event with a "stream" arg as a kernel and would count this span's
      // time twice.
      e.userRange = s.user;
      ++result.rows[{s.device, s.stream}];
      result.events.push_back(std::move(e));
    }
  }

  std::stable_sort(result.events.begin(), result.events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    // Enclosing events first at equal starts, so viewers nest them.
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  stats.emitted = result.events.size();
  return result;
}

} // namespace openreg::profiler
