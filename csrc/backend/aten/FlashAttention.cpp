// Flash attention's ops on openreg.
//
// Besides SDPA's overrideable pair (Attention.cpp), three op families reach
// the flash-style kernel of AttentionKernel.h:
//  - _flash_attention_forward/backward, flash attention's own entry, which
//    LLM code calls directly (torch.nn.attention.varlen_attn, torchtitan's
//    variable-length attention): fixed (batch, sequence, heads, features)
//    tensors, or packed (total, heads, features) ones with cum_seq_q/k;
//  - _scaled_dot_product_flash_attention and its backward: the same with
//    SDPA's (batch, heads, sequence, features) layout, as CUDA has them;
//  - _scaled_dot_product_flash_attention_for_cpu and its backward, which
//    torch's scaled_dot_product_attention calls on every device but CUDA
//    once the device's choice answers FLASH_ATTENTION.
// Each pass is one device kernel. The masks follow the op's owner: flash
// attention's causal and sliding-window masks are bottom-right aligned (key
// j is seen by query i when i + Lk - Lq - left <= j <= i + Lk - Lq + right),
// the _for_cpu op's causal mask is top-left aligned, as CPU's and the math
// path's. The dropout state (rng_state, unused) is written by the forward
// kernel and read by the backward kernel: no host synchronisation.
#include <ATen/EmptyTensor.h>
#include <torch/library.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/Generator.h"
#include "backend/OpRegistry.h"
#include "backend/aten/AttentionCall.h"
#include "backend/aten/AttentionKernel.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

using attention::attentionShape;
using attention::BackwardArgs;
using attention::biasOf;
using attention::biasProblem;
using attention::emptyLike;
using attention::ForwardArgs;
using attention::Geometry;
using attention::RowStats;
using attention::Sequences;
using attention::Strided4;

// How an op lays out (batch, heads, rows, features).
enum class Layout {
  BatchHeadRow,  // SDPA's (batch, heads, sequence, features)
  BatchRowHead,  // flash attention's (batch, sequence, heads, features)
  Packed,        // flash attention's (total rows, heads, features) with cum_seq_q/k
};

Strided4 describeAs(const at::Tensor& t, Layout layout) {
  if (layout == Layout::BatchHeadRow) return attention::strided4(t);
  Strided4 s;
  s.data = t.data_ptr();
  if (layout == Layout::BatchRowHead) {
    s.strides = {t.stride(0), t.stride(2), t.stride(1), t.stride(3)};
  } else {
    s.strides = {0, t.stride(1), t.stride(0), t.stride(2)};
  }
  return s;
}

int64_t headsOf(const at::Tensor& t, Layout layout) { return layout == Layout::BatchHeadRow ? t.size(1) : t.size(-2); }

int64_t rowsOf(const at::Tensor& t, Layout layout) {
  switch (layout) {
    case Layout::BatchHeadRow:
      return t.size(2);
    case Layout::BatchRowHead:
      return t.size(1);
    case Layout::Packed:
      return t.size(0);
  }
  return 0;
}

const char* layoutName(Layout layout) {
  switch (layout) {
    case Layout::BatchHeadRow:
      return "4-d (batch, heads, sequence, features)";
    case Layout::BatchRowHead:
      return "4-d (batch, sequence, heads, features)";
    case Layout::Packed:
      return "3-d (total, heads, features) with cum_seq_q and cum_seq_k";
  }
  return "";
}

void checkInputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, Layout layout) {
  const int64_t dims = layout == Layout::Packed ? 3 : 4;
  TORCH_CHECK(q.dim() == dims && k.dim() == dims && v.dim() == dims, op, ": query, key and value must be ",
              layoutName(layout), "; got ", q.sizes(), ", ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(!q.is_nested() && !k.is_nested() && !v.is_nested() && q.layout() == at::kStrided &&
                  k.layout() == at::kStrided && v.layout() == at::kStrided,
              op, ": query, key and value must be strided (not nested or sparse) tensors");
  TORCH_CHECK(attention::isSupportedDtype(q.scalar_type()) && k.scalar_type() == q.scalar_type() &&
                  v.scalar_type() == q.scalar_type(),
              op, ": query, key and value must share one of float32, float64, float16 or bfloat16; got ",
              q.scalar_type(), ", ", k.scalar_type(), " and ", v.scalar_type());
  if (layout != Layout::Packed) {
    TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0), op,
                ": query, key and value must have the same batch size; got ", q.sizes(), ", ", k.sizes(), " and ",
                v.sizes());
  }
  const int64_t heads = headsOf(q, layout), kvHeads = headsOf(k, layout);
  TORCH_CHECK(headsOf(v, layout) == kvHeads && kvHeads > 0 && heads % kvHeads == 0, op,
              ": the query's heads must be a multiple of the key's and value's (which must be equal); got ", q.sizes(),
              ", ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(rowsOf(k, layout) == rowsOf(v, layout), op, ": key and value need one sequence length; got ", k.sizes(),
              " and ", v.sizes());
  TORCH_CHECK(q.size(-1) > 0 && k.size(-1) == q.size(-1) && v.size(-1) == q.size(-1), op,
              ": query, key and value need one non-zero feature size; got ", q.sizes(), ", ", k.sizes(), " and ",
              v.sizes());
}

void checkDropout(const char* op, double p) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, op, ": dropout_p must be between 0 and 1, got ", p);
}

Geometry geometryOf(const at::Tensor& q, const at::Tensor& k, Layout layout, std::optional<double> scale) {
  Geometry g;
  g.batch = layout == Layout::Packed ? 1 : q.size(0);
  g.heads = headsOf(q, layout);
  g.kvHeads = headsOf(k, layout);
  g.queryLength = rowsOf(q, layout);
  g.keyLength = rowsOf(k, layout);
  g.headDim = q.size(-1);
  g.valueDim = q.size(-1);
  g.scale = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(g.headDim));
  g.dtype = q.scalar_type();
  return g;
}

// Flash attention's band: causal (no key after the diagonal) or a sliding
// window, bottom-right aligned; -1 leaves a side unbounded.
void setFlashBand(const char* op, Geometry& g, bool isCausal, const std::optional<c10::SymInt>& left,
                  const std::optional<c10::SymInt>& right) {
  const int64_t before = left.has_value() ? left->expect_int() : -1;
  const int64_t after = right.has_value() ? right->expect_int() : -1;
  TORCH_CHECK(before >= -1 && after >= -1, op,
              ": window_size_left and window_size_right must be -1 (unbounded) or at least 0; got ", before, " and ",
              after);
  g.keysBefore = before;
  g.keysAfter = isCausal ? 0 : after;
  g.alignBottomRight = true;
}

void checkOffsets(const char* op, const at::Tensor& cum, const char* name, const at::Tensor& q) {
  TORCH_CHECK(cum.dim() == 1 && cum.numel() >= 1 && cum.scalar_type() == at::kInt, op, ": ", name,
              " must be a 1-d int32 tensor of batch + 1 offsets; got ", cum.scalar_type(), " of size ", cum.sizes());
  TORCH_CHECK(cum.device() == q.device(), op, ": ", name, " must be on the query's device ", q.device(), ", not ",
              cum.device());
  // The kernel reads the offsets as an array (as CUDA's flash attention requires them).
  TORCH_CHECK(cum.is_contiguous(), op, ": ", name, " must be contiguous; got strides ", cum.strides());
}

// The packed sequences of a call: the offsets stay on the device, read by the kernel.
Sequences sequencesOf(const char* op, const at::Tensor& cumQ, const at::Tensor& cumK, const at::Tensor& q,
                      const at::Tensor& k, const c10::SymInt& maxQ, const c10::SymInt& maxK) {
  checkOffsets(op, cumQ, "cum_seq_q", q);
  checkOffsets(op, cumK, "cum_seq_k", q);
  TORCH_CHECK(cumQ.numel() == cumK.numel(), op,
              ": cum_seq_q and cum_seq_k must hold one offset per sequence and one "
              "more; got ",
              cumQ.numel(), " and ", cumK.numel());
  Sequences s;
  s.cumQuery = cumQ.const_data_ptr<int32_t>();
  s.cumKey = cumK.const_data_ptr<int32_t>();
  s.count = cumQ.numel() - 1;
  s.totalQuery = q.size(0);
  s.totalKey = k.size(0);
  s.maxQuery = maxQ.expect_int();
  s.maxKey = maxK.expect_int();
  TORCH_CHECK(s.maxQuery >= 0 && s.maxKey >= 0, op, ": max_q and max_k must not be negative; got ", s.maxQuery, " and ",
              s.maxKey);
  return s;
}

