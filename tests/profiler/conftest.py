"""Fixtures for the profiler tests.

Every case profiles in a fresh subprocess: the activity library is chosen by
environment at load time, and Kineto keeps state for the life of a process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest
from profiler_paths import HERE, PLUGIN_LIB_DIR, REPO, replay_library


@pytest.fixture(scope="session", autouse=True)
def _plugin_built():
    if not (PLUGIN_LIB_DIR / "libopenreg_profiler.so").exists():
        pytest.fail(f"{PLUGIN_LIB_DIR / 'libopenreg_profiler.so'} is not built")


@dataclass
class CaseResult:
    returncode: int
    stdout: str
    stderr: str
    result: dict

    def check(self) -> CaseResult:
        assert self.returncode == 0, f"subprocess failed ({self.returncode}):\n{self.stdout}\n{self.stderr}"
        return self


@pytest.fixture
def run_case(tmp_path):
    """Runs `body` after `prelude` (default: `from replay_harness import *`) in a subprocess.

    env: extra environment; library: which activity library the plugin gets
    ("replay", "partial", a path, or None to leave OPENREG_ACTIVITY_LIBRARY
    unset). The body reports through write_result({...}).
    """

    def run(
        body: str,
        env: dict | None = None,
        library: str | None = "replay",
        timeout: int = 180,
        prelude: str = "from replay_harness import *\n",
    ) -> CaseResult:
        script = tmp_path / "case.py"
        script.write_text(prelude + textwrap.dedent(body))
        result_file = tmp_path / "result.json"
        if result_file.exists():
            result_file.unlink()
        full_env = dict(os.environ)
        full_env.pop("OPENREG_ACTIVITY_LIBRARY", None)
        full_env.update(
            PYTHONPATH=os.pathsep.join([str(HERE), str(REPO), full_env.get("PYTHONPATH", "")]),
            OPENREG_TEST_RESULT=str(result_file),
            OPENREG_PROFILER_LIB_DIR=str(PLUGIN_LIB_DIR),
            OPENREG_REPLAY_CONTROL=str(replay_library("replay")),
            TORCH_DEVICE_BACKEND_AUTOLOAD="0",
            OPENREG_REPLAY_DEVICES="2",
        )
        if library is not None:
            path = library if "/" in library else str(replay_library(library))
            full_env["OPENREG_ACTIVITY_LIBRARY"] = path
        full_env.update(env or {})
        proc = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        result = json.loads(result_file.read_text()) if result_file.exists() else {}
        return CaseResult(proc.returncode, proc.stdout, proc.stderr, result)

    return run
