// Timeline data reduced to a drawing resolution: one bucket is the
// smallest span worth a pixel, so a million events become a few thousand
// rectangles and points.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "analysis.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace {

struct Block {
  int64_t start, end;
  uint32_t name;  // of the longest slice merged into it
  int64_t longest;
};

// Merges intervals (sorted by start) closer than `resolution`.
std::vector<Block> mergeBlocks(const Trace& t, const std::vector<uint32_t>& sorted, int64_t resolution) {
  std::vector<Block> out;
  for (uint32_t i : sorted) {
    const Slice& s = t.slices[i];
    if (!out.empty() && s.ts - out.back().end < resolution) {
      Block& b = out.back();
      b.end = std::max(b.end, s.end());
      if (s.dur > b.longest) {
        b.longest = s.dur;
        b.name = s.name;
      }
    } else {
      out.push_back({s.ts, s.end(), s.name, s.dur});
    }
  }
  return out;
}

std::string laneLabel(const Trace& t, uint32_t lane, const char* pidWord, const char* tidWord) {
  const Lane& l = t.lanes[lane];
  const Trace::ProcessInfo* p = t.process(l.pid);
  std::string proc =
      p && p->name != kNoString ? std::string(t.str(p->name)) : std::string(pidWord) + " " + t.keyText(l.pid);
  uint32_t th = t.threads[lane].name;
  std::string thread = th != kNoString ? std::string(t.str(th)) : std::string(tidWord) + " " + t.keyText(l.tid);
  return proc + " / " + thread;
}

bool isStep(const Trace& t, const Slice& s) { return t.str(s.name).substr(0, 13) == "ProfilerStep#"; }

// The drawing extent: the profiling window, widened to every device event.
struct Extent {
  int64_t lo = 0, hi = 0;
  int64_t resolution = 1;  // one bucket
};

Extent drawingExtent(const Trace& t, int width) {
  Extent e;
  if (auto w = profilingWindow(t)) {
    e.lo = w->start;
    e.hi = w->end;
  }
  bool any = e.hi > e.lo;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    if (!any || s.ts < e.lo) e.lo = s.ts;
    if (!any || s.end() > e.hi) e.hi = s.end();
    any = true;
  }
  // Rounded up, so that at most width + 1 blocks fit in a row.
  e.resolution = std::max<int64_t>(1, (e.hi - e.lo + width - 1) / width);
  return e;
}

// Writes the timeline's parts in order; rows refer to slice names by their
// index in "names", written last.
class TimelineWriter {
 public:
  TimelineWriter(const Trace& t, const Extent& extent) : t_(t), extent_(extent) {}

  std::string write() {
    w_.beginObject();
    w_.field("origin_ns", t_.originNs);
    w_.field("start_ns", extent_.lo - t_.originNs);
    w_.field("end_ns", extent_.hi - t_.originNs);
    w_.field("resolution_ns", extent_.resolution);
    writeDeviceRows();
    writeHostRows();
    writeSteps();
    writeMemoryCurves();
    writeNames();
    w_.endObject();
    return w_.take();
  }

 private:
  size_t intern(uint32_t id) {
    auto [it, inserted] = nameIndex_.emplace(id, names_.size());
    if (inserted) names_.push_back(t_.str(id));
    return it->second;
  }

  // A row's "blocks": [start, end, name index] after the origin, merged at the resolution.
  void writeBlocks(const std::vector<uint32_t>& slices) {
    w_.key("blocks").beginArray();
    for (const Block& b : mergeBlocks(t_, slices, extent_.resolution)) {
      w_.beginArray()
          .value(b.start - t_.originNs)
          .value(b.end - t_.originNs)
          .value(static_cast<uint64_t>(intern(b.name)))
          .endArray();
    }
    w_.endArray();
  }

