// Per-thread external-correlation stacks (pushed by the profiler per op).
#pragma once

#include <cstdint>

#include "openreg/activity.h"

namespace openreg::activity {

void pushExternalId(orActivityExternalCorrelationKind kind, uint64_t id);
bool popExternalId(orActivityExternalCorrelationKind kind, uint64_t* id);

}  // namespace openreg::activity
