#include "backend/CachingAllocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/Exception.h>
#include <openreg/activity.h>

#include "backend/Check.h"
#include "backend/Device.h"
#include "backend/MemoryHistory.h"
#include "backend/Stream.h"

namespace openreg::backend {

namespace {

using c10::GatheredContext;
using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatType;
using c10::CachingAllocator::StatTypes;
using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::RecordContext;
using c10::CachingDeviceAllocator::TraceEntry;
using Context = std::shared_ptr<GatheredContext>;

constexpr size_t kMinBlockSize = 512;           // every size is rounded to this
constexpr size_t kSmallRequestLimit = 1 << 20;  // <= 1 MiB: small pool
constexpr size_t kSmallSegmentSize = 2 << 20;   // small pool segments
constexpr size_t kLargeSegmentRound = 2 << 20;  // large segments round to 2 MiB

struct Segment;

struct Block {
  c10::DeviceIndex device;
  orStream_t stream;  // the stream it was allocated on
  size_t size;
  size_t requested = 0;
  void* ptr;
  bool small;
  Segment* segment = nullptr;
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  bool allocated = false;
  int pendingEvents = 0;  // freed, but in use on recorded streams
  std::unordered_set<orStream_t> streamUses;
  Context context;  // the stack that allocated it, while history is recorded

  Block(c10::DeviceIndex d, orStream_t s, size_t sz, void* p, bool isSmall)
      : device(d), stream(s), size(sz), ptr(p), small(isSmall) {}
  bool isSplit() const { return prev != nullptr || next != nullptr; }
};

// One device allocation; its blocks tile it from `head` on.
struct Segment {
  void* base;
  size_t size;
  orStream_t stream;
  bool small;
  Block* head;
  Context context;
};

// History settings shared by every device. The allocation path reads only
// gRecordWhen while recording is off.
std::atomic<RecordContext> gRecordWhen{RecordContext::NEVER};
std::atomic<c10::CachingDeviceAllocator::CreateContextFn> gGatherContext{nullptr};
std::atomic<bool> gHistoryOn{false};

// The stack of the calling thread, if history wants one at `level`. Called
// before any allocator lock is taken: gathering may take the GIL.
Context gatherContext(RecordContext level) {
  const RecordContext when = gRecordWhen.load(std::memory_order_relaxed);
  if (C10_LIKELY(when == RecordContext::NEVER) || when < level) return nullptr;
  auto gather = gGatherContext.load(std::memory_order_relaxed);
  return gather != nullptr ? gather() : nullptr;
}

uint64_t streamNumber(orStream_t stream) {
  uint64_t id = 0;
  orStreamGetId(stream, &id);
  return id;
}

std::mutex gObserversMutex;
std::vector<OutOfMemoryObserver> gObservers;

// What an allocation that ran out of memory leaves for its report.
struct OutOfMemory {
  size_t requested = 0;
  size_t rounded = 0;
  size_t deviceFree = 0;
  size_t deviceTotal = 0;
  size_t allocated = 0;
  size_t reserved = 0;
  std::string runtimeMessage;
};

// Free blocks ordered so that lower_bound({stream, size}) finds the smallest
// fitting block of that stream.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return std::less<orStream_t>()(a->stream, b->stream);
    if (a->size != b->size) return a->size < b->size;
    return std::less<void*>()(a->ptr, b->ptr);
  }
};
using FreePool = std::set<Block*, BlockOrder>;

}  // namespace

size_t roundAllocationSize(size_t size, const AllocatorSettings& settings) {
  if (size < kMinBlockSize) return kMinBlockSize;
  // The interval of `size`: floor(log2(size in MiB)), clamped to the table.
  const int log2Size = 63 - __builtin_clzll(size);
  const size_t index = std::clamp<int>(log2Size - 20, 0, static_cast<int>(AllocatorSettings::kRoundupIntervals) - 1);
  const size_t divisions = settings.roundupPower2Divisions[index];
  if (divisions > 1 && size > kMinBlockSize * divisions) {
    const size_t floor = size_t{1} << log2Size;
    if (size == floor) return size;
    const size_t step = floor / divisions;
    return (size + step - 1) / step * step;
  }
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

namespace {

size_t segmentSize(size_t rounded) {
  if (rounded <= kSmallRequestLimit) return kSmallSegmentSize;
  return kLargeSegmentRound * ((rounded + kLargeSegmentRound - 1) / kLargeSegmentRound);
}

StatTypes statTypesFor(bool small) {
  StatTypes types{};
  types[static_cast<size_t>(StatType::AGGREGATE)] = true;
  types[static_cast<size_t>(small ? StatType::SMALL_POOL : StatType::LARGE_POOL)] = true;
  return types;
}

template <class F>
void forEachStat(const StatTypes& types, F&& f) {
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i]) f(i);
}

