// The trace's steps (steps.cpp): ProfilerStep#N ranges, or the optimizer's
// steps of an on-demand trace (no ProfilerStep#N: Kineto writes it for a
// daemon's request, with no torch.profiler.profile in the program), and the
// critical path taking them as steps. Times in the comments are microseconds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "critical_path.h"
#include "trace_builder.h"

namespace openreg::trace {
namespace {

using testing::kHostPid;
using testing::TraceBuilder;

constexpr int64_t kUs = 1'000;

struct Seen {
  std::string name;
  int64_t ts, end, number;
  bool range;
  bool operator==(const Seen&) const = default;
};

std::vector<Seen> steps(const Trace& t) {
  std::vector<Seen> out;
  for (const Step& s : t.steps) out.push_back({std::string(t.str(s.name)), s.ts, s.end, s.number, s.range != kNoSlice});
  return out;
}

// A training loop's host side: a kernel per step, the optimizer's range at
// its end (ends at 20, 50, 80), in a trace Kineto opened at 0.
TraceBuilder onDemandLoop(const std::string& metadata = "") {
  TraceBuilder b;
  b.lanes(0, {1}).span(0, 90 * kUs);
  if (!metadata.empty()) b.metadata("openreg_profiler", metadata);
  int64_t correlation = 100, id = 1;
  for (int64_t end : {20, 50, 80}) {
    b.launch("aten::mm", "gemm", (end - 15) * kUs, (end - 12) * kUs, 4 * kUs, 0, 1, ++correlation, ++id);
    b.op("Optimizer.step#SGD.step", (end - 4) * kUs, 4 * kUs, ++id, "user_annotation");
  }
  return b;
}

TEST(Steps, ProfilerStepsAreTheSteps) {
  TraceBuilder b;
  b.lanes(0, {1});
  b.op("ProfilerStep#4", 30 * kUs, 30 * kUs, 1, "user_annotation");
  b.op("ProfilerStep#3", 0, 30 * kUs, 2, "user_annotation");
  b.op("Optimizer.step#SGD.step", 20 * kUs, 5 * kUs, 3, "user_annotation");
  const auto t = b.load();
  EXPECT_EQ(t->stepSource, StepSource::ProfilerSteps);
  EXPECT_EQ(steps(*t), (std::vector<Seen>{{"ProfilerStep#3", 0, 30 * kUs, 3, true},
                                          {"ProfilerStep#4", 30 * kUs, 60 * kUs, 4, true}}));
  EXPECT_EQ(t->stepsNote, "");
}

// An iteration-based request starts on a step's boundary (Kineto starts it in
// the optimizer's hook): the first step starts with the trace, and steps are
// numbered by Kineto's step count, which openreg's metadata gives.
TEST(Steps, AnIterationBasedOnDemandTraceStartsOnAStep) {
  const auto t = onDemandLoop(R"({"on_demand": {"iterations": 3, "start_iteration": 9, "trace_id": "7"}})").load();
  EXPECT_EQ(t->stepSource, StepSource::OptimizerSteps);
  EXPECT_EQ(steps(*t), (std::vector<Seen>{{"iteration 10", 0, 20 * kUs, 10, false},
                                          {"iteration 11", 20 * kUs, 50 * kUs, 11, false},
                                          {"iteration 12", 50 * kUs, 80 * kUs, 12, false}}));
  EXPECT_NE(t->stepsNote.find("the first starts with the trace"), std::string::npos) << t->stepsNote;
  EXPECT_NE(t->stepsNote.find("numbered by Kineto's step count"), std::string::npos) << t->stepsNote;
}

// Any other on-demand trace (duration-based, or another backend's without
// openreg's metadata) starts within a step: what comes before the first
// optimizer step's end is no whole step.
TEST(Steps, OtherOnDemandTracesLeaveThePartStepOut) {
  for (const std::string metadata : {std::string(), std::string(R"({"on_demand": {"iterations": 0}})")}) {
    const auto t = onDemandLoop(metadata).load();
    EXPECT_EQ(t->stepSource, StepSource::OptimizerSteps);
    EXPECT_EQ(steps(*t), (std::vector<Seen>{{"iteration 1", 20 * kUs, 50 * kUs, 1, false},
                                            {"iteration 2", 50 * kUs, 80 * kUs, 2, false}}))
        << metadata;
    EXPECT_NE(t->stepsNote.find("part of a step and left out"), std::string::npos) << t->stepsNote;
  }
}

// The training loop's thread is the one with the most optimizer steps.
TEST(Steps, TheThreadWithTheMostOptimizerStepsIsTheLoop) {
  TraceBuilder b = onDemandLoop(R"({"on_demand": {"iterations": 3, "start_iteration": 0}})");
  b.op("Optimizer.step#Adam.step", 30 * kUs, 2 * kUs, 99, "user_annotation", kHostPid, 7);
  const auto t = b.load();
  ASSERT_EQ(t->steps.size(), 3u);
  EXPECT_EQ(t->steps[1].end, 50 * kUs);
}

// A container of optimizers (torchtitan's OptimizersContainer.step) records its own Optimizer.step# range
// around each optimizer's: one step, ending where the outermost range ends.
TEST(Steps, NestedOptimizerStepsAreOneStep) {
  TraceBuilder b = onDemandLoop();
  for (int64_t end : {20, 50, 80})
    b.op("Optimizer.step#AdamW.step", (end - 3) * kUs, 2 * kUs, 500 + end, "user_annotation");
  const auto t = b.load();
  EXPECT_EQ(steps(*t), (std::vector<Seen>{{"iteration 1", 20 * kUs, 50 * kUs, 1, false},
                                          {"iteration 2", 50 * kUs, 80 * kUs, 2, false}}));
}

TEST(Steps, NoStepsSaySo) {
  TraceBuilder b;
  b.lanes(0, {1}).launch("aten::mm", "gemm", 0, 3 * kUs, 4 * kUs, 0, 1, 101, 1);
  const auto t = b.load();
  EXPECT_EQ(t->stepSource, StepSource::None);
  EXPECT_TRUE(t->steps.empty());
  EXPECT_EQ(t->stepsNote, "no ProfilerStep#N ranges and no Optimizer.step# ranges: no steps");
  EXPECT_EQ(firstStepName(*t), "");
}

// The critical path takes an on-demand trace's steps as it takes
// ProfilerSteps: the first by default, any by its number.
TEST(Steps, TheCriticalPathOfAnOnDemandTracesStep) {
  const auto t = onDemandLoop(R"({"on_demand": {"iterations": 3, "start_iteration": 9}})").load();
  CpGraph g = buildCriticalPathGraph({t.get()}, CpOptions{});
  EXPECT_EQ(g.stepName, "iteration 10");
  EXPECT_EQ(g.steps[0].start, 0);
  EXPECT_EQ(g.steps[0].end, 20 * kUs);
  EXPECT_EQ(g.steps[0].slice, CpStep::kWholeTrace);  // no host range of its own
  CpOptions second;
  second.step = 11;
  g = buildCriticalPathGraph({t.get()}, second);
  EXPECT_EQ(g.stepName, "iteration 11");
  EXPECT_EQ(g.steps[0].start, 20 * kUs);
  const std::string each = criticalPathEachStepJson({t.get()}, CpOptions{});
  EXPECT_NE(each.find(R"("steps_from":"Optimizer.step#")"), std::string::npos) << each;
  for (const char* name : {"iteration 10", "iteration 11", "iteration 12"})
    EXPECT_NE(each.find(std::string(R"("step":")") + name + "\""), std::string::npos) << name;
}

// A rank's duration-based on-demand trace: the optimizer's steps end at `ends` (steps numbered from 1 in the trace).
auto onDemandRank(int rank, const std::vector<int64_t>& ends) {
  TraceBuilder b;
  b.lanes(0, {1}).span(0, 150 * kUs);
  b.metadata("distributedInfo", R"({"backend": "gloo", "rank": )" + std::to_string(rank) + R"(, "world_size": 2})");
  int64_t correlation = 100, id = 1;
  for (int64_t end : ends) {
    b.launch("aten::mm", "gemm", (end - 15) * kUs, (end - 12) * kUs, 4 * kUs, 0, 1, ++correlation, ++id);
    b.op("Optimizer.step#SGD.step", (end - 4) * kUs, 4 * kUs, ++id, "user_annotation");
  }
  return b.load();
}

// Two ranks' duration-based on-demand traces: each numbers its steps from 1, and rank 1's trace began after the
// end of the step that rank 0's first step ends. A step is matched across ranks by time, not by its number.
TEST(Steps, RanksStepsAreMatchedByTime) {
  const auto first = onDemandRank(0, {20, 50, 80});  // steps [20, 50] and [50, 80]
  const auto second = onDemandRank(1, {51, 81});     // step [51, 81] only: it overlaps rank 0's second
  CpOptions o;
  o.step = 2;  // rank 0's iteration 2: [50, 80]
  const CpGraph g = buildCriticalPathGraph({first.get(), second.get()}, o);
  EXPECT_EQ(g.stepName, "iteration 2");
  EXPECT_EQ(g.steps[1].start, 51 * kUs);
  EXPECT_EQ(g.steps[1].end, 81 * kUs);
  o.step = 1;  // [20, 50]: rank 1's one step overlaps it by nothing
  try {
    buildCriticalPathGraph({first.get(), second.get()}, o);
    FAIL() << "no error";
  } catch (const CpStepMissing& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 has no step at the time of rank 0's"), std::string::npos) << e.what();
  }
}

// Ranks in step are a little apart: rank 1 ends each step 2 us before rank 0 and its trace began one step later.
// Rank 0's first step [20, 50] overlaps rank 1's first [48, 78] by the skew only: that is rank 0's second step,
// not its first, which rank 1's trace does not hold.
TEST(Steps, ANeighbourOverlappingByTheSkewIsNotTheSameStep) {
  const auto first = onDemandRank(0, {20, 50, 80});   // steps [20, 50] and [50, 80]
  const auto second = onDemandRank(1, {18, 48, 78});  // rank 1's trace began after 18: [48, 78] is its step 1
  const auto late = onDemandRank(1, {48, 78, 108});   // steps [48, 78] and [78, 108]
  CpOptions o;
  o.step = 1;
  EXPECT_EQ(buildCriticalPathGraph({first.get(), second.get()}, o).steps[1].start, 18 * kUs);
  EXPECT_THROW(buildCriticalPathGraph({first.get(), late.get()}, o), CpStepMissing);
  o.step = 2;
  EXPECT_EQ(buildCriticalPathGraph({first.get(), late.get()}, o).steps[1].start, 48 * kUs);
  // With no step named, the first step every rank's trace holds.
  const CpGraph g = buildCriticalPathGraph({first.get(), late.get()}, CpOptions{});
  EXPECT_EQ(g.stepName, "iteration 2");
  EXPECT_EQ(g.steps[0].start, 50 * kUs);
  EXPECT_EQ(g.steps[1].start, 48 * kUs);
}

// Every step's critical path across ranks whose traces cover different stretches: a step of the first rank that
// another rank's trace does not hold is skipped with the reason, and the others are analysed.
TEST(Steps, EveryStepSkipsTheStepsAnotherRankDoesNotHold) {
  const auto first = onDemandRank(0, {20, 50, 80, 110});  // steps 1 [20, 50], 2 [50, 80], 3 [80, 110]
  const auto second = onDemandRank(1, {48, 78, 108});     // [48, 78] and [78, 108]: rank 0's steps 2 and 3
  const std::string each = criticalPathEachStepJson({first.get(), second.get()}, CpOptions{});
  EXPECT_NE(each.find(R"("step":"iteration 2")"), std::string::npos) << each;
  EXPECT_NE(each.find(R"("step":"iteration 3")"), std::string::npos) << each;
  const size_t skipped = each.find(R"("skipped":[{"step":"iteration 1","reason":"rank 1 has no step at the time)");
  EXPECT_NE(skipped, std::string::npos) << each;
  EXPECT_EQ(each.find(R"("step":"iteration 1")"), skipped + 12) << each;  // only among the skipped
}

TEST(Steps, ATraceWithoutStepsAsksForARangeOrTheWholeTrace) {
  TraceBuilder b;
  b.lanes(0, {1}).launch("aten::mm", "gemm", 0, 3 * kUs, 4 * kUs, 0, 1, 101, 1);
  const auto t = b.load();
  try {
    buildCriticalPathGraph({t.get()}, CpOptions{});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no steps in the trace"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--whole-trace"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace openreg::trace

namespace openreg::trace {
namespace {

using testing::laggingLoop;

TEST(StepSpans, AStepsDeviceSpanIsTheWorkItLaunched) {
  auto t = laggingLoop().load();
  ASSERT_EQ(t->steps.size(), 4u);
  const int64_t deviceStart[] = {2, 27, 52, 77}, deviceEnd[] = {27, 52, 77, 87}, lag[] = {17, 32, 47, -13};
  for (size_t k = 0; k < 4; ++k) {
    const Step& s = t->steps[k];
    EXPECT_TRUE(s.hasDeviceWork);
    EXPECT_EQ(s.deviceStart, deviceStart[k] * kUs) << k;
    EXPECT_EQ(s.deviceEnd, deviceEnd[k] * kUs) << k;
    EXPECT_EQ(s.lagNs(), lag[k] * kUs) << k;
    EXPECT_FALSE(s.deviceSpanCut);
  }
  EXPECT_EQ(t->stepClock, StepClock::Device);
  EXPECT_EQ(t->stepClockNote,
            "each step is its device span (from the first device work it launched to the end of the last): the "
            "device runs behind the host, finishing a step's work a median 0.032 ms after its host range ends (the "
            "host launches ahead and waits later); the lag runs out in ProfilerStep#4 (the host waited for the "
            "device there)");
  EXPECT_EQ(t->stepSpan(t->steps[1]), std::make_pair(27 * kUs, 52 * kUs));
}

// Without lag (each step synchronises), a step is its host range.
TEST(StepSpans, AStepThatWaitsForItsWorkIsItsHostRange) {
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 40 * kUs);
  for (int k = 0; k < 2; ++k) {
    const int64_t at = k * 20 * kUs, id = 10 + k;
    b.op("ProfilerStep#" + std::to_string(k + 1), at, 20 * kUs, id * 10, "user_annotation");
    b.runtime("orLaunchKernel", at + 1 * kUs, 1 * kUs, 100 + k, id);
    b.kernel("gemm", at + 2 * kUs, 10 * kUs, 0, 7, 100 + k, id);
    b.runtime("orDeviceSynchronize", at + 3 * kUs, 10 * kUs, 200 + k, id);
  }
  auto t = b.load();
  EXPECT_EQ(t->stepClock, StepClock::Host);
  EXPECT_EQ(t->steps[0].lagNs(), -8 * kUs);
  EXPECT_EQ(t->stepSpan(t->steps[1]), std::make_pair(20 * kUs, 40 * kUs));
}

// Work on two streams overlapping the next step's: the span ends where the next step's begins.
TEST(StepSpans, OverlappingStepsOnTheDeviceAreCutWhereTheNextBegins) {
  TraceBuilder b;
  b.lanes(0, {7, 8}).span(0, 100 * kUs);
  b.op("ProfilerStep#1", 0, 10 * kUs, 100, "user_annotation");
  b.runtime("orLaunchKernel", 1 * kUs, 1 * kUs, 101, 1).kernel("long", 5 * kUs, 60 * kUs, 0, 8, 101, 1);
  b.op("ProfilerStep#2", 10 * kUs, 10 * kUs, 200, "user_annotation");
  b.runtime("orLaunchKernel", 11 * kUs, 1 * kUs, 102, 2).kernel("next", 30 * kUs, 20 * kUs, 0, 7, 102, 2);
  auto t = b.load();
  EXPECT_EQ(t->steps[0].deviceEnd, 30 * kUs);
  EXPECT_TRUE(t->steps[0].deviceSpanCut);
  EXPECT_EQ(t->steps[1].deviceStart, 30 * kUs);
  EXPECT_EQ(t->steps[1].deviceEnd, 50 * kUs);
}

}  // namespace
}  // namespace openreg::trace