// The packed form's geometry: the kernel takes each sequence's own lengths.
void setPacked(Geometry& g, const Sequences& s) {
  g.batch = s.count;
  g.queryLength = s.maxQuery;
  g.keyLength = s.maxKey;
}

// Log-sum-exp (b, h, i) of a (batch, heads, rows) tensor, or of a packed
// (heads, total rows) one.
RowStats rowStatsOf(const at::Tensor& lse, Layout layout) {
  RowStats stats;
  stats.data = const_cast<void*>(lse.const_data_ptr());
  stats.isDouble = lse.scalar_type() == at::kDouble;
  if (layout == Layout::Packed) {
    stats.strides = {0, lse.stride(0), lse.stride(1)};
  } else {
    stats.strides = {lse.stride(0), lse.stride(1), lse.stride(2)};
  }
  return stats;
}

void checkLogSumExp(const char* op, const at::Tensor& lse, const at::Tensor& q, const Geometry& g, Layout layout,
                    at::ScalarType dtype) {
  const std::vector<int64_t> expected = layout == Layout::Packed
                                            ? std::vector<int64_t>{g.heads, q.size(0)}
                                            : std::vector<int64_t>{g.batch, g.heads, g.queryLength};
  TORCH_CHECK(lse.scalar_type() == dtype && lse.sizes() == c10::IntArrayRef(expected) && lse.device() == q.device(), op,
              ": logsumexp must be a ", dtype, " tensor of size ", expected, " on ", q.device(), "; got ",
              lse.scalar_type(), " of size ", lse.sizes());
}

void checkGradients(const char* op, const at::Tensor& gradOut, const at::Tensor& out, const at::Tensor& q) {
  TORCH_CHECK(gradOut.sizes() == q.sizes() && out.sizes() == q.sizes(), op,
              ": grad_out and out must have the query's size ", q.sizes(), "; got ", gradOut.sizes(), " and ",
              out.sizes());
  TORCH_CHECK(gradOut.scalar_type() == q.scalar_type() && out.scalar_type() == q.scalar_type(), op,
              ": grad_out and out must have the query's dtype ", q.scalar_type());
}

// The dropout seed a backward reads: word 0 of the forward's rng_state,
// read by the kernel when it is device memory (written by the forward's
// kernel, in stream order).
const uint64_t* seedWordOf(const char* op, const at::Tensor& rngState, const at::Tensor& q) {
  TORCH_CHECK(rngState.defined() && rngState.numel() >= 1 && c10::elementSize(rngState.scalar_type()) == 8 &&
                  (rngState.device() == q.device() || rngState.is_cpu()),
              op, ": with dropout, the rng state must be the forward's (a 64-bit tensor on ", q.device(), ")");
  return static_cast<const uint64_t*>(rngState.const_data_ptr());
}

struct ForwardResult {
  at::Tensor output, logSumExp, rngState, unused, debugMask;
};

// The forward kernel's state; allocates the results not given.
struct ForwardLaunch {
  ForwardArgs args;
  uint64_t* rngState = nullptr;  // (seed, 0), written by the kernel
  uint64_t* unused = nullptr;    // 0
};

void launchForward(const at::Tensor& q, ForwardLaunch launch) {
  const Geometry& g = launch.args.geometry;
  const bool work = launch.args.sequences.has_value() || g.batch * g.heads * g.queryLength > 0;
  launchKernel(streamFor(q), kernelName("flash_attention_fwd", g.dtype),
               attentionShape(g, attention::kQueryTile, g.queryLength, g.heads), [launch, work]() {
                 if (launch.rngState != nullptr) {
                   launch.rngState[0] = launch.args.dropout.seed;
                   launch.rngState[1] = 0;
                 }
                 if (launch.unused != nullptr) *launch.unused = 0;
                 if (work) attention::attentionForward(launch.args);
               });
}

void launchBackward(const at::Tensor& q, const BackwardArgs& args, const uint64_t* seedWord) {
  const Geometry& g = args.geometry;
  if (!args.sequences.has_value() && g.batch * g.kvHeads == 0) return;
  launchKernel(streamFor(q), kernelName("flash_attention_bwd", g.dtype),
               attentionShape(g, attention::kKeyTile, g.keyLength, g.kvHeads), [state = args, seedWord]() mutable {
                 if (seedWord != nullptr) state.dropout.seed = *seedWord;
                 attention::attentionBackward(state);
               });
}

