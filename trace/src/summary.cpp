#include <algorithm>
#include <map>
#include <unordered_map>

#include "analysis.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace {

struct Interval {
  int64_t start, end;
};

// Sorts and merges into the union in place; returns the covered time.
int64_t merge_union(std::vector<Interval>& iv) {
  std::sort(iv.begin(), iv.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  size_t out = 0;
  for (const Interval& x : iv) {
    if (out > 0 && x.start <= iv[out - 1].end) {
      iv[out - 1].end = std::max(iv[out - 1].end, x.end);
    } else {
      iv[out++] = x;
    }
  }
  iv.resize(out);
  int64_t busy = 0;
  for (const Interval& x : iv) busy = saturating_add(busy, x.end - x.start);
  return busy;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

HostActivity describe_gap(const Trace& t, int64_t a, int64_t b) {
  HostActivity h;
  const int64_t mid = a + (b - a) / 2;
  // The host thread with the deepest stack at the midpoint is the one the
  // device was waiting on (or waiting for).
  for (uint32_t lane = 0; lane < t.lanes.size(); ++lane) {
    if (t.lane_kind[lane] != LaneKind::kHost) continue;
    std::vector<uint32_t> stack = t.stack_at(lane, mid);
    if (stack.size() > h.stack.size()) {
      h.stack = std::move(stack);
      h.lane = static_cast<int32_t>(lane);
    }
  }
  if (h.lane >= 0) h.text = describe_host_stack(t, h.stack);

  // Calls that ran during the gap, counted at the outermost level that does
  // not span the whole gap (so aten::add is not counted again as aten::empty).
  auto encloses_gap = [&](const Slice& s) { return s.ts <= a && s.end() >= b; };
  // The stack at the midpoint is already the headline; list what else ran.
  std::vector<uint32_t> headline = h.stack;
  std::sort(headline.begin(), headline.end());
  auto eligible = [&](uint32_t i) {
    if (std::binary_search(headline.begin(), headline.end(), i)) return false;
    const Slice& s = t.slices[i];
    if (t.role(s.cat) == CategoryRole::kPython) return false;
    if (encloses_gap(s) || starts_with(t.str(s.name), "ProfilerStep#")) return false;
    return std::min(s.end(), b) - std::max(s.ts, a) > 0;
  };
  std::unordered_map<uint32_t, HostActivity::Overlap> by_name;
  auto count = [&](uint32_t i) {
    for (int32_t p = t.parent[i]; p != kNoSlice; p = t.parent[p]) {
      if (encloses_gap(t.slices[p])) break;
      if (eligible(static_cast<uint32_t>(p))) return;  // counted through its ancestor
    }
    const Slice& s = t.slices[i];
    HostActivity::Overlap& o = by_name[s.name];
    o.name = s.name;
    o.cat = s.cat;
    ++o.count;
    o.overlap_ns = saturating_add(o.overlap_ns, std::min(s.end(), b) - std::max(s.ts, a));
  };
  for (uint32_t lane = 0; lane < t.lanes.size(); ++lane) {
    if (t.lane_kind[lane] != LaneKind::kHost) continue;
    if (h.lane >= 0 && lane != static_cast<uint32_t>(h.lane)) continue;
    for (uint32_t i : t.stack_at(lane, a))
      if (eligible(i)) count(i);
    const auto& v = t.lane_slices[lane];
    auto it = std::upper_bound(v.begin(), v.end(), a, [&](int64_t x, uint32_t i) { return x < t.slices[i].ts; });
    for (; it != v.end() && t.slices[*it].ts < b; ++it)
      if (eligible(*it)) count(*it);
  }
  for (auto& [name, o] : by_name) h.overlapping.push_back(o);
  std::sort(h.overlapping.begin(), h.overlapping.end(), [&](const auto& x, const auto& y) {
    if (x.overlap_ns != y.overlap_ns) return x.overlap_ns > y.overlap_ns;
    return t.str(x.name) < t.str(y.name);
  });
  if (h.overlapping.size() > 5) h.overlapping.resize(5);
  return h;
}

void write_key(JsonWriter& w, const Trace& t, const Key& k) {
  if (k.is_string) w.value(t.str(static_cast<uint32_t>(k.value)));
  else w.value(k.value);
}

void write_name(JsonWriter& w, const Trace& t, uint32_t id) {
  if (id == kNoString) w.null();
  else w.value(t.str(id));
}

double ratio(int64_t num, int64_t den) { return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 0.0; }

const char* role_name(CategoryRole r) {
  switch (r) {
    case CategoryRole::kDevice: return "device";
    case CategoryRole::kRuntime: return "runtime";
    case CategoryRole::kAnnotation: return "annotation";
    case CategoryRole::kOp: return "op";
    case CategoryRole::kPython: return "python";
    case CategoryRole::kSpan: return "span";
    case CategoryRole::kOther: break;
  }
  return "other";
}

void write_slice_brief(JsonWriter& w, const Trace& t, uint32_t i) {
  const Slice& s = t.slices[i];
  w.beginObject();
  w.key("name");
  write_name(w, t, s.name);
  w.key("category");
  write_name(w, t, s.cat);
  w.field("start_ns", s.ts - t.origin_ns);
  w.field("duration_ns", s.dur);
  w.field("event_index", s.origin.index);
  w.endObject();
}

void write_memory(JsonWriter& w, const Trace& t, const std::vector<MemoryStat>& stats) {
  w.beginArray();
  for (const MemoryStat& m : stats) {
    w.beginObject();
    w.field("device_type", m.device_type);
    w.field("device_type_name", device_type_name(m.device_type));
    w.field("device_id", m.device_id);
    w.field("events", m.events);
    w.field("allocations", m.allocations);
    w.field("frees", m.frees);
    w.field("peak_bytes", m.peak_bytes);
    w.field("peak_ns", m.peak_ts - t.origin_ns);
    w.field("final_bytes", m.final_bytes);
    w.field("peak_event_index", m.peak_event >= 0 ? t.memory[m.peak_event].origin.index : 0u);
    w.key("op");
    if (m.op == kNoSlice) w.null();
    else write_slice_brief(w, t, static_cast<uint32_t>(m.op));
    w.key("op_stack").beginArray();
    for (uint32_t i : m.op_stack) w.value(t.str(t.slices[i].name));
    w.endArray();
    w.endObject();
  }
  w.endArray();
}

}  // namespace

const char* device_type_name(int64_t type) {
  // c10::DeviceType values (torch._C._autograd.DeviceType).
  switch (type) {
    case 0: return "CPU";
    case 1: return "CUDA";
    case 6: return "HIP";
    case 9: return "XLA";
    case 12: return "XPU";
    case 13: return "MPS";
    case 14: return "Meta";
    case 15: return "HPU";
    case 19: return "MTIA";
    case 20: return "PrivateUse1";
    default: return "unknown";
  }
}

std::string describe_host_stack(const Trace& t, const std::vector<uint32_t>& stack) {
  auto name = [&](uint32_t i) { return t.str(t.slices[i].name); };
  auto is_python = [&](uint32_t i) { return t.role(t.slices[i].cat) == CategoryRole::kPython; };
  // ProfilerStep#N encloses everything in a step; it says nothing about the gap.
  auto is_step = [&](uint32_t i) { return starts_with(name(i), "ProfilerStep#"); };
  size_t first_call = 0;
  while (first_call < stack.size() && (is_python(stack[first_call]) || is_step(stack[first_call]))) ++first_call;

  std::vector<std::string_view> parts;
  std::string python;
  // The deepest frame of the user's own code says more than a builtin or a
  // torch internal does; fall back to the deepest frame.
  int deepest_user = -1, deepest_any = -1;
  for (size_t k = 0; k < first_call; ++k) {
    if (!is_python(stack[k])) continue;
    std::string_view n = name(stack[k]);
    deepest_any = static_cast<int>(k);
    if (!starts_with(n, "<") && n.find("torch/") == std::string_view::npos) deepest_user = static_cast<int>(k);
  }
  const int pick = deepest_user >= 0 ? deepest_user : deepest_any;
  if (pick >= 0) {
    python = "python: " + std::string(name(stack[pick]));
    parts.push_back(python);
  }
  std::vector<std::string_view> steps;
  for (size_t k = 0; k < stack.size(); ++k) {
    if (is_step(stack[k])) steps.push_back(name(stack[k]));
    else if (k >= first_call && !is_python(stack[k])) parts.push_back(name(stack[k]));
  }
  std::string out;
  if (parts.empty() && !steps.empty()) return std::string(steps.back()) + ", outside any op";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k) out += " \xE2\x86\x92 ";  // →
    out += parts[k];
  }
  return out;
}

