// PYTORCH_ALLOC_CONF for the openreg allocator: the device-generic keys it
// honours, those it accepts but does not use (with a warning), and a clear
// error for anything else. c10's own parser accepts unknown keys silently and
// reports a malformed number as "stoull", so the text is checked here first.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <string>

#include <c10/util/Exception.h>
#include <c10/util/env.h>

#include "backend/MemoryHistory.h"

namespace openreg::backend {

namespace {

constexpr size_t kMiB = 1 << 20;
// Blocks up to 1 MiB come from the small pool and are always split; a limit
// must lie above that.
constexpr size_t kMinMaxSplitSizeMb = 2;

std::string trim(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

// Splits at commas outside [...] lists.
std::vector<std::string> splitItems(const std::string& conf) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (char ch : conf) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    TORCH_CHECK(depth >= 0 && depth <= 1, "openreg: PYTORCH_ALLOC_CONF '", conf, "': unbalanced brackets");
    if (ch == ',' && depth == 0) {
      items.push_back(trim(current));
      current.clear();
    } else {
      current += ch;
    }
  }
  TORCH_CHECK(depth == 0, "openreg: PYTORCH_ALLOC_CONF '", conf, "': unbalanced brackets");
  items.push_back(trim(current));
  return items;
}

size_t parseMegabytes(const std::string& key, const std::string& value, size_t minimum) {
  char* end = nullptr;
  const unsigned long long mb = std::strtoull(value.c_str(), &end, 10);
  TORCH_CHECK(!value.empty() && std::isdigit(static_cast<unsigned char>(value[0])) && *end == '\0',
              "openreg: PYTORCH_ALLOC_CONF: ", key, " must be a whole number of MiB, got '", value, "'");
  TORCH_CHECK(mb >= minimum, "openreg: PYTORCH_ALLOC_CONF: ", key, " must be at least ", minimum, ", got ", mb);
  TORCH_CHECK(mb <= SIZE_MAX / kMiB, "openreg: PYTORCH_ALLOC_CONF: ", key, " is too large: ", mb);
  return static_cast<size_t>(mb) * kMiB;
}

double parseFraction(const std::string& key, const std::string& value) {
  char* end = nullptr;
  const double fraction = std::strtod(value.c_str(), &end);
  TORCH_CHECK(!value.empty() && *end == '\0', "openreg: PYTORCH_ALLOC_CONF: ", key, " must be a number, got '", value,
              "'");
  TORCH_CHECK(fraction > 0.0 && fraction < 1.0, "openreg: PYTORCH_ALLOC_CONF: ", key,
              " must lie strictly between 0 and 1, got ", value);
  return fraction;
}

bool parseBool(const std::string& key, const std::string& value) {
  if (value == "true" || value == "True") return true;
  if (value == "false" || value == "False") return false;
  TORCH_CHECK(false, "openreg: PYTORCH_ALLOC_CONF: ", key, " must be true or false, got '", value, "'");
}

bool isPowerOfTwo(size_t value) { return value != 0 && (value & (value - 1)) == 0; }

size_t parseCount(const std::string& key, const std::string& value) {
  char* end = nullptr;
  const unsigned long long count = std::strtoull(value.c_str(), &end, 10);
  TORCH_CHECK(
      !value.empty() && std::isdigit(static_cast<unsigned char>(value[0])) && *end == '\0' && count <= (1ULL << 20),
      "openreg: PYTORCH_ALLOC_CONF: ", key, " must be a whole number, got '", value, "'");
  return static_cast<size_t>(count);
}

size_t parseDivisions(const std::string& value) {
  const size_t divisions = parseCount("roundup_power2_divisions", value);
  TORCH_CHECK(divisions == 0 || isPowerOfTwo(divisions),
              "openreg: PYTORCH_ALLOC_CONF: roundup_power2_divisions must be 0 or a power of two, got ", divisions);
  return divisions;
}

// "N" for every interval, or CUDA's list "[1:2, 64:8, >:16]": interval (in
// MiB, a power of two) to divisions; the first entry also covers the
// intervals below it, ">" every interval after the last one named.
void parseRoundup(AllocatorSettings& settings, const std::string& value) {
  auto& divisions = settings.roundupPower2Divisions;
  if (value.empty() || value.front() != '[') {
    divisions.fill(parseDivisions(value));
    return;
  }
  TORCH_CHECK(value.back() == ']', "openreg: PYTORCH_ALLOC_CONF: roundup_power2_divisions list '", value,
              "' does not end with ']'");
  size_t next = 0;  // the first interval a ">" entry would set
  bool first = true;
  std::string items = value.substr(1, value.size() - 2);
  size_t start = 0;
  while (start <= items.size()) {
    const size_t comma = std::min(items.find(',', start), items.size());
    const std::string item = trim(items.substr(start, comma - start));
    start = comma + 1;
    const size_t colon = item.find(':');
    TORCH_CHECK(colon != std::string::npos, "openreg: PYTORCH_ALLOC_CONF: roundup_power2_divisions entry '", item,
                "' is not interval:divisions");
    const std::string interval = trim(item.substr(0, colon));
    const size_t count = parseDivisions(trim(item.substr(colon + 1)));
    if (interval == ">") {
      std::fill(divisions.begin() + static_cast<ptrdiff_t>(next), divisions.end(), count);
      continue;
    }
    const size_t mb = parseCount("roundup_power2_divisions interval", interval);
    TORCH_CHECK(isPowerOfTwo(mb), "openreg: PYTORCH_ALLOC_CONF: roundup_power2_divisions intervals must be powers ",
                "of two (MiB), got ", mb);
    size_t index = 0;
    while ((size_t{1} << (index + 1)) <= mb) ++index;
    index = std::min(index, divisions.size() - 1);
    if (first) std::fill(divisions.begin(), divisions.begin() + static_cast<ptrdiff_t>(index), count);
    first = false;
    divisions[index] = count;
    next = index + 1;
  }
}

// Device-generic keys openreg does not implement, and other backends' keys
// (one variable may serve several devices): accepted with a warning.
const std::set<std::string>& keysNotUsed() {
  static const std::set<std::string> kKeys = {
      "large_segment_size_mb",
      "pinned_use_background_threads",
      "pinned_max_round_threshold",
      "pinned_max_cached_size",
      "backend",
      "release_lock_on_cudamalloc",
      "pinned_use_cuda_host_register",
      "pinned_num_register_threads",
      "per_process_memory_fraction",
      "graph_capture_record_stream_reuse",
  };
  return kKeys;
}

void applyItem(AllocatorSettings& settings, const std::string& key, const std::string& value) {
  if (key == "max_split_size_mb") {
    settings.maxSplitSize = parseMegabytes(key, value, kMinMaxSplitSizeMb);
  } else if (key == "max_non_split_rounding_mb") {
    settings.maxNonSplitRounding = parseMegabytes(key, value, 0);
  } else if (key == "garbage_collection_threshold") {
    settings.garbageCollectionThreshold = parseFraction(key, value);
  } else if (key == "roundup_power2_divisions") {
    parseRoundup(settings, value);
  } else if (key == "expandable_segments") {
    if (parseBool(key, value)) {
      TORCH_WARN_ONCE("openreg: PYTORCH_ALLOC_CONF: expandable_segments is not supported; using fixed segments");
    }
  } else if (keysNotUsed().count(key) != 0) {
    TORCH_WARN_ONCE("openreg: PYTORCH_ALLOC_CONF: ", key, " does not apply to the openreg allocator; ignored");
  } else {
    TORCH_CHECK(false, "openreg: PYTORCH_ALLOC_CONF: unknown setting '", key,
                "' (openreg honours max_split_size_mb, max_non_split_rounding_mb, garbage_collection_threshold, "
                "roundup_power2_divisions)");
  }
}

std::string confFromEnvironment() {
  for (const char* name : {"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"}) {
    if (auto value = c10::utils::get_env(name)) return *value;
  }
  return "";
}

}  // namespace

AllocatorSettings parseAllocatorSettings(const std::string& conf) {
  AllocatorSettings settings;
  settings.conf = conf;
  if (trim(conf).empty()) return settings;
  for (const std::string& item : splitItems(conf)) {
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    TORCH_CHECK(colon != std::string::npos, "openreg: PYTORCH_ALLOC_CONF: '", item, "' is not key:value");
    applyItem(settings, trim(item.substr(0, colon)), trim(item.substr(colon + 1)));
  }
  return settings;
}

const AllocatorSettings& allocatorSettings() {
  // A throwing initialiser leaves it unset: every later call reports again.
  static const AllocatorSettings kSettings = parseAllocatorSettings(confFromEnvironment());
  return kSettings;
}

}  // namespace openreg::backend
