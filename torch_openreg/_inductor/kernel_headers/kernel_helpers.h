// Helpers pasted into every openreg kernel, after cpp_prefix.h (so the kernel
// cache keys on this text): faster forms of two things Inductor's vectorised
// loops do often, giving the same results.
//
// Uniform random floats for a vector of lanes, equal bit for bit to Inductor's
// CPU `normalized_rand_cpu(seed, offset)` in each lane: the first word of
// Philox-4x32-10 at counter {offset, 0, 0, 0} with key {seed, 0}.
//
// Inductor's vectorised loops call the scalar function once per lane; each
// call is ten dependent rounds, which made dropout the largest part of a fused
// kernel's time on openreg. With AVX2 or AVX-512 a vector of lanes runs the
// rounds together.
#if defined(__AVX2__) || defined(CPU_CAPABILITY_AVX512)
#include <immintrin.h>
#endif

#if defined(CPU_CAPABILITY_AVX2) && !defined(_MSC_VER)
// A float lane mask stored as bools (a dropout mask kept for the backward).
// ATen's generic conversion widens it to a 32-lane bool vector one lane at a
// time and blends with a branch per lane: on random masks the branches miss,
// and the store cost more than the rest of a fused dropout. Same bytes
// (1 or 0 per lane, the rest zero), from the lanes' sign bits.
namespace at::vec {
inline namespace CPU_CAPABILITY {
template <>
struct VecMaskTo<bool, 1, float, 1> {
  static inline VecMask<bool, 1> apply(const VecMask<float, 1>& mask) {
    uint64_t bytes = static_cast<uint64_t>(_mm256_movemask_ps(Vectorized<float>(mask)));
    bytes = (bytes | (bytes << 28)) & 0x0000000F0000000FULL;  // bits 0-3 and 4-7 to two words
    bytes = (bytes | (bytes << 14)) & 0x0003000300030003ULL;  // then pairs to four half-words
    bytes = (bytes | (bytes << 7)) & 0x0101010101010101ULL;   // then one bit to each byte
    __at_align__ bool lanes[Vectorized<bool>::size()] = {};
    std::memcpy(lanes, &bytes, sizeof(bytes));
    return VecMask<bool, 1>(Vectorized<bool>::loadu(lanes));
  }
};
}  // namespace CPU_CAPABILITY
}  // namespace at::vec
namespace openreg_kernel {
// The first `count` of eight bools (none past them is read) as a float lane
// mask: all ones where set, zero elsewhere.
inline at::vec::Vectorized<float> boolsAsLaneMask(const bool* bools, int count) {
  __m128i bytes = _mm_setzero_si128();
  if (count >= 8) {
    bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bools));
  } else if (count > 0) {
    uint64_t word = 0;
    std::memcpy(&word, bools, static_cast<size_t>(count));
    bytes = _mm_cvtsi64_si128(static_cast<long long>(word));
  }
  const __m256i unset = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_setzero_si256());
  return _mm256_castsi256_ps(_mm256_xor_si256(unset, _mm256_set1_epi32(-1)));
}
}  // namespace openreg_kernel
#define OPENREG_MASK_CONVERSIONS_SPECIALISED 1
#elif defined(CPU_CAPABILITY_AVX512) && !defined(_MSC_VER)
// The same for sixteen lanes (AVX-512 kernels, where ATen's generic blend is
// the same per-lane branch): each lane's sign bit, expanded to a 0/1 byte.
namespace at::vec {
inline namespace CPU_CAPABILITY {
template <>
struct VecMaskTo<bool, 1, float, 1> {
  static inline VecMask<bool, 1> apply(const VecMask<float, 1>& mask) {
    const __mmask16 signs = _mm512_movepi32_mask(_mm512_castps_si512(Vectorized<float>(mask)));
    __at_align__ bool lanes[Vectorized<bool>::size()] = {};
    _mm_storeu_si128(reinterpret_cast<__m128i*>(lanes), _mm_maskz_set1_epi8(signs, 1));
    return VecMask<bool, 1>(Vectorized<bool>::loadu(lanes));
  }
};
}  // namespace CPU_CAPABILITY
}  // namespace at::vec
namespace openreg_kernel {
// The first `count` of sixteen bools (a masked load: none past them is read)
// as a float lane mask: all ones where set, zero elsewhere.
inline at::vec::Vectorized<float> boolsAsLaneMask(const bool* bools, int count) {
  const __mmask16 loaded = count >= 16 ? 0xFFFF : count > 0 ? static_cast<__mmask16>((1u << count) - 1) : 0;
  const __m128i bytes = _mm_maskz_loadu_epi8(loaded, bools);
  return _mm512_castsi512_ps(_mm512_movm_epi32(_mm_test_epi8_mask(bytes, bytes)));
}
}  // namespace openreg_kernel
#define OPENREG_MASK_CONVERSIONS_SPECIALISED 1
#endif

