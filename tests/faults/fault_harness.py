"""Runs a fault scenario in a fresh interpreter and reads what it left behind.

Every scenario is a subprocess: a crash, a hang or an exit code is the
outcome under test, and the runtime and Kineto keep process-wide state.
The body runs after ``PRELUDE`` (torch, the openreg backend, the profiler,
``write_result``) and reports through ``write_result({...})``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROFILER_TESTS = REPO / "tests" / "profiler"
if str(PROFILER_TESTS) not in sys.path:
    sys.path.insert(0, str(PROFILER_TESTS))
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import trace_invariants as ti  # noqa: E402
from trace_invariants import Trace  # noqa: E402

PRELUDE = """
import json, os, sys, time
import torch
import torch_openreg
from torch.profiler import profile, ProfilerActivity, record_function
DEVICE_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
def write_result(result):
    with open(os.environ["FAULT_RESULT"], "w") as f:
        json.dump(result, f)
def device_events(prof):
    # Device work: kernels, copies, memsets (sync rows are events too, with no device time).
    return [e for e in prof.events() if e.device_type != torch.autograd.DeviceType.CPU and e.activity_type != "cuda_sync"]
def runtime_stats():
    # The runtime's own cumulative counters (orActivityGetStats), from the instance the backend loaded.
    import ctypes
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch_openreg.__file__), "lib", "libopenreg.so.1"))
    class Stats(ctypes.Structure):
        _fields_ = [("structSize", ctypes.c_uint32), ("reserved", ctypes.c_uint32)] + [
            (name, ctypes.c_uint64) for name in ("written", "dropped", "requested", "refused", "completed",
                                                 "request_ns", "completed_ns", "flush_ns")]
    stats = Stats(structSize=ctypes.sizeof(Stats))
    assert lib.orActivityGetStats(ctypes.byref(stats)) == 0
    return dict(written=stats.written, dropped=stats.dropped)
"""

# What a crash or an abort leaves on stderr, whatever the exit code says.
CRASH_SIGNS = (
    "Segmentation fault",
    "Fatal Python error",
    "terminate called",
    "Aborted",
    "AddressSanitizer",
    "core dumped",
)


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    result: dict

    def ok(self) -> Outcome:
        assert self.returncode == 0, f"exit {self.returncode}:\n{self.stdout[-3000:]}\n{self.stderr[-6000:]}"
        self.assert_no_crash()
        return self

    def assert_no_crash(self) -> None:
        signs = [s for s in CRASH_SIGNS if s in self.stderr]
        assert not signs, f"{signs} in stderr:\n{self.stderr[-6000:]}"


def run_scenario(body: str, folder: Path, env: dict | None = None, timeout: float = 300) -> Outcome:
    script = folder / "scenario.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    result_file = folder / "result.json"
    full_env = dict(os.environ)
    for name in ("OPENREG_ACTIVITY_LIBRARY", "OPENREG_PROFILER_BUFFER_KB", "OPENREG_PROFILER_BUFFER_LIMIT_MB"):
        full_env.pop(name, None)
    full_env.update(
        PYTHONPATH=os.pathsep.join([str(REPO), full_env.get("PYTHONPATH", "")]),
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        FAULT_RESULT=str(result_file),
    )
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=folder, env=full_env, capture_output=True, text=True, timeout=timeout
    )
    result = json.loads(result_file.read_text()) if result_file.exists() else {}
    return Outcome(proc.returncode, proc.stdout, proc.stderr, result)


def assert_trace_valid(path: Path) -> Trace:
    """The trace tools' checker (libopenreg_trace, every error-level check)
    and the profiler tests' own invariants both pass."""
    from openreg_trace import open_trace

    with open_trace(path) as native:
        result = native.check()
    failed = [c for c in result["checks"] if c["status"] == "fail" and c.get("severity") == "error"]
    assert result["ok"], f"{path.name}: {failed}"
    trace = Trace.load(path)
    problems = ti.check_all(trace)
    assert not problems, "\n".join(problems)
    return trace
