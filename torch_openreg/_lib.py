"""Loads the compiled extension ``lib/_C*.so`` as ``torch_openreg._C``.

The native libraries live together in ``lib/`` (``libopenreg.so``,
``libopenreg_backend.so``, the extension, the profiler plugin) and find each
other through RPATH ``$ORIGIN``. Loading the extension loads the backend,
whose static initialisers register the device guard, allocators, hooks and
kernels with PyTorch. Requires ``import torch`` first.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

LIB_DIR = Path(__file__).resolve().parent / "lib"


def load_native_module(stem: str, what: str) -> ModuleType:
    """``lib/<stem>*.so`` as ``torch_openreg.<stem>``, loaded once; `what` names it in the error."""
    name = f"torch_openreg.{stem}"
    existing = sys.modules.get(name)
    if existing is not None:
        return existing
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = LIB_DIR / f"{stem}{suffix}"
        if path.exists():
            break
    else:
        raise ImportError(
            f"torch_openreg: {what} {stem} is missing from {LIB_DIR}; "
            "build it with `pip install --no-build-isolation -e .`"
        )
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_extension() -> ModuleType:
    return load_native_module("_C", "the compiled extension")
