// Which path each operator takes on openreg, for documentation and tests.
//
// Every kernel this library registers records its path here; operators not
// listed either decompose (composite kernels) or reach the CPU fallback,
// which counts its calls per operator.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace openreg::backend {

enum class OpPath {
  Device,       // computed by device kernels launched on the current stream
  Copy,         // runtime memcpy / memset, or a device copy kernel
  Sync,         // needs a host-visible value: synchronizes the stream
  View,         // metadata only: no launch, no synchronization
  Factory,      // allocation only
  Unsupported,  // refused at once with an error naming the reason (sparse layouts)
};

const char* opPathName(OpPath path);

struct OpPathEntry {
  std::string op;  // "aten::add.out"
  OpPath path;
  std::string kernel;  // kernel name stem, e.g. "elementwise_add"; may be empty
};

void recordOpPath(std::string op, OpPath path, std::string kernel = {});
std::vector<OpPathEntry> registeredOpPaths();

void countFallback(const std::string& op);
std::vector<std::pair<std::string, int64_t>> fallbackCounts();
void resetFallbackCounts();

}  // namespace openreg::backend
