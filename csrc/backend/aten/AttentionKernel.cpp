// Flash-style attention on an executor thread (see AttentionKernel.h).
//
// Per (batch, key/value head) the keys and values are converted once into
// contiguous buffers of the compute type (float; double for float64), then
// each query tile of every query head sharing them walks the key tiles:
// scores = Q K^T, scaled, biased and causally masked, enter an online softmax
// (running row maximum and sum, the partial output rescaled when the maximum
// grows), and the probabilities times V accumulate into the output. The
// products are ATen's CPU GEMM micro-kernels (cpublas::brgemm) on the tiles.
// The backward recomputes each score tile from the log-sum-exp the forward
// saved, and accumulates dK and dV per key/value head, dQ per query tile.
#include "backend/aten/AttentionKernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <ATen/OpMathType.h>
#include <ATen/native/CPUBlas.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

namespace openreg::backend::attention {

namespace {

// The row loops are inlined into both of their compilations (see softmaxStep).
#if defined(__GNUC__) || defined(__clang__)
#define OPENREG_ROW_LOOP __attribute__((always_inline)) inline
#else
#define OPENREG_ROW_LOOP inline
#endif

// c (m x n, row-major, leading dimension ldc) = a (m x k) b (k x n), plus c
// itself when `accumulate`.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  at::native::cpublas::brgemm(m, n, k, lda, ldb, ldc, accumulate, a, b, c, /*is_vnni=*/false);
}

// ATen has no double micro-kernel; float64 attention serves checks, not speed.
void gemm(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb, double* c,
          int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    double* cRow = c + i * ldc;
    if (!accumulate) std::fill(cRow, cRow + n, 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double av = a[i * lda + p];
      const double* bRow = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) cRow[j] += av * bRow[j];
    }
  }
}

template <class T>
T* rowPointer(const Strided4& t, int64_t b, int64_t h, int64_t i) {
  return static_cast<T*>(t.data) + b * t.strides[0] + h * t.strides[1] + i * t.strides[2];
}

// dst[r * ld + c] = t(b, h, row0 + r, c), converted to the compute type.
template <class T, class A>
void loadRows(const Strided4& t, int64_t b, int64_t h, int64_t row0, int64_t rows, int64_t cols, A* dst, int64_t ld) {
  const int64_t step = t.strides[3];
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = rowPointer<T>(t, b, h, row0 + r);
    A* out = dst + r * ld;
    for (int64_t c = 0; c < cols; ++c) out[c] = static_cast<A>(src[c * step]);
  }
}

// dst[c * ld + r] = t(b, h, row0 + r, c): the transpose, for the products that need it.
template <class T, class A>
void loadColumns(const Strided4& t, int64_t b, int64_t h, int64_t row0, int64_t rows, int64_t cols, A* dst,
                 int64_t ld) {
  const int64_t step = t.strides[3];
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = rowPointer<T>(t, b, h, row0 + r);
    for (int64_t c = 0; c < cols; ++c) dst[c * ld + r] = static_cast<A>(src[c * step]);
  }
}

// t(b, h, r, c) = src[c * ld + r]: a transposed buffer back in place.
template <class T, class A>
void storeColumns(const A* src, int64_t ld, const Strided4& t, int64_t b, int64_t h, int64_t rows, int64_t cols) {
  const int64_t step = t.strides[3];
  for (int64_t r = 0; r < rows; ++r) {
    T* out = rowPointer<T>(t, b, h, r);
    for (int64_t c = 0; c < cols; ++c) out[c * step] = static_cast<T>(src[c * ld + r]);
  }
}

// t(b, h, row0 + r, c) = src[r * ld + c].
template <class T, class A>
void storeRows(const A* src, int64_t ld, const Strided4& t, int64_t b, int64_t h, int64_t row0, int64_t rows,
               int64_t cols) {
  const int64_t step = t.strides[3];
  for (int64_t r = 0; r < rows; ++r) {
    T* out = rowPointer<T>(t, b, h, row0 + r);
    const A* in = src + r * ld;
    for (int64_t c = 0; c < cols; ++c) out[c * step] = static_cast<T>(in[c]);
  }
}

// The random words that decide which probabilities dropout keeps: element e
// (its index in the (batch, heads, queries, keys) scores) takes the low
// (e even) or high (e odd) 32 bits of output e / 2 of the splitmix64 stream
// of the call's seed, a counter-based generator as the device generator's
// own, so any tile can draw its words directly. (Philox-4x32-10, as CUDA's
// kernels use, cost as much as the rest of a small attention kernel.)
class DropoutDraws {
 public:
  DropoutDraws(const Dropout& dropout, int64_t keyLength)
      : enabled_(dropout.p > 0.0),
        seed_(dropout.seed),
        firstElement_(dropout.firstElement),
        keyLength_(static_cast<uint64_t>(keyLength)),
        threshold_(static_cast<uint64_t>(std::ldexp(std::max(0.0, 1.0 - dropout.p), 32))),
        keepScale_(dropout.p < 1.0 ? 1.0 / (1.0 - dropout.p) : 0.0) {}

  bool enabled() const { return enabled_; }
  double keepScale() const { return keepScale_; }

