// The critical path across ranks (collectives matched by process group and
// sequence number), the longest path, what-if, and the report as JSON.
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "critical_path.h"
#include "json_reader.h"

namespace openreg::trace {

namespace {

// The group's name and the collective's sequence number: the device work's
// args, else its op's (record_param_comms).
struct CollectiveKey {
  std::string group, collective;
  int64_t seq = -1;
  bool operator<(const CollectiveKey& o) const {
    return std::tie(group, collective, seq) < std::tie(o.group, o.collective, o.seq);
  }
};

std::map<CollectiveKey, uint32_t> rankCollectives(const CpGraph& g, uint32_t rank,
                                                  const std::unordered_map<uint32_t, uint32_t>& eventOfSlice) {
  const Trace& t = *g.traces[rank];
  std::map<CollectiveKey, uint32_t> out;
  std::map<std::pair<std::string, std::string>, int64_t> ordinal;  // (group, collective) -> next order number
  for (const CollectiveInstance& in : collectivesOf(g, rank)) {
    auto ev = eventOfSlice.find(in.slice);
    if (ev == eventOfSlice.end()) continue;
    CollectiveKey k{std::string(t.str(in.group)), in.collective, in.seq};
    if (k.seq < 0 || in.group == kNoString) {
      const int32_t op = t.opOfDeviceSlice(t.slices[in.slice]);
      if (const CommArgs* a = op == kNoSlice ? nullptr : t.commArgsOf(static_cast<uint32_t>(op))) {
        if (k.seq < 0 && a->seq.ok()) k.seq = a->seq.value;
        if (in.group == kNoString) k.group = std::string(t.str(a->group));
      }
    }
    if (k.seq < 0) k.seq = 1'000'000'000 + ordinal[{k.group, k.collective}]++;  // by order when no Seq
    out.emplace(k, ev->second);
  }
  return out;
}

// Each collective present on several ranks ends on every rank no earlier than
// the last rank's arrival plus its own transfer: the wait before the last
// arrival is not the rank's own work, so the rank's span of the collective
// counts only from there, and an edge joins the last arrival to each rank's end.
void joinCollectives(CpGraph& g) {
  std::vector<int64_t> operatorEdge(g.events.size(), -1);
  for (size_t i = 0; i < g.edges.size(); ++i) {
    const CpEdge& e = g.edges[i];
    if (e.type == CpEdgeType::Operator && e.event >= 0 && g.events[e.event].device &&
        e.from == g.events[e.event].startNode)
      operatorEdge[e.event] = static_cast<int64_t>(i);
  }
  std::map<CollectiveKey, std::vector<uint32_t>> byKey;
  for (uint32_t r = 0; r < g.traces.size(); ++r) {
    std::unordered_map<uint32_t, uint32_t> eventOfSlice;
    for (uint32_t e = 0; e < g.events.size(); ++e)
      if (g.events[e].rank == r && g.events[e].device) eventOfSlice[g.events[e].slice] = e;
    for (const auto& [k, ev] : rankCollectives(g, r, eventOfSlice)) byKey[k].push_back(ev);
  }
  for (auto& [k, evs] : byKey) {
    if (evs.size() < 2) continue;
    CpCollective c;
    c.collective = k.collective;
    c.seq = k.seq;
    c.events = evs;
    uint32_t last = evs[0];
    for (uint32_t e : evs)
      if (g.nodes[g.events[e].startNode].ts > g.nodes[g.events[last].startNode].ts) last = e;
    c.lastRank = g.events[last].rank;
    c.lastArrival = g.nodes[g.events[last].startNode].ts;
    c.group = g.traces[0]->strings.find(k.group);
    for (uint32_t e : evs) {
      if (e == last) continue;
      if (operatorEdge[e] >= 0) {
        CpEdge& own = g.edges[static_cast<size_t>(operatorEdge[e])];
        own.weight = std::max<int64_t>(0, g.nodes[own.to].ts - c.lastArrival);
      }
      g.addEdge(g.events[last].startNode, g.events[e].endNode, CpEdgeType::Collective, static_cast<int32_t>(e));
    }
    g.collectives.push_back(std::move(c));
  }
  // In the order they ran (the last rank's arrival), not by name: the reader follows the step.
  std::sort(g.collectives.begin(), g.collectives.end(), [](const CpCollective& a, const CpCollective& b) {
    return std::tie(a.lastArrival, a.group, a.seq) < std::tie(b.lastArrival, b.group, b.seq);
  });
}

}  // namespace

namespace {

struct Adjacency {
  std::vector<uint32_t> inStart, inEdges, order;
};

// Incoming edges per node (in the order they were added) and a topological
// order (Kahn's); false when the graph has a cycle.
bool topologicalOrder(const CpGraph& g, Adjacency& a) {
  const size_t n = g.nodes.size();
  a.inStart.assign(n + 1, 0);
  std::vector<uint32_t> outStart(n + 1, 0);
  for (const CpEdge& e : g.edges) ++a.inStart[e.to + 1], ++outStart[e.from + 1];
  for (size_t i = 0; i < n; ++i) a.inStart[i + 1] += a.inStart[i], outStart[i + 1] += outStart[i];
  a.inEdges.assign(g.edges.size(), 0);
  std::vector<uint32_t> outEdges(g.edges.size());
  {
    std::vector<uint32_t> inPos(a.inStart.begin(), a.inStart.end() - 1), outPos(outStart.begin(), outStart.end() - 1);
    for (uint32_t i = 0; i < g.edges.size(); ++i)
      a.inEdges[inPos[g.edges[i].to]++] = i, outEdges[outPos[g.edges[i].from]++] = i;
  }
  std::vector<uint32_t> indegree(n);
  a.order.clear();
  a.order.reserve(n);
  for (size_t v = 0; v < n; ++v) {
    indegree[v] = a.inStart[v + 1] - a.inStart[v];
    if (!indegree[v]) a.order.push_back(static_cast<uint32_t>(v));
  }
  for (size_t k = 0; k < a.order.size(); ++k)
    for (uint32_t j = outStart[a.order[k]]; j < outStart[a.order[k] + 1]; ++j)
      if (--indegree[g.edges[outEdges[j]].to] == 0) a.order.push_back(g.edges[outEdges[j]].to);
  return a.order.size() == n;
}

// Traces whose rows do not nest (MTIA's runtime calls cross their op's end)
// or whose device work overlaps on a stream can give dependencies that point
// back in time and close a cycle: then those edges go (they are counted).
void breakCycles(CpGraph& g) {
  Adjacency a;
  if (topologicalOrder(g, a)) return;
  const size_t before = g.edges.size();
  std::erase_if(g.edges, [&](const CpEdge& e) { return g.nodes[e.to].ts < g.nodes[e.from].ts; });
  g.droppedEdges = before - g.edges.size();
  if (!topologicalOrder(g, a))
    throw std::runtime_error("the trace's dependencies form a cycle (" +
                             std::to_string(g.nodes.size() - a.order.size()) +
                             " event points) even without the edges that point back in time");
}

}  // namespace

// For each node in topological order the heaviest incoming edge, the first of
// equals in the order edges were added (networkx's dag_longest_path, which HTA
// runs, does the same).
CpPath longestPath(const CpGraph& g, const std::vector<int64_t>& weights) {
  Adjacency a;
  if (!topologicalOrder(g, a)) throw std::runtime_error("the critical-path graph has a cycle");
  const size_t n = g.nodes.size();
  std::vector<int64_t> dist(n, 0);
  std::vector<int64_t> via(n, -1);
  CpPath best;
  int64_t bestNode = -1;
  for (uint32_t v : a.order) {
    for (uint32_t j = a.inStart[v]; j < a.inStart[v + 1]; ++j) {
      const uint32_t e = a.inEdges[j];
      const int64_t d = saturatingAdd(dist[g.edges[e].from], weights.empty() ? g.edges[e].weight : weights[e]);
      if (via[v] < 0 || d > dist[v]) dist[v] = d, via[v] = e;
    }
    if (bestNode < 0 || dist[v] > best.length) best.length = dist[v], bestNode = v;
  }
  for (int64_t v = bestNode; v >= 0 && via[v] >= 0; v = g.edges[via[v]].from)
    best.edges.push_back(static_cast<uint32_t>(via[v]));
  std::reverse(best.edges.begin(), best.edges.end());
  return best;
}

CpGraph buildCriticalPathGraph(const std::vector<const Trace*>& traces, const CpOptions& options,
                               const std::vector<std::shared_ptr<const CpRankIndex>>& indexes) {
  CpGraph g = buildRankGraphs(traces, options, indexes);
  if (traces.size() > 1) joinCollectives(g);
  breakCycles(g);
  return g;
}

const char* cpKindName(CpKind k) {
  static constexpr const char* kNames[] = {"host_op",   "launch_overhead", "kernel", "copy",
                                           "sync_wait", "communication",   "idle"};
  return kNames[static_cast<size_t>(k)];
}

bool cpKindFromName(std::string_view name, CpKind& out) {
  for (size_t i = 0; i < kCpKinds; ++i)
    if (name == cpKindName(static_cast<CpKind>(i))) return out = static_cast<CpKind>(i), true;
  return false;
}

CpKind weightKind(const CpGraph& g, const CpEdge& e) {
  switch (e.type) {
    case CpEdgeType::LaunchDelay:
    case CpEdgeType::KernelKernel:
      return CpKind::LaunchOverhead;
    case CpEdgeType::Collective:
      return CpKind::Communication;
    case CpEdgeType::Dependency:
    case CpEdgeType::Sync:
      return CpKind::Idle;
    case CpEdgeType::Operator:
      break;
  }
  if (e.event < 0) return CpKind::HostOp;
  const CpEvent& ev = g.events[e.event];
  if (!ev.device) return ev.launches ? CpKind::LaunchOverhead : CpKind::HostOp;
  switch (classifyKernel(*g.traces[ev.rank], ev.slice)) {
    case KernelClass::Memory:
      return CpKind::Copy;
    case KernelClass::Communication:
      return CpKind::Communication;
    default:
      return CpKind::Kernel;
  }
}

CpKind elapsedKind(const CpGraph& g, const CpEdge& e) {
  if (e.type == CpEdgeType::Sync) return CpKind::SyncWait;
  if (e.type == CpEdgeType::Operator && e.event >= 0 && g.events[e.event].blocking) return CpKind::SyncWait;
  return CpKind::Idle;
}

namespace {

bool hasEventNamed(const CpGraph& g, const std::string& name) {
  std::vector<uint32_t> ids;  // the name's string id in each trace
  for (const Trace* t : g.traces) ids.push_back(t->strings.find(name));
  for (const CpEvent& e : g.events)
    if (ids[e.rank] != kNoString && g.slice(e).name == ids[e.rank]) return true;
  return false;
}

}  // namespace

std::vector<int64_t> whatIfWeights(const CpGraph& g, const CpOptions::WhatIf& w) {
  std::vector<int64_t> out(g.edges.size());
  CpKind kind{};
  const bool byKind = startsWith(w.target, "kind:");
  if (byKind &&
      (!cpKindFromName(std::string_view(w.target).substr(5), kind) || kind == CpKind::SyncWait || kind == CpKind::Idle))
    throw std::invalid_argument("what-if: no kind \"" + w.target.substr(5) +
                                "\" that can run faster (host_op, launch_overhead, kernel, copy, communication; "
                                "sync_wait and idle are waits, shortened by what they wait for)");
  if (!byKind && !hasEventNamed(g, w.target))
    throw std::invalid_argument("what-if: no op or kernel named \"" + w.target + "\" in " + g.stepName +
                                " (names are exact, as the tables of ops and kernels print them)");
  for (size_t i = 0; i < g.edges.size(); ++i) {
    const CpEdge& e = g.edges[i];
    bool match = false;
    if (byKind) {
      match = weightKind(g, e) == kind;
    } else if (e.event >= 0 && (e.type == CpEdgeType::Operator || e.type == CpEdgeType::Collective)) {
      const CpEvent& ev = g.events[e.event];
      match = g.traces[ev.rank]->str(g.slice(ev).name) == w.target;
    }
    out[i] = match ? static_cast<int64_t>(std::llround(static_cast<double>(e.weight) / w.factor)) : e.weight;
  }
  return out;
}

CpOptions parseCpOptions(std::string_view json) {
  CpOptions o;
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos) return o;
  auto bad = [](const std::string& what) { return std::invalid_argument("critical path option " + what); };
  try {
    JsonReader r(openMemorySource(json.data(), json.size()));
    if (r.peekKind() != JsonKind::Object) throw std::invalid_argument("options must be a JSON object");
    r.beginObject();
    std::string_view key;
    auto integer = [&](const char* name, int64_t& out, int64_t lo) {
      if (r.peekKind() != JsonKind::Number || !parseInt64(r.readNumber(), out) || out < lo)
        throw bad(std::string("\"") + name + "\" must be an integer >= " + std::to_string(lo));
    };
    while (r.nextKey(key)) {
      int64_t v = 0;
      if (key == "step") {
        integer("step", o.step, 0);
      } else if (key == "range" || key == "instance") {
        if (key == "instance") {
          integer("instance", o.instance, 0);
          continue;
        }
        if (r.peekKind() != JsonKind::String) throw bad("\"range\" must be a string");
        o.range = std::string(r.readString());
      } else if (key == "each_step") {
        if (r.peekKind() != JsonKind::True && r.peekKind() != JsonKind::False)
          throw bad("\"each_step\" must be a bool");
        o.eachStep = r.readBool();
      } else if (key == "whole_trace") {
        if (r.peekKind() != JsonKind::True && r.peekKind() != JsonKind::False)
          throw bad("\"whole_trace\" must be a bool");
        o.wholeTrace = r.readBool();
      } else if (key == "top") {
        integer("top", v, 0);
        o.top = static_cast<int>(std::min<int64_t>(v, 1'000'000'000));
      } else if (key == "kernel_kernel_max_gap_ns") {
        integer("kernel_kernel_max_gap_ns", o.kernelKernelMaxGapNs, 0);
      } else if (key == "path_events") {
        if (r.peekKind() != JsonKind::True && r.peekKind() != JsonKind::False)
          throw bad("\"path_events\" must be a bool");
        o.pathEvents = r.readBool();
      } else if (key == "what_if") {
        if (r.peekKind() != JsonKind::Array) throw bad("\"what_if\" must be a list of {target, factor}");
        r.beginArray();
        while (r.nextElement()) {
          CpOptions::WhatIf w;
          r.beginObject();
          std::string_view k2;
          while (r.nextKey(k2)) {
            if (k2 == "target" && r.peekKind() == JsonKind::String)
              w.target = std::string(r.readString());
            else if (k2 == "factor" && r.peekKind() == JsonKind::Number)
              w.factor = parseDouble(r.readNumber());
            else
              throw bad("\"what_if\" entries take a string \"target\" and a number \"factor\"");
          }
          if (w.target.empty() || !(w.factor > 0) || !std::isfinite(w.factor))
            throw bad("\"what_if\" needs a target and a factor > 0");
          o.whatIf.push_back(std::move(w));
        }
      } else {
        throw std::invalid_argument("unknown option \"" + std::string(key) + "\"");
      }
    }
  } catch (const JsonError& e) {
    throw std::invalid_argument(std::string("options: ") + e.what());
  }
  if (o.instance != 0 && o.range.empty()) throw bad("\"instance\" counts the instances of a \"range\": name one");
  if ((!o.range.empty()) + (o.step >= 0) + o.wholeTrace + o.eachStep > 1)
    throw bad("\"step\", \"range\", \"whole_trace\" and \"each_step\" exclude each other");
  return o;
}

}  // namespace openreg::trace
