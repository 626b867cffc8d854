"""Shared fixtures for the openreg backend tests.

The package is imported explicitly (so the tests also run with
TORCH_DEVICE_BACKEND_AUTOLOAD=0); the autoload path has its own subprocess
tests in test_registration.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torch_openreg

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_device_state():
    """Every test starts on device 0 with the default streams, and leaves no queued failure behind."""
    torch.openreg.set_device(0)
    yield
    # A kernel failure still queued at the end is the test's: synchronizing
    # every device reports (and clears) it, and the test fails with it.
    left = []
    for index in range(torch.openreg.device_count()):
        try:
            torch.openreg.synchronize(index)
        except RuntimeError as error:
            left.append(f"openreg:{index}: {error}")
    torch.openreg.set_device(0)
    if left:
        pytest.fail("the test left a queued device failure:\n" + "\n".join(left), pytrace=False)


@pytest.fixture
def fallback_counts():
    """Counts of CPU-fallback calls made inside the test (reset at its start)."""
    torch_openreg._C._reset_fallback_counts()
    return torch_openreg._C._fallback_counts


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
