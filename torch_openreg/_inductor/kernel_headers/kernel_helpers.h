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
// kernel's time on openreg. With AVX2 eight lanes run the rounds together.
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
#define OPENREG_MASK_STORE_SPECIALISED 1
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
#define OPENREG_MASK_STORE_SPECIALISED 1
#endif

namespace openreg_kernel {

#if defined(__AVX2__)
// Low and high 32 bits of the eight 32x32-bit products of `words` and `factor`.
inline void multiplyWide(__m256i words, __m256i factor, __m256i* low, __m256i* high) {
  const __m256i even = _mm256_mul_epu32(words, factor);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(words, 32), factor);
  *low = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  *high = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

inline void uniformEight(uint32_t seed, const uint32_t* offsets, float* out) {
  const __m256i kFactorA = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i kFactorB = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  __m256i counter0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets));
  __m256i counter1 = _mm256_setzero_si256();
  __m256i counter2 = counter1;
  __m256i counter3 = counter1;
  uint32_t key0 = seed;
  uint32_t key1 = 0;
  for (int round = 0; round < 10; ++round) {
    __m256i low0, high0, low1, high1;
    multiplyWide(counter0, kFactorA, &low0, &high0);
    multiplyWide(counter2, kFactorB, &low1, &high1);
    counter0 = _mm256_xor_si256(_mm256_xor_si256(high1, counter1), _mm256_set1_epi32(static_cast<int>(key0)));
    counter2 = _mm256_xor_si256(_mm256_xor_si256(high0, counter3), _mm256_set1_epi32(static_cast<int>(key1)));
    counter1 = low1;
    counter3 = low0;
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  // As uint32_to_uniform_float: 31 bits, exact in int32, times the same scale.
  const __m256 bits = _mm256_cvtepi32_ps(_mm256_and_si256(counter0, _mm256_set1_epi32(0x7FFFFFFF)));
  _mm256_storeu_ps(out, _mm256_mul_ps(bits, _mm256_set1_ps(4.6566127342e-10f)));
}
#endif

// `Lanes` values: out[i] = normalized_rand_cpu(seed, offsets[i]), with the same
// truncation of seed and offsets to 32 bits as that function's parameters.
template <int Lanes, typename Seed, typename Offset>
inline void uniformLanes(Seed seed, const Offset* offsets, float* out) {
#if defined(__AVX2__)
  if constexpr (Lanes % 8 == 0) {
    uint32_t words[Lanes];
    for (int lane = 0; lane < Lanes; ++lane) {
      words[lane] = static_cast<uint32_t>(offsets[lane]);
    }
    for (int lane = 0; lane < Lanes; lane += 8) {
      uniformEight(static_cast<uint32_t>(seed), words + lane, out + lane);
    }
    return;
  }
#endif
  for (int lane = 0; lane < Lanes; ++lane) {
    out[lane] = normalized_rand_cpu(static_cast<uint32_t>(seed), static_cast<uint32_t>(offsets[lane]));
  }
}

}  // namespace openreg_kernel
