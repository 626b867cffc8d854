"""What openreg kernels change in Inductor's C++: one thread, random numbers and mask conversions by the vector.

The helpers must give what Inductor's CPU kernels give, bit for bit: they are
compiled here by Inductor's own C++ code cache, with the flags and ISA its
kernels get, and compared with ``normalized_rand_cpu`` and with ATen's generic
mask conversion.
"""

from __future__ import annotations

import ctypes

import pytest
import torch
import torch._inductor.config as inductor_config
import torch.nn.functional as F
from compile_support import DEVICE, compiled_and_code
from torch._inductor import codecache
from torch._inductor.codecache import CppCodeCache
from torch._inductor.cpu_vec_isa import VecAVX2, VecAVX512, pick_vec_isa, valid_vec_isa_list

from torch_openreg._inductor.kernel_codegen import UNIFORM_LANES, with_kernel_headers

_CHECKER = """
#include <torch/csrc/inductor/cpp_prefix.h>
#include <sys/mman.h>
#include <unistd.h>
extern "C" int64_t openreg_uniform_mismatches(int64_t seed, int64_t first, int64_t stride, int64_t count) {
  int64_t mismatches = 0;
  for (int64_t start = 0; start < count; start += 32) {
    int64_t offsets[32];
    int32_t narrow[32];  // the 32-bit offsets a kernel indexing with int32 passes
    int16_t tiny[16];    // any other width goes one lane at a time
    for (int lane = 0; lane < 32; ++lane) {
      offsets[lane] = first + (start + lane) * stride;
      narrow[lane] = static_cast<int32_t>(offsets[lane]);
      if (lane < 16) tiny[lane] = static_cast<int16_t>(offsets[lane]);
    }
    float eight[8], sixteen[16], thirtyTwo[32], narrowSixteen[16], tinySixteen[16], one[1];
    openreg_kernel::uniformLanes<16>(seed, tiny, tinySixteen);
    for (int lane = 0; lane < 16; ++lane) {
      mismatches += tinySixteen[lane] != normalized_rand_cpu(seed, static_cast<uint32_t>(tiny[lane]));
    }
    openreg_kernel::uniformLanes<8>(seed, offsets, eight);
    openreg_kernel::uniformLanes<16>(seed, offsets, sixteen);
    openreg_kernel::uniformLanes<32>(seed, offsets, thirtyTwo);
    openreg_kernel::uniformLanes<16>(seed, narrow, narrowSixteen);
    openreg_kernel::uniformLanes<1>(seed, offsets, one);
    for (int lane = 0; lane < 32; ++lane) {
      float expected = normalized_rand_cpu(seed, offsets[lane]);
      mismatches += thirtyTwo[lane] != expected;
      mismatches += lane < 16 && (sixteen[lane] != expected || narrowSixteen[lane] != expected);
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
// Bools loaded as float lane masks: every mask of the vector's lanes and short
// counts, against the lanes ATen's generic load gives (all ones where set,
// zero elsewhere). The bools end where an unreadable page begins, so reading
// past `count` faults.
extern "C" int64_t openreg_mask_load_mismatches() {
  constexpr int kLanes = at::vec::Vectorized<float>::size();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mapped = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return -1;
  char* region = static_cast<char*>(mapped);
  if (mprotect(region + page, page, PROT_NONE) != 0) return -1;
  int64_t mismatches = 0;
  for (int count : {kLanes, 5, 1, 0}) {
    bool* bools = reinterpret_cast<bool*>(region + page - count);
    for (int bits = 0; bits < (1 << count); ++bits) {
      for (int lane = 0; lane < count; ++lane) bools[lane] = (bits >> lane) & 1;
      uint32_t loaded[kLanes], loadedConst[kLanes], loadedFull[kLanes];
      at::vec::Vectorized<float>(at::vec::VecMask<float, 1>::from(bools, count)).store(loaded);
      const bool* constBools = bools;
      at::vec::Vectorized<float>(at::vec::VecMask<float, 1>::from(constBools, count)).store(loadedConst);
      if (count == kLanes) at::vec::Vectorized<float>(at::vec::VecMask<float, 1>::from(constBools)).store(loadedFull);
      for (int lane = 0; lane < kLanes; ++lane) {
        const uint32_t expected = lane < count && ((bits >> lane) & 1) ? 0xFFFFFFFFu : 0u;
        mismatches += loaded[lane] != expected;
        mismatches += loadedConst[lane] != expected;
        mismatches += count == kLanes && loadedFull[lane] != expected;
      }
    }
  }
  munmap(mapped, 2 * page);
  return mismatches;
}
extern "C" int openreg_mask_conversions_specialised() {
#if defined(OPENREG_MASK_CONVERSIONS_SPECIALISED)
  return 1;
#else
  return 0;
#endif
}
// The widest vector of lanes the helper draws together on this ISA.
extern "C" int openreg_uniform_vector_lanes() {
#if defined(__AVX512F__)
  return 16;
#elif defined(__AVX2__)
  return 8;
#else
  return 0;
#endif
}
"""


