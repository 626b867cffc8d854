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
  // The keys query i sees: those within [diagonal(i) - keysBefore,
  // diagonal(i) + keysAfter], a negative bound being none. diagonal(i) is i
  // (top-left aligned, as SDPA's math path) or i + keyLength - queryLength
  // (bottom-right aligned, as flash attention's causal and window masks).
  // Causal: keysAfter = 0.
  int64_t keysBefore = -1;
  int64_t keysAfter = -1;
  bool alignBottomRight = false;
  c10::ScalarType dtype = c10::ScalarType::Float;
};

// Per-row statistics (the log-sum-exp): element (b, h, i) at data +
// b * strides[0] + h * strides[1] + i * strides[2], float32, or float64 for
// a float64 call that asks for it.
struct RowStats {
  void* data = nullptr;
  bool isDouble = false;
  std::array<int64_t, 3> strides{};
};

// Packed variable-length sequences (flash attention's cum_seq_q/k): sequence
// s holds query rows cumQuery[s] .. cumQuery[s + 1] and key rows cumKey[s] ..
// cumKey[s + 1] of the tensors' row dimension (dimension 2 of Strided4; the
// batch stride is unused). The offsets are device memory, read and checked
// by the kernel (monotone, within the tensors, each length at most its
// maximum); a bad one fails the kernel with a message naming it. Rows no
// sequence covers get zero outputs and gradients and an infinite log-sum-exp.
struct Sequences {
  const int32_t* cumQuery = nullptr;
  const int32_t* cumKey = nullptr;
  int64_t count = 0;
  int64_t totalQuery = 0;  // rows of the query tensor
  int64_t totalKey = 0;
  int64_t maxQuery = 0;
  int64_t maxKey = 0;
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
// A call over packed sequences numbers each sequence's elements after the
// previous sequences' (`firstElement` is where a call's numbering starts).
struct Dropout {
  double p = 0.0;  // 0: none
  uint64_t seed = 0;
  uint64_t firstElement = 0;
};

struct ForwardArgs {
  Geometry geometry;
  Strided4 query, key, value, output;
  std::optional<Bias> bias;
  Dropout dropout;
  RowStats logSumExp;        // +inf for a row that sees no key
  bool* keepMask = nullptr;  // optional [batch, heads, queryLength, keyLength], contiguous; not with sequences
  std::optional<Sequences> sequences;
};

struct BackwardArgs {
  Geometry geometry;
  Strided4 gradOutput, query, key, value, output;
  RowStats logSumExp;
  std::optional<Bias> bias;
  Dropout dropout;
  Strided4 gradQuery, gradKey, gradValue;
  // The bias's gradient, of the bias's own sizes (`gradBiasSizes`, broadcast
  // dimensions summed) and dtype; only with a floating bias.
  std::optional<Strided4> gradBias;
  std::array<int64_t, 4> gradBiasSizes{};
  std::optional<Sequences> sequences;  // no bias with sequences
};

// Contiguous [batch, heads, queryLength] statistics at `data`.
RowStats contiguousRowStats(void* data, const Geometry& g, bool isDouble = false);

// Computes output and log-sum-exp (and the keep mask when asked). Throws
// c10::Error on an unsupported dtype or bad sequence offsets. With
// `sequences`, `geometry.batch` is ignored and the lengths are the maxima.
void attentionForward(const ForwardArgs& args);
// Computes the query, key, value (and bias) gradients.
void attentionBackward(const BackwardArgs& args);

}  // namespace openreg::backend::attention
