"""What a profiled 2-rank run on orccl leaves in each rank's trace."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ranks import expect_success, run_ranks

REPO = Path(__file__).resolve().parents[2]
COMM_PREFIX = "openregComm_"
# The args Kineto copies from the linked record_param_comms onto a kernel.
COPIED_ARGS = (
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "Group size",
    "dtype",
    "Process Group Name",
    "Process Group Description",
    "Process Group Ranks",
    "Seq",
)
HOST_ARGS = COPIED_ARGS + ("Rank", "In split size", "Out split size", "Global rank start", "Global rank stride")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace")
    results = expect_success(run_ranks("trace", folder, timeout=180))
    traces = {}
    for path in sorted((folder / "traces").glob("*.pt.trace.json")):
        rank = int(re.match(r"rank(\d+)\.", path.name).group(1))
        assert rank not in traces, f"two traces for rank {rank}"
        traces[rank] = json.loads(path.read_text())
    assert sorted(traces) == [0, 1]
    return folder / "traces", traces, results


def events(trace, **match):
    return [e for e in trace["traceEvents"] if all(e.get(k) == v for k, v in match.items())]


def test_every_rank_carries_distributed_info(run):
    _, traces, _ = run
    for rank, trace in traces.items():
        info = trace["distributedInfo"]
        assert info["rank"] == rank and info["world_size"] == 2
        assert info["backend"] == "cpu:gloo,openreg:orccl"
        assert {
            "pg_name": "0",
            "pg_desc": "default_pg",
            "backend_config": "cpu:gloo,openreg:orccl",
            "pg_size": 2,
            "ranks": [0, 1],
        } in info["pg_config"]


def test_record_param_comms_has_ncclss_args(run):
    _, traces, _ = run
    for rank, trace in traces.items():
        ops = events(trace, name="record_param_comms", cat="cpu_op")
        names = {op["args"]["Collective name"] for op in ops}
        assert {"allreduce", "_allgather_base"} <= names, names
        assert ("send" if rank == 0 else "recv") in names
        for op in ops:
            missing = [k for k in HOST_ARGS if k not in op["args"]]
            assert not missing, (missing, op)
            assert op["args"]["Group size"] == 2 and op["args"]["Process Group Ranks"] == "[0, 1]"
            if op["args"]["Collective name"] not in ("send", "recv"):
                assert op["args"]["Rank"] == rank


def test_each_collective_is_one_linked_kernel_with_staging_copies(run):
    _, traces, results = run
    for rank, trace in traces.items():
        comm_stream = results[rank]["communication_stream"]
        ops = {op["args"]["External id"]: op for op in events(trace, name="record_param_comms", cat="cpu_op")}
        kernels = [e for e in events(trace, cat="kernel") if e["name"].startswith(COMM_PREFIX)]
        assert len(kernels) == len(ops) > 0
        flows_end = {e["id"] for e in events(trace, ph="f", cat="ac2g")}
        flows_start = {e["id"] for e in events(trace, ph="s", cat="ac2g")}
        launches = {e["args"]["correlation"]: e for e in events(trace, cat="privateuse1_runtime")}
        for kernel in kernels:
            args = kernel["args"]
            op = ops[args["External id"]]
            # Kineto copied the collective's args from the op it is linked to.
            for key in COPIED_ARGS:
                assert args[key] == op["args"][key], (key, kernel, op)
            assert kernel["pid"] == args["device"] == rank
            assert kernel["tid"] == args["stream"] == comm_stream != 1
            assert args["rank"] == rank and args["group size"] == 2 and args["group"] == "0"
            assert args["collective"] == op["args"]["Collective name"]
            assert args["sequence"] == op["args"]["Seq"]
            assert launches[args["correlation"]]["name"] == "orLaunchCollective"
            assert args["correlation"] in flows_start and args["correlation"] in flows_end
            expected = {
                "allreduce": "openregComm_AllReduce_Sum_f32",
                "_allgather_base": "openregComm_AllGather_f32",
                "send": "openregComm_SendRecv_f32",
                "recv": "openregComm_SendRecv_f32",
            }
            assert kernel["name"] == expected[args["collective"]]
            copies = [e for e in events(trace, cat="gpu_memcpy") if e["args"].get("External id") == args["External id"]]
            if args["In msg nelems"] == results[rank]["pipelined_numel"]:
                check_pipelined_copies(kernel, copies, comm_stream)
            else:
                check_staging_copies(args["collective"], kernel, copies, comm_stream)


def check_staging_copies(collective, kernel, copies, comm_stream):
    """Small messages: device -> pinned before the kernel, pinned -> device after, on its row."""
    kinds = [c["args"]["kind"] for c in sorted(copies, key=lambda c: c["ts"])]
    want = {
        "allreduce": ["DtoH", "HtoD"],
        "_allgather_base": ["DtoH", "HtoD"],
        "send": ["DtoH"],
        "recv": ["HtoD"],
    }[collective]
    assert kinds == want, (kernel["name"], kinds)
    assert all(c["tid"] == comm_stream for c in copies)
    before = [c for c in copies if c["args"]["kind"] == "DtoH"]
    after = [c for c in copies if c["args"]["kind"] == "HtoD"]
    assert all(c["ts"] + c["dur"] <= kernel["ts"] for c in before)
    assert all(c["ts"] >= kernel["ts"] + kernel["dur"] for c in after)


def check_pipelined_copies(kernel, copies, comm_stream):
    """A large all_reduce stages its own chunks while the chunks before travel: 16 MiB in two chunks of 8 MiB,
    the second staged in before the first is staged out, on one copy row of the same device, inside the
    kernel, one after another."""
    assert kernel["name"] == "openregComm_AllReduce_Sum_f32"
    copies = sorted(copies, key=lambda c: c["ts"])
    kinds = [c["args"]["kind"] for c in copies]
    assert kinds == ["DtoH", "DtoH", "HtoD", "HtoD"], kinds
    assert all(c["args"]["bytes"] == 8 << 20 for c in copies), [c["args"]["bytes"] for c in copies]
    rows = {c["tid"] for c in copies}
    assert len(rows) == 1 and comm_stream not in rows, rows
    assert all(c["pid"] == kernel["pid"] for c in copies)
    assert all(kernel["ts"] <= c["ts"] and c["ts"] + c["dur"] <= kernel["ts"] + kernel["dur"] for c in copies)
    assert all(a["ts"] + a["dur"] <= b["ts"] for a, b in zip(copies, copies[1:]))


def test_key_averages_credits_collective_device_time(run):
    _, _, results = run
    for result in results:
        averages = result["key_averages"]
        assert averages["openregComm_AllReduce_Sum_f32"]["count"] >= 2
        assert averages["openregComm_AllReduce_Sum_f32"]["device_time_total"] > 0
        # The op owns its kernel's and copies' device time.
        assert (
            averages["record_param_comms"]["device_time_total"]
            >= (averages["openregComm_AllReduce_Sum_f32"]["device_time_total"])
        )


def test_check_passes_on_both_ranks(run):
    folder, _, _ = run
    done = subprocess.run(
        [sys.executable, "-m", "torch_openreg", "check", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def readme_blocks(section: str) -> list[str]:
    text = (REPO / "README.md").read_text()
    body = text[text.index(f"\n## {section}\n") :]
    body = body[: body.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", body, re.S)


def overlap_percent(trace) -> float:
    """HTA's comm/compute overlap, computed here: time both run / communication time (merged intervals)."""

    def merged(intervals):
        out = []
        for start, end in sorted(intervals):
            if out and start <= out[-1][1]:
                out[-1][1] = max(out[-1][1], end)
            else:
                out.append([start, end])
        return out

    kernels = [e for e in events(trace, cat="kernel") if e.get("ph") == "X"]
    comm = merged((e["ts"], e["ts"] + e["dur"]) for e in kernels if e["name"].startswith(COMM_PREFIX))
    comp = merged((e["ts"], e["ts"] + e["dur"]) for e in kernels if not e["name"].startswith(COMM_PREFIX))
    both = sum(max(0.0, min(b, d) - max(a, c)) for a, b in comm for c, d in comp)
    return 100.0 * both / sum(b - a for a, b in comm)


