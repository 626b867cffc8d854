"""Helpers the backend tests import (a module of its own: tests never import a conftest)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter; returns the completed process (text output)."""
    full_env = dict(os.environ)
    full_env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    full_env["PYTHONPATH"] = os.pathsep.join([str(REPO), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


_next_gate = [1000]


def new_gate() -> int:
    """A fresh id for torch.ops.openreg._wait_gate."""
    _next_gate[0] += 1
    return _next_gate[0]
