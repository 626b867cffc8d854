// Counter tracks (ph "C"): read from any trace, summarised per series
// (summary_counters.cpp) and drawn by the report (report_counters.cpp).
#include <gtest/gtest.h>

#include "analysis.h"
#include "report_internal.h"
#include "trace_builder.h"

namespace openreg::trace {
namespace {

using testing::TraceBuilder;

constexpr int64_t kUs = 1'000;

// openreg's four counters on device 0, as Kineto's MTIA_COUNTERS writes them.
TraceBuilder openregCounters() {
  TraceBuilder b;
  b.lanes(0, {7}).kernel("gemm", 0, 40 * kUs, 0, 7, 1, 1);
  b.counter("memory_allocated", 0, 0, R"("bytes":100)");
  b.counter("memory_allocated", 40 * kUs, 0, R"("bytes":200)");  // out of order in the file
  b.counter("memory_allocated", 10 * kUs, 0, R"("bytes":300)");
  b.counter("queued_tasks", 0, 0, R"("stream 7":1,"stream 13":0)");
  b.counter("queued_tasks", 10 * kUs, 0, R"("stream 7":2)");
  b.counter("queued_tasks", 20 * kUs, 0, R"("stream 7":0,"stream 13":4)");
  b.counter("copy_bandwidth", 5 * kUs, 0, R"("bytes_per_s":1.5e9)");
  return b;
}

const CounterTrack& trackNamed(const Trace& t, const std::vector<CounterTrack>& tracks, std::string_view name) {
  for (const CounterTrack& c : tracks)
    if (t.str(c.name) == name) return c;
  throw std::out_of_range(std::string(name));
}

TEST(Counters, MinMaxLastAndTheTimeWeightedMean) {
  auto t = openregCounters().load();
  const std::vector<CounterTrack> tracks = computeCounterTracks(*t);
  ASSERT_EQ(tracks.size(), 3u);
  EXPECT_EQ(t->str(tracks[0].name), "copy_bandwidth");  // by device, then name
  const CounterTrack& mem = trackNamed(*t, tracks, "memory_allocated");
  EXPECT_EQ(t->str(mem.cat), "mtia_counters");
  ASSERT_EQ(mem.series.size(), 1u);
  const CounterSeriesStat& bytes = mem.series[0];
  EXPECT_EQ(bytes.samples, 3u);
  EXPECT_EQ(bytes.min, 100);
  EXPECT_EQ(bytes.max, 300);
  EXPECT_EQ(bytes.last, 200);                           // the latest sample, not the file's last
  EXPECT_EQ(bytes.mean, (100 * 10 + 300 * 30) / 40.0);  // 100 held 10 us, 300 held 30 us: 250
}

TEST(Counters, EachSeriesHoldsUntilItsOwnNextSample) {
  auto t = openregCounters().load();
  const std::vector<CounterTrack> tracks = computeCounterTracks(*t);
  const CounterTrack& q = trackNamed(*t, tracks, "queued_tasks");
  ASSERT_EQ(q.series.size(), 2u);
  EXPECT_EQ(t->str(q.series[0].name), "stream 7");
  EXPECT_EQ(q.series[0].samples, 3u);
  EXPECT_EQ(q.series[0].mean, (1 * 10 + 2 * 10) / 20.0);
  EXPECT_EQ(t->str(q.series[1].name), "stream 13");
  EXPECT_EQ(q.series[1].samples, 2u);
  EXPECT_EQ(q.series[1].mean, 0.0);  // 0 held from 0 to 20 us; the 4 only then
  EXPECT_EQ(q.series[1].max, 4);
  const CounterTrack& bw = trackNamed(*t, tracks, "copy_bandwidth");
  EXPECT_EQ(bw.series.at(0).last, 1.5e9);
  EXPECT_EQ(bw.series[0].mean, std::nullopt);  // one sample holds for no measurable time
}

TEST(Counters, AnySeriesNameAndAnyKeyOrder) {
  TraceBuilder b;
  // "device" and "stream" are args other events use; a counter's are series.
  b.raw(R"({"ph":"C","name":"pm","pid":"GPU 0","ts":2.000,"args":{"device":3,"stream":4.5,"label":"x"}})");
  // "ph" after "args": the series are still read (the reader keeps numbers until it knows the event).
  b.raw(R"({"args":{"sm_active":0.25},"name":"pm","ph":"C","pid":"GPU 0","ts":1.000})");
  b.raw(R"({"ph":"C","name":"broken","pid":0})");  // no ts: malformed
  auto t = b.load();
  const std::vector<CounterTrack> tracks = computeCounterTracks(*t);
  ASSERT_EQ(tracks.size(), 1u);
  EXPECT_TRUE(tracks[0].device.isString);
  ASSERT_EQ(tracks[0].series.size(), 3u);
  EXPECT_EQ(t->str(tracks[0].series[0].name), "device");
  EXPECT_EQ(tracks[0].series[0].last, 3);
  EXPECT_EQ(t->str(tracks[0].series[1].name), "stream");
  EXPECT_EQ(tracks[0].series[1].last, 4.5);
  EXPECT_EQ(t->str(tracks[0].series[2].name), "sm_active");
  EXPECT_EQ(tracks[0].series[2].firstTs, 1'000);
  EXPECT_EQ(t->malformedCount, 1u);
}

TEST(Counters, SummaryJsonSaysWhenThereAreNone) {
  auto t = TraceBuilder().lanes(0, {7}).kernel("gemm", 0, 1'000, 0, 7, 1, 1).load();
  const std::string json = summaryToJson(*t, computeSummary(*t, {}), {});
  EXPECT_NE(json.find(R"("counters":{"tracks":[],"note":"no counter tracks: the trace has no counter events)"),
            std::string::npos);
  auto c = openregCounters().load();
  const std::string withTracks = summaryToJson(*c, computeSummary(*c, {}), {});
  EXPECT_NE(withTracks.find(R"({"device":0,"name":"memory_allocated","category":"mtia_counters","samples":3,)"
                            R"("first_ns":0,"last_ns":40000,"series":[{"name":"bytes","samples":3,"min":100,)"
                            R"("max":300,"last":200,"mean":250,"first_ns":0,"last_ns":40000}]})"),
            std::string::npos)
      << withTracks.substr(withTracks.find("\"counters\""));
}

TEST(Counters, ReportCurvesKeepPeaksAndTheLastSample) {
  TraceBuilder b;
  const int values[] = {5, 1, 9, 2, 2, 3, 8, 1, 1, 4};
  for (int k = 0; k < 10; ++k) b.counter("queued_tasks", k * kUs, 0, R"("stream 7":)" + std::to_string(values[k]));
  auto t = b.load();
  ReportOptions o;
  o.counterPoints = 4;  // buckets of samples [0,2) [2,5) [5,7) [7,10): each keeps its highest
  JsonWriter w;
  w.beginObject();
  writeCounterCurves(w, *t, o);
  w.endObject();
  EXPECT_EQ(w.str(), R"({"counters":[{"device":0,"name":"queued_tasks","category":"mtia_counters","samples":10,)"
                     R"("series":["stream 7"],"t_ns":[0,2000,6000,9000],"values":[[5,9,8,4]]}]})");
}

TEST(Counters, ReportCurvesMarkAMissingSeries) {
  auto t = openregCounters().load();
  JsonWriter w;
  w.beginObject();
  writeCounterCurves(w, *t, ReportOptions{});
  w.endObject();
  EXPECT_NE(w.str().find(R"("series":["stream 7","stream 13"],"t_ns":[0,10000,20000],"values":[[1,2,0],[0,null,4]])"),
            std::string::npos)
      << w.str();
}

}  // namespace
}  // namespace openreg::trace
