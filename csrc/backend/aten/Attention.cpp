// Fused scaled-dot-product attention on openreg.
//
// torch's scaled_dot_product_attention asks the device's _fused_sdp_choice
// stub which backend runs a call; for a PrivateUse1 device the fused one is
// SDPBackend::overrideable, whose kernels are
// _scaled_dot_product_fused_attention_overrideable and its backward (autograd
// links them in torch itself). openreg registers the stub, the aten op
// _fused_sdp_choice (which answers the same), and both kernels: each pass is
// ONE device kernel, flash-style (AttentionKernel.cpp), so a call never
// materialises its score matrix. Calls the kernel cannot take (other ranks
// or dtypes, shapes only math broadcasts, bad shapes) go to the math path,
// as CUDA's selection does; math then raises CPU's errors for the bad ones.
// With OVERRIDEABLE disabled and FLASH_ATTENTION enabled, the choice answers
// flash, whose ops are in FlashAttention.cpp.
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <cmath>
#include <numeric>
#include <sstream>
#include <string>

#include "backend/Generator.h"
#include "backend/OpRegistry.h"
#include "backend/aten/AttentionCall.h"
#include "backend/aten/AttentionKernel.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

using attention::attentionShape;
using attention::Bias;
using attention::biasOf;
using attention::biasProblem;
using attention::emptyLike;
using attention::Geometry;
using attention::isSupportedDtype;
using attention::layoutProblem;
using attention::sdpaGeometry;
using attention::Strided4;
using attention::strided4;

// Query (batch, heads, rows, features) as 4 dimensions; a 3-d tensor is one batch.
int64_t dimOf(const at::Tensor& t, int64_t fourDim) { return t.dim() == 4 ? t.size(fourDim) : t.size(fourDim - 1); }
int64_t batchOf(const at::Tensor& t) { return t.dim() == 4 ? t.size(0) : 1; }

std::string describe(c10::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}
std::string describe(const at::Tensor& t) { return describe(t.sizes()); }

// The scores' shape, (batch, heads, query length, key length).
std::array<int64_t, 4> scoreShape(const at::Tensor& q, const at::Tensor& k) {
  return {batchOf(q), dimOf(q, 1), q.size(-2), k.size(-2)};
}

}  // namespace

