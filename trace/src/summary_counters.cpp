// Summary section: counter tracks (ph "C", anyone's: openreg's, MTIA's,
// Kineto's PM sampling). Per track and series, min, max, last value and the
// mean weighted by how long each value held.
#include <algorithm>
#include <map>

#include "analysis.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace {

// One series of a track: its samples are the track's points that carry it.
CounterSeriesStat seriesStat(const Trace& t, const CounterTrack& track, uint32_t name) {
  CounterSeriesStat s;
  s.name = name;
  double weighted = 0;
  int64_t prevTs = 0;
  for (uint32_t i : track.points) {
    const CounterPoint& c = t.counters[i];
    for (const NumArg& a : t.argsOf(c.firstArg, c.argCount)) {
      if (a.key != name) continue;
      if (s.samples == 0) {
        s.min = s.max = a.value;
        s.firstTs = c.ts;
      } else {
        weighted += s.last * static_cast<double>(c.ts - prevTs);  // the previous value held until now
      }
      s.min = std::min(s.min, a.value);
      s.max = std::max(s.max, a.value);
      s.last = a.value;
      s.lastTs = prevTs = c.ts;
      ++s.samples;
    }
  }
  if (s.lastTs > s.firstTs) s.mean = weighted / static_cast<double>(s.lastTs - s.firstTs);
  return s;
}

}  // namespace

std::vector<CounterTrack> computeCounterTracks(const Trace& t) {
  std::map<std::pair<Key, std::string_view>, CounterTrack> tracks;
  for (uint32_t i = 0; i < t.counters.size(); ++i) {
    const CounterPoint& c = t.counters[i];
    CounterTrack& track = tracks[{c.pid, t.str(c.name)}];
    if (track.points.empty()) {
      track.device = c.pid;
      track.name = c.name;
      track.cat = c.cat;
    }
    track.points.push_back(i);
  }
  std::vector<CounterTrack> out;
  for (auto& [key, track] : tracks) {
    std::vector<uint32_t> names;  // in the order the series first appear
    for (uint32_t i : track.points)
      for (const NumArg& a : t.argsOf(t.counters[i].firstArg, t.counters[i].argCount))
        if (std::find(names.begin(), names.end(), a.key) == names.end()) names.push_back(a.key);
    std::stable_sort(track.points.begin(), track.points.end(),
                     [&](uint32_t a, uint32_t b) { return t.counters[a].ts < t.counters[b].ts; });
    for (uint32_t name : names) track.series.push_back(seriesStat(t, track, name));
    out.push_back(std::move(track));
  }
  return out;
}

namespace sections {

void computeCounters(const Trace& t, const SummaryOptions& /*options*/, Summary& s) {
  s.counters = computeCounterTracks(t);
}

void writeCounters(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& /*options*/) {
  w.key("counters").beginObject().key("tracks").beginArray();
  for (const CounterTrack& track : s.counters) {
    w.beginObject().key("device");
    writeKey(w, t, track.device);
    w.key("name");
    writeName(w, t, track.name);
    w.key("category");
    writeName(w, t, track.cat);
    w.field("samples", static_cast<uint64_t>(track.points.size()));
    w.field("first_ns", t.counters[track.points.front()].ts - t.originNs);
    w.field("last_ns", t.counters[track.points.back()].ts - t.originNs);
    w.key("series").beginArray();
    for (const CounterSeriesStat& c : track.series) {
      w.beginObject().field("name", t.str(c.name)).field("samples", c.samples);
      w.field("min", c.min).field("max", c.max).field("last", c.last).key("mean");
      c.mean ? w.value(*c.mean) : w.null();
      w.field("first_ns", c.firstTs - t.originNs).field("last_ns", c.lastTs - t.originNs).endObject();
    }
    w.endArray().endObject();
  }
  w.endArray().key("note");
  if (s.counters.empty())
    w.value(
        "no counter tracks: the trace has no counter events (\"ph\": \"C\", as Kineto writes MTIA's counters, "
        "its PM sampling and openreg's)");
  else
    w.null();
  w.endObject();
}

}  // namespace sections

}  // namespace openreg::trace
