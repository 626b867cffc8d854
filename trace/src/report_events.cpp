// The report's timeline: every slice packed into little-endian typed arrays,
// base64-encoded, ordered by (lane, nesting depth, start) so that each row
// the page draws is one contiguous, start-sorted range it can binary-search.
//
//   ts       Float64  start, ns after origin_ns; as the difference from the previous event of its row
//                     (ts_delta), the first of a row absolute
// Each array is zlib-compressed at level 1 ("encoding": "deflate"; level 6 saves 10 % more in 6x the time)
// unless the option "deflate" is false.
//   dur      Float32  duration, ns
//   name     Uint32   index into names
//   cat      Uint8    index into cats (255: any later category)
//   args     Uint32   index into args (compact JSON texts; 0: none)
//   partner  Int32    the launch of a device event / the device event of a launch (by correlation), -1
//   op       Int32    the op a device event belongs to (as for device time per op), -1
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#include "report_internal.h"

namespace openreg::trace {

namespace {

void appendBase64(std::string& out, const void* data, size_t n) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  out.reserve(out.size() + (n + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < n) {
    uint32_t v = uint32_t{p[i]} << 16;
    if (i + 1 < n) v |= uint32_t{p[i + 1]} << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
}

// The array's bytes, zlib-compressed (the page inflates them with DecompressionStream("deflate")) unless
// `deflate` is off, then base64.
template <typename T>
std::string base64Of(const std::vector<T>& v, bool deflate) {
  const size_t n = v.size() * sizeof(T);
  std::string s;
  if (!deflate) {
    appendBase64(s, v.data(), n);
    return s;
  }
  uLongf size = compressBound(static_cast<uLong>(n));
  std::vector<unsigned char> packed(size);
  if (compress2(packed.data(), &size, reinterpret_cast<const Bytef*>(v.data()), static_cast<uLong>(n), 1) != Z_OK)
    throw std::runtime_error("zlib could not compress the timeline");
  appendBase64(s, packed.data(), size);
  return s;
}

// A dense renumbering of string ids.
class Dense {
 public:
  uint32_t operator()(uint32_t id) {
    auto [it, inserted] = ids_.emplace(id, static_cast<uint32_t>(order_.size()));
    if (inserted) order_.push_back(id);
    return it->second;
  }
  const std::vector<uint32_t>& order() const { return order_; }

 private:
  std::unordered_map<uint32_t, uint32_t> ids_;
  std::vector<uint32_t> order_;
};

int64_t sortOf(const std::optional<int64_t>& v, int64_t fallback) { return v ? *v : fallback; }

// Host lanes first, then device lanes, then the rest; each by process sort
// index (else pid), then thread sort index (else tid).
std::vector<uint32_t> laneOrder(const Trace& t) {
  std::vector<uint32_t> lanes;
  for (uint32_t l = 0; l < t.lanes.size(); ++l)
    if (!t.laneSlices[l].empty()) lanes.push_back(l);
  auto kindRank = [&](uint32_t l) {
    return t.laneKind[l] == LaneKind::Host ? 0 : t.laneKind[l] == LaneKind::Device ? 1 : 2;
  };
  std::stable_sort(lanes.begin(), lanes.end(), [&](uint32_t a, uint32_t b) {
    if (kindRank(a) != kindRank(b)) return kindRank(a) < kindRank(b);
    const Lane &x = t.lanes[a], &y = t.lanes[b];
    const auto* px = t.process(x.pid);
    const auto* py = t.process(y.pid);
    const int64_t sx = px ? sortOf(px->sortIndex, x.pid.value) : x.pid.value;
    const int64_t sy = py ? sortOf(py->sortIndex, y.pid.value) : y.pid.value;
    if (sx != sy) return sx < sy;
    if (!(x.pid == y.pid)) return x.pid < y.pid;
    const int64_t tx = sortOf(t.threads[a].sortIndex, x.tid.value), ty = sortOf(t.threads[b].sortIndex, y.tid.value);
    if (tx != ty) return tx < ty;
    return x.tid < y.tid;
  });
  return lanes;
}

std::string laneLabel(const Trace& t, uint32_t l) {
  const Lane& lane = t.lanes[l];
  const auto* p = t.process(lane.pid);
  std::string process = p && p->name != kNoString ? std::string(t.str(p->name)) : "pid " + t.keyText(lane.pid);
  if (p && p->labels != kNoString) process += " (" + std::string(t.str(p->labels)) + ")";
  const uint32_t tn = l < t.threads.size() ? t.threads[l].name : kNoString;
  std::string thread = tn != kNoString ? std::string(t.str(tn)) : "thread " + t.keyText(lane.tid);
  return process + " · " + thread;
}

}  // namespace

void writeTimelineEvents(JsonWriter& w, const Trace& t, const EventArgs& args, const ReportOptions& o) {
  w.key("timeline").beginObject();
  w.field("origin_ns", t.originNs);
  int64_t end = 0;
  for (const Slice& s : t.slices) end = std::max(end, s.end() - t.originNs);
  w.field("end_ns", end);
  if (!o.events) {
    w.field("events", 0).endObject();
    return;
  }
  // Depth of each slice within its lane.
  std::vector<uint8_t> depth(t.slices.size(), 0);
  for (const auto& v : t.laneSlices)
    for (uint32_t i : v)
      if (t.parent[i] != kNoSlice) depth[i] = static_cast<uint8_t>(std::min(63, depth[t.parent[i]] + 1));

  std::vector<uint32_t> order;  // slice indexes in packed order
  std::vector<size_t> rowStarts;
  order.reserve(t.slices.size());
  std::vector<int32_t> packedOf(t.slices.size(), -1);
  Dense names, cats, argIds;
  argIds(0);  // 0: no args
  const std::vector<uint32_t> lanes = laneOrder(t);
  w.key("lanes").beginArray();
  for (uint32_t l : lanes) {
    std::vector<uint32_t> v = t.laneSlices[l];  // (ts, longer first): stable by depth keeps it per row
    std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) { return depth[a] < depth[b]; });
    const Lane& lane = t.lanes[l];
    w.beginObject().key("pid");
    writeKey(w, t, lane.pid);
    w.key("tid");
    writeKey(w, t, lane.tid);
    w.field("kind", t.laneKind[l] == LaneKind::Host ? "host" : t.laneKind[l] == LaneKind::Device ? "device" : "other");
    w.field("label", laneLabel(t, l));
    w.key("rows").beginArray();
    for (size_t k = 0; k < v.size();) {
      size_t e = k;
      int64_t maxDur = 0;
      while (e < v.size() && depth[v[e]] == depth[v[k]]) maxDur = std::max(maxDur, t.slices[v[e++]].dur);
      w.beginObject().field("depth", static_cast<int>(depth[v[k]])).field("first", static_cast<uint64_t>(order.size()));
      w.field("count", static_cast<uint64_t>(e - k)).field("max_dur", maxDur).endObject();
      rowStarts.push_back(order.size());
      for (; k < e; ++k) {
        packedOf[v[k]] = static_cast<int32_t>(order.size());
        order.push_back(v[k]);
      }
    }
    w.endArray().endObject();
  }
  w.endArray();

