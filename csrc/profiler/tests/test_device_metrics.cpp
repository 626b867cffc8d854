// What a user asks of the device's counters, and how the records become a
// kernel's args and counter tracks.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "device_metrics.h"
#include "openreg/activity.h"
#include "trace_builder.h"

namespace openreg::profiler {
namespace {

// Collects args as text, in order.
class CollectArgs final : public ArgWriter {
 public:
  std::vector<std::pair<std::string, std::string>> args;
  void integer(const char* key, int64_t value) override { args.emplace_back(key, std::to_string(value)); }
  void unsignedInteger(const char* key, uint64_t value) override { args.emplace_back(key, std::to_string(value)); }
  void text(const char* key, const char* value) override { args.emplace_back(key, value); }
  void boolean(const char* key, bool value) override { args.emplace_back(key, value ? "true" : "false"); }
  void decimal(const char* key, double value, int decimals) override {
    args.emplace_back(key, decimalText(value, decimals));
  }
  void dims(const char* key, const uint32_t (&value)[3]) override { args.emplace_back(key, dimsText(value)); }
  void members(const char*) override {}
};

MetricsRequest parse(std::string_view metrics, std::optional<std::string_view> perKernel = "true") {
  std::string error;
  auto request = parseMetricsRequest(metrics, perKernel, &error);
  EXPECT_TRUE(request.has_value()) << error;
  return request.value_or(MetricsRequest{});
}

TEST(DeviceMetrics, ARequestNamesKernelMetricsAndCounters) {
  const MetricsRequest r = parse(" flops,bytes_read , memory_allocated,,queued_tasks");
  EXPECT_TRUE(r.wants(KernelMetric::Flops));
  EXPECT_TRUE(r.wants(KernelMetric::BytesRead));
  EXPECT_FALSE(r.wants(KernelMetric::BusyNs));
  EXPECT_TRUE(r.wants(CounterMetric::MemoryAllocated));
  EXPECT_TRUE(r.wants(CounterMetric::QueuedTasks));
  EXPECT_FALSE(r.wants(CounterMetric::CopyBandwidth));
  EXPECT_TRUE(r.perKernel);
  EXPECT_FALSE(parse("flops", std::nullopt).perKernel) << "torch's default: one range for the whole trace";
  EXPECT_FALSE(parse("flops", "false").perKernel);
  EXPECT_TRUE(parse("").empty()) << "asking nothing";
}

TEST(DeviceMetrics, AnUnknownNameIsRefusedNamingEveryKnownOne) {
  std::string error;
  EXPECT_FALSE(parseMetricsRequest("flops,dram__bytes_read.sum,sm_efficiency", "true", &error).has_value());
  EXPECT_NE(error.find("'dram__bytes_read.sum', 'sm_efficiency'"), std::string::npos) << error;
  for (const char* known : {"flops", "bytes_read", "bytes_written", "busy_ns", "flops_per_s", "bytes_per_s",
                            "memory_allocated", "memory_reserved", "queued_tasks", "copy_bandwidth"}) {
    EXPECT_NE(error.find(known), std::string::npos) << known;
  }
}

TEST(DeviceMetrics, AKernelsArgsAreWhatItsLauncherDefinedAndTheRatesOverItsDuration) {
  KernelMetrics m;
  m.known = OR_KERNEL_WORK_FLOPS | OR_KERNEL_WORK_BYTES;
  m.flops = 2 * 64 * 64 * 64;
  m.bytesRead = 32768;
  m.bytesWritten = 16384;
  m.busyNs = 900;
  CollectArgs all;
  writeKernelMetricArgs(m, parse("flops,bytes_read,bytes_written,busy_ns,flops_per_s,bytes_per_s"), 1000000, all);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"flops", "524288"}, {"bytes_read", "32768"},      {"bytes_written", "16384"},
      {"busy_ns", "900"},  {"flops_per_s", "524288000"}, {"bytes_per_s", "49152000"}};
  EXPECT_EQ(all.args, expected);

  CollectArgs unknownWork;  // the launcher defined nothing: no value is made up
  m.known = 0;
  writeKernelMetricArgs(m, parse("flops,bytes_read,flops_per_s,busy_ns"), 1000000, unknownWork);
  ASSERT_EQ(unknownWork.args.size(), 1u);
  EXPECT_EQ(unknownWork.args[0].first, "busy_ns");

