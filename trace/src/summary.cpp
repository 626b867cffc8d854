// The summary: a table of sections (summarySections), each computing its
// part of Summary and writing its keys of the JSON; the helpers they share.
#include <algorithm>
#include <map>

#include "analysis.h"
#include "openreg/common/json_writer.h"

namespace openreg::trace {

namespace {

const char* roleName(CategoryRole r) {
  switch (r) {
    case CategoryRole::Device:
      return "device";
    case CategoryRole::Runtime:
      return "runtime";
    case CategoryRole::Annotation:
      return "annotation";
    case CategoryRole::Op:
      return "op";
    case CategoryRole::Python:
      return "python";
    case CategoryRole::Span:
      return "span";
    case CategoryRole::Other:
      break;
  }
  return "other";
}

}  // namespace

bool startsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

double ratio(int64_t num, int64_t den) { return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 0.0; }

void writeKey(JsonWriter& w, const Trace& t, const Key& k) {
  if (k.isString)
    w.value(t.str(static_cast<uint32_t>(k.value)));
  else
    w.value(k.value);
}

void writeName(JsonWriter& w, const Trace& t, uint32_t id) {
  if (id == kNoString)
    w.null();
  else
    w.value(t.str(id));
}

int64_t mergeUnion(std::vector<Interval>& iv) {
  std::sort(iv.begin(), iv.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  size_t out = 0;
  for (const Interval& x : iv) {
    if (out > 0 && x.start <= iv[out - 1].end) {
      iv[out - 1].end = std::max(iv[out - 1].end, x.end);
    } else {
      iv[out++] = x;
    }
  }
  iv.resize(out);
  int64_t busy = 0;
  for (const Interval& x : iv) busy = saturatingAdd(busy, x.end - x.start);
  return busy;
}

const char* deviceTypeName(int64_t type) {
  // c10::DeviceType values (torch._C._autograd.DeviceType).
  switch (type) {
    case 0:
      return "CPU";
    case 1:
      return "CUDA";
    case 6:
      return "HIP";
    case 9:
      return "XLA";
    case 12:
      return "XPU";
    case 13:
      return "MPS";
    case 14:
      return "Meta";
    case 15:
      return "HPU";
    case 19:
      return "MTIA";
    case 20:
      return "PrivateUse1";
    default:
      return "unknown";
  }
}

void writeSliceBrief(JsonWriter& w, const Trace& t, uint32_t i) {
  const Slice& s = t.slices[i];
  w.beginObject();
  w.key("name");
  writeName(w, t, s.name);
  w.key("category");
  writeName(w, t, s.cat);
  w.field("start_ns", s.ts - t.originNs);
  w.field("duration_ns", s.dur);
  w.field("event_index", s.origin.index);
  w.endObject();
}

std::optional<Window> profilingWindow(const Trace& t) {
  bool have = false;
  Window w;
  for (const Slice& s : t.slices) {
    if (t.role(s.cat) != CategoryRole::Span) continue;
    if (!have || s.ts < w.start) w.start = s.ts;
    if (!have || s.end() > w.end) w.end = s.end();
    have = true;
  }
  if (have) {
    w.source = "trace_span";
    if (t.recordWindowEnd && *t.recordWindowEnd > w.end) {
      w.end = *t.recordWindowEnd;
      w.source = "trace_span+record_window_end";
    }
    return w;
  }
  for (const Slice& s : t.slices) {
    if (t.laneKind[s.lane] != LaneKind::Host) continue;
    if (!have || s.ts < w.start) w.start = s.ts;
    if (!have || s.end() > w.end) w.end = s.end();
    have = true;
  }
  if (!have) return std::nullopt;
  w.source = "host_events";
  return w;
}

// The trace's steps in short: how many, from what ("ProfilerStep#N", "Optimizer.step#" for an on-demand trace's,
// null for none), the note saying how they were read, and their durations.
void writeStepsInfo(JsonWriter& w, const Trace& t) {
  w.key("steps").beginObject().field("count", static_cast<uint64_t>(t.steps.size())).key("from");
  if (t.stepSource == StepSource::ProfilerSteps)
    w.value("ProfilerStep#N");
  else if (t.stepSource == StepSource::OptimizerSteps)
    w.value("Optimizer.step#");
  else
    w.null();
  w.field("note", t.stepsNote).field("clock", stepClockName(t.stepClock)).field("clock_note", t.stepClockNote);
  // On the step clock, then each span alone (null: a step without device work).
  w.key("durations_ns").beginArray();
  for (const Step& step : t.steps) {
    const auto [start, end] = t.stepSpan(step);
    w.value(end - start);
  }
  w.endArray().key("host_durations_ns").beginArray();
  for (const Step& step : t.steps) w.value(step.end - step.ts);
  w.endArray().key("device_durations_ns").beginArray();
  for (const Step& step : t.steps) step.hasDeviceWork ? w.value(step.deviceEnd - step.deviceStart) : w.null();
  w.endArray().key("lags_ns").beginArray();
  for (const Step& step : t.steps) step.hasDeviceWork ? w.value(step.lagNs()) : w.null();
  w.endArray().endObject();
}

void writeTraceInfo(JsonWriter& w, const Trace& t) {
  w.key("trace").beginObject();
  w.field("events", t.eventCount);
  w.field("bytes", t.bytesRead);
  w.field("origin_ns", t.originNs);
  w.field("origin_us", formatUs(t.originNs));
  w.key("phases").beginObject();
  for (size_t ph = 0; ph < t.phaseCounts.size(); ++ph)
    if (t.phaseCounts[ph]) w.field(std::string(1, static_cast<char>(ph)), t.phaseCounts[ph]);
  w.endObject();
  std::map<uint32_t, uint64_t> cats;
  for (const Slice& s : t.slices) ++cats[s.cat];
  // Metric ranges are no slices, but complete events of their own category.
  const uint32_t metricCat = t.strings.find(kMetricCategory);
  if (!t.metricRanges.empty()) cats[metricCat] += t.metricRanges.size();
  w.key("categories").beginArray();
  for (auto& [cat, n] : cats) {
    w.beginObject();
    w.key("name");
    writeName(w, t, cat);
    w.field("role", cat == metricCat && cat != kNoString ? "metric" : roleName(t.role(cat)));
    w.field("complete_events", n);
    w.endObject();
  }
  w.endArray();
  auto names = [&](const char* key, const std::vector<uint32_t>& ids) {
    w.key(key).beginArray();
    for (uint32_t id : ids) w.value(t.str(id));
    w.endArray();
  };
  names("device_categories", t.deviceCategories);
  names("runtime_categories", t.runtimeCategories);
  names("annotation_categories", t.annotationCategories);
  names("op_categories", t.opCategories);
  names("flow_categories", t.flowCategories);
  uint64_t host = 0, device = 0;
  for (size_t lane = 0; lane < t.lanes.size(); ++lane) {
    if (t.laneSlices[lane].empty()) continue;  // metadata-only lanes
    host += t.laneKind[lane] == LaneKind::Host;
    device += t.laneKind[lane] == LaneKind::Device;
  }
  w.field("host_lanes", host);
  w.field("device_lanes", device);
  writeStepsInfo(w, t);
  w.field("malformed_events", t.malformedCount);
  w.key("parse_error");
  if (t.parseError) {
    w.beginObject().field("offset", t.parseError->offset).field("message", t.parseError->message).endObject();
  } else {
    w.null();
  }
  w.endObject();
}

namespace sections {

void writeTrace(JsonWriter& w, const Trace& t, const Summary& /*s*/, const SummaryOptions& /*options*/) {
  writeTraceInfo(w, t);
}

void computeWindow(const Trace& t, const SummaryOptions& /*options*/, Summary& s) { s.window = profilingWindow(t); }

void writeWindow(JsonWriter& w, const Trace& t, const Summary& s, const SummaryOptions& /*options*/) {
  w.key("window");
  if (!s.window) {
    w.null();
    return;
  }
  w.beginObject();
  w.field("start_ns", s.window->start - t.originNs);
  w.field("end_ns", s.window->end - t.originNs);
  w.field("duration_ns", s.window->end - s.window->start);
  w.field("source", s.window->source);
  w.endObject();
}

}  // namespace sections

const std::vector<SummarySection>& summarySections() {
  using namespace sections;
  static const std::vector<SummarySection> kSections = {
      {"trace", nullptr, writeTrace},
      {"window", computeWindow, writeWindow},
      {"kernels", computeKernels, writeKernels},
      {"ops", computeOps, writeOps},
      {"streams", computeStreams, writeStreams},
      {"idle_gaps", computeIdleGaps, writeIdleGaps},
      {"kernel_classes", computeKernelClasses, writeKernelClasses},
      {"temporal", nullptr, writeTemporal},
      {"idle_breakdown", computeIdleBreakdown, writeIdleBreakdown},
      {"launches", computeLaunches, writeLaunches},
      {"communication", computeCommunication, writeCommunication},
      {"source_lines", computeSourceLines, writeSourceLines},
      {"memory", computeMemory, writeMemory},
      {"critical_path", nullptr, writeCriticalPath},
      {"roofline", computeRoofline, writeRoofline},
      {"counters", computeCounters, writeCounters},
  };
  return kSections;
}

Summary computeSummary(const Trace& t, const SummaryOptions& options) {
  Summary s;
  for (const SummarySection& section : summarySections())
    if (section.compute) section.compute(t, options, s);
  return s;
}

std::string summaryToJson(const Trace& t, const Summary& s, const SummaryOptions& options) {
  JsonWriter w;
  w.beginObject();
  for (const SummarySection& section : summarySections()) section.write(w, t, s, options);
  w.endObject();
  return w.take();
}

}  // namespace openreg::trace
