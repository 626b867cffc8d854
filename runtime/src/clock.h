// Host and device clocks.
//
// Host records use CLOCK_REALTIME (Unix epoch ns), the clock torch.profiler
// stamps its own events with. The device clock is a model of a hardware
// counter: it starts at its own offset and runs at its own, drifting rate, so
// consumers must map it with clock samples instead of assuming host time.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>

namespace openreg {

inline uint64_t hostNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t steadyNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// CPU time of the calling thread (a device worker's busy time).
inline uint64_t threadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct DeviceClockModel {
  // The rate drifts for this long after start-up, then holds: a drift cannot
  // drive the rate to zero in a long run once its setting was accepted
  // (readConfigFromEnvironment rejects one that would within this time).
  static constexpr double kDriftSeconds = 1000;

  uint64_t offsetNs = 0;        // device reading at `originSteadyNs`
  uint64_t originSteadyNs = 0;  // steady-clock time the device clock started
  double skewPpm = 0;           // constant rate error
  double driftPpmPerS = 0;      // rate error added per second, for kDriftSeconds

  // The device reading at a given steady-clock time.
  uint64_t at(uint64_t steadyNs) const {
    const int64_t elapsed = static_cast<int64_t>(steadyNs - originSteadyNs);
    if (skewPpm == 0 && driftPpmPerS == 0) return offsetNs + static_cast<uint64_t>(elapsed);
    // rate(t) = 1 + skew + drift * min(t, kDriftSeconds), integrated from the origin.
    const long double t = static_cast<long double>(elapsed);
    const long double drifting = t < kDriftSeconds * 1e9L ? t : kDriftSeconds * 1e9L;
    const long double advanced =
        t + t * (skewPpm * 1e-6L) +
        (driftPpmPerS * 1e-6L) * (drifting * drifting / 2.0L + drifting * (t - drifting)) / 1e9L;
    return offsetNs + static_cast<uint64_t>(static_cast<int64_t>(advanced));
  }

  uint64_t now() const { return at(steadyNowNs()); }
};

// Per-thread state of the fast host clock.
struct HostClockAnchor {
  uint64_t tsc = 0;            // TSC reading at the anchor
  uint64_t ns = 0;             // CLOCK_REALTIME at the anchor
  uint64_t last = 0;           // last value returned: keeps the clock monotonic per thread
  uint64_t nsPerTickQ32 = 0;   // rate as 32.32 fixed point, copied at each re-anchor
  uint64_t reanchorTicks = 0;  // 0 until the first anchor (and without a usable TSC)
};

// CLOCK_REALTIME in ns, extrapolated from the TSC between re-anchors taken
// every ~1 ms, for the launch path (a TSC read is cheaper than a vDSO
// clock_gettime in a VM). Falls back to clock_gettime without an invariant TSC.
uint64_t hostNowFastNs(HostClockAnchor& anchor);
// Measures the TSC rate (~1 ms, once); done when tracing is first enabled so
// no launch pays for it.
void calibrateHostClock();

// The clock of host records: CLOCK_REALTIME, or the client's
// (orActivityRegisterTimestampCallback).
using HostRecordClock = uint64_t (*)(void);
extern std::atomic<HostRecordClock> gHostRecordClock;

inline uint64_t hostRecordNs() {
  const HostRecordClock client = gHostRecordClock.load(std::memory_order_relaxed);
  return client != nullptr ? client() : hostNowNs();
}
inline uint64_t hostRecordFastNs(HostClockAnchor& anchor) {
  const HostRecordClock client = gHostRecordClock.load(std::memory_order_relaxed);
  return client != nullptr ? client() : hostNowFastNs(anchor);
}

struct ClockPair {
  uint64_t hostNs;
  uint64_t steadyNs;
  uint64_t uncertaintyNs;
};

// A host-record-clock / steady pair read back to back, tightest of a few tries.
ClockPair sampleClocks();

}  // namespace openreg
