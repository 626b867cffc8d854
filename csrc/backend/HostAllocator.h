// Pinned (page-locked) host memory for fast, truly asynchronous copies.
//
// Blocks are cached by power-of-two size. A pinned buffer used by an
// asynchronous copy is recorded on the copy's stream (recordPinnedUse), and
// is reused only after that stream has passed the copy. The DataPtrs carry
// Device(kCPU), as PyTorch expects for pinned memory.
#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace openreg::backend {

at::HostAllocator* pinnedAllocator();

// True for pointers inside a live orMallocHost allocation. Never throws.
bool isPinnedPointer(const void* ptr) noexcept;

// Keeps the pinned block behind `data` from reuse until the work queued on
// `stream` so far has completed. No-op for memory from other allocators.
void recordPinnedUse(const c10::DataPtr& data, const c10::Stream& stream);

}  // namespace openreg::backend
