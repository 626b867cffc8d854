"""Helpers the compile tests import."""

from __future__ import annotations

import re

import torch
from torch._inductor.utils import run_and_get_code

DEVICE = torch.device("openreg", 0)

# Tolerances by dtype, as torch.testing uses for these dtypes.
TOLERANCES = {
    torch.float32: {"atol": 1e-5, "rtol": 1.3e-6},
    torch.float16: {"atol": 1e-3, "rtol": 1e-3},
    torch.bfloat16: {"atol": 1e-2, "rtol": 1.6e-2},
}


def to_device(value, device=DEVICE):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def compiled_and_code(fn, *args, **compile_kwargs):
    """(result, generated wrapper sources) of the first compiled call of `fn` on `args`."""
    compiled = torch.compile(fn, **compile_kwargs)
    result, sources = run_and_get_code(compiled, *args)
    return result, sources


LAUNCH = re.compile(r"^\s*(cpp_fused_\w+)\.launch\((\d+)", re.MULTILINE)
DEFINITION = re.compile(r"^(cpp_fused_\w+) = openreg_kernel\(", re.MULTILINE)
CPU_DEFINITION = re.compile(r"^(cpp_fused_\w+) = async_compile\.cpp_pybinding\(", re.MULTILINE)


def launched_kernels(sources: list[str]) -> list[tuple[str, int]]:
    """(kernel, device index) of every openreg launch in the generated code."""
    return [(m[1], int(m[2])) for code in sources for m in LAUNCH.finditer(code)]


def assert_launches_only(sources: list[str]) -> list[str]:
    """Every openreg kernel is defined as an openreg kernel and launched, never called; returns their names."""
    defined = [name for code in sources for name in DEFINITION.findall(code)]
    assert defined, "no openreg kernel was generated"
    for code in sources:
        for name in DEFINITION.findall(code):
            assert re.search(rf"^\s*{name}\.launch\(", code, re.MULTILINE), f"{name} is never launched"
            assert not re.search(rf"^\s*{name}\(", code, re.MULTILINE), f"{name} is called on the host"
    return defined
