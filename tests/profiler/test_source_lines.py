"""Device time per model source line on a real eager profile of openreg,
recorded with_stack: the summary names this file's own lines.

The model runs in a fresh interpreter that executes this very file (its
__main__ below), so the Python frames in the trace are this file's. torch's
Python tracer names a frame by the line where its function was entered (the
def line), or, for a frame already running when profiling began, the line it
was at; and by its path relative to the sys.path entry holding it (here the
script's folder: the file name).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]

# The lines the test expects, found by their markers in this file.
LINE = {
    m.group(1): n for n, text in enumerate(HERE.read_text().splitlines(), 1) if (m := re.search(r"# @(\w+)$", text))
}


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(16, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # @forward
        y = torch.mm(x, self.weight)
        return torch.relu(y + 1)


def profile_tiny_model(trace: str) -> None:
    from torch.profiler import ProfilerActivity, profile

    import torch_openreg  # noqa: F401

    model = Tiny().to("openreg")
    x = torch.randn(8, 16, device="openreg")
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], with_stack=True) as prof:  # @profile
        total = model(x).sum()
        total.item()
    prof.export_chrome_trace(trace)


def test_eager_with_stack_names_the_model_lines(tmp_path):
    from openreg_trace import open_trace

    trace = tmp_path / "tiny.pt.trace.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run(
        [sys.executable, str(HERE), str(trace)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    with open_trace(trace) as t:
        s = t.summary()
        assert t.check(strict=True)["ok"]
    src = s["source_lines"]
    kernels = {k["name"]: k["count"] for k in s["top_kernels"]}
    by_line = {x["source"]: (x["function"], x["kernels"]) for x in src["lines"]}
    where = {name: f"{HERE.name}:{line}" for name, line in LINE.items()}
    assert by_line == {
        where["forward"]: ("forward", 3),  # the gemm, the add and the relu
        where["profile"]: ("profile_tiny_model", 2),  # the sum and the copy back to the host
    }, (by_line, kernels)
    assert kernels == {
        "gemm_f32_nn": 1,
        "elementwise_add_f32": 1,
        "elementwise_relu_f32": 1,
        "Memcpy DtoH (Device -> Host)": 1,
        **{k: 1 for k in kernels if k.startswith("reduce_sum")},
    }, kernels
    assert src["unattributed"]["device_events"] == 0
    assert src["python_stack"]["device_events"] == 5 == sum(kernels.values())
    assert sum(x["device_ns"] for x in src["lines"]) == s["device_total_ns"]


if __name__ == "__main__":
    profile_tiny_model(sys.argv[1])
