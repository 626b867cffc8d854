// Convolution, forward and backward, 1-d to 3-d, plain and transposed, any
// stride, padding, dilation and groups (depthwise included).
//
// ATen's _convolution picks ConvBackend::Overrideable for PrivateUse1 tensors
// and calls convolution_overrideable / convolution_backward_overrideable, as it
// calls cudnn_convolution on CUDA; autograd stays ATen's (ConvolutionBackward0).
// Every pass is one device kernel on the current stream (a backward launches
// one per gradient asked for), named by pass and layout; its body runs CPU's
// convolution on the device memory, with the algorithm CPU eager would pick.
// Every dtype computes in itself, as CPU's does (integer dtypes included):
// which kernels serve half and bfloat16 depends on the host's instruction
// set, and only the same call keeps the results CPU's on every host.
#include <ATen/EmptyTensor.h>
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"
#include "backend/aten/KernelProbe.h"

namespace openreg::backend {

namespace {

using Dims = c10::SmallVector<int64_t, 3>;

// The parameters of one convolution, in the "convolution" view: `weight` maps
// input channels to output channels (for a transposed convolution its roles are
// swapped: see the kernels below).
struct ConvGeometry {
  Dims stride;
  Dims padding;
  Dims dilation;
  Dims kernel;  // spatial extent of the weight
  int64_t groups = 1;

