"""Synchronisation rows as Kineto writes CUPTI's, the args' layout, and toggling
PrivateUse1 collection, end to end on the real runtime (issue 32)."""

from __future__ import annotations

import json

import pytest
from test_openreg_backend import run_backend  # noqa: F401  (the fixture)
from trace_invariants import Trace

# Two streams, an event recorded on the default stream and waited for on the
# side stream, then each kind of host synchronisation, in a known order.
SYNC_PROGRAM = """
from torch.profiler import profile, ProfilerActivity
x = torch.randn(256, 256, device="openreg")
side = torch.openreg.Stream()
first, second = torch.openreg.Event(), torch.openreg.Event()
torch.openreg.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    y = x @ x
    first.record()
    with torch.openreg.stream(side):
        side.wait_event(first)
        z = y.relu()
    second.record(side)
    second.synchronize()
    side.synchronize()
    torch.openreg.synchronize()
prof.export_chrome_trace("trace.json")
write_result(dict(side=int(side.stream_id), default=int(torch.openreg.current_stream().stream_id)))
"""


def _syncs_and_calls(trace: Trace):
    syncs = [e for e in trace.complete(["cuda_sync"])]
    calls = {e.args["correlation"]: e for e in trace.runtime_events()}
    return syncs, calls


def test_sync_rows_kinds_args_and_order(run_backend, tmp_path):  # noqa: F811
    case = run_backend(SYNC_PROGRAM).check()
    side, default = case.result["side"], case.result["default"]
    trace = Trace.load(tmp_path / "trace.json")
    syncs, calls = _syncs_and_calls(trace)
    # The host's waits in the order it made them; torch.profiler's exit synchronizes the device once more (a
    # second Context Sync). The side stream's wait is stamped by the device: it may reach the wait after the host
    # has begun waiting for the event, so it is ordered by what it released, below.
    host = [e for e in sorted(syncs, key=lambda e: e.ts) if e.name != "Stream Wait Event"]
    assert [e.name for e in host] == ["Event Sync", "Stream Sync", "Context Sync", "Context Sync"]
    by_name = {}
    for e in syncs:
        by_name.setdefault(e.name, []).append(e)
    assert len(by_name["Stream Wait Event"]) == 1
    assert by_name["Stream Wait Event"][0].end <= by_name["Event Sync"][0].end, "the event waited for the wait"

    records = sorted((e for e in trace.runtime_events() if e.name == "orEventRecord"), key=lambda e: e.ts)
    assert len(records) == 2
    first_record, second_record = records

    (wait,) = by_name["Stream Wait Event"]
    wait_call = calls[wait.args["correlation"]]
    assert wait_call.name == "orStreamWaitEvent"
    assert {k: v for k, v in wait.args.items() if k != "External id"} == {
        "device": 0,
        "stream": side,
        "correlation": wait_call.args["correlation"],
        "cuda_sync_kind": "Stream Wait Event",
        "wait_on_stream": default,
        "wait_on_cuda_event_record_corr_id": first_record.args["correlation"],
        "wait_on_cuda_event_id": wait.args["wait_on_cuda_event_id"],
    }
    assert wait.tid == side, "a stream's wait is on the stream's row"

    (event_sync,) = by_name["Event Sync"]
    event_call = calls[event_sync.args["correlation"]]
    assert event_call.name == "orEventSynchronize"
    assert {k: v for k, v in event_sync.args.items() if k != "External id"} == {
        "device": 0,
        "stream": -1,
        "correlation": event_call.args["correlation"],
        "cuda_sync_kind": "Event Sync",
        "wait_on_stream": side,
        "wait_on_cuda_event_record_corr_id": second_record.args["correlation"],
        "wait_on_cuda_event_id": wait.args["wait_on_cuda_event_id"] + 1,
    }
    assert second_record.ts < event_sync.ts, "the record is in the trace before its wait"

    (stream_sync,) = by_name["Stream Sync"]
    stream_call = calls[stream_sync.args["correlation"]]
    assert stream_call.name == "orStreamSynchronize"
    assert {k: v for k, v in stream_sync.args.items() if k != "External id"} == {
        "device": 0,
        "stream": side,
        "correlation": stream_call.args["correlation"],
        "cuda_sync_kind": "Stream Sync",
    }
    for context in by_name["Context Sync"]:
        assert calls[context.args["correlation"]].name == "orDeviceSynchronize"
        assert {k: v for k, v in context.args.items() if k not in ("External id", "correlation")} == {
            "device": 0,
            "stream": -1,
            "cuda_sync_kind": "Context Sync",
        }

    # No op made these calls (torch.openreg's Event and Stream methods are not aten ops): unlinked, a row's
    # External id is its own correlation, as Kineto writes an unlinked activity's.
    for e in syncs:
        assert "External id" not in calls[e.args["correlation"]].args
        assert e.args["External id"] == e.args["correlation"], e.name

    # Each host sync spans the wait inside its call.
    for e in (event_sync, stream_sync, *by_name["Context Sync"]):
        call = calls[e.args["correlation"]]
        assert call.ts <= e.ts and e.end <= call.end, (e.name, e.ts, call.ts)
    # The Event Sync waited for the relu on the side stream to finish.
    relu = next(k for k in trace.complete(["kernel"]) if k.tid == side)
    assert event_sync.end >= relu.end

    # Rows: event and device syncs on a host-wait row of their own, stream
    # syncs on Kineto's "stream N (sync)" row; none on a stream's kernel row.
    names = {tid: args["name"] for (pid, tid), args in trace.metadata("thread_name").items() if pid == 0}
    assert names[event_sync.tid].startswith("Host waits (thread ")
    assert all(c.tid == event_sync.tid for c in by_name["Context Sync"])
    assert names[stream_sync.tid] == f"stream {side} (sync)"
    assert event_sync.tid not in (side, default) and stream_sync.tid not in (side, default)


