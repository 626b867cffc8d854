// Options arrive through the C ABI as small JSON objects, so that new
// options never change a function signature.
#pragma once

#include <string_view>

#include "analysis.h"
#include "trace_model.h"

namespace openreg::trace {

// Each throws std::invalid_argument on malformed JSON, an unknown key or a
// value of the wrong type. Empty text means defaults.
LoadOptions parseLoadOptions(std::string_view json);
SummaryOptions parseSummaryOptions(std::string_view json);
CheckOptions parseCheckOptions(std::string_view json);
TimelineOptions parseTimelineOptions(std::string_view json);

}  // namespace openreg::trace
