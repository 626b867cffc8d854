// The synchronisation checks: Kineto's cuda_sync rows ("Stream Wait Event",
// "Event Sync", "Stream Sync", "Context Sync") against the runtime rows and
// device work they refer to, and device work against its launch. Runtime rows
// are found by the trace's runtime categories and correlation only, so the
// rules hold for any backend that writes Kineto's sync schema.
#include <map>
#include <utility>

#include "checks_internal.h"

namespace openreg::trace::checks {

namespace {

constexpr std::string_view kStreamWaitEvent = "Stream Wait Event";
constexpr std::string_view kEventSync = "Event Sync";
constexpr std::string_view kStreamSync = "Stream Sync";
constexpr std::string_view kContextSync = "Context Sync";

std::string_view kindOf(const Trace& t, uint32_t slice) {
  const SyncArgs* a = t.syncArgsOf(slice);
  return a ? t.str(a->kind) : std::string_view();
}

bool waitsOnEvent(std::string_view kind) { return kind == kStreamWaitEvent || kind == kEventSync; }

// The runtime row with the slice's correlation, or kNoSlice.
int32_t runtimeRowOf(const Trace& t, const Slice& s) {
  if (!s.correlation.ok()) return kNoSlice;
  auto it = t.runtimeByCorrelation.find(s.correlation.value);
  return it == t.runtimeByCorrelation.end() ? kNoSlice : static_cast<int32_t>(it->second);
}

// When the call behind a sync row started: its runtime row, else the row.
int64_t callStart(const Trace& t, uint32_t slice) {
  int32_t call = runtimeRowOf(t, t.slices[slice]);
  return call == kNoSlice ? t.slices[slice].ts : t.slices[static_cast<uint32_t>(call)].ts;
}

// The device of a device-row slice: its "device" arg, else its numeric pid.
std::optional<int64_t> deviceOf(const Trace& t, const Slice& s) {
  if (s.device.ok()) return s.device.value;
  const Key& pid = t.lanes[s.lane].pid;
  if (!pid.isString) return pid.value;
  return std::nullopt;
}

std::vector<uint32_t> syncRows(const Trace& t) {
  std::vector<uint32_t> rows;
  uint32_t cat = t.strings.find(kSyncCategory);
  if (cat == kNoString) return rows;
  for (uint32_t i = 0; i < t.slices.size(); ++i)
    if (t.slices[i].cat == cat) rows.push_back(i);
  return rows;
}

// The record a wait names, when its id is a known runtime row; kNoSlice else.
int32_t recordOf(const Trace& t, uint32_t slice) {
  const SyncArgs* a = t.syncArgsOf(slice);
  if (!a || !a->waitOnRecordCorrelation.ok() || a->waitOnRecordCorrelation.value < 0) return kNoSlice;
  auto it = t.runtimeByCorrelation.find(a->waitOnRecordCorrelation.value);
  return it == t.runtimeByCorrelation.end() ? kNoSlice : static_cast<int32_t>(it->second);
}

void appendProblem(std::string& to, const std::string& problem) { to += (to.empty() ? "" : "; ") + problem; }

// What HTA's critical path needs of one sync row; empty when it has it all.
std::string syncRowProblems(const Trace& t, uint32_t i) {
  const Slice& s = t.slices[i];
  const SyncArgs* a = t.syncArgsOf(i);
  std::string_view kind = kindOf(t, i);
  std::string out;
  if (kind.empty()) {
    appendProblem(out, "no string \"cuda_sync_kind\"");
  } else if (!waitsOnEvent(kind) && kind != kStreamSync && kind != kContextSync) {
    appendProblem(out, "unknown \"cuda_sync_kind\" \"" + std::string(kind) + "\"");
  } else if (t.str(s.name) != kind) {
    appendProblem(out, "its name differs from its \"cuda_sync_kind\" \"" + std::string(kind) + "\"");
  }
  if (!s.correlation.ok())
    appendProblem(out, "no integer \"correlation\"");
  else if (!t.runtimeCategories.empty() && runtimeRowOf(t, s) == kNoSlice)
    appendProblem(out, "\"correlation\" " + std::to_string(s.correlation.value) + " names no runtime call");
  // HTA takes rows with stream -1 for event and device syncs only.
  bool onStream = kind == kStreamSync || kind == kStreamWaitEvent;
  if (onStream && !s.stream.ok())
    appendProblem(out, "no integer \"stream\"");
  else if (onStream && s.stream.value < 0)
    appendProblem(out, "\"stream\" is " + std::to_string(s.stream.value) + ", not a stream");
  if (waitsOnEvent(kind) && !(a && a->waitOnRecordCorrelation.ok()))
    appendProblem(out, "no integer \"wait_on_cuda_event_record_corr_id\"");
  if (waitsOnEvent(kind) && !(a && a->waitOnStream.ok())) appendProblem(out, "no integer \"wait_on_stream\"");
  return out;
}

void checkSyncRowsDescribed(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> rows = syncRows(t);
  if (rows.empty()) {
    sink.skip("no sync rows (cuda_sync)");
    return;
  }
  for (uint32_t i : rows) {
    std::string problems = syncRowProblems(t, i);
    if (!problems.empty())
      sink.add([&] { return "sync row " + nameOf(t, t.slices[i]) + ": " + problems; }, {sliceRef(i)});
  }
}

void checkSyncWaitRecordKnown(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  if (t.runtimeCategories.empty()) {
    sink.skip("no runtime category in the trace");
    return;
  }
  size_t waits = 0, unknown = 0;
  for (uint32_t i : syncRows(t)) {
    const SyncArgs* a = t.syncArgsOf(i);
    if (!waitsOnEvent(kindOf(t, i)) || !a->waitOnRecordCorrelation.ok()) continue;
    ++waits;
    int64_t id = a->waitOnRecordCorrelation.value;
    if (id < 0) {
      ++unknown;
    } else if (!t.runtimeByCorrelation.count(id)) {
      sink.add(
          [&] {
            return nameOf(t, t.slices[i]) + " waits on record " + std::to_string(id) + ", which is no runtime call";
          },
          {sliceRef(i)});
    }
  }
  if (waits == 0)
    sink.skip("no stream waits or event syncs naming a record");
  else if (unknown)
    sink.note(std::to_string(unknown) + " of " + std::to_string(waits) +
              " waits name no record (-1): their producer did not see it (made before the capture window, or never "
              "recorded)");
}

void checkSyncRecordBeforeWait(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  bool any = false;
  for (uint32_t i : syncRows(t)) {
    int32_t record = recordOf(t, i);
    if (!waitsOnEvent(kindOf(t, i)) || record == kNoSlice) continue;
    any = true;
    const Slice& r = t.slices[static_cast<uint32_t>(record)];
    int64_t waitStart = callStart(t, i);
    if (r.ts <= waitStart) continue;
    std::vector<EventRef> refs{sliceRef(i), sliceRef(static_cast<uint32_t>(record))};
    if (int32_t call = runtimeRowOf(t, t.slices[i]); call != kNoSlice) refs.push_back(sliceRef(call));
    sink.add(
        [&] {
          return nameOf(t, t.slices[i]) + " waits on record " + nameOf(t, r) + " that starts " + us(r.ts - waitStart) +
                 " after the wait";
        },
        std::move(refs));
  }
  if (!any) sink.skip("no wait names a record in the trace");
}

// Device work by what it was launched before: the prefix maximum of its end
// answers "the last of the work enqueued by time T ends when?".
struct EnqueuedWork {
  struct Item {
    int64_t enqueuedBy;  // its launch call's end, or its start if earlier
    uint32_t slice;
  };
  std::vector<Item> items;
  std::vector<uint32_t> latest;  // latest[k]: the item of items[0..k] that ends last

