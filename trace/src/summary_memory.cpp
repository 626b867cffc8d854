// Summary section: the peak of "Total Allocated" per device (and of host
// memory, for reference), and the op that reached it.
#include <algorithm>
#include <map>

#include "analysis.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace {

void writeMemoryStats(JsonWriter& w, const Trace& t, const std::vector<MemoryStat>& stats) {
  w.beginArray();
  for (const MemoryStat& m : stats) {
    w.beginObject();
    w.field("device_type", m.deviceType);
    w.field("device_type_name", deviceTypeName(m.deviceType));
    w.field("device_id", m.deviceId);
    w.field("events", m.events);
    w.field("allocations", m.allocations);
    w.field("frees", m.frees);
    w.field("peak_bytes", m.peakBytes);
    w.field("peak_ns", m.peakTs - t.originNs);
    w.field("final_bytes", m.finalBytes);
    w.field("peak_event_index", m.peakEvent >= 0 ? t.memory[m.peakEvent].origin.index : 0u);
    w.key("op");
    if (m.op == kNoSlice)
      w.null();
    else
      writeSliceBrief(w, t, static_cast<uint32_t>(m.op));
    w.key("op_stack").beginArray();
    for (uint32_t i : m.opStack) w.value(t.str(t.slices[i].name));
    w.endArray();
    w.endObject();
  }
  w.endArray();
}

// The peak of one device's memory: the first instant reaching the maximum
// "Total Allocated" (points: its instants, sorted here by time).
MemoryStat memoryPeak(const Trace& t, int64_t deviceType, int64_t deviceId, std::vector<uint32_t>& points) {
  std::stable_sort(points.begin(), points.end(),
                   [&](uint32_t a, uint32_t b) { return t.memory[a].ts < t.memory[b].ts; });
  MemoryStat ms;
  ms.deviceType = deviceType;
  ms.deviceId = deviceId;
  for (uint32_t i : points) {
    const MemoryPoint& m = t.memory[i];
    ++ms.events;
    if (m.bytes.ok() && m.bytes.value > 0) ++ms.allocations;
    if (m.bytes.ok() && m.bytes.value < 0) ++ms.frees;
    if (ms.peakEvent < 0 || m.totalAllocated.value > ms.peakBytes) {
      ms.peakBytes = m.totalAllocated.value;
      ms.peakTs = m.ts;
      ms.peakEvent = static_cast<int32_t>(i);
    }
    ms.finalBytes = m.totalAllocated.value;
  }
  const MemoryPoint& peak = t.memory[ms.peakEvent];
  ms.op = t.innermostAt(peak.lane, peak.ts, roleBit(CategoryRole::Op));
  for (uint32_t i : t.stackAt(peak.lane, peak.ts))
    if (t.role(t.slices[i].cat) == CategoryRole::Op) ms.opStack.push_back(i);
  return ms;
}

}  // namespace

namespace sections {

void computeMemory(const Trace& t, const SummaryOptions& /*options*/, Summary& s) {
  // The [memory] instants per (device type, device id).
  std::map<std::pair<int64_t, int64_t>, std::vector<uint32_t>> groups;
  for (uint32_t i = 0; i < t.memory.size(); ++i) {
    const MemoryPoint& m = t.memory[i];
    if (!m.deviceType.ok() || !m.totalAllocated.ok()) continue;
    groups[{m.deviceType.value, m.deviceId.ok() ? m.deviceId.value : -1}].push_back(i);
  }
  for (auto& [key, points] : groups) {
    MemoryStat ms = memoryPeak(t, key.first, key.second, points);
    (key.first == 0 ? s.hostMemory : s.memory).push_back(std::move(ms));
  }
}

void writeMemory(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& /*options*/) {
  w.key("memory");
  writeMemoryStats(w, t, s.memory);
  w.key("host_memory");
  writeMemoryStats(w, t, s.hostMemory);
}

}  // namespace sections

}  // namespace openreg::trace
