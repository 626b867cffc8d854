#include "trace_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <tuple>

namespace openreg::trace {

// ---------------------------------------------------------------- strings

char* StringTable::allocate(size_t n) {
  constexpr size_t kBlock = 64 * 1024;
  if (n > blockLeft_) {
    size_t size = n > kBlock / 4 ? n : kBlock;  // long strings get a block of their own
    blocks_.emplace_back(new char[size]);
    if (size == n) return blocks_.back().get();
    blockPos_ = blocks_.back().get();
    blockLeft_ = size;
  }
  char* p = blockPos_;
  blockPos_ += n;
  blockLeft_ -= n;
  return p;
}

uint32_t StringTable::intern(std::string_view s) {
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  char* p = allocate(s.size() == 0 ? 1 : s.size());
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  std::string_view stored(p, s.size());
  auto id = static_cast<uint32_t>(views_.size());
  views_.push_back(stored);
  ids_.emplace(stored, id);
  return id;
}

uint32_t StringTable::find(std::string_view s) const {
  auto it = ids_.find(s);
  return it == ids_.end() ? kNoString : it->second;
}

// ---------------------------------------------------------------- helpers

std::string formatUs(int64_t ns) {
  bool negative = ns < 0;
  uint64_t a = negative ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%llu.%03llu", negative ? "-" : "", static_cast<unsigned long long>(a / 1000),
                static_cast<unsigned long long>(a % 1000));
  return buf;
}

std::string formatMs(int64_t ns) { return formatUs(ns / 1000) + " ms"; }

const char* stepClockName(StepClock clock) { return clock == StepClock::Device ? "device" : "host"; }

std::pair<int64_t, int64_t> Trace::stepSpan(const Step& step) const {
  if (stepClock == StepClock::Device && step.hasDeviceWork) return {step.deviceStart, step.deviceEnd};
  return {step.ts, step.end};
}

std::string Trace::keyText(const Key& k) const {
  return k.isString ? std::string(str(static_cast<uint32_t>(k.value))) : std::to_string(k.value);
}

const CommArgs* Trace::commArgsOf(uint32_t slice) const {
  auto it = std::lower_bound(commArgs.begin(), commArgs.end(), slice,
                             [](const CommArgs& a, uint32_t i) { return a.slice < i; });
  return it != commArgs.end() && it->slice == slice ? &*it : nullptr;
}

const SourceLines* Trace::sourceLinesOf(uint32_t slice) const {
  auto it = std::lower_bound(sourceLines.begin(), sourceLines.end(), slice,
                             [](const SourceLines& a, uint32_t i) { return a.slice < i; });
  return it != sourceLines.end() && it->slice == slice ? &*it : nullptr;
}

const SyncArgs* Trace::syncArgsOf(uint32_t slice) const {
  auto it = std::lower_bound(syncArgs.begin(), syncArgs.end(), slice,
                             [](const SyncArgs& a, uint32_t i) { return a.slice < i; });
  return it != syncArgs.end() && it->slice == slice ? &*it : nullptr;
}

uint32_t Trace::laneId(const Lane& lane) {
  auto [it, inserted] = laneIds_.emplace(lane, static_cast<uint32_t>(lanes.size()));
  if (inserted) lanes.push_back(lane);
  return it->second;
}

std::optional<uint32_t> Trace::findLane(const Lane& lane) const {
  auto it = laneIds_.find(lane);
  if (it == laneIds_.end()) return std::nullopt;
  return it->second;
}

// ---------------------------------------------------------------- loading

namespace {

// Everything one event may carry; reused across events.
struct EventFields {
  char ph = 0;
  bool phOk = false;
  uint32_t name = kNoString, cat = kNoString;
  Key pid, tid, id;
  bool hasPid = false, hasTid = false, hasId = false;
  int64_t ts = 0, dur = 0;
  bool hasTs = false, hasDur = false;
  bool bpE = false;
  IntArg externalId, device, stream, correlation, deviceType, deviceId, totalAllocated, bytes, sortIndex;
  CommArgs comm;
  bool hasComm = false;
  std::vector<uint32_t> sourceLines;
  SyncArgs sync;
  bool hasSync = false;
  uint32_t strArg = kNoString;
};

class Loader {
 public:
  Loader(Trace& t, JsonReader& r) : t_(t), r_(r) {
    memoryName_ = t_.strings.intern("[memory]");
    windowEndName_ = t_.strings.intern("Record Window End");
    metricCat_ = t_.strings.intern(kMetricCategory);
    kernelCat_ = t_.strings.intern("kernel");
  }

