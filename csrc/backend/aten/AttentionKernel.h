// The fused attention kernel bodies: flash-style tiled attention with an
// online softmax, forward and backward, for aten/Attention.cpp.
//
// They run on a device executor thread, on raw device memory described here;
// the host side (Attention.cpp) validates the call, allocates the results and
// launches one kernel per pass. Element (b, h, i, j) of a tensor below lives
// at data + b * strides[0] + h * strides[1] + i * strides[2] + j * strides[3]
// (in elements); a broadcast dimension has stride 0. The forward never holds
// more than one query tile x key tile of scores; the backward recomputes the
// scores tile by tile from the saved log-sum-exp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include <c10/core/ScalarType.h>

namespace openreg::backend::attention {

// Rows of queries and keys per tile (a query tile's scores against a key
// tile: 32 KiB of float, in cache with the tiles' rows).
constexpr int64_t kQueryTile = 64;
constexpr int64_t kKeyTile = 128;

struct Strided4 {
  void* data = nullptr;
  std::array<int64_t, 4> strides{};
};

// Query heads `heads`, key/value heads `kvHeads` (heads / kvHeads query heads
// share one key/value head, as `repeat_interleave` lays them out).
struct Geometry {
  int64_t batch = 0;
  int64_t heads = 0;
  int64_t kvHeads = 0;
  int64_t queryLength = 0;
  int64_t keyLength = 0;
  int64_t headDim = 0;
  int64_t valueDim = 0;
  double scale = 1.0;
  bool causal = false;  // query i sees keys j <= i (top-left aligned, as SDPA's math path)
  c10::ScalarType dtype = c10::ScalarType::Float;
};

// An additive bias of the query's dtype or float32, or a boolean mask
// (false: masked out), broadcast to (batch, heads, queryLength, keyLength).
struct Bias {
  Strided4 tensor;
  c10::ScalarType dtype = c10::ScalarType::Float;
};

// Dropout on the attention probabilities: element e = ((b * heads + h) *
// queryLength + i) * keyLength + j is kept when its 32-bit word (the low or
// high half, for e even or odd, of output e / 2 of the splitmix64 stream of
// `seed`) is below (1 - p) * 2^32. Forward and backward draw the same words.
struct Dropout {
  double p = 0.0;  // 0: none
  uint64_t seed = 0;
};

struct ForwardArgs {
  Geometry geometry;
  Strided4 query, key, value, output;
  std::optional<Bias> bias;
  Dropout dropout;
  float* logSumExp = nullptr;  // [batch, heads, queryLength], contiguous; +inf for a row that sees no key
  bool* keepMask = nullptr;    // optional [batch, heads, queryLength, keyLength], contiguous
};

struct BackwardArgs {
  Geometry geometry;
  Strided4 gradOutput, query, key, value, output;
  const float* logSumExp = nullptr;
  std::optional<Bias> bias;
  Dropout dropout;
  Strided4 gradQuery, gradKey, gradValue;
  // The bias's gradient, of the bias's own sizes (`gradBiasSizes`, broadcast
  // dimensions summed) and dtype; only with a floating bias.
  std::optional<Strided4> gradBias;
  std::array<int64_t, 4> gradBiasSizes{};
};

// Computes output and log-sum-exp (and the keep mask when asked). Throws
// c10::Error on an unsupported dtype.
void attentionForward(const ForwardArgs& args);
// Computes the query, key, value (and bias) gradients.
void attentionBackward(const BackwardArgs& args);

}  // namespace openreg::backend::attention