namespace attention {

bool isSupportedDtype(c10::ScalarType type) {
  return type == at::kFloat || type == at::kDouble || type == at::kHalf || type == at::kBFloat16;
}

std::string layoutProblem(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool groupedHeads) {
  if (q.dim() != k.dim() || q.dim() != v.dim() || (q.dim() != 3 && q.dim() != 4)) {
    return "query, key and value must all be 4-d (batch, heads, sequence, features) or 3-d (heads, sequence, "
           "features); got " +
           describe(q) + ", " + describe(k) + " and " + describe(v);
  }
  if (q.is_nested() || k.is_nested() || v.is_nested() || q.layout() != at::kStrided || k.layout() != at::kStrided ||
      v.layout() != at::kStrided) {
    return "query, key and value must be strided (not nested or sparse) tensors";
  }
  if (!isSupportedDtype(q.scalar_type()) || k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type()) {
    return "query, key and value must share one of float32, float64, float16 or bfloat16";
  }
  if (k.device() != q.device() || v.device() != q.device()) return "query, key and value must be on one device";
  if (batchOf(k) != batchOf(q) || batchOf(v) != batchOf(q)) {
    return "query, key and value must have the same batch size; got " + describe(q) + ", " + describe(k) + " and " +
           describe(v);
  }
  const int64_t heads = dimOf(q, 1), kvHeads = dimOf(k, 1);
  const bool headsMatch = heads == kvHeads || (groupedHeads && kvHeads > 0 && heads % kvHeads == 0);
  if (dimOf(v, 1) != kvHeads || !headsMatch) {
    return "the query's heads must equal the key's and value's" +
           std::string(groupedHeads ? " or be a multiple of them" : " (enable_gqa=True allows a multiple)") + "; got " +
           describe(q) + ", " + describe(k) + " and " + describe(v);
  }
  if (k.size(-2) != v.size(-2) || q.size(-1) != k.size(-1) || q.size(-1) == 0 || v.size(-1) == 0) {
    return "key and value need one sequence length, query and key one non-zero feature size, and value features; "
           "got " +
           describe(q) + ", " + describe(k) + " and " + describe(v);
  }
  return {};
}

std::string biasProblem(const at::Tensor& q, const at::Tensor& k, const at::Tensor& bias) {
  if (bias.is_nested() || bias.layout() != at::kStrided) return "attn_mask must be a strided tensor";
  const auto type = bias.scalar_type();
  if (type != at::kBool && type != at::kFloat && type != q.scalar_type()) {
    return "attn_mask must be bool, float32 or of the query's dtype";
  }
  if (bias.device() != q.device()) return "attn_mask must be on the query's device";
  const auto target = scoreShape(q, k);
  // A 3-d query's scores have no batch dimension to broadcast a mask into.
  const int64_t targetDims = q.dim();
  bool fits = bias.dim() <= targetDims;
  for (int64_t d = 0; fits && d < bias.dim(); ++d) {
    const int64_t size = bias.size(bias.dim() - 1 - d);
    fits = size == 1 || size == target[3 - d];
  }
  if (!fits) {
    return "attn_mask of size " + describe(bias) + " does not broadcast to the attention scores' size " +
           describe(c10::IntArrayRef(target.data() + 4 - targetDims, targetDims));
  }
  return {};
}

namespace {

// Dense strides for `sizes` with the dimension order of `like` (outermost =
// largest stride), as torch.empty_like and the op's meta function lay out
// results.
c10::DimVector stridesLike(const at::Tensor& like, c10::IntArrayRef sizes) {
  c10::DimVector order(static_cast<size_t>(like.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  c10::DimVector strides(sizes.size());
  int64_t next = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = next;
    next *= std::max<int64_t>(sizes[*it], 1);
  }
  return strides;
}

}  // namespace

at::Tensor emptyLike(const at::Tensor& like, c10::IntArrayRef sizes) {
  return emptyDeviceStrided(sizes, stridesLike(like, sizes), like.scalar_type());
}

// q, k, v, outputs and their gradients: (b, h, i, d); a 3-d tensor has no batch stride.
Strided4 strided4(const at::Tensor& t) {
  Strided4 s;
  s.data = t.data_ptr();
  const int64_t lead = 4 - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) s.strides[lead + d] = t.stride(d);
  return s;
}

// The bias broadcast over the scores: missing and size-1 dimensions get stride 0.
Bias biasOf(const at::Tensor& bias) {
  Bias result;
  result.dtype = bias.scalar_type();
  result.tensor.data = bias.data_ptr();
  const int64_t lead = 4 - bias.dim();
  for (int64_t d = 0; d < bias.dim(); ++d) result.tensor.strides[lead + d] = bias.size(d) == 1 ? 0 : bias.stride(d);
  return result;
}

Geometry sdpaGeometry(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::optional<double> scale,
                      bool isCausal) {
  Geometry g;
  g.batch = batchOf(q);
  g.heads = dimOf(q, 1);
  g.kvHeads = dimOf(k, 1);
  g.queryLength = q.size(-2);
  g.keyLength = k.size(-2);
  g.headDim = q.size(-1);
  g.valueDim = v.size(-1);
  g.scale = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(g.headDim));
  g.keysAfter = isCausal ? 0 : -1;  // top-left aligned
  g.dtype = q.scalar_type();
  return g;
}

LaunchShape attentionShape(const Geometry& g, int64_t rowsPerBlock, int64_t rows, int64_t heads) {
  LaunchShape shape;
  shape.grid.x = static_cast<uint32_t>(std::max<int64_t>(1, (rows + rowsPerBlock - 1) / rowsPerBlock));
  shape.grid.y = static_cast<uint32_t>(std::max<int64_t>(1, g.batch * heads));
  shape.block.x = 128;
  return shape;
}

}  // namespace attention

