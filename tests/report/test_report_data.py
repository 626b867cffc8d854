"""ortrace_report_data, the report's data from libopenreg_trace, against the summary and the trace files:
the tables add up to the summary's totals, the steps' parts to the steps, the packed events are the trace's
complete events with their launch partners, and the memory curve peaks where the summary says."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

import pytest
from report_support import SHARED, Expected, ns, read_trace

from openreg_trace.report._native import report_data

TRACES = ["cuda_alexnet", "cuda_sampled_rank0", "mtia_inference", "rocm_mi250_train", "cpu_only", "cuda_triton"]


def unpack(timeline: dict, key: str, fmt: str) -> list:
    raw = base64.b64decode(timeline[key])
    if timeline["encoding"] == "deflate":
        raw = zlib.decompress(raw)
    values = list(struct.unpack(f"<{len(raw) // struct.calcsize(fmt)}{fmt}", raw))
    if key == "ts" and timeline["ts_delta"]:  # differences within each row
        for lane in timeline["lanes"]:
            for row in lane["rows"]:
                for k in range(row["first"] + 1, row["first"] + row["count"]):
                    values[k] += values[k - 1]
    return values


@pytest.mark.parametrize("name", TRACES)
def test_tables_and_events_match_the_summary_and_the_trace(name):
    path = SHARED / f"{name}.json.gz"
    data = report_data(path)
    s, r = data["summary"], data["report"]
    # Kernels: one row per distinct device-event name, each with the summary's count and total.
    top = {k["name"]: k for k in s["top_kernels"]}
    assert len(r["kernel_table"]) == s["kernel_names"] == len(top)
    for row in r["kernel_table"]:
        assert (row["count"], row["total_ns"], row["class"]) == (
            top[row["name"]]["count"],
            top[row["name"]]["total_ns"],
            top[row["name"]]["class"],
        )
    # Device time per op: the table's rows (per op and input shapes) add up to the summary's per op.
    per_op: dict[str, int] = {}
    for row in r["op_table"]:
        per_op[row["name"]] = per_op.get(row["name"], 0) + row["device_ns"]
    for op in s["ops"]:
        if op["name"] is not None:
            assert per_op.get(op["name"], 0) == op["device_ns"], op["name"]
    # Steps: their four parts are their duration.
    for step in r["steps"]:
        parts = step["device_ns"] + step["communication_ns"] + step["host_ns"] + step["idle_ns"]
        assert parts == step["duration_ns"] and min(step["host_ns"], step["idle_ns"]) >= 0, step
    # Packed events: every complete event of the trace, once, with its start; launches and kernels paired.
    tl = r["timeline"]
    events = read_trace(path)["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    assert tl["events"] == len(complete)
    ts = unpack(tl, "ts", "d")
    starts = sorted(ns(e["ts"]) - tl["origin_ns"] for e in complete)
    assert sorted(int(t) for t in ts) == starts
    partner = unpack(tl, "partner", "i")
    for k, p in enumerate(partner):
        if p >= 0 and partner[p] != k:  # a launch with several device events points at one of them
            assert partner[partner[p]] == p
    roles = [tl["cat_roles"][c] for c in unpack(tl, "cat", "B")]
    device_linked = sum(1 for k, p in enumerate(partner) if p >= 0 and roles[k] == "device")
    assert device_linked == s["launches"]["launches"]  # every device event paired with its launch, as HTA pairs
    names = tl["names"]
    name_ids = unpack(tl, "name", "I")
    assert sorted(names[i] for i in name_ids) == sorted(e["name"] for e in complete)
    # Lanes' rows cover the events exactly once.
    covered = sorted((row["first"], row["count"]) for lane in tl["lanes"] for row in lane["rows"])
    at = 0
    for first, count in covered:
        assert first == at
        at += count
    assert at == tl["events"]


def test_memory_peak_and_live_allocations_on_an_openreg_run(openreg_run):
    trace = next(openreg_run.glob("*.pt.trace.json"))
    data = report_data(trace)
    expected = Expected(trace)
    device = [m for m in data["report"]["memory"] if m["device_type"] != 0]
    assert device and device[0]["peak_bytes"] == expected.memory_peak == data["summary"]["memory"][0]["peak_bytes"]
    assert device[0]["peak_ns"] == data["summary"]["memory"][0]["peak_ns"]
    assert max(device[0]["allocated"]) == expected.memory_peak  # the curve keeps its peak
    assert device[0]["reserved"] is not None and max(device[0]["reserved"]) >= expected.memory_peak
    assert device[0]["live_known"] and device[0]["live_at_peak"]
    assert sum(a["bytes"] for a in device[0]["live_at_peak"]) <= expected.memory_peak
    # The kernels' ops and source lines: openreg's demo is recorded with_stack, so eager kernels name a line.
    assert any(k["source"] and ".py:" in k["source"] for k in data["report"]["kernel_table"])
    assert all(k["op"] for k in data["report"]["kernel_table"])


def test_bad_trace_is_a_parse_error(tmp_path):
    from openreg_trace import TraceError

    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(TraceError) as e:
        report_data(bad)
    assert e.value.status == "parse"
    with pytest.raises(TraceError) as e:
        report_data(Path(tmp_path / "missing.json"))
    assert e.value.status == "io"


def test_deflated_and_raw_arrays_are_the_same():
    path = SHARED / "cuda_sampled_rank0.json.gz"
    deflated, raw = report_data(path)["report"]["timeline"], report_data(path, deflate=False)["report"]["timeline"]
    assert (deflated["encoding"], raw["encoding"]) == ("deflate", "raw")
    for key, fmt in (
        ("ts", "d"),
        ("dur", "f"),
        ("name", "I"),
        ("cat", "B"),
        ("arg", "I"),
        ("partner", "i"),
        ("op", "i"),
    ):
        assert unpack(deflated, key, fmt) == unpack(raw, key, fmt), key
    assert len(deflated["ts"]) < len(raw["ts"]) / 2
