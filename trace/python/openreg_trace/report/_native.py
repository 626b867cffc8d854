"""ctypes binding of the report's entry point (trace/include/openreg/trace_report.h),
on the same library handle as openreg_trace._native."""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path
from typing import Any

from openreg_trace import _native


def _function() -> Any:
    lib = _native._load()
    fn = getattr(lib, "ortrace_report_data", None)
    if fn is None:
        raise _native.TraceError(
            "missing",
            f"{_native.library_path()} has no ortrace_report_data: rebuild libopenreg_trace "
            "(cmake --build build/<dir> --target openreg_trace)",
        )
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    return lib, fn


def report_data_text(path: str | os.PathLike, classification: dict[str, Any] | None = None, **options: Any) -> str:
    """The report's data of one trace as JSON text: {"summary": ..., "report": ...}.
    Raises TraceError (status io, parse, invalid_argument...) on a bad trace."""
    lib, fn = _function()
    out = ctypes.c_void_p()
    status = fn(os.fsencode(Path(path)), _native._options(classification), _native._options(options), ctypes.byref(out))
    text = _native._take_string(lib, out)
    if status != 0:
        _native._raise(lib, status, text)
    return text


def report_data(
    path: str | os.PathLike, classification: dict[str, Any] | None = None, **options: Any
) -> dict[str, Any]:
    return json.loads(report_data_text(path, classification, **options))