  void finish(const Trace& t) {
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.enqueuedBy < b.enqueuedBy; });
    latest.resize(items.size());
    for (size_t k = 0; k < items.size(); ++k) {
      bool later = k == 0 || t.slices[items[k].slice].end() > t.slices[latest[k - 1]].end();
      latest[k] = later ? items[k].slice : latest[k - 1];
    }
  }
  // The work enqueued by `time` that ends last, or kNoSlice.
  int32_t lastEndingBy(int64_t time) const {
    auto it =
        std::upper_bound(items.begin(), items.end(), time, [](int64_t v, const Item& i) { return v < i.enqueuedBy; });
    if (it == items.begin()) return kNoSlice;
    return static_cast<int32_t>(latest[static_cast<size_t>(it - items.begin()) - 1]);
  }
};

struct StreamWork {
  std::map<std::pair<int64_t, int64_t>, EnqueuedWork> byStream;  // (device, stream)
  std::map<int64_t, EnqueuedWork> byDevice;
};

StreamWork indexStreamWork(const Trace& t) {
  StreamWork w;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    std::optional<int64_t> device = deviceOf(t, s);
    if (!device) continue;
    int64_t by = s.ts;
    if (int32_t launch = runtimeRowOf(t, s); launch != kNoSlice)
      by = std::min(by, t.slices[static_cast<uint32_t>(launch)].end());
    w.byDevice[*device].items.push_back({by, i});
    if (s.stream.ok()) w.byStream[{*device, s.stream.value}].items.push_back({by, i});
  }
  for (auto& [key, work] : w.byStream) work.finish(t);
  for (auto& [key, work] : w.byDevice) work.finish(t);
  return w;
}

