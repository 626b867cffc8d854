#include "config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "clock.h"

namespace openreg {
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return (value != nullptr && value[0] != '\0') ? value : nullptr;
}

bool parseInteger(const char* text, long long minimum, long long maximum, long long* out) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < minimum || value > maximum) return false;
  *out = value;
  return true;
}

// "8G", "512M", "4096", "1.5G".
bool parseBytes(const char* text, size_t* out) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  if (errno != 0 || end == text || !(value > 0)) return false;
  double scale = 1;
  if (*end != '\0') {
    switch (*end) {
      case 'k':
      case 'K':
        scale = 1024.0;
        break;
      case 'm':
      case 'M':
        scale = 1024.0 * 1024;
        break;
      case 'g':
      case 'G':
        scale = 1024.0 * 1024 * 1024;
        break;
      case 't':
      case 'T':
        scale = 1024.0 * 1024 * 1024 * 1024;
        break;
      default:
        return false;
    }
    ++end;
    if (*end == 'i' || *end == 'I') ++end;
    if (*end == 'b' || *end == 'B') ++end;
    if (*end != '\0') return false;
  }
  const double bytes = value * scale;
  if (bytes < 1 || bytes > 1e18) return false;
  *out = static_cast<size_t>(bytes);
  return true;
}

bool parseReal(const char* text, double* out) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !std::isfinite(value)) return false;
  *out = value;
  return true;
}

// The modelled rate 1 + skew + drift * t must stay positive while it drifts
// (DeviceClockModel::kDriftSeconds), or the device clock would stop or run
// backwards. Returns the error, or "".
std::string checkClockRate(double skewPpm, double driftPpmPerS) {
  const double seconds = DeviceClockModel::kDriftSeconds;
  const double startPpm = 1e6 + skewPpm;
  if (startPpm + std::min(0.0, driftPpmPerS) * seconds > 0) return "";
  char message[512];
  std::snprintf(message, sizeof(message),
                "OPENREG_CLOCK_DRIFT_PPM_PER_S=%g with OPENREG_CLOCK_SKEW_PPM=%g drives the device clock's rate to "
                "zero after %.0f s, within the %.0f s the drift lasts; with this skew the drift must be in "
                "(%g, 1e4] ppm/s",
                driftPpmPerS, skewPpm, startPpm / -driftPpmPerS, seconds, -startPpm / seconds);
  return message;
}

}  // namespace

Config readConfigFromEnvironment() {
  Config config;
  long long integer = 0;
  if (const char* v = env("OPENREG_DEVICE_COUNT")) {
    if (!parseInteger(v, 1, kMaxDevices, &integer)) {
      config.error = std::string("OPENREG_DEVICE_COUNT='") + v + "' is not an integer in [1, 16]";
      return config;
    }
    config.deviceCount = static_cast<int>(integer);
  }
  if (const char* v = env("OPENREG_DEVICE_MEMORY")) {
    if (!parseBytes(v, &config.deviceMemoryBytes)) {
      config.error = std::string("OPENREG_DEVICE_MEMORY='") + v + "' is not a byte count such as 8G or 512M";
      return config;
    }
  }
  if (const char* v = env("OPENREG_WORKERS_PER_DEVICE")) {
    if (!parseInteger(v, 1, 64, &integer)) {
      config.error = std::string("OPENREG_WORKERS_PER_DEVICE='") + v + "' is not an integer in [1, 64]";
      return config;
    }
    config.workersPerDevice = static_cast<int>(integer);
  }
  if (const char* v = env("OPENREG_CLOCK_OFFSET_NS")) {
    double offset = 0;
    if (!parseReal(v, &offset) || offset < 0 || offset > 9e18) {
      config.error = std::string("OPENREG_CLOCK_OFFSET_NS='") + v + "' is not a non-negative number of ns";
      return config;
    }
    config.clockOffsetNs = static_cast<uint64_t>(offset);
  }
  if (const char* v = env("OPENREG_CLOCK_SKEW_PPM")) {
    if (!parseReal(v, &config.clockSkewPpm) || std::fabs(config.clockSkewPpm) > 1e5) {
      config.error = std::string("OPENREG_CLOCK_SKEW_PPM='") + v + "' is not a number in [-1e5, 1e5]";
      return config;
    }
  }
  if (const char* v = env("OPENREG_CLOCK_DRIFT_PPM_PER_S")) {
    if (!parseReal(v, &config.clockDriftPpmPerS) || std::fabs(config.clockDriftPpmPerS) > 1e4) {
      config.error = std::string("OPENREG_CLOCK_DRIFT_PPM_PER_S='") + v + "' is not a number in [-1e4, 1e4]";
      return config;
    }
  }
  if (std::string error = checkClockRate(config.clockSkewPpm, config.clockDriftPpmPerS); !error.empty()) {
    config.error = std::move(error);
    return config;
  }
  if (const char* v = env("OPENREG_FLUSH_TIMEOUT_MS")) {
    if (!parseInteger(v, 1, 3600000, &integer)) {
      config.error = std::string("OPENREG_FLUSH_TIMEOUT_MS='") + v + "' is not an integer in [1, 3600000]";
      return config;
    }
    config.flushTimeoutMs = static_cast<uint64_t>(integer);
  }
  if (const char* v = env("OPENREG_EXIT_DRAIN_TIMEOUT_MS")) {
    if (!parseInteger(v, 0, 3600000, &integer)) {
      config.error = std::string("OPENREG_EXIT_DRAIN_TIMEOUT_MS='") + v + "' is not an integer in [0, 3600000]";
      return config;
    }
    config.exitDrainTimeoutMs = static_cast<uint64_t>(integer);
  }
  if (const char* v = env("OPENREG_PEAK_GFLOPS")) {
    if (!parseReal(v, &config.peakFlopsPerSecond) || !(config.peakFlopsPerSecond > 0) ||
        config.peakFlopsPerSecond > 1e9) {
      config.error = std::string("OPENREG_PEAK_GFLOPS='") + v + "' is not a number in (0, 1e9]";
      return config;
    }
    config.peakFlopsPerSecond *= 1e9;
  }
  if (const char* v = env("OPENREG_PEAK_GBPS")) {
    if (!parseReal(v, &config.peakBytesPerSecond) || !(config.peakBytesPerSecond > 0) ||
        config.peakBytesPerSecond > 1e9) {
      config.error = std::string("OPENREG_PEAK_GBPS='") + v + "' is not a number in (0, 1e9]";
      return config;
    }
    config.peakBytesPerSecond *= 1e9;
  }
  if (const char* v = env("OPENREG_TEST_FAIL_RECORD_BUFFER_ALLOCS")) {
    if (!parseInteger(v, 0, 1000000000, &config.failRecordBufferAllocs)) {
      config.error = std::string("OPENREG_TEST_FAIL_RECORD_BUFFER_ALLOCS='") + v + "' is not a count";
      return config;
    }
  }
  return config;
}

}  // namespace openreg
