// In-place _foreach_* operators and the fused optimizer steps: one device kernel per
// call for the whole tensor list, like CUDA's multi_tensor_apply, running
// ATen's per-tensor CPU loop. Functional _foreach_* overloads decompose into
// per-tensor device kernels through their composite kernels.
#include <algorithm>
#include <cctype>

#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

// "_foreach_mul_" + "Scalar" -> "foreach_mul_scalar"
std::string foreachKernelBase(const c10::OperatorName& name) {
  std::string base = name.name.substr(name.name.find("::") + 2);
  if (!base.empty() && base.front() == '_') base.erase(0, 1);
  if (!base.empty() && base.back() == '_') base.pop_back();
  if (!name.overload_name.empty()) {
    std::string overload = name.overload_name;
    std::transform(overload.begin(), overload.end(), overload.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    base += "_" + overload;
  }
  return base;
}

// multi_tensor_apply's shape: 64K-element chunks, 512 threads.
LaunchShape multiTensorShape(at::TensorList tensors) {
  int64_t total = 0;
  for (const at::Tensor& t : tensors) total += t.numel();
  LaunchShape shape;
  shape.block = {512, 1, 1};
  shape.grid = {static_cast<uint32_t>(std::max<int64_t>(1, (total + 65535) / 65536)), 1, 1};
  return shape;
}

void foreachInplace(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t numArgs = op.schema().arguments().size();
  c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, numArgs);
  const std::vector<at::Tensor> self = args[0].toTensorList().vec();
  if (self.empty()) {
    torch::jit::drop(*stack, numArgs);
    return;
  }
  // Lists must match the first one, as in ATen's checks; the fused
  // optimizers pass empty lists for state they do not use.
  for (size_t i = 1; i < args.size(); ++i) {
    size_t length = 0;
    if (args[i].isTensorList()) {
      length = args[i].toTensorList().size();
    } else if (args[i].isList()) {
      length = args[i].toListRef().size();
    } else {
      continue;
    }
    TORCH_CHECK(length == self.size() || (length == 0 && op.schema().name().find("_fused_") != std::string::npos),
                op.schema().operator_name(), ": tensor lists must have the same number of ", "elements, got ",
                self.size(), " and ", length);
  }
  const c10::Device device = commonDevice(args, op);
  c10::DeviceGuard guard(device);
  launchCpuOp(op, args, device.index(),
              kernelName(foreachKernelBase(op.schema().operator_name()), self[0].scalar_type()),
              multiTensorShape(self));
  torch::jit::drop(*stack, numArgs);
}

constexpr const char* kInplaceForeachOps[] = {
    "_foreach_abs_", "_foreach_acos_", "_foreach_add_.List", "_foreach_add_.Scalar", "_foreach_add_.ScalarList",
    "_foreach_add_.Tensor", "_foreach_addcdiv_.Scalar", "_foreach_addcdiv_.ScalarList", "_foreach_addcdiv_.Tensor",
    "_foreach_addcmul_.Scalar", "_foreach_addcmul_.ScalarList", "_foreach_addcmul_.Tensor", "_foreach_asin_",
    "_foreach_atan_", "_foreach_ceil_", "_foreach_clamp_max_.List", "_foreach_clamp_max_.Scalar",
    "_foreach_clamp_max_.ScalarList", "_foreach_clamp_min_.List", "_foreach_clamp_min_.Scalar",
    "_foreach_clamp_min_.ScalarList", "_foreach_cos_", "_foreach_cosh_", "_foreach_div_.List", "_foreach_div_.Scalar",
    "_foreach_div_.ScalarList", "_foreach_div_.Tensor", "_foreach_erf_", "_foreach_erfc_", "_foreach_exp_",
    "_foreach_expm1_", "_foreach_floor_", "_foreach_frac_", "_foreach_lerp_.List", "_foreach_lerp_.Scalar",
    "_foreach_lerp_.ScalarList", "_foreach_lgamma_", "_foreach_log10_", "_foreach_log1p_", "_foreach_log2_",
    "_foreach_log_", "_foreach_maximum_.List", "_foreach_maximum_.Scalar", "_foreach_maximum_.ScalarList",
    "_foreach_minimum_.List", "_foreach_minimum_.Scalar", "_foreach_minimum_.ScalarList", "_foreach_mul_.List",
    "_foreach_mul_.Scalar", "_foreach_mul_.ScalarList", "_foreach_mul_.Tensor", "_foreach_neg_", "_foreach_pow_.List",
    "_foreach_pow_.Scalar", "_foreach_pow_.ScalarList", "_foreach_reciprocal_", "_foreach_round_", "_foreach_rsqrt_",
    "_foreach_sigmoid_", "_foreach_sign_", "_foreach_sin_", "_foreach_sinh_", "_foreach_sqrt_", "_foreach_sub_.List",
    "_foreach_sub_.Scalar", "_foreach_sub_.ScalarList", "_foreach_tan_", "_foreach_tanh_", "_foreach_trunc_",
    "_foreach_zero_",
    // Fused optimizer steps (torch.optim's fused=True): one kernel per step.
    "_fused_adam_", "_fused_adam_.tensor_lr", "_fused_adamw_", "_fused_adamw_.tensor_lr", "_fused_sgd_",
    "_fused_sgd_.tensor_lr",
    // GradScaler's unscale step.
    "_amp_foreach_non_finite_check_and_unscale_"};

