// The HTA-style analyses (device_analysis.cpp) on hand-built traces.
#include <gtest/gtest.h>

#include "analysis.h"
#include "trace_builder.h"

namespace openreg::trace {
namespace {

using testing::TraceBuilder;

// stream 7: gemm [10, 40] us and [45, 75] us (the second launched at 41 us);
// stream 8: add [15, 20] us, a copy [170, 172] us launched at 80.5 us, and an
// orphan [190, 191] us with no launch.
TraceBuilder steps() {
  TraceBuilder b;
  b.lanes(0, {7, 8}).span(0, 200'000);
  b.op("aten::mm", 1'000, 10'000, 2).runtime("orLaunchKernel", 2'000, 1'000, 101, 2);
  b.kernel("gemm", 10'000, 30'000, 0, 7, 101, 2);
  b.op("aten::add", 20'000, 10'000, 3).runtime("orLaunchKernel", 21'000, 1'000, 102, 3);
  b.kernel("add", 15'000, 5'000, 0, 8, 102, 3);
  b.op("aten::mm", 40'000, 10'000, 4).runtime("orLaunchKernel", 41'000, 1'000, 103, 4);
  b.kernel("gemm", 45'000, 30'000, 0, 7, 103, 4);
  b.op("aten::item", 80'000, 100'000, 5).runtime("orMemcpyAsync", 80'500, 1'000, 105, 5);
  b.kernel("Memcpy DtoH (Device -> Host)", 170'000, 2'000, 0, 8, 105, 5, "gpu_memcpy");
  b.kernel("orphan", 190'000, 1'000, 0, 8, 106, 0, "kernel", R"("device":0,"stream":8,"correlation":106)");
  return b;
}

uint32_t sliceNamed(const Trace& t, std::string_view name) {
  for (uint32_t i = 0; i < t.slices.size(); ++i)
    if (t.str(t.slices[i].name) == name) return i;
  throw std::runtime_error("no slice " + std::string(name));
}

TEST(DeviceAnalysis, KernelClassesFollowHta) {
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 100'000);
  b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1'000, 1'000, 0, 7, 1, 1);
  b.kernel("rcclGenericKernel", 3'000, 1'000, 0, 7, 2, 1);
  b.kernel("openregComm_AllGather_f32", 5'000, 1'000, 0, 7, 3, 1);
  b.kernel("gloo_copy", 7'000, 1'000, 0, 7, 4, 1, "kernel",
           R"("device":0,"stream":7,"correlation":4,"Collective name":"allreduce")");
  b.kernel("Memcpy HtoD (Pageable -> Device)", 9'000, 1'000, 0, 7, 5, 1, "gpu_memcpy");
  b.kernel("fill", 11'000, 1'000, 0, 7, 6, 1, "gpu_memset");
  b.kernel("dma_request", 13'000, 1'000, 0, 7, 7, 1);
  b.kernel("waitSync", 15'000, 1'000, 0, 7, 8, 1);
  b.kernel("gemm", 17'000, 1'000, 0, 7, 9, 1);
  auto t = b.load();
  auto cls = [&](std::string_view n) { return classifyKernel(*t, sliceNamed(*t, n)); };
  EXPECT_EQ(cls("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), KernelClass::Communication);
  EXPECT_EQ(cls("rcclGenericKernel"), KernelClass::Communication);
  EXPECT_EQ(cls("openregComm_AllGather_f32"), KernelClass::Communication);
  EXPECT_EQ(cls("gloo_copy"), KernelClass::Communication);
  EXPECT_EQ(cls("Memcpy HtoD (Pageable -> Device)"), KernelClass::Memory);
  EXPECT_EQ(cls("fill"), KernelClass::Memory);
  EXPECT_EQ(cls("dma_request"), KernelClass::Memory);
  EXPECT_EQ(cls("waitSync"), KernelClass::Other);
  EXPECT_EQ(cls("gemm"), KernelClass::Compute);
  KernelClasses k = computeKernelClasses(*t);
  EXPECT_EQ(k.total[static_cast<size_t>(KernelClass::Communication)].count, 4u);
  EXPECT_EQ(k.total[static_cast<size_t>(KernelClass::Memory)].totalNs, 3'000);
}

TEST(DeviceAnalysis, IdleTimeSplitsIntoHostWaitKernelWaitOther) {
  auto t = steps().load();
  std::vector<IdleBreakdown> idle = computeIdleBreakdown(*t, {});
  ASSERT_EQ(idle.size(), 2u);
  // Stream 7: the second gemm was launched (41 us) after the stream ran dry (40 us).
  EXPECT_EQ(idle[0].stream.value, 7);
  EXPECT_EQ(idle[0].hostWaitNs, 5'000);
  EXPECT_EQ(idle[0].kernelWaitNs + idle[0].otherNs, 0);
  // Stream 8: the copy launched at 80.5 us, after add ended (20 us): host wait
  // of 150 us; the orphan has no launch and follows 18 us later (< 30 us).
  EXPECT_EQ(idle[1].hostWaitNs, 150'000);
  EXPECT_EQ(idle[1].kernelWaitNs, 18'000);
  EXPECT_EQ(idle[1].otherNs, 0);
  SummaryOptions tight;
  tight.kernelWaitNs = 10'000;
  EXPECT_EQ(computeIdleBreakdown(*t, tight)[1].otherNs, 18'000);
}

TEST(DeviceAnalysis, LaunchStatistics) {
  auto t = steps().load();
  LaunchStats s = computeLaunchStats(*t, {});
  EXPECT_EQ(s.total.launches, 4u);  // the orphan has no launch
  EXPECT_EQ(s.total.hostNs, 4'000);
  // gemm 7 us after its launch ends, add before it (clipped to 0), gemm 3 us, the copy 88.5 us.
  EXPECT_EQ(s.total.delayNs, 7'000 + 0 + 3'000 + 88'500);
  EXPECT_EQ(s.total.maxDelayNs, 88'500);
  EXPECT_EQ(s.total.shortKernels, 0u);
  ASSERT_EQ(s.byApi.size(), 2u);
  EXPECT_EQ(t->str(s.byApi[0].name), "orLaunchKernel");
  EXPECT_EQ(s.byApi[0].launches, 3u);
  ASSERT_FALSE(s.byOp.empty());
  EXPECT_EQ(t->str(s.byOp[0].name), "aten::item");  // 1 us + 88.5 us: the worst offender
  SummaryOptions o;
  o.slowStartNs = 5'000;
  EXPECT_EQ(computeLaunchStats(*t, o).total.slowStarts, 2u);
}

TEST(DeviceAnalysis, IntersectionOfMergedIntervals) {
  std::vector<Interval> a{{0, 10}, {20, 30}}, b{{5, 25}, {28, 40}};
  EXPECT_EQ(intersectionNs(a, b), 5 + 5 + 2);
  EXPECT_EQ(intersectionNs(a, {}), 0);
}

TEST(DeviceAnalysis, CommunicationOverlapAndCollectives) {
  TraceBuilder b;
  b.lanes(0, {7, 20}).span(0, 1'000'000);
  b.kernel("gemm", 10'000, 100'000, 0, 7, 1, 1);
  b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 60'000, 70'000, 0, 20, 2, 2, "kernel",
           R"("device":0,"stream":20,"correlation":2,"Collective name":"allreduce","In msg nelems":1024,)"
           R"("Out msg nelems":1024,"Group size":8,"dtype":"Float","Seq":"5","Process Group Name":"0")");
  b.kernel("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", 200'000, 10'000, 0, 20, 3, 3);
  auto t = b.load();
  Communication c = computeCommunication(*t);
  EXPECT_EQ(c.commNs, 80'000);
  EXPECT_EQ(c.overlapNs, 50'000);
  ASSERT_EQ(c.collectives.size(), 2u);
  EXPECT_EQ(c.collectives[0].collective, "AllReduce");
  EXPECT_EQ(c.collectives[0].bytes, 4096);
  EXPECT_EQ(c.collectives[0].groupSize, 8);
  EXPECT_EQ(c.collectives[1].collective, "ReduceScatter");
  EXPECT_EQ(c.collectives[1].bytes, 0);  // the kernel name gives the dtype, not the count
  ASSERT_EQ(c.instances.size(), 2u);
  EXPECT_EQ(c.instances[0].seq, 5);  // a numeric string, as some torch versions write it
  EXPECT_EQ(c.instances[1].seq, -1);
}

}  // namespace
}  // namespace openreg::trace
