// Everything without an openreg kernel and without a composite
// decomposition reaches this fallback: arguments are copied to the host
// (synchronizing), ATen's CPU kernel runs, results are copied back. Correct
// for any functional or in-place op; calls are counted per operator so that
// tests and `python -m torch_openreg.ops` can show what ran here.
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <c10/util/env.h>
#include <torch/library.h>

#include <mutex>
#include <set>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

bool warnOnFallback() {
  static const bool kEnabled = c10::utils::check_env("OPENREG_WARN_FALLBACK") == true;
  return kEnabled;
}

void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = c10::toString(op.schema().operator_name());
  countFallback(name);
  if (warnOnFallback()) {
    static std::mutex mutex;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mutex);
    if (warned.insert(name).second) {
      TORCH_WARN("openreg: ", name, " has no device kernel; it runs on the CPU through the fallback");
    }
  }
  // A view op here would return a copy instead of an alias: refuse.
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

}  // namespace

void runCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) { cpuFallback(op, stack); }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpuFallback>()); }

// Autocast on openreg follows CUDA's policy, entry for entry: the shared policy
// lists, CUDA's own entries, and its one refused op
// (tests/backend/test_autocast.py compares the tables and runs each op on both).
#define OPENREG_AUTOCAST_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define OPENREG_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define OPENREG_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define OPENREG_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
#define OPENREG_AUTOCAST_DIFFERENT_SIGNATURE(REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE, REDISPATCH_SIGNATURE, \
                                             POLICY)                                                                   \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE,              \
                                                      REDISPATCH_SIGNATURE, POLICY)

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

namespace {

// CUDA refuses binary_cross_entropy under autocast rather than run it in
// either precision. The refusal is CUDA's own kernel, reached directly, so
// the error is the one CUDA users know, word for word.
at::Tensor binaryCrossEntropyUnderAutocast(const at::Tensor& self, const at::Tensor& target,
                                           const std::optional<at::Tensor>& weight, int64_t reduction) {
  static const auto kBinaryCrossEntropy =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("aten::binary_cross_entropy", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, int64_t)>();
  return kBinaryCrossEntropy.redispatch(c10::DispatchKeySet(c10::DispatchKey::AutocastCUDA), self, target, weight,
                                        reduction);
}

}  // namespace

// The policy lists spell ATen types unqualified.
namespace autocast_lists {
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(OPENREG_AUTOCAST_LOWER_PRECISION)
  AT_FORALL_FP32(OPENREG_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(OPENREG_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(OPENREG_AUTOCAST_DIFFERENT_SIGNATURE)
  AT_FORALL_PROMOTE(OPENREG_AUTOCAST_PROMOTE)
  // CUDA's table adds its cuDNN convolutions; openreg has none (a call fails
  // after the cast as before it), but the tables stay equal entry for entry.
  KERNEL_PRIVATEUSEONE(cudnn_convolution, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(cudnn_convolution_transpose, lower_precision_fp)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binaryCrossEntropyUnderAutocast));
}

}  // namespace autocast_lists

}  // namespace openreg::backend
