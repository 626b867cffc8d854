// Host side of the test-only gate kernel (see aten/TestOps.cpp).
#pragma once

#include <cstdint>

namespace openreg::backend {

// Releases the kernels waiting on `gate`; opening first is fine too.
void openGate(int64_t gate);
// True while a kernel is running and blocked on `gate` (so a test knows the
// device has started it).
bool gateWaiting(int64_t gate);

}  // namespace openreg::backend
