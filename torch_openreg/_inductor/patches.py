"""Where Inductor 2.13 assumes a device other than cpu/mps/xpu/tpu runs Triton code.

Each fix applies to openreg alone; other devices keep Inductor's behaviour.

- ``get_current_backend()`` answers ``config.cuda_backend`` ("triton") for any
  other device. The C++ code generation then skips the step that gives its CSE
  variables a dtype and fails (``assert scalar_var.dtype is not None``, or
  ``KeyError: None`` in bfloat16). openreg's backend is "cpp".
- Three scheduler steps that reshape loops for fusion are skipped for CPU nodes
  only (``node.is_cpu()``); for C++ kernels they multiply tuple loop groups and
  fail (``TypeError: can't multiply sequence``). openreg's nodes are C++ kernels
  too, so the steps are skipped for them as well.
- Layout optimisation turns a conv-heavy graph's activations channels-last,
  trusting the fake convolution to predict the output layout. For a custom
  device (torch's "Overrideable" convolution backend) it predicts contiguous,
  while openreg's convolution keeps channels-last as CPU's does: the compiled
  graph then fails its stride assertions. It stays off for openreg graphs.
"""

from __future__ import annotations

import functools
import sys

import torch

DEVICE = "openreg"

_applied = False


def _current_backend_patch(original):
    @functools.wraps(original)
    def get_current_backend(device_type: str | None = None) -> str:
        if device_type is None:
            from torch._inductor.virtualized import V

            device_type = V.graph.get_current_device_or_throw().type
        return "cpp" if device_type == DEVICE else original(device_type)

    get_current_backend.openreg_original = original
    return get_current_backend


def _patch_current_backend() -> None:
    import torch._inductor.utils as utils

    original = utils.get_current_backend
    patched = _current_backend_patch(original)
    # Modules that imported the function by name hold their own reference.
    for name, module in list(sys.modules.items()):
        if name.startswith("torch._inductor") and getattr(module, "get_current_backend", None) is original:
            module.get_current_backend = patched


def _on_openreg(node) -> bool:
    device = node.get_device()
    return device is not None and device.type == DEVICE


def _skip_for_openreg(method, not_applicable):
    @functools.wraps(method)
    def step(self, node1, node2):
        if _on_openreg(node1) or _on_openreg(node2):
            return not_applicable
        return method(self, node1, node2)

    return step


def _patch_loop_reshaping() -> None:
    from torch._inductor.scheduler import Scheduler

    for name, not_applicable in (
        ("shared_data_after_inverting_indexing", -1),
        ("shared_data_after_reordering_loop", -1),
        ("_try_reindex_pointwise_for_reduction", False),
    ):
        setattr(Scheduler, name, _skip_for_openreg(getattr(Scheduler, name), not_applicable))


def _graph_on_openreg(gm) -> bool:
    for node in gm.graph.nodes:
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and value.device.type == DEVICE:
            return True
    return False


def _patch_layout_optimization() -> None:
    from torch._inductor.graph import GraphLowering

    original = GraphLowering.decide_layout_opt

    @functools.wraps(original)
    def decide_layout_opt(gm, *, is_inference: bool) -> bool:
        return False if _graph_on_openreg(gm) else original(gm, is_inference=is_inference)

    GraphLowering.decide_layout_opt = staticmethod(decide_layout_opt)


def apply() -> None:
    """Applies the fixes once per process."""
    global _applied
    if _applied:
        return
    _patch_current_backend()
    _patch_loop_reshaping()
    _patch_layout_optimization()
    _applied = True