  void readDocument() {
    JsonKind kind = r_.peekKind();
    if (kind == JsonKind::Array) {
      t_.hasTraceEvents = true;
      readEvents();
    } else if (kind == JsonKind::Object) {
      r_.beginObject();
      std::string_view key;
      while (r_.nextKey(key)) {
        if (key == "traceEvents") {
          if (r_.peekKind() != JsonKind::Array) r_.fail("\"traceEvents\" is not an array");
          t_.hasTraceEvents = true;
          readEvents();
        } else if (key == "distributedInfo" && r_.peekKind() == JsonKind::Object) {
          readDistributedInfo();
        } else if (key == "openreg_profiler" && r_.peekKind() == JsonKind::Object) {
          readOpenregProfiler();
        } else if (key == "deviceProperties" && r_.peekKind() == JsonKind::Array) {
          readDeviceProperties();
        } else {
          r_.skipValue();
        }
      }
    } else {
      r_.fail("a trace is a JSON object or array");
    }
    if (!r_.atEnd()) r_.fail("data after the end of the JSON document");
  }

 private:
  void readEvents() {
    r_.beginArray();
    while (r_.nextElement()) {
      Origin origin{r_.offset(), static_cast<uint32_t>(t_.eventCount)};
      ++t_.eventCount;
      if (r_.peekKind() != JsonKind::Object) {
        r_.skipValue();
        malformed(origin, "event is not a JSON object");
        continue;
      }
      readEvent(origin);
    }
  }

  void readDistributedInfo() {
    r_.beginObject();
    std::string_view key;
    while (r_.nextKey(key)) {
      IntArg v;
      if (key == "rank" || key == "world_size") {
        readIntArg(v);
        if (v.ok()) (key == "rank" ? t_.rank : t_.worldSize) = v.value;
      } else if (key == "backend") {
        t_.distBackend = readInternedString();
      } else {
        r_.skipValue();
      }
    }
  }

  // openreg's plugin metadata: only its on-demand object is read.
  void readOpenregProfiler() {
    r_.beginObject();
    std::string_view key;
    while (r_.nextKey(key)) {
      if (key != "on_demand" || r_.peekKind() != JsonKind::Object) {
        r_.skipValue();
        continue;
      }
      OnDemandInfo info;
      r_.beginObject();
      while (r_.nextKey(key)) {
        IntArg v;
        if (key == "iterations" || key == "start_iteration") {
          readIntArg(v);
          if (v.ok()) (key == "iterations" ? info.iterations : info.startIteration) = v.value;
        } else {
          r_.skipValue();
        }
      }
      t_.onDemand = info;
    }
  }

  // Each entry's id, name and declared peaks; other fields are skipped.
  void readDeviceProperties() {
    r_.beginArray();
    while (r_.nextElement()) {
      if (r_.peekKind() != JsonKind::Object) {
        r_.skipValue();
        continue;
      }
      DeviceProperties d;
      IntArg id;
      r_.beginObject();
      std::string_view key;
      while (r_.nextKey(key)) {
        if (key == "id") {
          readIntArg(id);
        } else if (key == "name") {
          d.name = readInternedString();
        } else if (key == "peakFlopsPerSecond" || key == "peakBytesPerSecond") {
          std::optional<double>& peak = key == "peakFlopsPerSecond" ? d.peakFlops : d.peakBytesPerS;
          if (r_.peekKind() != JsonKind::Number) {
            r_.skipValue();
            continue;
          }
          // A peak of 0 or less declares nothing.
          if (const double v = parseDouble(r_.readNumber()); v > 0 && std::isfinite(v)) peak = v;
        } else {
          r_.skipValue();
        }
      }
      if (!id.ok()) continue;
      d.id = id.value;
      t_.deviceProperties.push_back(d);
    }
  }