void describeInputs(ForwardArgs& args, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& out, Layout layout) {
  args.query = describeAs(q, layout);
  args.key = describeAs(k, layout);
  args.value = describeAs(v, layout);
  args.output = describeAs(out, layout);
}

// The forward of the flash ops that keep a dropout state (all but _for_cpu).
ForwardResult flashForward(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, Layout layout,
                           Geometry g, std::optional<Sequences> sequences, double dropoutP, bool returnDebugMask) {
  checkDropout(op, dropoutP);
  const c10::DeviceIndex device = q.device().index();
  ForwardLaunch launch;
  ForwardArgs& args = launch.args;
  args.geometry = g;
  args.sequences = sequences;
  ForwardResult result;
  result.output = emptyLike(q, q.sizes());
  result.logSumExp = layout == Layout::Packed ? emptyDevice({g.heads, q.size(0)}, at::kFloat)
                                              : emptyDevice({g.batch, g.heads, g.queryLength}, at::kFloat);
  result.rngState = emptyDevice({2}, at::kUInt64);
  result.unused = emptyDevice({}, at::kUInt64);
  if (dropoutP > 0.0) args.dropout = {dropoutP, takeKernelSeed(std::nullopt, device), 0};
  if (returnDebugMask && dropoutP > 0.0) {
    TORCH_CHECK(layout != Layout::Packed, op, ": return_debug_mask is not supported for packed sequences");
    result.debugMask = emptyDevice({g.batch, g.heads, g.queryLength, g.keyLength}, at::kBool);
    args.keepMask = result.debugMask.mutable_data_ptr<bool>();
  } else {
    result.debugMask = emptyDevice({0}, q.scalar_type());
  }
  describeInputs(args, q, k, v, result.output, layout);
  args.logSumExp = rowStatsOf(result.logSumExp, layout);
  launch.rngState = result.rngState.mutable_data_ptr<uint64_t>();
  launch.unused = result.unused.mutable_data_ptr<uint64_t>();
  launchForward(q, launch);
  return result;
}

struct BackwardInputs {
  const at::Tensor& gradOut;
  const at::Tensor& q;
  const at::Tensor& k;
  const at::Tensor& v;
  const at::Tensor& out;
  const at::Tensor& lse;
};

// Fills `args` for a backward whose gradients are allocated.
void describeBackward(BackwardArgs& args, const BackwardInputs& in, Layout layout, const at::Tensor& gradQ,
                      const at::Tensor& gradK, const at::Tensor& gradV) {
  args.gradOutput = describeAs(in.gradOut, layout);
  args.query = describeAs(in.q, layout);
  args.key = describeAs(in.k, layout);
  args.value = describeAs(in.v, layout);
  args.output = describeAs(in.out, layout);
  args.logSumExp = rowStatsOf(in.lse, layout);
  args.gradQuery = describeAs(gradQ, layout);
  args.gradKey = describeAs(gradK, layout);
  args.gradValue = describeAs(gradV, layout);
}

using Gradients = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// The backward of the flash ops that keep a dropout state.
Gradients flashBackward(const char* op, const BackwardInputs& in, Layout layout, const Geometry& g,
                        const std::optional<Sequences>& sequences, double dropoutP, const at::Tensor& rngState) {
  checkDropout(op, dropoutP);
  checkGradients(op, in.gradOut, in.out, in.q);
  checkLogSumExp(op, in.lse, in.q, g, layout, at::kFloat);
  BackwardArgs args;
  args.geometry = g;
  args.sequences = sequences;
  const uint64_t* seedWord = nullptr;
  if (dropoutP > 0.0) {
    seedWord = seedWordOf(op, rngState, in.q);
    args.dropout.p = dropoutP;
    if (rngState.is_cpu()) {
      args.dropout.seed = *seedWord;
      seedWord = nullptr;
    }
  }
  Gradients grads{emptyLike(in.q, in.q.sizes()), emptyLike(in.k, in.k.sizes()), emptyLike(in.v, in.v.sizes())};
  describeBackward(args, in, layout, std::get<0>(grads), std::get<1>(grads), std::get<2>(grads));
  launchBackward(in.q, args, seedWord);
  return grads;
}

