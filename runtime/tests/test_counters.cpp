// The device's counters in the activity API: KERNEL_METRICS records (the work
// a launcher defined, the worker's busy time) and sampled COUNTER records.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <map>
#include <thread>
#include <vector>

#include "test_support.h"

using openreg::testing::ActivityCollector;

namespace {

// Keeps the executor thread on a core for about `ms` milliseconds.
int spin(void* ms, char*, size_t) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(*static_cast<int*>(ms));
  volatile uint64_t sink = 0;
  while (std::chrono::steady_clock::now() < end) sink = sink + 1;
  return 0;
}

int noop(void*, char*, size_t) { return 0; }

orLaunchConfig workConfig(const char* name, uint32_t known) {
  orLaunchConfig config{};
  config.structSize = sizeof(config);
  config.name = name;
  config.func = noop;
  config.workKnown = known;
  config.flops = 2 * 64 * 64 * 64;
  config.bytesRead = 2 * 64 * 64 * 4;
  config.bytesWritten = 64 * 64 * 4;
  return config;
}

void enable(std::initializer_list<orActivityKind> kinds) {
  for (orActivityKind kind : kinds) EXPECT_OR(orActivityEnable(kind));
}

}  // namespace

TEST(Counters, KernelMetricsCarryTheLaunchersWorkAndTheKernelsCorrelation) {
  ActivityCollector collector;
  enable({OR_ACTIVITY_KIND_KERNEL, OR_ACTIVITY_KIND_KERNEL_METRICS});
  ASSERT_OR(orActivityEnableTracing());
  orLaunchConfig both = workConfig("both", OR_KERNEL_WORK_FLOPS | OR_KERNEL_WORK_BYTES);
  orLaunchConfig bytesOnly = workConfig("bytes_only", OR_KERNEL_WORK_BYTES);
  orLaunchConfig none = workConfig("none", 0);  // values given, bits clear: not the launcher's word
  orLaunchConfig older = workConfig("older", OR_KERNEL_WORK_FLOPS);
  older.structSize = offsetof(orLaunchConfig, workKnown);  // built before the work fields existed
  for (const orLaunchConfig* config : {&both, &bytesOnly, &none, &older}) ASSERT_OR(orLaunchKernelEx(config, nullptr));
  ASSERT_OR(orDeviceSynchronize());
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();

  std::map<uint64_t, std::string> kernelByCorrelation;
  for (const auto& k : collector.records<orActivityKernel>(OR_ACTIVITY_KIND_KERNEL)) {
    kernelByCorrelation[k.correlationId] = k.name;
  }
  std::map<std::string, orActivityKernelMetrics> byName;
  for (const auto& m : collector.records<orActivityKernelMetrics>(OR_ACTIVITY_KIND_KERNEL_METRICS)) {
    EXPECT_EQ(m.header.size, sizeof(orActivityKernelMetrics));
    ASSERT_EQ(kernelByCorrelation.count(m.correlationId), 1u) << "every metrics record follows its kernel's";
    byName[kernelByCorrelation[m.correlationId]] = m;
  }
  ASSERT_EQ(byName.size(), 4u);
  EXPECT_EQ(byName["both"].known, uint32_t{OR_KERNEL_WORK_FLOPS | OR_KERNEL_WORK_BYTES});
  EXPECT_EQ(byName["both"].flops, 524288u);
  EXPECT_EQ(byName["both"].bytesRead, 32768u);
  EXPECT_EQ(byName["both"].bytesWritten, 16384u);
  EXPECT_EQ(byName["bytes_only"].known, uint32_t{OR_KERNEL_WORK_BYTES});
  EXPECT_EQ(byName["bytes_only"].flops, 0u) << "a value whose bit is clear is not recorded";
  EXPECT_EQ(byName["bytes_only"].bytesRead, 32768u);
  for (const char* name : {"none", "older"}) {
    EXPECT_EQ(byName[name].known, 0u) << name;
    EXPECT_EQ(byName[name].flops + byName[name].bytesRead + byName[name].bytesWritten, 0u) << name;
  }
}

TEST(Counters, BusyTimeIsTheWorkersTimeOnACoreInsideTheKernelsSpan) {
  ActivityCollector collector;
  enable({OR_ACTIVITY_KIND_KERNEL, OR_ACTIVITY_KIND_KERNEL_METRICS});
  ASSERT_OR(orActivityEnableTracing());
  int ms = 20;
  orLaunchConfig config = workConfig("spin", 0);
  config.func = spin;
  config.userData = &ms;
  ASSERT_OR(orLaunchKernelEx(&config, nullptr));
  ASSERT_OR(orDeviceSynchronize());
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();
  const auto kernels = collector.records<orActivityKernel>(OR_ACTIVITY_KIND_KERNEL);
  const auto metrics = collector.records<orActivityKernelMetrics>(OR_ACTIVITY_KIND_KERNEL_METRICS);
  ASSERT_EQ(kernels.size(), 1u);
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_GT(metrics[0].busyNs, 0u) << "the spinning worker was on a core";
  EXPECT_LE(metrics[0].busyNs, kernels[0].end - kernels[0].start) << "CPU time is measured inside the span";
}

