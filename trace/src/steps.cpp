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
#include <optional>
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

// Whether an Optimizer.step# range encloses slice i (a container of
// optimizers, as torchtitan's OptimizersContainer.step around AdamW.step).
bool insideOptimizerStep(const Trace& t, uint32_t i) {
  for (int32_t p = t.parent[i]; p != kNoSlice; p = t.parent[p])
    if (startsWith(t.str(t.slices[p].name), kOptimizerStep)) return true;
  return false;
}

// The ends of the outermost Optimizer.step# ranges on the host thread that
// has the most of them (the training loop's), in time order.
std::vector<int64_t> optimizerStepEnds(const Trace& t) {
  std::map<uint32_t, std::vector<int64_t>> byLane;
  for (uint32_t i = 0; i < t.slices.size(); ++i) {
    const Slice& s = t.slices[i];
    if (t.laneKind[s.lane] == LaneKind::Host && startsWith(t.str(s.name), kOptimizerStep) && !insideOptimizerStep(t, i))
      byLane[s.lane].push_back(s.end());
  }
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

// When the host launched device slice `s`: its runtime call (same
// correlation), else its op (External id); nullopt when unlinked.
std::optional<int64_t> launchTime(const Trace& t, const Slice& s) {
  if (s.correlation.ok()) {
    auto it = t.runtimeByCorrelation.find(s.correlation.value);
    if (it != t.runtimeByCorrelation.end()) return t.slices[it->second].ts;
  }
  if (s.externalId.ok()) {
    auto it = t.opByExternalId.find(s.externalId.value);
    if (it != t.opByExternalId.end()) return t.slices[it->second].ts;
  }
  return std::nullopt;
}

// The step whose host range holds time `at` (steps sorted by start), or -1.
int32_t stepAt(const std::vector<Step>& steps, int64_t at) {
  auto it = std::upper_bound(steps.begin(), steps.end(), at, [](int64_t v, const Step& s) { return v < s.ts; });
  if (it == steps.begin()) return -1;
  --it;
  return at < it->end ? static_cast<int32_t>(it - steps.begin()) : -1;
}

// Each device slice goes to the step that launched it (unlinked work: the
// step its start falls in), and each step's device span covers its work.
void attributeDeviceWork(Trace& t) {
  t.stepOfSlice.assign(t.slices.size(), -1);
  for (uint32_t i : t.deviceSlices) {
    const Slice& s = t.slices[i];
    const int32_t k = stepAt(t.steps, launchTime(t, s).value_or(s.ts));
    if (k < 0) continue;
    t.stepOfSlice[i] = k;
    Step& step = t.steps[k];
    step.deviceStart = step.hasDeviceWork ? std::min(step.deviceStart, s.ts) : s.ts;
    step.deviceEnd = step.hasDeviceWork ? std::max(step.deviceEnd, s.end()) : s.end();
    step.hasDeviceWork = true;
  }
  // Steps overlapping on the device (work on several streams): a step ends where the next one's work begins.
  for (size_t k = 0; k + 1 < t.steps.size(); ++k) {
    Step& step = t.steps[k];
    const Step* next = nullptr;
    for (size_t n = k + 1; n < t.steps.size() && !next; ++n)
      if (t.steps[n].hasDeviceWork) next = &t.steps[n];
    if (step.hasDeviceWork && next && next->deviceStart < step.deviceEnd) {
      step.deviceEnd = std::max(step.deviceStart, next->deviceStart);
      step.deviceSpanCut = true;
    }
  }
}

// A lag counts when it is more than this share of the step's host range.
constexpr double kLagShare = 0.05;

bool lags(const Step& step) {
  return step.hasDeviceWork && static_cast<double>(step.lagNs()) > kLagShare * static_cast<double>(step.end - step.ts);
}

// The device clock when most steps with device work lag, and why, in words
// (how far behind, and the steps where the lag ran out).
void chooseStepClock(Trace& t) {
  std::vector<int64_t> lagsNs;
  std::vector<std::string> caughtUp;
  size_t lagging = 0;
  for (const Step& step : t.steps) {
    if (!step.hasDeviceWork) continue;
    lagsNs.push_back(step.lagNs());
    if (lags(step)) {
      ++lagging;
    } else if (lagging > 0) {
      caughtUp.emplace_back(t.str(step.name));
    }
  }
  if (lagsNs.empty()) {
    t.stepClockNote = t.steps.empty() ? "" : "no device work launched in the steps: each step is its host range";
    return;
  }
  std::sort(lagsNs.begin(), lagsNs.end());
  const int64_t median = lagsNs[lagsNs.size() / 2];
  if (2 * lagging <= lagsNs.size()) {
    t.stepClockNote = "each step is its host range: the device finishes a step's work at most " +
                      std::to_string(static_cast<int>(kLagShare * 100)) + " % of the step after the host range " +
                      "ends in " + std::to_string(lagsNs.size() - lagging) + " of " + std::to_string(lagsNs.size()) +
                      " steps";
    return;
  }
  t.stepClock = StepClock::Device;
  t.stepClockNote =
      "each step is its device span (from the first device work it launched to the end of the last): "
      "the device runs behind the host, finishing a step's work a median " +
      formatMs(median) + " after its host range ends (the host launches ahead and waits later)";
  if (!caughtUp.empty()) {
    std::string names;
    for (const std::string& n : caughtUp) names += (names.empty() ? "" : ", ") + n;
    t.stepClockNote += "; the lag runs out in " + names + " (the host waited for the device there)";
  }
}

}  // namespace

void buildSteps(Trace& t) {
  findSteps(t);
  attributeDeviceWork(t);
  chooseStepClock(t);
}

void findSteps(Trace& t) {
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