ITEM_PROGRAM = """
from torch.profiler import profile, ProfilerActivity
x = torch.randn(64, device="openreg")
torch.openreg.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    v = x.sum().item()
prof.export_chrome_trace("trace.json")
write_result(dict(v=v))
"""


def test_sync_rows_name_the_op_that_waited(run_backend, tmp_path):  # noqa: F811
    """As CUDA's sync rows do (../shared/traces/cuda_event_sync_multi_stream: an Event Sync with aten::mm's
    External id), a sync row made inside an op carries the op's External id, the id its call carries."""
    run_backend(ITEM_PROGRAM).check()
    trace = Trace.load(tmp_path / "trace.json")
    syncs, calls = _syncs_and_calls(trace)
    ops = {e.args["External id"]: e.name for e in trace.complete(["cpu_op"])}
    (stream_sync,) = [e for e in syncs if e.name == "Stream Sync"]
    call = calls[stream_sync.args["correlation"]]
    assert call.name == "orStreamSynchronize"
    assert stream_sync.args["External id"] == call.args["External id"]
    assert ops[call.args["External id"]] == "aten::_local_scalar_dense"


# Waits are in the trace and in torch's events, but are no device time (torch_openreg/_profiler.py), so a
# Context Sync as long as the kernels it waited for does not double the device time total and halve every
# kernel's share.
WAITS_PROGRAM = """
from torch.profiler import profile, ProfilerActivity
x = torch.randn(256, 256, device="openreg")
side = torch.openreg.Stream()
done = torch.openreg.Event()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    for _ in range(3):
        y = x @ x
    done.record()
    side.wait_event(done)
    torch.openreg.synchronize()
prof.export_chrome_trace("trace.json")
device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
table = prof.key_averages().table(sort_by="self_device_time_total")
write_result(dict(names=sorted({e.name for e in device if e.self_device_time_total > 0}),
                  waits=sorted({e.name for e in device if e.self_device_time_total == e.device_time_total == 0}),
                  total_line=[l for l in table.splitlines() if l.startswith("Self OPENREG time total")],
                  kernels_us=sum(e.self_device_time_total for e in prof.key_averages() if e.key == "gemm_f32_nn"),
                  mm_us=sum(e.self_device_time_total for e in prof.key_averages() if e.key == "aten::mm")))
"""


def test_waits_stay_out_of_torchs_device_time(run_backend, tmp_path):  # noqa: F811
    r = run_backend(WAITS_PROGRAM).check().result
    assert r["names"] == ["gemm_f32_nn"], r["names"]
    assert r["waits"] == ["Context Sync", "Stream Wait Event"], r["waits"]
    # The table's device total is the kernels' time, all of it credited to the op that launched them.
    assert r["mm_us"] == r["kernels_us"] > 0, r
    (line,) = r["total_line"]
    shown_ms = float(line.split(":")[1].strip().removesuffix("ms"))
    assert abs(shown_ms - r["kernels_us"] / 1000) < 0.0015, (line, r["kernels_us"])
    trace = Trace.load(tmp_path / "trace.json")
    assert {e.name for e in trace.complete(["cuda_sync"])} == {"Stream Wait Event", "Context Sync"}


