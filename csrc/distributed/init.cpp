// torch_openreg/lib/_distributed*.so: Python bindings of the orccl backend.
// torch.distributed must be imported first (it registers c10d::Backend).
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/ProcessGroupOpenReg.h"

namespace py = pybind11;
using openreg::distributed::ProcessGroupOpenReg;

PYBIND11_MODULE(_distributed, m) {
  m.doc() = "orccl: the c10d backend of openreg devices";
  py::module_::import("torch._C._distributed_c10d");
  py::class_<ProcessGroupOpenReg, c10d::Backend, c10::intrusive_ptr<ProcessGroupOpenReg>>(m, "ProcessGroupOpenReg")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& host, int rank, int size,
                       std::vector<int64_t> globalRanks, std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupOpenReg>(host, rank, size, std::move(globalRanks), timeout);
           }),
           py::arg("host"), py::arg("rank"), py::arg("size"), py::arg("global_ranks"), py::arg("timeout"))
      .def("_set_default_timeout", &ProcessGroupOpenReg::setTimeout, py::arg("timeout"),
           "Sets the bound of later calls (torch's _set_pg_timeout, as on NCCL's and Gloo's backends).")
      .def_property_readonly(
          "timeout", [](const ProcessGroupOpenReg& self) { return self.timeout(); },
          "The bound of this group's calls (init_process_group's timeout, or what _set_pg_timeout set).")
      .def(
          "communication_stream_id",
          [](ProcessGroupOpenReg& self, int device) { return self.communicationStream(device).id(); },
          py::arg("device"), "The stream number (profiler row) of this group's stream on an openreg device.");
  m.attr("BACKEND_NAME") = ProcessGroupOpenReg::kName;
}
