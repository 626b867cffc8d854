"""Faults on the real backend and runtime: each ends in a defined outcome (a
valid trace, a named error, a clean exit), never a crash, a hang or a silent
loss. Covered elsewhere, and not repeated here:

- a missing, incomplete or too old activity library, and the default search
  without a runtime beside the plugin: tests/profiler/test_failures.py
  (through the replay library); here only the real backend without it;
- nested profilers (torch crashes exporting the outer one, so that is not
  done): tests/profiler/test_failures.py::test_nested_profilers;
- profilers on two threads: one after the other in
  tests/profiler/test_failures.py; at once in C++
  (csrc/profiler/tests/torch_test_session.cpp), since torch itself crashes
  there (csrc/profiler/README.md);
- drops injected by the replay library: tests/profiler/test_replay_scenario.py;
  refused buffers and misuse of the C API: runtime/tests/test_activity.cpp;
- malformed record buffers: the runtime's reader fuzzer (runtime/tests/fuzz)
  and the plugin's (csrc/profiler/tests/fuzz, and test_records_fuzz.cpp).
"""

from __future__ import annotations

import re
import textwrap
from collections import Counter

# isort: off
# fault_harness puts tests/profiler, where trace_invariants lives, on sys.path.
from fault_harness import assert_trace_valid, run_scenario
import trace_invariants as ti
# isort: on

# Two 512 KiB buffers in all: the launching thread and one other thread (an
# executor, or the thread writing clock samples) hold them, so executors find
# none and must drop records.
TINY_BUFFERS = {"OPENREG_PROFILER_BUFFER_KB": "512", "OPENREG_PROFILER_BUFFER_LIMIT_MB": "1"}


def test_tiny_buffers_drop_records_and_say_so(tmp_path):
    outcome = run_scenario(
        """
        a = torch.zeros(64, device="openreg:0")
        b = torch.zeros(64, device="openreg:1")
        torch.openreg.synchronize(0); torch.openreg.synchronize(1)
        before = runtime_stats()
        with profile(activities=DEVICE_ACTIVITIES) as prof:
            for _ in range(3000):
                a.add_(1.0)
                b.add_(1.0)
            torch.openreg.synchronize(1)
        after = runtime_stats()
        prof.export_chrome_trace("trace.json")
        write_result(dict(a=a[0].item(), b=b[0].item(), device_events=len(device_events(prof)),
                          written=after["written"] - before["written"], dropped=after["dropped"] - before["dropped"]))
    """,
        tmp_path,
        env=TINY_BUFFERS,
    ).ok()
    assert outcome.result["a"] == outcome.result["b"] == 3000.0, "the device computed everything regardless"
    trace = assert_trace_valid(tmp_path / "trace.json")
    meta = trace.openreg_metadata()
    dropped = trace.raw["openreg_dropped_records"]
    assert dropped > 0 and meta["dropped_by_runtime"] == dropped
    assert meta["buffers_refused"] > 0
    warning = re.search(r"openreg profiler: (\d+) activity records were dropped by the runtime", outcome.stderr)
    assert warning and int(warning.group(1)) == dropped, outcome.stderr[-3000:]
    # Nothing lost silently: every record the runtime wrote reached the trace's
    # records, every one it dropped is in the count, exactly.
    assert meta["records"] == outcome.result["written"], (meta, outcome.result)
    assert dropped == outcome.result["dropped"], (meta, outcome.result)
    # Every kind drops (records of runtime calls and clock samples too); the
    # drops of each kind are counted apart, so the 6000 kernels add up exactly.
    by_kind = meta["dropped_by_kind"]
    assert sum(by_kind.values()) == dropped, by_kind
    kernels = len(trace.kernels())
    # Which threads hold the two buffers varies (the launcher, an executor, the clock-sampling thread):
    # some device's executor finds none, and how many of the kernels drop varies (up to all 6000).
    assert by_kind["kernel"] > 0, by_kind
    assert kernels + by_kind["kernel"] == 6000, (kernels, by_kind)
    assert kernels == outcome.result["device_events"]
    said = re.search(r"dropped by the runtime \(([^)]*)\)", outcome.stderr)
    assert said and {k: int(n) for k, n in (p.rsplit(" ", 1) for p in said.group(1).split(", "))} == by_kind


def test_the_real_backend_without_its_tracing_library(tmp_path):
    outcome = run_scenario(
        """
        x = torch.ones(256, device="openreg")
        with profile(activities=DEVICE_ACTIVITIES) as prof:
            y = (x * 2).sum()
            value = y.item()
        prof.export_chrome_trace("trace.json")
        ops = {e.key for e in prof.key_averages()}
        write_result(dict(value=value, ops=sorted(ops), device_events=len(device_events(prof))))
    """,
        tmp_path,
        env={"OPENREG_ACTIVITY_LIBRARY": "/nonexistent/libopenreg.so"},
    ).ok()
    assert outcome.result["value"] == 512.0, "the backend does not need the tracing library"
    assert "aten::mul" in outcome.result["ops"], "host profiling keeps working"
    assert outcome.result["device_events"] == 0
    assert "cannot load the activity library '/nonexistent/libopenreg.so'" in outcome.stderr
    trace = assert_trace_valid(tmp_path / "trace.json")
    assert "/nonexistent/libopenreg.so" in trace.raw["openreg_profiler_error"]
    assert not trace.device_events()


