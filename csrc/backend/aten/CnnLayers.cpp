// The layers of a CNN's training step besides the convolutions: batch
// normalization and 2-d max/average pooling, forward and backward, as device
// kernels (ATen's CPU implementation in the body, on views of device memory).
//
// Through the CPU fallback, training-mode batch norm lost its running
// statistics: native_batch_norm updates running_mean/running_var in place
// but its schema does not mark them as written (`Tensor?`, not `Tensor(a!)?`),
// so the fallback never copied them back. Here the body updates the device
// buffers themselves. nn.BatchNorm*, InstanceNorm* with running statistics and
// SyncBatchNorm in eval mode reach these kernels.
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

bool isReduced(c10::ScalarType type) {
  return type == at::kHalf || type == at::kBFloat16;
}

// The statistics' dtype, as ATen's CPU batch norm picks it: float when a
// reduced-precision input meets float parameters or running statistics.
c10::ScalarType statType(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                         const std::optional<at::Tensor>& runningMean) {
  const auto isFloat = [](const std::optional<at::Tensor>& t) {
    return t.has_value() && t->defined() && t->scalar_type() == at::kFloat;
  };
  return isReduced(input.scalar_type()) && (isFloat(weight) || isFloat(runningMean)) ? at::kFloat
                                                                                     : input.scalar_type();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> nativeBatchNorm(const at::Tensor& input,
                                                               const std::optional<at::Tensor>& weight,
                                                               const std::optional<at::Tensor>& bias,
                                                               const std::optional<at::Tensor>& running_mean,
                                                               const std::optional<at::Tensor>& running_var,
                                                               bool training, double momentum, double eps) {
  static const c10::OperatorHandle op = findOp("aten::native_batch_norm", "");
  const auto args = refArgs(input, weight, bias, running_mean, running_var, training, momentum, eps);
  const c10::Device device = commonDevice(args, op);
  c10::DeviceGuard guard(device);
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected an input with at least 2 dimensions, got ", input.dim());
  const int64_t channels = input.size(1);
  const int64_t statSize = training ? channels : 0;
  at::Tensor out = emptyDevice(input.sizes(), input.scalar_type());
  const c10::ScalarType stats = statType(input, weight, running_mean);
  at::Tensor saveMean = emptyDevice({statSize}, stats);
  at::Tensor saveInvstd = emptyDevice({statSize}, stats);
  launchCpuOp(op, args, device.index(), kernelName(training ? "batch_norm_fwd_train" : "batch_norm_fwd_infer",
                                                   input.scalar_type()),
              rowwiseShape(channels, channels == 0 ? 0 : input.numel() / channels), {out, saveMean, saveInvstd});
  return {out, saveMean, saveInvstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> nativeBatchNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask) {
  static const c10::OperatorHandle op = findOp("aten::native_batch_norm_backward", "");
  const auto args = refArgs(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps,
                            c10::List<bool>({output_mask[0], output_mask[1], output_mask[2]}));
  const c10::Device device = commonDevice(args, op);
  c10::DeviceGuard guard(device);
  TORCH_CHECK(input.dim() >= 2, "batch_norm_backward: expected an input with at least 2 dimensions, got ",
              input.dim());
  const int64_t channels = input.size(1);
  const bool hasWeight = weight.has_value() && weight->defined();
  const c10::ScalarType paramType = hasWeight ? weight->scalar_type() : input.scalar_type();
  at::Tensor gradInput = output_mask[0] ? emptyDevice(input.sizes(), input.scalar_type()) : at::Tensor();
  at::Tensor gradWeight = output_mask[1] ? emptyDevice({channels}, paramType) : at::Tensor();
  at::Tensor gradBias = output_mask[2] ? emptyDevice({channels}, paramType) : at::Tensor();
  launchCpuOp(op, args, device.index(), kernelName("batch_norm_bwd", input.scalar_type()),
              rowwiseShape(channels, channels == 0 ? 0 : input.numel() / channels),
              {gradInput, gradWeight, gradBias});
  return {gradInput, gradWeight, gradBias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(nativeBatchNorm));
  m.impl("native_batch_norm_backward", TORCH_FN(nativeBatchNormBackward));
  recordOpPath("aten::native_batch_norm", OpPath::kDevice, "batch_norm_fwd_train / batch_norm_fwd_infer");
  recordOpPath("aten::native_batch_norm_backward", OpPath::kDevice, "batch_norm_bwd");
  // Pooling: structured families (ATen's meta functions size the outputs).
  OPENREG_STRUCTURED(m, "max_pool2d_with_indices.out", max_pool2d_with_indices, NO_INPLACE, "max_pool2d_fwd");
  OPENREG_STRUCTURED(m, "max_pool2d_with_indices_backward.grad_input", max_pool2d_with_indices_backward, NO_INPLACE,
                     "max_pool2d_bwd");
  OPENREG_STRUCTURED(m, "avg_pool2d.out", avg_pool2d, NO_INPLACE, "avg_pool2d_fwd");
  OPENREG_STRUCTURED(m, "avg_pool2d_backward.grad_input", avg_pool2d_backward, NO_INPLACE, "avg_pool2d_bwd");
}

}  // namespace openreg::backend