  const size_t n = order.size();
  std::vector<bool> isRowStart(n, false);
  for (size_t r : rowStarts) isRowStart[r] = true;
  std::vector<double> ts(n);
  std::vector<float> dur(n);
  std::vector<uint32_t> name(n), arg(n);
  std::vector<uint8_t> cat(n);
  std::vector<int32_t> partner(n, -1), op(n, -1);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t i = order[k];
    const Slice& s = t.slices[i];
    ts[k] = static_cast<double>(s.ts - t.originNs);
    dur[k] = static_cast<float>(s.dur);
    name[k] = names(s.name);
    cat[k] = static_cast<uint8_t>(std::min<uint32_t>(255, cats(s.cat)));
    arg[k] = s.origin.index < args.argsOf.size() ? argIds(args.argsOf[s.origin.index]) : 0;
    if (!t.isDevice(s)) continue;
    if (s.correlation.ok()) {
      auto it = t.runtimeByCorrelation.find(s.correlation.value);
      if (it != t.runtimeByCorrelation.end() && packedOf[it->second] >= 0) {
        partner[k] = packedOf[it->second];
        partner[static_cast<size_t>(packedOf[it->second])] = static_cast<int32_t>(k);
      }
    }
    const int32_t o2 = t.opOfDeviceSlice(s);
    if (o2 != kNoSlice) op[k] = packedOf[o2];
  }
  w.field("events", static_cast<uint64_t>(n));
  w.key("names").beginArray();
  for (uint32_t id : names.order()) writeName(w, t, id);
  w.endArray();
  w.key("cats").beginArray();
  for (uint32_t id : cats.order()) writeName(w, t, id);
  w.endArray();
  w.key("cat_roles").beginArray();
  for (uint32_t id : cats.order()) {
    const CategoryRole r = t.role(id);
    w.value(r == CategoryRole::Device       ? "device"
            : r == CategoryRole::Runtime    ? "runtime"
            : r == CategoryRole::Annotation ? "annotation"
            : r == CategoryRole::Op         ? "op"
            : r == CategoryRole::Python     ? "python"
            : r == CategoryRole::Span       ? "span"
                                            : "other");
  }
  w.endArray();
  w.key("args").beginArray();
  for (uint32_t id : argIds.order()) w.value(args.texts[id]);
  w.endArray();
  // Starts as differences from the previous event of the same row (integers, exact in a double up to 2^53
  // ns): mostly small, they compress far better than absolute times. The page adds them up again.
  std::vector<double> delta(ts);
  for (size_t k = n; k-- > 1;)
    if (!isRowStart[k]) delta[k] = ts[k] - ts[k - 1];
  const bool z = o.deflate;
  w.field("encoding", z ? "deflate" : "raw").field("ts_delta", true);
  w.field("ts", base64Of(delta, z)).field("dur", base64Of(dur, z)).field("name", base64Of(name, z));
  w.field("cat", base64Of(cat, z)).field("arg", base64Of(arg, z)).field("partner", base64Of(partner, z));
  w.field("op", base64Of(op, z));
  w.endObject();
}

}  // namespace openreg::trace