#if defined(OPENREG_MASK_CONVERSIONS_SPECIALISED)
// Bools loaded as a float lane mask (a dropout mask read back by the forward's
// and the backward's fused kernels). ATen's generic load sets one lane at a
// time, with a branch each, into memory it then reads as a vector, which
// stalls on the stores; this gives the same lanes from one load.
namespace at::vec {
inline namespace CPU_CAPABILITY {
template <>
template <>
inline VecMask<float, 1> VecMask<float, 1>::from<const bool>(const bool* bools, int count) {
  return openreg_kernel::boolsAsLaneMask(bools, count);
}
template <>
template <>
inline VecMask<float, 1> VecMask<float, 1>::from<bool>(bool* bools, int count) {
  return openreg_kernel::boolsAsLaneMask(bools, count);
}
template <>
template <>
inline VecMask<float, 1> VecMask<float, 1>::from<const bool>(const bool* bools) {
  return openreg_kernel::boolsAsLaneMask(bools, Vectorized<float>::size());
}
template <>
template <>
inline VecMask<float, 1> VecMask<float, 1>::from<bool>(bool* bools) {
  return openreg_kernel::boolsAsLaneMask(bools, Vectorized<float>::size());
}
}  // namespace CPU_CAPABILITY
}  // namespace at::vec
#endif

namespace openreg_kernel {

// Philox's rounds on vectors that hold each 32-bit word in the low half of a
// 64-bit lane: one unsigned multiply gives both halves of a word's product, and
// the next multiply ignores the upper half the xor leaves there, so a round is
// a multiply, a shift and an xor per word. The rounds' latency, not their
// instructions, bounds one vector, so each call runs two vectors together.
// `Wide` is __m256i (four lanes, AVX2) or __m512i (eight, AVX-512).
#if defined(__AVX2__)
inline void broadcast64(uint64_t value, __m256i* out) { *out = _mm256_set1_epi64x(static_cast<long long>(value)); }
inline __m256i productOfLow32(__m256i words, __m256i factor) { return _mm256_mul_epu32(words, factor); }
inline __m256i upper32(__m256i products) { return _mm256_srli_epi64(products, 32); }
inline __m256i xor3(__m256i a, __m256i b, __m256i c) { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); }

// Four offsets, one per 64-bit lane (only their low 32 bits count).
template <typename Offset>
inline void loadOffsets(const Offset* offsets, __m256i* out) {
  if constexpr (sizeof(Offset) == 8) {
    *out = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets));
  } else {
    *out = _mm256_cvtepu32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(offsets)));
  }
}

// As uint32_to_uniform_float: 31 bits, exact in int32, times the same scale.
inline void storeUniform(__m256i first, __m256i second, float* out) {
  const __m256i evenWords = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  const __m256i words = _mm256_blend_epi32(_mm256_permutevar8x32_epi32(first, evenWords),
                                           _mm256_permutevar8x32_epi32(second, evenWords), 0xF0);
  const __m256 bits = _mm256_cvtepi32_ps(_mm256_and_si256(words, _mm256_set1_epi32(0x7FFFFFFF)));
  _mm256_storeu_ps(out, _mm256_mul_ps(bits, _mm256_set1_ps(4.6566127342e-10f)));
}
#endif

