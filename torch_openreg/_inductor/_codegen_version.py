"""The hash behind ``cache_config.codegen_version``: the sources that shape openreg's generated code."""

from __future__ import annotations

import hashlib
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_SOURCES = (
    "kernels.py",
    "kernel_codegen.py",
    "kernel_headers/kernel_helpers.h",
    "provenance.py",
    "scheduling.py",
    "wrapper.py",
    "patches.py",
)


def codegen_version() -> str:
    digest = hashlib.sha256()
    for name in _SOURCES:
        digest.update(name.encode())
        digest.update((_PACKAGE / name).read_bytes())
    return digest.hexdigest()[:32]