  // keep[c] for the elements (row, j0 + c) of one score row.
  void keepRow(uint64_t row, int64_t j0, int64_t count, uint8_t* keep) const {
    uint64_t element = firstElement_ + row * keyLength_ + static_cast<uint64_t>(j0);
    while (count > 0) {
      // Whole pairs (one output each) into `pairs`, then the part asked for.
      const auto skip = static_cast<int64_t>(element & 1);
      const int64_t chunk = std::min<int64_t>(count, kChunk - skip);
      const int64_t pairCount = (skip + chunk + 1) / 2;
      const uint64_t firstPair = element >> 1;
      uint8_t pairs[kChunk];
      for (int64_t n = 0; n < pairCount; ++n) {
        const uint64_t word = splitmix64(seed_ + (firstPair + static_cast<uint64_t>(n)) * kGamma);
        pairs[2 * n] = static_cast<uint32_t>(word) < threshold_ ? 1 : 0;
        pairs[2 * n + 1] = (word >> 32) < threshold_ ? 1 : 0;
      }
      std::memcpy(keep, pairs + skip, static_cast<size_t>(chunk));
      keep += chunk;
      element += static_cast<uint64_t>(chunk);
      count -= chunk;
    }
  }

 private:
  static constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;
  static constexpr int64_t kChunk = 256;  // elements per batch of pairs (even)

  static uint64_t splitmix64(uint64_t x) {
    x += kGamma;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }

  bool enabled_;
  uint64_t seed_;
  uint64_t firstElement_;
  uint64_t keyLength_;
  uint64_t threshold_;
  double keepScale_;
};

// Which score tile: rows i0.. of query head h in batch b, keys j0...
struct TileIndex {
  int64_t b = 0;
  int64_t h = 0;
  int64_t i0 = 0;
  int64_t rows = 0;
  int64_t j0 = 0;
  int64_t cols = 0;
};

// Query i's diagonal key is i + diagonalShift(g).
int64_t diagonalShift(const Geometry& g) { return g.alignBottomRight ? g.keyLength - g.queryLength : 0; }

// A window bound no wider than the scores (a window of INT64_MAX keys is
// unbounded: the arithmetic below must not overflow); -1 stays unbounded.
int64_t boundedWindow(int64_t keys, const Geometry& g) {
  return keys < 0 ? keys : std::min(keys, g.queryLength + g.keyLength);
}

// The keys rows i0 .. i0 + rows - 1 see lie in [keyBegin, keyEnd).
int64_t keyBegin(const Geometry& g, int64_t i0) {
  const int64_t before = boundedWindow(g.keysBefore, g);
  if (before < 0) return 0;
  return std::clamp<int64_t>(i0 + diagonalShift(g) - before, 0, g.keyLength);
}

int64_t keyEnd(const Geometry& g, int64_t i0, int64_t rows) {
  const int64_t after = boundedWindow(g.keysAfter, g);
  if (after < 0) return g.keyLength;
  return std::clamp<int64_t>(i0 + rows + diagonalShift(g) + after, 0, g.keyLength);
}

template <class B, class A>
void addBiasValues(A* row, const Bias& bias, const TileIndex& t, int64_t i) {
  const int64_t step = bias.tensor.strides[3];
  const B* values = rowPointer<const B>(bias.tensor, t.b, t.h, i) + t.j0 * step;
  for (int64_t c = 0; c < t.cols; ++c) row[c] += static_cast<A>(values[c * step]);
}

template <class T, class A>
void addBiasRow(A* row, const Bias& bias, const TileIndex& t, int64_t i) {
  if (bias.dtype == c10::ScalarType::Bool) {
    const int64_t step = bias.tensor.strides[3];
    const bool* mask = rowPointer<const bool>(bias.tensor, t.b, t.h, i) + t.j0 * step;
    for (int64_t c = 0; c < t.cols; ++c) {
      if (!mask[c * step]) row[c] = -std::numeric_limits<A>::infinity();
    }
  } else if (bias.dtype == c10::ScalarType::Float) {
    addBiasValues<float>(row, bias, t, i);
  } else {
    addBiasValues<T>(row, bias, t, i);
  }
}

// Raw products -> scores: scaled, biased, masked outside the row's band (causal or window).
template <class T, class A>
void finishScores(A* scores, int64_t ld, const TileIndex& t, const Geometry& g, const std::optional<Bias>& bias) {
  const auto scale = static_cast<A>(g.scale);
  constexpr A kMinusInf = -std::numeric_limits<A>::infinity();
  const int64_t shift = diagonalShift(g);
  const int64_t keysAfter = boundedWindow(g.keysAfter, g), keysBefore = boundedWindow(g.keysBefore, g);
  for (int64_t r = 0; r < t.rows; ++r) {
    A* row = scores + r * ld;
    const int64_t i = t.i0 + r;
    for (int64_t c = 0; c < t.cols; ++c) row[c] *= scale;
    if (bias.has_value()) addBiasRow<T>(row, *bias, t, i);
    if (keysAfter >= 0) {
      const int64_t last = i + shift + keysAfter;  // the last key row i sees
      for (int64_t c = std::clamp<int64_t>(last + 1 - t.j0, 0, t.cols); c < t.cols; ++c) row[c] = kMinusInf;
    }
    if (keysBefore >= 0) {
      const int64_t first = i + shift - keysBefore;
      const int64_t hidden = std::clamp<int64_t>(first - t.j0, 0, t.cols);
      for (int64_t c = 0; c < hidden; ++c) row[c] = kMinusInf;
    }
  }
}

