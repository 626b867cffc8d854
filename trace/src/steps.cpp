// The trace's training steps (Trace::steps): torch.profiler's ProfilerStep#N
// ranges, or, in a trace without them, the optimizer's steps.
//
// An on-demand trace (Kineto's daemon mode: Dynolog's `dyno gputrace` asks a
// running job for a trace) is written with no torch.profiler.profile in the
// program, so it has no ProfilerStep#N. What it has is the optimizer's
// record_function ranges (Optimizer.step#SGD.step, ...): Kineto counts the
// steps of an iteration-based request by that very step, through torch's
// optimizer hook. Each step ends where an Optimizer.step# range ends.
#include <algorithm>
#include <map>
#include <string>

#include "analysis.h"
#include "json_reader.h"
#include "trace_model.h"

namespace openreg::trace {
namespace {

constexpr std::string_view kProfilerStep = "ProfilerStep#";
constexpr std::string_view kOptimizerStep = "Optimizer.step#";

// ProfilerStep#N host ranges, one per N (the first of repeats), by start.
std::vector<Step> profilerSteps(Trace& t) {
  std::map<int64_t, Step> byNumber;
  for (uint32_t i = 0; i < t.slices.size(); ++i) {
    const Slice& s = t.slices[i];
    const std::string_view name = t.str(s.name);
    int64_t n = 0;
    if (t.laneKind[s.lane] != LaneKind::Host || !startsWith(name, kProfilerStep) ||
        !parseInt64(name.substr(kProfilerStep.size()), n))
      continue;
    auto [it, fresh] = byNumber.try_emplace(n, Step{s.ts, s.end(), n, s.name, static_cast<int32_t>(i)});
    if (!fresh && s.ts < it->second.ts) it->second = Step{s.ts, s.end(), n, s.name, static_cast<int32_t>(i)};
  }
  std::vector<Step> steps;
  for (auto& [n, step] : byNumber) steps.push_back(step);
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.ts < b.ts; });
  return steps;
}

// The ends of the Optimizer.step# ranges on the host thread that has the most
// of them (the training loop's), in time order.
std::vector<int64_t> optimizerStepEnds(const Trace& t) {
  std::map<uint32_t, std::vector<int64_t>> byLane;
  for (const Slice& s : t.slices)
    if (t.laneKind[s.lane] == LaneKind::Host && startsWith(t.str(s.name), kOptimizerStep))
      byLane[s.lane].push_back(s.end());
  const std::vector<int64_t>* best = nullptr;
  for (const auto& [lane, ends] : byLane)
    if (!best || ends.size() > best->size()) best = &ends;
  std::vector<int64_t> ends = best ? *best : std::vector<int64_t>{};
  std::sort(ends.begin(), ends.end());
  return ends;
}

// Where Kineto opened the trace: its "PyTorch Profiler (N)" span, else the
// first event.
int64_t traceStart(const Trace& t) {
  for (const Slice& s : t.slices)
    if (t.role(s.cat) == CategoryRole::Span && startsWith(t.str(s.name), "PyTorch Profiler")) return s.ts;
  return t.originNs;
}

// Steps ending at the optimizer's steps. An iteration-based on-demand trace
// (openreg's metadata says so) starts on a step's boundary, in the optimizer
// hook: its first step starts with the trace. Any other starts within a step,
// and the stretch before the first optimizer step ends is no whole step.
std::vector<Step> optimizerSteps(Trace& t, const std::vector<int64_t>& ends) {
  const bool startsOnAStep = t.onDemand && t.onDemand->iterations > 0;
  const int64_t first = t.onDemand && t.onDemand->startIteration >= 0 ? t.onDemand->startIteration + 1 : 1;
  std::vector<Step> steps;
  int64_t from = startsOnAStep ? std::min(traceStart(t), ends.front()) : ends.front();
  for (size_t k = startsOnAStep ? 0 : 1; k < ends.size(); ++k) {
    Step step;
    step.ts = from;
    step.end = ends[k];
    step.number = first + static_cast<int64_t>(steps.size());
    step.name = t.strings.intern("iteration " + std::to_string(step.number));
    steps.push_back(step);
    from = ends[k];
  }
  return steps;
}

}  // namespace

void buildSteps(Trace& t) {
  t.steps = profilerSteps(t);
  if (!t.steps.empty()) {
    t.stepSource = StepSource::ProfilerSteps;
    return;
  }
  const std::vector<int64_t> ends = optimizerStepEnds(t);
  if (!ends.empty()) t.steps = optimizerSteps(t, ends);
  if (t.steps.empty()) {
    t.stepsNote = ends.empty() ? "no ProfilerStep#N ranges and no Optimizer.step# ranges: no steps"
                               : "no ProfilerStep#N ranges, and one Optimizer.step# range: no whole step";
    return;
  }
  t.stepSource = StepSource::OptimizerSteps;
  const bool iterationBased = t.onDemand && t.onDemand->iterations > 0;
  t.stepsNote = std::string("no ProfilerStep#N ranges (an on-demand trace): ") + std::to_string(t.steps.size()) +
                " steps read off the optimizer, each ending where an Optimizer.step# range ends; " +
                (iterationBased ? "the first starts with the trace (an iteration-based request starts on a step)"
                                : "what comes before the first one's end is part of a step and left out") +
                (t.onDemand && t.onDemand->startIteration >= 0 ? "; numbered by Kineto's step count"
                                                               : "; numbered from 1 in this trace");
}

}  // namespace openreg::trace