std::string formatBytes(size_t bytes) {
  std::ostringstream out;
  out.precision(2);
  out << std::fixed;
  if (bytes >= (1ull << 40))
    out << static_cast<double>(bytes) / (1ull << 40) << " TiB";
  else if (bytes >= (1ull << 30))
    out << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  else if (bytes >= (1ull << 20))
    out << static_cast<double>(bytes) / (1ull << 20) << " MiB";
  else if (bytes >= (1ull << 10))
    out << static_cast<double>(bytes) / (1ull << 10) << " KiB";
  else
    out << bytes << " bytes";
  return out.str();
}

class DeviceCache {
 public:
  explicit DeviceCache(c10::DeviceIndex device) : device_(device) {}

  // Returns nullptr only by throwing torch.OutOfMemoryError; the observers
  // run and the exception is raised after the lock is released.
  Block* allocate(size_t requested, orStream_t stream, const Context& context) {
    OutOfMemory oom;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      Block* block = allocateLocked(requested, stream, context, oom);
      if (block != nullptr) return block;
    }
    raiseOutOfMemory(oom);
  }

  void free(Block* block, const Context& context) {
    std::unique_lock<std::mutex> lock(mutex_);
    TORCH_INTERNAL_ASSERT(block->allocated, "openreg allocator: freeing a block that is not allocated");
    block->allocated = false;
    forEachStat(statTypesFor(block->small), [&](size_t i) {
      stats_.allocation[i].decrease(1);
      stats_.allocated_bytes[i].decrease(block->size);
      stats_.requested_bytes[i].decrease(block->requested);
    });
    if (block->size >= maxSplitSize_) stats_.oversize_allocations.decrease(1);
    if (C10_UNLIKELY(traceOn_))
      recordTrace(TraceEntry::FREE_REQUESTED, block->ptr, block->size, block->stream, context);
    reportToProfiler(block->ptr, -static_cast<int64_t>(block->size));
    if (block->streamUses.empty()) {
      returnToPool(block, context);
    } else {
      recordUseEvents(block);
    }
  }

  void recordStream(Block* block, orStream_t stream) {
    std::unique_lock<std::mutex> lock(mutex_);
    TORCH_CHECK(block->allocated, "openreg: record_stream on memory that is not allocated");
    if (stream != block->stream) block->streamUses.insert(stream);
  }

  void emptyCache() {
    std::unique_lock<std::mutex> lock(mutex_);
    synchronizeAndProcessEvents();
    releaseCachedSegments();
  }

  DeviceStats stats() {
    std::unique_lock<std::mutex> lock(mutex_);
    return stats_;
  }

  // Every Stat of every StatArray in stats_ (the caller holds mutex_).
  template <class Fn>
  void forEveryStat(Fn fn) {
    for (auto* array :
         {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split, &stats_.allocated_bytes,
          &stats_.reserved_bytes, &stats_.active_bytes, &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
      for (auto& stat : *array) fn(stat);
    }
    fn(stats_.oversize_allocations);
    fn(stats_.oversize_segments);
  }

  void resetAccumulated() {
    std::unique_lock<std::mutex> lock(mutex_);
    forEveryStat([](c10::CachingAllocator::Stat& stat) { stat.reset_accumulated(); });
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_sync_all_streams = 0;
    stats_.num_device_alloc = 0;
    stats_.num_device_free = 0;
  }

  void resetPeak() {
    std::unique_lock<std::mutex> lock(mutex_);
    forEveryStat([](c10::CachingAllocator::Stat& stat) { stat.reset_peak(); });
  }

  CacheSnapshot snapshot() {
    std::unique_lock<std::mutex> lock(mutex_);
    CacheSnapshot s;
    for (const FreePool* pool : {&small_, &large_}) {
      for (const Block* b : *pool) {
        ++s.cachedBlocks;
        s.cachedBytes += b->size;
      }
    }
    for (const auto& [stream, queue] : pendingEvents_) s.blocksAwaitingEvents += queue.size();
    return s;
  }

  void setHistory(const HistoryOptions& options) {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool wasOn = traceOn_;
    traceOn_ = options.enabled && options.trace;
    if (options.clearHistory || !traceOn_ || !wasOn) {
      ring_.clear();
      ringNext_ = 0;
    } else {
      ring_ = traceInOrder();  // keeps the newest entries when the ring shrinks below
      ringNext_ = 0;
    }
    maxEntries_ = std::max<size_t>(1, options.maxEntries);
    if (ring_.size() > maxEntries_) ring_.erase(ring_.begin(), ring_.end() - static_cast<ptrdiff_t>(maxEntries_));
    ringNext_ = ring_.size() % maxEntries_;
    skip_.fill(false);
    for (auto action : options.skipActions) skip_.at(static_cast<size_t>(action)) = true;
  }

  // The segments with their blocks, and the trace (streams as numbers).
  void appendSnapshot(MemorySnapshot& out) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (traceOn_) recordTrace(TraceEntry::SNAPSHOT, nullptr, 0, nullptr, nullptr);
    for (const auto& [base, segment] : segments_) out.segments.push_back(describeSegment(*segment));
    std::vector<TraceEntry> trace = traceInOrder();
    for (TraceEntry& entry : trace)
      entry.stream_ = reinterpret_cast<void*>(streamNumber(static_cast<orStream_t>(entry.stream_)));
    out.deviceTraces.push_back(std::move(trace));
  }

 private:
  Block* allocateLocked(size_t requested, orStream_t stream, const Context& context, OutOfMemory& oom) {
    if (C10_UNLIKELY(!settingsLoaded_)) loadSettings();
    processEvents();
    const size_t rounded = roundAllocationSize(requested, *settings_);
    const bool small = rounded <= kSmallRequestLimit;
    FreePool& pool = small ? small_ : large_;
    Block* block = takeFromPool(pool, stream, rounded);
    if (block == nullptr) block = allocateSegment(rounded, small, stream, context);
    if (block == nullptr) {
      noteOutOfMemory(requested, rounded, stream, context, oom);
      return nullptr;
    }
    block = splitIfWorthIt(block, rounded, pool);
    markAllocated(block, requested, context);
    return block;
  }

  void markAllocated(Block* block, size_t requested, const Context& context) {
    block->allocated = true;
    block->requested = requested;
    block->context = context;
    forEachStat(statTypesFor(block->small), [&](size_t i) {
      stats_.allocation[i].increase(1);
      stats_.allocated_bytes[i].increase(block->size);
      stats_.active[i].increase(1);
      stats_.active_bytes[i].increase(block->size);
      stats_.requested_bytes[i].increase(requested);
    });
    if (block->size >= maxSplitSize_) stats_.oversize_allocations.increase(1);
    if (C10_UNLIKELY(traceOn_)) recordTrace(TraceEntry::ALLOC, block->ptr, block->size, block->stream, context);
    reportToProfiler(block->ptr, static_cast<int64_t>(block->size));
  }

  void loadSettings() {
    const AllocatorSettings& settings = allocatorSettings();  // throws for a bad PYTORCH_ALLOC_CONF
    settings_ = &settings;
    maxSplitSize_ = settings.maxSplitSize;
    maxNonSplitRounding_ = settings.maxNonSplitRounding;
    size_t freeBytes = 0;
    orMemGetInfoIndex(device_, &freeBytes, &capacity_);
    gcLimit_ = settings.garbageCollectionThreshold > 0
                   ? static_cast<size_t>(settings.garbageCollectionThreshold * static_cast<double>(capacity_))
                   : SIZE_MAX;
    stats_.max_split_size = maxSplitSize_ == SIZE_MAX ? -1 : static_cast<int64_t>(maxSplitSize_);
    settingsLoaded_ = true;
  }

  // An entry in the ring (the caller holds mutex_ and checked traceOn_).
  void recordTrace(TraceEntry::Action action, void* addr, size_t size, orStream_t stream, const Context& context) {
    if (skip_[static_cast<size_t>(action)]) return;
    const bool withStack = gRecordWhen.load(std::memory_order_relaxed) >= RecordContext::ALLOC;
    TraceEntry entry(action, device_, reinterpret_cast<size_t>(addr), size, stream, {0, 0}, c10::getApproximateTime(),
                     withStack ? context : nullptr);
    if (ring_.size() < maxEntries_) {
      ring_.push_back(std::move(entry));
    } else {
      ring_[ringNext_] = std::move(entry);
    }
    ringNext_ = (ringNext_ + 1) % maxEntries_;
  }

  std::vector<TraceEntry> traceInOrder() const {
    if (ring_.size() < maxEntries_) return ring_;
    std::vector<TraceEntry> ordered(ring_.begin() + static_cast<ptrdiff_t>(ringNext_), ring_.end());
    ordered.insert(ordered.end(), ring_.begin(), ring_.begin() + static_cast<ptrdiff_t>(ringNext_));
    return ordered;
  }

  c10::CachingDeviceAllocator::SegmentInfo describeSegment(const Segment& segment) const {
    c10::CachingDeviceAllocator::SegmentInfo info;
    info.device = device_;
    info.address = reinterpret_cast<size_t>(segment.base);
    info.total_size = segment.size;
    info.stream = reinterpret_cast<void*>(streamNumber(segment.stream));
    info.is_large = !segment.small;
    info.context_when_allocated = segment.context;
    for (const Block* block = segment.head; block != nullptr; block = block->next) {
      c10::CachingDeviceAllocator::BlockInfo b;
      b.size = block->size;
      b.requested_size = block->allocated ? block->requested : 0;
      b.allocated = block->allocated;
      b.active = block->allocated || block->pendingEvents > 0;
      b.context_when_allocated = b.active ? block->context : nullptr;
      if (b.allocated) info.allocated_size += b.size, info.requested_size += b.requested_size;
      if (b.active) info.active_size += b.size;
      info.blocks.push_back(std::move(b));
    }
    return info;
  }

  void reportToProfiler(void* ptr, int64_t delta) {
    const auto agg = static_cast<size_t>(StatType::AGGREGATE);
    c10::reportMemoryUsageToProfiler(ptr, delta, stats_.allocated_bytes[agg].current,
                                     stats_.reserved_bytes[agg].current, makeDevice(device_));
    // The device's MEMORY_ALLOCATED counter: what only the allocator knows.
    // Cannot fail for a valid device; nothing to do if it did.
    (void)orActivityPublishCounter(device_, OR_COUNTER_MEMORY_ALLOCATED,
                                   static_cast<uint64_t>(stats_.allocated_bytes[agg].current));
  }

  Block* takeFromPool(FreePool& pool, orStream_t stream, size_t rounded) {
    Block key(device_, stream, rounded, nullptr, false);
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    // max_split_size_mb: an unsplittable cached block serves only requests of
    // about its own size.
    if (!block->small && block->size >= maxSplitSize_) {
      if (rounded < maxSplitSize_ || block->size >= rounded + maxNonSplitRounding_) return nullptr;
    }
    poolErase(pool, it);
    return block;
  }

  // A new segment holding `rounded`, or nullptr when the device is full.
  Block* allocateSegment(size_t rounded, bool small, orStream_t stream, const Context& context) {
    const size_t size = segmentSize(rounded);
    const auto agg = static_cast<size_t>(StatType::AGGREGATE);
    // garbage_collection_threshold: give the cache back before growing past it.
    if (static_cast<size_t>(stats_.reserved_bytes[agg].current) + size > gcLimit_) releaseCachedSegments();
    void* ptr = nullptr;
    orError_t err = deviceMalloc(&ptr, size);
    if (err == orErrorMemoryAllocation) {
      // Give the cache back to the device and try once more.
      stats_.num_alloc_retries += 1;
      synchronizeAndProcessEvents();
      releaseCachedSegments();
      err = deviceMalloc(&ptr, size);
    }
    if (err == orErrorMemoryAllocation) return nullptr;
    TORCH_CHECK(err == orSuccess, "openreg: device allocation failed: ", lastMallocError_);

    stats_.num_device_alloc += 1;
    forEachStat(statTypesFor(small), [&](size_t i) {
      stats_.segment[i].increase(1);
      stats_.reserved_bytes[i].increase(size);
    });
    if (size >= maxSplitSize_) stats_.oversize_segments.increase(1);
    auto* block = new Block(device_, stream, size, ptr, small);
    auto segment = std::make_unique<Segment>(Segment{ptr, size, stream, small, block, context});
    block->segment = segment.get();
    segments_.emplace(reinterpret_cast<uintptr_t>(ptr), std::move(segment));
    if (C10_UNLIKELY(traceOn_)) recordTrace(TraceEntry::SEGMENT_ALLOC, ptr, size, stream, context);
    return block;
  }

  orError_t deviceMalloc(void** ptr, size_t size) {
    int previous = 0;
    orGetDevice(&previous);
    if (previous != device_) orSetDevice(device_);
    orError_t err = orMalloc(ptr, size);
    if (err != orSuccess) lastMallocError_ = openreg::describe(err);
    if (previous != device_) orSetDevice(previous);
    return err;
  }

  // CUDA's order: the history entry, the count, the profiler (under the lock).
  void noteOutOfMemory(size_t requested, size_t rounded, orStream_t stream, const Context& context, OutOfMemory& oom) {
    const auto agg = static_cast<size_t>(StatType::AGGREGATE);
    stats_.num_ooms += 1;
    oom.requested = requested;
    oom.rounded = rounded;
    orMemGetInfoIndex(device_, &oom.deviceFree, &oom.deviceTotal);
    oom.allocated = static_cast<size_t>(stats_.allocated_bytes[agg].current);
    oom.reserved = static_cast<size_t>(stats_.reserved_bytes[agg].current);
    oom.runtimeMessage = lastMallocError_;
    if (C10_UNLIKELY(traceOn_))
      recordTrace(TraceEntry::OOM, reinterpret_cast<void*>(oom.deviceFree), rounded, stream, context);
    c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(requested), stats_.allocated_bytes[agg].current,
                                     stats_.reserved_bytes[agg].current, makeDevice(device_));
  }

  // Without the lock: observers may take the GIL and snapshot the allocator.
  [[noreturn]] void raiseOutOfMemory(const OutOfMemory& oom) {
    std::vector<OutOfMemoryObserver> observers;
    {
      std::lock_guard<std::mutex> lock(gObserversMutex);
      observers = gObservers;
    }
    for (const auto& observer : observers) {
      try {
        observer(device_, oom.rounded, oom.deviceTotal, oom.deviceFree);
      } catch (const std::exception& error) {
        TORCH_WARN("openreg: an out-of-memory observer failed: ", error.what());
      }
    }
    // " out of memory." is what tools (Hugging Face accelerate) look for.
    TORCH_CHECK_WITH(OutOfMemoryError, false, "openreg out of memory. Tried to allocate ", formatBytes(oom.requested),
                     " (", oom.requested, " bytes). Device openreg:", static_cast<int>(device_),
                     " has a total capacity of ", formatBytes(oom.deviceTotal), " of which ",
                     formatBytes(oom.deviceFree), " is free. Of the allocated memory ", formatBytes(oom.allocated),
                     " is allocated by PyTorch, and ", formatBytes(oom.reserved - oom.allocated),
                     " is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
                     "setting PYTORCH_ALLOC_CONF=max_split_size_mb:<MiB> to avoid fragmentation. See "
                     "torch.openreg.memory.memory_summary(). (runtime: ",
                     oom.runtimeMessage, ")");
  }

  // Splits off the tail of an oversized block and returns the head.
  Block* splitIfWorthIt(Block* block, size_t rounded, FreePool& pool) {
    const size_t remaining = block->size - rounded;
    const bool worthIt =
        block->small ? remaining >= kMinBlockSize : remaining > kSmallRequestLimit && block->size < maxSplitSize_;
    if (!worthIt) return block;
    auto* tail = new Block(device_, block->stream, remaining, static_cast<char*>(block->ptr) + rounded, block->small);
    tail->segment = block->segment;
    tail->prev = block;
    tail->next = block->next;
    if (tail->next) tail->next->prev = tail;
    block->next = tail;
    block->size = rounded;
    poolInsert(pool, tail);
    return block;
  }

  // A block nobody uses any more: merge with free neighbours, cache it.
  void returnToPool(Block* block, const Context& context) {
    if (C10_UNLIKELY(traceOn_))
      recordTrace(TraceEntry::FREE_COMPLETED, block->ptr, block->size, block->stream, context);
    block->context = nullptr;
    FreePool& pool = block->small ? small_ : large_;
    forEachStat(statTypesFor(block->small), [&](size_t i) {
      stats_.active[i].decrease(1);
      stats_.active_bytes[i].decrease(block->size);
    });
    for (Block* neighbour : {block->prev, block->next}) {
      if (neighbour == nullptr || neighbour->allocated || neighbour->pendingEvents > 0) continue;
      auto it = pool.find(neighbour);
      if (it == pool.end()) continue;
      poolErase(pool, it);
      if (neighbour == block->prev) {
        block->ptr = neighbour->ptr;
        block->prev = neighbour->prev;
        if (block->prev) {
          block->prev->next = block;
        } else {
          block->segment->head = block;
        }
      } else {
        block->next = neighbour->next;
        if (block->next) block->next->prev = block;
      }
      block->size += neighbour->size;
      delete neighbour;
    }
    poolInsert(pool, block);
  }

  void poolInsert(FreePool& pool, Block* block) {
    pool.insert(block);
    if (block->isSplit()) {
      forEachStat(statTypesFor(block->small), [&](size_t i) {
        stats_.inactive_split[i].increase(1);
        stats_.inactive_split_bytes[i].increase(block->size);
      });
    }
  }

  void poolErase(FreePool& pool, FreePool::iterator it) {
    Block* block = *it;
    if (block->isSplit()) {
      forEachStat(statTypesFor(block->small), [&](size_t i) {
        stats_.inactive_split[i].decrease(1);
        stats_.inactive_split_bytes[i].decrease(block->size);
      });
    }
    pool.erase(it);
  }

  orEvent_t takeEvent() {
    if (!eventCache_.empty()) {
      orEvent_t event = eventCache_.back();
      eventCache_.pop_back();
      return event;
    }
    DeviceScope scope(device_);
    orEvent_t event = nullptr;
    OPENREG_CHECK(orEventCreateWithFlags(&event, orEventDisableTiming));
    return event;
  }

  void recordUseEvents(Block* block) {
    for (orStream_t stream : block->streamUses) {
      orEvent_t event = nullptr;
      try {
        event = takeEvent();
        OPENREG_CHECK(orEventRecord(event, stream));
      } catch (const std::exception&) {
        // Cannot track this use: wait for the stream instead, which is
        // always safe. (Runs in a deleter, which must not throw.)
        if (event) eventCache_.push_back(event);
        orStreamSynchronize(stream);
        continue;
      }
      pendingEvents_[stream].emplace_back(event, block);
      block->pendingEvents += 1;
    }
    block->streamUses.clear();
    if (block->pendingEvents == 0) returnToPool(block, nullptr);
  }

  void eventDone(orEvent_t event, Block* block) {
    eventCache_.push_back(event);
    block->pendingEvents -= 1;
    if (block->pendingEvents == 0) returnToPool(block, nullptr);
  }

  // Returns the blocks whose recorded streams have caught up.
  void processEvents() {
    for (auto it = pendingEvents_.begin(); it != pendingEvents_.end();) {
      auto& queue = it->second;
      while (!queue.empty()) {
        const orError_t status = orEventQuery(queue.front().first);
        if (status == orErrorNotReady) break;
        auto [event, block] = queue.front();
        queue.pop_front();
        eventDone(event, block);
      }
      it = queue.empty() ? pendingEvents_.erase(it) : std::next(it);
    }
  }

  void synchronizeAndProcessEvents() {
    stats_.num_sync_all_streams += 1;
    for (auto& [stream, queue] : pendingEvents_) {
      for (auto& [event, block] : queue) {
        orEventSynchronize(event);
        eventDone(event, block);
      }
    }
    pendingEvents_.clear();
  }

  // Gives whole free segments back to the device.
  void releaseCachedSegments() {
    for (FreePool* pool : {&small_, &large_}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* block = *it;
        if (block->isSplit()) {
          ++it;
          continue;
        }
        it = pool->erase(it);
        orFree(block->ptr);
        stats_.num_device_free += 1;
        forEachStat(statTypesFor(block->small), [&](size_t i) {
          stats_.segment[i].decrease(1);
          stats_.reserved_bytes[i].decrease(block->size);
        });
        if (block->size >= maxSplitSize_) stats_.oversize_segments.decrease(1);
        if (C10_UNLIKELY(traceOn_))
          recordTrace(TraceEntry::SEGMENT_FREE, block->ptr, block->size, block->stream, nullptr);
        segments_.erase(reinterpret_cast<uintptr_t>(block->ptr));
        delete block;
      }
    }
  }

  const c10::DeviceIndex device_;
  std::mutex mutex_;
  FreePool small_;
  FreePool large_;
  std::unordered_map<orStream_t, std::deque<std::pair<orEvent_t, Block*>>> pendingEvents_;
  std::vector<orEvent_t> eventCache_;
  DeviceStats stats_;
  std::string lastMallocError_;
  std::map<uintptr_t, std::unique_ptr<Segment>> segments_;  // by base address

  // PYTORCH_ALLOC_CONF, read on the first allocation.
  bool settingsLoaded_ = false;
  const AllocatorSettings* settings_ = nullptr;  // allocatorSettings(), once loaded
  size_t maxSplitSize_ = SIZE_MAX;
  size_t maxNonSplitRounding_ = 0;
  size_t gcLimit_ = SIZE_MAX;
  size_t capacity_ = 0;

  // The history ring ("all"): ring_[ringNext_] is the oldest once full.
  bool traceOn_ = false;
  size_t maxEntries_ = 1;
  std::vector<TraceEntry> ring_;
  size_t ringNext_ = 0;
  std::array<bool, TraceEntry::OOM + 1> skip_{};
};

