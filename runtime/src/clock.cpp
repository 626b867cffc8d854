#include "clock.h"

#include <atomic>
#include <mutex>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace openreg {

std::atomic<HostRecordClock> gHostRecordClock{nullptr};

#if defined(__x86_64__)
namespace {

constexpr uint64_t kReanchorNs = 1000000;  // re-anchor each thread every ~1 ms

struct TscCalibration {
  bool usable = false;
  uint64_t baseTsc = 0;
  uint64_t baseNs = 0;
  std::atomic<double> nsPerTick{0};
  uint64_t reanchorTicks = 0;
};

bool invariantTsc() {
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid(0x80000000, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000007) return false;
  __get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx);
  return (edx >> 8) & 1u;
}

// Measures the TSC rate once over ~1 ms; each re-anchor refines it over the
// longer baseline since start-up.
TscCalibration& calibration() {
  static TscCalibration* c = [] {
    auto* result = new TscCalibration();
    if (!invariantTsc()) return result;
    const uint64_t ns0 = hostNowNs();
    const uint64_t tsc0 = __rdtsc();
    uint64_t ns1;
    do {
      ns1 = hostNowNs();
    } while (ns1 - ns0 < 1000000);
    const uint64_t tsc1 = __rdtsc();
    if (tsc1 <= tsc0) return result;
    const double rate = double(ns1 - ns0) / double(tsc1 - tsc0);
    result->baseTsc = tsc0;
    result->baseNs = ns0;
    result->nsPerTick.store(rate);
    result->reanchorTicks = uint64_t(double(kReanchorNs) / rate);
    result->usable = true;
    return result;
  }();
  return *c;
}

uint64_t reanchor(HostClockAnchor& anchor, TscCalibration& c) {
  const uint64_t ns = hostNowNs();
  const uint64_t tsc = __rdtsc();
  if (tsc > c.baseTsc && ns > c.baseNs + 100 * kReanchorNs) {
    c.nsPerTick.store(double(ns - c.baseNs) / double(tsc - c.baseTsc), std::memory_order_relaxed);
  }
  anchor.tsc = tsc;
  anchor.ns = ns;
  anchor.nsPerTickQ32 = uint64_t(c.nsPerTick.load(std::memory_order_relaxed) * 4294967296.0);
  anchor.reanchorTicks = c.reanchorTicks;
  const uint64_t result = ns > anchor.last ? ns : anchor.last;
  anchor.last = result;
  return result;
}

}  // namespace

void calibrateHostClock() { calibration(); }

uint64_t hostNowFastNs(HostClockAnchor& anchor) {
  const uint64_t tsc = __rdtsc();
  const uint64_t elapsed = tsc - anchor.tsc;
  // Also taken for the first call (reanchorTicks == 0) and a TSC that went
  // backwards (elapsed wraps to a huge value).
  if (elapsed > anchor.reanchorTicks) {
    TscCalibration& c = calibration();
    if (!c.usable) return hostNowNs();
    return reanchor(anchor, c);
  }
  // elapsed < ~1 ms of ticks (< 2^23), so the 32.32 product cannot overflow.
  uint64_t ns = anchor.ns + ((elapsed * anchor.nsPerTickQ32) >> 32);
  if (ns < anchor.last) ns = anchor.last;
  anchor.last = ns;
  return ns;
}
#else
uint64_t hostNowFastNs(HostClockAnchor&) { return hostNowNs(); }
void calibrateHostClock() {}
#endif

ClockPair sampleClocks() {
  ClockPair best{0, 0, UINT64_MAX};
  for (int attempt = 0; attempt < 5; ++attempt) {
    const uint64_t before = hostRecordNs();
    const uint64_t steady = steadyNowNs();
    const uint64_t after = hostRecordNs();
    if (after < before) continue;  // the wall clock was stepped: discard
    const uint64_t width = after - before;
    if (width < best.uncertaintyNs) best = {before + width / 2, steady, width};
  }
  if (best.uncertaintyNs == UINT64_MAX) {
    const uint64_t host = hostRecordNs();
    best = {host, steadyNowNs(), 0};
  }
  return best;
}

}  // namespace openreg
