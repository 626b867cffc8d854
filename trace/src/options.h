// Options arrive through the C ABI as small JSON objects, so that new
// options never change a function signature.
#pragma once

#include <string_view>

#include "analysis.h"
#include "trace_model.h"

namespace openreg::trace {

// Each throws std::invalid_argument on malformed JSON, an unknown key or a
// value of the wrong type. Empty text means defaults.
LoadOptions parse_load_options(std::string_view json);
SummaryOptions parse_summary_options(std::string_view json);
CheckOptions parse_check_options(std::string_view json);
TimelineOptions parse_timeline_options(std::string_view json);

}  // namespace openreg::trace