TEST(Counters, NoMetricsRecordsUnlessTheKindIsEnabled) {
  ActivityCollector collector;
  enable({OR_ACTIVITY_KIND_KERNEL});
  ASSERT_OR(orActivityEnableTracing());
  orLaunchConfig config = workConfig("plain", OR_KERNEL_WORK_FLOPS);
  ASSERT_OR(orLaunchKernelEx(&config, nullptr));
  ASSERT_OR(orDeviceSynchronize());
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();
  EXPECT_EQ(collector.count(OR_ACTIVITY_KIND_KERNEL), 1u);
  EXPECT_EQ(collector.count(OR_ACTIVITY_KIND_KERNEL_METRICS), 0u);
  EXPECT_EQ(collector.count(OR_ACTIVITY_KIND_COUNTER), 0u);
}

TEST(Counters, SamplesReportMemoryCopiesAndQueuesAsTheyAre) {
  ASSERT_OR(orSetDevice(0));
  void* before = nullptr;
  ASSERT_OR(orMalloc(&before, 3000));  // reserved before the window: the first sample sees it
  ASSERT_OR(orActivityPublishCounter(0, OR_COUNTER_MEMORY_ALLOCATED, 12345));
  ActivityCollector collector;
  enable({OR_ACTIVITY_KIND_COUNTER});
  ASSERT_OR(orActivitySetCounterPeriod(OR_ACTIVITY_COUNTER_PERIOD_MIN_NS));
  ASSERT_OR(orActivityEnableTracing());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  void* device = nullptr;
  ASSERT_OR(orMalloc(&device, 1 << 20));
  std::vector<char> host(1 << 20, 7);
  ASSERT_OR(orMemcpy(device, host.data(), host.size(), orMemcpyHostToDevice));
  ASSERT_OR(orActivityPublishCounter(0, OR_COUNTER_MEMORY_ALLOCATED, 1 << 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();
  ASSERT_OR(orActivitySetCounterPeriod(OR_ACTIVITY_COUNTER_PERIOD_DEFAULT_NS));

  // Samples written on different threads (the window's opening and closing
  // on this one, the periodic ones on the delivery thread) arrive in buffer
  // order: the timestamps order them.
  std::map<uint32_t, std::vector<orActivityCounter>> device0;
  for (const auto& c : collector.records<orActivityCounter>(OR_ACTIVITY_KIND_COUNTER)) {
    if (c.device == 0) device0[c.counter].push_back(c);
  }
  for (auto& [counter, samples] : device0) {
    std::stable_sort(samples.begin(), samples.end(),
                     [](const auto& a, const auto& b) { return a.timestamp < b.timestamp; });
  }
  const auto& reserved = device0[OR_COUNTER_MEMORY_RESERVED];
  const auto& allocated = device0[OR_COUNTER_MEMORY_ALLOCATED];
  const auto& copied = device0[OR_COUNTER_COPY_BYTES];
  ASSERT_GE(reserved.size(), 3u) << "opening, at least one period, closing";
  // The first sample is the window's opening, the last its closing.
  EXPECT_EQ(reserved.back().value - reserved.front().value, uint64_t{1} << 20) << "bytes as requested";
  EXPECT_EQ(allocated.front().value, 12345u);
  EXPECT_EQ(allocated.back().value, uint64_t{1} << 20);
  EXPECT_EQ(copied.back().value - copied.front().value, uint64_t{1} << 20);
  const auto& queued = device0[OR_COUNTER_QUEUED_TASKS];
  ASSERT_FALSE(queued.empty());
  for (const auto& q : queued) {
    EXPECT_NE(q.streamId, 0u);
    EXPECT_LE(q.value, 1u) << "at most the one copy, while it ran";
  }
  EXPECT_EQ(queued.back().value, 0u) << "the synchronous copy was done before the window closed";
  ASSERT_OR(orFree(device));
  ASSERT_OR(orFree(before));
}

TEST(Counters, QueuedTasksCountWorkThatHasNotRun) {
  ActivityCollector collector;
  enable({OR_ACTIVITY_KIND_COUNTER});
  orStream_t stream = nullptr;
  ASSERT_OR(orStreamCreate(&stream));
  openreg::testing::Gate gate;
  auto blocked = [](void* g, char*, size_t) { return static_cast<openreg::testing::Gate*>(g)->waitOpen() ? 0 : 1; };
  ASSERT_OR(orLaunchKernel(stream, "blocked", blocked, &gate));
  for (int i = 0; i < 4; ++i) ASSERT_OR(orLaunchKernel(stream, "behind", noop, nullptr));
  ASSERT_OR(orActivityEnableTracing());  // samples now: 5 queued (one running, 4 behind)
  ASSERT_OR(orActivityDisableTracing());
  gate.open();
  ASSERT_OR(orStreamSynchronize(stream));
  collector.flush();
  uint64_t streamId = 0;
  ASSERT_OR(orStreamGetId(stream, &streamId));
  std::vector<uint64_t> values;
  for (const auto& c : collector.records<orActivityCounter>(OR_ACTIVITY_KIND_COUNTER)) {
    if (c.counter == OR_COUNTER_QUEUED_TASKS && c.streamId == streamId) values.push_back(c.value);
  }
  // The opening and closing samples, and any period that fell between them
  // (a slow sanitizer build can take a millisecond here): the gate was shut
  // throughout, so each one saw all five.
  ASSERT_GE(values.size(), 2u) << "the opening and closing samples";
  for (uint64_t value : values) EXPECT_EQ(value, 5u);
  ASSERT_OR(orStreamDestroy(stream));
}

TEST(Counters, MisuseIsRefusedWithItsCause) {
  EXPECT_EQ(orActivitySetCounterPeriod(OR_ACTIVITY_COUNTER_PERIOD_MIN_NS - 1), orErrorInvalidValue);
  EXPECT_EQ(orActivitySetCounterPeriod(OR_ACTIVITY_COUNTER_PERIOD_MAX_NS + 1), orErrorInvalidValue);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("outside"), std::string::npos);
  EXPECT_EQ(orActivityPublishCounter(99, OR_COUNTER_MEMORY_ALLOCATED, 1), orErrorInvalidDevice);
  EXPECT_EQ(orActivityPublishCounter(0, OR_COUNTER_MEMORY_RESERVED, 1), orErrorInvalidValue);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("measures the others"), std::string::npos);
  {
    ActivityCollector collector;
    ASSERT_OR(orActivityEnableTracing());
    EXPECT_EQ(orActivitySetCounterPeriod(OR_ACTIVITY_COUNTER_PERIOD_DEFAULT_NS), orErrorNotSupported);
    ASSERT_OR(orActivityDisableTracing());
  }
  EXPECT_EQ(orActivityEnable(OR_ACTIVITY_KIND_COUNT), orErrorInvalidValue);
  int active = 0;
  EXPECT_EQ(orActivityIsActive(OR_ACTIVITY_KIND_COUNT, &active), orErrorInvalidValue);
  EXPECT_EQ(orActivityIsActive(OR_ACTIVITY_KIND_KERNEL, nullptr), orErrorInvalidValue);
}

