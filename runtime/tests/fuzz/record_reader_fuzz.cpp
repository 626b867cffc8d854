// libFuzzer target: orActivityGetNextRecord on arbitrary bytes must stay
// inside the buffer, terminate, and never crash.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "openreg/activity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // First byte picks how much of the input counts as valid, to exercise
  // validSize values that do not match the records.
  const size_t validSize = std::min<size_t>(size - 1, (size - 1) * data[0] / 255 + 7);
  std::vector<uint64_t> storage((size + 7) / 8 + 1);  // 8-byte aligned copy
  auto* buffer = reinterpret_cast<uint8_t*>(storage.data());
  std::memcpy(buffer, data + 1, size - 1);
  const orActivityRecord* record = nullptr;
  size_t steps = 0;
  uint64_t checksum = 0;
  while (orActivityGetNextRecord(buffer, validSize, &record) == orSuccess) {
    const auto* at = reinterpret_cast<const uint8_t*>(record);
    if (at < buffer || at + record->size > buffer + validSize) std::abort();
    // Read every byte the record claims, so ASan sees any overrun.
    for (uint32_t i = 0; i < record->size; ++i) checksum += at[i];
    if (++steps > validSize / 8 + 1) std::abort();  // each record is >= 8 bytes
  }
  return static_cast<int>(checksum & 0);
}
