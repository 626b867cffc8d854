// Test-only seams of libopenreg, not part of its API: the runtime's own tests
// include this header from src/ to make races deterministic.
#pragma once

#include "openreg/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

// Called by orFree (on the calling thread) after it found the allocation and
// before it waits for the device and removes it; NULL (the default) for none.
OR_API void orTestingSetFreeHook(void (*hook)(void* ptr));

#ifdef __cplusplus
}
#endif
