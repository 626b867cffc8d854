// Summary sections: the top kernels by device time, and the device time per
// op that launched it, with how much device work is linked to an op at all.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "analysis.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace::sections {

void computeKernels(const Trace& t, const SummaryOptions& /*options*/, Summary& s) {
  std::unordered_map<uint32_t, KernelStat> kernels;
  for (uint32_t i : t.deviceSlices) {
    const Slice& sl = t.slices[i];
    KernelStat& k = kernels[sl.name];
    if (k.count == 0) {
      k.name = sl.name;
      k.cat = sl.cat;
      k.firstSlice = i;
      k.minNs = k.maxNs = sl.dur;
    }
    ++k.count;
    k.totalNs = saturatingAdd(k.totalNs, sl.dur);
    k.minNs = std::min(k.minNs, sl.dur);
    k.maxNs = std::max(k.maxNs, sl.dur);
    s.deviceTotalNs = saturatingAdd(s.deviceTotalNs, sl.dur);
  }
  for (auto& [name, k] : kernels) s.kernels.push_back(k);
  std::sort(s.kernels.begin(), s.kernels.end(), [&](const KernelStat& a, const KernelStat& b) {
    if (a.totalNs != b.totalNs) return a.totalNs > b.totalNs;
    return t.str(a.name) < t.str(b.name);
  });
}

void writeKernels(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options) {
  w.field("device_total_ns", s.deviceTotalNs);
  w.field("kernel_names", static_cast<uint64_t>(s.kernels.size()));
  const size_t top = static_cast<size_t>(std::max(options.top, 0));
  w.key("top_kernels").beginArray();
  for (size_t k = 0; k < s.kernels.size() && k < top; ++k) {
    const KernelStat& ks = s.kernels[k];
    w.beginObject();
    w.key("name");
    writeName(w, t, ks.name);
    w.key("category");
    writeName(w, t, ks.cat);
    w.field("class", kernelClassName(classifyKernel(t, ks.firstSlice)));
    w.field("count", ks.count);
    w.field("total_ns", ks.totalNs);
    w.field("avg_ns", ks.totalNs / static_cast<int64_t>(ks.count));
    w.field("min_ns", ks.minNs);
    w.field("max_ns", ks.maxNs);
    w.field("share", ratio(ks.totalNs, s.deviceTotalNs));
    w.endObject();
  }
  w.endArray();
}

// Each device event credited to its op (Trace::opOfDeviceSlice); the links
// count how each was found.
void computeOps(const Trace& t, const SummaryOptions& /*options*/, Summary& s) {
  std::unordered_map<uint32_t, OpDeviceStat> ops;
  std::map<uint32_t, LinkStat::PerCategory> perCat;
  std::vector<uint8_t> opSeen(t.slices.size(), 0);
  for (uint32_t i : t.deviceSlices) {
    const Slice& sl = t.slices[i];
    bool viaCorrelation = false;
    int32_t op = t.opOfDeviceSlice(sl, &viaCorrelation);
    uint32_t key = op == kNoSlice ? kNoString : t.slices[op].name;
    OpDeviceStat& st = ops[key];
    st.name = key;
    st.deviceNs = saturatingAdd(st.deviceNs, sl.dur);
    ++st.deviceEvents;
    LinkStat::PerCategory& pc = perCat[sl.cat];
    pc.cat = sl.cat;
    ++pc.events;
    ++s.links.deviceEvents;
    if (op != kNoSlice) {
      ++s.links.linked;
      ++pc.linked;
      ++(viaCorrelation ? s.links.viaCorrelation : s.links.viaExternalId);
      if (!opSeen[op]) {
        opSeen[op] = 1;
        ++st.opInstances;
      }
    }
  }
  for (auto& [k, v] : ops) s.ops.push_back(v);
  std::sort(s.ops.begin(), s.ops.end(), [&](const OpDeviceStat& a, const OpDeviceStat& b) {
    if (a.deviceNs != b.deviceNs) return a.deviceNs > b.deviceNs;
    return t.str(a.name) < t.str(b.name);
  });
  for (auto& [cat, pc] : perCat) s.links.byCategory.push_back(pc);
}

void writeOps(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& options) {
  const size_t top = static_cast<size_t>(std::max(options.top, 0));
  w.key("ops").beginArray();
  for (size_t k = 0; k < s.ops.size() && k < top; ++k) {
    const OpDeviceStat& o = s.ops[k];
    w.beginObject();
    w.key("name");
    writeName(w, t, o.name);
    w.field("linked", o.name != kNoString);
    w.field("device_ns", o.deviceNs);
    w.field("device_events", o.deviceEvents);
    w.field("op_instances", o.opInstances);
    w.field("share", ratio(o.deviceNs, s.deviceTotalNs));
    w.endObject();
  }
  w.endArray();

  w.key("links").beginObject();
  w.field("device_events", s.links.deviceEvents);
  w.field("linked", s.links.linked);
  w.field("share",
          s.links.deviceEvents ? static_cast<double>(s.links.linked) / static_cast<double>(s.links.deviceEvents) : 0.0);
  w.field("via_external_id", s.links.viaExternalId);
  w.field("via_correlation", s.links.viaCorrelation);
  w.key("by_category").beginArray();
  for (const auto& pc : s.links.byCategory) {
    w.beginObject();
    w.key("category");
    writeName(w, t, pc.cat);
    w.field("events", pc.events);
    w.field("linked", pc.linked);
    w.field("share", pc.events ? static_cast<double>(pc.linked) / static_cast<double>(pc.events) : 0.0);
    w.endObject();
  }
  w.endArray();
  w.endObject();
}

}  // namespace openreg::trace::sections
