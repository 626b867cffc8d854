// The critical path of one step (a ProfilerStep#N, an on-demand trace's
// optimizer step (Trace::steps), or any named host range),
// on one trace or across rank traces: a dependency graph of event start and
// end points (HolisticTraceAnalysis's model: node = an event's start or end,
// edge = an op's duration, nesting, a launch delay, kernel-to-kernel order on
// a stream, a synchronisation), plus, across ranks, each collective tied to
// the same collective on every other rank. The longest path is the critical
// path. See trace/README.md, section "Critical path".
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis.h"
#include "trace_model.h"

namespace openreg::trace {

enum class CpEdgeType : uint8_t {
  Operator,      // a span of an op, runtime call or device event (weighted)
  Dependency,    // host order between top-level ops, nesting (zero weight)
  LaunchDelay,   // runtime call start -> its device work's start (weighted)
  KernelKernel,  // previous work on the stream -> this work (weighted gap)
  Sync,          // device work -> what waited for it (zero weight)
  Collective,    // last rank's arrival at a collective -> its end on every rank (weighted)
};
const char* cpEdgeTypeName(CpEdgeType t);

// What a stretch of the step went to, on the path.
enum class CpKind : uint8_t { HostOp, LaunchOverhead, Kernel, Copy, SyncWait, Communication, Idle };
inline constexpr size_t kCpKinds = 7;
const char* cpKindName(CpKind k);
// "host_op" ... -> the kind; false if unknown.
bool cpKindFromName(std::string_view name, CpKind& out);

struct CpEvent {
  uint32_t rank = 0;   // index into the traces analysed together
  uint32_t slice = 0;  // into that trace's slices
  uint32_t startNode = 0, endNode = 0;
  bool device = false;
  bool blocking = false;  // a host call that waits for device work (its own duration is not path time)
  bool launches = false;  // a runtime call that launched device work in the graph
};

struct CpNode {
  int64_t ts = 0;
  uint32_t event = 0;
  bool isStart = false;
};

struct CpEdge {
  uint32_t from = 0, to = 0;
  int64_t weight = 0;
  int32_t event = -1;  // the event the edge's time is attributed to, -1: none
  CpEdgeType type = CpEdgeType::Dependency;
};

// A rank's trace does not hold the step asked for (no range of its name, or, for an on-demand trace's steps
// matched by time, no step at that time): every-step output skips that step and says why.
class CpStepMissing : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct CpOptions {
  int64_t step = -1;                         // the step numbered <step>; -1 with an empty range: the first step
  std::string range;                         // a host range's exact name instead of a step
  int64_t instance = 0;                      // which instance of the range (0 = first)
  std::vector<int64_t> rankInstances;        // per trace, overriding `instance` (set by chooseRankTraces' caller)
  bool wholeTrace = false;                   // the whole trace instead of a step (HTA's annotation "")
  bool eachStep = false;                     // every step in short (criticalPathEachStepJson)
  int top = 10;                              // rows in the tables of ops and kernels
  bool pathEvents = true;                    // list every edge of the path in the result
  int64_t kernelKernelMaxGapNs = 1'500'000;  // HTA's KERNEL_KERNEL_DELAY_THRESHOLD_US
  struct WhatIf {
    std::string target;  // an event name, or "kind:<kind>"
    double factor = 1;   // how many times faster
  };
  std::vector<WhatIf> whatIf;
};

// One rank's step window.
struct CpStep {
  static constexpr uint32_t kWholeTrace = 0xFFFFFFFFu;
  uint32_t slice = kWholeTrace;  // the step's host range; kWholeTrace for none (whole trace, optimizer step)
  int64_t start = 0, end = 0;
};

// A collective matched across ranks.
struct CpCollective {
  std::string collective;
  uint32_t group = kNoString;  // in the first rank's string table
  int64_t seq = -1;
  std::vector<uint32_t> events;  // CpEvent of each rank's device work, by rank
  uint32_t lastRank = 0;
  int64_t lastArrival = 0;
};

// What every step's graph of one trace reads, built once per trace (critical_path.cpp).
struct CpRankIndex;
std::shared_ptr<const CpRankIndex> indexForCriticalPath(const Trace& t);

struct CpGraph {
  std::vector<const Trace*> traces;
  std::vector<std::shared_ptr<const CpRankIndex>> indexes;  // by rank
  std::vector<CpStep> steps;                                // by rank
  std::vector<CpEvent> events;
  std::vector<CpNode> nodes;
  std::vector<CpEdge> edges;
  std::vector<CpCollective> collectives;
  std::string stepName;
  uint64_t droppedEdges = 0;  // edges back in time dropped to break a cycle (rows that do not nest)

