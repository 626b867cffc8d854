// Memory for the Kineto activities of one trace.
//
// A trace holds millions of activities that all live as long as the trace
// and die one by one when Kineto drops it, perhaps on another thread. From
// malloc each costs a call and, being fresh memory, a share of a page fault;
// those dominated processTrace. Here they are bump-allocated from 2 MiB
// slabs (transparent huge pages where the kernel allows, so a million
// activities cost a few hundred faults, not ~100 k), and a slab is returned
// to the system when the last object in it is released.
#pragma once

#include <cstddef>

namespace openreg::profiler {

class SlabArena {
 public:
  static constexpr size_t kSlabBytes = size_t{2} << 20;
  static constexpr size_t kMaxObjectBytes = size_t{64} << 10;

  // `owner` is what ownerOf() gives for the objects allocated here.
  explicit SlabArena(const void* owner = nullptr) : owner_(owner) {}
  // Seals the slab being filled: it is freed once its objects are.
  ~SlabArena();
  SlabArena(const SlabArena&) = delete;
  SlabArena& operator=(const SlabArena&) = delete;

  // 16-byte aligned. Only the arena's owner thread may allocate. Throws
  // std::bad_alloc if the system has no memory (or bytes > kMaxObjectBytes).
  void* allocate(size_t bytes);

  // Releases one object from any arena, on any thread, also after the arena
  // itself is gone.
  static void release(void* object) noexcept;

  // The owner of the arena `object` came from (its slab keeps it), also after
  // the arena is gone: an object need not keep a pointer to it.
  static const void* ownerOf(const void* object) noexcept;

  // Slabs currently mapped, all arenas together (tests, debugging).
  static size_t slabsInUse() noexcept;

 private:
  struct Slab;
  static Slab* slabOf(const void* object) noexcept;
  void seal() noexcept;

  const void* owner_;
  Slab* current_ = nullptr;
  size_t used_ = 0;
};

}  // namespace openreg::profiler
