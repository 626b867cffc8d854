// Dry runs of kernel bodies on the host, for the refusals that ATen's CPU
// kernels make only inside their bodies.
//
// An openreg kernel body runs ATen's CPU implementation on the device's
// thread. A CPU kernel that lacks a dtype says so in its body (AT_DISPATCH's
// `"normal_kernel_cpu" not implemented for 'Int'`), which on openreg
// surfaced only at the next synchronisation, as a failed kernel. CUDA's host
// code picks the dtype's kernel before it launches, so CUDA raises at the
// call. A probe does the same: before the launch, the body's operator runs
// on the host on small stand-ins of its tensors (the same dtypes, ranks and
// view bits; every dimension cut to at most two elements, so that a size-1
// dimension stays one and the others still need a loop; empty stays
// empty), and a refusal raises at the call, CPU's exception with CPU's
// message. Only a NotImplementedError (AT_DISPATCH's, or a kernel's own) is
// taken for a refusal: another error of a dry run may come from the data or
// from the stand-ins' sizes (a pooling window larger than two), so the body,
// which sees both, reports it. The few refusals that CPU kernels raise as
// other errors are checked on the host (ArgumentChecks.h).
//
// A verdict holds for an operator and an argument signature: the tensors'
// dtypes, ranks, emptiness and view bits, and the arguments that choose a
// code path (bools, strings, dtypes, the kind of a Scalar). Each thread
// probes a signature once; later calls cost a hash lookup.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

// Throws what `op`'s CPU kernel refuses for the signature of `args`,
// followed by `outputs` (the out= tensors, for a body that receives them
// after the arguments). Host thread; reads the arguments' metadata only.
// `check` says who validates the stand-ins first; a signature whose
// stand-ins are rejected (its sizes matter) is not probed: its body reports
// what it refuses, as before.
void probeCpuKernel(const c10::OperatorHandle& op, c10::ArrayRef<ArgRef> args, c10::ArrayRef<at::Tensor> outputs = {},
                    StandInCheck check = StandInCheck::ByMeta);

// For kernels with their own bodies: runs `body` on a one-element CPU tensor
// of `dtype`, once per (`kernel`, dtype) and thread (every time when
// `remember` is false: its verdict depends on more than the dtype), and
// throws what it throws, whatever the type. `body` must compute from its
// captures and the tensor only.
void probeOnOneElement(const char* kernel, c10::ScalarType dtype, const std::function<void(at::Tensor&)>& body,
                       bool remember = true);

}  // namespace openreg::backend
