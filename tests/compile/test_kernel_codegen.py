"""What openreg kernels change in Inductor's C++: one thread, random numbers and mask stores by the vector.

The helpers must give what Inductor's CPU kernels give, bit for bit: they are
compiled here by Inductor's own C++ code cache, with the flags and ISA its
kernels get, and compared with ``normalized_rand_cpu`` and with ATen's generic
mask conversion.
"""

from __future__ import annotations

import ctypes

import torch
import torch._inductor.config as inductor_config
import torch.nn.functional as F
from compile_support import DEVICE, compiled_and_code
from torch._inductor.codecache import CppCodeCache
from torch._inductor.cpu_vec_isa import VecAVX2, VecAVX512, pick_vec_isa

from torch_openreg._inductor.kernel_codegen import UNIFORM_LANES, with_kernel_headers

_CHECKER = """
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C" int64_t openreg_uniform_mismatches(int64_t seed, int64_t first, int64_t stride, int64_t count) {
  int64_t mismatches = 0;
  for (int64_t start = 0; start < count; start += 16) {
    int64_t offsets[16];
    for (int lane = 0; lane < 16; ++lane) offsets[lane] = first + (start + lane) * stride;
    float eight[8], sixteen[16], one[1];
    openreg_kernel::uniformLanes<8>(seed, offsets, eight);
    openreg_kernel::uniformLanes<16>(seed, offsets, sixteen);
    openreg_kernel::uniformLanes<1>(seed, offsets, one);
    for (int lane = 0; lane < 16; ++lane) {
      float expected = normalized_rand_cpu(seed, offsets[lane]);
      mismatches += sixteen[lane] != expected;
      mismatches += lane < 8 && eight[lane] != expected;
    }
    mismatches += one[0] != normalized_rand_cpu(seed, offsets[0]);
  }
  return mismatches;
}
// Stores of float lane masks as bools: the helper's bytes against ATen's generic
// conversion, for every mask of the vector's lanes (8 or 16) and a short count.
extern "C" int64_t openreg_mask_store_mismatches() {
  constexpr int kLanes = at::vec::Vectorized<float>::size();
  int64_t mismatches = 0;
  for (int bits = 0; bits < (1 << kLanes); ++bits) {
    float lanes[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) lanes[lane] = (bits >> lane) & 1 ? 1.0f : 0.0f;
    auto values = at::vec::Vectorized<float>::loadu(lanes);
    auto mask = at::vec::VecMask<float, 1>(values != at::vec::Vectorized<float>(0.0f));
    for (int count : {kLanes, 5}) {
      bool fast[kLanes] = {}, generic[kLanes] = {};
      mask.store(fast, count);
      auto widened = at::vec::VecMaskCast<bool, 1, float, 1>::apply(mask);
      auto ones = at::vec::Vectorized<bool>::blendv(at::vec::Vectorized<bool>(false), at::vec::Vectorized<bool>(true),
                                                    at::vec::Vectorized<bool>(widened));
      ones.store(generic, count);
      mismatches += std::memcmp(fast, generic, sizeof(fast)) != 0;
      for (int lane = 0; lane < kLanes; ++lane) mismatches += fast[lane] != (lane < count && ((bits >> lane) & 1));
    }
  }
  return mismatches;
}
extern "C" int openreg_mask_store_specialised() {
#if defined(OPENREG_MASK_STORE_SPECIALISED)
  return 1;
#else
  return 0;
#endif
}
extern "C" int openreg_uniform_vectorised() {
#if defined(__AVX2__)
  return 1;
#else
  return 0;
#endif
}
"""


def _checker():
    source = with_kernel_headers(_CHECKER)
    library = CppCodeCache.load(source, "cpu")
    library.openreg_uniform_mismatches.restype = ctypes.c_int64
    library.openreg_uniform_mismatches.argtypes = [ctypes.c_int64] * 4
    library.openreg_mask_store_mismatches.restype = ctypes.c_int64
    return library


def test_uniform_lanes_equal_inductors_cpu_numbers_bit_for_bit():
    library = _checker()
    # Inductor's kernels for this machine's ISA take the AVX2 path when it has one.
    assert library.openreg_uniform_vectorised() == int(isinstance(pick_vec_isa(), (VecAVX2, VecAVX512)))
    cases = [
        (0, 0, 1),  # consecutive offsets, as an elementwise loop draws them
        (123456789, 1000, 1),
        ((1 << 40) + 77, (1 << 32) - 40, 1),  # seed and offsets wider than 32 bits are truncated alike
        (-5, 3, 7),  # a negative seed; strided offsets
        (2**63 - 1, 2**62, -3),
    ]
    for seed, first, stride in cases:
        assert library.openreg_uniform_mismatches(seed, first, stride, 4096) == 0, (seed, first, stride)


def test_float_masks_store_as_atens_generic_conversion_does():
    library = _checker()
    # The fast form is what this machine's kernels get (AVX2 and AVX-512, AMX's too, have one).
    assert library.openreg_mask_store_specialised() == int(isinstance(pick_vec_isa(), (VecAVX2, VecAVX512)))
    assert library.openreg_mask_store_mismatches() == 0


def test_openreg_kernels_are_single_threaded_and_draw_by_the_vector():
    def fn(x):
        return F.dropout(x, p=0.5, training=True) * 2.0

    with inductor_config.patch({"cpp.threads": 2}):
        result, sources = compiled_and_code(fn, torch.ones(64, 1000, device=DEVICE))
        _, cpu_sources = compiled_and_code(fn, torch.ones(64, 1000))
    code = "".join(sources)
    assert f"{UNIFORM_LANES}<" in code
    assert "struct VecMaskTo<bool, 1, float, 1>" in code  # the helpers are pasted into the kernel
    assert "#pragma omp" not in code
    # The CPU graph in the same process keeps Inductor's behaviour.
    cpu_code = "".join(cpu_sources)
    assert "#pragma omp" in cpu_code and UNIFORM_LANES not in cpu_code
    kept = (result != 0).float().mean().item()
    assert 0.47 < kept < 0.53
    assert set(result.unique().cpu().tolist()) == {0.0, 4.0}
