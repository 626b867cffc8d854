// The snapshot as CUDA's _cuda_memorySnapshot returns it, so that
// torch.cuda._memory_viz and the memory viewer read it unchanged: plain
// dicts, lists, ints, floats and strings; frames innermost first.
#include "python/MemoryBindings.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

#include "backend/MemoryHistory.h"

namespace torch {
// From torch/csrc/profiler/python/combined_traceback.h (libtorch_python), whose
// header needs nlohmann/json, which the wheel does not ship.
TORCH_PYTHON_API std::vector<pybind11::object> py_symbolize(  // NOLINT(readability-identifier-naming): torch's name
    std::vector<CapturedTraceback*>& tracebacks);
}  // namespace torch

namespace py = pybind11;
using c10::CachingDeviceAllocator::RecordContext;
using c10::CachingDeviceAllocator::TraceEntry;

namespace openreg::python {

namespace {

std::shared_ptr<c10::GatheredContext> gatherPython() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/false);
}

std::shared_ptr<c10::GatheredContext> gatherPythonAndCpp() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/true);
}

void checkOption(const std::string& what, const std::string& value, std::initializer_list<const char*> allowed) {
  for (const char* option : allowed)
    if (value == option) return;
  std::string names;
  for (const char* option : allowed) names += std::string(names.empty() ? "" : ", ") + "'" + option + "'";
  TORCH_CHECK_VALUE(false, "_record_memory_history: ", what, " must be None or one of ", names, ", got '", value, "'");
}

void recordHistory(const std::optional<std::string>& enabled, const std::optional<std::string>& context,
                   const std::string& stacks, size_t maxEntries, bool clearHistory,
                   const std::vector<std::string>& skipActions) {
  if (enabled) checkOption("enabled", *enabled, {"state", "all"});
  if (context) checkOption("context", *context, {"state", "alloc", "all"});
  TORCH_CHECK_VALUE(stacks == "python" || stacks == "all",
                    "_record_memory_history: stacks must be 'python' or 'all', got '", stacks, "'");
  backend::HistoryOptions options;
  options.enabled = enabled.has_value();
  // As CUDA: "state" keeps the ring too, but of one entry (the latest event).
  options.trace = enabled.has_value();
  options.maxEntries = enabled && *enabled == "all" ? maxEntries : 1;
  options.clearHistory = clearHistory;
  for (const std::string& name : skipActions)
    options.skipActions.push_back(c10::CachingDeviceAllocator::parseTraceEntryAction(name));
  if (context) {
    options.when = *context == "all"     ? RecordContext::ALL
                   : *context == "alloc" ? RecordContext::ALLOC
                                         : RecordContext::STATE;
    options.gather = &gatherPython;
    if (stacks == "all") {
      torch::unwind::unwind();  // loads the unwinder's tables now, not inside the first allocation
      options.gather = &gatherPythonAndCpp;
    }
  }
  backend::recordMemoryHistory(options);
}

const char* actionName(TraceEntry::Action action) {
  static constexpr std::array<const char*, TraceEntry::OOM + 1> kNames = {
      "alloc",         "free_requested", "free_completed",
      "segment_alloc", "segment_free",   "segment_map",
      "segment_unmap", "snapshot",       "oom"};
  return kNames.at(static_cast<size_t>(action));
}

// Frames are symbolised together at the end (one py_symbolize call shares
// the work); each dict with a context waits here for its "frames".
class FrameRequests {
 public:
  void add(py::dict& target, const std::shared_ptr<c10::GatheredContext>& context) {
    target["frames"] = py::list();
    if (!context) return;
    targets_.push_back(target);
    tracebacks_.push_back(torch::getCapturedTracebackFromContext(context));
  }
  void fill() {
    std::vector<py::object> frames = torch::py_symbolize(tracebacks_);
    for (size_t i = 0; i < frames.size(); ++i) targets_[i]["frames"] = frames[i];
  }

 private:
  std::vector<py::dict> targets_;
  std::vector<torch::CapturedTraceback*> tracebacks_;
};

const char* blockState(const c10::CachingDeviceAllocator::BlockInfo& block) {
  if (block.allocated) return "active_allocated";
  return block.active ? "active_pending_free" : "inactive";
}