  uint32_t addEvent(uint32_t rank, uint32_t slice, bool device);
  void addEdge(uint32_t from, uint32_t to, CpEdgeType type, int32_t event = -1, bool zeroWeight = false);
  const Slice& slice(const CpEvent& e) const { return traces[e.rank]->slices[e.slice]; }
};

struct CpPath {
  int64_t length = 0;           // sum of the path's edge weights
  std::vector<uint32_t> edges;  // indices into CpGraph::edges, in path order
};

// Several traces of one rank (tensorboard_trace_handler writes one per profiling cycle): the trace of each rank
// that holds the step the options name, and the range's instance within it (a range's instances are counted over
// the rank's traces in time order). Every trace, in order, when each rank has one. Throws std::invalid_argument
// when a rank's traces do not hold the step, or two of them hold the same step (two runs).
struct CpTraceChoice {
  std::vector<uint32_t> traces;    // indices into the traces given, one per rank
  std::vector<int64_t> instances;  // by chosen trace (empty: the options' instance)
};
CpTraceChoice chooseRankTraces(const std::vector<const Trace*>& traces, const CpOptions& options);

// Each rank's graph of the step, not yet joined at collectives (critical_path.cpp); `indexes` (by rank, may be
// short or empty) are reused, the missing ones built.
CpGraph buildRankGraphs(const std::vector<const Trace*>& traces, const CpOptions& options,
                        const std::vector<std::shared_ptr<const CpRankIndex>>& indexes = {});
// The rank's collectives (computeCommunication's instances), from its index.
const std::vector<CollectiveInstance>& collectivesOf(const CpGraph& g, uint32_t rank);
// Builds the graph of the step named by options on each trace (one per
// rank). Throws std::invalid_argument with a clear message when the step is
// not in a trace, a trace has no device work in it, or the traces come from
// different runs.
CpGraph buildCriticalPathGraph(const std::vector<const Trace*>& traces, const CpOptions& options,
                               const std::vector<std::shared_ptr<const CpRankIndex>>& indexes = {});
// The longest path; `weights` overrides the edges' weights (what-if) when not empty.
CpPath longestPath(const CpGraph& g, const std::vector<int64_t>& weights = {});
// The kind an edge of the path spends its time on, for its weighted part
// and for the rest of its elapsed time.
CpKind weightKind(const CpGraph& g, const CpEdge& e);
CpKind elapsedKind(const CpGraph& g, const CpEdge& e);
// Edge weights with the target ran `factor` times faster.
std::vector<int64_t> whatIfWeights(const CpGraph& g, const CpOptions::WhatIf& w);

CpOptions parseCpOptions(std::string_view json);
// The name of the trace's first step (Trace::steps), "" when none.
std::string firstStepName(const Trace& t);
// The name of the step numbered n in these traces (ProfilerStep#n, an on-demand trace's "iteration n");
// ProfilerStep#n when none has it.
std::string stepNamedByNumber(const std::vector<const Trace*>& traces, int64_t n);
std::string criticalPathJson(const std::vector<const Trace*>& traces, const CpOptions& options);
// Every step of the first rank (over its traces), in short (the traces indexed once): {"steps_from", "steps": [...],
// "skipped": [...]}.
std::string criticalPathEachStepJson(const std::vector<const Trace*>& traces, const CpOptions& options);

}  // namespace openreg::trace
