// Memory debugging for the openreg caching allocator, with CUDA's semantics:
// allocation history, snapshots, out-of-memory observers and the allocator's
// settings (PYTORCH_ALLOC_CONF).
//
// Contract:
//   - recordMemoryHistory() applies to every device. While it is off the
//     allocator's only extra work per allocation and free is one relaxed
//     atomic load. While on, each device keeps a ring of at most maxEntries
//     trace entries (the oldest are overwritten).
//   - Stacks are gathered with the CreateContextFn given, called before the
//     allocator takes its lock (the function may take the GIL).
//   - memorySnapshot() copies the state under each device's lock; the
//     contexts it returns are shared with the allocator and stay valid for as
//     long as the snapshot holds them.
//   - Out-of-memory observers run after the allocator's lock is released, on
//     the allocating thread, before torch.OutOfMemoryError is thrown.
//   - Everything here is thread-safe. Errors are c10::Error (RuntimeError).
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include <c10/core/CachingDeviceAllocator.h>

namespace openreg::backend {

// The settings the allocator honours, read once from PYTORCH_ALLOC_CONF
// (or PYTORCH_CUDA_ALLOC_CONF) when the allocator is first used.
struct AllocatorSettings {
  std::string conf;                       // the variable's text, as given
  size_t maxSplitSize = SIZE_MAX;         // blocks this large or larger are never split
  size_t maxNonSplitRounding = 20 << 20;  // how much larger an unsplit cached block may be
  double garbageCollectionThreshold = 0;  // reclaim cache above this share of capacity (0: never)
  bool expandableSegments = false;        // accepted, not implemented: always false here
  // Divisions per power-of-two interval of request sizes, as CUDA's
  // roundup_power2_divisions: interval i holds sizes in [2^i, 2^(i+1)) MiB
  // (the first also everything smaller, the last everything larger). 0: off.
  static constexpr size_t kRoundupIntervals = 16;
  std::array<size_t, kRoundupIntervals> roundupPower2Divisions{};
};

// The size a request is rounded to: 512-byte multiples, or the next of
// `divisions` equal steps between two powers of two where configured.
size_t roundAllocationSize(size_t size, const AllocatorSettings& settings);

// The settings in effect. Throws c10::Error naming the key when the
// variable holds an unknown key or a malformed value.
const AllocatorSettings& allocatorSettings();

// Checks the variable's text as allocatorSettings() would, without applying it.
AllocatorSettings parseAllocatorSettings(const std::string& conf);

struct HistoryOptions {
  bool enabled = false;  // false: stop recording (and drop stacks of new blocks)
  bool trace = false;    // keep the event ring of maxEntries (CUDA's "state" keeps one); false: live-block stacks only
  c10::CachingDeviceAllocator::RecordContext when = c10::CachingDeviceAllocator::RecordContext::NEVER;
  c10::CachingDeviceAllocator::CreateContextFn gather = nullptr;  // null: no stacks
  size_t maxEntries = SIZE_MAX;
  bool clearHistory = false;
  std::vector<c10::CachingDeviceAllocator::TraceEntry::Action> skipActions;
};

void recordMemoryHistory(const HistoryOptions& options);
bool memoryHistoryEnabled();

struct MemorySnapshot {
  std::vector<c10::CachingDeviceAllocator::SegmentInfo> segments;  // by device, then address
  // One list per device, oldest first; each entry's time_.t_ is ns since the epoch.
  std::vector<std::vector<c10::CachingDeviceAllocator::TraceEntry>> deviceTraces;
  AllocatorSettings settings;
};

// Records a `snapshot` trace entry on each device, then copies the state.
MemorySnapshot memorySnapshot();

// (device, bytes requested, device total, device free)
using OutOfMemoryObserver = std::function<void(int64_t, size_t, size_t, size_t)>;
void attachOutOfMemoryObserver(OutOfMemoryObserver observer);

}  // namespace openreg::backend