  // An integer, or a string holding one (some torch versions write "Seq" so).
  void readIntOrNumericString(IntArg& arg) {
    if (r_.peekKind() == JsonKind::String) {
      arg.present = true;
      arg.isInt = parseInt64(r_.readString(), arg.value);
    } else {
      readIntArg(arg);
    }
  }

  void malformed(const Origin& origin, std::string reason, uint32_t name = kNoString) {
    ++t_.malformedCount;
    if (t_.malformed.size() < Trace::kMaxMalformedKept) t_.malformed.push_back({origin, std::move(reason), name});
  }

  uint32_t readInternedString() {
    if (r_.peekKind() != JsonKind::String) {
      r_.skipValue();
      return kNoString;
    }
    return t_.strings.intern(r_.readString());
  }

  // An array of strings; other elements (and a value that is no array) are skipped.
  void readStrings(std::vector<uint32_t>& out) {
    if (r_.peekKind() != JsonKind::Array) {
      r_.skipValue();
      return;
    }
    r_.beginArray();
    while (r_.nextElement())
      if (uint32_t id = readInternedString(); id != kNoString) out.push_back(id);
  }

  bool readKey(Key& out) {
    switch (r_.peekKind()) {
      case JsonKind::Number: {
        std::string_view text = r_.readNumber();
        if (parseInt64(text, out.value)) {
          out.isString = false;
        } else {
          out = Key{t_.strings.intern(text), true};
        }
        return true;
      }
      case JsonKind::String:
        out = Key{t_.strings.intern(r_.readString()), true};
        return true;
      default:
        r_.skipValue();
        return false;
    }
  }

  bool readTime(int64_t& out) {
    if (r_.peekKind() != JsonKind::Number) {
      r_.skipValue();
      return false;
    }
    // Bounded so that ts + dur and differences of times cannot overflow.
    constexpr int64_t kMaxTimeNs = int64_t{1} << 61;
    return parseUsToNs(r_.readNumber(), out) && out > -kMaxTimeNs && out < kMaxTimeNs;
  }

  void readIntArg(IntArg& arg) {
    arg.present = true;
    arg.isInt = false;
    if (r_.peekKind() == JsonKind::Number) {
      arg.isInt = parseInt64(r_.readNumber(), arg.value);
    } else {
      r_.skipValue();
    }
  }

  void readArgs(EventFields& e) {
    if (r_.peekKind() != JsonKind::Object) {
      r_.skipValue();
      return;
    }
    // Numeric args are kept for counters and metric ranges only (or while
    // "ph" or "cat" is still unread: commit() drops them if unneeded). A
    // counter's are all its series, even one named "device" or "stream";
    // only when its "ph" follows its args do such names go to the event's
    // own fields (one pass cannot keep both; Kineto writes "ph" first).
    const bool counter = e.phOk && e.ph == 'C';
    // A kernel's own args may carry its metrics (openreg writes them there):
    // only those are kept.
    const bool kernel = e.phOk && e.ph == 'X' && e.cat == kernelCat_;
    const bool keep = counter || !e.phOk || (e.ph == 'X' && (e.cat == kNoString || e.cat == metricCat_)) || kernel;
    r_.beginObject();
    std::string_view key;
    while (r_.nextKey(key)) {
      if (counter && readNumArg(key)) continue;
      if (readEventArg(key, e) || readCommArg(key, e.comm, e.hasComm) || readSyncArg(key, e.sync, e.hasSync)) continue;
      if (!keep || (kernel && !isKernelMetricKey(key)) || !readNumArg(key)) r_.skipValue();
    }
  }

  // A number into pendingArgs_; false (the value unread) for anything else.
  bool readNumArg(std::string_view key) {
    if (r_.peekKind() != JsonKind::Number) return false;
    const uint32_t id = t_.strings.intern(key);  // before reading on: a refill moves the key's bytes
    const double v = parseDouble(r_.readNumber());
    if (std::isfinite(v)) pendingArgs_.push_back({id, v});
    return true;
  }

  // The args just read, moved to the trace: {first, count}.
  std::pair<uint32_t, uint32_t> keepPendingArgs() {
    const auto first = static_cast<uint32_t>(t_.numArgs.size());
    t_.numArgs.insert(t_.numArgs.end(), pendingArgs_.begin(), pendingArgs_.end());
    return {first, static_cast<uint32_t>(pendingArgs_.size())};
  }