def test_a_kernel_fails_while_the_profiler_runs(tmp_path):
    outcome = run_scenario(
        """
        x = torch.ones(64, device="openreg")
        torch.openreg.synchronize()
        with profile(activities=DEVICE_ACTIVITIES) as prof:
            y = x + 1
            torch.ops.openreg._fail_kernel(x, "simulated fault")
            try:
                torch.openreg.synchronize()
                error = None
            except RuntimeError as e:
                error = str(e)
            z = x * 3
            torch.openreg.synchronize()
        prof.export_chrome_trace("failed.json")
        with profile(activities=DEVICE_ACTIVITIES) as again:
            for _ in range(5):
                w = x - 1
        again.export_chrome_trace("again.json")
        write_result(dict(error=error, z=z[0].item(), w=w[0].item()))
    """,
        tmp_path,
    ).ok()
    error = outcome.result["error"]
    assert error and "test_fail_kernel" in error and "simulated fault" in error, error
    assert outcome.result["z"] == 3.0 and outcome.result["w"] == 0.0, "the stream works after the failure"
    trace = assert_trace_valid(tmp_path / "failed.json")
    failed = [e for e in trace.kernels() if e.name == "test_fail_kernel"]
    assert len(failed) == 1 and failed[0].args.get("status", 0) != 0, "the failed kernel is in the trace, marked"
    ops = ti.linked_op_names(trace)
    assert ops.get(failed[0].args.get("External id")) == "openreg::_fail_kernel"
    names = Counter(e.name for e in trace.kernels())
    assert len(trace.kernels()) == 3, names  # add, the failure, mul
    again = assert_trace_valid(tmp_path / "again.json")
    assert len(again.kernels()) == 5, "the profiler keeps working after a failure"


def test_profiler_misuse_is_an_error_or_harmless(tmp_path):
    outcome = run_scenario(
        """
        x = torch.ones(64, device="openreg")
        results = {}
        never_started = profile(activities=DEVICE_ACTIVITIES)
        try:
            never_started.stop()
            results["stop without start"] = "accepted"
        except Exception as e:
            results["stop without start"] = type(e).__name__
        twice = profile(activities=DEVICE_ACTIVITIES)
        twice.start()
        twice.start()  # torch restarts the trace
        x.add_(1.0)
        twice.stop()
        twice.export_chrome_trace("started_twice.json")
        twice.stop()  # torch warns; nothing of ours may break
        with profile(activities=DEVICE_ACTIVITIES) as after:
            x.add_(1.0)
            x.add_(1.0)
        after.export_chrome_trace("after.json")
        results["x"] = x[0].item()
        write_result(results)
    """,
        tmp_path,
    ).ok()
    assert outcome.result["stop without start"] == "AssertionError"
    assert outcome.result["x"] == 4.0
    assert len(assert_trace_valid(tmp_path / "started_twice.json").kernels()) == 1
    assert len(assert_trace_valid(tmp_path / "after.json").kernels()) == 2
    assert "already collecting" not in outcome.stderr, "no session may keep the device after misuse"


def test_profiler_nested_on_the_real_backend(tmp_path):
    outcome = run_scenario(
        """
        x = torch.ones(64, device="openreg")
        with profile(activities=DEVICE_ACTIVITIES) as outer:
            x.add_(1.0)
            with profile(activities=DEVICE_ACTIVITIES) as inner:
                x.add_(1.0)
                x.add_(1.0)
            x.add_(1.0)
        inner.export_chrome_trace("inner.json")  # (exporting outer crashes torch 2.13)
        with profile(activities=DEVICE_ACTIVITIES) as again:
            x.add_(1.0)
        again.export_chrome_trace("again.json")
        write_result(dict(x=x[0].item()))
    """,
        tmp_path,
    ).ok()
    assert outcome.result["x"] == 6.0
    assert len(assert_trace_valid(tmp_path / "inner.json").kernels()) == 2
    assert len(assert_trace_valid(tmp_path / "again.json").kernels()) == 1


