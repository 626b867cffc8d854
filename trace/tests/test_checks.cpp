#include <gtest/gtest.h>

#include <set>

#include "analysis.h"
#include "trace_builder.h"

namespace openreg::trace {
namespace {

using testing::kHostPid;
using testing::kHostTid;
using testing::TraceBuilder;

// Three ops, each launching one device event on device 0, linked and
// arrowed the way the openreg plugin (and Kineto's CUDA path) writes them.
TraceBuilder clean() {
  TraceBuilder b;
  b.lanes(0, {7, 8}).span(0, 100'000);
  b.launch("aten::mm", "gemm", 1'000, 20'000, 5'000, 0, 7, 11, 2);
  b.launch("aten::add", "add", 12'000, 26'000, 3'000, 0, 7, 12, 3);
  b.launch("aten::mul", "mul", 30'000, 32'000, 4'000, 0, 8, 13, 4);
  return b;
}

// Checks with findings, failing or only warning.
std::set<std::string> failing(const CheckReport& r) {
  std::set<std::string> out;
  for (const CheckResult& c : r.results)
    if (c.status == CheckResult::kFail || c.status == CheckResult::kWarn) out.insert(c.name);
  return out;
}

std::set<std::string> withStatus(const CheckReport& r, CheckResult::Status status) {
  std::set<std::string> out;
  for (const CheckResult& c : r.results)
    if (c.status == status) out.insert(c.name);
  return out;
}

uint64_t found(const CheckResult& c) { return c.violations + c.warnings; }

const CheckResult& result(const CheckReport& r, const std::string& name) {
  for (const CheckResult& c : r.results)
    if (c.name == name) return c;
  throw std::runtime_error("no check " + name);
}

CheckReport check(const TraceBuilder& b, const CheckOptions& o = {}) { return runChecks(*b.load(), o); }

TEST(Checks, CleanTracePassesEverything) {
  CheckReport r = check(clean());
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(failing(r), std::set<std::string>{});
  // It has no sync rows: the sync rules skip (test_checks_sync.cpp runs them on one that has).
  for (const CheckResult& c : r.results) {
    bool syncRule = c.name.rfind("sync_", 0) == 0;
    EXPECT_EQ(c.status, syncRule ? CheckResult::kSkipped : CheckResult::kPass) << c.name << ": " << c.note;
  }
}

TEST(Checks, TableNamesAreUniqueAndAllRun) {
  std::set<std::string> names;
  for (const CheckInfo& c : checkTable()) EXPECT_TRUE(names.insert(c.name).second) << c.name;
  EXPECT_EQ(check(clean()).results.size(), checkTable().size());
}

TEST(Checks, InvalidJson) {
  std::string text = clean().json();
  text.resize(text.size() / 2);
  auto t = loadTraceBuffer(text.data(), text.size(), {});
  CheckReport r = runChecks(*t, {});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(failing(r), std::set<std::string>{"json_valid"});
  EXPECT_EQ(result(r, "flow_pairs").status, CheckResult::kSkipped);
}

TEST(Checks, MalformedEvent) {
  TraceBuilder b = clean();
  b.raw(R"({"ph":"X","cat":"cpu_op","name":"no dur","pid":1000,"tid":1001,"ts":5.0})");
  CheckReport r = check(b);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(failing(r), std::set<std::string>{"events_well_formed"});
}

TEST(Checks, DeviceEventWithoutStream) {
  TraceBuilder b = clean();
  b.kernel("no_stream", 40'000, 1'000, 0, 7, 20, 2, "kernel", R"("External id":2,"device":0,"correlation":20)");
  CheckReport r = check(b);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(failing(r), (std::set<std::string>{"device_args", "device_events_launched"}));
  const CheckResult& c = result(r, "device_args");
  EXPECT_EQ(c.violations, 1u);
  ASSERT_EQ(c.examples.size(), 1u);
  EXPECT_NE(c.examples[0].message.find("no \"stream\""), std::string::npos);
  ASSERT_EQ(c.examples[0].events.size(), 1u);
}

TEST(Checks, StreamZeroAndStringArgs) {
  TraceBuilder b = clean();
  b.thread(0, 0, "stream 0");
  b.kernel("stream_zero", 40'000, 1'000, 0, 0, 21, 2);
  b.kernel("string_device", 42'000, 1'000, 0, 8, 22, 2, "kernel",
           R"("External id":2,"device":"0","stream":8,"correlation":22)");
  CheckReport r = check(b);
  EXPECT_EQ(failing(r), (std::set<std::string>{"device_args", "device_events_launched"}));
  // Stream 0 and a string device break no consumer (HTA keeps stream >= 0
  // and does not read device): warnings, unless strict.
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(result(r, "device_args").status, CheckResult::kWarn);
  EXPECT_EQ(result(r, "device_args").violations, 0u);
  EXPECT_EQ(result(r, "device_args").warnings, 2u);
  EXPECT_TRUE(result(r, "device_args").examples[0].artifact);
  CheckReport strict = check(b, {.strict = true});
  EXPECT_FALSE(strict.ok);
  EXPECT_EQ(result(strict, "device_args").status, CheckResult::kFail);
  EXPECT_EQ(result(strict, "device_args").violations, 2u);
}

TEST(Checks, KernelWithoutCorrelationFailsButVendorRecordOnlyWarns) {
  TraceBuilder b = clean();
  b.kernel("no_corr", 40'000, 1'000, 0, 7, 20, 2, "kernel", R"("External id":2,"device":0,"stream":7)");
  CheckReport r = check(b);
  EXPECT_EQ(result(r, "device_args").status, CheckResult::kFail);
  EXPECT_FALSE(r.ok);

  TraceBuilder v = clean();
  v.kernel("event_wait", 40'000, 1'000, 0, 7, 20, 2, "mtia_ccp_events", R"("stream":7)");
  LoadOptions o;
  o.deviceCategories = {"kernel", "mtia_ccp_events"};
  CheckReport rv = runChecks(*loadTraceBuffer(v.json().data(), v.json().size(), o), {});
  EXPECT_EQ(result(rv, "device_args").status, CheckResult::kWarn);
  EXPECT_EQ(result(rv, "device_args").warnings, 1u);
}

TEST(Checks, DeviceLanesAboveTheHost) {
  TraceBuilder b;
  b.process(kHostPid, "python", kHostPid).thread(kHostPid, kHostTid, "main");
  b.process(0, "openreg 0", 3).thread(0, 7, "stream 7");  // 3 < 1000: drawn above the host
  b.span(0, 100'000).launch("aten::mm", "gemm", 1'000, 20'000, 5'000, 0, 7, 11, 2);
  CheckReport r = check(b);
  EXPECT_EQ(failing(r), std::set<std::string>{"device_lanes_below_host"});
  const CheckResult& c = result(r, "device_lanes_below_host");
  ASSERT_EQ(c.examples.size(), 1u);
  EXPECT_EQ(c.examples[0].events.size(), 2u);
  EXPECT_EQ(c.examples[0].events[0].kind, EventRef::kMeta);
}

TEST(Checks, DeviceLanesWithoutSortIndexSortByPid) {
  TraceBuilder b;
  b.span(0, 100'000).launch("aten::mm", "gemm", 1'000, 20'000, 5'000, 0, 7, 11, 2);
  CheckReport r = check(b);
  // Layout only: a warning, a failure under strict.
  EXPECT_EQ(result(r, "device_lanes_below_host").status, CheckResult::kWarn);
  EXPECT_EQ(result(check(b, {.strict = true}), "device_lanes_below_host").status, CheckResult::kFail);
}

TEST(Checks, FlowStartWithoutFinish) {
  TraceBuilder b = clean();
  b.flow('s', 99, 3'000, kHostPid, kHostTid);
  CheckReport r = check(b);
  EXPECT_EQ(failing(r), std::set<std::string>{"flow_pairs"});
  EXPECT_NE(result(r, "flow_pairs").examples[0].message.find("1 start(s), 0 finish(es)"), std::string::npos);
  // Kineto writes such halves itself; no viewer is hurt.
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(result(r, "flow_pairs").status, CheckResult::kWarn);
  EXPECT_TRUE(result(r, "flow_pairs").examples[0].artifact);
  EXPECT_FALSE(check(b, {.strict = true}).ok);
}

TEST(Checks, DuplicateFlowStart) {
  TraceBuilder b = clean();
  b.flow('s', 11, 3'500, kHostPid, kHostTid);
  CheckReport r = check(b);
  EXPECT_EQ(failing(r), std::set<std::string>{"flow_pairs"});
  EXPECT_EQ(result(r, "flow_pairs").examples[0].events.size(), 3u);
  // Two starts draw the arrow from the wrong slice: it fails.
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(result(r, "flow_pairs").status, CheckResult::kFail);
}

TEST(Checks, FlowPointingBackwards) {
  TraceBuilder b = clean();
  // The kernel starts 3 us before its launch call.
  b.launch("aten::sub", "early", 50'000, 49'000, 500, 0, 8, 30, 5);
  CheckReport r = check(b);
  // The arrow shows it; device_after_launch finds it by correlation, arrow or not.
  EXPECT_EQ(failing(r), (std::set<std::string>{"flow_forward", "device_after_launch"}));
  EXPECT_NE(result(r, "flow_forward").examples[0].message.find("3.000 us before"), std::string::npos);
}

TEST(Checks, FlowWithinOneLane) {
  TraceBuilder b = clean();
  b.flow('s', 77, 3'000, kHostPid, kHostTid).flow('f', 77, 4'000, kHostPid, kHostTid);
  CheckReport r = check(b);
  EXPECT_EQ(failing(r), std::set<std::string>{"flow_distinct_lanes"});
}

TEST(Checks, FlowStartOutsideAnyHostSlice) {
  TraceBuilder b = clean();
  b.kernel("late_launch", 60'000, 1'000, 0, 8, 40, 0, "kernel", R"("device":0,"stream":8,"correlation":40)");
  b.flow('s', 40, 55'000, kHostPid, kHostTid).flow('f', 40, 60'000, 0, 8);
  CheckReport r = check(b);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(failing(r),
            (std::set<std::string>{"flow_start_in_host_slice", "device_events_linked", "device_events_launched"}));
}

TEST(Checks, FlowStartOnADeviceLane) {
  TraceBuilder b = clean();
  b.flow('s', 41, 21'000, 0, 7).flow('f', 41, 33'000, 0, 8);
  CheckReport r = check(b);
  EXPECT_EQ(failing(r), std::set<std::string>{"flow_start_in_host_slice"});
  EXPECT_NE(result(r, "flow_start_in_host_slice").examples[0].message.find("not a host thread"), std::string::npos);
}

TEST(Checks, FlowFinishOutsideAnySlice) {
  TraceBuilder b = clean();
  b.flow('s', 42, 3'000, kHostPid, kHostTid).flow('f', 42, 90'000, 0, 8);
  CheckReport r = check(b);
  EXPECT_TRUE(r.ok);  // a warning
  EXPECT_EQ(failing(r), std::set<std::string>{"flow_finish_bound"});
}

TEST(Checks, FlowFinishWithoutBindingPoint) {
  // Without "bp":"e" a viewer binds the next slice that starts on the row.
  auto finish = [](int64_t id, int64_t ts) {
    return R"({"ph":"f","id":)" + std::to_string(id) + R"(,"pid":0,"tid":8,"ts":)" + TraceBuilder::us(ts) +
           R"(,"cat":"ac2g","name":"ac2g"})";
  };
  TraceBuilder b = clean();
  b.flow('s', 43, 3'000, kHostPid, kHostTid).raw(finish(43, 31'000));  // mul starts at 32 us
  EXPECT_EQ(failing(check(b)), std::set<std::string>{});
  b.flow('s', 44, 3'000, kHostPid, kHostTid).raw(finish(44, 40'000));  // nothing starts after it
  EXPECT_EQ(failing(check(b)), std::set<std::string>{"flow_finish_bound"});
}

TEST(Checks, PartiallyOverlappingKernelsOnOneStream) {
  TraceBuilder b = clean();
  b.kernel("overlap", 27'000, 5'000, 0, 7, 50, 3);
  CheckReport r = check(b);
  EXPECT_EQ(failing(r), (std::set<std::string>{"device_rows_disjoint", "device_events_launched"}));
  const CheckResult& c = result(r, "device_rows_disjoint");
  EXPECT_EQ(c.violations, 1u);
  EXPECT_NE(c.examples[0].message.find("overlaps \"add\" by 2.000 us"), std::string::npos);
}

TEST(Checks, IdenticalKernelsOnOneStream) {
  TraceBuilder b = clean();
  b.kernel("twin", 20'000, 5'000, 0, 7, 51, 2);
  CheckReport r = check(b);
  EXPECT_EQ(failing(r), (std::set<std::string>{"device_rows_disjoint", "device_events_launched"}));
  EXPECT_NE(result(r, "device_rows_disjoint").examples[0].message.find("lies inside"), std::string::npos);
}

TEST(Checks, BackToBackAndInstantKernelsDoNotOverlap) {
  TraceBuilder b = clean();
  b.kernel("instant", 25'000, 0, 0, 7, 52, 2);   // at gemm's end
  b.kernel("next", 29'000, 1'000, 0, 7, 53, 3);  // at add's end
  CheckReport r = check(b, {.skip = {"device_events_launched"}});
  EXPECT_EQ(failing(r), std::set<std::string>{});
}

TEST(Checks, KernelsOnDifferentStreamsMayOverlap) {
  TraceBuilder b = clean();
  b.kernel("concurrent", 21'000, 2'000, 0, 8, 54, 2);
  CheckReport r = check(b, {.skip = {"device_events_launched"}});
  EXPECT_EQ(failing(r), std::set<std::string>{});
}

TEST(Checks, AnnotationCrossingAKernel) {
  TraceBuilder b = clean();
  auto annotation = [&](int64_t ts, int64_t dur) {
    b.raw(R"({"ph":"X","cat":"gpu_user_annotation","name":"fwd","pid":0,"tid":7,"ts":)" + TraceBuilder::us(ts) +
          R"(,"dur":)" + TraceBuilder::us(dur) + "}");
  };
  annotation(19'999, 10'000);  // encloses gemm and add: fine
  CheckReport ok = check(b);
  EXPECT_EQ(failing(ok), std::set<std::string>{});
  annotation(24'000, 3'000);  // ends inside add
  CheckReport r = check(b);
  EXPECT_EQ(failing(r), std::set<std::string>{"device_rows_nest"});
}

TEST(Checks, KernelOutsideTheProfilingWindow) {
  TraceBuilder b = clean();
  b.launch("aten::div", "late", 60'000, 99'000, 5'000, 0, 8, 60, 6);
  CheckReport r = check(b);
  EXPECT_EQ(failing(r), std::set<std::string>{"device_events_in_window"});
  EXPECT_NE(result(r, "device_events_in_window").examples[0].message.find("ends 4.000 us after"), std::string::npos);
  // A tolerance is available for writers whose window is known to be loose.
  CheckReport slack = check(b, {.windowSlackNs = 4'000});
  EXPECT_EQ(failing(slack), std::set<std::string>{});
}

TEST(Checks, DuplicateCorrelation) {
  TraceBuilder b = clean();
  b.kernel("again", 60'000, 1'000, 0, 8, 11, 2);
  CheckReport r = check(b);
  EXPECT_EQ(failing(r), std::set<std::string>{"correlation_unique"});
  EXPECT_EQ(result(r, "correlation_unique").examples[0].events.size(), 2u);
  EXPECT_EQ(result(r, "correlation_unique").status, CheckResult::kFail);  // different work
}

TEST(Checks, OneLaunchSplitIntoRecordsOfTheSameWorkOnlyWarns) {
  TraceBuilder b = clean();
  b.kernel("gemm", 60'000, 1'000, 0, 8, 11, 2);  // same name and External id as correlation 11's
  CheckReport r = check(b);
  EXPECT_EQ(result(r, "correlation_unique").status, CheckResult::kWarn);
  EXPECT_NE(result(r, "correlation_unique").examples[0].message.find("of the same work"), std::string::npos);
  EXPECT_EQ(result(check(b, {.strict = true}), "correlation_unique").status, CheckResult::kFail);
}

TEST(Checks, EveryCheckNamesItsConsumer) {
  for (const CheckInfo& c : checkTable()) {
    EXPECT_GT(std::string(c.consumer).size(), 5u) << c.name;
    EXPECT_GT(std::string(c.breaks).size(), 10u) << c.name;
  }
}

TEST(Checks, LaneDisagreesWithArgs) {
  TraceBuilder b = clean();
  b.kernel("misplaced", 60'000, 1'000, 0, 8, 70, 2, "kernel",
           R"("External id":2,"device":0,"stream":9,"correlation":70)");
  CheckReport r = check(b, {.skip = {"device_events_launched"}});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(failing(r), std::set<std::string>{"device_lanes_match_args"});
}

TEST(Checks, UnnamedStreamRow) {
  TraceBuilder b = clean();
  b.kernel("unnamed", 60'000, 1'000, 0, 9, 71, 2);
  CheckReport r = check(b, {.skip = {"device_events_launched"}});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(failing(r), std::set<std::string>{"device_rows_named"});
}

TEST(Checks, HostOpsCrossing) {
  TraceBuilder b = clean();
  b.op("aten::a", 60'000, 1'000, 80).op("aten::b", 60'500, 1'000, 81);
  CheckReport r = check(b);
  // Perfetto spills a partly overlapping slice: a broken consumer.
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(withStatus(r, CheckResult::kFail), std::set<std::string>{"host_rows_nest"});
}

TEST(Checks, OnlyAndSkipSelectChecks) {
  TraceBuilder b = clean();
  b.kernel("again", 60'000, 1'000, 0, 8, 11, 2);
  CheckReport skipped = check(b, {.skip = {"correlation_unique"}});
  EXPECT_TRUE(skipped.ok);
  EXPECT_EQ(result(skipped, "correlation_unique").status, CheckResult::kSkipped);
  CheckReport only = check(b, {.only = {"flow_pairs"}});
  EXPECT_TRUE(only.ok);
  EXPECT_EQ(result(only, "correlation_unique").status, CheckResult::kSkipped);
  EXPECT_EQ(result(only, "flow_pairs").status, CheckResult::kPass);
  EXPECT_THROW(check(b, {.skip = {"no_such_check"}}), std::invalid_argument);
}

TEST(Checks, ExamplesAreCappedButAllViolationsCounted) {
  TraceBuilder b = clean();
  for (int i = 0; i < 20; ++i) b.kernel("k", 40'000 + i * 1'000, 500, 0, 8, 11, 2);
  CheckReport r = check(b, {.examples = 3, .skip = {"device_events_launched"}});
  const CheckResult& c = result(r, "correlation_unique");
  EXPECT_EQ(c.violations, 1u);  // one id shared by 21 events
  EXPECT_EQ(c.examples[0].events.size(), 4u);
  TraceBuilder many = clean();
  for (int i = 0; i < 20; ++i) many.kernel("k", 40'000 + i * 1'000, 500, 0, 8, 100 + i, 2, "kernel", R"("device":0)");
  CheckReport manyReport = check(many, {.examples = 3});
  const CheckResult& d = result(manyReport, "device_args");
  EXPECT_EQ(d.violations, 20u);
  EXPECT_EQ(d.examples.size(), 3u);
}

TEST(Checks, ReportJsonIsValidAndNamesEvents) {
  TraceBuilder b = clean();
  b.kernel("again", 60'000, 1'000, 0, 8, 11, 2);
  auto t = b.load();
  std::string json = checkReportToJson(*t, runChecks(*t, {}));
  JsonReader r(openMemorySource(json.data(), json.size()));
  EXPECT_NO_THROW(r.skipValue());
  EXPECT_NE(json.find(R"("ok":false)"), std::string::npos);
  EXPECT_NE(json.find(R"("name":"again")"), std::string::npos);
  EXPECT_NE(json.find(R"("ts":"60.000")"), std::string::npos);
}

}  // namespace
}  // namespace openreg::trace