py::dict segmentDict(const c10::CachingDeviceAllocator::SegmentInfo& segment, FrameRequests& frames) {
  py::dict d;
  d["device"] = static_cast<int>(segment.device);
  d["address"] = segment.address;
  d["total_size"] = segment.total_size;
  d["allocated_size"] = segment.allocated_size;
  d["active_size"] = segment.active_size;
  d["requested_size"] = segment.requested_size;
  d["stream"] = reinterpret_cast<uintptr_t>(segment.stream);
  d["segment_type"] = segment.is_large ? "large" : "small";
  d["segment_pool_id"] = py::make_tuple(segment.owner_private_pool_id.first, segment.owner_private_pool_id.second);
  d["is_expandable"] = segment.is_expandable;
  frames.add(d, segment.context_when_allocated);
  py::list blocks;
  size_t address = segment.address;
  for (const auto& block : segment.blocks) {
    py::dict b;
    b["address"] = address;
    b["size"] = block.size;
    b["requested_size"] = block.requested_size;
    b["state"] = blockState(block);
    frames.add(b, block.context_when_allocated);
    blocks.append(b);
    address += block.size;
  }
  d["blocks"] = blocks;
  return d;
}

py::dict traceEntryDict(const TraceEntry& entry, FrameRequests& frames) {
  py::dict d;
  d["action"] = actionName(entry.action_);
  // An out-of-memory entry carries the device's free bytes instead of an address.
  d[entry.action_ == TraceEntry::OOM ? "device_free" : "addr"] = entry.addr_;
  d["size"] = entry.size_;
  d["stream"] = reinterpret_cast<uintptr_t>(entry.stream_);
  d["time_us"] = static_cast<int64_t>(entry.time_.t_ / 1000);
  d["compile_context"] = entry.compile_context_;
  d["user_metadata"] = entry.user_metadata_;
  frames.add(d, entry.context_);
  return d;
}

py::dict settingsDict(const backend::AllocatorSettings& settings) {
  py::dict d;
  d["PYTORCH_ALLOC_CONF"] = settings.conf;
  // CUDA writes the unlimited size as -1 (SIZE_MAX as an int64).
  d["max_split_size"] = settings.maxSplitSize == SIZE_MAX ? int64_t{-1} : static_cast<int64_t>(settings.maxSplitSize);
  d["max_non_split_rounding_size"] = settings.maxNonSplitRounding;
  d["garbage_collection_threshold"] = settings.garbageCollectionThreshold;
  d["expandable_segments"] = settings.expandableSegments;
  // As CUDA: keyed by each interval's first size in MiB ("1", "2", "4", ...).
  py::dict roundup;
  for (size_t i = 0; i < settings.roundupPower2Divisions.size(); ++i)
    roundup[py::str(std::to_string(size_t{1} << i))] = settings.roundupPower2Divisions[i];
  d["roundup_power2_divisions"] = roundup;
  return d;
}

py::dict snapshotDict() {
  backend::MemorySnapshot snapshot;
  {
    py::gil_scoped_release noGil;
    snapshot = backend::memorySnapshot();
  }
  FrameRequests frames;
  py::list segments;
  for (const auto& segment : snapshot.segments) segments.append(segmentDict(segment, frames));
  py::list traces;
  for (const auto& trace : snapshot.deviceTraces) {
    py::list entries;
    for (const auto& entry : trace) entries.append(traceEntryDict(entry, frames));
    traces.append(entries);
  }
  frames.fill();
  py::dict d;
  d["segments"] = segments;
  d["device_traces"] = traces;
  d["allocator_settings"] = settingsDict(snapshot.settings);
  d["external_annotations"] = py::list();
  return d;
}

void attachObserver(py::function observer) {
  // Leaked on purpose: the observer list outlives the interpreter.
  auto* held = new py::function(std::move(observer));
  backend::attachOutOfMemoryObserver([held](int64_t device, size_t requested, size_t total, size_t free) {
    py::gil_scoped_acquire gil;
    try {
      (*held)(device, requested, total, free);
    } catch (py::error_already_set& error) {
      throw std::runtime_error(error.what());  // made here, while the GIL is held
    }
  });
}

}  // namespace

void registerMemoryBindings(py::module_& m) {
  m.def("_record_memory_history", &recordHistory, py::arg("enabled"), py::arg("context"), py::arg("stacks"),
        py::arg("max_entries"), py::arg("clear_history"), py::arg("skip_actions"));
  m.def("_memory_history_enabled", &backend::memoryHistoryEnabled);
  m.def("_memory_snapshot", &snapshotDict, "CUDA's snapshot dict for every openreg device.");
  m.def("_allocator_settings", []() { return settingsDict(backend::allocatorSettings()); });
  m.def("_parse_allocator_settings",
        [](const std::string& conf) { return settingsDict(backend::parseAllocatorSettings(conf)); });
  m.def(
      "_attach_out_of_memory_observer", &attachObserver, py::arg("observer"),
      "observer(device, bytes_requested, device_total, device_free), called before torch.OutOfMemoryError is raised.");
}

}  // namespace openreg::python
