// The named steps prepareTrace and emitTrace are made of (trace_builder.h
// says what the two stages do). Only trace_builder.cpp and the steps' unit
// tests (tests/test_trace_steps.cpp) use this header.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "clock_map.h"
#include "records.h"
#include "trace_builder.h"

namespace openreg::profiler::steps {

// Correlation id (never 0) → 32-bit index. The joins look up millions of
// ids: node-based maps cost an allocation and a cache miss each. Runtimes
// hand ids out from a counter, so they usually fill a dense range: then a
// plain array indexed by (id - lowest) is used, which a trace walks almost
// in order. Otherwise, open addressing in one array.
class CorrelationIndex {
 public:
  static constexpr uint32_t kMissing = UINT32_MAX;

  CorrelationIndex() = default;
  // All keys lie in [lowest, highest]; at most `expected` of them.
  CorrelationIndex(uint64_t lowest, uint64_t highest, size_t expected);

  // Adds key → value; if key is already there, leaves it and returns false.
  bool insert(uint64_t key, uint32_t value);
  uint32_t find(uint64_t key) const;
  bool dense() const { return !dense_.empty(); }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t value = 0;
  };
  static size_t hash(uint64_t key);
  std::vector<uint32_t> dense_;
  uint64_t lowest_ = 0;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// An index sized for the non-zero correlation ids of `records`.
template <typename Records, typename Corr>
CorrelationIndex indexFor(const Records& records, Corr corr) {
  uint64_t lowest = UINT64_MAX, highest = 0;
  for (const auto& r : records) {
    const uint64_t id = corr(r);
    if (id == 0) continue;
    lowest = std::min(lowest, id);
    highest = std::max(highest, id);
  }
  return CorrelationIndex(lowest, highest, lowest <= highest ? records.size() : 0);
}

// Where each maximal run of `items` ordered by `before` begins.
template <typename T, typename Before>
std::vector<size_t> runStarts(const std::vector<T>& items, Before before) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i == 0 || before(items[i], items[i - 1])) starts.push_back(i);
  }
  return starts;
}

// A run's head as mergeRuns keeps it: at()'s value, or a pointer when at()
// returns a reference, so each item is looked up once, not per comparison.
template <typename Key>
struct MergeKey {
  Key value;
  const Key& get() const { return value; }
};
template <typename Key>
struct MergeKey<const Key&> {
  const Key* value;
  const Key& get() const { return *value; }
};

// Hands (run, position) to `sink` in `before` order of at(run, position),
// where run r holds lengths[r] items already in that order: one pass
// through a heap of the runs' heads, O(n log runs); the head just taken is
// replaced by its successor and sifted down, not popped and pushed. Stable:
// at equal items the lower run goes first.
template <typename At, typename Before, typename Sink>
void mergeRuns(const std::vector<size_t>& lengths, At at, Before before, Sink sink) {
  using Key = decltype(at(size_t{0}, size_t{0}));
  struct Head {
    size_t run, position;
    MergeKey<Key> key;
  };
  auto keyOf = [&](size_t run, size_t position) {
    if constexpr (std::is_reference_v<Key>) {
      return MergeKey<Key>{&at(run, position)};
    } else {
      return MergeKey<Key>{at(run, position)};
    }
  };
  // True when a goes after b: the heap's top is the head that goes first.
  auto later = [&](const Head& a, const Head& b) {
    if (before(b.key.get(), a.key.get())) return true;
    if (before(a.key.get(), b.key.get())) return false;
    return a.run > b.run;
  };
  std::vector<Head> heap;
  for (size_t r = 0; r < lengths.size(); ++r) {
    if (lengths[r] > 0) heap.push_back({r, 0, keyOf(r, 0)});
  }
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    Head& top = heap.front();
    sink(top.run, top.position);
    if (++top.position < lengths[top.run]) {
      top.key = keyOf(top.run, top.position);
      // Sift the new head down to its place.
      for (size_t i = 0;;) {
        size_t first = i;
        for (size_t child = 2 * i + 1; child <= 2 * i + 2 && child < heap.size(); ++child) {
          if (later(heap[first], heap[child])) first = child;
        }
        if (first == i) break;
        std::swap(heap[i], heap[first]);
        i = first;
      }
    } else {
      std::pop_heap(heap.begin(), heap.end(), later);
      heap.pop_back();
    }
  }
}

