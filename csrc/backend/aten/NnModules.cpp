// Operators torch.nn's modules reach besides those of NN.cpp, Convolution.cpp
// and Recurrent.cpp: batch normalization, pooling, padding, upsampling, the
// shrink and hard activations, and the backward of several losses, as device
// kernels (ATen's CPU implementation in the body, on views of device memory).
// tests/backend/test_nn_coverage.py lists what still reaches the fallback.
//
// Through the CPU fallback, training-mode batch norm lost its running
// statistics: native_batch_norm updates running_mean/running_var in place
// but its schema does not mark them as written (`Tensor?`, not `Tensor(a!)?`),
// so the fallback never copied them back. Here the body updates the device
// buffers themselves. nn.BatchNorm*, InstanceNorm* with running statistics and
// SyncBatchNorm in eval mode reach these kernels.
#include <algorithm>
#include <array>
#include <functional>

#include <ATen/core/Reduction.h>
#include <ATen/native/Pool.h>
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

// A new device tensor like `like`, keeping its layout when it is dense (as
// empty_like's preserve_format does).
at::Tensor emptyLike(const at::Tensor& like) {
  return like.is_non_overlapping_and_dense() ? emptyDeviceLike(like) : emptyDevice(like.sizes(), like.scalar_type());
}

bool isReduced(c10::ScalarType type) { return type == at::kHalf || type == at::kBFloat16; }

// The statistics' dtype, as ATen's CPU batch norm picks it: float when a
// reduced-precision input meets float parameters or running statistics.
c10::ScalarType statType(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                         const std::optional<at::Tensor>& runningMean) {
  const auto isFloat = [](const std::optional<at::Tensor>& t) {
    return t.has_value() && t->defined() && t->scalar_type() == at::kFloat;
  };
  return isReduced(input.scalar_type()) && (isFloat(weight) || isFloat(runningMean)) ? at::kFloat : input.scalar_type();
}