std::optional<Window> profiling_window(const Trace& t) {
  bool have = false;
  Window w;
  for (const Slice& s : t.slices) {
    if (t.role(s.cat) != CategoryRole::kSpan) continue;
    if (!have || s.ts < w.start) w.start = s.ts;
    if (!have || s.end() > w.end) w.end = s.end();
    have = true;
  }
  if (have) {
    w.source = "trace_span";
    if (t.record_window_end && *t.record_window_end > w.end) {
      w.end = *t.record_window_end;
      w.source = "trace_span+record_window_end";
    }
    return w;
  }
  for (const Slice& s : t.slices) {
    if (t.lane_kind[s.lane] != LaneKind::kHost) continue;
    if (!have || s.ts < w.start) w.start = s.ts;
    if (!have || s.end() > w.end) w.end = s.end();
    have = true;
  }
  if (!have) return std::nullopt;
  w.source = "host_events";
  return w;
}

Summary compute_summary(const Trace& t, const SummaryOptions& options) {
  Summary s;
  s.window = profiling_window(t);

  // Kernels by name.
  std::unordered_map<uint32_t, KernelStat> kernels;
  for (uint32_t i : t.device_slices) {
    const Slice& sl = t.slices[i];
    KernelStat& k = kernels[sl.name];
    if (k.count == 0) {
      k.name = sl.name;
      k.cat = sl.cat;
      k.min_ns = k.max_ns = sl.dur;
    }
    ++k.count;
    k.total_ns = saturating_add(k.total_ns, sl.dur);
    k.min_ns = std::min(k.min_ns, sl.dur);
    k.max_ns = std::max(k.max_ns, sl.dur);
    s.device_total_ns = saturating_add(s.device_total_ns, sl.dur);
  }
  for (auto& [name, k] : kernels) s.kernels.push_back(k);
  std::sort(s.kernels.begin(), s.kernels.end(), [&](const KernelStat& a, const KernelStat& b) {
    if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
    return t.str(a.name) < t.str(b.name);
  });

  // Device time per op, and how much device work is linked to an op.
  std::unordered_map<uint32_t, OpDeviceStat> ops;
  std::map<uint32_t, LinkStat::PerCategory> per_cat;
  std::vector<uint8_t> op_seen(t.slices.size(), 0);
  for (uint32_t i : t.device_slices) {
    const Slice& sl = t.slices[i];
    bool via_correlation = false;
    int32_t op = t.op_of_device_slice(sl, &via_correlation);
    uint32_t key = op == kNoSlice ? kNoString : t.slices[op].name;
    OpDeviceStat& st = ops[key];
    st.name = key;
    st.device_ns = saturating_add(st.device_ns, sl.dur);
    ++st.device_events;
    LinkStat::PerCategory& pc = per_cat[sl.cat];
    pc.cat = sl.cat;
    ++pc.events;
    ++s.links.device_events;
    if (op != kNoSlice) {
      ++s.links.linked;
      ++pc.linked;
      ++(via_correlation ? s.links.via_correlation : s.links.via_external_id);
      if (!op_seen[op]) {
        op_seen[op] = 1;
        ++st.op_instances;
      }
    }
  }
  for (auto& [k, v] : ops) s.ops.push_back(v);
  std::sort(s.ops.begin(), s.ops.end(), [&](const OpDeviceStat& a, const OpDeviceStat& b) {
    if (a.device_ns != b.device_ns) return a.device_ns > b.device_ns;
    return t.str(a.name) < t.str(b.name);
  });
  for (auto& [cat, pc] : per_cat) s.links.by_category.push_back(pc);

  // Streams (device_slices is grouped by lane) and devices.
  std::map<Key, std::vector<Interval>> per_device;
  std::map<Key, DeviceStat> devices;
  std::vector<Interval> intervals;
  for (size_t k = 0; k < t.device_slices.size();) {
    uint32_t lane = t.slices[t.device_slices[k]].lane;
    StreamStat st;
    st.lane = lane;
    intervals.clear();
    for (; k < t.device_slices.size() && t.slices[t.device_slices[k]].lane == lane; ++k) {
      const Slice& sl = t.slices[t.device_slices[k]];
      if (st.events == 0 || sl.ts < st.first_ns) st.first_ns = sl.ts;
      if (st.events == 0 || sl.end() > st.last_ns) st.last_ns = sl.end();
      ++st.events;
      intervals.push_back({sl.ts, sl.end()});
    }
    st.busy_ns = merge_union(intervals);
    const Key& pid = t.lanes[lane].pid;
    auto& all = per_device[pid];
    all.insert(all.end(), intervals.begin(), intervals.end());
    DeviceStat& d = devices[pid];
    if (d.streams == 0 || st.first_ns < d.first_ns) d.first_ns = st.first_ns;
    if (d.streams == 0 || st.last_ns > d.last_ns) d.last_ns = st.last_ns;
    d.device = pid;
    ++d.streams;
    d.events += st.events;
    s.streams.push_back(st);
  }
  std::sort(s.streams.begin(), s.streams.end(), [&](const StreamStat& a, const StreamStat& b) {
    const Lane& x = t.lanes[a.lane];
    const Lane& y = t.lanes[b.lane];
    if (!(x.pid == y.pid)) return x.pid < y.pid;
    return x.tid < y.tid;
  });

  std::vector<IdleGap> gaps;
  for (auto& [pid, iv] : per_device) {
    DeviceStat& d = devices[pid];
    d.busy_ns = merge_union(iv);
    for (size_t k = 1; k < iv.size(); ++k) gaps.push_back(IdleGap{pid, iv[k - 1].end, iv[k].start, {}});
    s.devices.push_back(d);
  }
  size_t keep = std::min(gaps.size(), static_cast<size_t>(std::max(options.gaps, 0)));
  std::partial_sort(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(keep), gaps.end(),
                    [](const IdleGap& a, const IdleGap& b) {
                      int64_t da = a.end_ns - a.start_ns, db = b.end_ns - b.start_ns;
                      if (da != db) return da > db;
                      return a.start_ns < b.start_ns;
                    });
  gaps.resize(keep);
  for (IdleGap& g : gaps) g.host = describe_gap(t, g.start_ns, g.end_ns);
  s.gaps = std::move(gaps);

  // Memory: the peak of "Total Allocated" per device.
  std::map<std::pair<int64_t, int64_t>, std::vector<uint32_t>> groups;
  for (uint32_t i = 0; i < t.memory.size(); ++i) {
    const MemoryPoint& m = t.memory[i];
    if (!m.device_type.ok() || !m.total_allocated.ok()) continue;
    groups[{m.device_type.value, m.device_id.ok() ? m.device_id.value : -1}].push_back(i);
  }
  for (auto& [key, idx] : groups) {
    std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return t.memory[a].ts < t.memory[b].ts; });
    MemoryStat ms;
    ms.device_type = key.first;
    ms.device_id = key.second;
    for (uint32_t i : idx) {
      const MemoryPoint& m = t.memory[i];
      ++ms.events;
      if (m.bytes.ok() && m.bytes.value > 0) ++ms.allocations;
      if (m.bytes.ok() && m.bytes.value < 0) ++ms.frees;
      if (ms.peak_event < 0 || m.total_allocated.value > ms.peak_bytes) {
        ms.peak_bytes = m.total_allocated.value;
        ms.peak_ts = m.ts;
        ms.peak_event = static_cast<int32_t>(i);
      }
      ms.final_bytes = m.total_allocated.value;
    }
    const MemoryPoint& peak = t.memory[ms.peak_event];
    ms.op = t.innermost_at(peak.lane, peak.ts, role_bit(CategoryRole::kOp));
    for (uint32_t i : t.stack_at(peak.lane, peak.ts))
      if (t.role(t.slices[i].cat) == CategoryRole::kOp) ms.op_stack.push_back(i);
    (key.first == 0 ? s.host_memory : s.memory).push_back(std::move(ms));
  }
  return s;
}

