#include "correlation.h"

#include <vector>

namespace openreg::activity {
namespace {
thread_local std::vector<uint64_t> tlsStacks[OR_EXTERNAL_CORRELATION_KIND_COUNT];
}

void pushExternalId(orActivityExternalCorrelationKind kind, uint64_t id) { tlsStacks[kind].push_back(id); }

bool popExternalId(orActivityExternalCorrelationKind kind, uint64_t* id) {
  auto& stack = tlsStacks[kind];
  if (stack.empty()) return false;
  if (id != nullptr) *id = stack.back();
  stack.pop_back();
  return true;
}

int topExternalIds(orActivityExternalCorrelationKind kinds[], uint64_t ids[], int capacity) {
  int count = 0;
  for (int kind = 1; kind < OR_EXTERNAL_CORRELATION_KIND_COUNT && count < capacity; ++kind) {
    const auto& stack = tlsStacks[kind];
    if (stack.empty()) continue;
    kinds[count] = static_cast<orActivityExternalCorrelationKind>(kind);
    ids[count] = stack.back();
    ++count;
  }
  return count;
}

}  // namespace openreg::activity