// exp(x) for the shifted scores (x <= 0 up to rounding): Cephes' float
// polynomial after a reduction by ln 2, within 1 ulp of exp on [-87, 0];
// exactly 0 below -87 (masked scores are -inf), NaN kept. Branch-free and
// without float-to-int conversions, so that the loops calling it vectorize
// (with -fno-trapping-math, see CMakeLists.txt): libm's expf, one call per
// score, was most of the kernel's time.
OPENREG_ROW_LOOP float expShifted(float x) {
  constexpr float kLowest = -87.0f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer, in the low bits
  constexpr int32_t kRoundBits = 0x4b400000;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693359375f;
  constexpr float kLn2Low = -2.12194440e-4f;
  const float clamped = std::max(x, kLowest);  // a NaN x stays NaN
  const float rounded = clamped * kLog2e + kRound;
  const float n = rounded - kRound;
  int32_t exponent;
  std::memcpy(&exponent, &rounded, sizeof(exponent));
  exponent -= kRoundBits;
  const float r = clamped - n * kLn2High - n * kLn2Low;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(exponent + 127) << 23;  // unsigned: a NaN's exponent is negative
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return x < kLowest ? 0.0f : p * scale;
}

OPENREG_ROW_LOOP double expShifted(double x) { return std::exp(x); }

template <class A>
OPENREG_ROW_LOOP A rowMaximum(const A* row, int64_t cols) {
  constexpr int kLanes = 8;  // independent maxima: the loop vectorizes
  A lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<A>::infinity());
  int64_t c = 0;
  for (; c + kLanes <= cols; c += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] = row[c + k] > lanes[k] ? row[c + k] : lanes[k];
  }
  A result = *std::max_element(lanes, lanes + kLanes);
  for (; c < cols; ++c) result = std::max(result, row[c]);
  return result;
}

template <class A>
OPENREG_ROW_LOOP A rowSum(const A* row, int64_t cols) {
  constexpr int kLanes = 8;
  A lanes[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= cols; c += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] += row[c + k];
  }
  A result = 0;
  for (int k = 0; k < kLanes; ++k) result += lanes[k];
  for (; c < cols; ++c) result += row[c];
  return result;
}

// row[c] = exp(row[c] - shift)
template <class A>
OPENREG_ROW_LOOP void expRowBody(A* row, int64_t cols, A shift) {
  for (int64_t c = 0; c < cols; ++c) row[c] = expShifted(row[c] - shift);
}

// One step of the online softmax for a row of scores: the running maximum
// and sum take the row in; the row becomes exp(score - new maximum). Returns
// the factor by which earlier partial results must be rescaled.
template <class A>
OPENREG_ROW_LOOP A softmaxStepBody(A* row, int64_t cols, A& maximum, A& sum) {
  const A newMax = std::max(maximum, rowMaximum(row, cols));  // NaN scores left out
  if (newMax == -std::numeric_limits<A>::infinity()) {
    // Nothing seen yet: every score so far masked out, or NaN. A NaN stays
    // in the row and so in the sum (the output row becomes NaN, as CPU's).
    for (int64_t c = 0; c < cols; ++c) row[c] = row[c] != row[c] ? row[c] : A(0);
    sum += rowSum(row, cols);
    return A(1);
  }
  const A correction = expShifted(maximum - newMax);
  expRowBody(row, cols, newMax);
  sum = sum * correction + rowSum(row, cols);
  maximum = newMax;
  return correction;
}

// The float row loops are compiled a second time for AVX2 and picked at run
// time: 8 lanes instead of SSE2's 4. A plain branch on the CPU's features,
// not the compiler's multiversioning, whose ifunc resolvers crash under
// ThreadSanitizer.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OPENREG_TARGET_AVX2 __attribute__((target("avx2,fma")))
bool hostHasAvx2() {
  static const bool kHas = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return kHas;
}
#else
#define OPENREG_TARGET_AVX2
bool hostHasAvx2() { return false; }
#endif

OPENREG_TARGET_AVX2 void expRowAvx2(float* row, int64_t cols, float shift) { expRowBody(row, cols, shift); }
OPENREG_TARGET_AVX2 float softmaxStepAvx2(float* row, int64_t cols, float& maximum, float& sum) {
  return softmaxStepBody(row, cols, maximum, sum);
}

template <class A>
void expRow(A* row, int64_t cols, A shift) {
  if constexpr (std::is_same_v<A, float>) {
    if (hostHasAvx2()) return expRowAvx2(row, cols, shift);
  }
  expRowBody(row, cols, shift);
}

template <class A>
A softmaxStep(A* row, int64_t cols, A& maximum, A& sum) {
  if constexpr (std::is_same_v<A, float>) {
    if (hostHasAvx2()) return softmaxStepAvx2(row, cols, maximum, sum);
  }
  return softmaxStepBody(row, cols, maximum, sum);
}

double* rowStatPointer(const RowStats& stats, int64_t b, int64_t h, int64_t i) {
  return static_cast<double*>(stats.data) + b * stats.strides[0] + h * stats.strides[1] + i * stats.strides[2];
}

float* rowStatPointerFloat(const RowStats& stats, int64_t b, int64_t h, int64_t i) {
  return static_cast<float*>(stats.data) + b * stats.strides[0] + h * stats.strides[1] + i * stats.strides[2];
}

void storeRowStat(const RowStats& stats, int64_t b, int64_t h, int64_t i, double value) {
  if (stats.isDouble) {
    *rowStatPointer(stats, b, h, i) = value;
  } else {
    *rowStatPointerFloat(stats, b, h, i) = static_cast<float>(value);
  }
}

double loadRowStat(const RowStats& stats, int64_t b, int64_t h, int64_t i) {
  return stats.isDouble ? *rowStatPointer(stats, b, h, i) : *rowStatPointerFloat(stats, b, h, i);
}

// The log-sum-exp of a row; +inf when the row saw no key, so that the
// backward's exp(score - lse) is 0 there (the math path's safe softmax gives
// such rows a zero output and zero gradients).
template <class A>
A logSumExp(A maximum, A sum) {
  return sum == 0 ? std::numeric_limits<A>::infinity() : maximum + std::log(sum);
}

