// Turning runtime error codes into PyTorch exceptions.
#pragma once

#include <c10/util/Exception.h>
#include <openreg/runtime.hpp>

namespace openreg::backend {

// Throws the c10 exception that matches `err` (OutOfMemoryError for device
// memory exhaustion, AcceleratorError otherwise), with the runtime's message
// for the call that just failed on this thread. `what` names the operation.
[[noreturn]] void throwRuntimeError(orError_t err, const char* what, const char* file, int line);

}  // namespace openreg::backend

// Checks a runtime call. Must be used right after the call, on the same
// thread, so that the runtime's last-error message still describes it.
#define OPENREG_CHECK(EXPR)                                                                 \
  do {                                                                                      \
    const orError_t openreg_check_err_ = (EXPR);                                            \
    if (C10_UNLIKELY(openreg_check_err_ != orSuccess)) {                                    \
      ::openreg::backend::throwRuntimeError(openreg_check_err_, #EXPR, __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)