  // The args of events in general (ids, lanes, memory, metadata); false if
  // `key` is none of them (its value is then still unread).
  bool readEventArg(std::string_view key, EventFields& e) {
    switch (key.size()) {
      case 4:
        if (key == "name") return (e.strArg = readInternedString(), true);
        break;
      case 5:
        if (key == "Bytes") return (readIntArg(e.bytes), true);
        break;
      case 6:
        if (key == "device") return (readIntArg(e.device), true);
        if (key == "stream") return (readIntArg(e.stream), true);
        if (key == "labels") return (e.strArg = readInternedString(), true);
        break;
      case 9:
        if (key == "Device Id") return (readIntArg(e.deviceId), true);
        break;
      case 10:
        if (key == "sort_index") return (readIntArg(e.sortIndex), true);
        break;
      case 11:
        if (key == "External id") return (readIntArg(e.externalId), true);
        if (key == "correlation") return (readIntArg(e.correlation), true);
        if (key == "Device Type") return (readIntArg(e.deviceType), true);
        break;
      case 12:
        if (key == "source_lines") return (readStrings(e.sourceLines), true);
        break;
      case 15:
        if (key == "Total Allocated") return (readIntArg(e.totalAllocated), true);
        break;
      default:
        break;
    }
    return false;
  }

  // record_param_comms' args (see CommArgs); `seen` is set by the two that
  // make an event a collective. False if `key` is none of them.
  bool readCommArg(std::string_view key, CommArgs& comm, bool& seen) {
    switch (key.size()) {
      case 3:
        if (key == "Seq") return (readIntOrNumericString(comm.seq), seen = true);
        break;
      case 5:
        if (key == "dtype") return (comm.dtype = readInternedString(), true);
        break;
      case 10:
        if (key == "Group size") return (readIntArg(comm.groupSize), true);
        break;
      case 13:
        if (key == "In msg nelems") return (readIntArg(comm.inNelems), true);
        break;
      case 14:
        if (key == "Out msg nelems") return (readIntArg(comm.outNelems), true);
        break;
      case 15:
        if (key == "Collective name") return (comm.collective = readInternedString(), seen = true);
        break;
      case 18:
        if (key == "Process Group Name") return (comm.group = readInternedString(), true);
        break;
      default:
        break;
    }
    return false;
  }

  // Kineto's synchronisation args (see SyncArgs); false if `key` is none of them.
  bool readSyncArg(std::string_view key, SyncArgs& sync, bool& seen) {
    if (key.size() < 14 || (key[0] != 'c' && key[0] != 'w')) return false;
    if (key == "cuda_sync_kind") return (sync.kind = readInternedString(), seen = true);
    if (key == "wait_on_stream") return (readIntArg(sync.waitOnStream), seen = true);
    if (key == "wait_on_cuda_event_record_corr_id") return (readIntArg(sync.waitOnRecordCorrelation), seen = true);
    if (key == "wait_on_cuda_event_id") return (readIntArg(sync.waitOnEventId), seen = true);
    return false;
  }

  void readEvent(const Origin& origin) {
    EventFields& e = fields_;
    e = EventFields{};
    pendingArgs_.clear();
    r_.beginObject();
    std::string_view key;
    while (r_.nextKey(key)) {
      switch (key.size()) {
        case 2:
          if (key == "ph") {
            if (r_.peekKind() == JsonKind::String) {
              std::string_view ph = r_.readString();
              e.phOk = ph.size() == 1;
              e.ph = ph.empty() ? '?' : ph[0];
            } else {
              r_.skipValue();
            }
            continue;
          }
          if (key == "ts") {
            e.hasTs = readTime(e.ts);
            continue;
          }
          if (key == "id") {
            e.hasId = readKey(e.id);
            continue;
          }
          if (key == "bp") {
            if (r_.peekKind() == JsonKind::String)
              e.bpE = r_.readString() == "e";
            else
              r_.skipValue();
            continue;
          }
          break;
        case 3:
          if (key == "pid") {
            e.hasPid = readKey(e.pid);
            continue;
          }
          if (key == "tid") {
            e.hasTid = readKey(e.tid);
            continue;
          }
          if (key == "cat") {
            e.cat = readInternedString();
            continue;
          }
          if (key == "dur") {
            e.hasDur = readTime(e.dur);
            continue;
          }
          break;
        case 4:
          if (key == "name") {
            e.name = readInternedString();
            continue;
          }
          if (key == "args") {
            readArgs(e);
            continue;
          }
          break;
        default:
          break;
      }
      r_.skipValue();
    }
    commit(origin);
  }

