"""Inductor's C++ code generation, for kernels that run on openreg.

``OpenRegScheduling`` is Inductor's CPU scheduling (vectorised C++ loops) with one
difference: each kernel is defined as an openreg kernel. Its source gets the
uniform entry point the launcher calls, and the wrapper binds its name to a
``CompiledKernel`` instead of a Python binding, with the kernel's provenance
(model source lines, fused ATen ops) for its trace event. Nodes are generated
as ``kernel_codegen`` describes (one thread, random numbers by the vector).
"""

from __future__ import annotations

from torch._inductor import config
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.utils import Placeholder, get_fused_kernel_name
from torch._inductor.virtualized import V

from torch_openreg._inductor.kernel_codegen import openreg_kernel_codegen, with_kernel_headers
from torch_openreg._inductor.kernels import entry_point_source
from torch_openreg._inductor.provenance import annotation_json, kernel_provenance


def _kernel_name(nodes, wrapper) -> str:
    fused = get_fused_kernel_name(nodes, config.cpp.descriptive_names) if config.cpp.descriptive_names else ""
    return "_".join(part for part in ("cpp", fused, wrapper.next_kernel_suffix()) if part)


def _declaration(source: str) -> str:
    """The ``extern "C" void kernel(...)`` line, which the wrapper keeps beside the kernel."""
    start = source.rfind('extern "C"')
    return source[start : source.find(")", start) + 1] + ";\n"


class OpenRegScheduling(CppScheduling):
    def codegen_node(self, node):
        with openreg_kernel_codegen():
            super().codegen_node(node)

    def define_kernel(self, src_code, nodes, kernel_args=None):
        wrapper = V.graph.wrapper_code
        args = self.kernel_group.args if kernel_args is None else kernel_args
        _, _, arg_types = args.cpp_argdefs()
        # The entry point makes the source differ from the same loop on CPU, so
        # a mixed graph never shares one kernel between the two devices.
        src_code = with_kernel_headers(src_code) + entry_point_source(arg_types)
        if src_code in wrapper.src_to_kernel:
            return wrapper.src_to_kernel[src_code]
        name = _kernel_name(nodes, wrapper)
        wrapper.src_to_kernel[src_code] = name
        source = (
            src_code.replace(str(Placeholder.KERNEL_NAME), "kernel")
            .replace(str(Placeholder.DESCRIPTIVE_NAME), name)
            .replace("#pragma CMT", "//")
        )
        provenance = kernel_provenance(nodes)
        definition = f"openreg_kernel({name!r}, {arg_types!r}, {annotation_json(provenance)!r}, r'''\n{source}''')"
        comment = "\n".join(
            [f"# Source lines: {', '.join(provenance['source_lines']) or '-'}"]
            + [f"# Fused ATen ops: {', '.join(provenance['fused_aten_ops']) or '-'}"]
        )
        wrapper.define_kernel(name, definition, metadata=comment, gpu=False, cpp_definition=_declaration(source))
        return name
