#include "trace_model.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

namespace openreg::trace {

// ---------------------------------------------------------------- strings

char* StringTable::allocate(size_t n) {
  constexpr size_t kBlock = 64 * 1024;
  if (n > block_left_) {
    size_t size = n > kBlock / 4 ? n : kBlock;  // long strings get a block of their own
    blocks_.emplace_back(new char[size]);
    if (size == n) return blocks_.back().get();
    block_pos_ = blocks_.back().get();
    block_left_ = size;
  }
  char* p = block_pos_;
  block_pos_ += n;
  block_left_ -= n;
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

std::string format_us(int64_t ns) {
  bool negative = ns < 0;
  uint64_t a = negative ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%llu.%03llu", negative ? "-" : "",
                static_cast<unsigned long long>(a / 1000), static_cast<unsigned long long>(a % 1000));
  return buf;
}

std::string Trace::key_text(const Key& k) const {
  return k.is_string ? std::string(str(static_cast<uint32_t>(k.value))) : std::to_string(k.value);
}

uint32_t Trace::lane_id(const Lane& lane) {
  auto [it, inserted] = lane_ids_.emplace(lane, static_cast<uint32_t>(lanes.size()));
  if (inserted) lanes.push_back(lane);
  return it->second;
}

// ---------------------------------------------------------------- loading

namespace {

// Everything one event may carry; reused across events.
struct EventFields {
  char ph = 0;
  bool ph_ok = false;
  uint32_t name = kNoString, cat = kNoString;
  Key pid, tid, id;
  bool has_pid = false, has_tid = false, has_id = false;
  int64_t ts = 0, dur = 0;
  bool has_ts = false, has_dur = false;
  bool bp_e = false;
  IntArg external_id, device, stream, correlation, device_type, device_id, total_allocated, bytes,
      sort_index;
  uint32_t str_arg = kNoString;
};

class Loader {
 public:
  Loader(Trace& t, JsonReader& r) : t_(t), r_(r) {
    memory_name_ = t_.strings.intern("[memory]");
    window_end_name_ = t_.strings.intern("Record Window End");
  }

  void read_document() {
    JsonKind kind = r_.peek_kind();
    if (kind == JsonKind::kArray) {
      t_.has_trace_events = true;
      read_events();
    } else if (kind == JsonKind::kObject) {
      r_.begin_object();
      std::string_view key;
      while (r_.next_key(key)) {
        if (key == "traceEvents") {
          if (r_.peek_kind() != JsonKind::kArray) r_.fail("\"traceEvents\" is not an array");
          t_.has_trace_events = true;
          read_events();
        } else {
          r_.skip_value();
        }
      }
    } else {
      r_.fail("a trace is a JSON object or array");
    }
    if (!r_.at_end()) r_.fail("data after the end of the JSON document");
  }

 private:
  void read_events() {
    r_.begin_array();
    while (r_.next_element()) {
      Origin origin{r_.offset(), static_cast<uint32_t>(t_.event_count)};
      ++t_.event_count;
      if (r_.peek_kind() != JsonKind::kObject) {
        r_.skip_value();
        malformed(origin, "event is not a JSON object");
        continue;
      }
      read_event(origin);
    }
  }

  void malformed(const Origin& origin, std::string reason, uint32_t name = kNoString) {
    ++t_.malformed_count;
    if (t_.malformed.size() < Trace::kMaxMalformedKept) t_.malformed.push_back({origin, std::move(reason), name});
  }

  uint32_t read_interned_string() {
    if (r_.peek_kind() != JsonKind::kString) {
      r_.skip_value();
      return kNoString;
    }
    return t_.strings.intern(r_.read_string());
  }

  bool read_key(Key& out) {
    switch (r_.peek_kind()) {
      case JsonKind::kNumber: {
        std::string_view text = r_.read_number();
        if (parse_int64(text, out.value)) {
          out.is_string = false;
        } else {
          out = Key{t_.strings.intern(text), true};
        }
        return true;
      }
      case JsonKind::kString:
        out = Key{t_.strings.intern(r_.read_string()), true};
        return true;
      default:
        r_.skip_value();
        return false;
    }
  }

  bool read_time(int64_t& out) {
    if (r_.peek_kind() != JsonKind::kNumber) {
      r_.skip_value();
      return false;
    }
    // Bounded so that ts + dur and differences of times cannot overflow.
    constexpr int64_t kMaxTimeNs = int64_t{1} << 61;
    return parse_us_to_ns(r_.read_number(), out) && out > -kMaxTimeNs && out < kMaxTimeNs;
  }

  void read_int_arg(IntArg& arg) {
    arg.present = true;
    arg.is_int = false;
    if (r_.peek_kind() == JsonKind::kNumber) {
      arg.is_int = parse_int64(r_.read_number(), arg.value);
    } else {
      r_.skip_value();
    }
  }