// The functional overloads the optimizers and clip_grad_norm_ call: one
// kernel for the list instead of one per tensor.
std::vector<at::Tensor> foreachFunctional(const char* name, const char* overload, const char* kernel,
                                          std::vector<c10::IValue> args, std::vector<at::Tensor> outputs,
                                          at::TensorList self) {
  if (self.empty()) return outputs;
  const c10::OperatorHandle op = findOp(name, overload);
  const c10::Device device = commonDevice(args, op);
  c10::DeviceGuard guard(device);
  launchCpuOp(op, args, device.index(), kernelName(kernel, self[0].scalar_type()), multiTensorShape(self), outputs);
  return outputs;
}

std::vector<at::Tensor> foreachSqrt(at::TensorList self) {
  std::vector<at::Tensor> outputs;
  for (const at::Tensor& t : self) {
    const auto type = c10::isIntegralType(t.scalar_type(), /*includeBool=*/true)
                          ? c10::typeMetaToScalarType(c10::get_default_dtype())
                          : t.scalar_type();
    outputs.push_back(at::empty_like(t, t.options().dtype(type), at::MemoryFormat::Contiguous));
  }
  return foreachFunctional("aten::_foreach_sqrt", "", "foreach_sqrt", {self.vec()}, std::move(outputs), self);
}

std::vector<at::Tensor> foreachNorm(at::TensorList self, const c10::Scalar& ord, std::optional<at::ScalarType> dtype) {
  std::vector<at::Tensor> outputs;
  for (const at::Tensor& t : self) {
    outputs.push_back(at::empty({}, t.options().dtype(dtype.value_or(c10::toRealValueType(t.scalar_type())))));
  }
  return foreachFunctional("aten::_foreach_norm", "Scalar", "foreach_norm", {self.vec(), ord, dtype},
                           std::move(outputs), self);
}

// GradScaler's scale update: a single-element kernel.
at::Tensor& ampUpdateScale(at::Tensor& self, at::Tensor& growthTracker, const at::Tensor& foundInf,
                           double scaleGrowthFactor, double scaleBackoffFactor, int64_t growthInterval) {
  static const c10::OperatorHandle kOp = findOp("aten::_amp_update_scale_", "");
  std::vector<c10::IValue> args{self, growthTracker, foundInf, scaleGrowthFactor, scaleBackoffFactor, growthInterval};
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  launchCpuOp(kOp, args, device.index(), kernelName("amp_update_scale", self.scalar_type()), LaunchShape{});
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_update_scale_", TORCH_FN(ampUpdateScale));
  recordOpPath("aten::_amp_update_scale_", OpPath::Device, "amp_update_scale");
  m.impl("_foreach_sqrt", TORCH_FN(foreachSqrt));
  m.impl("_foreach_norm.Scalar", TORCH_FN(foreachNorm));
  recordOpPath("aten::_foreach_sqrt", OpPath::Device, "foreach_sqrt");
  recordOpPath("aten::_foreach_norm.Scalar", OpPath::Device, "foreach_norm");
  for (const char* op : kInplaceForeachOps) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&foreachInplace>());
    const std::string full = std::string("aten::") + op;
    const auto dot = full.find('.');
    const c10::OperatorName name(full.substr(0, dot), dot == std::string::npos ? "" : full.substr(dot + 1));
    recordOpPath(full, OpPath::Device, foreachKernelBase(name));
  }
}

}  // namespace openreg::backend
