// Neural-network operators without a structured kernel: layer norm forward
// and backward, dropout backward. Output shapes are computed here; the CPU
// implementation runs in the device kernel.
#include <ATen/native/layer_norm.h>
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

bool isReducedFloat(c10::ScalarType type) { return type == at::kHalf || type == at::kBFloat16; }

// Statistics are float when a reduced-precision input meets float parameters,
// as in ATen's CPU layer norm.
c10::ScalarType layerNormStatType(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  const bool floatParams =
      (weight.defined() && weight.scalar_type() == at::kFloat) || (bias.defined() && bias.scalar_type() == at::kFloat);
  return isReducedFloat(input.scalar_type()) && floatParams ? at::kFloat : input.scalar_type();
}

c10::DimVector statShape(const at::Tensor& input, c10::IntArrayRef normalizedShape) {
  const int64_t axis = input.dim() - static_cast<int64_t>(normalizedShape.size());
  c10::DimVector shape(input.sizes().begin(), input.sizes().begin() + axis);
  shape.insert(shape.end(), normalizedShape.size(), 1);
  return shape;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> nativeLayerNorm(const at::Tensor& input,
                                                               c10::IntArrayRef normalizedShape,
                                                               const std::optional<at::Tensor>& weightOpt,
                                                               const std::optional<at::Tensor>& biasOpt, double eps) {
  static const c10::OperatorHandle kOp = findOp("aten::native_layer_norm", "");
  const at::Tensor weight = weightOpt.value_or(at::Tensor());
  const at::Tensor bias = biasOpt.value_or(at::Tensor());
  const auto [rows, rowLength] = at::native::_check_layer_norm_inputs(input, normalizedShape, weight, bias);
  const auto args = refArgs(input, normalizedShape, weightOpt, biasOpt, eps);
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  const auto statsType = layerNormStatType(input, weight, bias);
  at::Tensor mean = at::empty(statShape(input, normalizedShape), input.options().dtype(statsType));
  at::Tensor rstd = at::empty(statShape(input, normalizedShape), input.options().dtype(statsType));
  launchCpuOp(kOp, args, device.index(), kernelName("layer_norm_fwd", input.scalar_type()),
              rowwiseShape(rows, rowLength), {out, mean, rstd});
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> nativeLayerNormBackward(
    const at::Tensor& gradOut, const at::Tensor& input, c10::IntArrayRef normalizedShape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weightOpt, const std::optional<at::Tensor>& biasOpt,
    std::array<bool, 3> outputMask) {
  static const c10::OperatorHandle kOp = findOp("aten::native_layer_norm_backward", "");
  const at::Tensor weight = weightOpt.value_or(at::Tensor());
  const at::Tensor bias = biasOpt.value_or(at::Tensor());
  const auto [rows, rowLength] = at::native::_check_layer_norm_inputs(input, normalizedShape, weight, bias);
  const auto args = refArgs(gradOut, input, normalizedShape, mean, rstd, weightOpt, biasOpt,
                            c10::List<bool>({outputMask[0], outputMask[1], outputMask[2]}));
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  at::Tensor gradInput = outputMask[0] ? at::empty_like(input, at::MemoryFormat::Contiguous) : at::Tensor();
  at::Tensor gradWeight = outputMask[1] && weight.defined() ? at::empty_like(weight) : at::Tensor();
  at::Tensor gradBias = outputMask[2] && bias.defined() ? at::empty_like(bias) : at::Tensor();
  launchCpuOp(kOp, args, device.index(), kernelName("layer_norm_bwd", input.scalar_type()),
              rowwiseShape(rows, rowLength), {gradInput, gradWeight, gradBias});
  return {gradInput, gradWeight, gradBias};
}

at::Tensor nativeDropoutBackward(const at::Tensor& gradOutput, const at::Tensor& mask, double scale) {
  static const c10::OperatorHandle kOp = findOp("aten::native_dropout_backward", "");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  const auto args = refArgs(gradOutput, mask, scale);
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  at::Tensor out = at::empty_like(gradOutput, at::MemoryFormat::Contiguous);
  launchCpuOp(kOp, args, device.index(), kernelName("dropout_bwd", gradOutput.scalar_type()),
              elementwiseShape(out.numel()), {out});
  return out;
}

at::Tensor mseLossBackward(const at::Tensor& gradOutput, const at::Tensor& self, const at::Tensor& target,
                           int64_t reduction) {
  static const c10::OperatorHandle kOp = findOp("aten::mse_loss_backward", "");
  const auto args = refArgs(gradOutput, self, target, reduction);
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  launchCpuOp(kOp, args, device.index(), kernelName("mse_loss_bwd", self.scalar_type()), elementwiseShape(out.numel()),
              {out});
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", TORCH_FN(nativeLayerNorm));
  m.impl("native_layer_norm_backward", TORCH_FN(nativeLayerNormBackward));
  m.impl("native_dropout_backward", TORCH_FN(nativeDropoutBackward));
  m.impl("mse_loss_backward", TORCH_FN(mseLossBackward));
  recordOpPath("aten::mse_loss_backward", OpPath::Device, "mse_loss_bwd");
  recordOpPath("aten::native_layer_norm", OpPath::Device, "layer_norm_fwd");
  recordOpPath("aten::native_layer_norm_backward", OpPath::Device, "layer_norm_bwd");
  recordOpPath("aten::native_dropout_backward", OpPath::Device, "dropout_bwd");
}

}  // namespace openreg::backend
