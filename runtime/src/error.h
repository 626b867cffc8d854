// Error reporting shared by every entry point: a code plus a thread-local,
// human-readable message (orGetLastErrorMessage).
#pragma once

#include <cstdarg>
#include <string>

#include "openreg/runtime.h"

namespace openreg {

// Stores the formatted message for this thread and returns `code`, so entry
// points can write `return fail(orErrorInvalidValue, "...", ...)`.
orError_t fail(orError_t code, const char* format, ...) __attribute__((format(printf, 2, 3)));
orError_t failWithMessage(orError_t code, std::string message);

// orErrorShuttingDown for a wait cut short at process exit, naming the caller.
orError_t failShuttingDown(const char* caller);

// Guards a C entry point: converts any escaping C++ exception (e.g.
// std::bad_alloc) into an error code, so no call ever aborts the process.
template <class F>
orError_t guarded(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(orErrorHostMemoryAllocation, "host memory exhausted inside the runtime");
  } catch (const std::exception& e) {
    return fail(orErrorUnknown, "internal error: %s", e.what());
  } catch (...) {
    return fail(orErrorUnknown, "internal error: unknown exception");
  }
}

}  // namespace openreg