# The args of device activities as torch's tests read them (metadata_json), in
# Kineto's own layout: "key": value joined by ", ".
METADATA_PROGRAM = """
from torch.profiler import profile, ProfilerActivity
x = torch.randn(64, device="openreg")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    y = x + 1
    torch.openreg.synchronize()
acts = prof.profiler.kineto_results.trace_activities()
kernels = [a.metadata_json() for a in acts if a.type() == "kernel"]
syncs = [a.metadata_json() for a in acts if a.type() == "cuda_sync"]
cpu = [a.metadata_json() for a in acts if a.name() == "aten::add"]
write_result(dict(kernels=kernels, syncs=syncs, cpu=cpu))
"""


def test_metadata_json_in_kinetos_layout(run_backend):  # noqa: F811
    r = run_backend(METADATA_PROGRAM).check().result
    (kernel,) = r["kernels"]
    fields = json.loads("{" + kernel + "}")
    # Rebuilt in Kineto's layout, the text must be what was written.
    assert kernel == ", ".join(f"{json.dumps(k)}: {json.dumps(v, separators=(', ', ': '))}" for k, v in fields.items())
    assert kernel.startswith(f'"device": 0, "stream": 1, "correlation": {fields["correlation"]}, "grid": [')
    assert r["syncs"] and all(s.startswith('"device": 0, "stream": -1, "correlation": ') for s in r["syncs"]), r
    # torch's own CPU op in the same trace is laid out the same way.
    (cpu,) = r["cpu"]
    assert cpu == ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in json.loads("{" + cpu + "}").items()), cpu


TOGGLE_PROGRAM = """
import warnings
from torch.profiler import profile, ProfilerActivity
x = torch.randn(1000, device="openreg")
torch.openreg.synchronize()
with warnings.catch_warnings(record=True) as outside:
    warnings.simplefilter("always")
    with profile(activities=[ProfilerActivity.CPU]) as cpu_only:
        cpu_only.toggle_collection_dynamic(False, [ProfilerActivity.PrivateUse1])
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    a = x.add(1)
    torch.openreg.synchronize()
    prof.toggle_collection_dynamic(False, [ProfilerActivity.PrivateUse1])
    b = x.mul(2)
    torch.openreg.synchronize()
    prof.toggle_collection_dynamic(True, [ProfilerActivity.PrivateUse1])
    c = x.sub(3)
    torch.openreg.synchronize()
prof.export_chrome_trace("trace.json")
avg = {e.key: e.self_device_time_total for e in prof.key_averages()}
write_result(dict(avg=avg, outside=[str(w.message) for w in outside]))
"""


def test_toggling_privateuse1_collection_within_one_profile(run_backend, tmp_path):  # noqa: F811
    r = run_backend(TOGGLE_PROGRAM).check().result
    trace = Trace.load(tmp_path / "trace.json")
    cpu_ops = {e.args.get("External id"): e.name for e in trace.complete(["cpu_op"])}
    kernel_ops = sorted(cpu_ops.get(k.args.get("External id")) for k in trace.complete(["kernel"]))
    # The mul launched while off is absent; what came before and after is there, linked.
    assert kernel_ops == ["aten::add", "aten::sub"], kernel_ops
    launches = [e for e in trace.runtime_events() if e.name.startswith("orLaunch")]
    assert len(launches) == 2
    kernel_ids = {k.args["correlation"] for k in trace.complete(["kernel"])}
    assert {e.args["correlation"] for e in launches} == kernel_ids
    flows = {e.raw.get("id") for e in trace.events if e.ph in ("s", "f") and e.cat == "ac2g"}
    assert len(flows) == 2, "an arrow from each launch to its kernel"
    assert r["avg"]["aten::add"] > 0 and r["avg"]["aten::sub"] > 0
    assert r["avg"]["aten::mul"] == 0, "no device time for the op whose kernel was not recorded"
    # The host ops themselves were recorded all along (only PrivateUse1 was toggled).
    assert "aten::mul" in cpu_ops.values()
    assert any("outside a running openreg trace" in w for w in r["outside"]), r["outside"]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
