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

}  // namespace

std::string timelineJson(const Trace& t, const TimelineOptions& options) {
  const int width = std::max(options.width, 1);
  int64_t lo = 0, hi = 0;
  if (auto w = profilingWindow(t)) {
    lo = w->start;
    hi = w->end;
  }
  bool any = hi > lo;
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    if (!any || s.ts < lo) lo = s.ts;
    if (!any || s.end() > hi) hi = s.end();
    any = true;
  }
  // Rounded up, so that at most width + 1 blocks fit in a row.
  const int64_t resolution = std::max<int64_t>(1, (hi - lo + width - 1) / width);

  std::vector<std::string_view> names;
  std::unordered_map<uint32_t, size_t> nameIndex;
  auto intern = [&](uint32_t id) -> size_t {
    auto [it, inserted] = nameIndex.emplace(id, names.size());
    if (inserted) names.push_back(t.str(id));
    return it->second;
  };

  JsonWriter w;
  // A row's "blocks": [start, end, name index] after the origin, merged at the resolution.
  auto writeBlocks = [&](const std::vector<uint32_t>& slices) {
    w.key("blocks").beginArray();
    for (const Block& b : mergeBlocks(t, slices, resolution)) {
      w.beginArray()
          .value(b.start - t.originNs)
          .value(b.end - t.originNs)
          .value(static_cast<uint64_t>(intern(b.name)))
          .endArray();
    }
    w.endArray();
  };
  w.beginObject();
  w.field("origin_ns", t.originNs);
  w.field("start_ns", lo - t.originNs);
  w.field("end_ns", hi - t.originNs);
  w.field("resolution_ns", resolution);

  // Device rows, ordered by device then stream.
  std::map<std::pair<Key, Key>, std::vector<uint32_t>> rows;
  for (uint32_t i : t.deviceSlices) {
    const Lane& l = t.lanes[t.slices[i].lane];
    rows[{l.pid, l.tid}].push_back(i);
  }
  w.key("device_rows").beginArray();
  for (auto& [key, idx] : rows) {
    std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return t.slices[a].ts < t.slices[b].ts; });
    uint32_t lane = t.slices[idx[0]].lane;
    w.beginObject();
    w.field("label", laneLabel(t, lane, "device", "stream"));
    w.field("events", static_cast<uint64_t>(idx.size()));
    writeBlocks(idx);
    w.endObject();
  }
  w.endArray();

  // Host rows: outermost ops per thread, and the profiler steps.
  std::vector<uint32_t> steps;
  w.key("host_rows").beginArray();
  for (uint32_t lane = 0; lane < t.lanes.size(); ++lane) {
    if (t.laneKind[lane] != LaneKind::Host) continue;
    std::vector<uint32_t> top;
    for (uint32_t i : t.laneSlices[lane]) {
      const Slice& s = t.slices[i];
      if (t.role(s.cat) != CategoryRole::Op) continue;
      if (isStep(t, s)) {
        steps.push_back(i);
        continue;
      }
      bool outermost = true;
      for (int32_t p = t.parent[i]; p != kNoSlice; p = t.parent[p]) {
        const Slice& ps = t.slices[p];
        if (t.role(ps.cat) == CategoryRole::Op && !isStep(t, ps)) {
          outermost = false;
          break;
        }
      }
      if (outermost) top.push_back(i);
    }
    if (top.empty()) continue;
    w.beginObject();
    w.field("label", laneLabel(t, lane, "process", "thread"));
    w.field("ops", static_cast<uint64_t>(top.size()));
    writeBlocks(top);
    w.endObject();
  }
  w.endArray();

  std::sort(steps.begin(), steps.end(), [&](uint32_t a, uint32_t b) { return t.slices[a].ts < t.slices[b].ts; });
  w.key("steps").beginArray();
  for (uint32_t i : steps) {
    const Slice& s = t.slices[i];
    w.beginArray().value(s.ts - t.originNs).value(s.end() - t.originNs).value(t.str(s.name)).endArray();
  }
  w.endArray();

  // Memory curves: per bucket its first value, maximum and last value, so
  // peaks survive the reduction.
  std::map<std::pair<int64_t, int64_t>, std::vector<uint32_t>> series;
  for (uint32_t i = 0; i < t.memory.size(); ++i) {
    const MemoryPoint& m = t.memory[i];
    if (m.deviceType.ok() && m.totalAllocated.ok())
      series[{m.deviceType.value, m.deviceId.ok() ? m.deviceId.value : -1}].push_back(i);
  }
  w.key("memory").beginArray();
  for (auto& entry : series) {
    // Named, not a structured binding: clang 14 cannot capture those in lambdas.
    const auto& key = entry.first;
    std::vector<uint32_t>& idx = entry.second;
    std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return t.memory[a].ts < t.memory[b].ts; });
    w.beginObject();
    w.field("device_type", key.first);
    w.field("device_type_name", deviceTypeName(key.first));
    w.field("device_id", key.second);
    w.key("points").beginArray();
    size_t k = 0;
    while (k < idx.size()) {
      const int64_t bucket = (t.memory[idx[k]].ts - lo) / resolution;
      size_t e = k;
      size_t peak = k;
      while (e < idx.size() && (t.memory[idx[e]].ts - lo) / resolution == bucket) {
        if (t.memory[idx[e]].totalAllocated.value > t.memory[idx[peak]].totalAllocated.value) peak = e;
        ++e;
      }
      // Positions k <= peak <= e - 1: emit each once, in time order.
      auto emit = [&](size_t j) {
        const MemoryPoint& m = t.memory[idx[j]];
        w.beginArray().value(m.ts - t.originNs).value(m.totalAllocated.value).endArray();
      };
      emit(k);
      if (peak != k) emit(peak);
      if (e - 1 != peak) emit(e - 1);
      k = e;
    }
    w.endArray();
    w.endObject();
  }
  w.endArray();

  w.key("names").beginArray();
  for (std::string_view n : names) w.value(n);
  w.endArray();
  w.endObject();
  return w.take();
}

}  // namespace openreg::trace
