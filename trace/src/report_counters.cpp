// The report's counter tracks: each track's samples, for the page's step
// charts under the timeline (the summary has their min, max, last and mean).
#include <algorithm>

#include "report_internal.h"

namespace openreg::trace {

namespace {

// Positions in the track's points to draw: all of them, or at most `limit`
// buckets' highest (by the sum of their series, so that peaks stay) and the last.
std::vector<size_t> keptPoints(const Trace& t, const CounterTrack& track, size_t limit) {
  const size_t n = track.points.size();
  std::vector<size_t> keep;
  if (n <= limit) {
    for (size_t k = 0; k < n; ++k) keep.push_back(k);
    return keep;
  }
  auto height = [&](size_t k) {
    const CounterPoint& c = t.counters[track.points[k]];
    double sum = 0;
    for (const NumArg& a : t.argsOf(c.firstArg, c.argCount)) sum += a.value;
    return sum;
  };
  for (size_t b = 0; b < limit; ++b) {
    const size_t lo = b * n / limit, hi = (b + 1) * n / limit;
    size_t best = lo;
    for (size_t k = lo + 1; k < hi; ++k)
      if (height(k) > height(best)) best = k;
    keep.push_back(best);
  }
  if (keep.back() != n - 1) keep.push_back(n - 1);
  return keep;
}

// One array per series, aligned with t_ns: null where a sample lacks the series.
void writeSeriesValues(JsonWriter& w, const Trace& t, const CounterTrack& track, const std::vector<size_t>& keep) {
  w.key("values").beginArray();
  for (const CounterSeriesStat& series : track.series) {
    w.beginArray();
    for (size_t k : keep) {
      const CounterPoint& c = t.counters[track.points[k]];
      const auto args = t.argsOf(c.firstArg, c.argCount);
      auto it = std::find_if(args.begin(), args.end(), [&](const NumArg& a) { return a.key == series.name; });
      it == args.end() ? w.null() : w.value(it->value);
    }
    w.endArray();
  }
  w.endArray();
}

}  // namespace

void writeCounterCurves(JsonWriter& w, const Trace& t, const ReportOptions& o) {
  w.key("counters").beginArray();
  for (const CounterTrack& track : computeCounterTracks(t)) {
    const std::vector<size_t> keep = keptPoints(t, track, std::max<size_t>(2, static_cast<size_t>(o.counterPoints)));
    w.beginObject().key("device");
    writeKey(w, t, track.device);
    w.key("name");
    writeName(w, t, track.name);
    w.key("category");
    writeName(w, t, track.cat);
    w.field("samples", static_cast<uint64_t>(track.points.size()));
    w.key("series").beginArray();
    for (const CounterSeriesStat& series : track.series) w.value(t.str(series.name));
    w.endArray().key("t_ns").beginArray();
    for (size_t k : keep) w.value(t.counters[track.points[k]].ts - t.originNs);
    w.endArray();
    writeSeriesValues(w, t, track, keep);
    w.endObject();
  }
  w.endArray();
}

}  // namespace openreg::trace
