// openreg streams as c10::Streams.
//
// A c10::Stream on openreg carries the runtime's per-device stream number
// (orStreamGetId) as its StreamId: the default stream is 1, others count up
// from 2. Python's `stream.stream_id` therefore equals the row id that the
// profiler shows for that stream. StreamId 0 is accepted as an alias of the
// default stream.
//
// Streams come from per-device pools (32 per priority level, created on first
// use, never destroyed), so c10::Streams can be copied and stored freely.
#pragma once

#include <c10/core/Stream.h>
#include <openreg/runtime.h>

namespace openreg::backend {

// The runtime handle of an openreg c10::Stream; throws for unknown streams.
orStream_t nativeStream(const c10::Stream& stream);

c10::Stream defaultStream(c10::DeviceIndex device);
// Round-robin over the pool of the given priority (0 = normal; negative =
// higher, clamped to the runtime's range).
c10::Stream streamFromPool(c10::DeviceIndex device, int priority = 0);

// The calling thread's current stream on `device` (-1: current device).
c10::Stream currentStream(c10::DeviceIndex device = -1);
// Same, as a runtime handle; the fast path used by every kernel launch.
orStream_t currentNativeStream(c10::DeviceIndex device);
// Makes `stream` current on its device for this thread; returns the previous.
c10::Stream exchangeCurrentStream(const c10::Stream& stream);

// The runtime's priority range, as (least, greatest) with greatest <= least.
std::pair<int, int> streamPriorityRange();

// Waits for all work queued on `stream`; kernel failures surface here.
void synchronizeStream(const c10::Stream& stream);

}  // namespace openreg::backend
