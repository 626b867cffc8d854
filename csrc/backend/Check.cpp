#include "backend/Check.h"

#include <string>

namespace openreg::backend {

void throwRuntimeError(orError_t err, const char* what, const char* file, int line) {
  // describe() reads the runtime's thread-local message: call it first.
  std::string message = "openreg: " + openreg::describe(err);
  const c10::SourceLocation location{what, file, static_cast<uint32_t>(line)};
  if (err == orErrorMemoryAllocation) throw c10::OutOfMemoryError(location, std::move(message));
  throw c10::AcceleratorError(location, static_cast<int32_t>(err), std::move(message));
}

}  // namespace openreg::backend