def test_eight_threads_on_two_devices_and_four_streams(tmp_path):
    """Every (device, stream) row gets exactly its thread's kernels, each
    with its launch, no record lost. torch's profiler records ops only on
    the thread that entered it, so these kernels carry no op link (as CUDA
    kernels launched from such threads would not)."""
    outcome = run_scenario(
        """
        import threading
        K = 250
        streams, tensors = {}, {}
        for t in range(8):
            device = t % 2
            index = (t // 2) % 4
            streams[t] = (torch.openreg.default_stream(device) if index == 0
                          else torch.openreg.Stream(device=torch.device("openreg", device)))
            tensors[t] = torch.zeros(16, device=f"openreg:{device}")
        torch.openreg.synchronize(0); torch.openreg.synchronize(1)
        barrier = threading.Barrier(8)
        def work(t):
            barrier.wait()
            with torch.openreg.stream(streams[t]):
                for _ in range(K):
                    tensors[t].add_(1.0)
            streams[t].synchronize()
        with profile(activities=DEVICE_ACTIVITIES) as prof:
            threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
            for thread in threads: thread.start()
            for thread in threads: thread.join(120)
        prof.export_chrome_trace("trace.json")
        write_result(dict(K=K, rows={str(t): [t % 2, streams[t].stream_id] for t in range(8)},
                          values=[tensors[t][0].item() for t in range(8)],
                          alive=[t.name for t in threads if t.is_alive()]))
    """,
        tmp_path,
    ).ok()
    k = outcome.result["K"]
    assert outcome.result["alive"] == []
    assert outcome.result["values"] == [float(k)] * 8
    trace = assert_trace_valid(tmp_path / "trace.json")
    expected = Counter({tuple(row): k for row in outcome.result["rows"].values()})
    assert len(expected) == 8, "2 devices x 4 streams"
    assert Counter(e.row for e in trace.kernels()) == expected
    launches = [e for e in trace.runtime_events() if e.name.startswith("orLaunchKernel")]
    assert Counter(e.args["correlation"] for e in launches) == Counter(e.args["correlation"] for e in trace.kernels())
    assert len({e.tid for e in launches}) == 8, "each thread's launches on its own host row"
    assert trace.raw["openreg_dropped_records"] == 0


def test_exit_with_work_queued_lets_it_finish(tmp_path):
    outcome = run_scenario(
        """
        x = torch.zeros(1 << 16, device="openreg")
        for _ in range(500):
            x.add_(1.0)
        write_result(dict(queued=True))
        # no synchronize: the interpreter exits with the kernels queued
    """,
        tmp_path,
    ).ok()
    assert outcome.result["queued"]
    assert "dropping its queued work" not in outcome.stderr, "quick work completes within the exit drain"


BLOCKED_AT_EXIT = """
    x = torch.zeros(16, device="openreg")
    torch.ops.openreg._wait_gate(x, 7, 60.0)  # never opened: the kernel blocks for 60 s
    for _ in range(10):
        x.add_(1.0)  # queued behind it
    write_result(dict(queued=True))
"""


def test_exit_with_blocked_work_drops_it_with_a_message(tmp_path):
    """The runtime waits 10 s (bounded) for queued work at exit, then drops
    what is left and says so; a kernel stuck past that must not hang or
    crash the exit. (torch_openreg's own atexit synchronize is taken out
    here: the next test keeps it.)"""
    body = "import atexit\natexit.unregister(torch_openreg._synchronize_at_exit)\n" + textwrap.dedent(BLOCKED_AT_EXIT)
    outcome = run_scenario(body, tmp_path, timeout=50).ok()
    assert outcome.result["queued"]
    assert re.search(r"openreg: device 0 still busy at exit after \d+ ms; dropping its queued work", outcome.stderr), (
        outcome.stderr[-3000:]
    )


def test_exit_with_blocked_work_is_bounded_with_the_backend_loaded(tmp_path):
    """torch_openreg's own atexit synchronize waits 10 s per device, warns, and lets the exit go on
    to the runtime's bounded drain, which drops the stuck kernel."""
    outcome = run_scenario(BLOCKED_AT_EXIT, tmp_path, timeout=40).ok()
    assert outcome.result["queued"]
    assert "openreg: device 0 still busy at exit after 10000 ms" in outcome.stderr, outcome.stderr[-3000:]
    assert re.search(r"openreg: device 0 still busy at exit after \d+ ms; dropping its queued work", outcome.stderr), (
        outcome.stderr[-3000:]
    )


def test_exit_with_a_trace_alive_and_work_queued(tmp_path):
    """The trace's activities (in the plugin's slabs, owned by Kineto) and
    the queued kernels are torn down at exit in whatever order the
    interpreter picks. (Exiting with the profiler still running crashes
    torch 2.13 itself, CPU-only: csrc/profiler/README.md.)"""
    outcome = run_scenario(
        """
        x = torch.zeros(1 << 16, device="openreg")
        with profile(activities=DEVICE_ACTIVITIES, acc_events=True) as prof:
            for _ in range(200):
                x.add_(1.0)
        kernels = len(device_events(prof))
        for _ in range(200):
            x.add_(1.0)  # queued at exit, after the trace
        write_result(dict(kernels=kernels))
    """,
        tmp_path,
    ).ok()
    assert outcome.result["kernels"] == 200
    assert "dropping its queued work" not in outcome.stderr
