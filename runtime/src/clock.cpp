#include "clock.h"

namespace openreg {

ClockPair sampleClocks() {
  ClockPair best{0, 0, UINT64_MAX};
  for (int attempt = 0; attempt < 5; ++attempt) {
    const uint64_t before = hostNowNs();
    const uint64_t steady = steadyNowNs();
    const uint64_t after = hostNowNs();
    if (after < before) continue;  // the wall clock was stepped: discard
    const uint64_t width = after - before;
    if (width < best.uncertaintyNs) best = {before + width / 2, steady, width};
  }
  if (best.uncertaintyNs == UINT64_MAX) {
    const uint64_t host = hostNowNs();
    best = {host, steadyNowNs(), 0};
  }
  return best;
}

}  // namespace openreg
