// The critical-path report as JSON: the path against the step, its time by
// kind, the ops and kernels on it (with their model source line), the ranks
// and collectives, and what-if estimates. Keys: trace/README.md.
#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "critical_path.h"
#include "json_reader.h"

namespace openreg::trace {

namespace {

std::string frameSource(const Trace& t, int32_t slice) {
  for (int32_t p = slice; p != kNoSlice; p = t.parent[static_cast<uint32_t>(p)]) {
    const Slice& frame = t.slices[static_cast<uint32_t>(p)];
    if (t.role(frame.cat) != CategoryRole::Python) continue;
    if (auto line = userSourceLine(t.str(frame.name))) return line->first;
  }
  return {};
}

// The model source line of an event: a compiled kernel's first fused line, else
// the innermost user frame around the event (a device event: around its op).
std::string sourceOf(const Trace& t, const CpEvent& e) {
  if (!e.device) return frameSource(t, static_cast<int32_t>(e.slice));
  if (const SourceLines* s = t.sourceLinesOf(e.slice); s && !s->lines.empty()) return std::string(t.str(s->lines[0]));
  return frameSource(t, t.opOfDeviceSlice(t.slices[e.slice]));
}

struct TopRow {
  std::string name, source;
  CpKind kind = CpKind::HostOp;
  int64_t ns = 0;
  std::set<uint32_t> events;
};

struct Report {
  std::array<int64_t, kCpKinds> kinds{};
  // The step from its host range's start to the end of its work (host or
  // device, whichever ends last), and where the host range ends.
  int64_t stepStart = 0, stepEnd = 0, hostEnd = 0;
  bool lastIsDevice = false;                            // the work ending last is device work
  std::map<std::pair<std::string, bool>, TopRow> rows;  // (name, device)
  std::vector<int64_t> rankPathNs;
};

Report analyse(const CpGraph& g, const CpPath& p) {
  Report r;
  r.stepStart = g.steps[0].start, r.stepEnd = g.steps[0].end;
  for (const CpStep& s : g.steps) r.stepStart = std::min(r.stepStart, s.start), r.stepEnd = std::max(r.stepEnd, s.end);
  r.hostEnd = r.stepEnd;
  for (const CpNode& n : g.nodes) {
    if (n.ts <= r.stepEnd) continue;
    r.stepEnd = n.ts;
    r.lastIsDevice = g.events[n.event].device;
  }
  r.rankPathNs.assign(g.traces.size(), 0);
  int64_t covered = 0;
  for (uint32_t i : p.edges) {
    const CpEdge& e = g.edges[i];
    const int64_t elapsed = std::max<int64_t>(0, g.nodes[e.to].ts - g.nodes[e.from].ts);
    r.kinds[static_cast<size_t>(weightKind(g, e))] += e.weight;
    if (elapsed > e.weight) r.kinds[static_cast<size_t>(elapsedKind(g, e))] += elapsed - e.weight;
    covered += std::max(elapsed, e.weight);
    r.rankPathNs[g.events[g.nodes[e.to].event].rank] += e.weight;
    if (e.event < 0 || e.weight == 0 || (e.type != CpEdgeType::Operator && e.type != CpEdgeType::Collective)) continue;
    const CpEvent& ev = g.events[e.event];
    const Trace& t = *g.traces[ev.rank];
    TopRow& row = r.rows[{std::string(t.str(t.slices[ev.slice].name)), ev.device}];
    if (row.events.empty()) row.name = t.str(t.slices[ev.slice].name), row.kind = weightKind(g, e);
    if (row.source.empty()) row.source = sourceOf(t, ev);
    row.ns += e.weight;
    row.events.insert(static_cast<uint32_t>(e.event));
  }
  r.kinds[static_cast<size_t>(CpKind::Idle)] += std::max<int64_t>(0, (r.stepEnd - r.stepStart) - covered);
  return r;
}

void writeTop(JsonWriter& w, const Report& r, bool device, int top) {
  std::vector<const TopRow*> rows;
  for (const auto& [k, row] : r.rows)
    if (k.second == device) rows.push_back(&row);
  std::stable_sort(rows.begin(), rows.end(), [](const TopRow* a, const TopRow* b) { return a->ns > b->ns; });
  if (rows.size() > static_cast<size_t>(top)) rows.resize(static_cast<size_t>(top));
  w.beginArray();
  for (const TopRow* row : rows) {
    w.beginObject().field("name", row->name).field("kind", cpKindName(row->kind)).field("path_ns", row->ns);
    w.field("events", static_cast<uint64_t>(row->events.size())).key("source");
    if (row->source.empty())
      w.null();
    else
      w.value(row->source);
    w.endObject();
  }
  w.endArray();
}

void writePoint(JsonWriter& w, const CpGraph& g, uint32_t node) {
  const CpNode& n = g.nodes[node];
  const CpEvent& e = g.events[n.event];
  const Trace& t = *g.traces[e.rank];
  const Slice& s = t.slices[e.slice];
  w.beginObject().field("rank", e.rank).field("event_index", s.origin.index).key("name");
  writeName(w, t, s.name);
  w.key("category");
  writeName(w, t, s.cat);
  w.field("at", n.isStart ? "start" : "end").field("ts_ns", n.ts - g.steps[e.rank].start).endObject();
}

void writePath(JsonWriter& w, const CpGraph& g, const CpPath& p) {
  w.key("path").beginArray();
  for (uint32_t i : p.edges) {
    const CpEdge& e = g.edges[i];
    w.beginObject().field("type", cpEdgeTypeName(e.type)).field("kind", cpKindName(weightKind(g, e)));
    w.field("weight_ns", e.weight).field("elapsed_ns", g.nodes[e.to].ts - g.nodes[e.from].ts);
    w.key("from");
    writePoint(w, g, e.from);
    w.key("to");
    writePoint(w, g, e.to);
    w.endObject();
  }
  w.endArray();
}

// Per rank, the trace events on the path (their index in traceEvents).
void writeEvents(JsonWriter& w, const CpGraph& g, const CpPath& p) {
  std::vector<std::set<uint32_t>> byRank(g.traces.size());
  for (uint32_t i : p.edges)
    for (uint32_t n : {g.edges[i].from, g.edges[i].to}) {
      const CpEvent& e = g.events[g.nodes[n].event];
      byRank[e.rank].insert(g.slice(e).origin.index);
    }
  w.key("events").beginArray();
  for (const auto& s : byRank) {
    w.beginArray();
    for (uint32_t i : s) w.value(i);
    w.endArray();
  }
  w.endArray();
}

void writeRanks(JsonWriter& w, const CpGraph& g, const CpPath& p, const Report& r) {
  w.key("ranks").beginArray();
  for (uint32_t i = 0; i < g.traces.size(); ++i) {
    const Trace& t = *g.traces[i];
    const CpStep& s = g.steps[i];
    w.beginObject().field("index", i).key("rank");
    if (t.rank)
      w.value(*t.rank);
    else
      w.null();
    w.field("step_start_ns", s.start - t.originNs).field("step_ns", s.end - s.start);
    w.key("step_event_index");
    if (s.slice == CpStep::kWholeTrace)
      w.null();
    else
      w.value(t.slices[s.slice].origin.index);
    w.field("path_ns", r.rankPathNs[i]).endObject();
  }
  w.endArray();
  uint32_t bounding = 0;
  for (uint32_t i = 0; i < r.rankPathNs.size(); ++i)
    if (r.rankPathNs[i] > r.rankPathNs[bounding]) bounding = i;
  w.field("bounding_rank", bounding).key("start_rank");
  if (p.edges.empty())
    w.null();
  else
    w.value(g.events[g.nodes[g.edges[p.edges.front()].from].event].rank);
  w.key("end_rank");
  if (p.edges.empty())
    w.null();
  else
    w.value(g.events[g.nodes[g.edges[p.edges.back()].to].event].rank);
  std::set<uint32_t> crossing, onPath;  // CpEvents: where the path crosses ranks; any time on the path
  for (uint32_t i : p.edges) {
    const CpEdge& e = g.edges[i];
    if (e.type == CpEdgeType::Collective) crossing.insert(static_cast<uint32_t>(e.event));
    if (e.event >= 0 && e.weight > 0) onPath.insert(static_cast<uint32_t>(e.event));
  }
  w.key("collectives").beginArray();
  for (const CpCollective& c : g.collectives) {
    const Trace& t0 = *g.traces[0];
    w.beginObject().field("collective", c.collective).key("group");
    writeName(w, t0, c.group);
    w.field("seq", c.seq).field("last_rank", c.lastRank).key("waits_ns").beginArray();
    int64_t maxWait = 0;
    bool crossed = false, on = false;
    for (uint32_t e : c.events) {
      const int64_t wait = c.lastArrival - g.nodes[g.events[e].startNode].ts;
      maxWait = std::max(maxWait, wait);
      crossed = crossed || crossing.count(e);
      on = on || onPath.count(e);
      w.beginObject().field("rank", g.events[e].rank).field("wait_ns", wait).endObject();
    }
    w.endArray().field("max_wait_ns", maxWait).field("on_path", on).field("crosses_ranks", crossed).endObject();
  }
  w.endArray();
}

// The step's host range and how far its work runs past it (step_ns spans both).
void writeStepSpans(JsonWriter& w, const Report& r) {
  w.field("host_step_ns", r.hostEnd - r.stepStart).field("lag_ns", r.stepEnd - r.hostEnd);
}

// What a reader must know to read the numbers right.
void writeNotes(JsonWriter& w, const CpGraph& g, const Report& r) {
  std::vector<std::string> notes;
  if (r.stepEnd > r.hostEnd)
    notes.push_back(
        "the step's work ends " + formatMs(r.stepEnd - r.hostEnd) + " after its host range (" +
        formatMs(r.hostEnd - r.stepStart) + ") does" +
        (r.lastIsDevice ? ": the device runs behind the host" : ": work started in it on another thread runs past it") +
        ". The step is measured from its host range's start to the end of the work started in it (" +
        formatMs(r.stepEnd - r.stepStart) +
        "), which the path follows (HTA's rule: a step holds the events that start in it)");
  std::set<int64_t> ranks;
  for (const Trace* t : g.traces)
    if (t->rank) ranks.insert(*t->rank);
  const std::optional<int64_t> world = g.traces[0]->worldSize;
  if (world && *world > 1 && static_cast<int64_t>(ranks.size()) < *world) {
    std::string given;
    for (int64_t r : ranks) given += (given.empty() ? "" : ", ") + std::to_string(r);
    notes.push_back(std::to_string(ranks.size()) + " of " + std::to_string(*world) + " ranks given (rank" +
                    (ranks.size() > 1 ? "s " : " ") + given +
                    "): at a collective the missing ranks' arrival is unknown, so waiting for them counts as "
                    "communication; give every rank's trace to split it");
  }
  if (g.traces.size() > 1 && ranks.size() < g.traces.size())
    notes.push_back("some traces name no rank (no distributedInfo): ranks are numbered by the traces' order");
  for (size_t i = 1; i < g.steps.size(); ++i)
    if (std::max(g.steps[0].start, g.steps[i].start) > std::min(g.steps[0].end, g.steps[i].end)) {
      notes.push_back("the ranks' " + g.stepName +
                      " ranges do not all overlap in time (ranks out of step): the step spans them all, and the "
                      "path crosses ranks only at collectives inside each rank's range");
      break;
    }
  if (g.droppedEdges)
    notes.push_back(std::to_string(g.droppedEdges) +
                    " edges pointing back in time were dropped (rows that do not nest closed a cycle)");
  w.key("notes").beginArray();
  for (const std::string& n : notes) w.value(n);
  w.endArray();
}

void writeWhatIf(JsonWriter& w, const CpGraph& g, const CpOptions& o, const CpPath& p, int64_t stepNs) {
  w.key("what_if").beginArray();
  for (const CpOptions::WhatIf& wi : o.whatIf) {
    const std::vector<int64_t> weights = whatIfWeights(g, wi);
    uint64_t matched = 0;
    for (size_t i = 0; i < weights.size(); ++i) matched += weights[i] != g.edges[i].weight;
    const CpPath q = longestPath(g, weights);
    w.beginObject().field("target", wi.target).field("factor", wi.factor).field("changed_edges", matched);
    w.field("path_ns", q.length).field("saved_ns", p.length - q.length);
    w.field("step_ns", stepNs - (p.length - q.length)).endObject();
  }
  w.endArray();
}

// A rank as its trace names it (distributedInfo.rank), else its position.
int64_t rankNumber(const CpGraph& g, uint32_t index) { return g.traces[index]->rank.value_or(index); }

void writeStepBrief(JsonWriter& w, const CpGraph& g, const CpPath& p, const Report& r, int top) {
  const int64_t stepNs = r.stepEnd - r.stepStart;
  w.beginObject().field("step", g.stepName).field("step_ns", stepNs).field("path_ns", p.length);
  w.field("path_share", ratio(p.length, stepNs));
  writeStepSpans(w, r);
  uint32_t bounding = 0;
  for (uint32_t i = 0; i < r.rankPathNs.size(); ++i)
    if (r.rankPathNs[i] > r.rankPathNs[bounding]) bounding = i;
  w.field("bounding_rank", rankNumber(g, bounding));
  for (const char* key : {"start_rank", "end_rank"}) {
    w.key(key);
    if (p.edges.empty()) {
      w.null();
      continue;
    }
    const bool start = key[0] == 's';
    const CpEdge& e = g.edges[start ? p.edges.front() : p.edges.back()];
    w.value(rankNumber(g, g.events[g.nodes[start ? e.from : e.to].event].rank));
  }
  w.key("kinds").beginObject();
  for (size_t k = 0; k < kCpKinds; ++k) w.field(cpKindName(static_cast<CpKind>(k)), r.kinds[k]);
  w.endObject().key("top_ops");
  writeTop(w, r, false, top);
  w.key("top_kernels");
  writeTop(w, r, true, top);
  std::set<int64_t> last;
  for (const CpCollective& c : g.collectives) last.insert(rankNumber(g, c.lastRank));
  w.key("last_ranks").beginArray();
  for (int64_t l : last) w.value(l);
  w.endArray().endObject();
}

// The step numbers of the first trace's rank (Trace::steps), over its traces (profiling cycles) in time order.
std::vector<int64_t> firstRankSteps(const std::vector<const Trace*>& traces) {
  std::vector<const Trace*> mine;
  for (const Trace* t : traces)
    if (t == traces[0] || (t->rank && t->rank == traces[0]->rank)) mine.push_back(t);
  std::stable_sort(mine.begin(), mine.end(), [](const Trace* a, const Trace* b) { return a->originNs < b->originNs; });
  std::vector<int64_t> steps;
  for (const Trace* t : mine)
    for (const Step& step : t->steps)
      if (std::find(steps.begin(), steps.end(), step.number) == steps.end()) steps.push_back(step.number);
  return steps;
}

// How the first trace's steps were found, when not from ProfilerStep#N ranges ("steps_from", "steps_note"): an
// on-demand trace's are its optimizer steps.
void writeStepSource(JsonWriter& w, const Trace& t) {
  if (t.stepSource == StepSource::ProfilerSteps) return;
  w.key("steps_from");
  if (t.stepSource == StepSource::OptimizerSteps)
    w.value("Optimizer.step#");
  else
    w.null();
  w.field("steps_note", t.stepsNote);
}

}  // namespace

std::string criticalPathEachStepJson(const std::vector<const Trace*>& traces, const CpOptions& options) {
  if (traces.empty()) throw std::invalid_argument("no trace given");
  const std::vector<int64_t> steps = firstRankSteps(traces);
  if (steps.empty())
    throw std::invalid_argument(
        "no steps in the first trace's rank (no ProfilerStep#N ranges, nor the "
        "Optimizer.step# ranges an on-demand trace's steps are read off)");
  std::vector<std::shared_ptr<const CpRankIndex>> indexes;  // by trace given
  for (const Trace* t : traces) indexes.push_back(indexForCriticalPath(*t));
  std::vector<std::pair<std::string, std::string>> skipped;
  JsonWriter w;
  w.beginObject().key("steps").beginArray();
  for (int64_t n : steps) {
    CpOptions o;
    o.step = n;
    o.kernelKernelMaxGapNs = options.kernelKernelMaxGapNs;
    CpGraph g;
    try {
      const CpTraceChoice choice = chooseRankTraces(traces, o);
      std::vector<const Trace*> chosen;
      std::vector<std::shared_ptr<const CpRankIndex>> chosenIndexes;
      for (uint32_t i : choice.traces) chosen.push_back(traces[i]), chosenIndexes.push_back(indexes[i]);
      g = buildCriticalPathGraph(chosen, o, chosenIndexes);
    } catch (const CpStepMissing& e) {  // a rank's trace lacks this step (the others' errors are no step's)
      skipped.emplace_back(stepNamedByNumber(traces, n), e.what());
      continue;
    }
    const CpPath p = longestPath(g);
    writeStepBrief(w, g, p, analyse(g, p), options.top);
  }
  w.endArray().key("skipped").beginArray();
  for (const auto& [step, reason] : skipped) w.beginObject().field("step", step).field("reason", reason).endObject();
  w.endArray();
  writeStepSource(w, *traces[0]);
  w.endObject();
  return w.str();
}

std::string criticalPathJson(const std::vector<const Trace*>& traces, const CpOptions& options) {
  if (options.eachStep) return criticalPathEachStepJson(traces, options);
  const CpTraceChoice choice = chooseRankTraces(traces, options);
  std::vector<const Trace*> chosen;
  for (uint32_t i : choice.traces) chosen.push_back(traces[i]);
  CpOptions o = options;
  o.rankInstances = choice.instances;
  const CpGraph g = buildCriticalPathGraph(chosen, o);
  const CpPath p = longestPath(g);
  const Report r = analyse(g, p);
  const int64_t stepNs = r.stepEnd - r.stepStart;
  JsonWriter w;
  w.beginObject().field("step", g.stepName).field("step_ns", stepNs).field("path_ns", p.length);
  w.key("traces").beginArray();
  for (uint32_t i : choice.traces) w.value(i);
  w.endArray();
  writeNotes(w, g, r);
  w.field("path_share", ratio(p.length, stepNs));
  writeStepSpans(w, r);
  w.key("kinds").beginObject();
  for (size_t k = 0; k < kCpKinds; ++k) {
    w.key(cpKindName(static_cast<CpKind>(k))).beginObject();
    w.field("ns", r.kinds[k]).field("share", ratio(r.kinds[k], stepNs)).endObject();
  }
  w.endObject();
  w.key("top_ops");
  writeTop(w, r, false, options.top);
  w.key("top_kernels");
  writeTop(w, r, true, options.top);
  writeRanks(w, g, p, r);
  writeWhatIf(w, g, options, p, stepNs);
  w.key("graph").beginObject().field("events", static_cast<uint64_t>(g.events.size()));
  w.field("nodes", static_cast<uint64_t>(g.nodes.size())).field("edges", static_cast<uint64_t>(g.edges.size()));
  w.field("path_edges", static_cast<uint64_t>(p.edges.size())).field("dropped_edges", g.droppedEdges).endObject();
  writeEvents(w, g, p);
  if (options.pathEvents) writePath(w, g, p);
  writeStepSource(w, *chosen[0]);
  w.endObject();
  return w.str();
}

namespace sections {

// The first step's critical path: its length, its time by kind and
// the three ops or kernels longest on it; null when the trace has no
// step or no device work (the critical-path command says why).
void writeCriticalPath(JsonWriter& w, const Trace& t, const Summary& /*s*/, const SummaryOptions& /*options*/) {
  w.key("critical_path");
  CpOptions o;
  o.top = 3;
  if (t.deviceSlices.empty() || firstStepName(t).empty()) {
    w.null();
    return;
  }
  CpGraph g;
  CpPath p;
  Report r;
  try {
    g = buildCriticalPathGraph({&t}, o);
    p = longestPath(g);
    r = analyse(g, p);
  } catch (const std::invalid_argument&) {
    w.null();
    return;
  } catch (const std::runtime_error&) {
    w.null();
    return;
  }
  const int64_t stepNs = r.stepEnd - r.stepStart;
  w.beginObject().field("step", g.stepName).field("step_ns", stepNs).field("path_ns", p.length);
  w.field("path_share", ratio(p.length, stepNs));
  writeStepSpans(w, r);
  w.key("kinds").beginObject();
  for (size_t k = 0; k < kCpKinds; ++k) w.field(cpKindName(static_cast<CpKind>(k)), r.kinds[k]);
  w.endObject().key("top_ops");
  writeTop(w, r, false, o.top);
  w.key("top_kernels");
  writeTop(w, r, true, o.top);
  w.endObject();
}

}  // namespace sections

}  // namespace openreg::trace
