// Neural-network operators without a structured kernel: layer norm forward
// and backward, dropout backward. Output shapes are computed here; the CPU
// implementation runs in the device kernel.
#include <ATen/native/layer_norm.h>
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

bool isReducedFloat(c10::ScalarType type) {
  return type == at::kHalf || type == at::kBFloat16;
}

// Statistics are float when a reduced-precision input meets float parameters,
// as in ATen's CPU layer norm.
c10::ScalarType layerNormStatType(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  const bool floatParams = (weight.defined() && weight.scalar_type() == at::kFloat) ||
                           (bias.defined() && bias.scalar_type() == at::kFloat);
  return isReducedFloat(input.scalar_type()) && floatParams ? at::kFloat : input.scalar_type();
}

c10::DimVector statShape(const at::Tensor& input, c10::IntArrayRef normalizedShape) {
  const int64_t axis = input.dim() - static_cast<int64_t>(normalizedShape.size());
  c10::DimVector shape(input.sizes().begin(), input.sizes().begin() + axis);
  shape.insert(shape.end(), normalizedShape.size(), 1);
  return shape;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> nativeLayerNorm(const at::Tensor& input,
                                                               c10::IntArrayRef normalized_shape,
                                                               const std::optional<at::Tensor>& weight_opt,
                                                               const std::optional<at::Tensor>& bias_opt, double eps) {
  static const c10::OperatorHandle op = findOp("aten::native_layer_norm", "");
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  const auto [rows, rowLength] = at::native::_check_layer_norm_inputs(input, normalized_shape, weight, bias);
  const auto args = refArgs(input, normalized_shape, weight_opt, bias_opt, eps);
  const c10::Device device = commonDevice(args, op);
  c10::DeviceGuard guard(device);
  at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  const auto statsType = layerNormStatType(input, weight, bias);
  at::Tensor mean = at::empty(statShape(input, normalized_shape), input.options().dtype(statsType));
  at::Tensor rstd = at::empty(statShape(input, normalized_shape), input.options().dtype(statsType));
  launchCpuOp(op, args, device.index(), kernelName("layer_norm_fwd", input.scalar_type()),
              rowwiseShape(rows, rowLength), {out, mean, rstd});
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> nativeLayerNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight_opt, const std::optional<at::Tensor>& bias_opt,
    std::array<bool, 3> output_mask) {
  static const c10::OperatorHandle op = findOp("aten::native_layer_norm_backward", "");
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  const auto [rows, rowLength] = at::native::_check_layer_norm_inputs(input, normalized_shape, weight, bias);
  const auto args = refArgs(grad_out, input, normalized_shape, mean, rstd, weight_opt, bias_opt,
                            c10::List<bool>({output_mask[0], output_mask[1], output_mask[2]}));
  const c10::Device device = commonDevice(args, op);
  c10::DeviceGuard guard(device);
  at::Tensor gradInput = output_mask[0] ? at::empty_like(input, at::MemoryFormat::Contiguous) : at::Tensor();
  at::Tensor gradWeight = output_mask[1] && weight.defined() ? at::empty_like(weight) : at::Tensor();
  at::Tensor gradBias = output_mask[2] && bias.defined() ? at::empty_like(bias) : at::Tensor();
  launchCpuOp(op, args, device.index(), kernelName("layer_norm_bwd", input.scalar_type()),
              rowwiseShape(rows, rowLength), {gradInput, gradWeight, gradBias});
  return {gradInput, gradWeight, gradBias};
}

at::Tensor nativeDropoutBackward(const at::Tensor& grad_output, const at::Tensor& mask, double scale) {
  static const c10::OperatorHandle op = findOp("aten::native_dropout_backward", "");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  const auto args = refArgs(grad_output, mask, scale);
  const c10::Device device = commonDevice(args, op);
  c10::DeviceGuard guard(device);
  at::Tensor out = at::empty_like(grad_output, at::MemoryFormat::Contiguous);
  launchCpuOp(op, args, device.index(), kernelName("dropout_bwd", grad_output.scalar_type()),
              elementwiseShape(out.numel()), {out});
  return out;
}

at::Tensor mseLossBackward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                           int64_t reduction) {
  static const c10::OperatorHandle op = findOp("aten::mse_loss_backward", "");
  const auto args = refArgs(grad_output, self, target, reduction);
  const c10::Device device = commonDevice(args, op);
  c10::DeviceGuard guard(device);
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  launchCpuOp(op, args, device.index(), kernelName("mse_loss_bwd", self.scalar_type()), elementwiseShape(out.numel()),
              {out});
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", TORCH_FN(nativeLayerNorm));
  m.impl("native_layer_norm_backward", TORCH_FN(nativeLayerNormBackward));
  m.impl("native_dropout_backward", TORCH_FN(nativeDropoutBackward));
  m.impl("mse_loss_backward", TORCH_FN(mseLossBackward));
  recordOpPath("aten::mse_loss_backward", OpPath::kDevice, "mse_loss_bwd");
  recordOpPath("aten::native_layer_norm", OpPath::kDevice, "layer_norm_fwd");
  recordOpPath("aten::native_layer_norm_backward", OpPath::kDevice, "layer_norm_bwd");
  recordOpPath("aten::native_dropout_backward", OpPath::kDevice, "dropout_bwd");
}

}  // namespace openreg::backend