// A zeroed buffer of n elements (at least one, so that data() is never null).
template <class A>
std::vector<A> zeros(int64_t n) {
  return std::vector<A>(static_cast<size_t>(std::max<int64_t>(n, 1)), A(0));
}

template <class T>
class ForwardPass {
 public:
  using A = at::opmath_type<T>;

  explicit ForwardPass(const ForwardArgs& args)
      : args_(args),
        g_(args.geometry),
        draws_(args.dropout, args.geometry.keyLength),
        keysT_(zeros<A>(g_.headDim * g_.keyLength)),
        values_(zeros<A>(g_.keyLength * g_.valueDim)),
        queries_(zeros<A>(kQueryTile * g_.headDim)),
        scores_(zeros<A>(kQueryTile * kKeyTile)),
        output_(zeros<A>(kQueryTile * g_.valueDim)),
        rowMax_(zeros<A>(kQueryTile)),
        rowSum_(zeros<A>(kQueryTile)),
        keep_(static_cast<size_t>(kKeyTile)) {}

  void run() {
    const int64_t group = g_.heads / g_.kvHeads;
    for (int64_t b = 0; b < g_.batch; ++b) {
      for (int64_t kvHead = 0; kvHead < g_.kvHeads; ++kvHead) {
        loadColumns<T>(args_.key, b, kvHead, 0, g_.keyLength, g_.headDim, keysT_.data(), g_.keyLength);
        loadRows<T>(args_.value, b, kvHead, 0, g_.keyLength, g_.valueDim, values_.data(), g_.valueDim);
        for (int64_t h = kvHead * group; h < (kvHead + 1) * group; ++h) {
          for (int64_t i0 = 0; i0 < g_.queryLength; i0 += kQueryTile) queryTile(b, h, i0);
        }
      }
    }
  }

 private:
  void queryTile(int64_t b, int64_t h, int64_t i0) {
    const int64_t rows = std::min(kQueryTile, g_.queryLength - i0);
    loadRows<T>(args_.query, b, h, i0, rows, g_.headDim, queries_.data(), g_.headDim);
    std::fill(rowMax_.begin(), rowMax_.end(), -std::numeric_limits<A>::infinity());
    std::fill(rowSum_.begin(), rowSum_.end(), A(0));
    std::fill(output_.begin(), output_.end(), A(0));
    const int64_t end = keyEnd(g_, i0, rows);
    for (int64_t j0 = keyBegin(g_, i0); j0 < end; j0 += kKeyTile) {
      const TileIndex tile{b, h, i0, rows, j0, std::min(kKeyTile, end - j0)};
      gemm(rows, tile.cols, g_.headDim, queries_.data(), g_.headDim, keysT_.data() + j0, g_.keyLength, scores_.data(),
           kKeyTile, false);
      finishScores<T>(scores_.data(), kKeyTile, tile, g_, args_.bias);
      for (int64_t r = 0; r < rows; ++r) probabilityRow(tile, r);
      gemm(rows, g_.valueDim, tile.cols, scores_.data(), kKeyTile, values_.data() + j0 * g_.valueDim, g_.valueDim,
           output_.data(), g_.valueDim, true);
    }
    finishTile(b, h, i0, rows);
  }

  // Softmax step for row r, the output row rescaled, then dropout.
  void probabilityRow(const TileIndex& tile, int64_t r) {
    A* row = scores_.data() + r * kKeyTile;
    const A correction = softmaxStep(row, tile.cols, rowMax_[r], rowSum_[r]);
    if (correction != A(1)) {
      A* out = output_.data() + r * g_.valueDim;
      for (int64_t c = 0; c < g_.valueDim; ++c) out[c] *= correction;
    }
    if (!draws_.enabled()) return;
    const int64_t i = tile.i0 + r;
    draws_.keepRow(static_cast<uint64_t>((tile.b * g_.heads + tile.h) * g_.queryLength + i), tile.j0, tile.cols,
                   keep_.data());
    const auto scale = static_cast<A>(draws_.keepScale());
    for (int64_t c = 0; c < tile.cols; ++c) row[c] = keep_[c] ? row[c] * scale : A(0);
    if (args_.keepMask != nullptr) {
      bool* mask = args_.keepMask + ((tile.b * g_.heads + tile.h) * g_.queryLength + i) * g_.keyLength + tile.j0;
      for (int64_t c = 0; c < tile.cols; ++c) mask[c] = keep_[c] != 0;
    }
  }

  void finishTile(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) {
      const A sum = rowSum_[r];
      const A inverse = sum == 0 ? A(0) : A(1) / sum;  // a NaN sum makes the row NaN
      A* out = output_.data() + r * g_.valueDim;
      for (int64_t c = 0; c < g_.valueDim; ++c) out[c] *= inverse;
      storeRowStat(args_.logSumExp, b, h, i0 + r, static_cast<double>(logSumExp(rowMax_[r], sum)));
    }
    storeRows<T>(output_.data(), g_.valueDim, args_.output, b, h, i0, rows, g_.valueDim);
    if (args_.keepMask != nullptr) drawUnvisitedKeepBits(b, h, i0, rows);
  }

  // The keys outside a masked tile's band were not visited: their keep bits
  // are drawn here, so that the debug mask holds every element's draw.
  void drawUnvisitedKeepBits(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    const int64_t begin = std::min(keyBegin(g_, i0), g_.keyLength);
    const int64_t end = std::max(keyEnd(g_, i0, rows), begin);
    std::vector<uint8_t> keep(static_cast<size_t>(g_.keyLength));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = (b * g_.heads + h) * g_.queryLength + i0 + r;
      bool* mask = args_.keepMask + row * g_.keyLength;
      for (const auto& [from, to] : {std::pair{int64_t{0}, begin}, std::pair{end, g_.keyLength}}) {
        if (from >= to) continue;
        draws_.keepRow(static_cast<uint64_t>(row), from, to - from, keep.data());
        for (int64_t c = 0; c < to - from; ++c) mask[from + c] = keep[static_cast<size_t>(c)] != 0;
      }
    }
  }

  const ForwardArgs& args_;
  const Geometry& g_;
  DropoutDraws draws_;
  std::vector<A> keysT_;    // headDim x keyLength
  std::vector<A> values_;   // keyLength x valueDim
  std::vector<A> queries_;  // kQueryTile x headDim
  std::vector<A> scores_;   // kQueryTile x kKeyTile
  std::vector<A> output_;   // kQueryTile x valueDim
  std::vector<A> rowMax_;
  std::vector<A> rowSum_;
  std::vector<uint8_t> keep_;
};

