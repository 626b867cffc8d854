// The report's second pass over the trace file: the args of every event
// (compact JSON, deduplicated) and the fields of the [memory] instants that
// the trace model does not keep ("Total Reserved", "Addr").
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace_model.h"

namespace openreg::trace {

struct EventArgs {
  // Deduplicated args texts; id 0 is "no args". Keys whose values are unique
  // per event (ids, correlation) are left out, so that texts repeat.
  std::vector<std::string> texts{""};
  std::vector<uint32_t> argsOf;  // by event index in traceEvents
  std::vector<uint32_t> dimsOf;  // "Input Dims" text id, 0 when none
  struct MemoryExtra {
    int64_t reserved = -1;  // "Total Reserved", -1 when absent
    int64_t addr = 0;       // "Addr"
    bool hasAddr = false;
  };
  std::unordered_map<uint32_t, MemoryExtra> memory;  // by event index
};

// Reads `path` again (gzip or plain). A read or JSON error leaves what was
// read before it (the trace model already reported the error).
EventArgs readEventArgs(const std::string& path, uint64_t eventCount);

}  // namespace openreg::trace