// Sorts `items` stably by `before`. Records arrive as a few dozen sorted
// runs (one per thread buffer), so the runs are merged, each item moved
// once; many short runs fall back to a plain stable sort.
template <typename T, typename Before>
void sortRuns(std::vector<T>& items, Before before) {
  std::vector<size_t> starts = runStarts(items, before);
  if (starts.size() <= 1) return;
  if (starts.size() * 64 > items.size()) {
    std::stable_sort(items.begin(), items.end(), before);
    return;
  }
  std::vector<size_t> lengths(starts.size());
  for (size_t r = 0; r < starts.size(); ++r) {
    lengths[r] = (r + 1 < starts.size() ? starts[r + 1] : items.size()) - starts[r];
  }
  std::vector<T> out;
  out.reserve(items.size());
  mergeRuns(
      lengths, [&](size_t run, size_t i) -> const T& { return items[starts[run] + i]; }, before,
      [&](size_t run, size_t i) { out.push_back(std::move(items[starts[run] + i])); });
  items = std::move(out);
}

// ---- prepareTrace ----

// External ids by correlation id; a later record of the same kind wins.
struct ExternalJoin {
  CorrelationIndex index;
  std::vector<ExternalIds> ids;
  ExternalIds of(uint64_t correlationId) const;
};
ExternalJoin joinExternalIds(const ChunkedVector<ExternalRecord>& external);

using ClockMaps = std::unordered_map<int32_t, ClockMap>;
ClockMaps buildClockMaps(const std::unordered_map<int32_t, std::vector<ClockPoint>>& samples, PrepareStats& stats);

// Runtime calls by host start into out.runtime, the first of each
// correlation id only (later ones count as duplicates). Returns the index of
// out.runtime by correlation id.
CorrelationIndex orderRuntimeCalls(const ChunkedVector<RuntimeCall>& calls, const ExternalJoin& external,
                                   PreparedTrace& out);

// Host syncs into out.hostSyncs (one per correlation id) with their calls,
// and each sync call's syncIndex.
void joinHostSyncs(const ChunkedVector<HostSync>& syncs, const CorrelationIndex& runtimeByCorr, PreparedTrace& out);
// The orEventRecord call each stream wait waited on, into out.eventWaitRecords.
void joinEventWaits(const ChunkedVector<EventWait>& waits, const CorrelationIndex& runtimeByCorr, PreparedTrace& out);

// Device work into out.deviceOps in arrival order: one record per
// correlation id, mapped to host time (unmapped work is counted and left
// out), joined with its external ids and launch.
void mapDeviceOps(const ChunkedVector<DeviceOp>& ops, const ClockMaps& clocks, const ExternalJoin& external,
                  const CorrelationIndex& runtimeByCorr, PreparedTrace& out);

// Per-trace ids in submission order: a launch and its device work share one;
// device work whose launch is unknown gets its own, placed at its start.
void assignTraceIds(PreparedTrace& out);

// ---- emitTrace ----

// Which host launch rows lie in the window, and which are emitted.
struct RuntimeSelection {
  std::vector<char> inWindow;
  std::vector<char> emitted;
};
RuntimeSelection selectRuntime(const PreparedTrace& prepared, const EmitOptions& options, EmitStats& stats);

// A piece of device work on its stream row, with its final host start.
// emit is false for work kept only for the user-range spans over it.
// 16 bytes: a trace has one per device activity. Fixes only move starts
// later, taking the end along when they pass it, so the end is always the
// prepared end or the start, whichever is later.
struct RowWork {
  int64_t start = 0;
  uint32_t index = 0;  // into PreparedTrace::deviceOps
  bool emit = false;

  const PreparedDeviceOp& op(const PreparedTrace& prepared) const { return prepared.deviceOps[index]; }
  int64_t end(const PreparedTrace& prepared) const { return std::max(op(prepared).end, start); }
};
using RowKey = std::pair<int32_t, uint64_t>;  // (device, stream)
using RowMap = std::map<RowKey, std::vector<RowWork>>;

