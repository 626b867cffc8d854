"""What generated wrapper code calls: compile one openreg kernel and return its launcher.

Every openreg kernel's source ends with an entry point of one signature
(:func:`entry_point_source`), so the C++ launcher (``torch_openreg._C.CompiledKernel``)
can queue any of them on a stream with its arguments captured by value. The
source is compiled by Inductor's own C++ code cache, at the optimisation level
it uses for CPU kernels, in its worker pool when it has one.
"""

from __future__ import annotations

import ctypes
import os

from torch._inductor.async_compile import AsyncCompile, get_compile_threads
from torch._inductor.codecache import CppCodeCache, LambdaFuture, _get_cpp_prefix_header
from torch._inductor.utils import clear_on_fresh_cache

from torch_openreg._lib import load_extension

ENTRY_NAME = "openreg_kernel_entry"

# The C type of each slot the launcher fills (torch_openreg._C.CompiledKernel).
_SLOT_TYPEDEF = "typedef union { void* pointer; int64_t integer; double real; } openreg_kernel_arg;"


@clear_on_fresh_cache
class OpenRegKernelCodeCache(CppCodeCache):
    """Inductor's C++ code cache, built as its CPU kernels are: no libtorch, the kernel prefix precompiled."""

    cache: dict = {}
    cache_clear = staticmethod(cache.clear)
    cpp_compile_command_flags = {"include_pytorch": False, "shared": True}

    @classmethod
    def _get_uncompiled_header(cls, device: str) -> str | None:
        return _get_cpp_prefix_header(device)


def _slot_read(index: int, cpp_type: str) -> str:
    if cpp_type.endswith("*"):
        return f"({cpp_type})(args[{index}].pointer)"
    if "float" in cpp_type or "double" in cpp_type:
        return f"({cpp_type.replace('const ', '')})(args[{index}].real)"
    return f"({cpp_type.replace('const ', '')})(args[{index}].integer)"


def entry_point_source(arg_types: list[str]) -> str:
    """C++ appended to a kernel: unpacks the launcher's slots, calls ``kernel``, reports what it throws."""
    call = ", ".join(_slot_read(i, t) for i, t in enumerate(arg_types))
    return f"""
#include <cstdio>
#include <exception>
{_SLOT_TYPEDEF}
extern "C" int {ENTRY_NAME}(const openreg_kernel_arg* args, char* message, size_t capacity) {{
  try {{
    kernel({call});
    return 0;
  }} catch (const std::exception& error) {{
    std::snprintf(message, capacity, "%s", error.what());
  }} catch (...) {{
    std::snprintf(message, capacity, "unknown C++ exception");
  }}
  return 1;
}}
"""


def _launcher(name: str, arg_types: list[str], annotation: str, library) -> object:
    entry = ctypes.cast(getattr(library, ENTRY_NAME), ctypes.c_void_p).value
    binary = library._name
    source = os.path.splitext(binary)[0] + ".cpp"
    return load_extension().CompiledKernel(
        name=name,
        entry=entry,
        arg_types=list(arg_types),
        annotation=annotation,
        file=source if os.path.exists(source) else binary,
        hash=library.key,
    )


def openreg_kernel(name: str, arg_types: list[str], annotation: str, source: str):
    """Compiles ``source`` (a kernel plus its entry point) and returns its ``CompiledKernel``.

    With compile workers, returns a future that ``async_compile.wait(globals())``
    in the wrapper resolves, as Inductor's own CPU kernels do.
    """
    if get_compile_threads() <= 1:
        return _launcher(name, arg_types, annotation, OpenRegKernelCodeCache.load(source, "cpu"))
    load = OpenRegKernelCodeCache.load_async(source, "cpu", submit_fn=AsyncCompile.submit)
    return LambdaFuture(lambda: _launcher(name, arg_types, annotation, load()))
