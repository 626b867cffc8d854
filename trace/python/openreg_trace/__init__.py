"""Trace tools: summary, structural check, diff and timeline for any torch.profiler
chrome trace (openreg's, CUDA's, or another backend's).

The analysis runs in libopenreg_trace.so (C++, streaming); this package only
binds it and formats results. It needs neither torch nor the openreg backend.

    from openreg_trace import open_trace
    with open_trace("trace.json") as t:
        print(t.summary()["top_kernels"])
        assert t.check(strict=True)["ok"]  # strict: warnings fail too
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ._native import LibraryNotFound, NativeTrace, TraceError, library_path, list_checks, version

__all__ = [
    "LibraryNotFound",
    "NativeTrace",
    "TraceError",
    "library_path",
    "list_checks",
    "load_options",
    "open_trace",
    "version",
]


def load_options(
    device_categories: Iterable[str] | None = None,
    runtime_categories: Iterable[str] | None = None,
    annotation_categories: Iterable[str] | None = None,
    op_categories: Iterable[str] | None = None,
    flow_categories: Iterable[str] | None = None,
    infer_device_categories: bool | None = None,
) -> dict[str, Any]:
    """How events are classified; None keeps the library's default (see trace_analysis.h)."""
    options: dict[str, Any] = {}
    for key, value in (
        ("device_categories", device_categories),
        ("runtime_categories", runtime_categories),
        ("annotation_categories", annotation_categories),
        ("op_categories", op_categories),
        ("flow_categories", flow_categories),
    ):
        if value is not None:
            options[key] = list(value)
    if infer_device_categories is not None:
        options["infer_device_categories"] = bool(infer_device_categories)
    return options


def open_trace(path: str | os.PathLike, **classification: Any) -> NativeTrace:
    """Reads and indexes a trace (.json or .json.gz); keyword arguments as in load_options()."""
    return NativeTrace(path, options=load_options(**classification))
