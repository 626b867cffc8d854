#include "device_metrics.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "openreg/activity.h"
#include "trace_builder.h"

namespace openreg::profiler {
namespace {

constexpr const char* kKernelMetricNames[] = {"flops",   "bytes_read",  "bytes_written",
                                              "busy_ns", "flops_per_s", "bytes_per_s"};
constexpr const char* kCounterMetricNames[] = {"memory_allocated", "memory_reserved", "queued_tasks", "copy_bandwidth"};
static_assert(std::size(kKernelMetricNames) == static_cast<size_t>(KernelMetric::Count));
static_assert(std::size(kCounterMetricNames) == static_cast<size_t>(CounterMetric::Count));

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

// Sets the metric's bit in `request`; false for an unknown name.
bool addMetric(std::string_view name, MetricsRequest& request) {
  for (size_t i = 0; i < std::size(kKernelMetricNames); ++i) {
    if (name == kKernelMetricNames[i]) {
      request.kernelMetrics |= 1u << i;
      return true;
    }
  }
  for (size_t i = 0; i < std::size(kCounterMetricNames); ++i) {
    if (name == kCounterMetricNames[i]) {
      request.counterMetrics |= 1u << i;
      return true;
    }
  }
  return false;
}

bool known(const KernelMetrics& m, uint32_t bit) { return (m.known & bit) != 0; }

}  // namespace

const char* kernelMetricName(KernelMetric metric) { return kKernelMetricNames[static_cast<size_t>(metric)]; }
const char* counterMetricName(CounterMetric metric) { return kCounterMetricNames[static_cast<size_t>(metric)]; }

std::string knownMetricNames() {
  std::string out;
  for (const char* name : kKernelMetricNames) out.append(out.empty() ? "" : ", ").append(name);
  for (const char* name : kCounterMetricNames) out.append(", ").append(name);
  return out;
}

std::optional<MetricsRequest> parseMetricsRequest(std::string_view metrics, std::optional<std::string_view> perKernel,
                                                  std::string* error) {
  MetricsRequest request;
  std::string unknown;
  while (!metrics.empty()) {
    const size_t comma = metrics.find(',');
    const std::string_view name = trim(metrics.substr(0, comma));
    metrics = comma == std::string_view::npos ? std::string_view() : metrics.substr(comma + 1);
    if (name.empty() || addMetric(name, request)) continue;
    unknown.append(unknown.empty() ? "'" : ", '").append(name).append("'");
  }
  if (!unknown.empty()) {
    if (error != nullptr) {
      *error = "openreg profiler: unknown metric " + unknown +
               " in profiler_metrics; the openreg device knows: " + knownMetricNames();
    }
    return std::nullopt;
  }
  request.perKernel = perKernel && trim(*perKernel) == "true";
  return request;
}

void writeKernelMetricArgs(const KernelMetrics& m, const MetricsRequest& request, int64_t durationNs, ArgWriter& out) {
  const bool flops = known(m, OR_KERNEL_WORK_FLOPS);
  const bool bytes = known(m, OR_KERNEL_WORK_BYTES);
  if (flops && request.wants(KernelMetric::Flops)) out.unsignedInteger("flops", m.flops);
  if (bytes && request.wants(KernelMetric::BytesRead)) out.unsignedInteger("bytes_read", m.bytesRead);
  if (bytes && request.wants(KernelMetric::BytesWritten)) out.unsignedInteger("bytes_written", m.bytesWritten);
  if (request.wants(KernelMetric::BusyNs)) out.unsignedInteger("busy_ns", m.busyNs);
  if (durationNs <= 0) return;  // no time to divide by
  const double seconds = static_cast<double>(durationNs) / 1e9;
  if (flops && request.wants(KernelMetric::FlopsPerSecond)) {
    out.decimal("flops_per_s", static_cast<double>(m.flops) / seconds, 0);
  }
  if (bytes && request.wants(KernelMetric::BytesPerSecond)) {
    out.decimal("bytes_per_s", static_cast<double>(m.bytesRead + m.bytesWritten) / seconds, 0);
  }
}

std::unordered_map<uint64_t, const KernelMetrics*> kernelMetricsByCorrelation(
    const ChunkedVector<KernelMetrics>& metrics) {
  std::unordered_map<uint64_t, const KernelMetrics*> out;
  out.reserve(metrics.size());
  for (const KernelMetrics& m : metrics) out[m.correlationId] = &m;  // a duplicate record: the later wins
  return out;
}

namespace {

using SampleKey = std::tuple<int32_t, uint32_t, uint64_t>;  // device, counter, timestamp

CounterMetric metricOf(uint32_t counter) {
  switch (counter) {
    case OR_COUNTER_MEMORY_ALLOCATED:
      return CounterMetric::MemoryAllocated;
    case OR_COUNTER_MEMORY_RESERVED:
      return CounterMetric::MemoryReserved;
    case OR_COUNTER_QUEUED_TASKS:
      return CounterMetric::QueuedTasks;
    default:
      return CounterMetric::CopyBandwidth;
  }
}

// Samples of one pass (same device, counter and time) become one event; a
// QUEUED_TASKS pass has one series per stream.
std::map<SampleKey, CounterEvent> groupSamples(const ChunkedVector<CounterSample>& samples,
                                               const MetricsRequest& request, int64_t windowStart, int64_t windowEnd) {
  std::map<SampleKey, CounterEvent> grouped;
  for (const CounterSample& s : samples) {
    if (s.counter == OR_COUNTER_INVALID || s.counter >= OR_COUNTER_KIND_COUNT) continue;  // a newer runtime's
    const CounterMetric metric = metricOf(s.counter);
    const auto ts = static_cast<int64_t>(s.timestamp);
    if (!request.wants(metric) || ts < windowStart || ts > windowEnd) continue;
    CounterEvent& event = grouped[{s.device, s.counter, s.timestamp}];
    event.device = s.device;
    event.timestamp = ts;
    event.metric = metric;
    if (metric == CounterMetric::QueuedTasks) {
      event.series.emplace_back("stream " + std::to_string(s.stream), static_cast<double>(s.value));
    } else {
      event.series.emplace_back("bytes", static_cast<double>(s.value));  // copy bytes: a rate below
    }
  }
  return grouped;
}

// Cumulative copy bytes → bytes/s over each sample's interval to the next;
// the last sample (the window's end) reads 0: nothing is measured after it.
void toBandwidth(std::vector<CounterEvent*>& track) {
  for (size_t i = 0; i < track.size(); ++i) {
    double rate = 0;
    if (i + 1 < track.size()) {
      const double bytes = track[i + 1]->series[0].second - track[i]->series[0].second;
      const double seconds = static_cast<double>(track[i + 1]->timestamp - track[i]->timestamp) / 1e9;
      rate = seconds > 0 && bytes > 0 ? bytes / seconds : 0;
    }
    track[i]->series = {{"bytes_per_s", rate}};
  }
}

}  // namespace

std::vector<CounterEvent> buildCounterEvents(const ChunkedVector<CounterSample>& samples, const MetricsRequest& request,
                                             int64_t windowStart, int64_t windowEnd) {
  std::map<SampleKey, CounterEvent> grouped = groupSamples(samples, request, windowStart, windowEnd);
  // Tracks: (device, counter) → its events in time order (the map's order).
  std::map<std::pair<int32_t, uint32_t>, std::vector<CounterEvent*>> tracks;
  for (auto& [key, event] : grouped) {
    std::sort(event.series.begin(), event.series.end());
    tracks[{std::get<0>(key), std::get<1>(key)}].push_back(&event);
  }
  std::vector<CounterEvent> out;
  for (auto& [track, events] : tracks) {
    if (track.second == OR_COUNTER_COPY_BYTES) toBandwidth(events);
    for (size_t i = 0; i < events.size(); ++i) {
      const bool repeats = i > 0 && events[i]->series == events[i - 1]->series;
      if (!repeats || i + 1 == events.size()) out.push_back(*events[i]);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const CounterEvent& a, const CounterEvent& b) { return a.timestamp < b.timestamp; });
  return out;
}

}  // namespace openreg::profiler
