"""The plugin driven, unchanged, by the replay activity library: device work
submitted from inside torch ops, as a real backend's kernels would be."""

from __future__ import annotations

from collections import Counter

import trace_invariants as ti
from trace_invariants import Trace

PROFILE_MIXED = """
from torch.profiler import profile, ProfilerActivity, record_function
x = torch.ones(256)
torch.ops.replaytest.kernels(x, 1, 0, 1, 10_000)   # before the profiler: must not appear
start = now_ns()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], record_shapes=True) as prof:
    with record_function("outer_range"):
        torch.ops.replaytest.kernels(x, 3, 0, 1, 20_000)
        with record_function("inner_range"):
            torch.ops.replaytest.kernels(x, 2, 0, 2, 15_000)
    torch.ops.replaytest.copies(x, 1, HTOD, 1)
    torch.ops.replaytest.copies(x, 1, DTOH, 1)
    torch.ops.replaytest.memsets(x, 2)
    torch.ops.replaytest.kernels(x, 2, 1, 1, 10_000)  # device 1
end = now_ns()
torch.ops.replaytest.kernels(x, 1, 0, 1, 10_000)   # after: must not appear
prof.export_chrome_trace("trace.json")
events = []
for e in prof.events():
    events.append(dict(name=e.name, device_type=str(e.device_type), device_index=e.device_index,
                       id=e.id, linked=e.linked_correlation_id if hasattr(e, "linked_correlation_id") else None,
                       device_time=e.device_time_total if hasattr(e, "device_time_total") else None))
avg = {e.key: dict(self_device=e.self_device_time_total, device_total=e.device_time_total, count=e.count)
       for e in prof.key_averages()}
table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30)
write_result(dict(start=start, end=end, avg=avg, events=events, table=table, kind=str(prof.profiler.profiler_kind)))
"""


def test_exact_counts_and_links(run_case, tmp_path):
    case = run_case(PROFILE_MIXED).check()
    trace = Trace.load(tmp_path / "trace.json")
    ops = {e.args["External id"]: e.name for e in trace.cpu_ops() if "External id" in e.args}

    kernels = trace.kernels()
    copies = trace.complete(["gpu_memcpy"])
    memsets = trace.complete(["gpu_memset"])
    assert len(kernels) == 3 + 2 + 2
    assert sorted(e.name for e in copies) == ["Memcpy DtoH (Device -> Host)", "Memcpy HtoD (Host -> Device)"]
    assert len(memsets) == 2
    # Every device event is linked to the op that launched it.
    by_op = Counter(ops.get(e.args.get("External id")) for e in trace.device_events())
    assert by_op == Counter({"replaytest::kernels": 7, "replaytest::copies": 2, "replaytest::memsets": 2})
    # And each has one launch row on the op's thread, joined by an arrow.
    runtime = {e.args["correlation"]: e for e in trace.runtime_events()}
    for e in trace.device_events():
        launch = runtime[e.args["correlation"]]
        assert launch.args["External id"] == e.args["External id"]
    assert len([f for f in trace.events if f.cat == "ac2g" and f.ph == "f"]) == 11
    assert case.result["kind"] == "ProfilerState.KINETO_PRIVATEUSE1"


def test_structural_invariants(run_case, tmp_path):
    case = run_case(PROFILE_MIXED).check()
    trace = Trace.load(tmp_path / "trace.json")
    ti.assert_clean(trace, device_events=7 + 2 + 2, window=(case.result["start"], case.result["end"]))
    # Two devices, named, below the host; rows per stream, named.
    names = trace.metadata("process_name")
    assert names[0]["name"].startswith("openreg:0") and names[1]["name"].startswith("openreg:1")
    rows = trace.metadata("thread_name")
    assert rows[(0, 1)]["name"] == "Stream 1 (default)"
    assert rows[(0, 2)]["name"].startswith("Stream 2")
    assert (1, 1) in rows