  void read_args(EventFields& e) {
    if (r_.peek_kind() != JsonKind::kObject) {
      r_.skip_value();
      return;
    }
    r_.begin_object();
    std::string_view key;
    while (r_.next_key(key)) {
      switch (key.size()) {
        case 4:
          if (key == "name") { e.str_arg = read_interned_string(); continue; }
          break;
        case 5:
          if (key == "Bytes") { read_int_arg(e.bytes); continue; }
          break;
        case 6:
          if (key == "device") { read_int_arg(e.device); continue; }
          if (key == "stream") { read_int_arg(e.stream); continue; }
          if (key == "labels") { e.str_arg = read_interned_string(); continue; }
          break;
        case 9:
          if (key == "Device Id") { read_int_arg(e.device_id); continue; }
          break;
        case 10:
          if (key == "sort_index") { read_int_arg(e.sort_index); continue; }
          break;
        case 11:
          if (key == "External id") { read_int_arg(e.external_id); continue; }
          if (key == "correlation") { read_int_arg(e.correlation); continue; }
          if (key == "Device Type") { read_int_arg(e.device_type); continue; }
          break;
        case 15:
          if (key == "Total Allocated") { read_int_arg(e.total_allocated); continue; }
          break;
        default:
          break;
      }
      r_.skip_value();
    }
  }

  void read_event(const Origin& origin) {
    EventFields& e = fields_;
    e = EventFields{};
    r_.begin_object();
    std::string_view key;
    while (r_.next_key(key)) {
      switch (key.size()) {
        case 2:
          if (key == "ph") {
            if (r_.peek_kind() == JsonKind::kString) {
              std::string_view ph = r_.read_string();
              e.ph_ok = ph.size() == 1;
              e.ph = ph.empty() ? '?' : ph[0];
            } else {
              r_.skip_value();
            }
            continue;
          }
          if (key == "ts") { e.has_ts = read_time(e.ts); continue; }
          if (key == "id") { e.has_id = read_key(e.id); continue; }
          if (key == "bp") {
            if (r_.peek_kind() == JsonKind::kString) e.bp_e = r_.read_string() == "e";
            else r_.skip_value();
            continue;
          }
          break;
        case 3:
          if (key == "pid") { e.has_pid = read_key(e.pid); continue; }
          if (key == "tid") { e.has_tid = read_key(e.tid); continue; }
          if (key == "cat") { e.cat = read_interned_string(); continue; }
          if (key == "dur") { e.has_dur = read_time(e.dur); continue; }
          break;
        case 4:
          if (key == "name") { e.name = read_interned_string(); continue; }
          if (key == "args") { read_args(e); continue; }
          break;
        default:
          break;
      }
      r_.skip_value();
    }
    commit(origin);
  }

  void commit(const Origin& origin) {
    EventFields& e = fields_;
    if (!e.ph_ok) {
      malformed(origin, "missing or invalid \"ph\"", e.name);
      return;
    }
    ++t_.phase_counts[static_cast<unsigned char>(e.ph)];
    switch (e.ph) {
      case 'X': {
        if (!e.has_ts || !e.has_dur || !e.has_pid || !e.has_tid) {
          malformed(origin, "complete event without a numeric ts, dur, pid or tid (or a time beyond 2^61 ns)", e.name);
          return;
        }
        if (e.dur < 0) {
          malformed(origin, "complete event with negative dur", e.name);
          return;
        }
        Slice s;
        s.ts = e.ts;
        s.dur = e.dur;
        s.origin = origin;
        s.lane = t_.lane_id(Lane{e.pid, e.tid});
        s.name = e.name;
        s.cat = e.cat;
        s.external_id = e.external_id;
        s.device = e.device;
        s.stream = e.stream;
        s.correlation = e.correlation;
        t_.slices.push_back(s);
        return;
      }
      case 's':
      case 't':
      case 'f': {
        if (!e.has_ts || !e.has_pid || !e.has_tid || !e.has_id) {
          malformed(origin, "flow event without an id, numeric ts, pid or tid", e.name);
          return;
        }
        FlowPoint f;
        f.ts = e.ts;
        f.origin = origin;
        f.id = e.id;
        f.lane = t_.lane_id(Lane{e.pid, e.tid});
        f.name = e.name;
        f.cat = e.cat;
        f.ph = e.ph;
        f.binds_enclosing = e.bp_e;
        t_.flows.push_back(f);
        return;
      }
      case 'i':
      case 'I': {
        if (e.name == window_end_name_ && e.has_ts) {
          if (!t_.record_window_end || *t_.record_window_end < e.ts) t_.record_window_end = e.ts;
          return;
        }
        if (e.name != memory_name_) return;
        if (!e.has_ts || !e.has_pid || !e.has_tid) {
          malformed(origin, "[memory] event without a numeric ts, pid or tid", e.name);
          return;
        }
        MemoryPoint m;
        m.ts = e.ts;
        m.origin = origin;
        m.lane = t_.lane_id(Lane{e.pid, e.tid});
        m.device_type = e.device_type;
        m.device_id = e.device_id;
        m.total_allocated = e.total_allocated;
        m.bytes = e.bytes;
        t_.memory.push_back(m);
        return;
      }
      case 'M': {
        MetaEvent m;
        m.origin = origin;
        m.lane = t_.lane_id(Lane{e.has_pid ? e.pid : Key{}, e.has_tid ? e.tid : Key{}});
        m.name = e.name;
        m.str_arg = e.str_arg;
        m.sort_index = e.sort_index;
        t_.meta.push_back(m);
        return;
      }
      default:
        return;
    }
  }

