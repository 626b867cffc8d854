// The device's counters in a trace: which a user asked for, the per-kernel
// values written as a kernel's args, and the sampled counters turned into
// counter tracks. Torch-free (unit-tested without Kineto).
//
// A request arrives the way torch 2.13 passes _ExperimentalConfig's
// profiler_metrics and profiler_measure_per_kernel to a plugin: as the
// CUPTI_PROFILER_METRICS and CUPTI_PROFILER_ENABLE_PER_KERNEL lines of
// Kineto's config text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "records.h"

namespace openreg::profiler {

class ArgWriter;

// Per-kernel metrics, in the order their args are written.
enum class KernelMetric : uint8_t { Flops, BytesRead, BytesWritten, BusyNs, FlopsPerSecond, BytesPerSecond, Count };
// Sampled counters, each one counter track per device.
enum class CounterMetric : uint8_t { MemoryAllocated, MemoryReserved, QueuedTasks, CopyBandwidth, Count };

// The names users pass in profiler_metrics ("flops", "memory_allocated").
const char* kernelMetricName(KernelMetric metric);
const char* counterMetricName(CounterMetric metric);
// Every known name, comma-separated, for error messages and docs.
std::string knownMetricNames();

struct MetricsRequest {
  uint32_t kernelMetrics = 0;   // bit per KernelMetric
  uint32_t counterMetrics = 0;  // bit per CounterMetric
  // profiler_measure_per_kernel: values on every kernel; else one total per
  // device (CUDA's range mode: one range for the whole trace).
  bool perKernel = false;

  bool wants(KernelMetric m) const { return (kernelMetrics >> static_cast<int>(m)) & 1u; }
  bool wants(CounterMetric m) const { return (counterMetrics >> static_cast<int>(m)) & 1u; }
  bool anyKernelMetric() const { return kernelMetrics != 0; }
  bool anyCounter() const { return counterMetrics != 0; }
  bool empty() const { return !anyKernelMetric() && !anyCounter(); }
};

// Parses profiler_metrics (comma-separated names, spaces allowed) and
// profiler_measure_per_kernel ("true"/"false", as torch writes it; absent is
// false). Sets *error, naming the unknown names and every known one, and
// returns nullopt on a name it does not know. Never throws.
std::optional<MetricsRequest> parseMetricsRequest(std::string_view metrics, std::optional<std::string_view> perKernel,
                                                  std::string* error);

// A kernel's metric values, as its args: the requested ones its launcher
// defined (flops and bytes only when known), rates over `durationNs`.
void writeKernelMetricArgs(const KernelMetrics& metrics, const MetricsRequest& request, int64_t durationNs,
                           ArgWriter& out);

// KERNEL_METRICS records by their kernel's runtime correlation id.
std::unordered_map<uint64_t, const KernelMetrics*> kernelMetricsByCorrelation(
    const ChunkedVector<KernelMetrics>& metrics);

// One device's totals over a trace (range mode).
struct KernelMetricTotals {
  uint64_t kernels = 0;
  uint64_t kernelsWithFlops = 0;
  uint64_t kernelsWithBytes = 0;
  uint64_t flops = 0;
  uint64_t bytesRead = 0;
  uint64_t bytesWritten = 0;
  uint64_t busyNs = 0;
  int64_t kernelNs = 0;  // summed kernel durations, for the rates
};

// One sample of one counter track: Kineto's counter event ("ph": "C").
struct CounterEvent {
  int32_t device = 0;
  int64_t timestamp = 0;  // host epoch ns
  CounterMetric metric = CounterMetric::MemoryAllocated;
  std::vector<std::pair<std::string, double>> series;  // "bytes", "stream 7", "bytes_per_s"
};

// The requested tracks from the samples (timestamps already host epoch ns),
// by device and time, keeping what lies in [windowStart, windowEnd]. A
// sample that repeats its track's previous values is left out (a track holds
// its value until the next sample), except each track's last sample in the
// window. copy_bandwidth is the bytes copied between a sample and the next
// over their time apart, at the first one's time.
std::vector<CounterEvent> buildCounterEvents(const ChunkedVector<CounterSample>& samples, const MetricsRequest& request,
                                             int64_t windowStart, int64_t windowEnd);

}  // namespace openreg::profiler
