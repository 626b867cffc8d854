// Convolution, forward and backward, 1-d to 3-d, plain and transposed, any
// stride, padding, dilation and groups (depthwise included).
//
// ATen's _convolution picks ConvBackend::Overrideable for PrivateUse1 tensors
// and calls convolution_overrideable / convolution_backward_overrideable, as it
// calls cudnn_convolution on CUDA; autograd stays ATen's (ConvolutionBackward0).
// Every pass is one device kernel on the current stream, and the kernel's name
// says what its body runs: an explicit im2col (a strided gather of the padded
// input into a [C/G * taps, output positions] matrix per group) followed by one
// batched GEMM over the groups, or for the data gradient a GEMM followed by a
// col2im scatter-add, on contiguous NC(D)(H)W data. Half and bfloat16 compute
// in float and round once at the end, as CPU's convolutions accumulate.
#include <ATen/EmptyTensor.h>
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"

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

// ---- Kernel bodies (executor thread; CPU views of device memory) ----------

at::Tensor computeCopy(const at::Tensor& t) {
  const bool reduced = t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
  return reduced ? t.to(at::kFloat).contiguous() : t.contiguous();
}

// [N, C, *in] -> [N, G, C/G * taps, positions]: column j of group g holds the
// (zero-padded) input values under every kernel tap at output position j.
at::Tensor im2col(const at::Tensor& x, const ConvGeometry& g, c10::IntArrayRef outSizes) {
  std::vector<int64_t> pads;
  bool padded = false;
  for (size_t i = g.dims(); i-- > 0;) {
    pads.push_back(g.padding[i]);
    pads.push_back(g.padding[i]);
    padded = padded || g.padding[i] != 0;
  }
  const at::Tensor xp = padded ? at::constant_pad_nd(x, pads, 0).contiguous() : x.contiguous();
  const int64_t n = xp.size(0);
  const int64_t channelsPerGroup = xp.size(1) / g.groups;
  c10::SmallVector<int64_t, 9> sizes{n, g.groups, channelsPerGroup};
  c10::SmallVector<int64_t, 9> strides{xp.stride(0), channelsPerGroup * xp.stride(1), xp.stride(1)};
  for (size_t i = 0; i < g.dims(); ++i) {
    sizes.push_back(g.kernel[i]);
    strides.push_back(g.dilation[i] * xp.stride(2 + i));
  }
  for (size_t i = 0; i < g.dims(); ++i) {
    sizes.push_back(outSizes[i]);
    strides.push_back(g.stride[i] * xp.stride(2 + i));
  }
  return xp.as_strided(sizes, strides).reshape({n, g.groups, channelsPerGroup * product(g.kernel), product(outSizes)});
}

// The adjoint of im2col: [N, G, C/G * taps, positions] -> [N, C, *in], each
// tap's column block added into the input positions it was gathered from.
at::Tensor col2im(const at::Tensor& cols, const ConvGeometry& g, int64_t channels, c10::IntArrayRef inSizes,
                  c10::IntArrayRef outSizes) {
  const int64_t n = cols.size(0);
  c10::SmallVector<int64_t, 5> paddedSizes{n, channels};
  for (size_t i = 0; i < g.dims(); ++i) paddedSizes.push_back(inSizes[i] + 2 * g.padding[i]);
  at::Tensor padded = at::zeros(paddedSizes, cols.options());
  c10::SmallVector<int64_t, 5> tapSizes{n, channels, product(g.kernel)};
  tapSizes.append(outSizes.begin(), outSizes.end());
  const at::Tensor taps = cols.reshape(tapSizes);
  Dims tap(g.dims(), 0);
  for (int64_t t = 0; t < product(g.kernel); ++t) {
    at::Tensor region = padded;
    for (size_t i = 0; i < g.dims(); ++i) {
      const int64_t start = tap[i] * g.dilation[i];
      region = region.slice(2 + i, start, start + g.stride[i] * (outSizes[i] - 1) + 1, g.stride[i]);
    }
    region.add_(taps.select(2, t));
    for (size_t i = g.dims(); i-- > 0;) {  // next tap, last dimension fastest
      if (++tap[i] < g.kernel[i]) break;
      tap[i] = 0;
    }
  }
  at::Tensor result = padded;
  for (size_t i = 0; i < g.dims(); ++i) result = result.narrow(2 + i, g.padding[i], inSizes[i]);
  return result;
}

