// Maps one device's clock onto host epoch nanoseconds.
//
// The device counter has its own offset and rate, and the rate drifts. A
// single offset (or one line fitted at start and stop) is wrong by the drift
// over the whole trace, so the map is piecewise linear through the clock
// samples (taken at least every 10 ms while tracing): within a segment the
// error is second order in the drift. Outside the sampled range the nearest
// segment's rate is extended.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "records.h"

namespace openreg::profiler {

class ClockMap {
 public:
  ClockMap() = default;
  explicit ClockMap(std::vector<ClockPoint> samples);

  bool empty() const { return points_.empty(); }
  size_t size() const { return points_.size(); }
  // Samples dropped because they contradicted their neighbours (host time not
  // increasing with device time) or were much less certain than the rest.
  size_t rejected() const { return rejected_; }

  // Host epoch ns for a device timestamp; nullopt without any sample.
  std::optional<int64_t> toHost(uint64_t deviceTs) const;
  // The same; `segment` (start it at 0) remembers where the last timestamp
  // fell, so timestamps mostly in order skip the search.
  std::optional<int64_t> toHost(uint64_t deviceTs, size_t& segment) const;

 private:
  std::vector<ClockPoint> points_;  // strictly increasing in both clocks
  size_t rejected_ = 0;
};

}  // namespace openreg::profiler