  void commit(const Origin& origin) {
    EventFields& e = fields_;
    if (!e.phOk) {
      malformed(origin, "missing or invalid \"ph\"", e.name);
      return;
    }
    ++t_.phaseCounts[static_cast<unsigned char>(e.ph)];
    switch (e.ph) {
      case 'X': {
        if (!e.hasTs || !e.hasDur || !e.hasPid || !e.hasTid) {
          malformed(origin, "complete event without a numeric ts, dur, pid or tid (or a time beyond 2^61 ns)", e.name);
          return;
        }
        if (e.dur < 0) {
          malformed(origin, "complete event with negative dur", e.name);
          return;
        }
        if (e.cat == metricCat_) return commitMetricRange(origin);
        if (e.cat == kernelCat_ && keepKernelMetrics()) commitMetricRange(origin);  // and the kernel itself
        Slice s;
        s.ts = e.ts;
        s.dur = e.dur;
        s.origin = origin;
        s.lane = t_.laneId(Lane{e.pid, e.tid});
        s.name = e.name;
        s.cat = e.cat;
        s.externalId = e.externalId;
        s.device = e.device;
        s.stream = e.stream;
        s.correlation = e.correlation;
        if (e.hasComm) {
          e.comm.slice = static_cast<uint32_t>(t_.slices.size());
          t_.commArgs.push_back(e.comm);
        }
        if (!e.sourceLines.empty())
          t_.sourceLines.push_back({static_cast<uint32_t>(t_.slices.size()), std::move(e.sourceLines)});
        if (e.hasSync) {
          e.sync.slice = static_cast<uint32_t>(t_.slices.size());
          t_.syncArgs.push_back(e.sync);
        }
        t_.slices.push_back(s);
        return;
      }
      case 's':
      case 't':
      case 'f': {
        if (!e.hasTs || !e.hasPid || !e.hasTid || !e.hasId) {
          malformed(origin, "flow event without an id, numeric ts, pid or tid", e.name);
          return;
        }
        FlowPoint f;
        f.ts = e.ts;
        f.origin = origin;
        f.id = e.id;
        f.lane = t_.laneId(Lane{e.pid, e.tid});
        f.name = e.name;
        f.cat = e.cat;
        f.ph = e.ph;
        f.bindsEnclosing = e.bpE;
        t_.flows.push_back(f);
        return;
      }
      case 'i':
      case 'I': {
        if (e.name == windowEndName_ && e.hasTs) {
          if (!t_.recordWindowEnd || *t_.recordWindowEnd < e.ts) t_.recordWindowEnd = e.ts;
          return;
        }
        if (e.name != memoryName_) return;
        if (!e.hasTs || !e.hasPid || !e.hasTid) {
          malformed(origin, "[memory] event without a numeric ts, pid or tid", e.name);
          return;
        }
        MemoryPoint m;
        m.ts = e.ts;
        m.origin = origin;
        m.lane = t_.laneId(Lane{e.pid, e.tid});
        m.deviceType = e.deviceType;
        m.deviceId = e.deviceId;
        m.totalAllocated = e.totalAllocated;
        m.bytes = e.bytes;
        t_.memory.push_back(m);
        return;
      }
      case 'C':
        return commitCounter(origin);
      case 'M': {
        MetaEvent m;
        m.origin = origin;
        m.lane = t_.laneId(Lane{e.hasPid ? e.pid : Key{}, e.hasTid ? e.tid : Key{}});
        m.name = e.name;
        m.strArg = e.strArg;
        m.sortIndex = e.sortIndex;
        t_.meta.push_back(m);
        return;
      }
      default:
        return;
    }
  }

  static bool isKernelMetricKey(std::string_view key) {
    return key == "flops" || key == "bytes_read" || key == "bytes_written" || key == "busy_ns";
  }