  CollectArgs instant;  // no duration: no rate
  m.known = OR_KERNEL_WORK_FLOPS;
  writeKernelMetricArgs(m, parse("flops_per_s"), 0, instant);
  EXPECT_TRUE(instant.args.empty());
}

CounterSample sample(uint32_t counter, uint64_t ts, uint64_t value, uint64_t stream = 0, int32_t device = 0) {
  return CounterSample{.device = device, .counter = counter, .stream = stream, .timestamp = ts, .value = value};
}

TEST(DeviceMetrics, CounterTracksKeepChangesTheLastSampleAndTheWindow) {
  ChunkedVector<CounterSample> samples;
  for (auto [ts, value] : {std::pair{100, 10}, {200, 10}, {300, 20}, {400, 20}, {500, 20}, {900, 99}}) {
    samples.push_back(sample(OR_COUNTER_MEMORY_ALLOCATED, ts, value));
  }
  samples.push_back(sample(OR_COUNTER_MEMORY_RESERVED, 100, 4096));
  samples.push_back(sample(OR_COUNTER_MEMORY_RESERVED, 100, 8192, 0, 1));
  samples.push_back(sample(77, 100, 1));  // a newer runtime's counter: skipped
  const auto events = buildCounterEvents(samples, parse("memory_allocated"), 0, 800);
  std::vector<std::pair<int64_t, double>> allocated;
  for (const CounterEvent& e : events) {
    ASSERT_EQ(e.metric, CounterMetric::MemoryAllocated) << "only what was asked";
    ASSERT_EQ(e.series.size(), 1u);
    EXPECT_EQ(e.series[0].first, "bytes");
    allocated.emplace_back(e.timestamp, e.series[0].second);
  }
  // 200 and 400 repeat their predecessor; 500 is the track's last in the window; 900 is outside.
  const std::vector<std::pair<int64_t, double>> expected = {{100, 10}, {300, 20}, {500, 20}};
  EXPECT_EQ(allocated, expected);
  const auto both = buildCounterEvents(samples, parse("memory_reserved"), 0, 800);
  ASSERT_EQ(both.size(), 2u) << "one track per device";
  EXPECT_EQ(both[0].device + both[1].device, 1);
}

TEST(DeviceMetrics, QueuedTasksAreOneTrackWithASeriesPerStream) {
  ChunkedVector<CounterSample> samples;
  samples.push_back(sample(OR_COUNTER_QUEUED_TASKS, 100, 3, 7));
  samples.push_back(sample(OR_COUNTER_QUEUED_TASKS, 100, 0, 1));
  samples.push_back(sample(OR_COUNTER_QUEUED_TASKS, 200, 1, 7));
  samples.push_back(sample(OR_COUNTER_QUEUED_TASKS, 200, 0, 1));
  const auto events = buildCounterEvents(samples, parse("queued_tasks"), 0, 1000);
  ASSERT_EQ(events.size(), 2u);
  using Series = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(events[0].series, (Series{{"stream 1", 0}, {"stream 7", 3}}));
  EXPECT_EQ(events[1].series, (Series{{"stream 1", 0}, {"stream 7", 1}}));
}

TEST(DeviceMetrics, CopyBandwidthIsEachIntervalsBytesOverItsTime) {
  ChunkedVector<CounterSample> samples;
  // Cumulative bytes: 1 MB in the first 1 ms, nothing in the next, 4 MB in the last 2 ms.
  for (auto [ts, bytes] : {std::pair{1000000, 5000000}, {2000000, 6000000}, {3000000, 6000000}, {5000000, 10000000}}) {
    samples.push_back(sample(OR_COUNTER_COPY_BYTES, ts, bytes));
  }
  const auto events = buildCounterEvents(samples, parse("copy_bandwidth"), 0, 10000000);
  std::vector<std::pair<int64_t, double>> rates;
  for (const CounterEvent& e : events) {
    ASSERT_EQ(e.series[0].first, "bytes_per_s");
    rates.emplace_back(e.timestamp, e.series[0].second);
  }
  const std::vector<std::pair<int64_t, double>> expected = {
      {1000000, 1e9}, {2000000, 0}, {3000000, 2e9}, {5000000, 0}};  // the window's end: nothing measured after
  EXPECT_EQ(rates, expected);
}

}  // namespace
}  // namespace openreg::profiler
