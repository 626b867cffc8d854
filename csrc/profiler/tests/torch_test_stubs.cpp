// The legacy ProfilerStubs as torch holds them, with the real backend and
// runtime loaded: rangePush/rangePop/mark reach the runtime as MARKER records,
// record/elapsed time real ops on the device, onEachDevice and synchronize
// cover every device. No Python: this also runs the backend, the stubs and the
// runtime under the sanitizers (torch itself uninstrumented).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/Device.h"
#include "test_support.h"

namespace {

using openreg::testing::ActivityCollector;
using torch::profiler::impl::ProfilerStubs;
using torch::profiler::impl::ProfilerVoidEventStub;

// The plugin registers its stubs with torch when it loads, as in a user's
// process (torch_openreg loads it by path).
const ProfilerStubs* loadStubs() {
  static void* plugin = dlopen(OPENREG_PROFILER_PLUGIN, RTLD_NOW | RTLD_GLOBAL);
  EXPECT_NE(plugin, nullptr) << dlerror();
  return torch::profiler::impl::privateuse1Stubs();
}

at::TensorOptions onDevice(int index) {
  return at::TensorOptions().device(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
}

class Stubs : public ::testing::Test {
 protected:
  void SetUp() override {
    openreg::backend::initRuntime();
    stubs_ = loadStubs();
    ASSERT_NE(stubs_, nullptr);
    ASSERT_TRUE(stubs_->enabled()) << "the plugin did not register its stubs";
  }
  const ProfilerStubs* stubs_ = nullptr;
};

TEST_F(Stubs, RangesAndMarksBecomeMarkerRecords) {
  ActivityCollector collector;
  ASSERT_OR(orActivityEnable(OR_ACTIVITY_KIND_MARKER));
  ASSERT_OR(orActivityEnableTracing());
  stubs_->rangePush("outer");
  stubs_->mark("tick");
  stubs_->rangePush("inner");
  stubs_->rangePop();
  stubs_->rangePop();
  stubs_->mark(nullptr);  // ignored, never a crash
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();
  const auto markers = collector.records<orActivityMarker>(OR_ACTIVITY_KIND_MARKER);
  ASSERT_EQ(markers.size(), 5u);
  const std::vector<uint32_t> kinds = {OR_ACTIVITY_MARKER_RANGE_START, OR_ACTIVITY_MARKER_INSTANT,
                                       OR_ACTIVITY_MARKER_RANGE_START, OR_ACTIVITY_MARKER_RANGE_END,
                                       OR_ACTIVITY_MARKER_RANGE_END};
  for (size_t i = 0; i < markers.size(); ++i) EXPECT_EQ(markers[i].markerKind, kinds[i]) << i;
  EXPECT_STREQ(markers[0].name, "outer");
  EXPECT_STREQ(markers[1].name, "tick");
  EXPECT_STREQ(markers[2].name, "inner");
  // Pops close the innermost range first.
  EXPECT_EQ(markers[3].id, markers[2].id);
  EXPECT_EQ(markers[4].id, markers[0].id);
  EXPECT_NE(markers[0].id, markers[2].id);
  EXPECT_EQ(markers[0].threadId, static_cast<uint32_t>(::gettid()));
}

TEST_F(Stubs, ElapsedBracketsTheKernelsBetweenTheEvents) {
  ActivityCollector collector;
  ASSERT_OR(orActivityEnable(OR_ACTIVITY_KIND_KERNEL));
  ASSERT_OR(orActivityEnableTracing());
  const at::Tensor x = at::ones({4096}, onDevice(0));
  stubs_->synchronize();
  c10::DeviceIndex device = -1;
  ProfilerVoidEventStub start, end;
  int64_t cpuStart = 0, cpuEnd = 0;
  stubs_->record(&device, &start, &cpuStart);
  at::Tensor y = x;
  for (int i = 0; i < 20; ++i) y = (y * 2).sub(1);  // 40 kernels between the events
  stubs_->record(nullptr, &end, &cpuEnd);
  const float us = stubs_->elapsed(&start, &end);
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();
  EXPECT_EQ(device, 0);
  EXPECT_LE(cpuStart, cpuEnd);
  EXPECT_TRUE(at::equal(y.cpu(), at::ones({4096})));
  const auto kernels = collector.records<orActivityKernel>(OR_ACTIVITY_KIND_KERNEL);
  // at::ones may fill on the device too; the 40 kernels come after it.
  ASSERT_GE(kernels.size(), 40u);
  uint64_t first = UINT64_MAX, last = 0;
  for (size_t i = kernels.size() - 40; i < kernels.size(); ++i) {
    first = std::min(first, kernels[i].start);
    last = std::max(last, kernels[i].end);
  }
  // Same device clock on both sides: the events bracket the kernels.
  EXPECT_GE(double(us), (last - first) / 1e3 - 1e-3);
  EXPECT_EQ(stubs_->elapsed(&start, nullptr), 0.0f);
}

TEST_F(Stubs, OnEachDeviceVisitsEveryDeviceAndRestoresTheCurrentOne) {
  const int count = openreg::backend::deviceCount();
  ASSERT_GE(count, 2);
  openreg::backend::setCurrentDevice(1);
  std::vector<int> seen;
  stubs_->onEachDevice([&](int d) {
    seen.push_back(d);
    EXPECT_EQ(openreg::backend::currentDevice(), d);
    at::ones({8}, onDevice(d)).add_(1);
  });
  stubs_->synchronize();
  std::vector<int> expected(count);
  for (int d = 0; d < count; ++d) expected[d] = d;
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(openreg::backend::currentDevice(), 1);
  openreg::backend::setCurrentDevice(0);
}

// Several threads recording, marking and running ops at once (for TSan).
TEST_F(Stubs, ConcurrentThreadsRecordAndMark) {
  ActivityCollector collector;
  ASSERT_OR(orActivityEnable(OR_ACTIVITY_KIND_MARKER));
  ASSERT_OR(orActivityEnableTracing());
  constexpr int kThreads = 4, kRounds = 25;
  std::vector<std::thread> threads;
  std::vector<float> total(kThreads, 0.0f);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      openreg::backend::setCurrentDevice(static_cast<c10::DeviceIndex>(t % 2));
      at::Tensor v = at::zeros({256}, onDevice(t % 2));
      for (int i = 0; i < kRounds; ++i) {
        stubs_->rangePush("round");
        ProfilerVoidEventStub a, b;
        stubs_->record(nullptr, &a, nullptr);
        v.add_(1);
        stubs_->record(nullptr, &b, nullptr);
        total[t] += stubs_->elapsed(&a, &b);
        stubs_->rangePop();
      }
      EXPECT_TRUE(at::equal(v.cpu(), at::full({256}, float(kRounds))));
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();
  EXPECT_EQ(collector.count(OR_ACTIVITY_KIND_MARKER), size_t{2 * kThreads * kRounds});
  for (float t : total) EXPECT_GT(t, 0.0f);
}

}  // namespace