// The work a "Stream Sync" or "Context Sync" row waits for; nullptr if none.
const EnqueuedWork* workSyncedBy(const Trace& t, const StreamWork& w, uint32_t i) {
  const Slice& s = t.slices[i];
  std::string_view kind = kindOf(t, i);
  std::optional<int64_t> device = deviceOf(t, s);
  if (!device) return nullptr;
  if (kind == kContextSync) {
    auto it = w.byDevice.find(*device);
    return it == w.byDevice.end() ? nullptr : &it->second;
  }
  if (kind != kStreamSync || !s.stream.ok()) return nullptr;
  auto it = w.byStream.find({*device, s.stream.value});
  return it == w.byStream.end() ? nullptr : &it->second;
}

// An "Event Sync" is left out: CUPTI reports cudaEventQuery as one, and a
// query returns without waiting for the work before the record.
void checkSyncAfterStreamWork(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  std::vector<uint32_t> rows;
  for (uint32_t i : syncRows(t))
    if (kindOf(t, i) == kStreamSync || kindOf(t, i) == kContextSync) rows.push_back(i);
  if (rows.empty()) {
    sink.skip("no Stream Sync or Context Sync rows");
    return;
  }
  StreamWork w = indexStreamWork(t);
  for (uint32_t i : rows) {
    std::string_view kind = kindOf(t, i);
    const EnqueuedWork* work = workSyncedBy(t, w, i);
    int32_t last = work ? work->lastEndingBy(callStart(t, i)) : kNoSlice;
    if (last == kNoSlice) continue;
    const Slice& s = t.slices[i];
    const Slice& k = t.slices[static_cast<uint32_t>(last)];
    if (k.end() <= s.end()) continue;
    sink.add(
        [&] {
          return nameOf(t, s) + " ends " + us(k.end() - s.end()) + " before " + nameOf(t, k) +
                 ", launched before the sync call, ends on " + (kind == kStreamSync ? "its stream" : "its device");
        },
        {sliceRef(i), sliceRef(static_cast<uint32_t>(last))});
  }
}

void checkDeviceAfterLaunch(const Context& c, Sink& sink) {
  const Trace& t = c.t;
  if (t.runtimeCategories.empty()) {
    sink.skip("no runtime category in the trace");
    return;
  }
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    int32_t launch = runtimeRowOf(t, s);
    if (launch == kNoSlice) continue;
    const Slice& l = t.slices[static_cast<uint32_t>(launch)];
    if (s.ts >= l.ts) continue;
    sink.add([&] { return nameOf(t, s) + " starts " + us(l.ts - s.ts) + " before its launch " + nameOf(t, l); },
             {sliceRef(static_cast<uint32_t>(launch)), sliceRef(i)});
  }
}

}  // namespace

std::vector<CheckEntry> syncEntries() {
  return {
      {{"sync_rows_described", Severity::Error,
        "sync rows (cuda_sync) carry a known cuda_sync_kind equal to their name and a correlation naming their "
        "runtime call; stream syncs and waits a stream >= 0, event waits wait_on_stream and "
        "wait_on_cuda_event_record_corr_id",
        "HTA's critical path (finds syncs by name, their call by correlation); Kineto's trace validator "
        "(cuda_sync_kind)",
        "the sync is left out of the critical path: the host's wait for the device has no edge", ""},
       checkSyncRowsDescribed,
       true},
      {{"sync_record_before_wait", Severity::Error,
        "the record a stream wait or event sync waits on (wait_on_cuda_event_record_corr_id) starts no later "
        "than the wait's runtime call (else the sync row)",
        "HTA's critical path (joins the wait to the launch before that record)",
        "the dependency is drawn from work launched after the wait: a wrong, possibly backward edge", ""},
       checkSyncRecordBeforeWait,
       true},
      {{"sync_after_stream_work", Severity::Error,
        "a Stream Sync (Context Sync: any stream of its device) ends no earlier than the device work of its "
        "stream enqueued before its call started (launch call ended, or the work already started)",
        "HTA's critical path (a sync edge from the stream's last work to the call's end)",
        "the host is shown released before the stream drained: the sync edge starts at work still running, or "
        "the device clock was mapped onto the host's wrongly",
        ""},
       checkSyncAfterStreamWork,
       true},
      {{"device_after_launch", Severity::Error,
        "no device event starts before its launch (the runtime call with its correlation) starts",
        "HTA's launch delay and critical path (launch edge); the ac2g arrow (flow_forward when flows exist)",
        "negative launch delays, and a launch edge pointing back in time: the device clock was mapped onto the "
        "host's wrongly, or the work was paired with the wrong call",
        ""},
       checkDeviceAfterLaunch,
       true},
      {{"sync_wait_record_known", Severity::Warning,
        "each stream wait or event sync whose wait_on_cuda_event_record_corr_id is not -1 names a runtime call "
        "in the trace",
        "HTA's critical path (joins a wait to the launch before its record)",
        "the wait's dependency is missing from the critical path. A warning: the trace cannot tell a dangling id "
        "from a record made before the capture window (a warm-up step, an earlier window) that its producer "
        "remembered; -1 (unknown) is no finding",
        ""},
       checkSyncWaitRecordKnown,
       true},
  };
}

}  // namespace openreg::trace::checks