// The requested device work inside the window (and after notBefore), by
// row, each row in prepared order (by start), starts moved up to launches.
RowMap selectRowWork(const PreparedTrace& prepared, const EmitOptions& options,
                     const std::vector<char>& runtimeInWindow, EmitStats& stats);

// Work cannot start before it was submitted: a mapped start a little earlier
// is clock error. Moves the start (only: no new overlap on the row) up to
// `launch`; returns whether it did.
bool fixCausality(RowWork& work, int64_t launch, EmitStats& stats);

// A stream runs one thing at a time: sorts each row by time and moves each
// start past the previous end, so rounding never makes neighbours overlap.
void fixRows(RowMap& rows, const PreparedTrace& prepared, EmitStats& stats);

// Whether device work gets an arrow from its launch: both ends emitted.
bool hasLaunchFlow(const PreparedDeviceOp& op, const std::vector<char>& runtimeEmitted);

// The launches with an arrow to emitted device work; counts the arrows.
std::vector<char> markFlows(const RowMap& rows, const PreparedTrace& prepared, const std::vector<char>& runtimeEmitted,
                            EmitStats& stats);

// record_function ranges on the stream rows they cover: the innermost range
// of each piece of work (the top of the user stack at submission), spanning
// that range's work on one row, as Kineto does for CUDA. Per row in
// emission order; a span crossing another's end cannot nest and is dropped.
// Names go into result.rangeNames, rows into result.rows.
std::vector<TraceEvent> buildSpans(const RowMap& rows, const PreparedTrace& prepared, const UserRangeLookup& userRange,
                                   EmitResult& result);

// The order events are emitted in: by start, enclosing events first.
inline bool emitBefore(int64_t startA, int64_t endA, int64_t startB, int64_t endB) {
  return startA != startB ? startA < startB : endA > endB;
}

// What is emitted, as runs that are each in emission order: one per device
// row (its emitted work only), then the launches, then the spans. Merged,
// they are the trace; each event is built only as it is handed out.
struct EmitRuns {
  std::vector<const std::vector<RowWork>*> rows;
  std::vector<uint32_t> launches;  // into PreparedTrace::runtime
  std::vector<TraceEvent> spans;
  size_t launchRun() const { return rows.size(); }
  size_t spanRun() const { return rows.size() + 1; }
  std::vector<size_t> lengths() const;
};
// Drops the work kept only for spans from `rows` and puts each run in
// emission order; counts each row's events into result.rows.
EmitRuns orderRuns(RowMap& rows, const PreparedTrace& prepared, const RuntimeSelection& runtime,
                   std::vector<TraceEvent> spans, EmitResult& result);

TraceEvent runtimeEvent(const PreparedTrace& prepared, size_t index, bool flowStart);
TraceEvent deviceEvent(const PreparedTrace& prepared, const RowWork& work, bool flowEnd);
// The id of runtime row `runtimeIndex` if it is emitted, else -1.
int32_t emittedRowId(const PreparedTrace& prepared, int32_t runtimeIndex, const std::vector<char>& runtimeEmitted);
// A stream wait's orEventRecord row id (emittedRowId); -1 for other work.
int32_t waitRecordRowId(const PreparedTrace& prepared, const DeviceOp& op, const std::vector<char>& runtimeEmitted);
// The host syncs in the window, as events on their device: a stream sync at
// its stream (Kineto's JSON writer moves "Stream Sync" events to a row of
// their own beside the stream's), event and device syncs on rows that hold
// one host thread's waits each (kHostWaitRowBase + 0, 1, ... in order of
// first wait; Kineto writes negative rows as positive ones, into the
// streams'), so that syncs never overlap on a row; these rows go to
// result.hostSyncRows.
std::vector<TraceEvent> hostSyncEvents(const PreparedTrace& prepared, const EmitOptions& options,
                                       const std::vector<char>& runtimeEmitted, EmitResult& result);

}  // namespace openreg::profiler::steps
