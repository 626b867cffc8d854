// The openreg caching device allocator.
//
// Contract (the same as CUDA's caching allocator):
//   - Blocks are cached per device and per stream. A freed block is reused at
//     once only by later allocations on the stream it was allocated on, whose
//     work is ordered after every earlier use on that stream.
//   - recordStream(ptr, s) adds s to the block's users. When the block is
//     freed, an event is recorded on each such stream, and the block returns
//     to the cache only once all those events have completed.
//   - Every allocation and free is reported to the profiler from the calling
//     thread with c10::reportMemoryUsageToProfiler (+size / -size, totals
//     taken after the update), so profile_memory sees device memory.
//   - Exhausting device memory first frees the cache and retries, then raises
//     torch.OutOfMemoryError naming the device, the bytes requested and free.
//   - Never takes the GIL and never calls Python; safe from any thread.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

namespace openreg::backend {

// The allocator registered for PrivateUse1 (c10::GetAllocator(PrivateUse1)).
c10::DeviceAllocator* deviceAllocator();

// Number of blocks currently held by the cache (for tests and diagnostics).
struct CacheSnapshot {
  size_t cachedBlocks = 0;
  size_t cachedBytes = 0;
  size_t blocksAwaitingEvents = 0;
};
CacheSnapshot cacheSnapshot(c10::DeviceIndex device);

}  // namespace openreg::backend
