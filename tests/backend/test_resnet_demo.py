"""`python -m torch_openreg demo --model resnet`: a convolutional workload under the demo's profiler setup."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("resnet_demo")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch_openreg",
            "demo",
            "--model",
            "resnet",
            "--size",
            "tiny",
            "-o",
            "traces",
            "--check",
            "--top",
            "8",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc, cwd / "traces"


def test_it_trains_a_resnet_and_every_trace_passes_the_checks(demo):
    proc, _ = demo
    assert re.search(r"a ResNet-18-shaped network \(20 convolutions, widths 8-64, batch norm", proc.stdout)
    assert re.search(r"(\d+) of \1 checks pass", proc.stdout)
    first, last = map(float, re.search(r"loss ([\d.]+) -> ([\d.]+) over 8 steps", proc.stdout).groups())
    assert last < first


def test_the_summary_shows_the_convolutions(demo):
    proc, traces = demo
    top = proc.stdout.split("Top kernels by device time", 1)[1].split("\n\n", 1)[0]
    for kernel in (
        "conv2d_fwd_nchw_f32",
        "conv2d_bwd_filter_nchw_f32",
        "conv2d_bwd_data_nchw_f32",
    ):
        assert kernel in top, top
    ops = proc.stdout.split("Device time per op", 1)[1].split("\n\n", 1)[0]
    assert "aten::convolution_overrideable" in ops and "aten::convolution_backward_overrideable" in ops, ops
    assert "aten::native_batch_norm" in ops, ops

    # 20 convolutions per step, 2 recorded steps per trace: each forward kernel linked to its op.
    trace = sorted(traces.glob("*.pt.trace.json"))[-1]
    events = json.loads(trace.read_text())["traceEvents"]
    ops_by_id = {
        e["args"]["External id"]: e["name"]
        for e in events
        if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})
    }
    forward = [e for e in events if e.get("cat") == "kernel" and e["name"] == "conv2d_fwd_nchw_f32"]
    assert len(forward) == 40
    assert {ops_by_id[e["args"]["External id"]] for e in forward} == {"aten::convolution_overrideable"}
