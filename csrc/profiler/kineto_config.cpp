#include "kineto_config.h"

namespace openreg::profiler {
namespace {

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n\f\v";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

}  // namespace

std::optional<std::string_view> configValue(std::string_view configText, std::string_view key) {
  std::optional<std::string_view> value;  // the last line of the key decides, as in Kineto
  while (!configText.empty()) {
    const size_t newline = configText.find('\n');
    std::string_view line = configText.substr(0, newline);
    configText = newline == std::string_view::npos ? std::string_view() : configText.substr(newline + 1);
    line = line.substr(0, line.find('#'));
    const size_t equals = line.find('=');
    if (equals == std::string_view::npos || trim(line.substr(0, equals)) != key) continue;
    value = trim(line.substr(equals + 1));
  }
  return value;
}

bool configNamesActivityTypes(std::string_view configText) {
  const std::optional<std::string_view> value = configValue(configText, "ACTIVITY_TYPES");
  return value && value->find_first_not_of(", \t") != std::string_view::npos;
}

}  // namespace openreg::profiler
