"""`python -m torch_openreg demo --ranks 2`: DDP on two local processes, every rank's traces in one folder."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_with_two_ranks(tmp_path):
    out = tmp_path / "traces"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch_openreg",
            "demo",
            "--ranks",
            "2",
            "-o",
            str(out),
            "--size",
            "tiny",
            "--wait",
            "0",
            "--warmup",
            "1",
            "--active",
            "2",
            "--repeat",
            "1",
            "--check",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    traces = sorted(p.name for p in out.iterdir() if p.name.endswith(".pt.trace.json"))
    assert [re.match(r"rank(\d)\.", t).group(1) for t in traces] == ["0", "1"], traces
    # Per-rank results: one row per rank, each on its own device, with its all_reduce time.
    rows = re.findall(
        r"^\s+(\d)\s+(openreg:\d)\s+[\d.]+ -> [\d.]+\s+1\s+(\d+)\s+[\d.]+ ms\s+(\S+)$", done.stdout, re.MULTILINE
    )
    assert [(r[0], r[1]) for r in rows] == [("0", "openreg:0"), ("1", "openreg:1")], done.stdout[:3000]
    assert all(int(r[2]) >= 2 and r[3].startswith("openregComm_") for r in rows), rows
    for rank in (0, 1):
        # DDP's gradient all_reduce in every recorded step, in more than one bucket (so that communication
        # can overlap the backward), and, at its first step, the bucket broadcast.
        result = json.loads((out / "ranks" / f"rank{rank}.json").read_text())
        assert result["collectives"]["openregComm_AllReduce_Sum_f32"]["calls"] >= 2 * 2, result
    assert "'hidden behind compute' is the share of the collectives'" in done.stdout, done.stdout[:3000]
    assert len(re.findall(r"^\d+ checks: 0 failed, .* -> OK$", done.stdout, re.MULTILINE)) == 2, done.stdout[:3000]
    assert "Summary of all ranks' traces" in done.stdout
    for name in traces:
        assert f"Trace {out / name}" in done.stdout
        trace = json.loads((out / name).read_text())
        assert trace["distributedInfo"]["rank"] == int(name[4]) and trace["distributedInfo"]["world_size"] == 2
