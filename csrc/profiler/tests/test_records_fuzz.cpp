// The libFuzzer harness (fuzz/records_fuzz.h) on generated inputs, so every
// build runs it, not only the clang ASan one: records of every kind with
// plausible and extreme fields, truncated and overlong ones, unknown kinds,
// duplicates, and plain random bytes. Seeds are fixed: a failure reproduces.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "fuzz/records_fuzz.h"

using namespace openreg::profiler;

namespace {

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  std::vector<uint8_t> input() {
    std::vector<uint8_t> out(26);
    for (auto& b : out) b = byte();
    const int64_t base = pick(4) == 0 ? static_cast<int64_t>(rng_()) << 32 : 1'700'000'000'000'000'000;
    put64(out, 1, pick(3) == 0 ? static_cast<int64_t>(rng_()) : base);
    put64(out, 9, pick(3) == 0 ? static_cast<int64_t>(rng_()) : base + 10'000'000'000);
    put64(out, 17, base + static_cast<int64_t>(pick(1'000'000)));
    base_ = base;
    if (pick(8) == 0) {  // plain noise
      const size_t n = pick(2048);
      for (size_t i = 0; i < n; ++i) out.push_back(byte());
      return out;
    }
    const size_t records = pick(200);
    for (size_t i = 0; i < records; ++i) record(out);
    if (pick(4) == 0 && out.size() > 30) out[26 + pick(out.size() - 26)] = byte();  // one corrupt byte
    return out;
  }

 private:
  uint8_t byte() { return static_cast<uint8_t>(rng_()); }
  uint64_t pick(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  static void put64(std::vector<uint8_t>& v, size_t at, int64_t value) {
    for (int i = 0; i < 8; ++i) v[at + i] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));
  }
  uint64_t correlation() { return pick(10) == 0 ? rng_() : 1 + pick(64); }  // joins, duplicates, strays
  uint64_t hostTime() {
    switch (pick(10)) {
      case 0:
        return rng_();
      case 1:
        return UINT64_MAX - pick(1000);
      default:
        return static_cast<uint64_t>(base_) + pick(20'000'000'000);
    }
  }
  uint64_t deviceTime() { return pick(10) == 0 ? rng_() : 1'000'000'000'000 + pick(20'000'000'000); }

  template <typename T>
  void append(std::vector<uint8_t>& out, T record, orActivityKind kind) {
    size_t size = sizeof(T);
    switch (pick(8)) {
      case 0:
        size = 8 * (1 + pick(sizeof(T) / 8));
        break;  // truncated
      case 1:
        size += 8 * (1 + pick(3));
        break;  // from a newer runtime
      default:
        break;
    }
    record.header.kind = kind;
    record.header.size = static_cast<uint32_t>(size);
    const size_t at = out.size();
    out.resize(at + size, 0);
    std::memcpy(out.data() + at, &record, std::min(size, sizeof(T)));
    for (size_t i = sizeof(T); i < size; ++i) out[at + i] = byte();
  }

  void record(std::vector<uint8_t>& out) {
    const int device = static_cast<int>(pick(3)) - (pick(20) == 0 ? 5 : 0);
    switch (pick(9)) {
      case 0: {
        orActivityRuntime r{};
        r.apiId = static_cast<uint32_t>(pick(20));
        r.threadId = static_cast<uint32_t>(pick(4));
        r.device = device;
        r.correlationId = correlation();
        r.start = hostTime();
        r.end = pick(5) == 0 ? hostTime() : r.start + pick(100'000);
        r.status = pick(10) == 0 ? 5 : 0;
        r.name = reinterpret_cast<const char*>(static_cast<uintptr_t>(byte()));  // picks a name
        append(out, r, OR_ACTIVITY_KIND_RUNTIME);
        break;
      }
      case 1:
      case 2: {
        orActivityKernel k{};
        k.device = device;
        k.streamId = pick(5);
        k.correlationId = correlation();
        k.start = deviceTime();
        k.end = pick(5) == 0 ? deviceTime() : k.start + pick(100'000);
        k.grid = {static_cast<uint32_t>(rng_()), 1, 1};
        k.status = pick(10) == 0 ? 14 : 0;
        k.name = reinterpret_cast<const char*>(static_cast<uintptr_t>(byte()));  // picks a name
        append(out, k, OR_ACTIVITY_KIND_KERNEL);
        break;
      }
      case 3: {
        orActivityMemcpy m{};
        m.copyKind = byte();
        m.srcKind = byte();
        m.device = device;
        m.streamId = pick(5);
        m.correlationId = correlation();
        m.start = deviceTime();
        m.end = m.start + pick(100'000);
        m.bytes = rng_();
        append(out, m, OR_ACTIVITY_KIND_MEMCPY);
        break;
      }
      case 4: {
        orActivityMemset m{};
        m.device = device;
        m.streamId = pick(5);
        m.correlationId = correlation();
        m.start = deviceTime();
        m.end = m.start + pick(100'000);
        m.bytes = rng_();
        append(out, m, OR_ACTIVITY_KIND_MEMSET);
        break;
      }
      case 5: {
        orActivitySynchronization s{};
        s.syncType = static_cast<uint32_t>(pick(6));
        s.clockDomain = static_cast<uint32_t>(pick(3));
        s.device = device;
        s.streamId = pick(5);
        s.correlationId = correlation();
        s.start = s.clockDomain == OR_ACTIVITY_CLOCK_DEVICE ? deviceTime() : hostTime();
        s.end = s.start + pick(100'000);
        append(out, s, OR_ACTIVITY_KIND_SYNCHRONIZATION);
        break;
      }
      case 6: {
        orActivityExternalCorrelation e{};
        e.externalKind = static_cast<uint32_t>(pick(4));
        e.externalId = pick(4) == 0 ? rng_() : pick(16);
        e.correlationId = correlation();
        append(out, e, OR_ACTIVITY_KIND_EXTERNAL_CORRELATION);
        break;
      }
      case 7: {
        orActivityClockSync c{};
        c.device = device;
        const uint64_t at = pick(20'000'000'000);
        c.hostTimestamp = pick(8) == 0 ? rng_() : static_cast<uint64_t>(base_) + at;
        c.deviceTimestamp = pick(8) == 0 ? rng_() : 1'000'000'000'000 + at + pick(1000);
        c.uncertainty = pick(8) == 0 ? rng_() : pick(2000);
        append(out, c, OR_ACTIVITY_KIND_CLOCK_SYNC);
        break;
      }
      default: {
        orActivityRecord unknown{static_cast<uint32_t>(rng_()), 0};
        const size_t size = 8 * (1 + pick(6));
        unknown.size = static_cast<uint32_t>(size);
        const size_t at = out.size();
        out.resize(at + size, 0);
        std::memcpy(out.data() + at, &unknown, sizeof(unknown));
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  int64_t base_ = 0;
};

}  // namespace

TEST(RecordsFuzz, GeneratedBuffersKeepTheTraceInvariants) {
  // OPENREG_FUZZ_SEEDS runs more (or other) seeds: "N" or "FIRST:LAST".
  uint32_t first = 1, last = 20000;
  if (const char* seeds = std::getenv("OPENREG_FUZZ_SEEDS")) {
    if (std::sscanf(seeds, "%u:%u", &first, &last) != 2) {
      first = 1;
      last = static_cast<uint32_t>(std::strtoul(seeds, nullptr, 10));
    }
  }
  for (uint32_t seed = first; seed <= last; ++seed) {
    Generator generator(seed);
    const std::vector<uint8_t> input = generator.input();
    const std::string problem = fuzz::runCase(input.data(), input.size());
    ASSERT_TRUE(problem.empty()) << "seed " << seed << ": " << problem;
  }
}
