#include <gtest/gtest.h>

#include "trace_builder.h"
#include "trace_model.h"

namespace openreg::trace {
namespace {

using testing::kHostPid;
using testing::kHostTid;
using testing::TraceBuilder;

uint32_t findSlice(const Trace& t, std::string_view name) {
  for (uint32_t i = 0; i < t.slices.size(); ++i)
    if (t.str(t.slices[i].name) == name) return i;
  ADD_FAILURE() << "no slice " << name;
  return 0;
}

TEST(TraceModel, ReadsKinetoLayout) {
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 100'000).launch("aten::add", "add_kernel", 1'000, 20'000, 3'000, 0, 7, 11, 5);
  b.memory(1'500, 20, 0, 4096, 4096);
  b.raw(R"({"name":"Record Window End","ph":"i","s":"g","pid":"","tid":"","ts":0.120})");
  auto t = b.load();
  ASSERT_FALSE(t->parseError) << t->parseError->message;
  EXPECT_EQ(t->eventCount, 14u);
  EXPECT_EQ(t->slices.size(), 4u);
  EXPECT_EQ(t->flows.size(), 2u);
  ASSERT_EQ(t->memory.size(), 1u);
  EXPECT_EQ(t->memory[0].totalAllocated.value, 4096);
  EXPECT_EQ(t->memory[0].deviceType.value, 20);
  ASSERT_TRUE(t->recordWindowEnd);
  EXPECT_EQ(*t->recordWindowEnd, 120);

  const Slice& k = t->slices[findSlice(*t, "add_kernel")];
  EXPECT_TRUE(t->isDevice(k));
  EXPECT_EQ(k.ts, 20'000);
  EXPECT_EQ(k.dur, 3'000);
  EXPECT_EQ(k.stream.value, 7);
  EXPECT_EQ(t->laneKind[k.lane], LaneKind::Device);
  EXPECT_EQ(t->str(t->threads[k.lane].name), "stream 7");
  EXPECT_EQ(t->process(Key{0, false})->sortIndex, 5'000'000);

  const Slice& rt = t->slices[findSlice(*t, "orLaunchKernel")];
  EXPECT_EQ(t->role(rt.cat), CategoryRole::Runtime);
  EXPECT_EQ(t->laneKind[rt.lane], LaneKind::Host);
  const Slice& span = t->slices[findSlice(*t, "PyTorch Profiler (0)")];
  EXPECT_EQ(t->role(span.cat), CategoryRole::Span);
  EXPECT_EQ(t->laneKind[span.lane], LaneKind::Other);
  EXPECT_EQ(t->originNs, 0);
}

TEST(TraceModel, KeepsEventsBeforeAParseError) {
  TraceBuilder b;
  b.op("aten::a", 0, 10, 1).op("aten::b", 20, 10, 2);
  std::string text = b.json();
  text.insert(text.find(R"({"ph":"X","cat":"cpu_op","name":"aten::b")"), "!!");
  auto t = loadTraceBuffer(text.data(), text.size(), {});
  ASSERT_TRUE(t->parseError);
  EXPECT_EQ(t->slices.size(), 1u);
  EXPECT_GT(t->parseError->offset, 0u);
}

TEST(TraceModel, DocumentWithoutTraceEventsIsAnError) {
  std::string text = R"({"schemaVersion": 1})";
  auto t = loadTraceBuffer(text.data(), text.size(), {});
  ASSERT_TRUE(t->parseError);
  EXPECT_NE(t->parseError->message.find("traceEvents"), std::string::npos);
}

TEST(TraceModel, AcceptsTheBareArrayFormat) {
  std::string text = R"([{"ph":"X","name":"a","cat":"cpu_op","pid":1,"tid":1,"ts":1,"dur":2}])";
  auto t = loadTraceBuffer(text.data(), text.size(), {});
  EXPECT_FALSE(t->parseError);
  EXPECT_EQ(t->slices.size(), 1u);
}

TEST(TraceModel, CountsMalformedEvents) {
  TraceBuilder b;
  b.raw(R"({"ph":"X","name":"no dur","pid":1,"tid":1,"ts":1})")
      .raw(R"({"ph":"X","name":"negative","pid":1,"tid":1,"ts":1,"dur":-1})")
      .raw(R"({"name":"no ph","pid":1,"tid":1,"ts":1})")
      .raw(R"({"ph":"s","name":"flow without id","cat":"ac2g","pid":1,"tid":1,"ts":1})")
      .raw(R"(42)");
  auto t = b.load();
  EXPECT_FALSE(t->parseError);
  EXPECT_EQ(t->malformedCount, 5u);
  EXPECT_TRUE(t->slices.empty());
}

TEST(TraceModel, InfersDeviceCategoriesFromArgs) {
  TraceBuilder b;
  b.kernel("ccp", 0, 10, 0, 3, 1, 1, "mtia_ccp_events");
  b.raw(
      R"({"ph":"X","cat":"mtia_runtime","name":"launch","pid":1000,"tid":1000,"ts":0,"dur":1,"args":{"correlation":1}})");
  auto t = b.load();
  EXPECT_TRUE(t->isDevice(t->slices[0]));
  EXPECT_EQ(t->role(t->slices[1].cat), CategoryRole::Runtime);

  LoadOptions noInference;
  noInference.inferDeviceCategories = false;
  auto t2 = b.load(noInference);
  EXPECT_FALSE(t2->isDevice(t2->slices[0]));
}

TEST(TraceModel, SynchronisationsOnStreamRowsAreNotWork) {
  // Kineto's CUDA_SYNC rows carry stream and correlation too; waiting is not being busy.
  TraceBuilder b;
  b.kernel("k", 0, 10, 0, 7, 1, 1);
  b.kernel("Stream Wait Event", 20, 5, 0, 7, 2, 2, "cuda_sync");
  auto t = b.load();
  EXPECT_TRUE(t->isDevice(t->slices[0]));
  EXPECT_FALSE(t->isDevice(t->slices[1]));
  EXPECT_EQ(t->role(t->slices[1].cat), CategoryRole::Annotation);
  EXPECT_EQ(t->laneKind[t->slices[1].lane], LaneKind::Device);
}

TEST(TraceModel, ConfiguredCategoriesOverrideDefaults) {
  TraceBuilder b;
  b.kernel("k", 0, 10, 0, 3, 1, 1, "my_kernel", R"("queue":3)");
  b.raw(R"({"ph":"X","cat":"my_api","name":"launch","pid":1000,"tid":1000,"ts":0,"dur":1,"args":{"correlation":1}})");
  LoadOptions o;
  o.deviceCategories = {"my_kernel"};
  o.runtimeCategories = {"my_api"};
  o.runtimeCategoriesGiven = true;
  auto t = b.load(o);
  EXPECT_TRUE(t->isDevice(t->slices[0]));
  EXPECT_EQ(t->role(t->slices[1].cat), CategoryRole::Runtime);
  ASSERT_EQ(t->deviceCategories.size(), 1u);
  EXPECT_EQ(t->str(t->deviceCategories[0]), "my_kernel");
}

TEST(TraceModel, StringPidsAndTids) {
  TraceBuilder b;
  b.raw(R"({"ph":"X","cat":"cpu_op","name":"a","pid":"host","tid":"main","ts":0,"dur":5})");
  auto t = b.load();
  ASSERT_EQ(t->slices.size(), 1u);
  const Lane& lane = t->lanes[t->slices[0].lane];
  EXPECT_TRUE(lane.pid.isString);
  EXPECT_EQ(t->keyText(lane.pid), "host");
  EXPECT_EQ(t->keyText(lane.tid), "main");
}

TEST(TraceModel, InnermostEnclosingSlice) {
  TraceBuilder b;
  b.op("ProfilerStep#1", 0, 1'000, 1, "user_annotation")
      .python("train.py(3): step", 50, 900)
      .op("aten::add", 100, 300, 2)
      .op("aten::empty", 120, 50, 3)
      .runtime("orLaunchKernel", 200, 50, 9, 2)
      .op("aten::mul", 500, 100, 4);
  auto t = b.load();
  uint32_t lane = t->slices[0].lane;
  EXPECT_EQ(t->str(t->slices[t->innermostAt(lane, 130, kAnyRole)].name), "aten::empty");
  EXPECT_EQ(t->str(t->slices[t->innermostAt(lane, 210, kAnyRole)].name), "orLaunchKernel");
  EXPECT_EQ(t->str(t->slices[t->innermostAt(lane, 210, roleBit(CategoryRole::Op))].name), "aten::add");
  EXPECT_EQ(t->str(t->slices[t->innermostAt(lane, 450, kAnyRole)].name), "train.py(3): step");
  EXPECT_EQ(t->str(t->slices[t->innermostAt(lane, 450, roleBit(CategoryRole::Op))].name), "ProfilerStep#1");
  EXPECT_EQ(t->innermostAt(lane, 2'000, kAnyRole), kNoSlice);
  // Ends are inclusive: a flow start at a slice's last ns still binds to it.
  EXPECT_EQ(t->str(t->slices[t->innermostAt(lane, 600, roleBit(CategoryRole::Op))].name), "aten::mul");

  std::vector<std::string_view> names;
  for (uint32_t i : t->stackAt(lane, 130)) names.push_back(t->str(t->slices[i].name));
  EXPECT_EQ(names, (std::vector<std::string_view>{"ProfilerStep#1", "train.py(3): step", "aten::add", "aten::empty"}));
}

TEST(TraceModel, DeviceSliceFindsItsOp) {
  TraceBuilder b;
  b.launch("aten::add", "k1", 0, 20'000, 1'000, 0, 7, 11, 5);
  // No External id on the kernel: the runtime call's correlation leads to the op.
  b.op("aten::mul", 30'000, 10'000, 6);
  b.runtime("orLaunchKernel", 32'000, 1'000, 12, 6);
  b.kernel("k2", 50'000, 1'000, 0, 7, 12, 0, "kernel", R"("device":0,"stream":7,"correlation":12)");
  b.kernel("k3", 60'000, 1'000, 0, 7, 13, 0, "kernel", R"("device":0,"stream":7,"correlation":13)");
  auto t = b.load();
  bool viaCorrelation = true;
  EXPECT_EQ(t->str(t->slices[t->opOfDeviceSlice(t->slices[findSlice(*t, "k1")], &viaCorrelation)].name), "aten::add");
  EXPECT_FALSE(viaCorrelation);
  EXPECT_EQ(t->str(t->slices[t->opOfDeviceSlice(t->slices[findSlice(*t, "k2")], &viaCorrelation)].name), "aten::mul");
  EXPECT_TRUE(viaCorrelation);
  EXPECT_EQ(t->opOfDeviceSlice(t->slices[findSlice(*t, "k3")]), kNoSlice);
}

}  // namespace
}  // namespace openreg::trace