  // Leaves only a kernel's metric args pending (all its numeric args are
  // pending when they came before its "cat"); true if it has any.
  bool keepKernelMetrics() {
    std::erase_if(pendingArgs_, [&](const NumArg& a) { return !isKernelMetricKey(t_.strings.view(a.key)); });
    return !pendingArgs_.empty();
  }

  void commitMetricRange(const Origin& origin) {
    const EventFields& e = fields_;
    MetricRange m;
    m.ts = e.ts;
    m.dur = e.dur;
    m.origin = origin;
    m.lane = Lane{e.pid, e.tid};
    m.name = e.name;
    m.correlation = e.correlation;
    std::tie(m.firstArg, m.argCount) = keepPendingArgs();
    t_.metricRanges.push_back(m);
  }

  void commitCounter(const Origin& origin) {
    const EventFields& e = fields_;
    if (!e.hasTs || !e.hasPid || e.name == kNoString) {
      malformed(origin, "counter event without a numeric ts, a pid or a name", e.name);
      return;
    }
    CounterPoint c;
    c.ts = e.ts;
    c.origin = origin;
    c.pid = e.pid;
    c.name = e.name;
    c.cat = e.cat;
    std::tie(c.firstArg, c.argCount) = keepPendingArgs();
    t_.counters.push_back(c);
  }