def test_device_args(run_case, tmp_path):
    run_case(PROFILE_MIXED).check()
    trace = Trace.load(tmp_path / "trace.json")
    # Launch shapes are checked on real kernels (test_openreg_backend.py's
    # test_launch_shapes_come_from_the_backend), not against the replay's own.
    copy = trace.complete(["gpu_memcpy"])[0]
    assert copy.args["bytes"] == 256 * 4
    assert copy.args["kind"] in ("HtoD", "DtoH")
    assert copy.args["memory bandwidth (GB/s)"] > 0
    memset = trace.complete(["gpu_memset"])[0]
    assert memset.name == "Memset (Device)" and memset.args["bytes"] == 1024
    # Correlation ids are the plugin's own, not the runtime's 64-bit ones.
    assert all(0 < e.args["correlation"] < 2**31 for e in trace.device_events())
    props = trace.raw["deviceProperties"]
    assert [p["id"] for p in props] == [0, 1] and props[0]["backend"] == "openreg"


def test_user_ranges_on_stream_rows(run_case, tmp_path):
    run_case(PROFILE_MIXED).check()
    trace = Trace.load(tmp_path / "trace.json")
    spans = {(e.name, e.tid): e for e in trace.annotations()}
    assert set(spans) == {("outer_range", 1), ("inner_range", 2)}
    ranges = {e.name: e for e in trace.complete(["user_annotation"])}
    for (name, _stream), span in spans.items():
        assert span.pid == 0
        # Kineto writes the range's own id as External id, like for CUDA.
        assert span.args["External id"] == ranges[name].args["External id"]
        covered = [k for k in trace.kernels() if k.row == span.row and span.ts <= k.ts and k.end <= span.end]
        assert covered, f"{name} covers no kernel on its row"
        assert span.ts == min(k.ts for k in covered) and span.end == max(k.end for k in covered)


def test_key_averages_credit_device_time(run_case):
    case = run_case(PROFILE_MIXED).check()
    avg = case.result["avg"]
    # 3x20 + 2x15 + 2x10 µs of kernels launched by replaytest::kernels.
    assert abs(avg["replaytest::kernels"]["device_total"] - (60 + 30 + 20)) < 1.0
    assert abs(avg["replaytest::copies"]["device_total"] - 20) < 1.0
    assert abs(avg["replaytest::memsets"]["device_total"] - 10) < 1.0
    assert avg["aten::clone"]["device_total"] == 0
    assert "Self OPENREG" in case.result["table"] and "OPENREG total" in case.result["table"]
    # Launch rows are host time: they must not carry device time.
    assert avg["orLaunchKernel"]["device_total"] == 0
    device_events = [
        e
        for e in case.result["events"]
        if e["device_type"] != "DeviceType.CPU" and e["name"].startswith("replay_kernel")
    ]
    assert len(device_events) == 7


def test_profiling_many_times_in_one_process(run_case, tmp_path):
    body = """
from torch.profiler import profile, ProfilerActivity
import json
x = torch.ones(4)
counts = []
for i in range(6):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch.ops.replaytest.kernels(x, i + 1, 0, 1, 5_000)
    prof.export_chrome_trace(f"trace{i}.json")
    counts.append(sum(1 for e in json.load(open(f"trace{i}.json"))["traceEvents"] if e.get("cat") == "kernel"))
# A CPU-only trace in between gets no device session and nothing breaks.
with profile(activities=[ProfilerActivity.CPU]) as prof:
    torch.ops.replaytest.kernels(x, 1, 0, 1, 5_000)
prof.export_chrome_trace("cpu_only.json")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    torch.ops.replaytest.kernels(x, 2, 0, 1, 5_000)
prof.export_chrome_trace("last.json")
write_result(dict(counts=counts))
"""
    case = run_case(body).check()
    assert case.result["counts"] == [1, 2, 3, 4, 5, 6]
    cpu_only = Trace.load(tmp_path / "cpu_only.json")
    assert not cpu_only.kernels() and "openreg_profiler" not in cpu_only.raw
    last = Trace.load(tmp_path / "last.json")
    assert len(last.kernels()) == 2
    ti.assert_clean(last, device_events=2)


def test_every_schedule_cycle_collects(run_case, tmp_path):
    body = """
from torch.profiler import profile, ProfilerActivity, schedule
import json
x = torch.ones(4)
traces = []
def on_trace_ready(prof):
    path = f"cycle{len(traces)}.json"
    prof.export_chrome_trace(path)
    traces.append(path)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
             schedule=schedule(wait=1, warmup=1, active=2, repeat=3),
             on_trace_ready=on_trace_ready) as prof:
    for step in range(14):
        torch.ops.replaytest.kernels(x, 1 + step % 2, 0, 1, 5_000)
        prof.step()
write_result(dict(traces=traces))
"""
    case = run_case(body).check()
    assert len(case.result["traces"]) == 3
    for path in case.result["traces"]:
        trace = Trace.load(tmp_path / path)
        # Two active steps per cycle: 1 + 2 or 2 + 1 kernels, no warm-up ones.
        assert len(trace.kernels()) == 3, path
        steps = [e for e in trace.complete(["user_annotation"]) if e.name.startswith("ProfilerStep#")]
        assert len(steps) == 2
        # As for CUDA, the steps are mirrored on the stream rows they cover.
        assert {e.name for e in trace.annotations()} == {e.name for e in steps}
        ti.assert_clean(trace, device_events=3)


