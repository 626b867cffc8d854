// The Kineto activities of one trace, built once and kept compact.
//
// Kineto keeps a pointer to every activity the session hands the logger
// (handleActivity) for as long as torch keeps the trace, and takes over the
// session's CpuTraceBuffer to own them. A GenericTraceActivity costs ~190
// bytes before its args (a string, a hash map, a vector), and a trace has
// two per kernel: that was most of a trace's memory. So each activity here
// is small: its times, id and link, plus the index of its "shape" (type,
// name, row, flow ends, args), which a trace repeats for most of its events
// and the store keeps once. 40 bytes, not 48: the store is found through the
// header of the slab the activity lives in, not a pointer of its own. Args
// are formatted only when asked for
// (metadataJson, getMetadataValue), as Kineto's own CUPTI activities do.
//
// The store itself is the one entry of the CpuTraceBuffer (Kineto never
// logs that buffer's entries, only keeps them), so the activities live
// exactly as long as Kineto keeps the buffer.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <GenericTraceActivity.h>
#include <libkineto.h>
#include <output_base.h>

#include "device_metrics.h"
#include "slab_arena.h"
#include "trace_builder.h"

namespace openreg::profiler {

// Kineto 2.13 writes names into the JSON unescaped and turns a name holding
// any non-printable byte into "unknown": '"' becomes '\'', '\\' '/', and
// other such bytes '?'.
std::string kinetoSafe(std::string_view name);

// What an activity is apart from its times, id and link.
struct ActivityShape {
  libkineto::ActivityType type = libkineto::ActivityType::CONCURRENT_KERNEL;
  uint32_t name = 0;     // index into the store's names
  int32_t device = 0;    // pid: device index, or host process
  int32_t resource = 0;  // tid: stream, or host thread
  bool onHost = false;   // the thread id is the resource
  bool hasFlow = false;  // flow id = the activity's id
  bool flowStart = false;
  uint8_t unusedBytes[5] = {};  // no padding (below)
  EventArgs args;               // without correlation and duration: each activity's own

  // Every activity's shape is looked up, so equality is one memcmp: the
  // layout has no padding, and so no bytes that differ between equal shapes.
  bool operator==(const ActivityShape& other) const { return std::memcmp(this, &other, sizeof(*this)) == 0; }
};
static_assert(std::has_unique_object_representations_v<ActivityShape>, "ActivityShape must have no padding");

class ActivityStore;

class OpenregActivity final : public libkineto::ITraceActivity {
 public:
  // Only ever built in an ActivityStore's arena (see store()).
  OpenregActivity(uint32_t shape, int64_t start, int64_t end, int32_t id, const libkineto::ITraceActivity* linked)
      : linked_(linked), start_(start), end_(end), id_(id), shape_(shape) {}

  int64_t deviceId() const override { return shape().device; }
  int64_t resourceId() const override { return shape().resource; }
  int32_t getThreadId() const override { return shape().onHost ? shape().resource : 0; }
  int64_t timestamp() const override { return start_; }
  int64_t duration() const override { return end_ - start_; }
  int64_t correlationId() const override { return id_; }
  int flowType() const override { return shape().hasFlow ? static_cast<int>(libkineto::kLinkAsyncCpuGpu) : 0; }
  int64_t flowId() const override { return shape().hasFlow ? static_cast<uint32_t>(id_) : 0; }
  bool flowStart() const override { return shape().flowStart; }
  libkineto::ActivityType type() const override { return shape().type; }
  const std::string name() const override;
  const libkineto::ITraceActivity* linkedActivity() const override { return linked_; }
  const libkineto::TraceSpan* traceSpan() const override;
  // Loggers get the activity itself, never a copy (a copy would lose the args).
  void log(libkineto::ActivityLogger& logger) const override { logger.handleActivity(*this); }
  const std::string metadataJson() const override;
  const std::string getMetadataValue(const std::string& key) const override;

  EventArgs args() const;

 private:
  // The record's args, then its kernel metrics if it has any.
  void writeAllArgs(ArgWriter& out) const;
  const ActivityStore& store() const;
  const ActivityShape& shape() const;

  const libkineto::ITraceActivity* linked_;
  int64_t start_;
  int64_t end_;
  int32_t id_;
  uint32_t shape_;
};

class ActivityStore final : public libkineto::GenericTraceActivity {
 public:
  // `span` is the CpuTraceBuffer's, which owns the store.
  explicit ActivityStore(const libkineto::TraceSpan& span);
  ~ActivityStore() override;
  ActivityStore(const ActivityStore&) = delete;
  ActivityStore& operator=(const ActivityStore&) = delete;

  // The activity for one event, with Kineto's conventions applied (safe
  // names, user ranges narrowed by Kineto's 1 ns widening, their id the
  // range's). On the building thread only.
  const OpenregActivity& add(const TraceEvent& event, const libkineto::ITraceActivity* linked);
  // What building needed and the activities do not: name and shape caches.
  void doneBuilding();
  // Per-kernel metrics (profiler_measure_per_kernel): which ones a kernel's
  // args show, then each kernel's values. On the building thread only.
  void setMetricsRequest(const MetricsRequest& request) { metricsRequest_ = request; }
  void attachKernelMetrics(const OpenregActivity& kernel, const KernelMetrics& metrics);
  // The kernel's metrics, or nullptr.
  const KernelMetrics* kernelMetricsOf(const OpenregActivity& kernel) const;
  const MetricsRequest& metricsRequest() const { return metricsRequest_; }

  const libkineto::TraceSpan& span() const { return *span_; }
  const std::string& nameAt(uint32_t index) const { return names_[index]; }
  const ActivityShape& shapeAt(uint32_t index) const { return shapes_[index]; }
  size_t shapes() const { return shapes_.size(); }

 private:
  uint32_t internName(std::string_view name, EventArgs::Source source);
  uint32_t internNameSlow(std::string_view name);
  uint32_t internShape(const ActivityShape& shape, const char* nameKey);
  // The store's own copy of a kernel annotation, one per runtime pointer.
  const char* keepAnnotation(const char* runtimeOwned);
  void* allocate(size_t bytes);

  const libkineto::TraceSpan* span_;
  std::deque<std::string> names_;
  std::deque<ActivityShape> shapes_;
  std::deque<CommunicationInfo> communications_;  // what collectives' shapes point at
  std::deque<std::string> annotations_;           // what kernels' shapes point at
  std::unordered_map<const char*, const char*> annotationByPointer_;
  MetricsRequest metricsRequest_;
  // Only kernels with metrics have an entry: most traces ask for none.
  std::unordered_map<const OpenregActivity*, KernelMetrics> kernelMetrics_;
  // Memory for the activities: 64 KiB blocks from a SlabArena, freed with the store.
  SlabArena arena_;
  std::vector<void*> blocks_;
  size_t blockUsed_ = 0;
  // Names are interned by the runtime (one pointer per name); a direct-mapped
  // cache finds a shape seen before in one probe.
  std::unordered_map<const char*, uint32_t> nameByPointer_;
  std::vector<uint32_t> shapeCache_;
  // The name and shape each event source interned last (by EventArgs::Source).
  struct LastName {
    const char* pointer = nullptr;
    size_t size = 0;
    uint32_t index = 0;
  };
  static constexpr size_t kSources = static_cast<size_t>(EventArgs::Source::Count);
  std::array<LastName, kSources> lastName_{};
  std::array<uint32_t, kSources> lastShape_;
};

}  // namespace openreg::profiler