// out[n, g] = W[g] (Cout/G x C/G*taps) * im2col(x)[n, g]
at::Tensor convForward(const at::Tensor& x, const at::Tensor& w, const ConvGeometry& g, c10::IntArrayRef outSizes) {
  const at::Tensor cols = im2col(x, g, outSizes);
  const int64_t outChannels = w.size(0);
  const at::Tensor out = at::matmul(w.reshape({g.groups, outChannels / g.groups, -1}), cols);
  c10::SmallVector<int64_t, 5> sizes{x.size(0), outChannels};
  sizes.append(outSizes.begin(), outSizes.end());
  return out.reshape(sizes);
}

// The input gradient: col2im(W[g]^T * gout[n, g]).
at::Tensor convBackwardData(const at::Tensor& gout, const at::Tensor& w, const ConvGeometry& g,
                            c10::IntArrayRef inSizes) {
  const int64_t n = gout.size(0);
  const int64_t outChannels = w.size(0);
  const at::Tensor wg = w.reshape({g.groups, outChannels / g.groups, -1}).transpose(1, 2);
  const at::Tensor cols = at::matmul(wg, gout.reshape({n, g.groups, outChannels / g.groups, -1}));
  return col2im(cols, g, w.size(1) * g.groups, inSizes, spatial(gout.sizes()));
}

// The weight gradient: gout[g] (Cout/G x N*positions) * im2col(x)[g]^T.
at::Tensor convBackwardWeight(const at::Tensor& gout, const at::Tensor& x, c10::IntArrayRef weightSizes,
                              const ConvGeometry& g) {
  const Dims outSizes = spatial(gout.sizes());
  const int64_t n = gout.size(0);
  const int64_t outChannels = weightSizes[0];
  const at::Tensor cols = im2col(x, g, outSizes);  // [N, G, C/G*taps, L]
  const at::Tensor colsByGroup = cols.permute({1, 0, 3, 2}).reshape({g.groups, -1, cols.size(2)});
  const at::Tensor goutByGroup = gout.reshape({n, g.groups, outChannels / g.groups, -1})
                                     .permute({1, 2, 0, 3})
                                     .reshape({g.groups, outChannels / g.groups, -1});
  return at::bmm(goutByGroup, colsByGroup).reshape(weightSizes);
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

// "conv2d_fwd_im2col_gemm_nchw_f32", "conv_transpose3d_bwd_data_im2col_gemm_ncdhw_bf16"
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

struct ConvCall {
  ConvGeometry geometry;
  Dims outputPadding;
  bool transposed = false;
};

ConvCall describeConv(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                      c10::IntArrayRef outputPadding, int64_t groups) {
  TORCH_CHECK(weight.dim() >= 3 && weight.dim() <= 5, "convolution: expected a 3-d to 5-d weight, got ", weight.dim(),
              "-d");
  TORCH_CHECK(input.dim() == weight.dim(), "convolution: expected a ", weight.dim(), "-d input for a ", weight.dim(),
              "-d weight, got ", input.dim(), "-d");
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "convolution: input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), "convolution: openreg computes floating dtypes, got ",
              input.scalar_type());
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
  at::Tensor out = emptyDeviceIn(sizes, input.scalar_type(), resultFormat(input, weight));
  if (out.numel() == 0) return out;
  const char* pass = transposed ? "fwd_gemm_col2im" : "fwd_im2col_gemm";
  const int64_t positions = input.size(0) * product(outSizes);
  launchKernel(streamFor(out), convKernelName(transposed, call.geometry.dims(), pass, input.scalar_type()),
               gemmShape(outChannels / groups, positions, groups),
               [x = describeTensor(input), w = describeTensor(weight),
                b = hasBias ? std::optional<TensorDesc>(describeTensor(*biasOpt)) : std::nullopt,
                y = describeTensor(out), call]() {
                 const at::Tensor xv = computeCopy(x.view());
                 const at::Tensor wv = computeCopy(w.view());
                 at::Tensor yv = y.view();
                 at::Tensor result = call.transposed ? convBackwardData(xv, wv, call.geometry, spatial(yv.sizes()))
                                                     : convForward(xv, wv, call.geometry, spatial(yv.sizes()));
                 if (b.has_value()) {
                   c10::SmallVector<int64_t, 5> shape(yv.dim(), 1);
                   shape[1] = -1;
                   result = result + computeCopy(b->view()).view(shape);
                 }
                 yv.copy_(result);
               });
  return out;
}