// A _flash_attention_* call's layout, geometry and packed sequences (both
// passes read them the same way).
struct FlashCall {
  Layout layout = Layout::BatchRowHead;
  Geometry geometry;
  std::optional<Sequences> sequences;
};

struct FlashInputs {
  const at::Tensor& q;
  const at::Tensor& k;
  const at::Tensor& v;
};

struct FlashOptions {
  const c10::SymInt& maxQ;
  const c10::SymInt& maxK;
  std::optional<double> scale;
  bool isCausal = false;
  const std::optional<c10::SymInt>& windowLeft;
  const std::optional<c10::SymInt>& windowRight;
};

// `cumQ`, `cumK`: the offsets of the packed form, or nullptr for the fixed form.
FlashCall flashCallOf(const char* op, const FlashInputs& in, const at::Tensor* cumQ, const at::Tensor* cumK,
                      const FlashOptions& o) {
  TORCH_CHECK((cumQ == nullptr) == (cumK == nullptr), op,
              ": packed sequences need both cum_seq_q and cum_seq_k, or neither");
  FlashCall call;
  call.layout = cumQ != nullptr ? Layout::Packed : Layout::BatchRowHead;
  checkInputs(op, in.q, in.k, in.v, call.layout);
  call.geometry = geometryOf(in.q, in.k, call.layout, o.scale);
  setFlashBand(op, call.geometry, o.isCausal, o.windowLeft, o.windowRight);
  if (call.layout == Layout::Packed) {
    call.sequences = sequencesOf(op, *cumQ, *cumK, in.q, in.k, o.maxQ, o.maxK);
    setPacked(call.geometry, *call.sequences);
  }
  return call;
}

using FlashForwardTuple = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

FlashForwardTuple flashAttentionForward(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& cumSeqQ,
    const std::optional<at::Tensor>& cumSeqK, c10::SymInt maxQ, c10::SymInt maxK, double dropoutP, bool isCausal,
    bool returnDebugMask, std::optional<double> scale, std::optional<c10::SymInt> windowSizeLeft,
    std::optional<c10::SymInt> windowSizeRight, const std::optional<at::Tensor>& sequsedK,
    const std::optional<at::Tensor>& alibiSlopes, const std::optional<at::Tensor>& blockTable,
    std::optional<int64_t> /*numSplits: a GPU work split, no meaning here*/) {
  static const char* const kName = "_flash_attention_forward";
  static const c10::OperatorHandle kOp = findOp("aten::_flash_attention_forward", "");
  const c10::Device device = commonDevice(refArgs(query, key, value, cumSeqQ, cumSeqK), kOp);
  c10::DeviceGuard guard(device);
  TORCH_CHECK(!sequsedK.has_value(), kName, ": seqused_k is not supported on openreg");
  TORCH_CHECK(!alibiSlopes.has_value(), kName, ": alibi_slopes is not supported on openreg");
  TORCH_CHECK(!blockTable.has_value(), kName, ": block_table (paged keys and values) is not supported on openreg");
  const FlashCall call =
      flashCallOf(kName, {query, key, value}, cumSeqQ ? &*cumSeqQ : nullptr, cumSeqK ? &*cumSeqK : nullptr,
                  {maxQ, maxK, scale, isCausal, windowSizeLeft, windowSizeRight});
  ForwardResult r =
      flashForward(kName, query, key, value, call.layout, call.geometry, call.sequences, dropoutP, returnDebugMask);
  return {r.output, r.logSumExp, r.rngState, r.unused, r.debugMask};
}

Gradients flashAttentionBackward(const at::Tensor& gradOut, const at::Tensor& query, const at::Tensor& key,
                                 const at::Tensor& value, const at::Tensor& out, const at::Tensor& logSumExp,
                                 const at::Tensor& cumSeqQ, const at::Tensor& cumSeqK, c10::SymInt maxQ,
                                 c10::SymInt maxK, double dropoutP, bool isCausal, const at::Tensor& rngState,
                                 const at::Tensor& /*unused*/, std::optional<double> scale,
                                 std::optional<c10::SymInt> windowSizeLeft,
                                 std::optional<c10::SymInt> windowSizeRight) {
  static const char* const kName = "_flash_attention_backward";
  static const c10::OperatorHandle kOp = findOp("aten::_flash_attention_backward", "");
  if (!gradOut.defined()) return {};
  const c10::Device device = commonDevice(refArgs(gradOut, query, key, value, out, logSumExp, cumSeqQ, cumSeqK), kOp);
  c10::DeviceGuard guard(device);
  const FlashCall call = flashCallOf(kName, {query, key, value}, cumSeqQ.defined() ? &cumSeqQ : nullptr,
                                     cumSeqK.defined() ? &cumSeqK : nullptr,
                                     {maxQ, maxK, scale, isCausal, windowSizeLeft, windowSizeRight});
  return flashBackward(kName, {gradOut, query, key, value, out, logSumExp}, call.layout, call.geometry, call.sequences,
                       dropoutP, rngState);
}

