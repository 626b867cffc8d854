#include "clock_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using openreg::profiler::ClockMap;
using openreg::profiler::ClockPoint;

namespace {

// A device clock with offset, skew and drift, as a function of host time.
struct Model {
  double offset = 1e12;
  double skewPpm = 0;
  double driftPpmPerS = 0;
  uint64_t host0 = 1'700'000'000'000'000'000ull;

  uint64_t device(uint64_t host) const {
    const double tau = static_cast<double>(host - host0);
    return static_cast<uint64_t>(
        std::llround(offset + tau + skewPpm * 1e-6 * tau + 0.5 * driftPpmPerS * 1e-6 * tau * tau / 1e9));
  }
};

// Signed error in ns, computed in integers (doubles cannot hold epoch ns).
int64_t error(int64_t mapped, uint64_t truth) { return mapped - static_cast<int64_t>(truth); }

std::vector<ClockPoint> samples(const Model& m, uint64_t from, uint64_t to, uint64_t period) {
  std::vector<ClockPoint> out;
  for (uint64_t h = from; h <= to; h += period) out.push_back({h, m.device(h), 200});
  return out;
}

}  // namespace

TEST(ClockMap, EmptyMapsNothing) {
  ClockMap map;
  EXPECT_FALSE(map.toHost(123).has_value());
}

TEST(ClockMap, SingleSampleIsAnOffset) {
  ClockMap map({{1000, 50, 0}});
  EXPECT_EQ(*map.toHost(50), 1000);
  EXPECT_EQ(*map.toHost(150), 1100);
}

// The case a single fitted line gets wrong: 500 ppm skew plus 200 ppm/s of
// drift over 2 s. Piecewise interpolation through 10 ms samples stays within
// a few ns; a line through the end points would be off by tens of µs.
TEST(ClockMap, SkewAndDriftStayAccurate) {
  Model m;
  m.skewPpm = 500;
  m.driftPpmPerS = 200;
  const uint64_t start = m.host0 + 1'000'000'000ull;
  const uint64_t end = start + 2'000'000'000ull;
  ClockMap map(samples(m, start, end, 10'000'000));
  ClockMap line({{start, m.device(start), 0}, {end, m.device(end), 0}});
  double worstLine = 0;
  for (uint64_t h = start; h <= end; h += 3'333'333) {
    const auto mapped = map.toHost(m.device(h));
    ASSERT_TRUE(mapped.has_value());
    EXPECT_LE(std::abs(error(*mapped, h)), 20) << "at host " << h;
    worstLine = std::max(worstLine, std::abs(static_cast<double>(error(*line.toHost(m.device(h)), h))));
  }
  EXPECT_GT(worstLine, 10'000.0) << "the test's clock should defeat a two-point fit";
}

TEST(ClockMap, MonotoneAcrossSegments) {
  Model m;
  m.skewPpm = -300;
  m.driftPpmPerS = 1000;
  const uint64_t start = m.host0;
  ClockMap map(samples(m, start, start + 100'000'000ull, 10'000'000));
  int64_t previous = INT64_MIN;
  for (uint64_t d = m.device(start); d < m.device(start + 100'000'000ull); d += 997) {
    const int64_t h = *map.toHost(d);
    EXPECT_GE(h, previous);
    previous = h;
  }
}

// The remembered segment only saves the search: in order, out of order,
// outside the samples, and from a stale or out-of-range segment, the
// answer is the one without it.
TEST(ClockMap, ARememberedSegmentGivesTheSameTimes) {
  Model m;
  m.skewPpm = 700;
  m.driftPpmPerS = 300;
  const uint64_t start = m.host0 + 1'000'000'000ull;
  ClockMap map(samples(m, start, start + 200'000'000ull, 10'000'000));
  ASSERT_GT(map.size(), 3u);
  const uint64_t first = m.device(start - 30'000'000ull);
  const uint64_t last = m.device(start + 230'000'000ull);
  std::vector<uint64_t> times;
  for (uint64_t d = first; d < last; d += 1'234'567) times.push_back(d);
  times.push_back(m.device(start));  // exactly on samples, first and last
  times.push_back(m.device(start + 200'000'000ull));
  std::vector<uint64_t> shuffled = times;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(3));
  for (const auto* order : {&times, &shuffled}) {
    size_t segment = 0;
    for (uint64_t d : *order) {
      EXPECT_EQ(map.toHost(d, segment), map.toHost(d)) << "at device " << d;
    }
  }
  for (size_t stale : {size_t{1}, map.size() - 2, map.size(), size_t{1000}}) {
    for (uint64_t d : {first, m.device(start + 105'000'000ull), last}) {
      size_t segment = stale;
      EXPECT_EQ(map.toHost(d, segment), map.toHost(d)) << "from segment " << stale << " at device " << d;
      EXPECT_LE(segment, map.size() - 2);
    }
  }
}

TEST(ClockMap, ExtrapolatesWithTheNearestSegment) {
  Model m;
  m.skewPpm = 1000;  // device runs 0.1% fast
  const uint64_t start = m.host0 + 500'000'000ull;
  ClockMap map(samples(m, start, start + 50'000'000ull, 10'000'000));
  const uint64_t after = start + 60'000'000ull;
  const uint64_t before = start - 10'000'000ull;
  EXPECT_LE(std::abs(error(*map.toHost(m.device(after)), after)), 5);
  EXPECT_LE(std::abs(error(*map.toHost(m.device(before)), before)), 5);
}

TEST(ClockMap, RejectsContradictoryAndUncertainSamples) {
  std::vector<ClockPoint> points = {
      {1'000'000, 5'000'000, 100}, {2'000'000, 6'000'000, 100},
      {1'500'000, 7'000'000, 100},                                     // host went backwards
      {3'000'000, 8'000'000, 100}, {9'000'000, 8'500'000, 5'000'000},  // far less certain than the rest
  };
  ClockMap map(points);
  EXPECT_EQ(map.rejected(), 2u);
  EXPECT_EQ(map.size(), 3u);
  EXPECT_EQ(*map.toHost(7'000'000), 2'500'000);
}

TEST(ClockMap, EqualDeviceReadingsKeepTheTighterSample) {
  ClockMap map({{1'000, 100, 500}, {1'200, 100, 50}, {2'200, 1'100, 50}});
  EXPECT_EQ(map.size(), 2u);
  EXPECT_EQ(*map.toHost(100), 1'200);
}
