// What a Kineto config text asks for, read the way Kineto reads it.
//
// An on-demand request (Dynolog's `dyno gputrace`, Kineto's daemon mode)
// reaches the plugin as Kineto's config text, and Kineto hands the plugin
// only the parsed activity set: a request that names no ACTIVITY_TYPES and
// one that names Kineto's default set look alike there. The text tells them
// apart. Torch-free, so it is unit-tested without Kineto.
#pragma once

#include <optional>
#include <string_view>

namespace openreg::profiler {

// True when `configText` sets ACTIVITY_TYPES to a non-empty list. Lines are
// KEY=VALUE with '#' starting a comment, keys and values trimmed, as Kineto
// parses them; an empty list is no choice (Kineto falls back to its default
// set). Never throws.
bool configNamesActivityTypes(std::string_view configText);

// The value of `key` in `configText` (its last line), trimmed; nullopt when
// no line sets it. A view into `configText`. Never throws.
std::optional<std::string_view> configValue(std::string_view configText, std::string_view key);

}  // namespace openreg::profiler
