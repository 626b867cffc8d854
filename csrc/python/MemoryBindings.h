// torch_openreg._C bindings for memory debugging (csrc/backend/MemoryHistory.h):
// _record_memory_history, _memory_snapshot (CUDA's snapshot dict),
// _allocator_settings, _attach_out_of_memory_observer.
#pragma once

#include <pybind11/pybind11.h>

namespace openreg::python {

void registerMemoryBindings(pybind11::module_& module);

}  // namespace openreg::python
