"""Where a compiled kernel came from: the model's source lines and the ATen ops it fused.

Inductor keeps both in the FX nodes behind each scheduler node (``stack_trace``
from Dynamo, copied onto backward nodes by AOTAutograd, and ``original_aten``).
On CUDA people read the generated code to find which line a fused kernel belongs
to; on openreg the kernel's device event carries the answer (``source_lines``,
``fused_aten_ops``), and ``summary`` totals device time per line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable

import torch

# One frame of a Python traceback as Dynamo records it.
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)', re.MULTILINE)
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _fx_origins(scheduler_nodes: Iterable) -> list[torch.fx.Node]:
    origins: dict[str, torch.fx.Node] = {}
    for scheduler_node in scheduler_nodes:
        for node in scheduler_node.get_nodes():
            ir_node = getattr(node, "node", None)
            for origin in getattr(ir_node, "origins", ()) or ():
                origins.setdefault(origin.name, origin)
    return [origins[name] for name in sorted(origins)]


def user_frame(stack_trace: str | None) -> str | None:
    """The innermost frame outside torch, as ``file:line``; None if there is none."""
    if not stack_trace:
        return None
    for match in reversed(list(_FRAME.finditer(stack_trace))):
        if not match["file"].startswith(_TORCH_DIR):
            return f"{match['file']}:{match['line']}"
    return None


def _aten_name(target) -> str | None:
    if isinstance(target, torch._ops.OpOverload):
        return f"aten::{target._overloadpacket.__name__}" if target.namespace == "aten" else str(target)
    if isinstance(target, torch._ops.HigherOrderOperator):
        return str(target.name())
    return None


def kernel_provenance(scheduler_nodes: Iterable) -> dict[str, list[str]]:
    """``source_lines`` and ``fused_aten_ops`` of the nodes one kernel computes, each unique and sorted."""
    lines: dict[str, None] = {}
    ops: dict[str, None] = {}
    for origin in _fx_origins(scheduler_nodes):
        if origin.op != "call_function":
            continue
        line = user_frame(origin.meta.get("stack_trace"))
        if line is not None:
            lines.setdefault(line)
        aten = _aten_name(origin.meta.get("original_aten"))
        if aten is not None:
            ops.setdefault(aten)
    return {"source_lines": sorted(lines, key=_line_key), "fused_aten_ops": sorted(ops)}


def _line_key(line: str) -> tuple[str, int]:
    file, _, number = line.rpartition(":")
    return file, int(number)


def annotation_json(provenance: dict[str, list[str]]) -> str:
    """The provenance as JSON object members (no braces), the runtime's annotation format."""
    return json.dumps(provenance, separators=(", ", ": "))[1:-1]