  Trace& t_;
  JsonReader& r_;
  EventFields fields_;
  uint32_t memory_name_, window_end_name_;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void classify_categories(Trace& t) {
  const LoadOptions& o = t.options;
  t.category_role.assign(t.strings.size(), CategoryRole::kOther);
  std::vector<bool> used(t.strings.size(), false);
  for (const Slice& s : t.slices)
    if (s.cat != kNoString) used[s.cat] = true;
  for (const FlowPoint& f : t.flows)
    if (f.cat != kNoString) used[f.cat] = true;

  auto assign = [&](const std::vector<std::string>& names, CategoryRole role) {
    for (const std::string& n : names) {
      uint32_t id = t.strings.find(n);
      if (id != kNoString) t.category_role[id] = role;
    }
  };
  // Later assignments win: configured device categories are the strongest.
  assign({"Trace"}, CategoryRole::kSpan);
  assign({"python_function"}, CategoryRole::kPython);
  assign(o.op_categories, CategoryRole::kOp);
  if (o.runtime_categories_given) {
    assign(o.runtime_categories, CategoryRole::kRuntime);
  } else {
    for (uint32_t id = 0; id < t.strings.size(); ++id) {
      if (!used[id]) continue;
      std::string_view name = t.str(id);
      if (ends_with(name, "_runtime") || ends_with(name, "_driver")) t.category_role[id] = CategoryRole::kRuntime;
    }
  }
  assign(o.annotation_categories, CategoryRole::kAnnotation);
  assign(o.device_categories, CategoryRole::kDevice);
  if (o.infer_device_categories) {
    // HTA's rule: device work is what carries a stream and a correlation.
    for (const Slice& s : t.slices) {
      if (s.cat == kNoString || t.category_role[s.cat] != CategoryRole::kOther) continue;
      if (s.stream.ok() && s.correlation.ok()) t.category_role[s.cat] = CategoryRole::kDevice;
    }
  }
  auto collect = [&](CategoryRole role, std::vector<uint32_t>& out) {
    for (uint32_t id = 0; id < t.strings.size(); ++id)
      if (used[id] && t.category_role[id] == role) out.push_back(id);
  };
  collect(CategoryRole::kDevice, t.device_categories);
  collect(CategoryRole::kRuntime, t.runtime_categories);
  collect(CategoryRole::kAnnotation, t.annotation_categories);
  collect(CategoryRole::kOp, t.op_categories);
  for (const std::string& n : o.flow_categories) {
    uint32_t id = t.strings.find(n);
    if (id != kNoString) t.flow_categories.push_back(id);
  }
}

void read_metadata(Trace& t) {
  t.threads.assign(t.lanes.size(), {});
  uint32_t process_name = t.strings.intern("process_name");
  uint32_t process_labels = t.strings.intern("process_labels");
  uint32_t process_sort_index = t.strings.intern("process_sort_index");
  uint32_t thread_name = t.strings.intern("thread_name");
  uint32_t thread_sort_index = t.strings.intern("thread_sort_index");
  for (size_t i = 0; i < t.meta.size(); ++i) {
    const MetaEvent& m = t.meta[i];
    const Lane& lane = t.lanes[m.lane];
    if (m.name == process_name || m.name == process_labels || m.name == process_sort_index) {
      Trace::ProcessInfo& p = t.processes[lane.pid];
      if (m.name == process_name && p.name == kNoString) p.name = m.str_arg;
      if (m.name == process_labels && p.labels == kNoString) p.labels = m.str_arg;
      if (m.name == process_sort_index && !p.sort_index && m.sort_index.ok()) {
        p.sort_index = m.sort_index.value;
        p.sort_meta = static_cast<int32_t>(i);
      }
    } else if (m.name == thread_name || m.name == thread_sort_index) {
      Trace::ThreadInfo& th = t.threads[m.lane];
      if (m.name == thread_name && th.name == kNoString) th.name = m.str_arg;
      if (m.name == thread_sort_index && !th.sort_index && m.sort_index.ok()) th.sort_index = m.sort_index.value;
    }
  }
}

void build_indexes(Trace& t) {
  read_metadata(t);  // interns the metadata names first, so role tables cover them
  classify_categories(t);

  std::set<Key> device_pids;
  for (const Slice& s : t.slices)
    if (t.is_device(s)) device_pids.insert(t.lanes[s.lane].pid);
  t.lane_kind.resize(t.lanes.size());
  for (size_t i = 0; i < t.lanes.size(); ++i) {
    const Key& pid = t.lanes[i].pid;
    t.lane_kind[i] = device_pids.count(pid) ? LaneKind::kDevice
                     : pid.is_string        ? LaneKind::kOther
                                            : LaneKind::kHost;
  }

  t.lane_slices.assign(t.lanes.size(), {});
  for (uint32_t i = 0; i < t.slices.size(); ++i) t.lane_slices[t.slices[i].lane].push_back(i);
  t.parent.assign(t.slices.size(), kNoSlice);
  std::vector<uint32_t> open;
  for (auto& v : t.lane_slices) {
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
    if (t.lane_kind[s.lane] != LaneKind::kHost) continue;
    CategoryRole r = t.role(s.cat);
    if (r == CategoryRole::kOp && s.external_id.ok()) t.op_by_external_id.emplace(s.external_id.value, i);
    if (r == CategoryRole::kRuntime && s.correlation.ok()) t.runtime_by_correlation.emplace(s.correlation.value, i);
  }
  for (uint32_t i = 0; i < t.slices.size(); ++i)
    if (t.is_device(t.slices[i])) t.device_slices.push_back(i);
  std::sort(t.device_slices.begin(), t.device_slices.end(), [&](uint32_t a, uint32_t b) {
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
  t.origin_ns = origin;
}

}  // namespace

// ---------------------------------------------------------------- queries

int32_t Trace::innermost_at(uint32_t lane, int64_t t, uint32_t roles) const {
  if (lane >= lane_slices.size()) return kNoSlice;
  const auto& v = lane_slices[lane];
  auto it = std::upper_bound(v.begin(), v.end(), t,
                             [&](int64_t value, uint32_t i) { return value < slices[i].ts; });
  if (it == v.begin()) return kNoSlice;
  auto matches = [&](uint32_t i) {
    const Slice& s = slices[i];
    return s.ts <= t && t <= s.end() && (roles & role_bit(role(s.cat)));
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

std::vector<uint32_t> Trace::stack_at(uint32_t lane, int64_t t) const {
  std::vector<uint32_t> out;
  int32_t c = innermost_at(lane, t, kAnyRole);
  for (; c != kNoSlice; c = parent[c]) {
    const Slice& s = slices[c];
    if (s.ts <= t && t <= s.end()) out.push_back(static_cast<uint32_t>(c));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

int32_t Trace::op_of_device_slice(const Slice& s, bool* via_correlation) const {
  if (via_correlation) *via_correlation = false;
  if (s.external_id.ok()) {
    auto it = op_by_external_id.find(s.external_id.value);
    if (it != op_by_external_id.end()) return static_cast<int32_t>(it->second);
  }
  if (!s.correlation.ok()) return kNoSlice;
  auto rt = runtime_by_correlation.find(s.correlation.value);
  if (rt == runtime_by_correlation.end()) return kNoSlice;
  if (via_correlation) *via_correlation = true;
  const Slice& launch = slices[rt->second];
  if (launch.external_id.ok()) {
    auto it = op_by_external_id.find(launch.external_id.value);
    if (it != op_by_external_id.end()) return static_cast<int32_t>(it->second);
  }
  return innermost_at(launch.lane, launch.ts, role_bit(CategoryRole::kOp));
}

// ---------------------------------------------------------------- entry points

std::unique_ptr<Trace> load_trace(JsonReader& reader, const LoadOptions& options) {
  auto t = std::make_unique<Trace>();
  t->options = options;
  try {
    Loader loader(*t, reader);
    loader.read_document();
  } catch (const JsonError& e) {
    t->parse_error = ParseError{e.offset(), e.reason()};
  }
  if (!t->parse_error && !t->has_trace_events)
    t->parse_error = ParseError{0, "the document has no \"traceEvents\" array"};
  t->bytes_read = reader.offset();
  build_indexes(*t);
  return t;
}

std::unique_ptr<Trace> load_trace_file(const std::string& path, const LoadOptions& options) {
  JsonReader reader(open_file_source(path), options.buffer_size);
  return load_trace(reader, options);
}

std::unique_ptr<Trace> load_trace_buffer(const void* data, size_t size, const LoadOptions& options) {
  JsonReader reader(open_memory_source(data, size), options.buffer_size);
  return load_trace(reader, options);
}

}  // namespace openreg::trace
