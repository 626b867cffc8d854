// The HTML report's data (report_*.cpp): steps, tables, memory curve and packed events.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "report_args.h"
#include "report_data.h"
#include "trace_builder.h"

namespace openreg::trace {
namespace {

using testing::TraceBuilder;

// A temporary file holding the trace's text: the report reads its file a second time for the args.
class TraceFile {
 public:
  explicit TraceFile(const std::string& text) {
    char name[] = "/tmp/openreg-report-test-XXXXXX";
    const int fd = mkstemp(name);
    path_ = name;
    if (fd >= 0) close(fd);
    std::ofstream(path_) << text;
  }
  ~TraceFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// As test_summary's oneStep: device busy 63 us of the 200 us step; the host's ops cover 112 us of the
// device's idle time (aten::item's synchronisation most of it); 25 us is idle.
TraceBuilder oneStep() {
  TraceBuilder b;
  b.lanes(0, {7, 8}).span(0, 200'000);
  b.op("ProfilerStep#1", 0, 200'000, 1, "user_annotation");
  b.python("train.py(12): step", 500, 198'500);
  b.raw(R"({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1000,"tid":1001,"ts":1.000,"dur":10.000,)"
        R"("args":{"External id":2,"Input Dims":[[4,8],[8,2]],"Sequence number":7}})");
  b.runtime("orLaunchKernel", 2'000, 1'000, 101, 2);
  b.kernel("gemm", 10'000, 30'000, 0, 7, 101, 2);
  b.op("aten::add", 20'000, 10'000, 3).runtime("orLaunchKernel", 21'000, 1'000, 102, 3);
  b.kernel("add", 15'000, 5'000, 0, 8, 102, 0, "kernel", R"("device":0,"stream":8,"correlation":102)");
  b.raw(R"({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1000,"tid":1001,"ts":40.000,"dur":10.000,)"
        R"("args":{"External id":4,"Input Dims":[[4,8],[8,2]],"Sequence number":8}})");
  b.runtime("orLaunchKernel", 41'000, 1'000, 103, 4);
  b.kernel("gemm", 45'000, 30'000, 0, 7, 103, 4);
  b.op("aten::item", 80'000, 100'000, 5).runtime("orMemcpyAsync", 80'500, 1'000, 105, 5);
  b.runtime("orStreamSynchronize", 82'000, 96'000, 104, 5);
  b.kernel("Memcpy DtoH (Device -> Host)", 170'000, 2'000, 0, 8, 105, 5, "gpu_memcpy");
  b.kernel("orphan", 190'000, 1'000, 0, 8, 106, 0, "kernel", R"("device":0,"stream":8,"correlation":106)");
  // Memory: two allocations live at the peak (12 KiB, in aten::add; the first in aten::mm), one freed before it.
  auto mem = [&](int64_t ts, int64_t total, int64_t bytes, int64_t addr) {
    b.raw(R"({"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1000,"tid":1001,"ts":)" +
          TraceBuilder::us(ts) + R"(,"args":{"Total Reserved":2097152,"Total Allocated":)" + std::to_string(total) +
          R"(,"Bytes":)" + std::to_string(bytes) + R"(,"Device Id":0,"Device Type":20,"Addr":)" + std::to_string(addr) +
          "}}");
  };
  mem(2'000, 4096, 4096, 1000);
  mem(3'000, 6144, 2048, 2000);
  mem(4'000, 4096, -2048, 2000);
  mem(21'000, 12'288, 8192, 3000);
  mem(41'000, 8192, -4096, 1000);
  return b;
}

std::string reportOf(const TraceBuilder& b, const ReportOptions& o = {}) {
  const TraceFile file(b.json());
  auto t = loadTraceFile(file.path(), {});
  EXPECT_FALSE(t->parseError);
  std::string json = reportJson(*t, file.path(), o);
  JsonReader r(openMemorySource(json.data(), json.size()));
  EXPECT_NO_THROW(r.skipValue());
  EXPECT_TRUE(r.atEnd());
  return json;
}

bool has(const std::string& json, const std::string& part) { return json.find(part) != std::string::npos; }

TEST(Report, StepSplitsIntoDeviceHostAndIdle) {
  const std::string json = reportOf(oneStep());
  EXPECT_TRUE(has(json, R"("step_clock":"host",)"));
  EXPECT_TRUE(has(json, R"("steps":[{"name":"ProfilerStep#1","clock":"host","start_ns":0,"end_ns":200000,)"
                        R"("duration_ns":200000,"host_start_ns":0,"host_end_ns":200000,"host_duration_ns":200000,)"
                        R"("device_start_ns":10000,"device_end_ns":191000,"device_duration_ns":181000,)"
                        R"("lag_ns":-9000,"device_span_cut":false,)"
                        R"("device_ns":63000,"communication_ns":0,"comm_total_ns":0,"host_ns":112000,)"
                        R"("idle_ns":25000,"bound_by":"host"}])"))
      << json.substr(json.find("\"report\""), 900);
}

// testing::laggingLoop: on the device clock each step is its own kernel: the shares add up to the span and never
// count an earlier step's work.
TEST(Report, StepsOfALaggingDeviceAreTheirDeviceSpans) {
  const std::string json = reportOf(testing::laggingLoop());
  EXPECT_TRUE(has(json, R"("step_clock":"device","step_clock_note":"each step is its device span)")) << json;
  EXPECT_TRUE(has(json, R"({"name":"ProfilerStep#2","clock":"device","start_ns":27000,"end_ns":52000,)"
                        R"("duration_ns":25000,"host_start_ns":10000,"host_end_ns":20000,"host_duration_ns":10000,)"
                        R"("device_start_ns":27000,"device_end_ns":52000,"device_duration_ns":25000,"lag_ns":32000,)"
                        R"("device_span_cut":false,"device_ns":25000,"communication_ns":0,"comm_total_ns":0,)"
                        R"("host_ns":0,"idle_ns":0,"bound_by":"device"})"))
      << json.substr(json.find("\"report\""), 1500);
  EXPECT_TRUE(has(json, R"({"name":"ProfilerStep#4","clock":"device","start_ns":77000,"end_ns":87000,)"
                        R"("duration_ns":10000,"host_start_ns":30000,"host_end_ns":100000,"host_duration_ns":70000,)"
                        R"("device_start_ns":77000,"device_end_ns":87000,"device_duration_ns":10000,"lag_ns":-13000,)"))
      << json.substr(json.find("\"report\""), 2500);
}

TEST(Report, OpTableGroupsByInputShapes) {
  const std::string json = reportOf(oneStep());
  // Both aten::mm calls share their shapes: one row, two calls, both gemms' device time.
  EXPECT_TRUE(has(json, R"({"name":"aten::mm","input_dims":"[[4,8],[8,2]]","calls":2,"host_ns":20000,)"
                        R"("self_host_ns":20000,"device_ns":60000,"kernels":2})"));
}

TEST(Report, KernelTableNamesTheOpAndTheSourceLine) {
  const std::string json = reportOf(oneStep());
  EXPECT_TRUE(has(json, R"({"name":"gemm","category":"kernel","class":"compute","count":2,"total_ns":60000,)"
                        R"("avg_ns":30000,"min_ns":30000,"max_ns":30000,"op":"aten::mm","ops":1,)"
                        R"("source":"train.py:12 step"})"))
      << json.substr(json.find("\"kernel_table\""), 600);
  EXPECT_TRUE(has(json, R"({"name":"orphan","category":"kernel","class":"compute","count":1,"total_ns":1000,)"
                        R"("avg_ns":1000,"min_ns":1000,"max_ns":1000,"op":null,"ops":1,"source":null})"));
}

TEST(Report, CompiledKernelsNameTheirFusedSourceLines) {
  TraceBuilder b = oneStep();
  b.op("cpp_fused_gelu_view_6", 100'000, 5'000, 9).runtime("orLaunchKernel", 100'500, 1'000, 109, 9);
  b.kernel("cpp_fused_gelu_view_6", 110'000, 4'000, 0, 7, 109, 9, "kernel",
           R"("External id":9,"device":0,"stream":7,"correlation":109,"source_lines":["model.py:73","model.py:55"])");
  const std::string json = reportOf(b);
  EXPECT_TRUE(has(json, R"("op":"cpp_fused_gelu_view_6","ops":1,"source":"model.py:73, model.py:55"})"))
      << json.substr(json.find("\"kernel_table\""), 900);
}

TEST(Report, MemoryCurveKeepsThePeakAndWhatWasLiveAtIt) {
  const std::string json = reportOf(oneStep());
  EXPECT_TRUE(has(json, R"("peak_bytes":12288,"peak_ns":21000,"peak_op":"aten::add")"))
      << json.substr(json.find("\"memory\":["), 800);
  EXPECT_TRUE(has(json, R"("reserved":[2097152,2097152,2097152,2097152,2097152])"));
  EXPECT_TRUE(has(json, R"("live_allocations":2,"live_known":true,"live_at_peak":[{"bytes":8192,"t_ns":21000,)"
                        R"("op":"aten::add"},{"bytes":4096,"t_ns":2000,"op":"aten::mm"}])"))
      << json.substr(json.find("\"live_allocations\""), 300);
  // Bucketed to 2 points: the peak survives.
  ReportOptions o;
  o.memoryPoints = 2;
  EXPECT_TRUE(has(reportOf(oneStep(), o), R"("allocated":[6144,12288,8192])"));
}

TEST(Report, ArgsDropPerEventIdsSoThatTheyRepeat) {
  const TraceFile file(oneStep().json());
  auto t = loadTraceFile(file.path(), {});
  const EventArgs args = readEventArgs(file.path(), t->eventCount);
  size_t mm = 0;
  for (const std::string& text : args.texts) {
    EXPECT_FALSE(has(text, "External id") || has(text, "correlation") || has(text, "Sequence number")) << text;
    mm += text == R"({"Input Dims":[[4,8],[8,2]]})";
  }
  EXPECT_EQ(mm, 1u);  // both aten::mm calls share one text
  EXPECT_EQ(args.memory.size(), 5u);
}

TEST(Report, PackedEventsPairLaunchesAndKernels) {
  const std::string json = reportOf(oneStep());
  EXPECT_TRUE(has(json, R"("events":17,)"));
  ReportOptions o;
  o.events = false;
  EXPECT_TRUE(has(reportOf(oneStep(), o), R"("timeline":{"origin_ns":0,"end_ns":200000,"events":0}})"));
}

TEST(Report, OddArgsAndEmptyTracesAreReported) {
  TraceBuilder b;
  std::string deep = "1";
  for (int i = 0; i < 40; ++i) deep = "[" + deep + "]";
  b.raw(R"({"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1,"args":)" + deep + "}");
  b.raw(R"({"ph":"X","cat":"cpu_op","name":"b","pid":1,"tid":1,"ts":3,"dur":1,"args":{"x":)" + deep +
        R"(,"s":"<\/script>\u0000"}})");
  const std::string json = reportOf(b);
  EXPECT_TRUE(has(json, R"("steps":[{"name":"window")"));
  EXPECT_TRUE(has(reportOf(TraceBuilder()), R"("events":0)"));
}

TEST(Report, ArgsPassOnAMissingFileKeepsNothing) {
  const EventArgs args = readEventArgs("/nonexistent/openreg/trace.json", 3);
  EXPECT_EQ(args.argsOf.size(), 3u);
  EXPECT_EQ(args.texts.size(), 1u);
}

TEST(Report, ArgsPassOnTruncatedFilesKeepsWhatCameBefore) {
  const std::string whole = oneStep().json();
  for (size_t cut = 0; cut < whole.size(); cut += 37) {
    const TraceFile file(whole.substr(0, cut));
    const EventArgs args = readEventArgs(file.path(), 40);
    EXPECT_EQ(args.argsOf.size(), 40u);
    EXPECT_EQ(args.texts[0], "");
  }
}

TEST(Report, OptionsAreChecked) {
  EXPECT_EQ(parseReportOptions(R"({"top":3,"events":false})").top, 3);
  EXPECT_THROW(parseReportOptions(R"({"nope":1})"), std::invalid_argument);
  EXPECT_THROW(parseReportOptions(R"({"top":-1})"), std::invalid_argument);
  EXPECT_THROW(parseReportOptions(R"([1])"), std::invalid_argument);
}

}  // namespace
}  // namespace openreg::trace
