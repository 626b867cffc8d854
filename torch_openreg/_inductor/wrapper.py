"""The Python wrapper Inductor generates around openreg kernels.

Three differences from the stock wrapper, all for the device:

- each openreg kernel is launched, ``cpp_fused_x.launch(<device index>, args...)``,
  onto the caller's current stream of that device (read at every launch, so
  ``with torch.openreg.stream(s):`` around a compiled call is honoured), instead of
  being called on the host; CPU kernels of a mixed graph are still called;
- buffers are allocated on the graph's device index (``openreg:1``), since
  Inductor emits no device guard for devices outside its GPU list;
- the C++ wrapper (``cpp_wrapper``, AOTInductor) and the FX wrapper are refused
  with an error that says what to use instead.
"""

from __future__ import annotations

from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen

from torch_openreg._inductor.errors import unsupported

DEVICE = "openreg"


class _OpenRegWrapperMixin:
    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline("from torch_openreg._inductor.kernels import openreg_kernel")

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        if device is None:
            from torch._inductor.virtualized import V

            device = V.graph.get_current_device_or_throw()
        if device.type == DEVICE and not triton:
            index = device.index if device.index is not None else _current_index()
            self.writeline(f"{kernel_name}.launch({', '.join([str(index), *map(str, call_args)])})")
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
        line = super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        if device.type == DEVICE and device.index is not None:
            line = line.replace(f"device='{DEVICE}'", f"device='{DEVICE}:{device.index}'", 1)
        return line


def _current_index() -> int:
    import torch

    return torch.openreg.current_device()


class OpenRegWrapperCodegen(_OpenRegWrapperMixin, PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        from torch._inductor import config

        if config.triton.cudagraphs:
            # Inductor would only log that it skipped them and run without.
            raise unsupported(
                "CUDA graphs (mode='reduce-overhead', mode='max-autotune', or "
                "torch._inductor.config.triton.cudagraphs=True)",
                "use the default mode or mode='max-autotune-no-cudagraphs'",
            )
        if is_subgraph:
            return OpenRegSubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return OpenRegWrapperCodegen()


class OpenRegSubgraphWrapperCodegen(_OpenRegWrapperMixin, SubgraphPythonWrapperCodegen):
    """Subgraphs (``torch.cond``, ``while_loop``, graph partitions) launch the same way."""

    def write_header(self) -> None:
        # A subgraph's code lives in its parent's module, which imports for it.
        SubgraphPythonWrapperCodegen.write_header(self)


class OpenRegCppWrapperCodegen:
    """Registered so Inductor finds one; openreg has no C++ wrapper."""

    supports_caching = False  # read before codegen: nothing to cache, create() refuses

    @staticmethod
    def create(*args, **kwargs):
        raise unsupported(
            "the C++ wrapper (torch._inductor.config.cpp_wrapper=True, or AOTInductor)",
            "compile with the default Python wrapper (cpp_wrapper=False)",
        )


class OpenRegFxWrapperCodegen:
    """Registered so Inductor finds one; openreg has no FX wrapper."""

    supports_caching = False

    @staticmethod
    def create(*args, **kwargs):
        raise unsupported(
            "the FX wrapper (torch._inductor.config.fx_wrapper=True)",
            "compile with the default Python wrapper",
        )
