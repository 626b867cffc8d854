"""Where an openreg kernel's C++ differs from the same loop generated for CPU.

- One thread. A kernel runs on its stream's executor thread, as a GPU kernel
  runs on the device: an OpenMP team inside it would take the host's other
  cores from the thread that launches the next kernels. Profiled beside other
  work on two cores, the demo GPT's fused kernels were slower with a team.
- Uniform random numbers by the vector. Inductor's vectorised loops call
  the scalar ``normalized_rand_cpu`` once per lane (ten dependent Philox rounds
  each); ``kernel_headers/kernel_helpers.h`` computes the same numbers, bit for
  bit, for a vector of lanes together.
- Float lane masks stored as bools and loaded back (dropout's mask) without
  ATen's per-lane branches (``kernel_headers/kernel_helpers.h``, AVX2 and
  AVX-512 specialisations).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from torch._inductor import config
from torch._inductor.codegen.common import BracesBuffer
from torch._inductor.codegen.cpp import CppVecOverrides
from torch._inductor.codegen.cpp_utils import DTYPE_TO_CPP
from torch._inductor.virtualized import V

UNIFORM_LANES = "openreg_kernel::uniformLanes"
_HEADER = (Path(__file__).resolve().parent / "kernel_headers" / "kernel_helpers.h").read_text()
_PREFIX_INCLUDE = "#include <torch/csrc/inductor/cpp_prefix.h>\n"


def _vector_rand(seed, offset):
    """``ops.rand`` of a vectorised loop: one call for all lanes, as codegen_rand lays the lambda out."""
    lanes = V.kernel.tiling_factor
    vectors = V.kernel._get_num_vectors(dtype=torch.float32)
    loaded = "at::vec::Vectorized<float>" if vectors == 1 else f"at::vec::VectorizedN<float, {vectors}>"
    code = BracesBuffer()
    code.writeline("[&]()")
    with code.indent():
        code.writeline(f"{DTYPE_TO_CPP[offset.dtype]} offset[{lanes}];")
        code.writeline(f"float result[{lanes}];")
        code.writeline(f"{offset}.store(offset);")
        code.writeline(f"{UNIFORM_LANES}<{lanes}>({seed}, offset, result);")
        code.writeline(f"return {loaded}::loadu(result);")
    code.writeline("()")
    return code


@contextlib.contextmanager
def openreg_kernel_codegen():
    """Inductor's C++ code generation as openreg kernels want it, for the nodes generated inside."""
    saved_rand = CppVecOverrides.__dict__["rand"]
    CppVecOverrides.rand = staticmethod(_vector_rand)
    try:
        with config.patch({"cpp.threads": 1}):
            yield
    finally:
        CppVecOverrides.rand = saved_rand


def with_kernel_headers(source: str) -> str:
    """``source`` with openreg's kernel helpers pasted after Inductor's prefix (so the kernel cache keys on them)."""
    at = source.find(_PREFIX_INCLUDE)
    if at < 0:
        raise RuntimeError("openreg: a generated kernel does not include Inductor's cpp_prefix.h")
    end = at + len(_PREFIX_INCLUDE)
    return source[:end] + _HEADER + source[end:]
