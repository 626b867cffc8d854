#include "report_data.h"

#include <cmath>
#include <stdexcept>

#include "json_reader.h"
#include "report_internal.h"

namespace openreg::trace {

ReportOptions parseReportOptions(std::string_view json) {
  ReportOptions o;
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) return o;
  try {
    JsonReader r(openMemorySource(json.data(), json.size()));
    if (r.peekKind() != JsonKind::Object) throw std::invalid_argument("options must be a JSON object");
    r.beginObject();
    std::string_view key;
    while (r.nextKey(key)) {
      const std::string k(key);
      if (k == "events" || k == "deflate") {
        const JsonKind kind = r.peekKind();
        if (kind != JsonKind::True && kind != JsonKind::False)
          throw std::invalid_argument("option \"" + k + "\" must be true or false");
        (k == "events" ? o.events : o.deflate) = r.readBool();
        continue;
      }
      if (k == "peak_flops" || k == "peak_bytes_per_s") {
        const double v = r.peekKind() == JsonKind::Number ? parseDouble(r.readNumber()) : 0.0;
        if (!(v > 0) || !std::isfinite(v))
          throw std::invalid_argument("option \"" + k + "\" must be a positive number");
        (k == "peak_flops" ? o.peakFlops : o.peakBytesPerS) = v;
        continue;
      }
      int* target = k == "top"              ? &o.top
                    : k == "gaps"           ? &o.gaps
                    : k == "memory_points"  ? &o.memoryPoints
                    : k == "counter_points" ? &o.counterPoints
                    : k == "live_at_peak"   ? &o.liveAtPeak
                    : k == "max_table_rows" ? &o.maxTableRows
                                            : nullptr;
      if (!target) throw std::invalid_argument("unknown option \"" + k + "\"");
      int64_t v = 0;
      if (r.peekKind() != JsonKind::Number || !parseInt64(r.readNumber(), v) || v < 0 || v > 1000000000)
        throw std::invalid_argument("option \"" + k + "\" must be a non-negative integer");
      *target = static_cast<int>(v);
    }
  } catch (const JsonError& e) {
    throw std::invalid_argument(std::string("options: ") + e.what());
  }
  return o;
}

std::string reportJson(const Trace& t, const std::string& path, const ReportOptions& o) {
  SummaryOptions so;
  so.top = o.top;
  so.gaps = o.gaps;
  so.peakFlops = o.peakFlops;
  so.peakBytesPerS = o.peakBytesPerS;
  std::string summary = summaryToJson(t, computeSummary(t, so), so);
  const EventArgs args = readEventArgs(path, t.eventCount);
  JsonWriter w;
  w.beginObject();
  writeSteps(w, t);
  writeOpTable(w, t, args, o);
  writeKernelTable(w, t, o);
  writeMemoryCurves(w, t, args, o);
  writeCounterCurves(w, t, o);
  writeTimelineEvents(w, t, args, o);
  w.endObject();
  std::string out;
  out.reserve(summary.size() + w.str().size() + 32);
  out += "{\"summary\":";
  out += summary;
  out += ",\"report\":";
  out += w.str();
  out += '}';
  return out;
}

}  // namespace openreg::trace
