"""Dynamo's device interface for openreg exists from the backend's load on, before any compile.

Each case runs in a fresh interpreter: the point is what a process has before Inductor ever
ran, and what loading the backend imports (no Dynamo, no Inductor: they cost seconds).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_fresh(code: str, autoload: bool = True) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    if not autoload:
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_interface_answers_in_a_fresh_process_and_loading_imports_no_compiler():
    r = run_fresh(
        """
        import json, sys
        import torch  # loads openreg's backend (autoload)
        heavy = sorted(m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules)
        from torch._dynamo.device_interface import get_interface_for_device
        from torch_openreg._inductor.device_interface import OpenRegInterface
        names = ["openreg", "openreg:0", "openreg:1"]
        found = [get_interface_for_device(name) is OpenRegInterface for name in names]
        found.append(get_interface_for_device(torch.device("openreg")) is OpenRegInterface)
        interface = get_interface_for_device("openreg")
        print(json.dumps(dict(
            heavy=heavy, found=found, sms=interface.get_device_properties(0).multi_processor_count,
            stream=interface.get_raw_stream(0), count=interface.device_count())))
        """
    )
    assert r["heavy"] == []  # the backend's load imported neither
    assert r["found"] == [True, True, True, True]
    # The device's own answers: 8 multiprocessors per executor thread (4 by default), the default
    # stream's id, two devices by default (runtime.h).
    assert (r["sms"], r["stream"], r["count"]) == (32, 1, 2)


def test_interface_registered_at_once_when_dynamo_was_imported_first():
    r = run_fresh(
        """
        import json
        import torch, torch._dynamo
        import torch_openreg
        from torch._dynamo.device_interface import get_interface_for_device
        print(json.dumps(dict(name=get_interface_for_device("openreg").__name__)))
        """,
        autoload=False,
    )
    assert r == {"name": "OpenRegInterface"}


def test_compile_still_registers_and_runs_after_the_early_interface():
    r = run_fresh(
        """
        import json
        import torch
        from torch._dynamo.device_interface import get_interface_for_device
        early = get_interface_for_device("openreg").__name__
        f = torch.compile(lambda x: (x * 2).sin() + 1)
        x = torch.randn(16, device="openreg")
        print(json.dumps(dict(early=early, ok=torch.allclose(f(x).cpu(), (x.cpu() * 2).sin() + 1, atol=1e-6))))
        """
    )
    assert r == {"early": "OpenRegInterface", "ok": True}
