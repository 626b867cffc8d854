// The parts of torch_openreg._C that live in their own files.
#pragma once

#include <pybind11/pybind11.h>

// CompiledKernel, the launcher of torch.compile's kernels (CompiledKernelBindings.cpp).
void bindCompiledKernels(pybind11::module& m);