template <class T>
class BackwardPass {
 public:
  using A = at::opmath_type<T>;

  explicit BackwardPass(const BackwardArgs& args)
      : args_(args),
        g_(args.geometry),
        draws_(args.dropout, args.geometry.keyLength),
        keys_(zeros<A>(g_.keyLength * g_.headDim)),
        keysT_(zeros<A>(g_.headDim * g_.keyLength)),
        valuesT_(zeros<A>(g_.valueDim * g_.keyLength)),
        gradKeysT_(zeros<A>(g_.headDim * g_.keyLength)),
        gradValuesT_(zeros<A>(g_.valueDim * g_.keyLength)),
        queries_(zeros<A>(kQueryTile * g_.headDim)),
        queriesT_(zeros<A>(g_.headDim * kQueryTile)),
        gradOut_(zeros<A>(kQueryTile * g_.valueDim)),
        gradOutT_(zeros<A>(g_.valueDim * kQueryTile)),
        gradQueries_(zeros<A>(kQueryTile * g_.headDim)),
        probs_(zeros<A>(kQueryTile * kKeyTile)),
        gradScores_(zeros<A>(kQueryTile * kKeyTile)),
        dropFactors_(zeros<A>(draws_.enabled() ? kQueryTile * kKeyTile : 0)),
        dropped_(zeros<A>(draws_.enabled() ? kQueryTile * kKeyTile : 0)),
        rowDot_(zeros<A>(kQueryTile)),
        rowLse_(zeros<A>(kQueryTile)),
        keep_(static_cast<size_t>(kKeyTile)) {
    if (args.gradBias.has_value()) {
      const auto& s = args.gradBiasSizes;
      gradBias_ = zeros<A>(s[0] * s[1] * s[2] * s[3]);
    }
  }

  void run() {
    const int64_t group = g_.heads / g_.kvHeads;
    for (int64_t b = 0; b < g_.batch; ++b) {
      for (int64_t kvHead = 0; kvHead < g_.kvHeads; ++kvHead) {
        loadRows<T>(args_.key, b, kvHead, 0, g_.keyLength, g_.headDim, keys_.data(), g_.headDim);
        loadColumns<T>(args_.key, b, kvHead, 0, g_.keyLength, g_.headDim, keysT_.data(), g_.keyLength);
        loadColumns<T>(args_.value, b, kvHead, 0, g_.keyLength, g_.valueDim, valuesT_.data(), g_.keyLength);
        std::fill(gradKeysT_.begin(), gradKeysT_.end(), A(0));
        std::fill(gradValuesT_.begin(), gradValuesT_.end(), A(0));
        for (int64_t h = kvHead * group; h < (kvHead + 1) * group; ++h) {
          for (int64_t i0 = 0; i0 < g_.queryLength; i0 += kQueryTile) queryTile(b, h, i0);
        }
        storeColumns<T>(gradKeysT_.data(), g_.keyLength, args_.gradKey, b, kvHead, g_.keyLength, g_.headDim);
        storeColumns<T>(gradValuesT_.data(), g_.keyLength, args_.gradValue, b, kvHead, g_.keyLength, g_.valueDim);
      }
    }
    if (args_.gradBias.has_value()) storeGradBias();
  }

 private:
  void queryTile(int64_t b, int64_t h, int64_t i0) {
    const int64_t rows = std::min(kQueryTile, g_.queryLength - i0);
    loadRows<T>(args_.query, b, h, i0, rows, g_.headDim, queries_.data(), g_.headDim);
    loadColumns<T>(args_.query, b, h, i0, rows, g_.headDim, queriesT_.data(), kQueryTile);
    loadRows<T>(args_.gradOutput, b, h, i0, rows, g_.valueDim, gradOut_.data(), g_.valueDim);
    loadColumns<T>(args_.gradOutput, b, h, i0, rows, g_.valueDim, gradOutT_.data(), kQueryTile);
    loadRowStatistics(b, h, i0, rows);
    std::fill(gradQueries_.begin(), gradQueries_.end(), A(0));
    const int64_t end = keyEnd(g_, i0, rows);
    for (int64_t j0 = keyBegin(g_, i0); j0 < end; j0 += kKeyTile) {
      keyTile(TileIndex{b, h, i0, rows, j0, std::min(kKeyTile, end - j0)});
    }
    storeRows<T>(gradQueries_.data(), g_.headDim, args_.gradQuery, b, h, i0, rows, g_.headDim);
  }