  Trace& t_;
  JsonReader& r_;
  EventFields fields_;
  std::vector<NumArg> pendingArgs_;  // the event's numeric args (readNumArg)
  uint32_t memoryName_, windowEndName_, metricCat_, kernelCat_;
};

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void classifyCategories(Trace& t) {
  const LoadOptions& o = t.options;
  t.categoryRole.assign(t.strings.size(), CategoryRole::Other);
  std::vector<bool> used(t.strings.size(), false);
  for (const Slice& s : t.slices)
    if (s.cat != kNoString) used[s.cat] = true;
  for (const FlowPoint& f : t.flows)
    if (f.cat != kNoString) used[f.cat] = true;

  auto assign = [&](const std::vector<std::string>& names, CategoryRole role) {
    for (const std::string& n : names) {
      uint32_t id = t.strings.find(n);
      if (id != kNoString) t.categoryRole[id] = role;
    }
  };
  // Later assignments win: configured device categories are the strongest.
  assign({"Trace"}, CategoryRole::Span);
  assign({"python_function"}, CategoryRole::Python);
  assign(o.opCategories, CategoryRole::Op);
  if (o.runtimeCategoriesGiven) {
    assign(o.runtimeCategories, CategoryRole::Runtime);
  } else {
    for (uint32_t id = 0; id < t.strings.size(); ++id) {
      if (!used[id]) continue;
      std::string_view name = t.str(id);
      if (endsWith(name, "_runtime") || endsWith(name, "_driver")) t.categoryRole[id] = CategoryRole::Runtime;
    }
  }
  assign(o.annotationCategories, CategoryRole::Annotation);
  assign(o.deviceCategories, CategoryRole::Device);
  if (o.inferDeviceCategories) {
    // HTA's rule: device work is what carries a stream and a correlation.
    for (const Slice& s : t.slices) {
      if (s.cat == kNoString || t.categoryRole[s.cat] != CategoryRole::Other) continue;
      if (s.stream.ok() && s.correlation.ok()) t.categoryRole[s.cat] = CategoryRole::Device;
    }
  }
  auto collect = [&](CategoryRole role, std::vector<uint32_t>& out) {
    for (uint32_t id = 0; id < t.strings.size(); ++id)
      if (used[id] && t.categoryRole[id] == role) out.push_back(id);
  };
  collect(CategoryRole::Device, t.deviceCategories);
  collect(CategoryRole::Runtime, t.runtimeCategories);
  collect(CategoryRole::Annotation, t.annotationCategories);
  collect(CategoryRole::Op, t.opCategories);
  for (const std::string& n : o.flowCategories) {
    uint32_t id = t.strings.find(n);
    if (id != kNoString) t.flowCategories.push_back(id);
  }
}

void readMetadata(Trace& t) {
  t.threads.assign(t.lanes.size(), {});
  uint32_t processName = t.strings.intern("process_name");
  uint32_t processLabels = t.strings.intern("process_labels");
  uint32_t processSortIndex = t.strings.intern("process_sort_index");
  uint32_t threadName = t.strings.intern("thread_name");
  uint32_t threadSortIndex = t.strings.intern("thread_sort_index");
  for (size_t i = 0; i < t.meta.size(); ++i) {
    const MetaEvent& m = t.meta[i];
    const Lane& lane = t.lanes[m.lane];
    if (m.name == processName || m.name == processLabels || m.name == processSortIndex) {
      Trace::ProcessInfo& p = t.processes[lane.pid];
      if (m.name == processName && p.name == kNoString) p.name = m.strArg;
      if (m.name == processLabels && p.labels == kNoString) p.labels = m.strArg;
      if (m.name == processSortIndex && !p.sortIndex && m.sortIndex.ok()) {
        p.sortIndex = m.sortIndex.value;
        p.sortMeta = static_cast<int32_t>(i);
      }
    } else if (m.name == threadName || m.name == threadSortIndex) {
      Trace::ThreadInfo& th = t.threads[m.lane];
      if (m.name == threadName && th.name == kNoString) th.name = m.strArg;
      if (m.name == threadSortIndex && !th.sortIndex && m.sortIndex.ok()) th.sortIndex = m.sortIndex.value;
    }
  }
}

void buildIndexes(Trace& t) {
  readMetadata(t);  // interns the metadata names first, so role tables cover them
  classifyCategories(t);

  std::set<Key> devicePids;
  for (const Slice& s : t.slices)
    if (t.isDevice(s)) devicePids.insert(t.lanes[s.lane].pid);
  t.laneKind.resize(t.lanes.size());
  for (size_t i = 0; i < t.lanes.size(); ++i) {
    const Key& pid = t.lanes[i].pid;
    t.laneKind[i] = devicePids.count(pid) ? LaneKind::Device : pid.isString ? LaneKind::Other : LaneKind::Host;
  }

  t.laneSlices.assign(t.lanes.size(), {});
  for (uint32_t i = 0; i < t.slices.size(); ++i) t.laneSlices[t.slices[i].lane].push_back(i);
  t.parent.assign(t.slices.size(), kNoSlice);
  std::vector<uint32_t> open;
  for (auto& v : t.laneSlices) {
    std::sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
      const Slice& x = t.slices[a];
      const Slice& y = t.slices[b];
      if (x.ts != y.ts) return x.ts < y.ts;
      if (x.dur != y.dur) return x.dur > y.dur;
      return a < b;
    });
    // A stack of open slices gives each slice its innermost encloser.
    open.clear();
    for (uint32_t i : v) {
      const Slice& s = t.slices[i];
      while (!open.empty()) {
        const Slice& top = t.slices[open.back()];
        if (top.ts <= s.ts && s.end() <= top.end()) break;
        open.pop_back();
      }
      if (!open.empty()) t.parent[i] = static_cast<int32_t>(open.back());
      open.push_back(i);
    }
  }

  for (uint32_t i = 0; i < t.slices.size(); ++i) {
    const Slice& s = t.slices[i];
    if (t.laneKind[s.lane] != LaneKind::Host) continue;
    CategoryRole r = t.role(s.cat);
    if (r == CategoryRole::Op && s.externalId.ok()) t.opByExternalId.emplace(s.externalId.value, i);
    if (r == CategoryRole::Runtime && s.correlation.ok()) t.runtimeByCorrelation.emplace(s.correlation.value, i);
  }
  for (uint32_t i = 0; i < t.slices.size(); ++i)
    if (t.isDevice(t.slices[i])) t.deviceSlices.push_back(i);
  std::sort(t.deviceSlices.begin(), t.deviceSlices.end(), [&](uint32_t a, uint32_t b) {
    const Slice& x = t.slices[a];
    const Slice& y = t.slices[b];
    if (x.lane != y.lane) return x.lane < y.lane;
    if (x.ts != y.ts) return x.ts < y.ts;
    if (x.dur != y.dur) return x.dur > y.dur;
    return a < b;
  });

  bool any = false;
  int64_t origin = 0;
  auto consider = [&](int64_t ts) {
    if (!any || ts < origin) origin = ts;
    any = true;
  };
  for (const Slice& s : t.slices) consider(s.ts);
  for (const MemoryPoint& m : t.memory) consider(m.ts);
  for (const FlowPoint& f : t.flows) consider(f.ts);
  for (const CounterPoint& c : t.counters) consider(c.ts);
  for (const MetricRange& m : t.metricRanges) consider(m.ts);
  t.originNs = origin;
  buildSteps(t);
}

}  // namespace

