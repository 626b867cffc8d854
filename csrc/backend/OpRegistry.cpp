#include "backend/OpRegistry.h"

#include <map>
#include <mutex>

namespace openreg::backend {

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<OpPathEntry> paths;
  std::map<std::string, int64_t> fallbacks;
};

Registry& registry() {
  static auto* instance = new Registry();
  return *instance;
}

}  // namespace

const char* opPathName(OpPath path) {
  switch (path) {
    case OpPath::Device:
      return "device";
    case OpPath::Copy:
      return "copy";
    case OpPath::Sync:
      return "sync";
    case OpPath::View:
      return "view";
    case OpPath::Factory:
      return "factory";
    case OpPath::Unsupported:
      return "unsupported";
  }
  return "?";
}

void recordOpPath(std::string op, OpPath path, std::string kernel) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.paths.push_back(OpPathEntry{std::move(op), path, std::move(kernel)});
}

std::vector<OpPathEntry> registeredOpPaths() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.paths;
}

void countFallback(const std::string& op) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.fallbacks[op] += 1;
}

std::vector<std::pair<std::string, int64_t>> fallbackCounts() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return {r.fallbacks.begin(), r.fallbacks.end()};
}

void resetFallbackCounts() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.fallbacks.clear();
}

}  // namespace openreg::backend
