#include "slab_arena.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <new>

namespace openreg::profiler {

// At the start of every slab. `state` is twice the live objects, plus one
// while the arena may still allocate from the slab; whoever takes it to zero
// (the last release, or sealing an empty slab) unmaps the slab.
struct SlabArena::Slab {
  explicit Slab(const void* arenaOwner) : owner(arenaOwner) {}
  std::atomic<uint64_t> state{1};
  const void* owner;
};

namespace {

constexpr size_t kAlignment = 16;
constexpr size_t kHeaderBytes = 16;

std::atomic<size_t> gSlabsInUse{0};

// A kSlabBytes-aligned mapping (so an object finds its slab by rounding its
// address down): map twice the size, then unmap the unaligned ends.
void* mapAlignedSlab() {
  const size_t size = SlabArena::kSlabBytes;
  void* raw = mmap(nullptr, 2 * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + size - 1) & ~(uintptr_t{size} - 1);
  if (aligned > begin) munmap(raw, aligned - begin);
  const uintptr_t end = begin + 2 * size;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // a hint; fine if refused
#endif
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

SlabArena::~SlabArena() { seal(); }

void SlabArena::seal() noexcept {
  if (current_ == nullptr) return;
  Slab* slab = current_;
  current_ = nullptr;
  if (slab->state.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    slab->~Slab();
    munmap(slab, kSlabBytes);
    gSlabsInUse.fetch_sub(1, std::memory_order_relaxed);
  }
}

void* SlabArena::allocate(size_t bytes) {
  static_assert(sizeof(Slab) <= kHeaderBytes);
  bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (bytes == 0 || bytes > kMaxObjectBytes) throw std::bad_alloc();
  if (current_ == nullptr || used_ + bytes > kSlabBytes) {
    seal();
    void* memory = mapAlignedSlab();
    if (memory == nullptr) throw std::bad_alloc();
    current_ = new (memory) Slab(owner_);
    used_ = kHeaderBytes;
    gSlabsInUse.fetch_add(1, std::memory_order_relaxed);
  }
  current_->state.fetch_add(2, std::memory_order_relaxed);
  void* object = reinterpret_cast<char*>(current_) + used_;
  used_ += bytes;
  return object;
}

SlabArena::Slab* SlabArena::slabOf(const void* object) noexcept {
  return reinterpret_cast<Slab*>(reinterpret_cast<uintptr_t>(object) & ~(uintptr_t{kSlabBytes} - 1));
}

const void* SlabArena::ownerOf(const void* object) noexcept { return slabOf(object)->owner; }

void SlabArena::release(void* object) noexcept {
  if (object == nullptr) return;
  Slab* slab = slabOf(object);
  if (slab->state.fetch_sub(2, std::memory_order_acq_rel) == 2) {
    slab->~Slab();
    munmap(slab, kSlabBytes);
    gSlabsInUse.fetch_sub(1, std::memory_order_relaxed);
  }
}

size_t SlabArena::slabsInUse() noexcept { return gSlabsInUse.load(std::memory_order_relaxed); }

}  // namespace openreg::profiler
