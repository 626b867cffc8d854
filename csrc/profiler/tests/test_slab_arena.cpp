#include "slab_arena.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <random>
#include <thread>
#include <vector>

using namespace openreg::profiler;

TEST(SlabArena, ObjectsAreAlignedDistinctAndWritable) {
  const size_t before = SlabArena::slabsInUse();
  std::vector<void*> objects;
  {
    SlabArena arena;
    for (int i = 0; i < 20'000; ++i) {  // several slabs' worth
      void* p = arena.allocate(300);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
      std::memset(p, i & 0xff, 300);
      objects.push_back(p);
    }
    EXPECT_GE(SlabArena::slabsInUse() - before, 3u);
  }
  for (size_t i = 0; i < objects.size(); ++i) {
    EXPECT_EQ(*static_cast<unsigned char*>(objects[i]), i & 0xff) << "objects overlap";
  }
  std::shuffle(objects.begin(), objects.end(), std::mt19937(7));
  for (void* p : objects) SlabArena::release(p);
  EXPECT_EQ(SlabArena::slabsInUse(), before) << "every slab goes with its last object";
}

TEST(SlabArena, ASlabOutlivesItsArenaUntilItsObjectsGo) {
  const size_t before = SlabArena::slabsInUse();
  void* survivor = nullptr;
  {
    SlabArena arena;
    survivor = arena.allocate(64);
    SlabArena::release(arena.allocate(64));
  }
  EXPECT_EQ(SlabArena::slabsInUse(), before + 1);
  SlabArena::release(survivor);
  EXPECT_EQ(SlabArena::slabsInUse(), before);
  { SlabArena unused; }
  {
    SlabArena empty;
    SlabArena::release(empty.allocate(16));
  }
  EXPECT_EQ(SlabArena::slabsInUse(), before);
}

TEST(SlabArena, ReleasesFromOtherThreadsWhileTheOwnerAllocates) {
  const size_t before = SlabArena::slabsInUse();
  {
    SlabArena arena;
    std::vector<std::vector<void*>> batches(4);
    std::vector<std::thread> releasers;
    for (auto& batch : batches) {
      for (int i = 0; i < 10'000; ++i) batch.push_back(arena.allocate(200));
      releasers.emplace_back([&batch] {
        for (void* p : batch) SlabArena::release(p);
      });
    }
    for (int i = 0; i < 10'000; ++i) SlabArena::release(arena.allocate(200));
    for (auto& t : releasers) t.join();
  }
  EXPECT_EQ(SlabArena::slabsInUse(), before);
}

TEST(SlabArena, RefusesWhatItCannotHold) {
  SlabArena arena;
  EXPECT_THROW(arena.allocate(SlabArena::kMaxObjectBytes + 1), std::bad_alloc);
  EXPECT_THROW(arena.allocate(0), std::bad_alloc);
  SlabArena::release(nullptr);
}

// Activities find their store through this instead of a pointer each.
TEST(SlabArena, EveryObjectKnowsItsArenasOwner) {
  int ownerA = 0, ownerB = 0;
  std::vector<void*> fromA, fromB;
  {
    SlabArena a(&ownerA);
    SlabArena b(&ownerB);
    for (int i = 0; i < 10'000; ++i) {  // several slabs each, interleaved
      fromA.push_back(a.allocate(400));
      fromB.push_back(b.allocate(400));
    }
  }
  // Also after the arenas are gone: the slabs live as long as their objects.
  for (void* p : fromA) EXPECT_EQ(SlabArena::ownerOf(p), &ownerA);
  for (void* p : fromB) EXPECT_EQ(SlabArena::ownerOf(p), &ownerB);
  {
    SlabArena none;
    void* p = none.allocate(16);
    EXPECT_EQ(SlabArena::ownerOf(p), nullptr);
    SlabArena::release(p);
  }
  for (void* p : fromA) SlabArena::release(p);
  for (void* p : fromB) SlabArena::release(p);
}
