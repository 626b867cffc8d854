// Runtime configuration, read once from OPENREG_* environment variables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace openreg {

constexpr int kMaxDevices = 16;

struct Config {
  int deviceCount = 2;
  size_t deviceMemoryBytes = size_t{8} << 30;
  int workersPerDevice = 4;
  uint64_t clockOffsetNs = 1000000000000ull;  // the device counter reads 1000 s at start-up
  double clockSkewPpm = 0;
  double clockDriftPpmPerS = 0;
  uint64_t flushTimeoutMs = 30000;
  uint64_t exitDrainTimeoutMs = 10000;
  // The device's declared nominal peaks (OPENREG_PEAK_GFLOPS,
  // OPENREG_PEAK_GBPS), reported to profilers for rooflines. 0: derived from
  // the properties (a multiply-add per compute unit per cycle; 16 bytes per
  // cycle per executor thread).
  double peakFlopsPerSecond = 0;
  double peakBytesPerSecond = 0;
  // Test only (OPENREG_TEST_FAIL_RECORD_BUFFER_ALLOCS): the first n
  // allocations of a thread's record buffer fail as if the host were out of
  // memory. Read by activity/buffers.cpp.
  long long failRecordBufferAllocs = 0;

  // Empty when valid; otherwise names the variable and the problem.
  std::string error;
};

Config readConfigFromEnvironment();

}  // namespace openreg