using SdpaFlashTuple = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
                                  at::Tensor, at::Tensor>;

SdpaFlashTuple sdpaFlashForward(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                double dropoutP, bool isCausal, bool returnDebugMask, std::optional<double> scale) {
  static const char* const kName = "_scaled_dot_product_flash_attention";
  static const c10::OperatorHandle kOp = findOp("aten::_scaled_dot_product_flash_attention", "");
  const c10::Device device = commonDevice(refArgs(query, key, value), kOp);
  c10::DeviceGuard guard(device);
  checkInputs(kName, query, key, value, Layout::BatchHeadRow);
  Geometry g = geometryOf(query, key, Layout::BatchHeadRow, scale);
  setFlashBand(kName, g, isCausal, std::nullopt, std::nullopt);
  ForwardResult r =
      flashForward(kName, query, key, value, Layout::BatchHeadRow, g, std::nullopt, dropoutP, returnDebugMask);
  return {r.output,   r.logSumExp, at::Tensor(), at::Tensor(), c10::SymInt(g.queryLength), c10::SymInt(g.keyLength),
          r.rngState, r.unused,    r.debugMask};
}

Gradients sdpaFlashBackward(const at::Tensor& gradOut, const at::Tensor& query, const at::Tensor& key,
                            const at::Tensor& value, const at::Tensor& out, const at::Tensor& logSumExp,
                            const at::Tensor& /*cumSeqQ*/, const at::Tensor& /*cumSeqK*/, c10::SymInt /*maxQ*/,
                            c10::SymInt /*maxK*/, double dropoutP, bool isCausal, const at::Tensor& philoxSeed,
                            const at::Tensor& /*philoxOffset*/, std::optional<double> scale) {
  static const char* const kName = "_scaled_dot_product_flash_attention_backward";
  static const c10::OperatorHandle kOp = findOp("aten::_scaled_dot_product_flash_attention_backward", "");
  if (!gradOut.defined()) return {};
  const c10::Device device = commonDevice(refArgs(gradOut, query, key, value, out, logSumExp), kOp);
  c10::DeviceGuard guard(device);
  checkInputs(kName, query, key, value, Layout::BatchHeadRow);
  Geometry g = geometryOf(query, key, Layout::BatchHeadRow, scale);
  setFlashBand(kName, g, isCausal, std::nullopt, std::nullopt);
  return flashBackward(kName, {gradOut, query, key, value, out, logSumExp}, Layout::BatchHeadRow, g, std::nullopt,
                       dropoutP, philoxSeed);
}

// _for_cpu's checks: no dropout (its backward has no seed), a mask that
// broadcasts to the scores.
void checkForCpuCall(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropoutP,
                     const std::optional<at::Tensor>& mask) {
  checkInputs(op, q, k, v, Layout::BatchHeadRow);
  TORCH_CHECK(dropoutP == 0.0, op, ": dropout_p must be 0 (the op's backward takes no dropout state); got ", dropoutP);
  if (mask.has_value() && mask->defined()) {
    const std::string problem = biasProblem(q, k, *mask);
    TORCH_CHECK(problem.empty(), op, ": ", problem);
  }
}