void write_trace_info(JsonWriter& w, const Trace& t) {
  w.key("trace").beginObject();
  w.field("events", t.event_count);
  w.field("bytes", t.bytes_read);
  w.field("origin_ns", t.origin_ns);
  w.field("origin_us", format_us(t.origin_ns));
  w.key("phases").beginObject();
  for (size_t ph = 0; ph < t.phase_counts.size(); ++ph)
    if (t.phase_counts[ph]) w.field(std::string(1, static_cast<char>(ph)), t.phase_counts[ph]);
  w.endObject();
  std::map<uint32_t, uint64_t> cats;
  for (const Slice& s : t.slices) ++cats[s.cat];
  w.key("categories").beginArray();
  for (auto& [cat, n] : cats) {
    w.beginObject();
    w.key("name");
    write_name(w, t, cat);
    w.field("role", role_name(t.role(cat)));
    w.field("complete_events", n);
    w.endObject();
  }
  w.endArray();
  auto names = [&](const char* key, const std::vector<uint32_t>& ids) {
    w.key(key).beginArray();
    for (uint32_t id : ids) w.value(t.str(id));
    w.endArray();
  };
  names("device_categories", t.device_categories);
  names("runtime_categories", t.runtime_categories);
  names("annotation_categories", t.annotation_categories);
  names("op_categories", t.op_categories);
  names("flow_categories", t.flow_categories);
  uint64_t host = 0, device = 0;
  for (size_t lane = 0; lane < t.lanes.size(); ++lane) {
    if (t.lane_slices[lane].empty()) continue;  // metadata-only lanes
    host += t.lane_kind[lane] == LaneKind::kHost;
    device += t.lane_kind[lane] == LaneKind::kDevice;
  }
  w.field("host_lanes", host);
  w.field("device_lanes", device);
  w.field("malformed_events", t.malformed_count);
  w.key("parse_error");
  if (t.parse_error) {
    w.beginObject().field("offset", t.parse_error->offset).field("message", t.parse_error->message).endObject();
  } else {
    w.null();
  }
  w.endObject();
}