  // rowDot = rowsum(dO * O) (the softmax backward's correction term; it also
  // holds under dropout), and each row's log-sum-exp.
  void loadRowStatistics(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    const int64_t step = args_.output.strides[3];
    for (int64_t r = 0; r < rows; ++r) {
      const T* out = rowPointer<const T>(args_.output, b, h, i0 + r);
      const A* gradOut = gradOut_.data() + r * g_.valueDim;
      A dot = 0;
      for (int64_t c = 0; c < g_.valueDim; ++c) dot += gradOut[c] * static_cast<A>(out[c * step]);
      rowDot_[r] = dot;
    }
    if (std::is_same_v<A, double> && !args_.logSumExp.isDouble) {
      recomputeLogSumExp(b, h, i0, rows);  // a saved float one is too coarse for float64
    } else {
      for (int64_t r = 0; r < rows; ++r) rowLse_[r] = static_cast<A>(loadRowStat(args_.logSumExp, b, h, i0 + r));
    }
  }

  void recomputeLogSumExp(int64_t b, int64_t h, int64_t i0, int64_t rows) {
    std::vector<A> maximum(static_cast<size_t>(rows), -std::numeric_limits<A>::infinity());
    std::vector<A> sum(static_cast<size_t>(rows), A(0));
    const int64_t end = keyEnd(g_, i0, rows);
    for (int64_t j0 = keyBegin(g_, i0); j0 < end; j0 += kKeyTile) {
      const TileIndex tile{b, h, i0, rows, j0, std::min(kKeyTile, end - j0)};
      scoreTile(tile);
      for (int64_t r = 0; r < rows; ++r) softmaxStep(probs_.data() + r * kKeyTile, tile.cols, maximum[r], sum[r]);
    }
    for (int64_t r = 0; r < rows; ++r) rowLse_[r] = logSumExp(maximum[r], sum[r]);
  }

  void scoreTile(const TileIndex& tile) {
    gemm(tile.rows, tile.cols, g_.headDim, queries_.data(), g_.headDim, keysT_.data() + tile.j0, g_.keyLength,
         probs_.data(), kKeyTile, false);
    finishScores<T>(probs_.data(), kKeyTile, tile, g_, args_.bias);
  }

  // The key tile's share of every gradient. The key and value gradients
  // accumulate transposed (dK^T += Q^T dS, dV^T += dO^T P'), so that every
  // product takes its operands as they are: no score tile is transposed.
  void keyTile(const TileIndex& tile) {
    scoreTile(tile);
    for (int64_t r = 0; r < tile.rows; ++r) expRow(probs_.data() + r * kKeyTile, tile.cols, rowLse_[r]);
    // dP (of the dropped-out probabilities) = dO V^T
    gemm(tile.rows, tile.cols, g_.valueDim, gradOut_.data(), g_.valueDim, valuesT_.data() + tile.j0, g_.keyLength,
         gradScores_.data(), kKeyTile, false);
    const A* kept = applyDropout(tile);
    gemm(g_.valueDim, tile.cols, tile.rows, gradOutT_.data(), kQueryTile, kept, kKeyTile, gradValuesT_.data() + tile.j0,
         g_.keyLength, true);
    scoreGradients(tile);
    gemm(tile.rows, g_.headDim, tile.cols, gradScores_.data(), kKeyTile, keys_.data() + tile.j0 * g_.headDim,
         g_.headDim, gradQueries_.data(), g_.headDim, true);
    gemm(g_.headDim, tile.cols, tile.rows, queriesT_.data(), kQueryTile, gradScores_.data(), kKeyTile,
         gradKeysT_.data() + tile.j0, g_.keyLength, true);
  }

  // Without dropout, the probabilities themselves. With it: the factors
  // (0 or 1 / (1 - p)) of the forward's draws, and P' = P * factor.
  const A* applyDropout(const TileIndex& tile) {
    if (!draws_.enabled()) return probs_.data();
    const auto scale = static_cast<A>(draws_.keepScale());
    for (int64_t r = 0; r < tile.rows; ++r) {
      const auto row = static_cast<uint64_t>((tile.b * g_.heads + tile.h) * g_.queryLength + tile.i0 + r);
      draws_.keepRow(row, tile.j0, tile.cols, keep_.data());
      A* factor = dropFactors_.data() + r * kKeyTile;
      A* dropped = dropped_.data() + r * kKeyTile;
      const A* p = probs_.data() + r * kKeyTile;
      for (int64_t c = 0; c < tile.cols; ++c) factor[c] = keep_[c] ? scale : A(0);
      for (int64_t c = 0; c < tile.cols; ++c) dropped[c] = p[c] * factor[c];
    }
    return dropped_.data();
  }

  // dS = P * (dP * dropout - rowDot), into gradScores_; the bias's gradient
  // takes dS, the queries' and keys' take it scaled.
  void scoreGradients(const TileIndex& tile) {
    const auto scale = static_cast<A>(g_.scale);
    for (int64_t r = 0; r < tile.rows; ++r) {
      A* grad = gradScores_.data() + r * kKeyTile;
      const A* p = probs_.data() + r * kKeyTile;
      const A dot = rowDot_[r];
      if (draws_.enabled()) {
        const A* factor = dropFactors_.data() + r * kKeyTile;
        for (int64_t c = 0; c < tile.cols; ++c) grad[c] = p[c] * (grad[c] * factor[c] - dot);
      } else {
        for (int64_t c = 0; c < tile.cols; ++c) grad[c] = p[c] * (grad[c] - dot);
      }
      if (args_.gradBias.has_value()) accumulateGradBias(grad, tile, tile.i0 + r);
      for (int64_t c = 0; c < tile.cols; ++c) grad[c] *= scale;
    }
  }