def test_hta_reads_the_ranks_once_taught(run, capsys):
    """HTA finds communication by name (^nccl); the README's block, run as written, teaches it ours
    (openreg_trace.hta), after which HTA's overlap is the one the trace says."""
    folder, traces, _ = run
    import pandas as pd
    from hta.trace_analysis import TraceAnalysis

    from openreg_trace import hta as openreg_hta

    assert not openreg_hta.is_taught()
    # Untaught: none of our kernels is communication, so there is nothing to overlap.
    untaught = TraceAnalysis(trace_dir=str(folder)).get_comm_comp_overlap(visualize=False)
    assert untaught["comp_comm_overlap_pctg"].isna().all(), untaught
    block = readme_blocks("HolisticTraceAnalysis")[0]
    assert '"openreg_demo_traces"' in block and "openreg_hta.teach()" in block
    # HTA 0.5.0's critical path raises under pandas 3 on any trace (README, "Versions"): the block up to it.
    pandas3 = int(pd.__version__.split(".")[0]) >= 3
    old_hta = openreg_hta.hta_version() == "0.5.0" and pandas3
    if old_hta:
        block = block[: block.index("# The step by name")]
    try:
        exec(block.replace('"openreg_demo_traces"', repr(str(folder))), {})  # noqa: S102
        out = capsys.readouterr().out
        assert "comp_comm_overlap_pctg" in out and (old_hta or "bound_by" in out)
        # Every recorded step (HTA leaves out the last by default), so that it sees what overlap_percent sees.
        overlap = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True).get_comm_comp_overlap(
            visualize=False
        )
    finally:
        openreg_hta.forget()  # the other tests of this session see HTA as installed
    assert sorted(overlap["rank"]) == [0, 1]
    for rank, value in zip(overlap["rank"], overlap["comp_comm_overlap_pctg"]):
        expected = overlap_percent(traces[rank])
        # The scenario computes while an all_reduce is in flight, so there is overlap to find; HTA rounds to
        # 2 decimals (and, taught, keeps nanoseconds).
        assert expected > 0
        assert abs(value - expected) < 0.01, (rank, value, expected)
