// torch_openreg._C: Python bindings for the openreg backend. Thin: every
// function forwards to csrc/backend and documents nothing beyond it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "backend/CachingAllocator.h"
#include "backend/Check.h"
#include "backend/Device.h"
#include "backend/Generator.h"
#include "backend/OpRegistry.h"
#include "backend/TestGates.h"
#include "python/Bindings.h"
#include "python/MemoryBindings.h"

namespace py = pybind11;
using namespace openreg::backend;

namespace {

py::dict deviceProperties(int device) {
  checkDeviceIndex(static_cast<c10::DeviceIndex>(device));
  orDeviceProp prop{};
  OPENREG_CHECK(orGetDeviceProperties(&prop, device));
  py::dict d;
  d["name"] = std::string(prop.name);
  d["total_memory"] = prop.totalGlobalMem;
  d["multi_processor_count"] = prop.multiProcessorCount;
  d["clock_rate_khz"] = prop.clockRate;
  d["executor_threads"] = prop.executorThreads;
  d["stream_priority_least"] = prop.streamPriorityLeast;
  d["stream_priority_greatest"] = prop.streamPriorityGreatest;
  return d;
}

void synchronizeDevice(int device) {
  checkNotForkedChild();
  checkDeviceIndex(static_cast<c10::DeviceIndex>(device));
  orError_t err;
  {
    py::gil_scoped_release noGil;
    err = orDeviceSynchronizeIndex(device);
  }
  OPENREG_CHECK(err);
}

// False if the device was still busy after timeoutMs; raises on a kernel failure.
bool synchronizeDeviceWithTimeout(int device, uint32_t timeoutMs) {
  checkNotForkedChild();
  checkDeviceIndex(static_cast<c10::DeviceIndex>(device));
  orError_t err;
  {
    py::gil_scoped_release noGil;
    err = orDeviceSynchronizeWithTimeout(device, timeoutMs);
  }
  if (err == orErrorTimeout) return false;
  OPENREG_CHECK(err);
  return true;
}

py::object defaultGeneratorObject(int device) {
  return py::reinterpret_steal<py::object>(
      THPGenerator_initDefaultGenerator(defaultGenerator(static_cast<c10::DeviceIndex>(device))));
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "openreg backend bindings (private; use torch.openreg)";

  m.def("_init", &initRuntime, "Start the device runtime; raises if it cannot start.");
  m.def("_is_initialized", &runtimeInitialized);
  m.def("_is_in_bad_fork", &inForkedChild);
  m.def("_device_count", []() { return static_cast<int>(deviceCount()); });
  m.def("_get_device", []() { return static_cast<int>(currentDevice()); });
  m.def("_set_device", [](int device) { setCurrentDevice(static_cast<c10::DeviceIndex>(device)); });
  m.def("_exchange_device",
        [](int device) { return static_cast<int>(exchangeDevice(static_cast<c10::DeviceIndex>(device))); });
  m.def("_synchronize", &synchronizeDevice, py::arg("device"));
  m.def("_synchronize_with_timeout", &synchronizeDeviceWithTimeout, py::arg("device"), py::arg("timeout_ms"));
  m.def("_get_device_properties", &deviceProperties, py::arg("device"));
  m.def("_get_default_generator", &defaultGeneratorObject, py::arg("device"));
  m.def("_runtime_version", []() {
    int version = 0;
    OPENREG_CHECK(orRuntimeGetVersion(&version));
    return version;
  });

  m.def("_cache_snapshot", [](int device) {
    const CacheSnapshot s = cacheSnapshot(static_cast<c10::DeviceIndex>(device));
    py::dict d;
    d["cached_blocks"] = s.cachedBlocks;
    d["cached_bytes"] = s.cachedBytes;
    d["blocks_awaiting_events"] = s.blocksAwaitingEvents;
    return d;
  });

  m.def("_op_paths", []() {
    std::vector<std::tuple<std::string, std::string, std::string>> rows;
    for (const OpPathEntry& e : registeredOpPaths()) rows.emplace_back(e.op, opPathName(e.path), e.kernel);
    return rows;
  });
  m.def("_fallback_counts", []() {
    py::dict d;
    for (const auto& [op, count] : fallbackCounts()) d[py::str(op)] = count;
    return d;
  });
  m.def("_reset_fallback_counts", &resetFallbackCounts);

  m.def("_open_gate", &openGate, py::arg("gate"), "Release kernels queued by torch.ops.openreg._wait_gate.");
  m.def("_gate_waiting", &gateWaiting, py::arg("gate"), "True while a kernel is blocked on the gate.");

  bindCompiledKernels(m);
  // Memory debugging: history, snapshots, settings, out-of-memory observers.
  openreg::python::registerMemoryBindings(m);
}
