#include <gtest/gtest.h>

#include "trace_builder.h"
#include "trace_model.h"

namespace openreg::trace {
namespace {

using testing::kHostPid;
using testing::kHostTid;
using testing::TraceBuilder;

uint32_t find_slice(const Trace& t, std::string_view name) {
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
  ASSERT_FALSE(t->parse_error) << t->parse_error->message;
  EXPECT_EQ(t->event_count, 14u);
  EXPECT_EQ(t->slices.size(), 4u);
  EXPECT_EQ(t->flows.size(), 2u);
  ASSERT_EQ(t->memory.size(), 1u);
  EXPECT_EQ(t->memory[0].total_allocated.value, 4096);
  EXPECT_EQ(t->memory[0].device_type.value, 20);
  ASSERT_TRUE(t->record_window_end);
  EXPECT_EQ(*t->record_window_end, 120);

  const Slice& k = t->slices[find_slice(*t, "add_kernel")];
  EXPECT_TRUE(t->is_device(k));
  EXPECT_EQ(k.ts, 20'000);
  EXPECT_EQ(k.dur, 3'000);
  EXPECT_EQ(k.stream.value, 7);
  EXPECT_EQ(t->lane_kind[k.lane], LaneKind::kDevice);
  EXPECT_EQ(t->str(t->threads[k.lane].name), "stream 7");
  EXPECT_EQ(t->process(Key{0, false})->sort_index, 5'000'000);

  const Slice& rt = t->slices[find_slice(*t, "orLaunchKernel")];
  EXPECT_EQ(t->role(rt.cat), CategoryRole::kRuntime);
  EXPECT_EQ(t->lane_kind[rt.lane], LaneKind::kHost);
  const Slice& span = t->slices[find_slice(*t, "PyTorch Profiler (0)")];
  EXPECT_EQ(t->role(span.cat), CategoryRole::kSpan);
  EXPECT_EQ(t->lane_kind[span.lane], LaneKind::kOther);
  EXPECT_EQ(t->origin_ns, 0);
}

TEST(TraceModel, KeepsEventsBeforeAParseError) {
  TraceBuilder b;
  b.op("aten::a", 0, 10, 1).op("aten::b", 20, 10, 2);
  std::string text = b.json();
  text.insert(text.find(R"({"ph":"X","cat":"cpu_op","name":"aten::b")"), "!!");
  auto t = load_trace_buffer(text.data(), text.size(), {});
  ASSERT_TRUE(t->parse_error);
  EXPECT_EQ(t->slices.size(), 1u);
  EXPECT_GT(t->parse_error->offset, 0u);
}

TEST(TraceModel, DocumentWithoutTraceEventsIsAnError) {
  std::string text = R"({"schemaVersion": 1})";
  auto t = load_trace_buffer(text.data(), text.size(), {});
  ASSERT_TRUE(t->parse_error);
  EXPECT_NE(t->parse_error->message.find("traceEvents"), std::string::npos);
}

TEST(TraceModel, AcceptsTheBareArrayFormat) {
  std::string text = R"([{"ph":"X","name":"a","cat":"cpu_op","pid":1,"tid":1,"ts":1,"dur":2}])";
  auto t = load_trace_buffer(text.data(), text.size(), {});
  EXPECT_FALSE(t->parse_error);
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
  EXPECT_FALSE(t->parse_error);
  EXPECT_EQ(t->malformed_count, 5u);
  EXPECT_TRUE(t->slices.empty());
}

TEST(TraceModel, InfersDeviceCategoriesFromArgs) {
  TraceBuilder b;
  b.kernel("ccp", 0, 10, 0, 3, 1, 1, "mtia_ccp_events");
  b.raw(R"({"ph":"X","cat":"mtia_runtime","name":"launch","pid":1000,"tid":1000,"ts":0,"dur":1,"args":{"correlation":1}})");
  auto t = b.load();
  EXPECT_TRUE(t->is_device(t->slices[0]));
  EXPECT_EQ(t->role(t->slices[1].cat), CategoryRole::kRuntime);

  LoadOptions no_inference;
  no_inference.infer_device_categories = false;
  auto t2 = b.load(no_inference);
  EXPECT_FALSE(t2->is_device(t2->slices[0]));
}

TEST(TraceModel, SynchronisationsOnStreamRowsAreNotWork) {
  // Kineto's CUDA_SYNC rows carry stream and correlation too; waiting is not being busy.
  TraceBuilder b;
  b.kernel("k", 0, 10, 0, 7, 1, 1);
  b.kernel("Stream Wait Event", 20, 5, 0, 7, 2, 2, "cuda_sync");
  auto t = b.load();
  EXPECT_TRUE(t->is_device(t->slices[0]));
  EXPECT_FALSE(t->is_device(t->slices[1]));
  EXPECT_EQ(t->role(t->slices[1].cat), CategoryRole::kAnnotation);
  EXPECT_EQ(t->lane_kind[t->slices[1].lane], LaneKind::kDevice);
}

TEST(TraceModel, ConfiguredCategoriesOverrideDefaults) {
  TraceBuilder b;
  b.kernel("k", 0, 10, 0, 3, 1, 1, "my_kernel", R"("queue":3)");
  b.raw(R"({"ph":"X","cat":"my_api","name":"launch","pid":1000,"tid":1000,"ts":0,"dur":1,"args":{"correlation":1}})");
  LoadOptions o;
  o.device_categories = {"my_kernel"};
  o.runtime_categories = {"my_api"};
  o.runtime_categories_given = true;
  auto t = b.load(o);
  EXPECT_TRUE(t->is_device(t->slices[0]));
  EXPECT_EQ(t->role(t->slices[1].cat), CategoryRole::kRuntime);
  ASSERT_EQ(t->device_categories.size(), 1u);
  EXPECT_EQ(t->str(t->device_categories[0]), "my_kernel");
}

TEST(TraceModel, StringPidsAndTids) {
  TraceBuilder b;
  b.raw(R"({"ph":"X","cat":"cpu_op","name":"a","pid":"host","tid":"main","ts":0,"dur":5})");
  auto t = b.load();
  ASSERT_EQ(t->slices.size(), 1u);
  const Lane& lane = t->lanes[t->slices[0].lane];
  EXPECT_TRUE(lane.pid.is_string);
  EXPECT_EQ(t->key_text(lane.pid), "host");
  EXPECT_EQ(t->key_text(lane.tid), "main");
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
  EXPECT_EQ(t->str(t->slices[t->innermost_at(lane, 130, kAnyRole)].name), "aten::empty");
  EXPECT_EQ(t->str(t->slices[t->innermost_at(lane, 210, kAnyRole)].name), "orLaunchKernel");
  EXPECT_EQ(t->str(t->slices[t->innermost_at(lane, 210, role_bit(CategoryRole::kOp))].name), "aten::add");
  EXPECT_EQ(t->str(t->slices[t->innermost_at(lane, 450, kAnyRole)].name), "train.py(3): step");
  EXPECT_EQ(t->str(t->slices[t->innermost_at(lane, 450, role_bit(CategoryRole::kOp))].name), "ProfilerStep#1");
  EXPECT_EQ(t->innermost_at(lane, 2'000, kAnyRole), kNoSlice);
  // Ends are inclusive: a flow start at a slice's last ns still binds to it.
  EXPECT_EQ(t->str(t->slices[t->innermost_at(lane, 600, role_bit(CategoryRole::kOp))].name), "aten::mul");

  std::vector<std::string_view> names;
  for (uint32_t i : t->stack_at(lane, 130)) names.push_back(t->str(t->slices[i].name));
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
  bool via_correlation = true;
  EXPECT_EQ(t->str(t->slices[t->op_of_device_slice(t->slices[find_slice(*t, "k1")], &via_correlation)].name), "aten::add");
  EXPECT_FALSE(via_correlation);
  EXPECT_EQ(t->str(t->slices[t->op_of_device_slice(t->slices[find_slice(*t, "k2")], &via_correlation)].name), "aten::mul");
  EXPECT_TRUE(via_correlation);
  EXPECT_EQ(t->op_of_device_slice(t->slices[find_slice(*t, "k3")]), kNoSlice);
}

}  // namespace
}  // namespace openreg::trace