// ---------------------------------------------------------------- queries

int32_t Trace::innermostAt(uint32_t lane, int64_t t, uint32_t roles) const {
  if (lane >= laneSlices.size()) return kNoSlice;
  const auto& v = laneSlices[lane];
  auto it = std::upper_bound(v.begin(), v.end(), t, [&](int64_t value, uint32_t i) { return value < slices[i].ts; });
  if (it == v.begin()) return kNoSlice;
  auto matches = [&](uint32_t i) {
    const Slice& s = slices[i];
    return s.ts <= t && t <= s.end() && (roles & roleBit(role(s.cat)));
  };
  for (int32_t c = static_cast<int32_t>(*(it - 1)); c != kNoSlice; c = parent[c])
    if (matches(static_cast<uint32_t>(c))) return c;
  // Rows that do not nest properly defeat the parent walk: look back a little.
  constexpr int kLookBack = 32;
  auto jt = it - 1;
  for (int k = 0; k < kLookBack; ++k) {
    if (matches(*jt)) return static_cast<int32_t>(*jt);
    if (jt == v.begin()) break;
    --jt;
  }
  return kNoSlice;
}

std::vector<uint32_t> Trace::stackAt(uint32_t lane, int64_t t) const {
  std::vector<uint32_t> out;
  int32_t c = innermostAt(lane, t, kAnyRole);
  for (; c != kNoSlice; c = parent[c]) {
    const Slice& s = slices[c];
    if (s.ts <= t && t <= s.end()) out.push_back(static_cast<uint32_t>(c));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

const Step* Trace::stepNamed(std::string_view name, int64_t instance) const {
  const uint32_t id = strings.find(name);
  for (const Step& step : steps)
    if (step.name == id && id != kNoString && instance-- == 0) return &step;
  return nullptr;
}

int32_t Trace::opOfDeviceSlice(const Slice& s, bool* viaCorrelation) const {
  if (viaCorrelation) *viaCorrelation = false;
  if (s.externalId.ok()) {
    auto it = opByExternalId.find(s.externalId.value);
    if (it != opByExternalId.end()) return static_cast<int32_t>(it->second);
  }
  if (!s.correlation.ok()) return kNoSlice;
  auto rt = runtimeByCorrelation.find(s.correlation.value);
  if (rt == runtimeByCorrelation.end()) return kNoSlice;
  if (viaCorrelation) *viaCorrelation = true;
  const Slice& launch = slices[rt->second];
  if (launch.externalId.ok()) {
    auto it = opByExternalId.find(launch.externalId.value);
    if (it != opByExternalId.end()) return static_cast<int32_t>(it->second);
  }
  return innermostAt(launch.lane, launch.ts, roleBit(CategoryRole::Op));
}

// ---------------------------------------------------------------- entry points

std::unique_ptr<Trace> loadTrace(JsonReader& reader, const LoadOptions& options) {
  auto t = std::make_unique<Trace>();
  t->options = options;
  try {
    Loader loader(*t, reader);
    loader.readDocument();
  } catch (const JsonError& e) {
    t->parseError = ParseError{e.offset(), e.reason()};
  }
  if (!t->parseError && !t->hasTraceEvents) t->parseError = ParseError{0, "the document has no \"traceEvents\" array"};
  t->bytesRead = reader.offset();
  buildIndexes(*t);
  return t;
}

std::unique_ptr<Trace> loadTraceFile(const std::string& path, const LoadOptions& options) {
  JsonReader reader(openFileSource(path), options.bufferSize);
  return loadTrace(reader, options);
}

std::unique_ptr<Trace> loadTraceBuffer(const void* data, size_t size, const LoadOptions& options) {
  JsonReader reader(openMemorySource(data, size), options.bufferSize);
  return loadTrace(reader, options);
}

}  // namespace openreg::trace
