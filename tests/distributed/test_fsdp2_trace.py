"""The FSDP2 step in the trace: two profiled FSDP2 steps on two ranks (fully_shard per layer and at the root, a
gradient divide factor, as torchtitan sets them), read by the trace tools as NCCL's are on CUDA.

Every all-gather and reduce-scatter FSDP2 issues is one kernel on the communication stream, with the args
Kineto copies from record_param_comms (In/Out msg nelems, Group size, dtype, Process Group Name); the sizes are
the layers' shards, exactly. `summary` counts the collectives and their bytes, `critical-path` crosses the ranks
at them, and the HTML report shows them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from ranks import expect_success, run_ranks

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from openreg_trace import open_trace  # noqa: E402
from openreg_trace.critical_path import critical_path  # noqa: E402

STEPS = 2  # profiled (schedule: wait 1, warmup 1, active 2)
# Each Linear's shard per rank (weight + bias numels / 2): 64x256+256, 256x256+256, 256x8+8.
SHARDS = [(64 * 256 + 256) // 2, (256 * 256 + 256) // 2, (256 * 8 + 8) // 2]
ALL_GATHER, REDUCE_SCATTER = "openregComm_AllGather_f32", "openregComm_ReduceScatter_PreMulSum_f32"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fsdp2")
    results = expect_success(run_ranks("fsdp2_trace", folder, timeout=240))
    traces = {}
    for path in sorted((folder / "fsdp2_traces").glob("*.pt.trace.json")):
        rank = int(re.match(r"rank(\d+)\.", path.name).group(1))
        traces[rank] = (path, json.loads(path.read_text()))
    assert sorted(traces) == [0, 1]
    return folder / "fsdp2_traces", traces, results


def comm_kernels(trace):
    return [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("openregComm_")]


def test_each_collective_is_a_kernel_on_the_communication_stream_with_nccl_args(run):
    _, traces, results = run
    for rank, (_, trace) in traces.items():
        assert results[rank]["shard_numels"] == [64 * 256 // 2, 128, 256 * 256 // 2, 128, 256 * 8 // 2, 4]
        kernels = comm_kernels(trace)
        # Per step: each layer gathered for the forward and again for the backward (resharded after forward),
        # and each layer's gradients reduce-scattered once.
        assert Counter(k["name"] for k in kernels) == {ALL_GATHER: 2 * 3 * STEPS, REDUCE_SCATTER: 3 * STEPS}
        stream = results[rank]["communication_stream"]
        device = [e for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        # The communication stream holds the collectives and their staging copies only; the model's kernels
        # run on the default stream (FSDP2's copy-in/out and premultiply on its own streams).
        assert {e["name"] for e in device if e["args"]["stream"] == stream} == {
            ALL_GATHER,
            REDUCE_SCATTER,
            "Memcpy DtoH (Device -> Host)",
            "Memcpy HtoD (Host -> Device)",
        }
        assert {e["args"]["stream"] for e in device if e["name"].startswith("gemm")} == {1}
        for k in kernels:
            args = k["args"]
            assert k["tid"] == args["stream"] == stream
            assert (args["Group size"], args["dtype"], args["Process Group Name"]) == (2, "Float", "0")
        gathers = sorted(k["args"]["In msg nelems"] for k in kernels if k["name"] == ALL_GATHER)
        assert gathers == sorted(SHARDS * 2 * STEPS)
        assert all(
            k["args"]["Out msg nelems"] == 2 * k["args"]["In msg nelems"] for k in kernels if k["name"] == ALL_GATHER
        )
        scatters = sorted(k["args"]["Out msg nelems"] for k in kernels if k["name"] == REDUCE_SCATTER)
        assert scatters == sorted(SHARDS * STEPS)
        assert all(
            k["args"]["In msg nelems"] == 2 * k["args"]["Out msg nelems"]
            for k in kernels
            if k["name"] == REDUCE_SCATTER
        )


def test_summary_counts_the_collectives_and_their_bytes(run):
    _, traces, _ = run
    for rank, (path, _) in traces.items():
        c = open_trace(path).summary()["communication"]
        assert (c["rank"], c["world_size"]) == (rank, 2)
        by_name = {x["collective"]: x for x in c["collectives"]}
        assert sorted(by_name) == ["AllGather", "ReduceScatter"]
        # NCCL's sizes for bandwidth: an all-gather's output, a reduce-scatter's input (float32).
        assert (by_name["AllGather"]["calls"], by_name["AllGather"]["bytes"]) == (12, 4 * 2 * sum(SHARDS) * 2 * STEPS)
        assert (by_name["ReduceScatter"]["calls"], by_name["ReduceScatter"]["bytes"]) == (
            6,
            4 * 2 * sum(SHARDS) * STEPS,
        )
        assert all(x["group_size"] == 2 and x["device_ns"] > 0 for x in by_name.values())
        assert len(c["instances"]) == 18 and c["comm_ns"] > 0


def test_critical_path_crosses_the_ranks_at_fsdp2_collectives(run):
    folder, _, _ = run
    r = critical_path([folder])
    assert r["step"] == "ProfilerStep#2" and len(r["traces"]) == 2
    assert r["path_ns"] <= r["step_ns"]
    names = Counter(c["collective"] for c in r["collectives"])
    assert names == {"AllGather": 6, "ReduceScatter": 3}, names
    assert all(len(c["waits_ns"]) == 2 for c in r["collectives"])
    assert any(c["on_path"] for c in r["collectives"])


def test_the_report_shows_the_collectives(run, tmp_path):
    folder, _, _ = run
    out = tmp_path / "fsdp2.html"
    done = subprocess.run(
        [sys.executable, "-m", "openreg_trace", "report", str(folder), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    for name in ("AllGather", "ReduceScatter", ALL_GATHER, REDUCE_SCATTER):
        assert name in html, name
