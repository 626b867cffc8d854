// What a Kineto config text asks for, read the way Kineto reads it.
//
// An on-demand request (Dynolog's `dyno gputrace`, Kineto's daemon mode)
// reaches the plugin as Kineto's config text, and Kineto hands the plugin
// only the parsed activity set: a request that names no ACTIVITY_TYPES and
// one that names Kineto's default set look alike there. The text tells them
// apart. Torch-free, so it is unit-tested without Kineto.
#pragma once

#include <string_view>

namespace openreg::profiler {

// True when `configText` sets ACTIVITY_TYPES to a non-empty list. Lines are
// KEY=VALUE with '#' starting a comment, keys and values trimmed, as Kineto
// parses them; an empty list is no choice (Kineto falls back to its default
// set). Never throws.
bool configNamesActivityTypes(std::string_view configText);

}  // namespace openreg::profiler
