#include "correlation.h"

#include "../thread_context.h"

namespace openreg::activity {

void pushExternalId(orActivityExternalCorrelationKind kind, uint64_t id) {
  ThreadContext& context = threadContext();
  if (context.externalDepth[kind] > 0) context.externalBelow[kind].push_back(context.externalTop[kind]);
  context.externalTop[kind] = id;
  ++context.externalDepth[kind];
}

bool popExternalId(orActivityExternalCorrelationKind kind, uint64_t* id) {
  ThreadContext& context = threadContext();
  if (context.externalDepth[kind] == 0) return false;
  if (id != nullptr) *id = context.externalTop[kind];
  if (--context.externalDepth[kind] > 0) {
    context.externalTop[kind] = context.externalBelow[kind].back();
    context.externalBelow[kind].pop_back();
  }
  return true;
}

}  // namespace openreg::activity
