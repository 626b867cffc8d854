"""`demo --compile`: the demo's GPT trained compiled under the profiler, and `diff` against the eager demo.

One cycle each (wait 1 step, so the compile happens outside the recorded
step). The compiled trace must pass `check` (the demo's --check), hold the
fused kernels with the demo model's lines, and `diff` eager -> compiled must
show the fused kernels added and eager's pointwise kernels removed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODEL_FILE = str(REPO / "torch_openreg" / "demo" / "model.py")
CYCLE = ["--size", "tiny", "--wait", "1", "--warmup", "1", "--active", "1", "--repeat", "1", "--check"]


def _run(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "torch_openreg", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("compile_demo")
    eager = _run(["demo", *CYCLE, "-o", "eager"], cwd)
    compiled = _run(["demo", *CYCLE, "--compile", "-o", "compiled"], cwd)
    return cwd, eager, compiled


def _trace(folder: Path) -> dict:
    (path,) = folder.glob("*.pt.trace.json")
    return json.loads(path.read_text())


def test_the_compiled_demo_trains_and_its_trace_passes_check(demos):
    _, eager, compiled = demos
    assert eager.returncode == 0, eager.stderr[-3000:]
    assert compiled.returncode == 0, compiled.stdout[-3000:] + compiled.stderr[-3000:]
    assert "torch.compile: default Inductor" in compiled.stdout
    checks = compiled.stdout.split("Invariant checks", 1)[1].splitlines()[1]
    assert checks.lstrip().startswith("OK "), checks  # strict: our own traces have no finding at all


def test_the_compiled_trace_holds_fused_kernels_from_the_model_lines(demos):
    cwd, _, compiled = demos
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    events = _trace(cwd / "compiled")["traceEvents"]
    fused = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("cpp_fused_")]
    assert len(fused) >= 10
    lines = {line for e in fused for line in e["args"]["source_lines"]}
    assert any(line.startswith(MODEL_FILE + ":") for line in lines), sorted(lines)
    ops = {e["name"] for e in events if e.get("cat") == "cpu_op"}
    assert {e["name"] for e in fused} <= ops


def test_diff_shows_the_fused_kernels_replacing_the_eager_ones(demos):
    cwd, eager, compiled = demos
    assert eager.returncode == 0 and compiled.returncode == 0
    result = _run(["diff", "eager", "compiled", "--json"], cwd, timeout=300)
    assert result.returncode == 0, result.stderr
    kernels = json.loads(result.stdout)["kernels"]
    added = {r["name"] for r in kernels if r["status"] == "added"}
    removed = {r["name"] for r in kernels if r["status"] == "removed"}
    assert any(name.startswith("cpp_fused_") for name in added), added
    assert not any(name.startswith("cpp_fused_") for name in removed)
    # Eager's pointwise and normalisation kernels are fused away; attention stays the backend's
    # fused kernel (Inductor calls its op), in both traces.
    assert {"gelu_fwd_f32", "layer_norm_fwd_f32", "dropout_fwd_f32"} <= removed, removed
    kept = {r["name"] for r in kernels if r["status"] not in ("added", "removed")}
    assert {"flash_attention_fwd_f32", "flash_attention_bwd_f32"} <= kept, kept