namespace {

std::string fusedProblem(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& bias, double dropoutP, bool groupedHeads) {
  std::string problem = layoutProblem(q, k, v, groupedHeads);
  if (problem.empty() && bias.has_value() && bias->defined()) problem = biasProblem(q, k, *bias);
  if (problem.empty() && !(dropoutP >= 0.0 && dropoutP <= 1.0)) {
    problem = "dropout_p must be between 0 and 1, got " + std::to_string(dropoutP);
  }
  return problem;
}

// Empty sequences and batches are left to math. An explicit mask with
// is_causal is not: both apply, as in CPU's flash kernel and CUDA's
// memory-efficient one (only the math path refuses the pair).
std::string choiceProblem(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const std::optional<at::Tensor>& mask, double dropoutP, bool enableGqa) {
  std::string problem = fusedProblem(q, k, v, mask, dropoutP, enableGqa);
  if (!problem.empty()) return problem;
  if (q.numel() == 0 || k.numel() == 0 || v.numel() == 0) return "empty query, key or value";
  return {};
}

// Why the FLASH_ATTENTION path cannot take a call the fused kernel can:
// torch's SDPA runs it as _scaled_dot_product_flash_attention_for_cpu on any
// device but CUDA (FlashAttention.cpp), an op whose backward gets no dropout
// state and no mask gradient, and whose results are shaped as the query.
std::string flashPathProblem(const at::Tensor& q, const at::Tensor& v, const std::optional<at::Tensor>& mask,
                             double dropoutP) {
  if (q.dim() != 4) return "the flash path takes 4-d (batch, heads, sequence, features) tensors";
  if (dropoutP > 0.0) return "the flash path has no dropout (its backward gets no dropout state)";
  if (v.size(-1) != q.size(-1)) return "the flash path needs the value's features to equal the query's";
  if (mask.has_value() && mask->defined() && mask->requires_grad()) {
    return "the flash path gives attn_mask no gradient";
  }
  return {};
}

}  // namespace

// The device's _fused_sdp_choice: openreg's fused kernel when the call fits
// it, through the overrideable backend when that is enabled, else through
// the flash backend (what code that lists its backends, as
// sdpa_kernel([FLASH_ATTENTION, MATH]), asks for), else math. The priority
// order (which puts math before the overrideable backend) is not consulted:
// sdpa_kernel(SDPBackend.MATH) still forces math.
int64_t fusedSdpChoice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attnMask, double dropoutP, bool /*isCausal*/,
                       std::optional<double> /*scale*/, bool enableGqa) {
  const auto& ctx = at::globalContext();
  const bool overrideable = ctx.userEnabledOverrideableSDP(), flash = ctx.userEnabledFlashSDP();
  const std::string problem = choiceProblem(query, key, value, attnMask, dropoutP, enableGqa);
  if (overrideable && problem.empty()) return static_cast<int64_t>(at::SDPBackend::overrideable);
  const std::string flashProblem = problem.empty() ? flashPathProblem(query, value, attnMask, dropoutP) : problem;
  if (flash && flashProblem.empty()) return static_cast<int64_t>(at::SDPBackend::flash_attention);
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  if (!overrideable && !flash) {
    TORCH_WARN("openreg's fused attention is disabled (torch.nn.attention.sdpa_kernel), and so is math");
  } else if (overrideable) {
    TORCH_WARN("openreg's fused attention cannot run this call: ", problem, "; math is disabled");
  } else {
    TORCH_WARN("openreg's flash attention cannot run this call: ", flashProblem, "; math is disabled");
  }
  return static_cast<int64_t>(at::SDPBackend::error);
}

