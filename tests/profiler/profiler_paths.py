"""Where the profiler tests find the plugin and the replay library (imported by conftest and tests)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PLUGIN_LIB_DIR = Path(os.environ.get("OPENREG_PROFILER_LIB_DIR", REPO / "torch_openreg" / "lib"))


def _sanitized(build_dir: Path) -> bool:
    cache = build_dir / "CMakeCache.txt"
    return cache.exists() and re.search(r"OPENREG_SANITIZER:\w+=(address|thread)", cache.read_text()) is not None


def _find_replay_dir() -> Path | None:
    """OPENREG_REPLAY_DIR, else the newest unsanitized build under build/.

    Sanitizer builds are skipped: their libraries cannot load into Python.
    """
    if os.environ.get("OPENREG_REPLAY_DIR"):
        return Path(os.environ["OPENREG_REPLAY_DIR"])
    candidates = sorted(
        (
            p
            for p in (REPO / "build").glob("*/tests/activity_replay/libopenreg_activity_replay.so")
            if not _sanitized(p.parents[2])
        ),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    return candidates[0].parent if candidates else None


REPLAY_DIR = _find_replay_dir()


def replay_library(name: str = "replay") -> Path:
    if REPLAY_DIR is None or not (REPLAY_DIR / f"libopenreg_activity_{name}.so").exists():
        pytest.fail(
            "the replay activity library is not built: build the CMake project with "
            "OPENREG_BUILD_TORCH=ON and OPENREG_BUILD_TESTS=ON (pip install -e . does), "
            "or point OPENREG_REPLAY_DIR at its folder"
        )
    return REPLAY_DIR / f"libopenreg_activity_{name}.so"
