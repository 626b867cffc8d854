// Summary section: device time per model source line. A compiled kernel names
// the lines whose nodes it fused ("source_lines" args) and its time is split
// evenly among them; in an eager trace recorded with_stack, a device event
// belongs to the innermost user frame of the Python stack around the op that
// launched it. The rest is unattributed.
#include <algorithm>
#include <unordered_map>

#include "analysis.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace {

// Whether a path component of `path` starts with `prefix`.
bool hasComponentStartingWith(std::string_view path, std::string_view prefix) {
  for (size_t at = path.find(prefix); at != std::string_view::npos; at = path.find(prefix, at + 1))
    if (at == 0 || path[at - 1] == '/') return true;
  return false;
}

// Whether a directory named `dir` (with its trailing '/') appears in path.
bool hasDirectory(std::string_view path, std::string_view dir) { return hasComponentStartingWith(path, dir); }

bool isLibraryPath(std::string_view path) {
  // Inductor's generated wrappers (in its default cache folder, torchinductor_<user>, which a trace may name by
  // a relative path) are the compiled graph's own code: the line that matters is the model's call into it.
  return hasDirectory(path, "torch/") || hasDirectory(path, "site-packages/") || hasDirectory(path, "dist-packages/") ||
         path.find("/lib/python3.") != std::string_view::npos || hasComponentStartingWith(path, "torchinductor_");
}

class Attribution {
 public:
  explicit Attribution(SourceAttribution& out) : out_(out) {}

  void credit(const std::string& source, std::string_view function, int64_t ns, bool countEvent) {
    auto [it, inserted] = index_.emplace(source, out_.lines.size());
    if (inserted) {
      out_.lines.emplace_back();
      out_.lines.back().source = source;
    }
    SourceLineStat& line = out_.lines[it->second];
    if (line.function.empty()) line.function = function;
    line.deviceNs = saturatingAdd(line.deviceNs, ns);
    line.events += countEvent;
  }

 private:
  SourceAttribution& out_;
  std::unordered_map<std::string, size_t> index_;
};

// Splits the event's time evenly among its lines; the first dur % n lines get
// one ns more, so that the parts add up to the whole.
void creditCompiled(const Slice& sl, const SourceLines& src, const Trace& t, Attribution& a) {
  const auto n = static_cast<int64_t>(src.lines.size());
  for (int64_t k = 0; k < n; ++k) {
    const uint32_t line = src.lines[static_cast<size_t>(k)];
    const bool repeated = std::find(src.lines.begin(), src.lines.begin() + k, line) != src.lines.begin() + k;
    a.credit(std::string(t.str(line)), "", sl.dur / n + (k < sl.dur % n ? 1 : 0), !repeated);
  }
}

// The innermost user frame enclosing the op that launched the device event.
std::optional<std::pair<std::string, std::string>> stackSourceLine(const Trace& t, const Slice& sl) {
  const int32_t op = t.opOfDeviceSlice(sl);
  if (op == kNoSlice) return std::nullopt;
  for (int32_t p = t.parent[op]; p != kNoSlice; p = t.parent[p]) {
    const Slice& frame = t.slices[p];
    if (t.role(frame.cat) != CategoryRole::Python) continue;
    if (auto line = userSourceLine(t.str(frame.name))) return line;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::pair<std::string, std::string>> userSourceLine(std::string_view frame) {
  // "path(49): forward": the last "(" before "): " encloses the line number.
  const size_t close = frame.find("): ");
  if (close == std::string_view::npos) return std::nullopt;
  const size_t open = frame.rfind('(', close);
  if (open == std::string_view::npos || open == 0 || open + 1 == close) return std::nullopt;
  const std::string_view path = frame.substr(0, open), line = frame.substr(open + 1, close - open - 1);
  if (!std::all_of(line.begin(), line.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  if (startsWith(path, "<") || isLibraryPath(path)) return std::nullopt;
  return std::make_pair(std::string(path) + ":" + std::string(line), std::string(frame.substr(close + 3)));
}

namespace sections {

void computeSourceLines(const Trace& t, const SummaryOptions& /*options*/, Summary& s) {
  SourceAttribution& out = s.sourceLines;
  Attribution a(out);
  for (uint32_t i : t.deviceSlices) {
    const Slice& sl = t.slices[i];
    if (const SourceLines* src = t.sourceLinesOf(i)) {
      creditCompiled(sl, *src, t, a);
      ++out.compiledEvents;
      out.compiledNs = saturatingAdd(out.compiledNs, sl.dur);
    } else if (auto line = stackSourceLine(t, sl)) {
      a.credit(line->first, line->second, sl.dur, true);
      ++out.stackEvents;
      out.stackNs = saturatingAdd(out.stackNs, sl.dur);
    } else {
      ++out.unattributedEvents;
      out.unattributedNs = saturatingAdd(out.unattributedNs, sl.dur);
    }
  }
  std::sort(out.lines.begin(), out.lines.end(), [](const SourceLineStat& x, const SourceLineStat& y) {
    if (x.deviceNs != y.deviceNs) return x.deviceNs > y.deviceNs;
    return x.source < y.source;
  });
}

void writeSourceLines(JsonWriter& w, const Trace& /*t*/, const Summary& s, const SummaryOptions& /*options*/) {
  const SourceAttribution& a = s.sourceLines;
  auto part = [&](const char* key, uint64_t events, int64_t ns) {
    w.key(key).beginObject();
    w.field("device_events", events);
    w.field("device_ns", ns);
    w.field("share", ratio(ns, s.deviceTotalNs));
    w.endObject();
  };
  w.key("source_lines").beginObject();
  part("compiled", a.compiledEvents, a.compiledNs);
  part("python_stack", a.stackEvents, a.stackNs);
  part("unattributed", a.unattributedEvents, a.unattributedNs);
  w.key("lines").beginArray();
  for (const SourceLineStat& line : a.lines) {
    w.beginObject();
    w.field("source", line.source);
    w.key("function");
    if (line.function.empty())
      w.null();
    else
      w.value(line.function);
    w.field("device_ns", line.deviceNs);
    w.field("share", ratio(line.deviceNs, s.deviceTotalNs));
    w.field("kernels", line.events);
    w.endObject();
  }
  w.endArray();
  w.endObject();
}

}  // namespace sections

}  // namespace openreg::trace