def test_per_type_request_is_honoured(run_case, tmp_path):
    body = """
from torch.profiler import profile, ProfilerActivity
x = torch.ones(4)
with profile(activities=[ProfilerActivity.CPU, {ProfilerActivity.PrivateUse1: ["CONCURRENT_KERNEL"]}]) as prof:
    torch.ops.replaytest.kernels(x, 2, 0, 1, 5_000)
    torch.ops.replaytest.copies(x, 1, HTOD, 1)
    torch.ops.replaytest.memsets(x, 1)
prof.export_chrome_trace("trace.json")
write_result({})
"""
    run_case(body).check()
    trace = Trace.load(tmp_path / "trace.json")
    assert len(trace.kernels()) == 2
    assert not trace.complete(["gpu_memcpy", "gpu_memset"])
    assert trace.openreg_metadata()["requested"][0] == "kernel"


def test_stream_waits_on_device_rows(run_case, tmp_path):
    body = """
from torch.profiler import profile, ProfilerActivity
x = torch.ones(4)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    torch.ops.replaytest.kernels(x, 1, 0, 2, 5_000)
    torch.ops.replaytest.wait(x, 2)
    torch.ops.replaytest.kernels(x, 1, 0, 2, 5_000)
prof.export_chrome_trace("trace.json")
avg = {e.key: e.device_time_total for e in prof.key_averages()}
write_result(dict(avg=avg))
"""
    case = run_case(body).check()
    trace = Trace.load(tmp_path / "trace.json")
    syncs = trace.complete(["cuda_sync"])
    # The profiler's exit synchronizes the device: a Context Sync on the host-wait row.
    assert sorted(w.name for w in syncs) == ["Context Sync", "Stream Wait Event"]
    waits = [w for w in syncs if w.name == "Stream Wait Event"]
    assert waits[0].row == (0, 2)
    ti.assert_clean(trace, device_events=2)
    # Waiting is not work: the op that queued the wait gets no device time.
    assert case.result["avg"]["replaytest::wait"] == 0


def test_unusual_kernel_names_keep_the_trace_valid(run_case, tmp_path):
    body = """
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    submit(KERNEL, 0, 1, 'say "hi"\\\\now\\tcafé', 0, 1000)
    replay.orReplaySynchronize()
prof.export_chrome_trace("trace.json")
write_result({})
"""
    run_case(body).check()
    trace = Trace.load(tmp_path / "trace.json")  # Kineto 2.13 does not escape quotes itself
    assert [e.name for e in trace.kernels()] == ["say 'hi'/now?caf??"]


def test_device_work_from_threads_the_profiler_does_not_follow(run_case, tmp_path):
    """torch.profiler records ops only on threads that carry its state (not plain
    Python threads). Their device work is still traced, unlinked, like CUDA's."""
    body = """
import threading
from torch.profiler import profile, ProfilerActivity
x = torch.ones(4)
def work(i):
    for _ in range(5):
        torch.ops.replaytest.kernels(x, 2, 0, 1 + i % 2, 3_000)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    torch.ops.replaytest.kernels(x, 1, 0, 1, 3_000)  # on the profiling thread: linked
prof.export_chrome_trace("trace.json")
avg = {e.key: e.device_time_total for e in prof.key_averages()}
write_result(dict(avg=avg))
"""
    case = run_case(body).check()
    trace = Trace.load(tmp_path / "trace.json")
    kernels = trace.kernels()
    assert len(kernels) == 4 * 5 * 2 + 1
    linked = [k for k in kernels if "External id" in k.args]
    assert len(linked) == 1
    assert len({e.tid for e in trace.runtime_events()}) == 5
    ti.assert_clean(trace, device_events=4 * 5 * 2 + 1)
    assert abs(case.result["avg"]["replaytest::kernels"] - 3.0) < 0.5