// The batch-norm forwards' shared launch: (output, save_mean, save_invstd),
// sized and typed as ATen's CPU kernel returns them, plus `extra` results.
std::vector<at::Tensor> launchBatchNorm(const c10::OperatorHandle& op, c10::ArrayRef<ArgRef> args,
                                        const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                        const std::optional<at::Tensor>& runningMean, bool training,
                                        std::vector<at::Tensor> extra = {}) {
  const c10::Device device = commonDevice(args, op);
  c10::DeviceGuard guard(device);
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected an input with at least 2 dimensions, got ", input.dim());
  const int64_t channels = input.size(1);
  const int64_t statSize = training ? channels : 0;
  const c10::ScalarType stats = statType(input, weight, runningMean);
  std::vector<at::Tensor> results{emptyLike(input), emptyDevice({statSize}, stats), emptyDevice({statSize}, stats)};
  results.insert(results.end(), extra.begin(), extra.end());
  launchCpuOp(op, args, device.index(),
              kernelName(training ? "batch_norm_fwd_train" : "batch_norm_fwd_infer", input.scalar_type()),
              rowwiseShape(channels, channels == 0 ? 0 : input.numel() / channels), results);
  return results;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> nativeBatchNorm(const at::Tensor& input,
                                                               const std::optional<at::Tensor>& weight,
                                                               const std::optional<at::Tensor>& bias,
                                                               const std::optional<at::Tensor>& runningMean,
                                                               const std::optional<at::Tensor>& runningVar,
                                                               bool training, double momentum, double eps) {
  static const c10::OperatorHandle kOp = findOp("aten::native_batch_norm", "");
  const auto args = refArgs(input, weight, bias, runningMean, runningVar, training, momentum, eps);
  auto r = launchBatchNorm(kOp, args, input, weight, runningMean, training);
  return {r[0], r[1], r[2]};
}

// The functional forms torch.nn's batch norm reaches (`_batch_norm_with_update`
// in training) and op_db lists: the same kernel. Their meta functions type the
// saved statistics as CUDA does (float32 for half inputs); these follow the
// CPU kernel, as native_batch_norm does.
std::tuple<at::Tensor, at::Tensor, at::Tensor> batchNormLegit(const at::Tensor& input,
                                                              const std::optional<at::Tensor>& weight,
                                                              const std::optional<at::Tensor>& bias,
                                                              at::Tensor& runningMean, at::Tensor& runningVar,
                                                              bool training, double momentum, double eps) {
  static const c10::OperatorHandle kOp = findOp("aten::_native_batch_norm_legit", "");
  const auto args = refArgs(input, weight, bias, runningMean, runningVar, training, momentum, eps);
  auto r = launchBatchNorm(kOp, args, input, weight, runningMean, training);
  return {r[0], r[1], r[2]};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batchNormLegitNoStats(const at::Tensor& input,
                                                                     const std::optional<at::Tensor>& weight,
                                                                     const std::optional<at::Tensor>& bias,
                                                                     bool training, double momentum, double eps) {
  static const c10::OperatorHandle kOp = findOp("aten::_native_batch_norm_legit", "no_stats");
  const auto args = refArgs(input, weight, bias, training, momentum, eps);
  auto r = launchBatchNorm(kOp, args, input, weight, std::nullopt, training);
  return {r[0], r[1], r[2]};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batchNormWithUpdate(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& runningMean, at::Tensor& runningVar, double momentum, double eps) {
  static const c10::OperatorHandle kOp = findOp("aten::_batch_norm_with_update", "");
  const auto args = refArgs(input, weight, bias, runningMean, runningVar, momentum, eps);
  // The fourth result is the reserve space cuDNN keeps; ATen's CPU kernel returns it empty.
  auto r = launchBatchNorm(kOp, args, input, weight, runningMean, /*training=*/true, {emptyDevice({0}, at::kByte)});
  return {r[0], r[1], r[2], r[3]};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> nativeBatchNormBackward(
    const at::Tensor& gradOut, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& runningMean, const std::optional<at::Tensor>& runningVar,
    const std::optional<at::Tensor>& saveMean, const std::optional<at::Tensor>& saveInvstd, bool train, double eps,
    std::array<bool, 3> outputMask) {
  static const c10::OperatorHandle kOp = findOp("aten::native_batch_norm_backward", "");
  const auto args = refArgs(gradOut, input, weight, runningMean, runningVar, saveMean, saveInvstd, train, eps,
                            c10::List<bool>({outputMask[0], outputMask[1], outputMask[2]}));
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  TORCH_CHECK(input.dim() >= 2, "batch_norm_backward: expected an input with at least 2 dimensions, got ", input.dim());
  const int64_t channels = input.size(1);
  const bool hasWeight = weight.has_value() && weight->defined();
  const c10::ScalarType paramType = hasWeight ? weight->scalar_type() : input.scalar_type();
  at::Tensor gradInput = outputMask[0] ? emptyLike(input) : at::Tensor();
  at::Tensor gradWeight = outputMask[1] ? emptyDevice({channels}, paramType) : at::Tensor();
  at::Tensor gradBias = outputMask[2] ? emptyDevice({channels}, paramType) : at::Tensor();
  launchCpuOp(kOp, args, device.index(), kernelName("batch_norm_bwd", input.scalar_type()),
              rowwiseShape(channels, channels == 0 ? 0 : input.numel() / channels), {gradInput, gradWeight, gradBias});
  return {gradInput, gradWeight, gradBias};
}

// For operators without a C++ meta function: `allocate` computes the results'
// sizes from the arguments (most backward ops: grad_input like self), the body
// runs the CPU kernel. Boxed: these are rare ops, where the boxed call's extra
// reference counting (see DeviceKernel.h) does not matter.
using Allocate = std::function<std::vector<at::Tensor>(c10::ArrayRef<c10::IValue>)>;

class AllocatingKernel final : public c10::OperatorKernel {
 public:
  AllocatingKernel(const c10::OperatorHandle& op, std::string stem, Allocate allocate)
      : numArgs_(op.schema().arguments().size()), stem_(std::move(stem)), allocate_(std::move(allocate)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) const {
    c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, numArgs_);
    std::vector<ArgRef> refs;
    refs.reserve(args.size());
    for (const c10::IValue& arg : args) refs.push_back(argRef(arg));
    const c10::Device device = commonDevice(refs, op);
    c10::DeviceGuard guard(device);
    std::vector<at::Tensor> outputs = allocate_(args);
    const auto named = std::find_if(outputs.begin(), outputs.end(), [](const at::Tensor& t) { return t.defined(); });
    TORCH_INTERNAL_ASSERT(named != outputs.end(), "a kernel without outputs");
    launchCpuOp(op, c10::ArrayRef<ArgRef>(refs), device.index(), kernelName(stem_, named->scalar_type()),
                elementwiseShape(named->numel()), outputs);
    torch::jit::drop(*stack, numArgs_);
    for (at::Tensor& out : outputs) stack->emplace_back(std::move(out));
  }

 private:
  size_t numArgs_;
  std::string stem_;
  Allocate allocate_;
};

void registerAllocating(torch::Library& m, const char* schema, const char* stem, Allocate allocate) {
  const c10::OperatorHandle op = detail::findSchema(schema);
  m.impl(schema,
         torch::CppFunction::makeFromBoxedFunctor(std::make_unique<AllocatingKernel>(op, stem, std::move(allocate))));
  recordOpPath(std::string("aten::") + schema, OpPath::Device, stem);
}

// Results shaped like the arguments at `like`.
void registerLikeArguments(torch::Library& m, const char* schema, const char* stem, std::vector<size_t> like) {
  registerAllocating(m, schema, stem, [like = std::move(like)](c10::ArrayRef<c10::IValue> args) {
    std::vector<at::Tensor> outputs;
    for (size_t index : like) outputs.push_back(emptyLike(args[index].toTensor()));
    return outputs;
  });
}

// A loss of (self, ..., reduction at `reductionArg`): elementwise without reduction, a scalar otherwise.
void registerLoss(torch::Library& m, const char* schema, const char* stem, size_t reductionArg) {
  registerAllocating(m, schema, stem, [reductionArg](c10::ArrayRef<c10::IValue> args) {
    const at::Tensor& self = args[0].toTensor();
    const bool unreduced = args[reductionArg].toInt() == at::Reduction::None;
    return std::vector<at::Tensor>{unreduced ? emptyLike(self) : emptyDevice({}, self.scalar_type())};
  });
}

// Adaptive average pooling over the last `dims` dimensions to `output_size`.
void registerAdaptiveAvgPool(torch::Library& m, const char* schema, const char* stem, size_t dims) {
  registerAllocating(m, schema, stem, [dims](c10::ArrayRef<c10::IValue> args) {
    const at::Tensor& self = args[0].toTensor();
    const auto outputSize = args[1].toDimVector();
    TORCH_CHECK(self.dim() > static_cast<int64_t>(dims) && outputSize.size() == dims,
                "adaptive_avg_pool: expected an input of more than ", dims, " dimensions and ", dims, " output sizes");
    c10::DimVector sizes(self.sizes().begin(), self.sizes().end() - dims);
    sizes.append(outputSize.begin(), outputSize.end());
    return std::vector<at::Tensor>{emptyDevice(sizes, self.scalar_type())};
  });
}

// reflection_pad2d(self, [left, right, top, bottom]).
std::vector<at::Tensor> allocateReflectionPad2d(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  const auto padding = args[1].toDimVector();
  TORCH_CHECK(self.dim() >= 3 && padding.size() == 4, "reflection_pad2d: expected a 3-d or 4-d input and 4 pads");
  c10::DimVector sizes(self.sizes().begin(), self.sizes().end());
  sizes[self.dim() - 1] += padding[0] + padding[1];
  sizes[self.dim() - 2] += padding[2] + padding[3];
  return {emptyDevice(sizes, self.scalar_type())};
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean [N, group], rstd [N, group]).
// Checked here, on the host: the CPU kernel indexes by these sizes unchecked.
// Half inputs are computed in float32 by the CPU kernel and rounded once,
// which PyTorch's composite (used before this kernel) did not do.
std::vector<at::Tensor> allocateGroupNorm(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& input = args[0].toTensor();
  const int64_t n = args[3].toInt(), channels = args[4].toInt(), hxw = args[5].toInt(), groups = args[6].toInt();
  TORCH_CHECK(groups > 0 && channels % groups == 0, "group_norm: ", channels, " channels do not divide into ", groups,
              " groups");
  TORCH_CHECK(input.numel() == n * channels * hxw, "group_norm: an input of ", input.numel(),
              " elements is not N * C * HxW = ", n, " * ", channels, " * ", hxw);
  std::optional<at::Tensor> weight;
  for (int i : {1, 2}) {
    if (!args[i].isTensor() || !args[i].toTensor().defined()) continue;
    TORCH_CHECK(args[i].toTensor().numel() == channels, "group_norm: expected ", i == 1 ? "weight" : "bias", " of ",
                channels, " elements, got ", args[i].toTensor().numel());
  }
  if (args[1].isTensor() && args[1].toTensor().defined()) weight = args[1].toTensor();
  const c10::ScalarType stats = statType(input, weight, std::nullopt);
  return {emptyLike(input), emptyDevice({n, groups}, stats), emptyDevice({n, groups}, stats)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask).
std::vector<at::Tensor> allocateGroupNormBackward(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& input = args[1].toTensor();
  const int64_t channels = args[6].toInt();
  const c10::ScalarType paramType = args[4].isTensor() ? args[4].toTensor().scalar_type() : input.scalar_type();
  const auto mask = args[9].toBoolList();
  return {mask[0] ? emptyLike(input) : at::Tensor(), mask[1] ? emptyDevice({channels}, paramType) : at::Tensor(),
          mask[2] ? emptyDevice({channels}, paramType) : at::Tensor()};
}

// nll_loss2d_forward(self, target, weight?, reduction, ignore_index): the
// loss (per pixel without reduction) and the total weight.
std::vector<at::Tensor> allocateNllLoss2d(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& target = args[1].toTensor();
  const bool unreduced = args[3].toInt() == at::Reduction::None;
  return {unreduced ? emptyDevice(target.sizes(), self.scalar_type()) : emptyDevice({}, self.scalar_type()),
          emptyDevice({}, self.scalar_type())};
}

// multi_margin_loss(self [N, C] or [C], target, p, margin, weight?, reduction).
std::vector<at::Tensor> allocateMultiMarginLoss(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  const bool unreduced = args[5].toInt() == at::Reduction::None;
  return {unreduced ? emptyDevice({self.dim() == 2 ? self.size(0) : 1}, self.scalar_type())
                    : emptyDevice({}, self.scalar_type())};
}

// multilabel_margin_loss_forward(self [N, C] or [C], target, reduction): the loss and the target mask.
std::vector<at::Tensor> allocateMultilabelMarginLoss(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& target = args[1].toTensor();
  const bool unreduced = args[2].toInt() == at::Reduction::None && self.dim() == 2;
  return {unreduced ? emptyDevice({self.size(0)}, self.scalar_type()) : emptyDevice({}, self.scalar_type()),
          emptyDevice(target.sizes(), self.scalar_type())};
}

// The value at `i` of a pooling parameter given as one value or one per dimension.
int64_t pick(const c10::DimVector& values, size_t i, int64_t fallback) {
  if (values.empty()) return fallback;
  return values.size() == 1 ? values[0] : values[i];
}

// max_pool3d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode): values and int64 indices.
std::vector<at::Tensor> allocateMaxPool3d(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  const auto kernel = args[1].toDimVector(), stride = args[2].toDimVector(), padding = args[3].toDimVector(),
             dilation = args[4].toDimVector();
  TORCH_CHECK((self.dim() == 4 || self.dim() == 5) && !kernel.empty(),
              "max_pool3d: expected a 4-d or 5-d input and a kernel size");
  c10::DimVector sizes(self.sizes().begin(), self.sizes().end() - 3);
  std::array<int, 3> k{}, d{}, p{}, dil{};
  std::array<int64_t, 3> in{}, out{};
  for (size_t i = 0; i < 3; ++i) {
    k[i] = static_cast<int>(pick(kernel, i, 1));
    d[i] = static_cast<int>(pick(stride, i, k[i]));
    p[i] = static_cast<int>(pick(padding, i, 0));
    dil[i] = static_cast<int>(pick(dilation, i, 1));
    in[i] = self.size(self.dim() - 3 + i);
    out[i] = at::native::pooling_output_shape<int64_t>(in[i], k[i], p[i], d[i], dil[i], args[5].toBool());
    sizes.push_back(out[i]);
  }
  // CPU's checks, made here on the host (its kernel makes them in its body).
  at::native::pool3d_shape_check(self, self.size(self.dim() - 4), k[0], k[1], k[2], d[0], d[1], d[2], p[0], p[1], p[2],
                                 dil[0], dil[1], dil[2], in[0], in[1], in[2], out[0], out[1], out[2],
                                 "max_pool3d_with_indices_out_cpu_template()");
  return {emptyDevice(sizes, self.scalar_type()), emptyDevice(sizes, at::kLong)};
}

// im2col(self [N, C, H, W], kernel_size, dilation, padding, stride) -> [N, C * kh * kw, L].
std::vector<at::Tensor> allocateIm2col(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  const auto kernel = args[1].toDimVector(), dilation = args[2].toDimVector(), padding = args[3].toDimVector(),
             stride = args[4].toDimVector();
  TORCH_CHECK((self.dim() == 3 || self.dim() == 4) && kernel.size() == 2 && dilation.size() == 2 &&
                  padding.size() == 2 && stride.size() == 2,
              "im2col: expected a 3-d or 4-d input and two values per parameter");
  int64_t blocks = 1;
  for (size_t i = 0; i < 2; ++i) {
    const int64_t span = dilation[i] * (kernel[i] - 1) + 1;
    blocks *= (self.size(self.dim() - 2 + i) + 2 * padding[i] - span) / stride[i] + 1;
  }
  c10::DimVector sizes(self.sizes().begin(), self.sizes().end() - 3);
  sizes.push_back(self.size(self.dim() - 3) * kernel[0] * kernel[1]);
  sizes.push_back(blocks);
  return {emptyDevice(sizes, self.scalar_type())};
}

// col2im(self [N, C * kh * kw, L], output_size, kernel_size, ...) -> [N, C, *output_size].
std::vector<at::Tensor> allocateCol2im(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  const auto outputSize = args[1].toDimVector(), kernel = args[2].toDimVector();
  TORCH_CHECK(
      (self.dim() == 2 || self.dim() == 3) && outputSize.size() == 2 && kernel.size() == 2 && kernel[0] * kernel[1] > 0,
      "col2im: expected a 2-d or 3-d input, an output size and a kernel size");
  c10::DimVector sizes(self.sizes().begin(), self.sizes().end() - 2);
  sizes.push_back(self.size(self.dim() - 2) / (kernel[0] * kernel[1]));
  sizes.append(outputSize.begin(), outputSize.end());
  return {emptyDevice(sizes, self.scalar_type())};
}

// max_unpool2d/3d(self [N, C, *in], indices, output_size, ...) -> [N, C, *output_size].
std::vector<at::Tensor> allocateMaxUnpool(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor& self = args[0].toTensor();
  const auto outputSize = args[2].toDimVector();
  TORCH_CHECK(self.dim() > static_cast<int64_t>(outputSize.size()), "max_unpool: expected an input of more than ",
              outputSize.size(), " dimensions");
  c10::DimVector sizes(self.sizes().begin(), self.sizes().end() - outputSize.size());
  sizes.append(outputSize.begin(), outputSize.end());
  return {emptyDevice(sizes, self.scalar_type())};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", TORCH_FN(nativeBatchNorm));
  m.impl("native_batch_norm_backward", TORCH_FN(nativeBatchNormBackward));
  m.impl("_native_batch_norm_legit", TORCH_FN(batchNormLegit));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(batchNormLegitNoStats));
  m.impl("_batch_norm_with_update", TORCH_FN(batchNormWithUpdate));
  for (const char* op :
       {"aten::_native_batch_norm_legit", "aten::_native_batch_norm_legit.no_stats", "aten::_batch_norm_with_update"}) {
    recordOpPath(op, OpPath::Device, "batch_norm_fwd_train / batch_norm_fwd_infer");
  }
  recordOpPath("aten::native_batch_norm", OpPath::Device, "batch_norm_fwd_train / batch_norm_fwd_infer");
  recordOpPath("aten::native_batch_norm_backward", OpPath::Device, "batch_norm_bwd");
  // Pooling: structured families (ATen's meta functions size the outputs).
  OPENREG_STRUCTURED(m, "max_pool2d_with_indices.out", max_pool2d_with_indices, NO_INPLACE, "max_pool2d_fwd");
  OPENREG_STRUCTURED(m, "max_pool2d_with_indices_backward.grad_input", max_pool2d_with_indices_backward, NO_INPLACE,
                     "max_pool2d_bwd");
  OPENREG_STRUCTURED(m, "avg_pool2d.out", avg_pool2d, NO_INPLACE, "avg_pool2d_fwd");
  OPENREG_STRUCTURED(m, "avg_pool2d_backward.grad_input", avg_pool2d_backward, NO_INPLACE, "avg_pool2d_bwd");
  // The other structured pooling, padding, upsampling and shrink families
  // torch.nn's modules reach (tests/backend/test_nn_coverage.py).
  OPENREG_STRUCTURED(m, "hardshrink.out", hardshrink, NO_INPLACE, "elementwise_hardshrink");
  OPENREG_STRUCTURED(m, "hardshrink_backward.grad_input", hardshrink_backward, NO_INPLACE, "hardshrink_bwd");
  OPENREG_STRUCTURED(m, "softshrink.out", softshrink, NO_INPLACE, "elementwise_softshrink");
  OPENREG_STRUCTURED(m, "softshrink_backward.grad_input", softshrink_backward, NO_INPLACE, "softshrink_bwd");
  OPENREG_STRUCTURED(m, "adaptive_max_pool2d.out", adaptive_max_pool2d, NO_INPLACE, "adaptive_max_pool2d_fwd");
  OPENREG_STRUCTURED(m, "adaptive_max_pool2d_backward.grad_input", adaptive_max_pool2d_backward, NO_INPLACE,
                     "adaptive_max_pool2d_bwd");
  OPENREG_STRUCTURED(m, "adaptive_max_pool3d.out", adaptive_max_pool3d, NO_INPLACE, "adaptive_max_pool3d_fwd");
  OPENREG_STRUCTURED(m, "adaptive_max_pool3d_backward.grad_input", adaptive_max_pool3d_backward, NO_INPLACE,
                     "adaptive_max_pool3d_bwd");
  OPENREG_STRUCTURED(m, "avg_pool3d.out", avg_pool3d, NO_INPLACE, "avg_pool3d_fwd");
  OPENREG_STRUCTURED(m, "avg_pool3d_backward.grad_input", avg_pool3d_backward, NO_INPLACE, "avg_pool3d_bwd");
  OPENREG_STRUCTURED(m, "fractional_max_pool2d.output", fractional_max_pool2d, NO_INPLACE, "fractional_max_pool2d_fwd");
  OPENREG_STRUCTURED(m, "fractional_max_pool2d_backward.grad_input", fractional_max_pool2d_backward, NO_INPLACE,
                     "fractional_max_pool2d_bwd");
  OPENREG_STRUCTURED(m, "fractional_max_pool3d.output", fractional_max_pool3d, NO_INPLACE, "fractional_max_pool3d_fwd");
  OPENREG_STRUCTURED(m, "reflection_pad1d.out", reflection_pad1d, NO_INPLACE, "reflection_pad1d_fwd");
  OPENREG_STRUCTURED(m, "reflection_pad1d_backward.grad_input", reflection_pad1d_backward, NO_INPLACE,
                     "reflection_pad1d_bwd");
  OPENREG_STRUCTURED(m, "reflection_pad3d.out", reflection_pad3d, NO_INPLACE, "reflection_pad3d_fwd");
  OPENREG_STRUCTURED(m, "reflection_pad3d_backward.grad_input", reflection_pad3d_backward, NO_INPLACE,
                     "reflection_pad3d_bwd");
  OPENREG_STRUCTURED(m, "replication_pad1d.out", replication_pad1d, NO_INPLACE, "replication_pad1d_fwd");
  OPENREG_STRUCTURED(m, "replication_pad1d_backward.grad_input", replication_pad1d_backward, NO_INPLACE,
                     "replication_pad1d_bwd");
  OPENREG_STRUCTURED(m, "replication_pad2d.out", replication_pad2d, NO_INPLACE, "replication_pad2d_fwd");
  OPENREG_STRUCTURED(m, "replication_pad3d.out", replication_pad3d, NO_INPLACE, "replication_pad3d_fwd");
  OPENREG_STRUCTURED(m, "upsample_linear1d.out", upsample_linear1d, NO_INPLACE, "upsample_linear1d_fwd");
  OPENREG_STRUCTURED(m, "upsample_linear1d_backward.grad_input", upsample_linear1d_backward, NO_INPLACE,
                     "upsample_linear1d_bwd");
  OPENREG_STRUCTURED(m, "upsample_bilinear2d.out", upsample_bilinear2d, NO_INPLACE, "upsample_bilinear2d_fwd");
  OPENREG_STRUCTURED(m, "upsample_bilinear2d_backward.grad_input", upsample_bilinear2d_backward, NO_INPLACE,
                     "upsample_bilinear2d_bwd");
  OPENREG_STRUCTURED(m, "_upsample_bilinear2d_aa.out", _upsample_bilinear2d_aa, NO_INPLACE,
                     "upsample_bilinear2d_aa_fwd");
  OPENREG_STRUCTURED(m, "_upsample_bilinear2d_aa_backward.grad_input", _upsample_bilinear2d_aa_backward, NO_INPLACE,
                     "upsample_bilinear2d_aa_bwd");
  OPENREG_STRUCTURED(m, "upsample_bicubic2d.out", upsample_bicubic2d, NO_INPLACE, "upsample_bicubic2d_fwd");
  OPENREG_STRUCTURED(m, "upsample_bicubic2d_backward.grad_input", upsample_bicubic2d_backward, NO_INPLACE,
                     "upsample_bicubic2d_bwd");
  OPENREG_STRUCTURED(m, "_upsample_bicubic2d_aa.out", _upsample_bicubic2d_aa, NO_INPLACE, "upsample_bicubic2d_aa_fwd");
  OPENREG_STRUCTURED(m, "_upsample_bicubic2d_aa_backward.grad_input", _upsample_bicubic2d_aa_backward, NO_INPLACE,
                     "upsample_bicubic2d_aa_bwd");
  OPENREG_STRUCTURED(m, "_upsample_lanczos2d_aa.out", _upsample_lanczos2d_aa, NO_INPLACE, "upsample_lanczos2d_aa_fwd");
  OPENREG_STRUCTURED(m, "_upsample_lanczos2d_aa_backward.grad_input", _upsample_lanczos2d_aa_backward, NO_INPLACE,
                     "upsample_lanczos2d_aa_bwd");
  OPENREG_STRUCTURED(m, "upsample_trilinear3d.out", upsample_trilinear3d, NO_INPLACE, "upsample_trilinear3d_fwd");
  OPENREG_STRUCTURED(m, "upsample_trilinear3d_backward.grad_input", upsample_trilinear3d_backward, NO_INPLACE,
                     "upsample_trilinear3d_bwd");
  OPENREG_STRUCTURED(m, "upsample_nearest1d.out", upsample_nearest1d, NO_INPLACE, "upsample_nearest1d_fwd");
  OPENREG_STRUCTURED(m, "_upsample_nearest_exact1d.out", _upsample_nearest_exact1d, NO_INPLACE,
                     "upsample_nearest_exact1d_fwd");
  OPENREG_STRUCTURED(m, "upsample_nearest1d_backward.grad_input", upsample_nearest1d_backward, NO_INPLACE,
                     "upsample_nearest1d_bwd");
  OPENREG_STRUCTURED(m, "_upsample_nearest_exact1d_backward.grad_input", _upsample_nearest_exact1d_backward, NO_INPLACE,
                     "upsample_nearest_exact1d_bwd");
  OPENREG_STRUCTURED(m, "upsample_nearest2d.out", upsample_nearest2d, NO_INPLACE, "upsample_nearest2d_fwd");
  OPENREG_STRUCTURED(m, "_upsample_nearest_exact2d.out", _upsample_nearest_exact2d, NO_INPLACE,
                     "upsample_nearest_exact2d_fwd");
  OPENREG_STRUCTURED(m, "upsample_nearest2d_backward.grad_input", upsample_nearest2d_backward, NO_INPLACE,
                     "upsample_nearest2d_bwd");
  OPENREG_STRUCTURED(m, "_upsample_nearest_exact2d_backward.grad_input", _upsample_nearest_exact2d_backward, NO_INPLACE,
                     "upsample_nearest_exact2d_bwd");
  OPENREG_STRUCTURED(m, "upsample_nearest3d.out", upsample_nearest3d, NO_INPLACE, "upsample_nearest3d_fwd");
  OPENREG_STRUCTURED(m, "_upsample_nearest_exact3d.out", _upsample_nearest_exact3d, NO_INPLACE,
                     "upsample_nearest_exact3d_fwd");
  OPENREG_STRUCTURED(m, "upsample_nearest3d_backward.grad_input", upsample_nearest3d_backward, NO_INPLACE,
                     "upsample_nearest3d_bwd");
  OPENREG_STRUCTURED(m, "_upsample_nearest_exact3d_backward.grad_input", _upsample_nearest_exact3d_backward, NO_INPLACE,
                     "upsample_nearest_exact3d_bwd");
  // Operators without a C++ meta function, by the arguments their results are shaped like.
  registerLikeArguments(m, "hardtanh", "elementwise_hardtanh", {0});
  registerLikeArguments(m, "hardtanh_backward", "hardtanh_bwd", {0});
  registerLikeArguments(m, "hardswish", "elementwise_hardswish", {0});
  registerLikeArguments(m, "hardswish_backward", "hardswish_bwd", {0});
  registerLikeArguments(m, "_prelu_kernel", "elementwise_prelu", {0});
  registerLikeArguments(m, "_prelu_kernel_backward", "prelu_bwd", {1, 1});  // grad_weight unreduced
  registerLikeArguments(m, "log_sigmoid_backward", "log_sigmoid_bwd", {1});
  registerLikeArguments(m, "glu_backward", "glu_bwd", {1});
  registerLikeArguments(m, "channel_shuffle", "channel_shuffle", {0});
  registerLikeArguments(m, "_adaptive_avg_pool2d_backward", "adaptive_avg_pool2d_bwd", {1});
  registerLikeArguments(m, "_adaptive_avg_pool3d_backward", "adaptive_avg_pool3d_bwd", {1});
  registerLikeArguments(m, "max_pool3d_with_indices_backward", "max_pool3d_bwd", {1});
  registerLikeArguments(m, "fractional_max_pool3d_backward", "fractional_max_pool3d_bwd", {1});
  registerLikeArguments(m, "reflection_pad2d_backward", "reflection_pad2d_bwd", {1});
  registerLikeArguments(m, "replication_pad2d_backward", "replication_pad2d_bwd", {1});
  registerLikeArguments(m, "replication_pad3d_backward", "replication_pad3d_bwd", {1});
  registerLikeArguments(m, "smooth_l1_loss_backward", "smooth_l1_loss_bwd", {1});
  registerLikeArguments(m, "huber_loss_backward", "huber_loss_bwd", {1});
  registerLikeArguments(m, "binary_cross_entropy_backward", "binary_cross_entropy_bwd", {1});
  registerLikeArguments(m, "multi_margin_loss_backward", "multi_margin_loss_bwd", {1});
  registerLikeArguments(m, "multilabel_margin_loss_backward", "multilabel_margin_loss_bwd", {1});
  registerLikeArguments(m, "log_sigmoid_forward", "elementwise_log_sigmoid", {0, 0});  // output and buffer
  registerLoss(m, "huber_loss", "huber_loss_fwd", 2);
  registerLoss(m, "binary_cross_entropy", "binary_cross_entropy_fwd", 3);
  registerAdaptiveAvgPool(m, "_adaptive_avg_pool2d", "adaptive_avg_pool2d_fwd", 2);
  registerAdaptiveAvgPool(m, "_adaptive_avg_pool3d", "adaptive_avg_pool3d_fwd", 3);
  registerAllocating(m, "reflection_pad2d", "reflection_pad2d_fwd", allocateReflectionPad2d);
  registerAllocating(m, "native_group_norm", "group_norm_fwd", allocateGroupNorm);
  registerAllocating(m, "native_group_norm_backward", "group_norm_bwd", allocateGroupNormBackward);
  registerAllocating(m, "nll_loss2d_forward", "nll_loss2d_fwd", allocateNllLoss2d);
  registerLikeArguments(m, "nll_loss2d_backward", "nll_loss2d_bwd", {1});
  registerAllocating(m, "max_pool3d_with_indices", "max_pool3d_fwd", allocateMaxPool3d);
  registerAllocating(m, "im2col", "im2col", allocateIm2col);
  registerAllocating(m, "col2im", "col2im", allocateCol2im);
  registerAllocating(m, "max_unpool2d", "max_unpool2d", allocateMaxUnpool);
  registerAllocating(m, "max_unpool3d", "max_unpool3d", allocateMaxUnpool);
  registerAllocating(m, "multi_margin_loss", "multi_margin_loss_fwd", allocateMultiMarginLoss);
  registerAllocating(m, "multilabel_margin_loss_forward", "multilabel_margin_loss_fwd", allocateMultilabelMarginLoss);
}

}  // namespace openreg::backend
