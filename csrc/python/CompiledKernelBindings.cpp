// torch_openreg._C.CompiledKernel: what a torch.compile wrapper calls for each
// generated kernel (torch_openreg/_inductor). Converts the Python arguments
// into the entry's slots, then forwards to csrc/backend/CompiledKernel.
#include "python/Bindings.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "backend/CompiledKernel.h"

namespace py = pybind11;
using openreg::backend::CompiledArgKind;
using openreg::backend::CompiledKernel;
using openreg::backend::CompiledLaunchArgs;

namespace {

CompiledArgKind argKind(const std::string& cppType) {
  if (!cppType.empty() && cppType.back() == '*') return CompiledArgKind::Pointer;
  if (cppType.find("float") != std::string::npos || cppType.find("double") != std::string::npos) {
    return CompiledArgKind::Real;
  }
  return CompiledArgKind::Integer;
}

std::string describe(py::handle value) { return py::str(py::type::of(value).attr("__name__")); }

void convertTensor(const CompiledKernel& kernel, c10::DeviceIndex device, const at::Tensor& tensor, size_t slot,
                   CompiledLaunchArgs& args) {
  if (tensor.device().is_cpu()) {
    args.slots.push_back({nullptr});  // pointed at the captured copy by the launch
    CompiledKernel::captureCpuScalar(tensor, slot, args);
    return;
  }
  TORCH_CHECK(tensor.device().is_privateuseone() && tensor.device().index() == device, "openreg: compiled kernel '",
              kernel.name(), "' runs on openreg:", static_cast<int>(device), " but argument ", slot, " is on ",
              tensor.device());
  args.slots.push_back({tensor.data_ptr()});
}

// One Python argument into its slot, checked against the entry's type.
void convertArg(const CompiledKernel& kernel, c10::DeviceIndex device, py::handle value, size_t slot, bool recordInputs,
                CompiledLaunchArgs& args) {
  const CompiledArgKind kind = kernel.kinds()[slot];
  if (kind == CompiledArgKind::Pointer) {
    TORCH_CHECK(THPVariable_Check(value.ptr()), "openreg: compiled kernel '", kernel.name(), "' expects a tensor for ",
                "argument ", slot, ", got ", describe(value));
    convertTensor(kernel, device, THPVariable_Unpack(value.ptr()), slot, args);
  } else if (kind == CompiledArgKind::Integer) {
    TORCH_CHECK(PyLong_Check(value.ptr()), "openreg: compiled kernel '", kernel.name(), "' expects an int for ",
                "argument ", slot, ", got ", describe(value));
    args.slots.push_back({.integer = value.cast<int64_t>()});
  } else {
    TORCH_CHECK(PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr()), "openreg: compiled kernel '", kernel.name(),
                "' expects a float for argument ", slot, ", got ", describe(value));
    args.slots.push_back({.real = value.cast<double>()});
  }
  if (recordInputs) {
    args.recordedInputs.push_back(kind == CompiledArgKind::Pointer   ? c10::IValue(THPVariable_Unpack(value.ptr()))
                                  : kind == CompiledArgKind::Integer ? c10::IValue(value.cast<int64_t>())
                                                                     : c10::IValue(value.cast<double>()));
  }
}

void launch(const CompiledKernel& kernel, int device, const py::args& values) {
  TORCH_CHECK(values.size() == kernel.kinds().size(), "openreg: compiled kernel '", kernel.name(), "' takes ",
              kernel.kinds().size(), " arguments, got ", values.size());
  const auto index = static_cast<c10::DeviceIndex>(device);
  const bool recordInputs = CompiledKernel::mayBeRecorded();
  CompiledLaunchArgs args;
  for (size_t slot = 0; slot < values.size(); ++slot) convertArg(kernel, index, values[slot], slot, recordInputs, args);
  kernel.launch(index, std::move(args));
}

}  // namespace

void bindCompiledKernels(py::module& m) {
  py::class_<CompiledKernel>(m, "CompiledKernel")
      .def(py::init([](std::string name, uintptr_t entry, const std::vector<std::string>& argTypes,
                       std::string annotation, std::string file, std::string hash) {
             std::vector<CompiledArgKind> kinds;
             kinds.reserve(argTypes.size());
             for (const std::string& type : argTypes) kinds.push_back(argKind(type));
             return CompiledKernel(std::move(name), entry, std::move(kinds), std::move(annotation), std::move(file),
                                   std::move(hash));
           }),
           py::arg("name"), py::arg("entry"), py::arg("arg_types"), py::arg("annotation"), py::arg("file"),
           py::arg("hash"))
      .def_property_readonly("name", &CompiledKernel::name)
      // launch(device, *args): queue on the current stream of openreg:device.
      .def("launch",
           [](const CompiledKernel& kernel, int device, const py::args& args) { launch(kernel, device, args); });
}