// The backward passes. Non-transposed: the data gradient is a transposed
// convolution of grad_output, the weight gradient correlates grad_output with
// im2col(input). Transposed: the data gradient is a plain convolution of
// grad_output with the same weight, and the weight gradient correlates the
// input with im2col(grad_output).
void launchBackwardData(const at::Tensor& gradOutput, const at::Tensor& weight, const at::Tensor& gradInput,
                        const ConvCall& call) {
  const char* pass = call.transposed ? "bwd_data_im2col_gemm" : "bwd_data_gemm_col2im";
  const at::Tensor& positionsOf = call.transposed ? gradInput : gradOutput;
  launchKernel(streamFor(gradOutput),
               convKernelName(call.transposed, call.geometry.dims(), pass, gradOutput.scalar_type()),
               gemmShape(gradInput.size(1) / call.geometry.groups, positionsOf.numel() / positionsOf.size(1),
                         call.geometry.groups),
               [go = describeTensor(gradOutput), w = describeTensor(weight), gi = describeTensor(gradInput), call]() {
                 const at::Tensor gov = computeCopy(go.view());
                 const at::Tensor wv = computeCopy(w.view());
                 at::Tensor giv = gi.view();
                 giv.copy_(call.transposed ? convForward(gov, wv, call.geometry, spatial(giv.sizes()))
                                           : convBackwardData(gov, wv, call.geometry, spatial(giv.sizes())));
               });
}

void launchBackwardWeight(const at::Tensor& gradOutput, const at::Tensor& input, const at::Tensor& gradWeight,
                          const ConvCall& call) {
  launchKernel(
      streamFor(gradOutput),
      convKernelName(call.transposed, call.geometry.dims(), "bwd_filter_im2col_gemm", gradOutput.scalar_type()),
      gemmShape(gradWeight.size(0) / call.geometry.groups, gradWeight.numel() / gradWeight.size(0),
                call.geometry.groups),
      [go = describeTensor(gradOutput), x = describeTensor(input), gw = describeTensor(gradWeight), call]() {
        const at::Tensor gov = computeCopy(go.view());
        const at::Tensor xv = computeCopy(x.view());
        at::Tensor gwv = gw.view();
        gwv.copy_(call.transposed ? convBackwardWeight(xv, gov, gwv.sizes(), call.geometry)
                                  : convBackwardWeight(gov, xv, gwv.sizes(), call.geometry));
      });
}

void launchBackwardBias(const at::Tensor& gradOutput, const at::Tensor& gradBias) {
  launchKernel(streamFor(gradOutput), kernelName("conv_bwd_bias_reduce", gradOutput.scalar_type()),
               reductionShape(gradBias.numel(), gradOutput.numel() / gradOutput.size(1)),
               [go = describeTensor(gradOutput), gb = describeTensor(gradBias)]() {
                 const at::Tensor gov = computeCopy(go.view());
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
  recordOpPath("aten::convolution_overrideable", OpPath::Device,
               "conv{1,2,3}d_fwd_im2col_gemm / conv_transpose{1,2,3}d_fwd_gemm_col2im");
  recordOpPath("aten::convolution_backward_overrideable", OpPath::Device,
               "conv*_bwd_data_* + conv*_bwd_filter_im2col_gemm + conv_bwd_bias_reduce");
}

}  // namespace openreg::backend
