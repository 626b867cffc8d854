// Opaque handles for streams and events.
//
// A handle packs a type tag, a slot index and the slot's generation. A
// destroyed handle fails the generation check, so stale or forged handles are
// reported as errors instead of being dereferenced.
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <vector>

namespace openreg {

template <class T, uint64_t kTag>
class HandleTable {
 public:
  uint64_t insert(std::shared_ptr<T> object) {
    std::unique_lock lock(mutex_);
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = static_cast<uint32_t>(slots_.size());
      slots_.push_back({});
    }
    Slot& slot = slots_[index];
    slot.object = std::move(object);
    return encode(index, slot.generation);
  }

  std::shared_ptr<T> find(uint64_t handle) const {
    uint32_t index, generation;
    if (!decode(handle, &index, &generation)) return nullptr;
    std::shared_lock lock(mutex_);
    if (index >= slots_.size()) return nullptr;
    const Slot& slot = slots_[index];
    if (slot.generation != generation) return nullptr;
    return slot.object;
  }

  std::shared_ptr<T> remove(uint64_t handle) {
    uint32_t index, generation;
    if (!decode(handle, &index, &generation)) return nullptr;
    std::unique_lock lock(mutex_);
    if (index >= slots_.size()) return nullptr;
    Slot& slot = slots_[index];
    if (slot.generation != generation || !slot.object) return nullptr;
    std::shared_ptr<T> object = std::move(slot.object);
    slot.generation = (slot.generation + 1) & kGenerationMask;
    free_.push_back(index);
    return object;
  }

 private:
  static constexpr uint64_t kGenerationMask = (1u << 28) - 1;

  struct Slot {
    uint32_t generation = 1;
    std::shared_ptr<T> object;
  };

  static uint64_t encode(uint32_t index, uint32_t generation) {
    return (kTag << 60) | (uint64_t{generation} << 32) | (uint64_t{index} + 1);
  }
  static bool decode(uint64_t handle, uint32_t* index, uint32_t* generation) {
    if ((handle >> 60) != kTag) return false;
    const uint64_t low = handle & 0xffffffffull;
    if (low == 0) return false;
    *index = static_cast<uint32_t>(low - 1);
    *generation = static_cast<uint32_t>((handle >> 32) & kGenerationMask);
    return true;
  }

  mutable std::shared_mutex mutex_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace openreg