std::string summary_to_json(const Trace& t, const Summary& s, const SummaryOptions& options) {
  JsonWriter w;
  const size_t top = static_cast<size_t>(std::max(options.top, 0));
  w.beginObject();
  write_trace_info(w, t);
  w.key("window");
  if (s.window) {
    w.beginObject();
    w.field("start_ns", s.window->start - t.origin_ns);
    w.field("end_ns", s.window->end - t.origin_ns);
    w.field("duration_ns", s.window->end - s.window->start);
    w.field("source", s.window->source);
    w.endObject();
  } else {
    w.null();
  }
  w.field("device_total_ns", s.device_total_ns);
  w.field("kernel_names", static_cast<uint64_t>(s.kernels.size()));

  w.key("top_kernels").beginArray();
  for (size_t k = 0; k < s.kernels.size() && k < top; ++k) {
    const KernelStat& ks = s.kernels[k];
    w.beginObject();
    w.key("name");
    write_name(w, t, ks.name);
    w.key("category");
    write_name(w, t, ks.cat);
    w.field("count", ks.count);
    w.field("total_ns", ks.total_ns);
    w.field("avg_ns", ks.total_ns / static_cast<int64_t>(ks.count));
    w.field("min_ns", ks.min_ns);
    w.field("max_ns", ks.max_ns);
    w.field("share", ratio(ks.total_ns, s.device_total_ns));
    w.endObject();
  }
  w.endArray();

  w.key("ops").beginArray();
  for (size_t k = 0; k < s.ops.size() && k < top; ++k) {
    const OpDeviceStat& o = s.ops[k];
    w.beginObject();
    w.key("name");
    write_name(w, t, o.name);
    w.field("linked", o.name != kNoString);
    w.field("device_ns", o.device_ns);
    w.field("device_events", o.device_events);
    w.field("op_instances", o.op_instances);
    w.field("share", ratio(o.device_ns, s.device_total_ns));
    w.endObject();
  }
  w.endArray();

  w.key("links").beginObject();
  w.field("device_events", s.links.device_events);
  w.field("linked", s.links.linked);
  w.field("share", s.links.device_events ? static_cast<double>(s.links.linked) / static_cast<double>(s.links.device_events) : 0.0);
  w.field("via_external_id", s.links.via_external_id);
  w.field("via_correlation", s.links.via_correlation);
  w.key("by_category").beginArray();
  for (const auto& pc : s.links.by_category) {
    w.beginObject();
    w.key("category");
    write_name(w, t, pc.cat);
    w.field("events", pc.events);
    w.field("linked", pc.linked);
    w.field("share", pc.events ? static_cast<double>(pc.linked) / static_cast<double>(pc.events) : 0.0);
    w.endObject();
  }
  w.endArray();
  w.endObject();

  w.key("streams").beginArray();
  for (const StreamStat& st : s.streams) {
    const Lane& lane = t.lanes[st.lane];
    w.beginObject();
    w.key("device");
    write_key(w, t, lane.pid);
    w.key("stream");
    write_key(w, t, lane.tid);
    w.key("name");
    write_name(w, t, t.threads[st.lane].name);
    w.field("events", st.events);
    w.field("busy_ns", st.busy_ns);
    w.field("first_ns", st.first_ns - t.origin_ns);
    w.field("last_ns", st.last_ns - t.origin_ns);
    w.field("span_ns", st.last_ns - st.first_ns);
    // Against the device's active span, so that streams compare with each other.
    int64_t device_span = 0;
    for (const DeviceStat& d : s.devices)
      if (d.device == lane.pid) device_span = d.last_ns - d.first_ns;
    w.field("utilization", ratio(st.busy_ns, device_span));
    w.field("own_span_utilization", ratio(st.busy_ns, st.last_ns - st.first_ns));
    w.endObject();
  }
  w.endArray();

  w.key("devices").beginArray();
  for (const DeviceStat& d : s.devices) {
    const Trace::ProcessInfo* p = t.process(d.device);
    w.beginObject();
    w.key("device");
    write_key(w, t, d.device);
    w.key("name");
    write_name(w, t, p ? p->name : kNoString);
    w.field("streams", d.streams);
    w.field("events", d.events);
    w.field("busy_ns", d.busy_ns);
    w.field("first_ns", d.first_ns - t.origin_ns);
    w.field("last_ns", d.last_ns - t.origin_ns);
    w.field("span_ns", d.last_ns - d.first_ns);
    w.field("idle_ns", d.last_ns - d.first_ns - d.busy_ns);
    w.field("utilization", ratio(d.busy_ns, d.last_ns - d.first_ns));
    w.endObject();
  }
  w.endArray();

  w.key("idle_gaps").beginArray();
  for (const IdleGap& g : s.gaps) {
    w.beginObject();
    w.key("device");
    write_key(w, t, g.device);
    w.field("start_ns", g.start_ns - t.origin_ns);
    w.field("end_ns", g.end_ns - t.origin_ns);
    w.field("duration_ns", g.end_ns - g.start_ns);
    w.key("host").beginObject();
    w.key("thread");
    if (g.host.lane >= 0) {
      const Lane& lane = t.lanes[g.host.lane];
      w.beginObject();
      w.key("pid");
      write_key(w, t, lane.pid);
      w.key("tid");
      write_key(w, t, lane.tid);
      w.key("name");
      write_name(w, t, t.threads[g.host.lane].name);
      w.endObject();
    } else {
      w.null();
    }
    w.field("text", g.host.text);
    w.key("stack").beginArray();
    for (uint32_t i : g.host.stack) write_slice_brief(w, t, i);
    w.endArray();
    w.key("overlapping").beginArray();
    for (const auto& o : g.host.overlapping) {
      w.beginObject();
      w.key("name");
      write_name(w, t, o.name);
      w.key("category");
      write_name(w, t, o.cat);
      w.field("count", o.count);
      w.field("overlap_ns", o.overlap_ns);
      w.endObject();
    }
    w.endArray();
    w.endObject();
    w.endObject();
  }
  w.endArray();

  w.key("memory");
  write_memory(w, t, s.memory);
  w.key("host_memory");
  write_memory(w, t, s.host_memory);
  w.endObject();
  return w.take();
}

}  // namespace openreg::trace
