// The generic device-kernel mechanism.
//
// Most ATen operators already have a correct CPU implementation and, for
// structured operators, a meta function that validates inputs and sizes the
// outputs. An openreg kernel for such an operator therefore:
//   1. checks that all tensors live on one openreg device (0-dim CPU tensors
//      are accepted as scalars, as CUDA does);
//   2. runs the meta function on the host: errors are raised at the call,
//      and out= tensors are resized through openreg's resize_;
//   3. launches one device kernel whose body rebuilds the arguments as CPU
//      views of device memory and redispatches the operator to the CPU key.
// Covering a structured op is then one registration line (OPENREG_META_KERNEL).
// Non-structured ops compute their output shapes explicitly and reuse
// launchCpuOp for step 3.
#pragma once

#include <string>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "backend/Launch.h"

namespace openreg::backend {

// The one device all tensor arguments live on; raises the usual
// "Expected all tensors to be on the same device" error otherwise.
c10::Device commonDevice(c10::ArrayRef<c10::IValue> args, const c10::OperatorHandle& op);

// Looks up an operator once; the handle stays valid for the process.
c10::OperatorHandle findOp(const char* name, const char* overload);

// Launches, on the current stream of `device`, a kernel that runs `op`'s CPU
// implementation on `args`. With `outputs` empty the op writes its results
// into out= arguments; otherwise its returned tensors are copied into
// `outputs` in order (undefined entries are skipped).
void launchCpuOp(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, c10::DeviceIndex device,
                 const std::string& kernel, const LaunchShape& shape, c10::ArrayRef<at::Tensor> outputs = {});

// How a kernel's name and launch shape derive from its arguments.
enum class KernelStyle {
  kElementwise,  // <base>_<dtype>; grid over the output elements
  kReduction,    // <base>_<dtype>; one block per output element
  kRowwise,      // <base>_<dtype>; one block per row along `dimArg`
  kGemm,         // <base>_<dtype>_<nn|nt|tn|tt> from operands lhs/rhs
};

struct KernelSpec {
  std::string base;
  KernelStyle style = KernelStyle::kElementwise;
  int dtypeArg = -1;  // argument whose dtype names the kernel (-1: first tensor)
  int lhs = -1;       // kGemm operands
  int rhs = -1;
  int dimArg = -1;    // kRowwise: the reduced dimension
  // Run `meta` on meta-device twins of the tensor arguments and resize the
  // device tensors afterwards. For the few ops (range factories, eye) whose
  // Meta kernel is their CPU kernel and computes unless given meta tensors.
  bool metaOnTwins = false;
  // Run the functional overload of the op in the kernel and copy its results
  // into the out= tensors: for CPU kernels that temporarily resize their out=
  // argument (mse_loss.out does), which device memory cannot allow.
  const char* functionalOverload = nullptr;
};

// Registers `schema` (e.g. "add.out") on PrivateUse1 with the generic
// mechanism; `meta` is the operator's structured meta function.
void registerMetaKernel(torch::Library& m, const char* schema, c10::KernelFunction meta, KernelSpec spec);

}  // namespace openreg::backend

#define OPENREG_META_KERNEL(m, schema, meta_fn, ...)                                                   \
  ::openreg::backend::registerMetaKernel(m, schema, c10::KernelFunction::makeFromUnboxedRuntimeFunction(meta_fn), \
                                         ::openreg::backend::KernelSpec{__VA_ARGS__})