  void accumulateGradBias(const A* grad, const TileIndex& tile, int64_t i) {
    const auto& s = args_.gradBiasSizes;
    const int64_t b = s[0] == 1 ? 0 : tile.b;
    const int64_t h = s[1] == 1 ? 0 : tile.h;
    const int64_t row = s[2] == 1 ? 0 : i;
    A* dst = gradBias_.data() + ((b * s[1] + h) * s[2] + row) * s[3];
    if (s[3] == 1) {
      for (int64_t c = 0; c < tile.cols; ++c) dst[0] += grad[c];
    } else {
      for (int64_t c = 0; c < tile.cols; ++c) dst[tile.j0 + c] += grad[c];
    }
  }

  // In the bias's dtype: the query's, or float32.
  void storeGradBias() {
    const auto& s = args_.gradBiasSizes;
    const Strided4& out = *args_.gradBias;
    const bool asFloat = args_.bias->dtype == c10::ScalarType::Float;
    for (int64_t b = 0; b < s[0]; ++b) {
      for (int64_t h = 0; h < s[1]; ++h) {
        const A* src = gradBias_.data() + (b * s[1] + h) * s[2] * s[3];
        if (asFloat) {
          storeRows<float>(src, s[3], out, b, h, 0, s[2], s[3]);
        } else {
          storeRows<T>(src, s[3], out, b, h, 0, s[2], s[3]);
        }
      }
    }
  }

  const BackwardArgs& args_;
  const Geometry& g_;
  DropoutDraws draws_;
  std::vector<A> keys_;         // keyLength x headDim
  std::vector<A> keysT_;        // headDim x keyLength
  std::vector<A> valuesT_;      // valueDim x keyLength
  std::vector<A> gradKeysT_;    // headDim x keyLength, summed over the heads sharing them
  std::vector<A> gradValuesT_;  // valueDim x keyLength
  std::vector<A> queries_;      // kQueryTile x headDim
  std::vector<A> queriesT_;     // headDim x kQueryTile
  std::vector<A> gradOut_;      // kQueryTile x valueDim
  std::vector<A> gradOutT_;     // valueDim x kQueryTile
  std::vector<A> gradQueries_;  // kQueryTile x headDim
  std::vector<A> probs_;        // kQueryTile x kKeyTile
  std::vector<A> gradScores_;   // kQueryTile x kKeyTile
  std::vector<A> dropFactors_;  // kQueryTile x kKeyTile, with dropout
  std::vector<A> dropped_;      // kQueryTile x kKeyTile, with dropout
  std::vector<A> rowDot_;
  std::vector<A> rowLse_;
  std::vector<uint8_t> keep_;  // kKeyTile
  std::vector<A> gradBias_;    // gradBiasSizes, contiguous
};

template <template <class> class Pass, class Args>
void runFor(const Args& args) {
  switch (args.geometry.dtype) {
    case c10::ScalarType::Float:
      Pass<float>(args).run();
      return;
    case c10::ScalarType::Double:
      Pass<double>(args).run();
      return;
    case c10::ScalarType::BFloat16:
      Pass<c10::BFloat16>(args).run();
      return;
    case c10::ScalarType::Half:
      Pass<c10::Half>(args).run();
      return;
    default:
      TORCH_CHECK(false, "fused attention: unsupported dtype ", args.geometry.dtype);
  }
}

// One packed sequence: where its rows start and how many there are.
struct SequenceSpan {
  int64_t queryStart = 0;
  int64_t queryRows = 0;
  int64_t keyStart = 0;
  int64_t keyRows = 0;
};

void checkOffsets(const int32_t* cum, int64_t count, int64_t total, int64_t maximum, const char* name) {
  TORCH_CHECK(cum[0] >= 0, "flash attention: ", name, "[0] is ", cum[0], "; offsets must start at 0 or later");
  for (int64_t s = 0; s < count; ++s) {
    const int64_t length = int64_t{cum[s + 1]} - cum[s];
    TORCH_CHECK(length >= 0, "flash attention: ", name, " must not decrease; ", name, "[", s + 1, "] = ", cum[s + 1],
                " < ", name, "[", s, "] = ", cum[s]);
    TORCH_CHECK(length <= maximum, "flash attention: sequence ", s, " has ", length, " rows by ", name,
                ", more than the maximum ", maximum, " given");
  }
  TORCH_CHECK(cum[count] <= total, "flash attention: ", name, "[", count, "] = ", cum[count], " is past the tensor's ",
              total, " rows");
}

std::vector<SequenceSpan> sequenceSpans(const Sequences& seq) {
  checkOffsets(seq.cumQuery, seq.count, seq.totalQuery, seq.maxQuery, "cum_seq_q");
  checkOffsets(seq.cumKey, seq.count, seq.totalKey, seq.maxKey, "cum_seq_k");
  std::vector<SequenceSpan> spans(static_cast<size_t>(seq.count));
  for (int64_t s = 0; s < seq.count; ++s) {
    spans[s] = {seq.cumQuery[s], int64_t{seq.cumQuery[s + 1]} - seq.cumQuery[s], seq.cumKey[s],
                int64_t{seq.cumKey[s + 1]} - seq.cumKey[s]};
  }
  return spans;
}

// The view of `t` whose row 0 is row `start`.
Strided4 fromRow(const Strided4& t, int64_t start, size_t elementSize) {
  Strided4 view = t;
  view.data = static_cast<char*>(t.data) + start * t.strides[2] * static_cast<int64_t>(elementSize);
  return view;
}

RowStats fromRow(const RowStats& stats, int64_t start) {
  RowStats view = stats;
  const int64_t bytes = stats.isDouble ? sizeof(double) : sizeof(float);
  view.data = static_cast<char*>(stats.data) + start * stats.strides[2] * bytes;
  return view;
}