#if defined(__AVX512F__)
inline void broadcast64(uint64_t value, __m512i* out) { *out = _mm512_set1_epi64(static_cast<long long>(value)); }
inline __m512i productOfLow32(__m512i words, __m512i factor) { return _mm512_mul_epu32(words, factor); }
inline __m512i upper32(__m512i products) { return _mm512_srli_epi64(products, 32); }
inline __m512i xor3(__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi64(a, b, c, 0x96); }

template <typename Offset>
inline void loadOffsets(const Offset* offsets, __m512i* out) {
  if constexpr (sizeof(Offset) == 8) {
    *out = _mm512_loadu_si512(offsets);
  } else {
    *out = _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets)));
  }
}

inline void storeUniform(__m512i first, __m512i second, float* out) {
  const __m512i words =
      _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(first)), _mm512_cvtepi64_epi32(second), 1);
  const __m512 bits = _mm512_cvtepi32_ps(_mm512_and_si512(words, _mm512_set1_epi32(0x7FFFFFFF)));
  _mm512_storeu_ps(out, _mm512_mul_ps(bits, _mm512_set1_ps(4.6566127342e-10f)));
}
#endif

#if defined(__AVX2__)
template <typename Wide>
struct PhiloxCounter {
  Wide word0, word1, word2, word3;
};

template <typename Wide>
inline void philoxRound(PhiloxCounter<Wide>* counter, Wide key0, Wide key1) {
  Wide factorA, factorB;
  broadcast64(0xD2511F53u, &factorA);
  broadcast64(0xCD9E8D57u, &factorB);
  const Wide product0 = productOfLow32(counter->word0, factorA);
  const Wide product2 = productOfLow32(counter->word2, factorB);
  counter->word0 = xor3(upper32(product2), counter->word1, key0);
  counter->word2 = xor3(upper32(product0), counter->word3, key1);
  counter->word1 = product2;
  counter->word3 = product0;
}

// 2 * sizeof(Wide) / 8 uniform floats, for offsets[0], offsets[1], ...
template <typename Wide, typename Offset>
inline void uniformTwoVectors(uint32_t seed, const Offset* offsets, float* out) {
  constexpr int kLanes = sizeof(Wide) / sizeof(uint64_t);
  Wide zero;
  broadcast64(0, &zero);
  PhiloxCounter<Wide> first{zero, zero, zero, zero};
  PhiloxCounter<Wide> second{zero, zero, zero, zero};
  loadOffsets(offsets, &first.word0);
  loadOffsets(offsets + kLanes, &second.word0);
  uint32_t key0 = seed;
  uint32_t key1 = 0;
  for (int round = 0; round < 10; ++round) {
    Wide roundKey0, roundKey1;
    broadcast64(key0, &roundKey0);
    broadcast64(key1, &roundKey1);
    philoxRound(&first, roundKey0, roundKey1);
    philoxRound(&second, roundKey0, roundKey1);
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  storeUniform(first.word0, second.word0, out);
}
#endif

// `Lanes` values: out[i] = normalized_rand_cpu(seed, offsets[i]), with the same
// truncation of seed and offsets to 32 bits as that function's parameters.
// Offsets of 32 or 64 bits go by the vector; others one lane at a time.
template <int Lanes, typename Seed, typename Offset>
inline void uniformLanes(Seed seed, const Offset* offsets, float* out) {
  const auto seed32 = static_cast<uint32_t>(seed);
  [[maybe_unused]] constexpr bool kVectorOffsets = sizeof(Offset) == 4 || sizeof(Offset) == 8;
#if defined(__AVX512F__)
  if constexpr (kVectorOffsets && Lanes % 16 == 0) {
    for (int lane = 0; lane < Lanes; lane += 16) uniformTwoVectors<__m512i>(seed32, offsets + lane, out + lane);
    return;
  }
#endif
#if defined(__AVX2__)
  if constexpr (kVectorOffsets && Lanes % 8 == 0) {
    for (int lane = 0; lane < Lanes; lane += 8) uniformTwoVectors<__m256i>(seed32, offsets + lane, out + lane);
    return;
  }
#endif
  for (int lane = 0; lane < Lanes; ++lane) {
    out[lane] = normalized_rand_cpu(seed32, static_cast<uint32_t>(offsets[lane]));
  }
}

}  // namespace openreg_kernel
