#include <gtest/gtest.h>

#include "analysis.h"
#include "trace_builder.h"

namespace openreg::trace {
namespace {

using testing::TraceBuilder;

// One step on device 0 (streams 7 and 8):
//   stream 7: gemm [10, 40] us, gemm [45, 75] us
//   stream 8: add [15, 20] us, Memcpy DtoH [170, 172] us, orphan [190, 191] us
// so the device idles 95 us while the host sits in aten::item's
// synchronisation, 18 us after it, and 5 us between the gemms.
TraceBuilder oneStep() {
  TraceBuilder b;
  b.lanes(0, {7, 8}).span(0, 200'000);
  b.op("ProfilerStep#1", 0, 200'000, 1, "user_annotation");
  b.python("train.py(12): step", 500, 198'500);
  b.op("aten::mm", 1'000, 10'000, 2).runtime("orLaunchKernel", 2'000, 1'000, 101, 2);
  b.kernel("gemm", 10'000, 30'000, 0, 7, 101, 2);
  b.op("aten::add", 20'000, 10'000, 3).runtime("orLaunchKernel", 21'000, 1'000, 102, 3);
  // Linked only through its launch's correlation.
  b.kernel("add", 15'000, 5'000, 0, 8, 102, 0, "kernel", R"("device":0,"stream":8,"correlation":102)");
  b.op("aten::mm", 40'000, 10'000, 4).runtime("orLaunchKernel", 41'000, 1'000, 103, 4);
  b.kernel("gemm", 45'000, 30'000, 0, 7, 103, 4);
  b.python("<built-in method item of Tensor object>", 79'000, 101'500);
  b.op("aten::item", 80'000, 100'000, 5).runtime("orMemcpyAsync", 80'500, 1'000, 105, 5);
  b.runtime("orStreamSynchronize", 82'000, 96'000, 104, 5);
  b.kernel("Memcpy DtoH (Device -> Host)", 170'000, 2'000, 0, 8, 105, 5, "gpu_memcpy");
  // Launched by nobody the trace knows of.
  b.kernel("orphan", 190'000, 1'000, 0, 8, 106, 0, "kernel", R"("device":0,"stream":8,"correlation":106)");
  b.memory(2'000, 20, 0, 4096, 4096).memory(3'000, 0, -1, 999'999, 999'999);
  b.memory(21'000, 20, 0, 12'288, 8192).memory(41'000, 20, 0, 8192, -4096);
  return b;
}

TEST(Summary, TopKernelsByDeviceTime) {
  auto t = oneStep().load();
  Summary s = computeSummary(*t, {});
  EXPECT_EQ(s.deviceTotalNs, 68'000);
  ASSERT_EQ(s.kernels.size(), 4u);
  EXPECT_EQ(t->str(s.kernels[0].name), "gemm");
  EXPECT_EQ(s.kernels[0].count, 2u);
  EXPECT_EQ(s.kernels[0].totalNs, 60'000);
  EXPECT_EQ(t->str(s.kernels[1].name), "add");
  EXPECT_EQ(t->str(s.kernels[2].name), "Memcpy DtoH (Device -> Host)");
  EXPECT_EQ(t->str(s.kernels[2].cat), "gpu_memcpy");
  EXPECT_EQ(t->str(s.kernels[3].name), "orphan");
}

TEST(Summary, DeviceTimePerOpAndLinkedShare) {
  auto t = oneStep().load();
  Summary s = computeSummary(*t, {});
  ASSERT_EQ(s.ops.size(), 4u);
  EXPECT_EQ(t->str(s.ops[0].name), "aten::mm");
  EXPECT_EQ(s.ops[0].deviceNs, 60'000);
  EXPECT_EQ(s.ops[0].opInstances, 2u);
  EXPECT_EQ(t->str(s.ops[1].name), "aten::add");
  EXPECT_EQ(s.ops[1].deviceNs, 5'000);
  EXPECT_EQ(t->str(s.ops[2].name), "aten::item");
  EXPECT_EQ(s.ops[3].name, kNoString);  // the orphan
  EXPECT_EQ(s.ops[3].deviceNs, 1'000);

  EXPECT_EQ(s.links.deviceEvents, 5u);
  EXPECT_EQ(s.links.linked, 4u);
  EXPECT_EQ(s.links.viaExternalId, 3u);
  EXPECT_EQ(s.links.viaCorrelation, 1u);
}

TEST(Summary, StreamAndDeviceUtilisation) {
  auto t = oneStep().load();
  Summary s = computeSummary(*t, {});
  ASSERT_EQ(s.streams.size(), 2u);
  EXPECT_EQ(t->lanes[s.streams[0].lane].tid.value, 7);
  EXPECT_EQ(s.streams[0].busyNs, 60'000);
  EXPECT_EQ(s.streams[0].lastNs - s.streams[0].firstNs, 65'000);
  EXPECT_EQ(t->lanes[s.streams[1].lane].tid.value, 8);
  EXPECT_EQ(s.streams[1].busyNs, 8'000);
  EXPECT_EQ(s.streams[1].events, 3u);
  ASSERT_EQ(s.devices.size(), 1u);
  // Stream 8's add lies under stream 7's first gemm: counted once.
  EXPECT_EQ(s.devices[0].busyNs, 63'000);
  EXPECT_EQ(s.devices[0].lastNs - s.devices[0].firstNs, 181'000);
}

TEST(Summary, LargestIdleGapsAndWhatTheHostDid) {
  auto t = oneStep().load();
  Summary s = computeSummary(*t, {.top = 10, .gaps = 3});
  ASSERT_EQ(s.gaps.size(), 3u);
  EXPECT_EQ(s.gaps[0].startNs, 75'000);
  EXPECT_EQ(s.gaps[0].endNs, 170'000);
  EXPECT_EQ(s.gaps[0].host.text, "python: train.py(12): step \xE2\x86\x92 aten::item \xE2\x86\x92 orStreamSynchronize");
  EXPECT_EQ(s.gaps[1].endNs - s.gaps[1].startNs, 18'000);
  EXPECT_EQ(s.gaps[1].host.text, "python: train.py(12): step");
  ASSERT_FALSE(s.gaps[1].host.overlapping.empty());
  EXPECT_EQ(t->str(s.gaps[1].host.overlapping[0].name), "aten::item");
  EXPECT_EQ(s.gaps[1].host.overlapping[0].overlapNs, 8'000);
  EXPECT_EQ(s.gaps[2].endNs - s.gaps[2].startNs, 5'000);
}

TEST(Summary, GapWithNoHostActivity) {
  TraceBuilder b;
  b.kernel("a", 0, 10, 0, 7, 1, 0).kernel("b", 1'000, 10, 0, 7, 2, 0);
  auto t = b.load();
  Summary s = computeSummary(*t, {});
  ASSERT_EQ(s.gaps.size(), 1u);
  EXPECT_EQ(s.gaps[0].host.lane, -1);
  EXPECT_TRUE(s.gaps[0].host.text.empty());
  EXPECT_TRUE(s.gaps[0].host.overlapping.empty());
}

TEST(Summary, DeviceMemoryPeakAndItsOp) {
  auto t = oneStep().load();
  Summary s = computeSummary(*t, {});
  ASSERT_EQ(s.memory.size(), 1u);
  const MemoryStat& m = s.memory[0];
  EXPECT_EQ(m.deviceType, 20);
  EXPECT_EQ(m.deviceId, 0);
  EXPECT_EQ(m.peakBytes, 12'288);
  EXPECT_EQ(m.finalBytes, 8192);
  EXPECT_EQ(m.allocations, 2u);
  EXPECT_EQ(m.frees, 1u);
  ASSERT_NE(m.op, kNoSlice);
  EXPECT_EQ(t->str(t->slices[m.op].name), "aten::add");
  ASSERT_EQ(m.opStack.size(), 2u);
  EXPECT_EQ(t->str(t->slices[m.opStack[0]].name), "ProfilerStep#1");
  // CPU memory is kept apart and does not count as the device peak.
  ASSERT_EQ(s.hostMemory.size(), 1u);
  EXPECT_EQ(s.hostMemory[0].peakBytes, 999'999);
}

TEST(Summary, MemoryPeakIsTheFirstTimeTheMaximumIsReached) {
  TraceBuilder b;
  b.op("aten::first", 0, 100, 1).op("aten::second", 200, 100, 2);
  b.memory(50, 1, 0, 100, 100).memory(60, 1, 0, 0, -100).memory(250, 1, 0, 100, 100);
  auto t = b.load();
  Summary s = computeSummary(*t, {});
  ASSERT_EQ(s.memory.size(), 1u);
  EXPECT_EQ(t->str(t->slices[s.memory[0].op].name), "aten::first");
}

TEST(Summary, CpuOnlyTraceHasEmptyDeviceSections) {
  TraceBuilder b;
  b.op("aten::add", 0, 100, 1);
  auto t = b.load();
  Summary s = computeSummary(*t, {});
  EXPECT_TRUE(s.kernels.empty());
  EXPECT_TRUE(s.streams.empty());
  EXPECT_TRUE(s.gaps.empty());
  EXPECT_EQ(s.links.deviceEvents, 0u);
}

TEST(Summary, JsonIsValid) {
  auto t = oneStep().load();
  SummaryOptions o;
  std::string json = summaryToJson(*t, computeSummary(*t, o), o);
  JsonReader r(openMemorySource(json.data(), json.size()));
  EXPECT_NO_THROW(r.skipValue());
  EXPECT_TRUE(r.atEnd());
  EXPECT_NE(json.find(R"("name":"gemm")"), std::string::npos);
  EXPECT_NE(json.find(R"("device_type_name":"PrivateUse1")"), std::string::npos);
}

TEST(Summary, WindowPrefersTraceSpanAndRecordWindowEnd) {
  TraceBuilder b;
  b.op("aten::add", 1'000, 100, 1).span(500, 2'000);
  auto t = b.load();
  auto w = profilingWindow(*t);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->start, 500);
  EXPECT_EQ(w->end, 2'500);
  EXPECT_EQ(w->source, "trace_span");

  b.raw(R"({"name":"Record Window End","ph":"i","s":"g","pid":"","tid":"","ts":3.000})");
  t = b.load();
  w = profilingWindow(*t);
  EXPECT_EQ(w->end, 3'000);

  TraceBuilder noSpan;
  noSpan.op("aten::add", 1'000, 100, 1).op("aten::mul", 5'000, 100, 2);
  t = noSpan.load();
  w = profilingWindow(*t);
  EXPECT_EQ(w->source, "host_events");
  EXPECT_EQ(w->start, 1'000);
  EXPECT_EQ(w->end, 5'100);
}

// ---------------------------------------------------------------- source lines

TEST(Summary, SourceLinesFromThePythonStackAroundTheOp) {
  auto t = oneStep().load();
  const SourceAttribution& a = computeSummary(*t, {}).sourceLines;
  // Every linked event ran under train.py(12) (the memcpy through a <built-in>
  // frame, the add through its launch's correlation); the orphan has no op.
  ASSERT_EQ(a.lines.size(), 1u);
  EXPECT_EQ(a.lines[0].source, "train.py:12");
  EXPECT_EQ(a.lines[0].function, "step");
  EXPECT_EQ(a.lines[0].deviceNs, 30'000 + 5'000 + 30'000 + 2'000);
  EXPECT_EQ(a.lines[0].events, 4u);
  EXPECT_EQ(a.stackEvents, 4u);
  EXPECT_EQ(a.stackNs, 67'000);
  EXPECT_EQ(a.unattributedEvents, 1u);
  EXPECT_EQ(a.unattributedNs, 1'000);
  EXPECT_EQ(a.compiledEvents, 0u);
}

TEST(Summary, CompiledKernelSplitsItsTimeEvenlyAmongItsLines) {
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 100'000);
  b.python("m.py(3): forward", 0, 50'000);
  b.op("fused_0", 1'000, 2'000, 1).runtime("orLaunchKernelEx", 1'500, 500, 11, 1);
  // 1000 ns over three lines: 334 + 333 + 333; its Python stack does not count.
  b.kernel("fused_0", 5'000, 1'000, 0, 7, 11, 1, "kernel",
           R"("External id":1,"device":0,"stream":7,"correlation":11,)"
           R"("source_lines":["m.py:10","m.py:11","m.py:12"],"fused_aten_ops":["aten::add","aten::relu","aten::mul"])");
  b.op("fused_1", 3'000, 2'000, 2).runtime("orLaunchKernelEx", 3'500, 500, 12, 2);
  b.kernel("fused_1", 7'000, 10'000, 0, 7, 12, 2, "kernel",
           R"("External id":2,"device":0,"stream":7,"correlation":12,"source_lines":["m.py:12"])");
  auto t = b.load();
  const SourceAttribution& a = computeSummary(*t, {}).sourceLines;
  ASSERT_EQ(a.lines.size(), 3u);
  EXPECT_EQ(a.lines[0].source, "m.py:12");
  EXPECT_EQ(a.lines[0].deviceNs, 10'333);
  EXPECT_EQ(a.lines[0].events, 2u);
  EXPECT_EQ(a.lines[0].function, "");
  EXPECT_EQ(a.lines[1].source, "m.py:10");
  EXPECT_EQ(a.lines[1].deviceNs, 334);
  EXPECT_EQ(a.lines[2].source, "m.py:11");
  EXPECT_EQ(a.lines[2].deviceNs, 333);
  EXPECT_EQ(a.compiledEvents, 2u);
  EXPECT_EQ(a.compiledNs, 11'000);
  EXPECT_EQ(a.stackEvents + a.unattributedEvents, 0u);
}

TEST(Summary, UserSourceLineOfAPythonFrame) {
  using Line = std::pair<std::string, std::string>;
  EXPECT_EQ(userSourceLine("/home/u/model.py(49): forward"), Line("/home/u/model.py:49", "forward"));
  EXPECT_EQ(userSourceLine("train.py(20): <lambda>"), Line("train.py:20", "<lambda>"));
  // torch_openreg/ is not torch/.
  EXPECT_EQ(userSourceLine("/w/torch_openreg/demo/model.py(7): forward"),
            Line("/w/torch_openreg/demo/model.py:7", "forward"));
  EXPECT_EQ(userSourceLine("/w/f(x).py(3): g"), Line("/w/f(x).py:3", "g"));
  for (const char* notUser :
       {"<built-in method add of type object at 0x7f>", "nn.Module: Linear_0",
        "/v/lib/python3.11/site-packages/torch/nn/modules/module.py(1751): _call_impl", "torch/_tensor.py(41): wrapped",
        "/opt/dist-packages/numpy/core.py(3): f", "/usr/lib/python3.11/contextlib.py(141): __exit__", "model.py(x): f",
        "model.py(): f", "(12): f", "<string>(1): <module>",
        // Inductor's generated code, named absolutely or relatively (the cache folder torchinductor_<user>).
        "/tmp/torchinductor_root/ab/cabc.py(42): call", "torchinductor_root/ab/cabc.py(42): call"}) {
    EXPECT_EQ(userSourceLine(notUser), std::nullopt) << notUser;
  }
}

}  // namespace
}  // namespace openreg::trace