class CachingAllocator final : public c10::DeviceAllocator {
 public:
  CachingAllocator() {
    for (int i = 0; i < kMaxDevices; ++i) caches_[i] = std::make_unique<DeviceCache>(static_cast<c10::DeviceIndex>(i));
  }

  c10::DataPtr allocate(size_t nbytes) override {
    if (C10_UNLIKELY(!runtimeInitialized())) initRuntime();
    checkNotForkedChild();
    const c10::DeviceIndex device = currentDevice();
    checkDeviceIndex(device);
    if (nbytes == 0) return c10::DataPtr(nullptr, makeDevice(device));
    const Context context = gatherContext(RecordContext::STATE);
    Block* block = caches_[device]->allocate(nbytes, currentNativeStream(device), context);
    liveBlocks.insert(block);
    return c10::DataPtr(block->ptr, block->ptr, &rawDelete, makeDevice(device));
  }

  c10::DeleterFnPtr raw_deleter() const override { return &rawDelete; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    OPENREG_CHECK(orMemcpy(dest, src, count, orMemcpyDeviceToDevice));
  }

  bool initialized() override { return runtimeInitialized(); }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    const auto count = deviceCount();
    for (c10::DeviceIndex i = 0; i < count; ++i) caches_[i]->emptyCache();
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (ptr.get() == nullptr) return;
    // Only memory from this allocator: the deleter identifies it.
    if (ptr.get_deleter() != &rawDelete) return;
    TORCH_CHECK(stream.device() == ptr.device(), "openreg: record_stream with a stream on ", stream.device(),
                " for memory on ", ptr.device());
    orStream_t handle = nativeStream(stream);
    Block* block = liveBlocks.find(ptr.get());
    TORCH_CHECK(block != nullptr, "openreg: record_stream on memory that is not allocated");
    caches_[block->device]->recordStream(block, handle);
  }

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    checkDeviceIndex(device);
    return caches_[device]->stats();
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    checkDeviceIndex(device);
    caches_[device]->resetAccumulated();
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    checkDeviceIndex(device);
    caches_[device]->resetPeak();
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    checkDeviceIndex(device);
    size_t freeBytes = 0, totalBytes = 0;
    OPENREG_CHECK(orMemGetInfoIndex(device, &freeBytes, &totalBytes));
    return {freeBytes, totalBytes};
  }

  DeviceCache& cache(c10::DeviceIndex device) { return *caches_[device]; }

  // Deleters receive only the data pointer (raw_allocate requires the
  // context to equal it), so the live blocks are kept in a sharded map.
  static void rawDelete(void* ptr);

 private:
  class LiveBlocks {
   public:
    void insert(Block* block) {
      Shard& shard = shardOf(block->ptr);
      std::lock_guard<std::mutex> lock(shard.mutex);
      shard.blocks.emplace(block->ptr, block);
    }
    Block* find(void* ptr) {
      Shard& shard = shardOf(ptr);
      std::lock_guard<std::mutex> lock(shard.mutex);
      auto it = shard.blocks.find(ptr);
      return it == shard.blocks.end() ? nullptr : it->second;
    }
    Block* take(void* ptr) {
      Shard& shard = shardOf(ptr);
      std::lock_guard<std::mutex> lock(shard.mutex);
      auto it = shard.blocks.find(ptr);
      if (it == shard.blocks.end()) return nullptr;
      Block* block = it->second;
      shard.blocks.erase(it);
      return block;
    }

   private:
    struct Shard {
      std::mutex mutex;
      std::unordered_map<void*, Block*> blocks;
    };
    Shard& shardOf(void* ptr) { return shards_[(reinterpret_cast<uintptr_t>(ptr) / kMinBlockSize) % shards_.size()]; }
    std::array<Shard, 16> shards_;
  };

  std::array<std::unique_ptr<DeviceCache>, kMaxDevices> caches_;

 public:
  LiveBlocks liveBlocks;
};