def _checker(isa=None, monkeypatch=None):
    """The checker compiled by Inductor's code cache for this machine's ISA, or for ``isa``."""
    extra_flags: tuple[str, ...] = ()
    if isa is not None:
        monkeypatch.setattr(codecache, "pick_vec_isa", lambda: isa)
        # Inductor compiles with -march=native: a narrower ISA's form needs the wider one off.
        extra_flags = () if isinstance(isa, VecAVX512) else ("-mno-avx512f",)
    source = with_kernel_headers(_CHECKER)
    library = CppCodeCache.load(source, "cpu", extra_flags=extra_flags)
    library.openreg_uniform_mismatches.restype = ctypes.c_int64
    library.openreg_uniform_mismatches.argtypes = [ctypes.c_int64] * 4
    library.openreg_mask_store_mismatches.restype = ctypes.c_int64
    library.openreg_mask_load_mismatches.restype = ctypes.c_int64
    return library


def _expected_vector_lanes(isa) -> int:
    return 16 if isinstance(isa, VecAVX512) else 8 if isinstance(isa, VecAVX2) else 0


# Every vector ISA this machine runs that the helper has a form for (an AVX-512
# machine checks the AVX2 form too).
_VECTOR_ISAS = [isa for isa in valid_vec_isa_list() if _expected_vector_lanes(isa)]


def test_this_machine_has_a_vector_isa_to_check():
    assert _VECTOR_ISAS, f"no AVX2 or AVX-512 here ({valid_vec_isa_list()}): the vector forms go unchecked"


@pytest.mark.parametrize("isa", _VECTOR_ISAS, ids=str)
def test_uniform_lanes_equal_inductors_cpu_numbers_bit_for_bit(isa, monkeypatch):
    library = _checker(isa, monkeypatch)
    assert library.openreg_uniform_vector_lanes() == _expected_vector_lanes(isa)
    cases = [
        (0, 0, 1),  # consecutive offsets, as an elementwise loop draws them
        (123456789, 1000, 1),
        ((1 << 40) + 77, (1 << 32) - 40, 1),  # seed and offsets wider than 32 bits are truncated alike
        (-5, 3, 7),  # a negative seed; strided offsets
        (2**63 - 1, 2**62, -3),
    ]
    for seed, first, stride in cases:
        assert library.openreg_uniform_mismatches(seed, first, stride, 4096) == 0, (seed, first, stride)


def test_kernels_for_this_machine_draw_by_its_widest_vector():
    assert _checker().openreg_uniform_vector_lanes() == _expected_vector_lanes(pick_vec_isa())


@pytest.mark.parametrize("isa", _VECTOR_ISAS, ids=str)
def test_float_masks_store_and_load_as_atens_generic_conversions_do(isa, monkeypatch):
    library = _checker(isa, monkeypatch)
    assert library.openreg_mask_conversions_specialised() == 1
    assert library.openreg_mask_store_mismatches() == 0
    assert library.openreg_mask_load_mismatches() == 0


def test_kernels_for_this_machine_get_the_fast_mask_conversions():
    # AVX2 and AVX-512 (AMX's too) have one.
    expected = int(isinstance(pick_vec_isa(), (VecAVX2, VecAVX512)))
    assert _checker().openreg_mask_conversions_specialised() == expected


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