namespace {

void checkFusedCall(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const std::optional<at::Tensor>& bias, double dropoutP) {
  const std::string problem = fusedProblem(q, k, v, bias, dropoutP, /*groupedHeads=*/true);
  TORCH_CHECK(problem.empty(), op, ": ", problem);
}

at::Tensor cpuScalar(int64_t value) {
  at::Tensor t = at::detail::empty_cpu({}, at::kLong, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  *t.mutable_data_ptr<int64_t>() = value;
  return t;
}

int64_t readScalar(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return 0;
  return t.is_cpu() ? *t.const_data_ptr<int64_t>() : t.item<int64_t>();
}

using ForwardResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
                                 at::Tensor, at::Tensor>;

ForwardResult fusedAttentionForward(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                    const std::optional<at::Tensor>& attnBias, double dropoutP, bool isCausal,
                                    bool returnDebugMask, std::optional<double> scale) {
  static const c10::OperatorHandle kOp = findOp("aten::_scaled_dot_product_fused_attention_overrideable", "");
  const c10::Device device = commonDevice(refArgs(query, key, value, attnBias), kOp);
  c10::DeviceGuard guard(device);
  checkFusedCall("_scaled_dot_product_fused_attention_overrideable", query, key, value, attnBias, dropoutP);
  attention::ForwardArgs args;
  args.geometry = sdpaGeometry(query, key, value, scale, isCausal);
  const Geometry& g = args.geometry;
  c10::DimVector outSizes(query.sizes().begin(), query.sizes().end());
  outSizes.back() = g.valueDim;
  at::Tensor output = emptyLike(query, outSizes);
  at::Tensor logSumExp = emptyDevice({g.batch, g.heads, g.queryLength}, at::kFloat);
  at::Tensor debugMask;
  if (dropoutP > 0.0) {
    args.dropout = {dropoutP, takeKernelSeed(std::nullopt, device.index())};
    if (returnDebugMask) {
      debugMask = emptyDevice({g.batch, g.heads, g.queryLength, g.keyLength}, at::kBool);
      args.keepMask = debugMask.mutable_data_ptr<bool>();
    }
  }
  ForwardResult result{output,
                       logSumExp,
                       at::Tensor(),
                       at::Tensor(),
                       c10::SymInt(g.queryLength),
                       c10::SymInt(g.keyLength),
                       cpuScalar(static_cast<int64_t>(args.dropout.seed)),
                       cpuScalar(0),
                       debugMask};
  if (g.batch * g.heads * g.queryLength == 0) return result;
  args.query = strided4(query);
  args.key = strided4(key);
  args.value = strided4(value);
  args.output = strided4(output);
  if (attnBias.has_value() && attnBias->defined()) args.bias = biasOf(*attnBias);
  args.logSumExp = attention::contiguousRowStats(logSumExp.mutable_data_ptr<float>(), g);
  launchKernel(streamFor(query), kernelName("flash_attention_fwd", g.dtype),
               attentionShape(g, attention::kQueryTile, g.queryLength, g.heads),
               [args]() { attention::attentionForward(args); });
  return result;
}

void checkBackwardCall(const at::Tensor& gradOut, const at::Tensor& query, const at::Tensor& key,
                       const at::Tensor& value, const at::Tensor& attnBias, const at::Tensor& out,
                       const at::Tensor& logSumExp, double dropoutP) {
  static const char* const kName = "_scaled_dot_product_fused_attention_overrideable_backward";
  checkFusedCall(kName, query, key, value, attnBias.defined() ? std::optional<at::Tensor>(attnBias) : std::nullopt,
                 dropoutP);
  c10::DimVector outSizes(query.sizes().begin(), query.sizes().end());
  outSizes.back() = value.size(-1);
  TORCH_CHECK(gradOut.sizes() == c10::IntArrayRef(outSizes) && out.sizes() == c10::IntArrayRef(outSizes), kName,
              ": grad_out and out must have the output's size ", c10::IntArrayRef(outSizes), ", got ", gradOut.sizes(),
              " and ", out.sizes());
  TORCH_CHECK(gradOut.scalar_type() == query.scalar_type() && out.scalar_type() == query.scalar_type(), kName,
              ": grad_out and out must have the query's dtype");
  const std::array<int64_t, 3> lseSizes{batchOf(query), dimOf(query, 1), query.size(-2)};
  TORCH_CHECK(logSumExp.scalar_type() == at::kFloat && logSumExp.sizes() == c10::IntArrayRef(lseSizes) &&
                  logSumExp.is_contiguous(),
              kName, ": logsumexp must be a contiguous float tensor of size ", c10::IntArrayRef(lseSizes));
}

// The bias's gradient buffer and its (batch, heads, rows, keys) view.
void describeGradBias(const at::Tensor& attnBias, at::Tensor& gradBias, attention::BackwardArgs& args) {
  gradBias = emptyLike(attnBias, attnBias.sizes());
  Strided4 out;
  out.data = gradBias.data_ptr();
  args.gradBiasSizes = {1, 1, 1, 1};
  const int64_t lead = 4 - attnBias.dim();
  for (int64_t d = 0; d < attnBias.dim(); ++d) {
    out.strides[lead + d] = gradBias.stride(d);
    args.gradBiasSizes[lead + d] = attnBias.size(d);
  }
  args.gradBias = out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fusedAttentionBackward(
    const at::Tensor& gradOut, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attnBias, std::array<bool, 4> gradInputMask, const at::Tensor& out, const at::Tensor& logSumExp,
    const at::Tensor& /*cumSeqQ*/, const at::Tensor& /*cumSeqK*/, int64_t /*maxQ*/, int64_t /*maxK*/, double dropoutP,
    bool isCausal, const at::Tensor& philoxSeed, const at::Tensor& /*philoxOffset*/, std::optional<double> scale) {
  static const c10::OperatorHandle kOp = findOp("aten::_scaled_dot_product_fused_attention_overrideable_backward", "");
  // Autograd passes an undefined gradient when the output took no part in the loss.
  if (!gradOut.defined()) return {};
  const c10::Device device = commonDevice(refArgs(gradOut, query, key, value, out, logSumExp), kOp);
  c10::DeviceGuard guard(device);
  checkBackwardCall(gradOut, query, key, value, attnBias, out, logSumExp, dropoutP);
  attention::BackwardArgs args;
  args.geometry = sdpaGeometry(query, key, value, scale, isCausal);
  at::Tensor gradQuery = emptyLike(query, query.sizes());
  at::Tensor gradKey = emptyLike(key, key.sizes());
  at::Tensor gradValue = emptyLike(value, value.sizes());
  at::Tensor gradBias;
  if (gradInputMask[3] && attnBias.defined()) {
    TORCH_CHECK(attnBias.is_floating_point(),
                "_scaled_dot_product_fused_attention_overrideable_backward: ", "a boolean attn_bias has no gradient");
    describeGradBias(attnBias, gradBias, args);
  }
  if (dropoutP > 0.0) args.dropout = {dropoutP, static_cast<uint64_t>(readScalar(philoxSeed))};
  args.gradOutput = strided4(gradOut);
  args.query = strided4(query);
  args.key = strided4(key);
  args.value = strided4(value);
  args.output = strided4(out);
  args.logSumExp = attention::contiguousRowStats(const_cast<float*>(logSumExp.const_data_ptr<float>()), args.geometry);
  if (attnBias.defined()) args.bias = biasOf(attnBias);
  args.gradQuery = strided4(gradQuery);
  args.gradKey = strided4(gradKey);
  args.gradValue = strided4(gradValue);
  const Geometry& g = args.geometry;
  if (g.batch * g.kvHeads == 0) return {gradQuery, gradKey, gradValue, gradBias};
  launchKernel(streamFor(query), kernelName("flash_attention_bwd", g.dtype),
               attentionShape(g, attention::kKeyTile, g.keyLength, g.kvHeads),
               [args]() { attention::attentionBackward(args); });
  return {gradQuery, gradKey, gradValue, gradBias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(fusedSdpChoice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(fusedAttentionForward));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(fusedAttentionBackward));
  // A host decision from the arguments' metadata: no launch, no synchronisation.
  recordOpPath("aten::_fused_sdp_choice", OpPath::View);
  recordOpPath("aten::_scaled_dot_product_fused_attention_overrideable", OpPath::Device, "flash_attention_fwd");
  recordOpPath("aten::_scaled_dot_product_fused_attention_overrideable_backward", OpPath::Device,
               "flash_attention_bwd");
}

}  // namespace openreg::backend

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &openreg::backend::fusedSdpChoice)
}  // namespace at::native