// Leaked on purpose: tensors may be freed during interpreter shutdown.
CachingAllocator* gAllocator = new CachingAllocator();

void CachingAllocator::rawDelete(void* ptr) {
  if (ptr == nullptr) return;
  Block* block = gAllocator->liveBlocks.take(ptr);
  TORCH_INTERNAL_ASSERT(block != nullptr, "openreg allocator: freeing a pointer it does not own");
  gAllocator->cache(block->device).free(block, gatherContext(RecordContext::ALL));
}

// Maps the approximate clock of trace entries to the epoch; made when
// recording starts, as the pairs it measures then anchor the mapping.
std::mutex gClockMutex;
std::unique_ptr<c10::ApproximateClockToUnixTimeConverter> gClock;

}  // namespace

void recordMemoryHistory(const HistoryOptions& options) {
  if (options.enabled) {
    std::lock_guard<std::mutex> lock(gClockMutex);
    if (!gClock) gClock = std::make_unique<c10::ApproximateClockToUnixTimeConverter>();
  }
  gGatherContext.store(options.enabled ? options.gather : nullptr, std::memory_order_relaxed);
  const bool stacks = options.enabled && options.gather != nullptr;
  gRecordWhen.store(stacks ? options.when : RecordContext::NEVER, std::memory_order_relaxed);
  gHistoryOn.store(options.enabled, std::memory_order_relaxed);
  for (c10::DeviceIndex i = 0; i < deviceCount(); ++i) gAllocator->cache(i).setHistory(options);
}