TEST(Counters, IsActiveAnswersWhetherAKindIsRecordedNow) {
  ActivityCollector collector;
  int active = -1;
  ASSERT_OR(orActivityIsActive(OR_ACTIVITY_KIND_KERNEL_METRICS, &active));
  EXPECT_EQ(active, 0);
  enable({OR_ACTIVITY_KIND_KERNEL_METRICS});
  ASSERT_OR(orActivityIsActive(OR_ACTIVITY_KIND_KERNEL_METRICS, &active));
  EXPECT_EQ(active, 0) << "enabled, but the window is closed";
  ASSERT_OR(orActivityEnableTracing());
  ASSERT_OR(orActivityIsActive(OR_ACTIVITY_KIND_KERNEL_METRICS, &active));
  EXPECT_EQ(active, 1);
  ASSERT_OR(orActivityIsActive(OR_ACTIVITY_KIND_COUNTER, &active));
  EXPECT_EQ(active, 0) << "another kind";
  ASSERT_OR(orActivityDisableTracing());
}

TEST(Counters, DeviceInfoDeclaresItsPeaks) {
  orActivityDeviceInfo info{};
  info.structSize = sizeof(info);
  ASSERT_OR(orActivityGetDeviceInfo(0, &info));
  // Derived from the properties (no OPENREG_PEAK_* set): a multiply-add per
  // compute unit per cycle; 16 bytes per cycle per executor thread.
  EXPECT_DOUBLE_EQ(info.peakFlopsPerSecond, 2.0 * info.computeUnits * info.clockRateKHz * 1000.0);
  EXPECT_DOUBLE_EQ(info.peakBytesPerSecond, 16.0 * info.executorThreads * info.clockRateKHz * 1000.0);
  orActivityDeviceInfo older{};
  older.structSize = offsetof(orActivityDeviceInfo, peakFlopsPerSecond);
  ASSERT_OR(orActivityGetDeviceInfo(0, &older));
  EXPECT_EQ(older.peakFlopsPerSecond, 0.0) << "an older caller's struct is not written past its size";
  uint32_t version = 0;
  ASSERT_OR(orActivityGetVersion(&version));
  EXPECT_EQ(version, 3u);
}
