// Everything without an openreg kernel and without a composite
// decomposition reaches this fallback: arguments are copied to the host
// (synchronizing), ATen's CPU kernel runs, results are copied back. Correct
// for any functional or in-place op; calls are counted per operator so that
// tests and `python -m torch_openreg.ops` can show what ran here.
#include <ATen/autocast_mode.h>
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

// Autocast on openreg follows CUDA's policy lists.
#define OPENREG_AUTOCAST_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define OPENREG_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define OPENREG_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define OPENREG_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
#define OPENREG_AUTOCAST_DIFFERENT_SIGNATURE(REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE, REDISPATCH_SIGNATURE, \
                                             POLICY)                                                                   \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE,              \
                                                      REDISPATCH_SIGNATURE, POLICY)

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

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
}

}  // namespace autocast_lists

}  // namespace openreg::backend