at::ScalarType statsType(const at::Tensor& q) { return q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

// (batch, heads, rows) laid out as (batch, rows, heads), as CPU's kernel returns it.
at::Tensor rowMajorStats(const Geometry& g, at::ScalarType dtype) {
  return emptyDeviceStrided({g.batch, g.heads, g.queryLength}, {g.queryLength * g.heads, 1, g.heads}, dtype);
}

// A (batch, heads, rows, features) gradient laid out (batch, rows, heads, features), as CPU's.
at::Tensor rowMajorGradient(const at::Tensor& like) {
  const int64_t rows = like.size(2), heads = like.size(1), features = like.size(3);
  return emptyDeviceStrided(like.sizes(), {rows * heads * features, features, heads * features, 1}, like.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> forCpuForward(const at::Tensor& query, const at::Tensor& key,
                                                 const at::Tensor& value, double dropoutP, bool isCausal,
                                                 const std::optional<at::Tensor>& attnMask,
                                                 std::optional<double> scale) {
  static const char* const kName = "_scaled_dot_product_flash_attention_for_cpu";
  static const c10::OperatorHandle kOp = findOp("aten::_scaled_dot_product_flash_attention_for_cpu", "");
  const c10::Device device = commonDevice(refArgs(query, key, value, attnMask), kOp);
  c10::DeviceGuard guard(device);
  checkForCpuCall(kName, query, key, value, dropoutP, attnMask);
  ForwardLaunch launch;
  ForwardArgs& args = launch.args;
  args.geometry = attention::sdpaGeometry(query, key, value, scale, isCausal);
  at::Tensor output = emptyLike(query, query.sizes());
  at::Tensor logSumExp = rowMajorStats(args.geometry, statsType(query));
  describeInputs(args, query, key, value, output, Layout::BatchHeadRow);
  args.logSumExp = rowStatsOf(logSumExp, Layout::BatchHeadRow);
  if (attnMask.has_value() && attnMask->defined()) args.bias = biasOf(*attnMask);
  launchForward(query, launch);
  return {output, logSumExp};
}

Gradients forCpuBackward(const at::Tensor& gradOut, const at::Tensor& query, const at::Tensor& key,
                         const at::Tensor& value, const at::Tensor& out, const at::Tensor& logSumExp, double dropoutP,
                         bool isCausal, const std::optional<at::Tensor>& attnMask, std::optional<double> scale) {
  static const char* const kName = "_scaled_dot_product_flash_attention_for_cpu_backward";
  static const c10::OperatorHandle kOp = findOp("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "");
  if (!gradOut.defined()) return {};
  const c10::Device device = commonDevice(refArgs(gradOut, query, key, value, out, logSumExp, attnMask), kOp);
  c10::DeviceGuard guard(device);
  checkForCpuCall(kName, query, key, value, dropoutP, attnMask);
  checkGradients(kName, gradOut, out, query);
  BackwardArgs args;
  args.geometry = attention::sdpaGeometry(query, key, value, scale, isCausal);
  checkLogSumExp(kName, logSumExp, query, args.geometry, Layout::BatchHeadRow, statsType(query));
  Gradients grads{rowMajorGradient(query), rowMajorGradient(key), rowMajorGradient(value)};
  describeBackward(args, {gradOut, query, key, value, out, logSumExp}, Layout::BatchHeadRow, std::get<0>(grads),
                   std::get<1>(grads), std::get<2>(grads));
  if (attnMask.has_value() && attnMask->defined()) args.bias = biasOf(*attnMask);
  launchBackward(query, args, nullptr);
  return grads;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_flash_attention_forward", TORCH_FN(flashAttentionForward));
  m.impl("_flash_attention_backward", TORCH_FN(flashAttentionBackward));
  m.impl("_scaled_dot_product_flash_attention", TORCH_FN(sdpaFlashForward));
  m.impl("_scaled_dot_product_flash_attention_backward", TORCH_FN(sdpaFlashBackward));
  m.impl("_scaled_dot_product_flash_attention_for_cpu", TORCH_FN(forCpuForward));
  m.impl("_scaled_dot_product_flash_attention_for_cpu_backward", TORCH_FN(forCpuBackward));
  for (const char* op : {"aten::_flash_attention_forward", "aten::_scaled_dot_product_flash_attention",
                         "aten::_scaled_dot_product_flash_attention_for_cpu"}) {
    recordOpPath(op, OpPath::Device, "flash_attention_fwd");
  }
  for (const char* op : {"aten::_flash_attention_backward", "aten::_scaled_dot_product_flash_attention_backward",
                         "aten::_scaled_dot_product_flash_attention_for_cpu_backward"}) {
    recordOpPath(op, OpPath::Device, "flash_attention_bwd");
  }
}

}  // namespace openreg::backend