Geometry sequenceGeometry(const Geometry& g, const SequenceSpan& span) {
  Geometry one = g;
  one.batch = 1;
  one.queryLength = span.queryRows;
  one.keyLength = span.keyRows;
  return one;
}

// Which rows of a tensor of `total` rows no sequence covers.
std::vector<bool> uncoveredRows(const std::vector<SequenceSpan>& spans, int64_t total, bool queries) {
  std::vector<bool> uncovered(static_cast<size_t>(total), true);
  for (const auto& span : spans) {
    const int64_t start = queries ? span.queryStart : span.keyStart;
    const int64_t rows = queries ? span.queryRows : span.keyRows;
    std::fill_n(uncovered.begin() + start, rows, false);
  }
  return uncovered;
}

template <class T>
void zeroRowsAs(const Strided4& t, int64_t heads, int64_t cols, const std::vector<bool>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i]) continue;
    for (int64_t h = 0; h < heads; ++h) {
      T* out = rowPointer<T>(t, 0, h, static_cast<int64_t>(i));
      for (int64_t c = 0; c < cols; ++c) out[c * t.strides[3]] = T(0);
    }
  }
}

void zeroRows(const Strided4& t, c10::ScalarType dtype, int64_t heads, int64_t cols, const std::vector<bool>& rows) {
  switch (dtype) {
    case c10::ScalarType::Float:
      return zeroRowsAs<float>(t, heads, cols, rows);
    case c10::ScalarType::Double:
      return zeroRowsAs<double>(t, heads, cols, rows);
    case c10::ScalarType::BFloat16:
      return zeroRowsAs<c10::BFloat16>(t, heads, cols, rows);
    case c10::ScalarType::Half:
      return zeroRowsAs<c10::Half>(t, heads, cols, rows);
    default:
      TORCH_CHECK(false, "fused attention: unsupported dtype ", dtype);
  }
}

void forwardOverSequences(const ForwardArgs& args) {
  const Geometry& g = args.geometry;
  const auto spans = sequenceSpans(*args.sequences);
  const size_t bytes = c10::elementSize(g.dtype);
  uint64_t element = args.dropout.firstElement;
  for (const auto& span : spans) {
    ForwardArgs one = args;
    one.sequences.reset();
    one.geometry = sequenceGeometry(g, span);
    one.query = fromRow(args.query, span.queryStart, bytes);
    one.output = fromRow(args.output, span.queryStart, bytes);
    one.key = fromRow(args.key, span.keyStart, bytes);
    one.value = fromRow(args.value, span.keyStart, bytes);
    one.logSumExp = fromRow(args.logSumExp, span.queryStart);
    one.dropout.firstElement = element;
    element += static_cast<uint64_t>(g.heads * span.queryRows * span.keyRows);
    if (span.queryRows > 0) runFor<ForwardPass>(one);
  }
  const auto uncovered = uncoveredRows(spans, args.sequences->totalQuery, true);
  zeroRows(args.output, g.dtype, g.heads, g.valueDim, uncovered);
  for (size_t i = 0; i < uncovered.size(); ++i) {
    for (int64_t h = 0; uncovered[i] && h < g.heads; ++h) {
      storeRowStat(args.logSumExp, 0, h, static_cast<int64_t>(i), std::numeric_limits<double>::infinity());
    }
  }
}

void backwardOverSequences(const BackwardArgs& args) {
  const Geometry& g = args.geometry;
  const auto spans = sequenceSpans(*args.sequences);
  const size_t bytes = c10::elementSize(g.dtype);
  uint64_t element = args.dropout.firstElement;
  for (const auto& span : spans) {
    BackwardArgs one = args;
    one.sequences.reset();
    one.geometry = sequenceGeometry(g, span);
    for (auto [to, from] : {std::pair{&one.query, &args.query}, std::pair{&one.output, &args.output},
                            std::pair{&one.gradOutput, &args.gradOutput}, std::pair{&one.gradQuery, &args.gradQuery}}) {
      *to = fromRow(*from, span.queryStart, bytes);
    }
    for (auto [to, from] : {std::pair{&one.key, &args.key}, std::pair{&one.value, &args.value},
                            std::pair{&one.gradKey, &args.gradKey}, std::pair{&one.gradValue, &args.gradValue}}) {
      *to = fromRow(*from, span.keyStart, bytes);
    }
    one.logSumExp = fromRow(args.logSumExp, span.queryStart);
    one.dropout.firstElement = element;
    element += static_cast<uint64_t>(g.heads * span.queryRows * span.keyRows);
    runFor<BackwardPass>(one);
  }
  const auto queries = uncoveredRows(spans, args.sequences->totalQuery, true);
  const auto keys = uncoveredRows(spans, args.sequences->totalKey, false);
  zeroRows(args.gradQuery, g.dtype, g.heads, g.headDim, queries);
  zeroRows(args.gradKey, g.dtype, g.kvHeads, g.headDim, keys);
  zeroRows(args.gradValue, g.dtype, g.kvHeads, g.valueDim, keys);
}

}  // namespace

RowStats contiguousRowStats(void* data, const Geometry& g, bool isDouble) {
  return RowStats{data, isDouble, {g.heads * g.queryLength, g.queryLength, 1}};
}

void attentionForward(const ForwardArgs& args) {
  if (args.sequences.has_value()) return forwardOverSequences(args);
  runFor<ForwardPass>(args);
}

void attentionBackward(const BackwardArgs& args) {
  if (args.sequences.has_value()) return backwardOverSequences(args);
  runFor<BackwardPass>(args);
}

}  // namespace openreg::backend::attention
