// libFuzzer target: the plugin's record parsing and trace building on
// arbitrary activity buffers (see records_fuzz.h).
#include <cstdio>
#include <cstdlib>

#include "records_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string problem = openreg::profiler::fuzz::runCase(data, size);
  if (!problem.empty()) {
    std::fprintf(stderr, "records fuzz: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