bool memoryHistoryEnabled() { return gHistoryOn.load(std::memory_order_relaxed); }

MemorySnapshot memorySnapshot() {
  MemorySnapshot snapshot;
  snapshot.settings = allocatorSettings();
  for (c10::DeviceIndex i = 0; i < deviceCount(); ++i) gAllocator->cache(i).appendSnapshot(snapshot);
  std::function<time_t(c10::approx_time_t)> toEpoch;
  {
    std::lock_guard<std::mutex> lock(gClockMutex);
    if (gClock) toEpoch = gClock->makeConverter();
  }
  for (auto& trace : snapshot.deviceTraces) {
    for (auto& entry : trace) entry.time_.t_ = toEpoch ? toEpoch(entry.time_.approx_t_) : 0;
  }
  return snapshot;
}

void attachOutOfMemoryObserver(OutOfMemoryObserver observer) {
  std::lock_guard<std::mutex> lock(gObserversMutex);
  gObservers.push_back(std::move(observer));
}

c10::DeviceAllocator* deviceAllocator() { return gAllocator; }

CacheSnapshot cacheSnapshot(c10::DeviceIndex device) {
  checkDeviceIndex(device);
  return gAllocator->cache(device).snapshot();
}

}  // namespace openreg::backend

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, openreg::backend::gAllocator)
