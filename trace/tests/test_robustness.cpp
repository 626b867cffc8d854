// Corrupted and truncated traces: every analysis must finish, whatever the
// input (run under the sanitizers by scripts/test.sh).
#include <gtest/gtest.h>

#include <random>

#include "analysis.h"
#include "trace_builder.h"

namespace openreg::trace {
namespace {

using testing::TraceBuilder;

std::string sample() {
  TraceBuilder b;
  b.lanes(0, {7, 8}).span(0, 100'000);
  b.op("ProfilerStep#1", 0, 90'000, 1, "user_annotation").python("train.py(1): f", 100, 80'000);
  b.launch("aten::mm", "gemm", 1'000, 20'000, 5'000, 0, 7, 11, 2);
  b.launch("aten::add", "add", 12'000, 26'000, 3'000, 0, 8, 12, 3);
  b.memory(1'500, 20, 0, 4096, 4096).memory(13'000, 20, 0, 0, -4096);
  b.raw(R"({"ph":"X","cat":"gpu_user_annotation","name":"fwd","pid":0,"tid":7,"ts":19.999,"dur":10.0})");
  b.raw(R"({"name":"Record Window End","ph":"i","s":"g","pid":"","tid":"","ts":100.5})");
  return b.json();
}

// Runs every analysis on `text` and checks what holds whatever the input: every
// check reports, and a parse error shows as json_valid failing. Returns
// whether the text parsed. Uncompressed input never throws (IoError is for
// gzip only), so an exception fails the test.
bool analyseEverything(const std::string& text) {
  std::unique_ptr<Trace> t = loadTraceBuffer(text.data(), text.size(), {});
  CheckReport r = runChecks(*t, {});
  EXPECT_EQ(r.results.size(), checkTable().size());
  bool jsonValid = false;
  for (const auto& result : r.results) {
    if (result.name == "json_valid") jsonValid = result.status == CheckResult::kPass;
  }
  EXPECT_EQ(jsonValid, !t->parseError.has_value());
  if (t->parseError) EXPECT_FALSE(r.ok);
  EXPECT_FALSE(checkReportToJson(*t, r).empty());
  if (t->parseError) return false;  // the C ABI refuses the rest on invalid JSON
  SummaryOptions o;
  EXPECT_FALSE(summaryToJson(*t, computeSummary(*t, o), o).empty());
  EXPECT_FALSE(timelineJson(*t, {.width = 50}).empty());
  return true;
}

TEST(Robustness, EveryPrefixOfATrace) {
  const std::string text = sample();
  ASSERT_TRUE(analyseEverything(text));
  size_t parsed = 0;
  for (size_t n = 0; n < text.size(); n += 7) parsed += analyseEverything(text.substr(0, n));
  EXPECT_EQ(parsed, 0u) << "a strict prefix of a JSON object is never valid JSON";
}

TEST(Robustness, RandomByteEdits) {
  const std::string text = sample();
  const std::string alphabet = "{}[]\",:-.0123456789eE truefalsnl\\u\x01\xC3\xFF";
  std::mt19937 rng(20260101);
  for (int round = 0; round < 3000; ++round) {
    std::string s = text;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t pos = rng() % s.size();
      char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          s[pos] = c;
          break;
        case 1:
          s.erase(pos, 1 + rng() % 8);
          break;
        default:
          s.insert(pos, 1, c);
          break;
      }
    }
    analyseEverything(s);
  }
}

TEST(Robustness, ExtremeValues) {
  TraceBuilder b;
  b.raw(R"({"ph":"X","cat":"kernel","name":"huge","pid":0,"tid":1,"ts":2000000000000000,"dur":2000000000000000,
            "args":{"device":0,"stream":1,"correlation":1}})");
  b.raw(R"({"ph":"X","cat":"kernel","name":"huge2","pid":0,"tid":1,"ts":-2000000000000000,"dur":2000000000000000,
            "args":{"device":0,"stream":1,"correlation":-9223372036854775808}})");
  b.raw(R"({"ph":"X","cat":"kernel","name":"too big","pid":0,"tid":1,"ts":9e300,"dur":1})");
  b.raw(
      R"({"ph":"X","cat":"cpu_op","name":"op","pid":9223372036854775807,"tid":-9223372036854775808,"ts":0,"dur":1e-9})");
  b.raw(
      R"({"ph":"i","name":"[memory]","pid":1,"tid":1,"ts":1,"args":{"Device Type":20,"Total Allocated":9223372036854775807}})");
  EXPECT_TRUE(analyseEverything(b.json()));
  auto t = b.load();
  EXPECT_EQ(t->malformedCount, 1u);  // 9e300 us is out of range
}

}  // namespace
}  // namespace openreg::trace