  size_t dims() const { return kernel.size(); }
};

int64_t product(c10::IntArrayRef values) {
  int64_t result = 1;
  for (int64_t v : values) result *= v;
  return result;
}

Dims spatial(c10::IntArrayRef sizes) { return Dims(sizes.begin() + 2, sizes.end()); }

// A call: its geometry, and for a transposed convolution its output padding.
struct ConvCall {
  ConvGeometry geometry;
  Dims outputPadding;
  bool transposed = false;
};

// ---- Kernel bodies (executor thread; CPU views of device memory) ----------

// The bodies run CPU's own convolution on the device memory: ATen picks the
// algorithm CPU eager would (oneDNN's direct and JIT kernels for float32,
// its native kernels otherwise), so results and speed are CPU's.
at::Tensor convForward(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                       const ConvCall& call) {
  const ConvGeometry& g = call.geometry;
  return at::convolution(x, w, bias, g.stride, g.padding, g.dilation, call.transposed, call.outputPadding, g.groups);
}

// One gradient of the convolution (0: input, 1: weight), from grad_output and
// the other operand. ATen reads only the sizes of the gradient's own operand,
// so an uninitialised stand-in of the compute dtype takes its place.
at::Tensor convGradient(const at::Tensor& gout, const at::Tensor& other, c10::IntArrayRef gradSizes,
                        const ConvCall& call, int which) {
  const ConvGeometry& g = call.geometry;
  const at::Tensor standIn = at::empty(gradSizes, gout.options());
  const at::Tensor& input = which == 0 ? standIn : other;
  const at::Tensor& weight = which == 0 ? other : standIn;
  const std::array<bool, 3> mask{which == 0, which == 1, false};
  auto grads = at::convolution_backward(gout, input, weight, std::nullopt, g.stride, g.padding, g.dilation,
                                        call.transposed, call.outputPadding, g.groups, mask);
  return which == 0 ? std::get<0>(grads) : std::get<1>(grads);
}

// ---- Host side ------------------------------------------------------------

const char* layoutName(size_t dims) {
  switch (dims) {
    case 1:
      return "ncw";
    case 2:
      return "nchw";
    default:
      return "ncdhw";
  }
}

// "conv2d_fwd_nchw_f32", "conv_transpose3d_bwd_data_ncdhw_bf16"
std::string convKernelName(bool transposed, size_t dims, const char* pass, c10::ScalarType dtype) {
  std::string base = transposed ? "conv_transpose" : "conv";
  base += std::to_string(dims) + "d_" + pass + "_" + layoutName(dims);
  return kernelName(base, dtype);
}

Dims toDims(c10::IntArrayRef values, size_t dims, const char* what) {
  TORCH_CHECK(values.size() == dims || values.size() == 1, "convolution: expected ", dims, " values for ", what,
              ", got ", values.size());
  return values.size() == dims ? Dims(values.begin(), values.end()) : Dims(dims, values[0]);
}

ConvCall describeConv(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                      c10::IntArrayRef outputPadding, int64_t groups) {
  TORCH_CHECK(weight.dim() >= 3 && weight.dim() <= 5, "convolution: expected a 3-d to 5-d weight, got ", weight.dim(),
              "-d");
  TORCH_CHECK(input.dim() == weight.dim(), "convolution: expected a ", weight.dim(), "-d input for a ", weight.dim(),
              "-d weight, got ", input.dim(), "-d");
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "convolution: input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
  TORCH_CHECK(groups > 0, "convolution: non-positive groups is not supported");
  const size_t dims = static_cast<size_t>(weight.dim() - 2);
  ConvCall call;
  call.transposed = transposed;
  call.geometry.stride = toDims(stride, dims, "stride");
  call.geometry.padding = toDims(padding, dims, "padding");
  call.geometry.dilation = toDims(dilation, dims, "dilation");
  call.geometry.kernel = spatial(weight.sizes());
  call.geometry.groups = groups;
  call.outputPadding = transposed ? toDims(outputPadding, dims, "output_padding") : Dims(dims, 0);
  const int64_t inChannels = transposed ? weight.size(0) : weight.size(1) * groups;
  TORCH_CHECK(input.size(1) == inChannels, "convolution: expected input with ", inChannels, " channels, got ",
              input.size(1));
  TORCH_CHECK(weight.size(0) % groups == 0, "convolution: weight's first dimension (", weight.size(0),
              ") must be divisible by groups (", groups, ")");
  return call;
}

// Output spatial sizes of the call (ATen's _convolution checks shapes first; a
// direct call of the overrideable op gets this check).
Dims outputSizes(const ConvCall& call, c10::IntArrayRef inSizes) {
  const ConvGeometry& g = call.geometry;
  Dims out;
  for (size_t i = 0; i < g.dims(); ++i) {
    const int64_t span = g.dilation[i] * (g.kernel[i] - 1) + 1;
    out.push_back(call.transposed ? (inSizes[i] - 1) * g.stride[i] - 2 * g.padding[i] + span + call.outputPadding[i]
                                  : (inSizes[i] + 2 * g.padding[i] - span) / g.stride[i] + 1);
    TORCH_CHECK(out.back() > 0, "convolution: output size ", out.back(), " is too small");
  }
  return out;
}

// The layout of the results, as CPU's (oneDNN) convolutions choose it: 2-d
// convolutions with a channels-last input or weight give channels-last
// output and gradients; everything else is contiguous. The kernels compute
// on contiguous copies whatever the layout, hence NC(D)HW in their names.
c10::MemoryFormat resultFormat(const at::Tensor& input, const at::Tensor& weight) {
  const bool channelsLast = input.suggest_memory_format() == c10::MemoryFormat::ChannelsLast ||
                            weight.suggest_memory_format() == c10::MemoryFormat::ChannelsLast;
  return input.dim() == 4 && channelsLast ? c10::MemoryFormat::ChannelsLast : c10::MemoryFormat::Contiguous;
}

at::Tensor emptyDeviceIn(c10::IntArrayRef sizes, c10::ScalarType dtype, c10::MemoryFormat format) {
  if (format != c10::MemoryFormat::ChannelsLast) return emptyDevice(sizes, dtype);
  const std::vector<int64_t> strides = c10::get_channels_last_strides_2d(sizes);
  return emptyDeviceLike(
      at::detail::empty_strided_meta(sizes, strides, dtype, std::nullopt, std::nullopt, std::nullopt));
}

// What CPU's convolution refuses for this dtype and kind (integer dtypes for
// some of its algorithms: slow_conv_transpose2d lacks Byte) raises at the
// call: a dry run of one zero sample of the call, once per kind and dtype.
void probeConvolution(const at::Tensor& input, const at::Tensor& weight, const ConvCall& call) {
  if (input.numel() == 0 || weight.numel() == 0) return;
  c10::SmallVector<int64_t, 5> sampleSizes(input.sizes().begin(), input.sizes().end());
  sampleSizes[0] = 1;
  const std::string kind = convKernelName(call.transposed, call.geometry.dims(), "fwd", input.scalar_type());
  probeOnOneElement(
      kind.c_str(), input.scalar_type(), [&call, sampleSizes, weightSizes = weight.sizes().vec()](at::Tensor& one) {
        const auto zeros = at::TensorOptions().dtype(one.scalar_type());
        (void)convForward(at::zeros(sampleSizes, zeros), at::zeros(weightSizes, zeros), std::nullopt, call);
      });
}

at::Tensor convolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& biasOpt, c10::IntArrayRef stride,
                                   c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                   c10::IntArrayRef outputPadding, int64_t groups) {
  static const c10::OperatorHandle kOp = findOp("aten::convolution_overrideable", "");
  const c10::Device device = commonDevice(refArgs(input, weight, biasOpt), kOp);
  c10::DeviceGuard guard(device);
  const ConvCall call = describeConv(input, weight, stride, padding, dilation, transposed, outputPadding, groups);
  const Dims outSizes = outputSizes(call, spatial(input.sizes()));
  const int64_t outChannels = transposed ? weight.size(1) * groups : weight.size(0);
  c10::SmallVector<int64_t, 5> sizes{input.size(0), outChannels};
  sizes.append(outSizes.begin(), outSizes.end());
  const bool hasBias = biasOpt.has_value() && biasOpt->defined();
  if (hasBias) {
    TORCH_CHECK(biasOpt->dim() == 1 && biasOpt->size(0) == outChannels, "convolution: expected a bias of ", outChannels,
                " elements, got ", biasOpt->sizes());
    TORCH_CHECK(biasOpt->scalar_type() == input.scalar_type(), "convolution: bias type (", biasOpt->scalar_type(),
                ") and input type (", input.scalar_type(), ") should be the same");
  }
  probeConvolution(input, weight, call);
  at::Tensor out = emptyDeviceIn(sizes, input.scalar_type(), resultFormat(input, weight));
  if (out.numel() == 0) return out;
  const int64_t positions = input.size(0) * product(outSizes);
  launchKernel(streamFor(out), convKernelName(transposed, call.geometry.dims(), "fwd", input.scalar_type()),
               gemmShape(outChannels / groups, positions, groups),
               [x = describeTensor(input), w = describeTensor(weight),
                b = hasBias ? std::optional<TensorDesc>(describeTensor(*biasOpt)) : std::nullopt,
                y = describeTensor(out), call]() {
                 const std::optional<at::Tensor> bias =
                     b.has_value() ? std::optional<at::Tensor>(b->view().contiguous()) : std::nullopt;
                 y.view().copy_(convForward(x.view().contiguous(), w.view().contiguous(), bias, call));
               });
  return out;
}

// The backward passes, one kernel per gradient asked for, each running CPU's
// convolution_backward for that gradient alone.
void launchBackwardData(const at::Tensor& gradOutput, const at::Tensor& weight, const at::Tensor& gradInput,
                        const ConvCall& call) {
  const at::Tensor& positionsOf = call.transposed ? gradInput : gradOutput;
  launchKernel(streamFor(gradOutput),
               convKernelName(call.transposed, call.geometry.dims(), "bwd_data", gradOutput.scalar_type()),
               gemmShape(gradInput.size(1) / call.geometry.groups, positionsOf.numel() / positionsOf.size(1),
                         call.geometry.groups),
               [go = describeTensor(gradOutput), w = describeTensor(weight), gi = describeTensor(gradInput), call]() {
                 at::Tensor giv = gi.view();
                 giv.copy_(convGradient(go.view().contiguous(), w.view().contiguous(), giv.sizes(), call, 0));
               });
}

void launchBackwardWeight(const at::Tensor& gradOutput, const at::Tensor& input, const at::Tensor& gradWeight,
                          const ConvCall& call) {
  launchKernel(streamFor(gradOutput),
               convKernelName(call.transposed, call.geometry.dims(), "bwd_filter", gradOutput.scalar_type()),
               gemmShape(gradWeight.size(0) / call.geometry.groups, gradWeight.numel() / gradWeight.size(0),
                         call.geometry.groups),
               [go = describeTensor(gradOutput), x = describeTensor(input), gw = describeTensor(gradWeight), call]() {
                 at::Tensor gwv = gw.view();
                 gwv.copy_(convGradient(go.view().contiguous(), x.view().contiguous(), gwv.sizes(), call, 1));
               });
}

// A sum of our own: CPU's convolution_backward asked for the bias alone still
// computes the weight's gradient under oneDNN (65 ms against 0.2 ms for a
// 3x3 64-channel layer at 8x56x56 in float32). In half precision the sum can
// round an ulp away from CPU's, which sums in another order.
void launchBackwardBias(const at::Tensor& gradOutput, const at::Tensor& gradBias) {
  launchKernel(streamFor(gradOutput), kernelName("conv_bwd_bias_reduce", gradOutput.scalar_type()),
               reductionShape(gradBias.numel(), gradOutput.numel() / gradOutput.size(1)),
               [go = describeTensor(gradOutput), gb = describeTensor(gradBias)]() {
                 const at::Tensor gov = go.view().contiguous();
                 std::vector<int64_t> reduced{0};
                 for (int64_t d = 2; d < gov.dim(); ++d) reduced.push_back(d);
                 gb.view().copy_(gov.sum(reduced));
               });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackwardOverrideable(
    const at::Tensor& gradOutput, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef outputPadding,
    int64_t groups, std::array<bool, 3> outputMask) {
  static const c10::OperatorHandle kOp = findOp("aten::convolution_backward_overrideable", "");
  const c10::Device device = commonDevice(refArgs(gradOutput, input, weight), kOp);
  c10::DeviceGuard guard(device);
  const ConvCall call = describeConv(input, weight, stride, padding, dilation, transposed, outputPadding, groups);
  TORCH_CHECK(gradOutput.scalar_type() == input.scalar_type(), "convolution_backward: grad_output type (",
              gradOutput.scalar_type(), ") and input type (", input.scalar_type(), ") should be the same");
  TORCH_CHECK(gradOutput.dim() == input.dim() && gradOutput.size(0) == input.size(0) &&
                  spatial(gradOutput.sizes()) == outputSizes(call, spatial(input.sizes())),
              "convolution_backward: grad_output has sizes ", gradOutput.sizes(), ", the output's do not match");
  const c10::ScalarType dtype = input.scalar_type();
  at::Tensor gradInput, gradWeight, gradBias;
  const c10::MemoryFormat format = resultFormat(input, weight);
  if (outputMask[0]) gradInput = emptyDeviceIn(input.sizes(), dtype, format);
  if (outputMask[1]) gradWeight = emptyDeviceIn(weight.sizes(), dtype, format);
  if (outputMask[2]) gradBias = emptyDevice({gradOutput.size(1)}, dtype);
  if (gradOutput.numel() == 0 || input.numel() == 0 || weight.numel() == 0) {
    for (at::Tensor* t : {&gradInput, &gradWeight, &gradBias})
      if (t->defined()) t->zero_();
    return {gradInput, gradWeight, gradBias};
  }
  if (gradInput.defined()) launchBackwardData(gradOutput, weight, gradInput, call);
  if (gradWeight.defined()) launchBackwardWeight(gradOutput, input, gradWeight, call);
  if (gradBias.defined()) launchBackwardBias(gradOutput, gradBias);
  return {gradInput, gradWeight, gradBias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolutionOverrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolutionBackwardOverrideable));
  recordOpPath("aten::convolution_overrideable", OpPath::Device, "conv{1,2,3}d_fwd / conv_transpose{1,2,3}d_fwd");
  recordOpPath("aten::convolution_backward_overrideable", OpPath::Device,
               "conv*_bwd_data + conv*_bwd_filter + conv_bwd_bias_reduce");
}

}  // namespace openreg::backend
