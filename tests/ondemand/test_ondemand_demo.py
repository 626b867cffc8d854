"""`demo --on-demand`, and one on-demand request to both ranks of `demo --ranks 2 --on-demand`.

The daemon takes several pids in one request.

The ranks run in Kineto's daemon mode (the demo sets KINETO_USE_DAEMON for
them); the test plays the daemon's end (dynolog_daemon.py) and asks both pids
for a trace of the same second (dyno's --profile-start-time, its way to
collect ranks together), then reads the two traces with the trace tools
across the ranks.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from dynolog_daemon import gputrace_config
from ondemand_job import daemon_mode_environment, events, names, trace_path, wait_for_file

TOOL = [sys.executable, "-m", "torch_openreg"]
DEMO_S = 600.0
# Kineto copies record_param_comms' args onto the collective's kernel: NCCL's names.
NCCL_ARGS = {"Collective name", "dtype", "In msg nelems", "Out msg nelems", "Group size", "Process Group Name"}


def _rank_pids(demo: subprocess.Popen, lines: list[str], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in list(lines):
            if line.startswith("ranks: "):
                return [int(part.split(" pid ")[1]) for part in line[len("ranks: ") :].split(", ")]
        if demo.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"the demo printed no rank pids: {lines}")


def _wait_training(demo: subprocess.Popen, log: Path, steps: int, timeout_s: float) -> None:
    """Until the rank's log shows `steps` steps done (Kineto counts them from the first; before it, an
    iteration-based request falls back to a duration)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = re.findall(r"(\d+)/\d+", log.read_text(errors="replace")) if log.exists() else []
        if done and int(done[-1]) >= steps:
            return
        if demo.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{log} shows no {steps} steps within {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(demo: subprocess.Popen) -> None:
    """Ends the demo: SIGTERM, on which it kills its ranks; SIGKILL after 30 s, on which they die with it (each
    rank is in a session of its own, out of the demo's process group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if demo.poll() is not None:
            return
        try:
            os.killpg(demo.pid, sig)
            demo.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass


def test_one_request_traces_both_ranks(daemon, tmp_path):
    env = daemon_mode_environment(tmp_path)
    del env["KINETO_USE_DAEMON"]  # the demo puts the ranks (only) in daemon mode
    demo = subprocess.Popen(
        [
            *TOOL,
            "demo",
            "--ranks",
            "2",
            "--on-demand",
            "--size",
            "tiny",
            "--steps",
            "1000000",  # trains until the test has the traces and stops it (no step count fits every machine's load)
            "-o",
            str(tmp_path / "out"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(line.rstrip() for line in demo.stdout), daemon=True).start()
    try:
        pids = _rank_pids(demo, lines, 180)
        for rank, pid in enumerate(pids):
            daemon.wait_registered(pid, 180)
            _wait_training(demo, tmp_path / "out" / "ranks" / f"rank{rank}.log", 5, 300)
        log_file = tmp_path / "traces" / "ondemand.json"
        log_file.parent.mkdir()
        # dyno's --profile-start-time: every rank traces the same second (Kineto wants 5 s of warm-up first).
        start_ms = int((time.time() + 10) * 1000)
        asked = daemon.request(pids, gputrace_config(str(log_file), profile_start_time_ms=start_ms, duration_ms=1000))
        assert sorted(asked.triggered) == sorted(pids), asked
        try:
            traces = [wait_for_file(trace_path(log_file, pid), DEMO_S, writer=demo) for pid in pids]
        except AssertionError as error:
            raise AssertionError("\n".join([str(error), *lines])) from None
        assert demo.poll() is None, "\n".join(lines)  # still training: nothing failed while it was traced
    finally:
        _stop(demo)

    for rank, trace in enumerate(traces):
        assert trace["distributedInfo"]["rank"] == rank, trace.get("distributedInfo")
        # Kineto copies NCCL's args from the collective's record_param_comms op: every collective whose op is in
        # the trace has them (one launched by an op begun before the trace's window has no op to copy from).
        ops = {e["args"]["External id"]: e for e in events(trace, "cpu_op") if e["name"] == "record_param_comms"}
        collectives = [e for e in events(trace, "kernel") if e["name"].startswith("openregComm_")]
        linked = [k for k in collectives if k["args"].get("External id") in ops]
        assert linked, f"rank {rank}: no collective linked to its op in {len(collectives)}"
        for kernel in linked:
            assert NCCL_ARGS <= set(kernel["args"]), kernel["args"]
        assert events(trace, "privateuse1_runtime") and names(trace, "user_annotation")
        on_demand = trace["openreg_profiler"]["on_demand"]
        assert on_demand["iterations"] == 0 and on_demand["trace_id"], on_demand

    folder = str(log_file.parent)
    summary = subprocess.run([*TOOL, "summary", "--json", folder], capture_output=True, text=True, timeout=300)
    assert summary.returncode == 0, summary.stdout + summary.stderr
    summaries = json.loads(summary.stdout)
    assert [t["summary"]["trace"]["steps"]["from"] for t in summaries["traces"]] == ["Optimizer.step#"] * 2
    assert summaries["ranks"], summaries.keys()  # what the ranks did together
    # The critical path across the ranks, of each step in both traces: the ranks' steps matched by time.
    each = subprocess.run([*TOOL, "critical-path", "--each-step", "--json", folder], capture_output=True, text=True)
    assert each.returncode == 0, each.stdout + each.stderr
    steps = json.loads(each.stdout)
    assert steps["steps_from"] == "Optimizer.step#" and steps["steps"], steps
    path = subprocess.run([*TOOL, "critical-path", folder], capture_output=True, text=True, timeout=300)
    assert path.returncode == 0, path.stdout + path.stderr
    assert "steps: no ProfilerStep#N ranges (an on-demand trace)" in path.stdout, path.stdout
    assert "rank bounding the step" in path.stdout, path.stdout


def test_demo_on_demand_needs_daemon_mode(tmp_path):
    env = daemon_mode_environment(tmp_path)
    del env["KINETO_USE_DAEMON"]
    demo = subprocess.run(
        [*TOOL, "demo", "--on-demand", "--steps", "2", "--size", "tiny", "-o", str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_S,
    )
    assert demo.returncode == 2, demo.stdout + demo.stderr
    assert "--on-demand needs Kineto's daemon mode" in demo.stderr and "KINETO_USE_DAEMON=1" in demo.stderr


def test_demo_on_demand_trains_with_no_profiler_and_says_how_to_ask(daemon, tmp_path):
    out = tmp_path / "out"
    demo = subprocess.run(
        [*TOOL, "demo", "--on-demand", "--steps", "5", "--size", "tiny", "-o", str(out)],
        env=daemon_mode_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=DEMO_S,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    pid = int(re.search(r"dyno gputrace --pids (\d+) ", demo.stdout).group(1))
    assert any(poll.pids[0] == pid for poll in daemon.polls), "the demo did not register with the daemon"
    assert "over 5 steps" in demo.stdout
    assert not list(out.glob("*.json")), "no torch.profiler trace"