  // Device rows, ordered by device then stream.
  void writeDeviceRows() {
    std::map<std::pair<Key, Key>, std::vector<uint32_t>> rows;
    for (uint32_t i : t_.deviceSlices) {
      const Lane& l = t_.lanes[t_.slices[i].lane];
      rows[{l.pid, l.tid}].push_back(i);
    }
    w_.key("device_rows").beginArray();
    for (auto& [key, idx] : rows) {
      std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return t_.slices[a].ts < t_.slices[b].ts; });
      w_.beginObject();
      w_.field("label", laneLabel(t_, t_.slices[idx[0]].lane, "device", "stream"));
      w_.field("events", static_cast<uint64_t>(idx.size()));
      writeBlocks(idx);
      w_.endObject();
    }
    w_.endArray();
  }

  // Host rows: the outermost ops of each thread. The profiler steps are
  // drawn apart (writeSteps).
  void writeHostRows() {
    w_.key("host_rows").beginArray();
    for (uint32_t lane = 0; lane < t_.lanes.size(); ++lane) {
      if (t_.laneKind[lane] != LaneKind::Host) continue;
      std::vector<uint32_t> top;
      for (uint32_t i : t_.laneSlices[lane]) {
        const Slice& s = t_.slices[i];
        if (t_.role(s.cat) != CategoryRole::Op) continue;
        if (!isStep(t_, s) && isOutermostOp(i)) top.push_back(i);
      }
      if (top.empty()) continue;
      w_.beginObject();
      w_.field("label", laneLabel(t_, lane, "process", "thread"));
      w_.field("ops", static_cast<uint64_t>(top.size()));
      writeBlocks(top);
      w_.endObject();
    }
    w_.endArray();
  }

  // No op other than a profiler step encloses it.
  bool isOutermostOp(uint32_t i) const {
    for (int32_t p = t_.parent[i]; p != kNoSlice; p = t_.parent[p]) {
      const Slice& ps = t_.slices[p];
      if (t_.role(ps.cat) == CategoryRole::Op && !isStep(t_, ps)) return false;
    }
    return true;
  }

  // The trace's steps (ProfilerStep#N, or an on-demand trace's optimizer steps).
  void writeSteps() {
    w_.key("steps").beginArray();
    for (const Step& step : t_.steps)
      w_.beginArray().value(step.ts - t_.originNs).value(step.end - t_.originNs).value(t_.str(step.name)).endArray();
    w_.endArray();
  }

  // Memory curves, one per (device type, device id).
  void writeMemoryCurves() {
    std::map<std::pair<int64_t, int64_t>, std::vector<uint32_t>> series;
    for (uint32_t i = 0; i < t_.memory.size(); ++i) {
      const MemoryPoint& m = t_.memory[i];
      if (m.deviceType.ok() && m.totalAllocated.ok())
        series[{m.deviceType.value, m.deviceId.ok() ? m.deviceId.value : -1}].push_back(i);
    }
    w_.key("memory").beginArray();
    for (auto& [key, idx] : series) {
      std::stable_sort(idx.begin(), idx.end(),
                       [&](uint32_t a, uint32_t b) { return t_.memory[a].ts < t_.memory[b].ts; });
      w_.beginObject();
      w_.field("device_type", key.first);
      w_.field("device_type_name", deviceTypeName(key.first));
      w_.field("device_id", key.second);
      writeMemoryPoints(idx);
      w_.endObject();
    }
    w_.endArray();
  }

  // Per bucket its first value, maximum and last value, so peaks survive
  // the reduction (idx: one series' points, sorted by time).
  void writeMemoryPoints(const std::vector<uint32_t>& idx) {
    auto bucketOf = [&](size_t j) { return (t_.memory[idx[j]].ts - extent_.lo) / extent_.resolution; };
    auto emit = [&](size_t j) {
      const MemoryPoint& m = t_.memory[idx[j]];
      w_.beginArray().value(m.ts - t_.originNs).value(m.totalAllocated.value).endArray();
    };
    w_.key("points").beginArray();
    for (size_t k = 0; k < idx.size();) {
      const int64_t bucket = bucketOf(k);
      size_t e = k;
      size_t peak = k;
      for (; e < idx.size() && bucketOf(e) == bucket; ++e)
        if (t_.memory[idx[e]].totalAllocated.value > t_.memory[idx[peak]].totalAllocated.value) peak = e;
      // Positions k <= peak <= e - 1: emit each once, in time order.
      emit(k);
      if (peak != k) emit(peak);
      if (e - 1 != peak) emit(e - 1);
      k = e;
    }
    w_.endArray();
  }

  void writeNames() {
    w_.key("names").beginArray();
    for (std::string_view n : names_) w_.value(n);
    w_.endArray();
  }

  const Trace& t_;
  const Extent extent_;
  JsonWriter w_;
  std::vector<std::string_view> names_;
  std::unordered_map<uint32_t, size_t> nameIndex_;
};

}  // namespace

std::string timelineJson(const Trace& t, const TimelineOptions& options) {
  return TimelineWriter(t, drawingExtent(t, std::max(options.width, 1))).write();
}

}  // namespace openreg::trace
