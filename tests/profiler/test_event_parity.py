"""``prof.events()`` and the exported trace list the same rows, waits included, and waits are no device time.

``test_profiler_external_id_parity`` is torch's own test (``test/profiler/test_profiler.py``,
``TestProfilerEventsParity``, 2.13), run on openreg: every trace row with an External id is an
event of ``prof.events()`` with that name and id. openreg's sync rows (CUDA's ``cuda_sync``
kind) carry the External id of the op that waited, so they are in both; their time is not device
time in ``key_averages()`` (torch_openreg/_profiler.py, ``drop_wait_device_time``).
"""

from __future__ import annotations

import importlib.util

from profiler_paths import REPO
from test_openreg_backend import run_backend  # noqa: F401  (the fixture)
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent
from trace_invariants import Trace

# The glue module alone, as replay_harness loads it: this process does not load the backend.
_spec = importlib.util.spec_from_file_location("openreg_profiler_glue", REPO / "torch_openreg" / "_profiler.py")
glue = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(glue)

# torch's test, word for word but for the device and the result file.
EXTERNAL_ID_PARITY = """
import json
from collections import Counter
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    with torch.profiler.record_function("test_region"):
        x = torch.randn(32, 32, device="openreg")
        y = torch.mm(x, x)
        z = y + x
        z.cpu()
        torch.accelerator.synchronize()
prof.export_chrome_trace("trace.json")
with open("trace.json") as f:
    j = json.load(f)
json_name_ext = Counter(
    (e["name"], e["args"]["External id"]) for e in j["traceEvents"] if e.get("args", {}).get("External id") is not None
)
events_name_ext = Counter((ev.name, ev.external_id) for ev in prof.events() if ev.external_id != 0)
write_result(dict(only_trace=sorted(map(list, json_name_ext - events_name_ext)),
                  only_events=sorted(map(list, events_name_ext - json_name_ext)),
                  syncs=sorted(name for name, _ in json_name_ext if name.endswith((" Sync", "Wait Event")))))
"""


def test_profiler_external_id_parity(run_backend):  # noqa: F811
    r = run_backend(EXTERNAL_ID_PARITY).check().result
    assert r["only_trace"] == [] and r["only_events"] == [], r
    # The rows that used to differ are there: .cpu()'s Stream Sync, synchronize()'s and the
    # profiler's own (at its exit) Context Syncs.
    assert r["syncs"] == ["Context Sync", "Context Sync", "Stream Sync"], r


# A stream waits on an event, the host waits for three matrix products and for a read of a
# result (its Stream Sync is linked to aten::_local_scalar_dense, the op that waited).
WAITS = """
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
    s = (y @ y).sum().item()
prof.export_chrome_trace("trace.json")
events = prof.events()
waits = [e for e in events if e.activity_type == "cuda_sync"]
work = [e for e in events if e.device_type == torch.autograd.DeviceType.PrivateUse1 and e.activity_type != "cuda_sync"]
averages = {e.key: e.self_device_time_total for e in prof.key_averages()}
table = prof.key_averages().table(sort_by="self_device_time_total")
read = next(e for e in events if e.name == "aten::_local_scalar_dense")
write_result(dict(
    waits=[dict(name=e.name, ext=e.external_id, us=e.time_range.elapsed_us(), device=e.device_time_total,
                self_device=e.self_device_time_total, cls=type(e).__name__) for e in waits],
    work_us=sum(e.self_device_time_total for e in work),
    wait_rows_us=[averages[name] for name in ("Stream Wait Event", "Context Sync", "Stream Sync")],
    total_line=[l for l in table.splitlines() if l.startswith("Self OPENREG time total")],
    read_kernels=[k.name for k in read.kernels],
    read_id=read.id,
))
"""


def test_waits_are_events_with_their_span_and_no_device_time(run_backend, tmp_path):  # noqa: F811
    r = run_backend(WAITS).check().result
    trace = Trace.load(tmp_path / "trace.json")
    rows = sorted((e.name, int(e.args["External id"]), round(e.dur / 1000)) for e in trace.complete(["cuda_sync"]))
    waits = sorted((w["name"], w["ext"], round(w["us"])) for w in r["waits"])
    # The same rows, ids and spans as the trace's (whole microseconds: the trace rounds its ts and dur).
    assert [w[:2] for w in waits] == [row[:2] for row in rows]
    assert all(abs(w[2] - row[2]) <= 1 for w, row in zip(waits, rows)), (waits, rows)
    assert {w["name"] for w in r["waits"]} == {"Stream Wait Event", "Context Sync", "Stream Sync"}
    assert all(w["device"] == 0 and w["self_device"] == 0 and w["cls"] == "DeviceWaitEvent" for w in r["waits"])
    assert r["wait_rows_us"] == [0, 0, 0]
    # The read's Stream Sync names the op that waited, which keeps only its copy's device time.
    assert ("Stream Sync", r["read_id"]) in [(w["name"], w["ext"]) for w in r["waits"]]
    assert r["read_kernels"] == ["Memcpy DtoH (Device -> Host)"]
    # The device total is the device's work: kernels and copies, no wait counted again.
    (line,) = r["total_line"]
    shown_ms = float(line.split(":")[1].strip().removesuffix("ms"))
    assert abs(shown_ms - r["work_us"] / 1000) < 0.0015, (line, r["work_us"])


def _event(event_id, name, device_type, start, end, activity, linked=0):
    return FunctionEvent(
        id=event_id,
        name=name,
        thread=1,
        start_us=start,
        end_us=end,
        use_device="openreg",
        device_type=device_type,
        activity_type=activity,
        linked_correlation_id=linked,
        input_shapes=[],
        stack=[],
    )


def test_only_openreg_waits_lose_their_device_time():
    # torch 2.13's own arithmetic: a device-typed cuda_sync row is device time, and a linked one is
    # appended to its op as a kernel (what _parse_kineto_results does). CUDA's rows stay so.
    op = _event(7, "aten::_local_scalar_dense", DeviceType.CPU, 0, 100, "cpu_op")
    cuda_wait = _event(8, "Stream Sync", DeviceType.CUDA, 10, 40, "cuda_sync", linked=7)
    ours = _event(9, "Stream Sync", DeviceType.PrivateUse1, 50, 90, "cuda_sync", linked=7)
    kernel = _event(10, "Memcpy DtoH (Device -> Host)", DeviceType.PrivateUse1, 45, 50, "gpu_memcpy", linked=7)
    for device_row in (cuda_wait, ours, kernel):
        op.append_kernel(device_row.name, 0, device_row.time_range.end - device_row.time_range.start)
    events = [op, cuda_wait, ours, kernel]
    assert sum(e.self_device_time_total for e in events if e.device_type != DeviceType.CPU) == 30 + 40 + 5

    glue.drop_wait_device_time(events)

    assert type(ours) is glue.DeviceWaitEvent and ours.self_device_time_total == ours.device_time_total == 0
    assert ours.time_range.elapsed_us() == 40  # its span stays
    assert type(cuda_wait) is FunctionEvent and cuda_wait.self_device_time_total == 30
    assert [(k.name, k.duration) for k in op.kernels] == [("Stream Sync", 30), ("Memcpy DtoH (Device -> Host)", 5)]
    listed = EventList(events, use_device="openreg")
    listed._build_tree()
    averages = {e.key: e.self_device_time_total for e in listed.key_averages() if e.key.startswith("aten::")}
    assert averages["aten::_local_scalar_dense"] == 35
