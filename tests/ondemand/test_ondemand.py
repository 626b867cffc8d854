"""On-demand traces (Kineto's daemon mode, as `dyno gputrace` asks for them) hold openreg's device rows.

Each test starts a training job with KINETO_USE_DAEMON=1: Kineto's own client,
inside libtorch, registers with the daemon and polls it for a request. The
daemon's end is played by the test (dynolog_daemon.py: dynolog is in neither
Debian nor PyPI), with the socket name and messages of Kineto's IPC fabric and
the config text `dyno gputrace` sends. The job itself is untouched: no
torch.profiler.profile in it, unless a test says so.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time

from dynolog_daemon import CONFIG_TYPE_ACTIVITIES, gputrace_config
from ondemand_job import (
    DEVICE_CATEGORIES,
    arg_keys,
    device_lanes,
    events,
    names,
    stream_rows,
    trace_path,
    wait_for_file,
    wait_until_configured,
)

from openreg_trace.report._native import report_data_text

RUNTIME = "privateuse1_runtime"
DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")
TOOL = [sys.executable, "-m", "torch_openreg"]


def ask(daemon, job, log_file, **flags) -> None:
    """`dyno gputrace --pids <job> --log-file <log_file> <flags>`, once the job trains."""
    job.wait_steps(3)  # Kineto counts the optimizer's steps from the first; an iteration request needs that
    daemon.wait_registered(job.pid, 60)
    asked = daemon.request([job.pid], gputrace_config(str(log_file), **flags))
    assert asked.triggered == [job.pid], asked


def request(daemon, job, log_file, **flags) -> dict:
    """ask(), then the trace Kineto writes."""
    ask(daemon, job, log_file, **flags)
    return wait_for_file(trace_path(log_file, job.pid))


def span(trace: dict, *categories: str) -> tuple[float, float]:
    """First start and last end (us, on the process's trace clock) of the trace's events of these categories."""
    chosen = events(trace, *categories)
    return min(e["ts"] for e in chosen), max(e["ts"] + e["dur"] for e in chosen)


def check_passes(path) -> None:
    done = subprocess.run([*TOOL, "check", str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def per_step_work(job, tmp_path) -> tuple[collections.Counter, collections.Counter, dict]:
    """One training step's runtime calls and device work, from a torch.profiler.profile of whole steps in the job."""
    path = tmp_path / "reference.json"
    job.wait_steps(2)  # the first step also creates the optimizer's momentum buffers
    steps = job.profile(0.5, path)
    reference = wait_for_file(path)
    per_step = []
    for categories in ((RUNTIME,), DEVICE_WORK):
        counts = names(reference, *categories)
        for exit_sync in ("orDeviceSynchronize", "Context Sync"):  # profile()'s exit synchronizes; no step does
            del counts[exit_sync]
        assert all(n % steps == 0 for n in counts.values()), (steps, counts)
        per_step.append(collections.Counter({name: n // steps for name, n in counts.items()}))
    return per_step[0], per_step[1], reference


# ---- 1. device rows on demand


def test_iteration_request_holds_the_work_of_exactly_its_steps(daemon, start_job, tmp_path):
    job = start_job()
    calls, work, reference = per_step_work(job, tmp_path)
    trace = request(daemon, job, tmp_path / "trace.json", iterations=3)
    # Kineto starts and ends the trace in the optimizer's step hook: the runtime calls of three whole steps (the
    # loss read back of the step before the first, not of the last), as three steps under profile() make.
    assert names(trace, RUNTIME) == collections.Counter({name: 3 * n for name, n in calls.items()})
    assert names(trace, "user_annotation")["Optimizer.step#SGD.step"] == 3
    # Their device work, but for what the device still ran of the last step when the trace ended (left out, as
    # Kineto leaves out CUDA's, and counted): every step before the last is whole.
    traced = names(trace, *DEVICE_WORK)
    for name, n in work.items():
        assert 2 * n <= traced[name] <= 3 * n, (name, traced[name], n)
    assert not set(traced) - set(work), traced
    # The same rows and args as profile() gives.
    assert device_lanes(trace) == device_lanes(reference)
    streams = {row for row in stream_rows(reference) if not row[1].startswith("Host waits")}  # profile()'s exit sync
    assert stream_rows(trace) == streams
    for category in (*DEVICE_WORK, RUNTIME):
        assert arg_keys(trace, category) == arg_keys(reference, category), category
    meta = trace["openreg_profiler"]
    assert meta["on_demand"]["iterations"] == 3 and meta["on_demand"]["trace_id"], meta
    assert meta["host_clock"].startswith("torch.profiler's TSC line"), meta["host_clock"]
    assert meta["rejected_clock_samples"] == 0 and 0 < meta["tracing_overhead_ns"] < 10**9, meta
    check_passes(trace_path(tmp_path / "trace.json", job.pid))
    assert job.stop() == 0


def test_duration_request_holds_device_rows(daemon, start_job, tmp_path):
    job = start_job()
    trace = request(daemon, job, tmp_path / "trace.json", duration_ms=500)
    kernels = events(trace, "kernel")
    assert kernels and events(trace, "gpu_memcpy") and events(trace, "gpu_memset") and events(trace, "cuda_sync")
    # Device time is mapped into the request's window: [start, start + 500 ms] (Kineto's PROFILE_START_TIME).
    meta = trace["openreg_profiler"]
    assert meta["requested_duration_ms"] == 500 and meta["on_demand"]["iterations"] == 0, meta
    span = max(e["ts"] + e["dur"] for e in kernels) - min(e["ts"] for e in kernels)
    assert span <= 500_000, span
    check_passes(trace_path(tmp_path / "trace.json", job.pid))
    assert job.stop() == 0


# ---- 2. runtime rows by default


def test_request_naming_no_types_gets_runtime_rows_and_arrows(daemon, start_job, tmp_path):
    job = start_job()
    trace = request(daemon, job, tmp_path / "trace.json", iterations=2)
    launches = events(trace, RUNTIME)
    work = events(trace, *DEVICE_CATEGORIES)
    assert work and len(launches) >= len(work)
    # Every kernel, copy and memset ends an arrow that starts on its launch row.
    flows = collections.defaultdict(dict)
    for e in trace["traceEvents"]:
        if e.get("cat") == "ac2g":
            flows[e["id"]][e["ph"]] = e
    launch_at = {(e["pid"], e["tid"], e["ts"]) for e in launches}
    for w in work:
        flow = flows[w["args"]["correlation"]]
        assert set(flow) == {"s", "f"}, w
        assert (flow["s"]["pid"], flow["s"]["tid"], flow["s"]["ts"]) in launch_at, w
    meta = trace["openreg_profiler"]
    assert meta["on_demand"]["types_by_default"] is True and RUNTIME in meta["requested"], meta
    assert job.stop() == 0


def test_request_naming_types_gets_exactly_those(daemon, start_job, tmp_path):
    job = start_job()
    trace = request(daemon, job, tmp_path / "trace.json", iterations=2, extra="ACTIVITY_TYPES=cpu_op,kernel")
    assert events(trace, "kernel")
    assert not events(trace, RUNTIME, "gpu_memcpy", "gpu_memset")
    assert not [e for e in trace["traceEvents"] if e.get("cat") == "ac2g"]
    meta = trace["openreg_profiler"]
    assert meta["requested"] == ["kernel", "cuda_sync"], meta  # a stream sync is a wait on the kernels asked for
    assert meta["on_demand"]["types_by_default"] is False, meta
    assert job.stop() == 0


def test_request_for_metrics_gets_kernel_metrics_and_counter_tracks(daemon, start_job, tmp_path):
    """What `_ExperimentalConfig(profiler_metrics=...)` writes into the config text works in a request too."""
    job = start_job()
    extra = (
        "CUPTI_PROFILER_METRICS=flops,bytes_read,memory_allocated,queued_tasks\nCUPTI_PROFILER_ENABLE_PER_KERNEL=true"
    )
    trace = request(daemon, job, tmp_path / "trace.json", iterations=2, extra=extra)
    gemms = [e for e in events(trace, "kernel") if e["name"].startswith("gemm")]
    assert gemms and all(e["args"]["flops"] > 0 and e["args"]["bytes_read"] > 0 for e in gemms)
    counter_names = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "C"}
    assert counter_names == {"memory_allocated", "queued_tasks"}, counter_names
    meta = trace["openreg_profiler"]["metrics"]
    assert meta["kernel"] == ["flops", "bytes_read"] and meta["per_kernel"] is True, meta
    check_passes(trace_path(tmp_path / "trace.json", job.pid))
    assert job.stop() == 0


# ---- 5. the tools on an on-demand trace (no ProfilerStep#N)


def test_tools_take_the_optimizer_steps_of_an_on_demand_trace(daemon, start_job, tmp_path):
    job = start_job()
    log_file = tmp_path / "trace.json"
    trace = request(daemon, job, log_file, iterations=3)
    assert job.stop() == 0
    path = trace_path(log_file, job.pid)
    first = trace["openreg_profiler"]["on_demand"]["start_iteration"] + 1  # Kineto's count, where it started
    expected = [f"iteration {first + k}" for k in range(3)]
    # The summary says how it found the steps; the critical path and the report take them as steps.
    summary = json.loads(subprocess.run([*TOOL, "summary", "--json", str(path)], capture_output=True, text=True).stdout)
    steps = summary["trace"]["steps"]
    assert steps["from"] == "Optimizer.step#" and steps["count"] == 3, steps
    assert "the first starts with the trace" in steps["note"], steps["note"]
    each = subprocess.run([*TOOL, "critical-path", "--each-step", "--json", str(path)], capture_output=True, text=True)
    assert each.returncode == 0, each.stderr
    assert [s["step"] for s in json.loads(each.stdout)["steps"]] == expected
    text = subprocess.run([*TOOL, "critical-path", "--step", str(first + 1), str(path)], capture_output=True, text=True)
    assert text.returncode == 0 and text.stdout.startswith(f"Critical path of {expected[1]}: "), text.stdout
    assert "  steps: no ProfilerStep#N ranges (an on-demand trace)" in text.stdout, text.stdout
    report = json.loads(report_data_text(path))["report"]
    assert [s["name"] for s in report["steps"]] == expected and report["steps_note"] == steps["note"]
    # Each step ends where an Optimizer.step# range ends (times to the ns the JSON's us with 3 decimals hold).
    ends = sorted(
        e["ts"] + e["dur"] for e in events(trace, "user_annotation") if e["name"].startswith("Optimizer.step#")
    )
    durations = [(s["end_ns"] - s["start_ns"]) / 1e3 for s in report["steps"]][1:]
    assert len(ends) == 3 and all(abs(d - (b - a)) < 0.002 for d, a, b in zip(durations, ends, ends[1:])), ends


# ---- 3. side by side with profile(), and requests at awkward times


def test_request_while_profile_runs_waits_for_it(daemon, start_job, tmp_path):
    job = start_job()
    job.wait_steps(3)
    daemon.wait_registered(job.pid, 60)
    profiled = tmp_path / "profile.json"
    sent = job.send(f"profile 6 {profiled}")
    job.wait_line(lambda line: line == "profiling", after=sent)
    asked_at = time.monotonic()
    log_file = tmp_path / "trace.json"
    assert daemon.request([job.pid], gputrace_config(str(log_file), iterations=3)).triggered == [job.pid]
    job.wait_line(lambda line: line == "profile ended", after=sent)
    ended_at = next(at for at, line in job.lines if at >= sent and line == "profile ended")
    done = job.wait_line(lambda line: line.startswith(f"profiled {profiled} "), after=sent)
    trace = wait_for_file(trace_path(log_file, job.pid))
    # Kineto, busy with profile(), asked the daemon without the activities bit: the request waited in the daemon
    # (as for CUDA), and was taken once profile() had ended.
    polls = [p for p in daemon.polls if p.pids[0] == job.pid]
    assert all(not p.config_type & CONFIG_TYPE_ACTIVITIES for p in polls if asked_at <= p.at <= ended_at - 0.5)
    assert min(p.at for p in polls if p.answered) > ended_at - 0.5
    # Neither trace holds the other's work.
    profile_trace = wait_for_file(profiled)
    assert names(profile_trace, "user_annotation")["Optimizer.step#SGD.step"] == int(done.split()[-1])
    assert names(trace, "user_annotation")["Optimizer.step#SGD.step"] == 3
    assert span(profile_trace, "cpu_op", *DEVICE_WORK)[1] <= span(trace, "cpu_op", *DEVICE_WORK)[0]
    check_passes(profiled)
    check_passes(trace_path(log_file, job.pid))
    assert job.stop() == 0


def test_profile_started_during_an_on_demand_trace_takes_it_over(daemon, start_job, tmp_path):
    job = start_job()
    calls, work, _ = per_step_work(job, tmp_path)
    log_file = tmp_path / "trace.json"
    ask(daemon, job, log_file, iterations=1000)
    wait_until_configured(trace_path(log_file, job.pid))
    job.wait_steps(2)  # collecting
    profiled = tmp_path / "profile.json"
    steps = job.profile(1.0, profiled)
    # Kineto cancels the on-demand trace for profile(), as for CUDA; the plugin says so (Kineto's own warning is
    # hidden at daemon mode's log level).
    assert "was cancelled before it was written: a torch.profiler.profile started" in job.stderr()
    # profile()'s trace has all its steps' work and nothing of the on-demand trace's.
    profile_trace = wait_for_file(profiled)
    for categories, per_step in (((RUNTIME,), calls), (DEVICE_WORK, work)):
        counts = names(profile_trace, *categories)
        del counts["orDeviceSynchronize"], counts["Context Sync"]
        assert counts == collections.Counter({name: steps * n for name, n in per_step.items()}), categories
    check_passes(profiled)
    assert job.stop() == 0
    assert not trace_path(log_file, job.pid).exists()


def test_two_requests_in_a_row_give_two_traces(daemon, start_job, tmp_path):
    job = start_job()
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    ask(daemon, job, first, iterations=3)
    wait_until_configured(trace_path(first, job.pid))  # collecting: Kineto takes no other request now
    assert daemon.request([job.pid], gputrace_config(str(second), iterations=3)).triggered == [job.pid]
    traces = [wait_for_file(trace_path(path, job.pid)) for path in (first, second)]
    for trace in traces:
        assert names(trace, "user_annotation")["Optimizer.step#SGD.step"] == 3
        assert events(trace, "kernel") and events(trace, RUNTIME)
    assert traces[0]["trace_id"] != traces[1]["trace_id"]
    assert span(traces[0], "cpu_op", *DEVICE_WORK)[1] <= span(traces[1], "cpu_op", *DEVICE_WORK)[0]
    for path in (first, second):
        check_passes(trace_path(path, job.pid))
    assert job.stop() == 0


def test_request_while_the_device_is_idle(daemon, start_job, tmp_path):
    job = start_job()
    job.wait_steps(3)
    daemon.wait_registered(job.pid, 60)
    # dyno's --profile-start-time: the trace starts then (Kineto wants 5 s of warm-up), while the job idles.
    start_s = time.time() + 12
    log_file = tmp_path / "trace.json"
    flags = {"profile_start_time_ms": int(start_s * 1000), "duration_ms": 500}
    assert daemon.request([job.pid], gputrace_config(str(log_file), **flags)).triggered == [job.pid]
    time.sleep(max(0.0, start_s - 3 - time.time()))
    job.wait_line(lambda line: line == "idle", after=job.send("idle 6"))
    trace = wait_for_file(trace_path(log_file, job.pid))
    assert not events(trace, "cpu_op", RUNTIME, *DEVICE_WORK)
    assert device_lanes(trace) and trace["openreg_profiler"]["device_activities"] == 0
    check_passes(trace_path(log_file, job.pid))
    summary = subprocess.run([*TOOL, "summary", str(trace_path(log_file, job.pid))], capture_output=True, text=True)
    assert summary.returncode == 0, summary.stderr
    assert job.stop() == 0


def test_exit_during_an_iteration_trace_ends_and_writes_it(daemon, start_job, tmp_path):
    job = start_job()
    log_file = tmp_path / "trace.json"
    ask(daemon, job, log_file, iterations=1000)
    wait_until_configured(trace_path(log_file, job.pid))
    job.wait_steps(3)
    # Exiting while torch's on-demand collection is on is a segfault in torch's exit handlers (CPU-only too):
    # openreg's exit hook ends the trace first, and Kineto writes it.
    assert job.stop() == 0, job.stderr()
    assert "before its 1000 iterations ended: ending it now" in job.stderr()
    trace = wait_for_file(trace_path(log_file, job.pid), 1)
    assert trace["openreg_profiler"]["on_demand"]["ended_early_at_exit"] is True
    assert 3 <= names(trace, "user_annotation")["Optimizer.step#SGD.step"] < 1000
    assert events(trace, "kernel")
    check_passes(trace_path(log_file, job.pid))


def test_exit_during_a_duration_trace_waits_for_its_end(daemon, start_job, tmp_path):
    job = start_job()
    log_file = tmp_path / "trace.json"
    start_s = time.time() + 10
    ask(daemon, job, log_file, profile_start_time_ms=int(start_s * 1000), duration_ms=3000)
    time.sleep(max(0.0, start_s + 1 - time.time()))
    assert job.stop() == 0, job.stderr()
    assert "ms for its end" in job.stderr()
    trace = wait_for_file(trace_path(log_file, job.pid), 1)
    assert trace["openreg_profiler"]["on_demand"]["ended_early_at_exit"] is False
    assert events(trace, "kernel")
    check_passes(trace_path(log_file, job.pid))


def test_exit_before_the_trace_starts_says_nothing_was_traced(daemon, start_job, tmp_path):
    job = start_job()
    log_file = tmp_path / "trace.json"
    ask(daemon, job, log_file, duration_ms=500)  # dyno's default: Kineto configures it now, starts it in ~7 s
    wait_until_configured(trace_path(log_file, job.pid))
    assert job.stop() == 0, job.stderr()
    assert "started: nothing was traced" in job.stderr()
    assert not trace_path(log_file, job.pid).exists()
