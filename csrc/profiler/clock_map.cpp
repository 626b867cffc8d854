#include "clock_map.h"

#include <algorithm>

namespace openreg::profiler {
namespace {

// Samples whose uncertainty is this many times the median are noise, not
// information: interpolating through them would bend the map.
constexpr uint64_t kUncertaintyOutlierFactor = 8;
// Below this width a sample counts as exact, so a few very tight samples do
// not make ordinary ones outliers.
constexpr uint64_t kUncertaintyFloorNs = 1000;

// Garbage samples or timestamps can map far outside int64: keep the
// nearest representable time (an overflow would be undefined, and would
// reorder events).
int64_t saturate(__int128 value) {
  if (value > INT64_MAX) return INT64_MAX;
  if (value < INT64_MIN) return INT64_MIN;
  return static_cast<int64_t>(value);
}

int64_t interpolate(const ClockPoint& a, const ClockPoint& b, uint64_t deviceTs) {
  // Samples are milliseconds apart, so the product of the deltas usually
  // fits 64 bits: then the same rounding in 64-bit arithmetic, which is
  // several times faster than 128-bit division (and runs per device record).
  constexpr int64_t kSmall = int64_t{1} << 31;
  const int64_t dd64 = static_cast<int64_t>(deviceTs - a.device);
  const int64_t hostSpan64 = static_cast<int64_t>(b.host - a.host);
  const int64_t deviceSpan64 = static_cast<int64_t>(b.device - a.device);
  if (dd64 > -kSmall && dd64 < kSmall && hostSpan64 > 0 && hostSpan64 < kSmall && deviceSpan64 > 0 &&
      deviceSpan64 < kSmall) {
    const int64_t num = dd64 * hostSpan64;
    const int64_t q = (num >= 0 ? num + deviceSpan64 / 2 : num - deviceSpan64 / 2) / deviceSpan64;
    return saturate(static_cast<__int128>(a.host) + q);
  }
  // 128-bit arithmetic: device deltas times host deltas overflow 64 bits.
  const __int128 dd = static_cast<__int128>(deviceTs) - static_cast<__int128>(a.device);
  const __int128 hostSpan = static_cast<__int128>(b.host) - static_cast<__int128>(a.host);
  const __int128 deviceSpan = static_cast<__int128>(b.device) - static_cast<__int128>(a.device);
  constexpr __int128 kLimit = static_cast<__int128>(1) << 63;
  if (dd <= -kLimit || dd >= kLimit || hostSpan >= kLimit) {
    // Only nonsense clocks get here (spans of centuries): the product would
    // not fit even 128 bits.
    const long double mapped = static_cast<long double>(a.host) + static_cast<long double>(dd) *
                                                                      static_cast<long double>(hostSpan) /
                                                                      static_cast<long double>(deviceSpan);
    if (mapped >= 9.2e18L) return INT64_MAX;
    if (mapped <= -9.2e18L) return INT64_MIN;
    return static_cast<int64_t>(mapped);
  }
  const __int128 num = dd * hostSpan;
  // Round to nearest, symmetric for negative offsets (extrapolation before a).
  const __int128 q = (num >= 0 ? num + deviceSpan / 2 : num - deviceSpan / 2) / deviceSpan;
  return saturate(static_cast<__int128>(a.host) + q);
}

}  // namespace

ClockMap::ClockMap(std::vector<ClockPoint> samples) {
  if (samples.empty()) {
    return;
  }
  std::vector<uint64_t> widths;
  widths.reserve(samples.size());
  for (const auto& s : samples) {
    widths.push_back(s.uncertainty);
  }
  std::nth_element(widths.begin(), widths.begin() + widths.size() / 2, widths.end());
  const uint64_t limit = std::max(widths[widths.size() / 2], kUncertaintyFloorNs) * kUncertaintyOutlierFactor;

  std::sort(samples.begin(), samples.end(), [](const ClockPoint& a, const ClockPoint& b) {
    return a.device != b.device ? a.device < b.device : a.uncertainty < b.uncertainty;
  });
  points_.reserve(samples.size());
  for (const auto& s : samples) {
    if (s.uncertainty > limit) {
      ++rejected_;
      continue;
    }
    if (!points_.empty()) {
      const auto& last = points_.back();
      // Equal device readings: keep the tighter one (sorted first).
      // Host time not increasing: the clocks disagree; keep the earlier one.
      if (s.device == last.device || s.host <= last.host) {
        ++rejected_;
        continue;
      }
    }
    points_.push_back(s);
  }
}

std::optional<int64_t> ClockMap::toHost(uint64_t deviceTs) const {
  size_t segment = 0;
  return toHost(deviceTs, segment);
}

std::optional<int64_t> ClockMap::toHost(uint64_t deviceTs, size_t& segment) const {
  if (points_.empty()) {
    return std::nullopt;
  }
  if (points_.size() == 1) {
    // One sample: offset only, nominal rate.
    const auto& p = points_.front();
    return saturate(static_cast<__int128>(p.host) + static_cast<__int128>(deviceTs) - static_cast<__int128>(p.device));
  }
  // Segment i covers [points_[i], points_[i + 1]); the first and last also
  // extend outwards.
  const size_t last = points_.size() - 2;
  size_t i = segment <= last ? segment : last;
  const bool fromBelow = i == 0 || deviceTs >= points_[i].device;
  const bool fromAbove = i == last || deviceTs < points_[i + 1].device;
  if (!fromBelow || !fromAbove) {
    auto upper = std::upper_bound(points_.begin(), points_.end(), deviceTs,
                                  [](uint64_t ts, const ClockPoint& p) { return ts < p.device; });
    if (upper == points_.begin()) {
      i = 0;  // before the first sample: extend the first segment
    } else if (upper == points_.end()) {
      i = last;  // after the last: extend the last segment
    } else {
      i = std::min(static_cast<size_t>(upper - points_.begin()) - 1, last);
    }
  }
  segment = i;
  return interpolate(points_[i], points_[i + 1], deviceTs);
}

}  // namespace openreg::profiler
