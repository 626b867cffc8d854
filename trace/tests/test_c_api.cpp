// The C ABI as a C caller sees it: linked against libopenreg_trace.so only.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "openreg/trace_analysis.h"

namespace {

const char kTrace[] = R"json({"traceEvents": [
  {"ph":"M","name":"process_sort_index","pid":0,"tid":0,"args":{"sort_index":5000000}},
  {"ph":"X","cat":"Trace","name":"PyTorch Profiler (0)","pid":"Spans","tid":"PyTorch Profiler","ts":0.0,"dur":100.0},
  {"ph":"X","cat":"cpu_op","name":"aten::add","pid":10,"tid":10,"ts":1.000,"dur":10.000,"args":{"External id":1}},
  {"ph":"X","cat":"privateuse1_runtime","name":"orLaunchKernel","pid":10,"tid":10,"ts":2.000,"dur":1.000,
   "args":{"External id":1,"correlation":5}},
  {"ph":"X","cat":"kernel","name":"add_kernel","pid":0,"tid":7,"ts":20.000,"dur":3.000,
   "args":{"External id":1,"device":0,"stream":7,"correlation":5}},
  {"ph":"s","id":5,"pid":10,"tid":10,"ts":2.000,"cat":"ac2g","name":"ac2g"},
  {"ph":"f","id":5,"pid":0,"tid":7,"ts":20.000,"cat":"ac2g","name":"ac2g","bp":"e"}
]})json";

// Owns a library string.
struct Str {
  char* p = nullptr;
  ~Str() { ortrace_free_string(p); }
  std::string s() const { return p ? p : ""; }
};

struct Handle {
  ortrace_trace* p = nullptr;
  ~Handle() { ortrace_close(p); }
};

TEST(CApi, SummaryCheckTimelineOnABuffer) {
  Handle h;
  Str err;
  ASSERT_EQ(ortrace_open_buffer(kTrace, sizeof kTrace - 1, nullptr, &h.p, &err.p), ORTRACE_OK) << err.s();
  EXPECT_EQ(err.p, nullptr);
  Str summary, check, timeline;
  ASSERT_EQ(ortrace_summary(h.p, R"({"top": 3})", &summary.p), ORTRACE_OK) << summary.s();
  EXPECT_NE(summary.s().find(R"("name":"add_kernel")"), std::string::npos);
  ASSERT_EQ(ortrace_check(h.p, nullptr, &check.p), ORTRACE_OK);
  EXPECT_NE(check.s().find(R"("ok":true)"), std::string::npos) << check.s();
  ASSERT_EQ(ortrace_timeline(h.p, R"({"width": 100})", &timeline.p), ORTRACE_OK);
  EXPECT_NE(timeline.s().find("device_rows"), std::string::npos);
}

TEST(CApi, OpensFiles) {
  char path[] = "/tmp/ortrace_test_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  FILE* f = fdopen(fd, "w");
  fputs(kTrace, f);
  fclose(f);
  Handle h;
  ASSERT_EQ(ortrace_open_file(path, "", &h.p, nullptr), ORTRACE_OK);
  Str out;
  EXPECT_EQ(ortrace_summary(h.p, nullptr, &out.p), ORTRACE_OK);
  std::remove(path);
}

TEST(CApi, MissingFileIsAnIoError) {
  Handle h;
  Str err;
  EXPECT_EQ(ortrace_open_file("/nonexistent/trace.json", nullptr, &h.p, &err.p), ORTRACE_ERROR_IO);
  EXPECT_EQ(h.p, nullptr);
  EXPECT_NE(err.s().find(R"("status":"io")"), std::string::npos) << err.s();
  EXPECT_NE(err.s().find("/nonexistent/trace.json"), std::string::npos);
}

TEST(CApi, BadOptionsAreRejected) {
  Handle h;
  Str err;
  EXPECT_EQ(ortrace_open_buffer(kTrace, sizeof kTrace - 1, R"({"device_categoriez": []})", &h.p, &err.p),
            ORTRACE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(err.s().find("device_categoriez"), std::string::npos);
  Str err2;
  EXPECT_EQ(ortrace_open_buffer(kTrace, sizeof kTrace - 1, "{not json", &h.p, &err2.p), ORTRACE_ERROR_INVALID_ARGUMENT);

  ASSERT_EQ(ortrace_open_buffer(kTrace, sizeof kTrace - 1, nullptr, &h.p, nullptr), ORTRACE_OK);
  Str out;
  EXPECT_EQ(ortrace_summary(h.p, R"({"top": "ten"})", &out.p), ORTRACE_ERROR_INVALID_ARGUMENT);
  Str out2;
  EXPECT_EQ(ortrace_check(h.p, R"({"only": ["no_such_check"]})", &out2.p), ORTRACE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out2.s().find("no_such_check"), std::string::npos);
}

TEST(CApi, InvalidJsonIsACheckResultButASummaryError) {
  const char broken[] = R"({"traceEvents": [{"ph":"X",)";
  Handle h;
  ASSERT_EQ(ortrace_open_buffer(broken, sizeof broken - 1, nullptr, &h.p, nullptr), ORTRACE_OK);
  Str summary;
  EXPECT_EQ(ortrace_summary(h.p, nullptr, &summary.p), ORTRACE_ERROR_PARSE);
  EXPECT_NE(summary.s().find(R"("status":"parse")"), std::string::npos);
  Str check;
  ASSERT_EQ(ortrace_check(h.p, nullptr, &check.p), ORTRACE_OK);
  EXPECT_NE(check.s().find(R"("ok":false)"), std::string::npos);
}

TEST(CApi, NullArgumentsAreErrorsNotCrashes) {
  Str out;
  EXPECT_EQ(ortrace_summary(nullptr, nullptr, &out.p), ORTRACE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ortrace_summary(nullptr, nullptr, nullptr), ORTRACE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ortrace_open_file(nullptr, nullptr, nullptr, nullptr), ORTRACE_ERROR_INVALID_ARGUMENT);
  ortrace_trace* h = nullptr;
  EXPECT_EQ(ortrace_open_file(nullptr, nullptr, &h, nullptr), ORTRACE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  ortrace_close(nullptr);
  ortrace_free_string(nullptr);
  EXPECT_STREQ(ortrace_status_name(ORTRACE_ERROR_PARSE), "parse");
  EXPECT_STRNE(ortrace_version(), "");
}

TEST(CApi, ListsChecks) {
  Str out;
  ASSERT_EQ(ortrace_list_checks(&out.p), ORTRACE_OK);
  EXPECT_NE(out.s().find(R"("name":"flow_pairs")"), std::string::npos);
}

TEST(CApi, OneHandleServesManyThreads) {
  Handle h;
  ASSERT_EQ(ortrace_open_buffer(kTrace, sizeof kTrace - 1, nullptr, &h.p, nullptr), ORTRACE_OK);
  Str reference;
  ASSERT_EQ(ortrace_summary(h.p, nullptr, &reference.p), ORTRACE_OK);
  std::vector<std::string> results(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) {
        Str s;
        if (ortrace_summary(h.p, nullptr, &s.p) != ORTRACE_OK) return;
        Str c;
        if (ortrace_check(h.p, nullptr, &c.p) != ORTRACE_OK) return;
        results[i] = s.s();
      }
    });
  for (auto& t : threads) t.join();
  for (const std::string& r : results) EXPECT_EQ(r, reference.s());
}

}  // namespace
