// The roofline (summary_roofline.cpp): per-kernel metric ranges (cat
// cuda_profiler_range) read, timed, summed per kernel name and set against
// the device's peaks; and kept out of every analysis of device work.
#include <gtest/gtest.h>

#include "analysis.h"
#include "options.h"
#include "trace_builder.h"

namespace openreg::trace {
namespace {

using testing::TraceBuilder;

constexpr int64_t kMs = 1'000'000;
constexpr double kGemmFlops = 2.0 * 64 * 64 * 64;                              // a 64x64x64 matmul: 524,288
constexpr double kGemmRead = 2.0 * 64 * 64 * 4, kGemmWritten = 64.0 * 64 * 4;  // f32 A and B in, C out
constexpr double kAddFlops = 64.0 * 64, kAddRead = 2.0 * 64 * 64 * 4, kAddWritten = 64.0 * 64 * 4;
constexpr const char* kPeaks = R"([{"id":0,"name":"openreg 0","peakFlopsPerSecond":1e12,"peakBytesPerSecond":2e11}])";

std::string gemmArgs(int64_t correlation) {
  return R"("flops":524288,"bytes_read":32768,"bytes_written":16384,"busy_ns":900000,"flops_per_s":524288000,)"
         R"("bytes_per_s":49152000,"correlation":)" +
         std::to_string(correlation);
}

// Device 0, stream 7: two gemms of 1 ms each (at 1 and 3 ms) and an add of
// 0.5 ms (at 5 ms), each launched by its op; `metrics` adds the per-kernel
// ranges openreg writes, nested exactly under each kernel.
TraceBuilder kernels(bool metrics) {
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 10 * kMs).deviceProperties(kPeaks);
  b.op("ProfilerStep#1", 0, 10 * kMs, 1, "user_annotation");
  b.launch("aten::mm", "gemm", 100'000, 1 * kMs, 1 * kMs, 0, 7, 101, 2);
  b.launch("aten::mm", "gemm", 200'000, 3 * kMs, 1 * kMs, 0, 7, 102, 3);
  b.launch("aten::add", "add", 300'000, 5 * kMs, kMs / 2, 0, 7, 103, 4);
  if (metrics) {
    b.metrics("gemm", 1 * kMs, 1 * kMs, 0, 7, gemmArgs(101)).metrics("gemm", 3 * kMs, 1 * kMs, 0, 7, gemmArgs(102));
    b.metrics("add", 5 * kMs, kMs / 2, 0, 7,
              R"("flops":4096,"bytes_read":32768,"bytes_written":16384,"correlation":103)");
  }
  return b;
}

const RooflineRow* rowNamed(const Trace& t, const RooflineDevice& d, std::string_view name) {
  for (const RooflineRow& r : d.rows)
    if (t.str(r.name) == name) return &r;
  return nullptr;
}

TEST(Roofline, GemmAndAddAgainstTheDeclaredPeaks) {
  auto t = kernels(true).load();
  const Roofline r = computeRoofline(*t, {});
  ASSERT_EQ(r.devices.size(), 1u);
  const RooflineDevice& d = r.devices[0];
  EXPECT_EQ(d.peakFlops, 1e12);
  EXPECT_EQ(d.peakBytesPerS, 2e11);
  EXPECT_STREQ(d.peakFlopsSource, "deviceProperties");
  EXPECT_EQ(d.ridge(), 5.0);
  ASSERT_EQ(d.rows.size(), 2u);
  EXPECT_EQ(t->str(d.rows[0].name), "gemm");  // most time first
  const RooflineRow& gemm = d.rows[0];
  EXPECT_EQ(gemm.count, 2u);
  EXPECT_EQ(gemm.timeNs, 2 * kMs);
  EXPECT_EQ(gemm.flops, 2 * kGemmFlops);
  EXPECT_EQ(gemm.bytes(), 2 * (kGemmRead + kGemmWritten));
  EXPECT_EQ(gemm.busyNs, 1'800'000.0);
  const RooflineRates g = rooflineRates(gemm, d);
  EXPECT_DOUBLE_EQ(*g.intensity, kGemmFlops / (kGemmRead + kGemmWritten));  // 10.67 FLOP/B
  EXPECT_DOUBLE_EQ(*g.flopsPerS, 524'288'000.0);                            // 2^19 FLOPs per ms
  EXPECT_DOUBLE_EQ(*g.bytesPerS, 49'152'000.0);
  EXPECT_DOUBLE_EQ(*g.peakFlopsShare, 524'288'000.0 / 1e12);
  EXPECT_DOUBLE_EQ(*g.attainableFlopsPerS, 1e12);  // above the ridge: the compute roof
  EXPECT_STREQ(g.bound, "compute");
  const RooflineRates a = rooflineRates(*rowNamed(*t, d, "add"), d);
  EXPECT_DOUBLE_EQ(*a.intensity, kAddFlops / (kAddRead + kAddWritten));  // 1/12 FLOP/B
  EXPECT_DOUBLE_EQ(*a.flopsPerS, 4096 / 0.5e-3);
  EXPECT_DOUBLE_EQ(*a.attainableFlopsPerS, 2e11 / 12);  // below the ridge: the bandwidth roof
  EXPECT_STREQ(a.bound, "memory");
  EXPECT_EQ(d.total.flops, 2 * kGemmFlops + kAddFlops);
  EXPECT_EQ(d.total.timeNs, 2 * kMs + kMs / 2);
  EXPECT_TRUE(d.notes.empty()) << d.notes[0];
}

TEST(Roofline, OptionsOverrideEachPeak) {
  auto t = kernels(true).load();
  SummaryOptions o = parseSummaryOptions(R"({"peak_flops": 4e12})");
  const RooflineDevice d = computeRoofline(*t, o).devices.at(0);
  EXPECT_EQ(d.peakFlops, 4e12);
  EXPECT_STREQ(d.peakFlopsSource, "options");
  EXPECT_EQ(d.peakBytesPerS, 2e11);
  EXPECT_STREQ(d.peakBytesSource, "deviceProperties");
  EXPECT_THROW(parseSummaryOptions(R"({"peak_bytes_per_s": -1})"), std::invalid_argument);
  EXPECT_THROW(parseSummaryOptions(R"({"peak_flops": "fast"})"), std::invalid_argument);
}

TEST(Roofline, MetricRangesAreNoDeviceWork) {
  auto without = kernels(false).load();
  auto with = kernels(true).counter("queued_tasks", 0, 0, R"("stream 7":3)").load();
  const Summary a = computeSummary(*without, {}), b = computeSummary(*with, {});
  EXPECT_EQ(b.deviceTotalNs, 2 * kMs + kMs / 2);
  EXPECT_EQ(a.deviceTotalNs, b.deviceTotalNs);
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (size_t k = 0; k < a.kernels.size(); ++k) EXPECT_EQ(a.kernels[k].count, b.kernels[k].count);
  ASSERT_EQ(b.streams.size(), 1u);
  EXPECT_EQ(a.streams[0].busyNs, b.streams[0].busyNs);
  EXPECT_EQ(a.streams[0].events, b.streams[0].events);
  EXPECT_EQ(a.gaps.size(), b.gaps.size());
  EXPECT_EQ(a.launches.total.launches, b.launches.total.launches);
  EXPECT_EQ(a.idle[0].totalNs(), b.idle[0].totalNs());
  EXPECT_EQ(a.links.deviceEvents, b.links.deviceEvents);
  EXPECT_EQ(with->slices.size(), without->slices.size());  // the ranges are kept beside them
  EXPECT_EQ(with->metricRanges.size(), 3u);
  // Not one check finds more on the trace with metrics (strict: every finding counts).
  const CheckReport ca = runChecks(*without, {.strict = true}), cb = runChecks(*with, {.strict = true});
  ASSERT_EQ(ca.results.size(), cb.results.size());
  for (size_t k = 0; k < ca.results.size(); ++k) {
    EXPECT_EQ(ca.results[k].violations, cb.results[k].violations) << ca.results[k].name;
    EXPECT_EQ(ca.results[k].warnings, cb.results[k].warnings) << ca.results[k].name;
  }
}

// Per-kernel measurement off: one range per device, "openreg kernels", from
// the first kernel's start to the last's end, with the totals. Its time is
// the kernels' (20 us), not its span (50 us).
TEST(Roofline, DeviceTotalIsTimedByTheKernelsInside) {
  TraceBuilder b;
  b.lanes(0, {7, 8}).deviceProperties(kPeaks);
  b.kernel("gemm", 10'000, 10'000, 0, 7, 1, 1).kernel("add", 50'000, 10'000, 0, 8, 2, 2);
  b.kernel("Memcpy HtoD", 30'000, 5'000, 0, 8, 3, 3, "gpu_memcpy");
  b.metrics("openreg kernels", 10'000, 50'000, 0, 0,
            R"("flops":2000,"bytes_read":600,"bytes_written":400,"kernels":2)");
  auto t = b.load();
  const RooflineDevice d = computeRoofline(*t, {}).devices.at(0);
  ASSERT_EQ(d.rows.size(), 1u);
  EXPECT_TRUE(d.rows[0].deviceTotal);
  EXPECT_EQ(d.rows[0].kernels, 2);
  EXPECT_EQ(d.rows[0].timeBases, 1u << static_cast<unsigned>(RangeTime::Kernels));
  EXPECT_EQ(d.rows[0].timeNs, 20'000);  // the copy inside is no kernel
  EXPECT_DOUBLE_EQ(*rooflineRates(d.rows[0], d).flopsPerS, 2000 / 20e-6);
  EXPECT_EQ(d.total.flops, 2000.0);  // no per-kernel rows: the device total is the total
}

TEST(Roofline, JoinsByCorrelationElseTakesTheRangesOwnTime) {
  TraceBuilder b;
  b.lanes(0, {7}).deviceProperties(kPeaks);
  b.kernel("gemm", 10'000, 4'000, 0, 7, 55, 1);
  // Its correlation finds the kernel though its ts is off by a rounding.
  b.metrics("gemm", 10'001, 3'999, 0, 7, R"("flops":8000,"correlation":55)");
  // Nothing to join: its own duration.
  b.metrics("user range", 100'000, 2'000, 0, 3, R"("flops":1000)");
  auto t = b.load();
  const std::vector<RangeMetrics> m = readRangeMetrics(*t);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].time, RangeTime::Kernel);
  EXPECT_EQ(m[0].timeNs, 4'000);
  EXPECT_EQ(m[1].time, RangeTime::Range);
  EXPECT_EQ(m[1].timeNs, 2'000);
  const RooflineDevice d = computeRoofline(*t, {}).devices.at(0);
  EXPECT_EQ(d.total.timeBases,
            (1u << static_cast<unsigned>(RangeTime::Kernel)) | (1u << static_cast<unsigned>(RangeTime::Range)));
  ASSERT_FALSE(d.notes.empty());
  EXPECT_NE(d.notes[0].find("bytes_read and bytes_written"), std::string::npos) << d.notes[0];
  EXPECT_NE(d.notes.back().find("1 range of device 0 matched no kernel event"), std::string::npos) << d.notes.back();
}

// CUPTI's range profiler: SASS instruction counters, no kernel events, and
// ranges that split the profiling span evenly.
TraceBuilder cuptiRanges() {
  TraceBuilder b;
  b.deviceProperties(R"([{"id":0,"name":"NVIDIA A100"}])");
  const std::string sass = "smsp__sass_thread_inst_executed_op_";
  for (int k = 0; k < 3; ++k)
    b.metrics(k == 1 ? "sgemm" : "elementwise", 1'000'000 + k * 121'431'000, 121'431'000, 0, 0,
              "\"" + sass + "ffma_pred_on.sum\":100,\"" + sass + "fmul_pred_on.sum\":10,\"" + sass +
                  "hfma_pred_on.sum\":5,\"" + sass + "dadd_pred_on.sum\":1,\"" + sass + "hadd_pred_on.sum\":0");
  return b;
}

TEST(Roofline, CuptiSassCountersGiveFlopsButNoTime) {
  auto t = cuptiRanges().load();
  const Roofline r = computeRoofline(*t, {});
  const RooflineDevice& d = r.devices.at(0);
  EXPECT_EQ(d.sassRanges, 3u);
  const RooflineRow* e = rowNamed(*t, d, "elementwise");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->flops, 2 * (2 * 100 + 10 + 2 * 5 + 1));  // FMAs twice: 221 per range
  EXPECT_EQ(e->timeNs, std::nullopt);
  EXPECT_EQ(e->timeBases, 1u << static_cast<unsigned>(RangeTime::CuptiSplit));
  const RooflineRates rates = rooflineRates(*e, d);
  EXPECT_FALSE(rates.flopsPerS || rates.intensity || rates.bound);
  ASSERT_EQ(d.notes.size(), 4u);
  EXPECT_NE(d.notes[0].find("arithmetic intensity unknown"), std::string::npos);
  EXPECT_NE(d.notes[0].find("dram__bytes_read.sum"), std::string::npos);
  EXPECT_NE(d.notes[1].find("splits its profiling span evenly among its ranges (here 3 of 121.431 ms)"),
            std::string::npos)
      << d.notes[1];
  EXPECT_NE(d.notes[2].find("device 0's deviceProperties entry has no peakFlopsPerSecond; give one with --peak-flops"),
            std::string::npos)
      << d.notes[2];
  EXPECT_NE(d.notes[3].find("--peak-bytes-per-s"), std::string::npos);
}

TEST(Roofline, DramBytesCountWhenOpenregsAreAbsent) {
  TraceBuilder b;
  b.metrics("k", 0, 1'000, 1, 0, R"("flops":100,"dram__bytes_read.sum":40,"dram__bytes_write.sum":10)");
  auto t = b.load();
  const RooflineDevice d = computeRoofline(*t, {}).devices.at(0);
  EXPECT_EQ(d.rows.at(0).bytes(), 50.0);
  EXPECT_EQ(rooflineRates(d.rows[0], d).intensity, 2.0);
  EXPECT_EQ(rooflineRates(d.rows[0], d).bound, nullptr);  // no peaks: no ridge to compare with
  ASSERT_EQ(d.notes.size(), 3u);
  EXPECT_NE(d.notes[1].find("the trace's deviceProperties has no entry for device 1"), std::string::npos);
}

TEST(Roofline, APartlyMeasuredNameHasNoTotal) {
  TraceBuilder b;
  b.metrics("k", 0, 1'000, 0, 0, R"("flops":100,"bytes_read":1,"bytes_written":1)");
  b.metrics("k", 5'000, 1'000, 0, 0, R"("bytes_read":1,"bytes_written":1)");
  auto t = b.load();
  const RooflineDevice d = computeRoofline(*t, {}).devices.at(0);
  EXPECT_EQ(d.rows.at(0).flops, std::nullopt);  // 100 would pass for both ranges' FLOPs
  EXPECT_EQ(d.rows[0].bytes(), 4.0);
  EXPECT_NE(d.notes.at(0).find("FLOPs unknown for 1 of device 0's 2 ranges"), std::string::npos) << d.notes[0];
}

TEST(Roofline, NoRangesSaySo) {
  auto t = kernels(false).load();
  const Roofline r = computeRoofline(*t, {});
  EXPECT_TRUE(r.devices.empty());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("no complete events of category cuda_profiler_range"), std::string::npos);
}

TEST(Roofline, DevicePropertiesAreRead) {
  auto t = TraceBuilder()
               .deviceProperties(R"([{"id":2,"name":"x","peakFlopsPerSecond":1.5e14,"peakBytesPerSecond":0,)"
                                 R"("nested":{"a":[1,2]}},{"name":"no id"},7])")
               .load();
  ASSERT_EQ(t->deviceProperties.size(), 1u);
  EXPECT_EQ(t->deviceProperties[0].id, 2);
  EXPECT_EQ(t->str(t->deviceProperties[0].name), "x");
  EXPECT_EQ(t->deviceProperties[0].peakFlops, 1.5e14);
  EXPECT_EQ(t->deviceProperties[0].peakBytesPerS, std::nullopt);  // 0 declares nothing
}

TEST(Roofline, JsonCarriesTheRowsAndNotes) {
  auto t = kernels(true).load();
  const std::string json = summaryToJson(*t, computeSummary(*t, {}), {});
  EXPECT_NE(json.find(R"("peak_flops_per_s":1e+12,"peak_flops_source":"deviceProperties")"), std::string::npos);
  EXPECT_NE(json.find(R"("ridge_flops_per_byte":5,"ranges":3,"flops_from":"flops")"), std::string::npos);
  EXPECT_NE(json.find(R"({"name":"gemm","device_total":false,"count":2,"kernels":2,"time_basis":"kernel",)"
                      R"("time_ns":2000000,"flops":1048576,)"),
            std::string::npos)
      << json.substr(json.find("\"roofline\""), 600);
  EXPECT_NE(json.find(R"("bound":"memory"})"), std::string::npos);
}

}  // namespace
}  // namespace openreg::trace
