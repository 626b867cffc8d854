// Argument checks that ATen's CPU kernels make inside their bodies. openreg
// runs those bodies on the device's thread (launchCpuOp), where a failed check
// would surface only at the next synchronisation, as a failed kernel. These
// make the same checks, with CPU's messages, on the host before the launch,
// as CUDA's host code does, so bad input raises at the call.
// tests/backend/test_opdb_conformance.py holds them to op_db's error inputs.
#pragma once

#include <functional>
#include <initializer_list>

#include <ATen/core/dispatch/Dispatcher.h>

#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

// Throws (c10::Error, c10::IndexError, ...) when `op`'s arguments fail a check
// its CPU kernel would make. Host thread; reads the arguments only. A lookup
// by operator name: cheap for the operators that have no check.
void checkArgumentsOnHost(const c10::OperatorHandle& op, c10::ArrayRef<ArgRef> args);

// CPU's out= checks: `out` may not write one element twice nor overlap an
// input (CPU's kernels write it while they read the inputs). For kernels that
// must check before they resize `out` (a resize gives it new memory).
void checkOutDoesNotOverlap(const at::Tensor& out,
                            std::initializer_list<std::reference_wrapper<const at::Tensor>> inputs);

}  // namespace openreg::backend
