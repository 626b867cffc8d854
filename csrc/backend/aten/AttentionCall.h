// Host-side pieces shared by the attention ops: SDPA's fused ops
// (Attention.cpp) and flash attention's (FlashAttention.cpp). They check a
// call's tensors, allocate results, and describe tensors for the kernel
// bodies of AttentionKernel.h. Calling thread only; errors are returned as
// text (the *Problem functions, empty when the call is fine) so that the
// SDPA choice can both test and explain.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>
#include <openreg/runtime.hpp>

#include "backend/aten/AttentionKernel.h"

namespace openreg::backend::attention {

bool isSupportedDtype(c10::ScalarType type);

// Query, key and value as SDPA takes them: 4-d (batch, heads, sequence,
// features) or 3-d (heads, sequence, features). `groupedHeads`: the query's
// heads may be a multiple of the key's and value's.
std::string layoutProblem(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool groupedHeads);
// An attn_mask that broadcasts to SDPA's scores, bool, float32 or the query's dtype.
std::string biasProblem(const at::Tensor& q, const at::Tensor& k, const at::Tensor& bias);

// A new device tensor of `sizes` whose dimensions are ordered as `like`'s
// (outermost = largest stride), as torch.empty_like lays results out.
at::Tensor emptyLike(const at::Tensor& like, c10::IntArrayRef sizes);

// A 4-d or 3-d (batch, heads, rows, features) tensor as the kernel reads it.
Strided4 strided4(const at::Tensor& t);
// A bias broadcast over the scores (size-1 and missing dimensions stride 0).
Bias biasOf(const at::Tensor& bias);

// SDPA's geometry for (batch, heads, rows, features) tensors; its causal
// mask is top-left aligned.
Geometry sdpaGeometry(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::optional<double> scale,
                      bool isCausal);

// The launch shape profilers show: blocks of `rowsPerBlock` rows per head.
LaunchShape attentionShape(const Geometry& g, int64_t rowsPerBlock, int64_t rows, int64_t heads);

}  // namespace openreg::backend::attention
