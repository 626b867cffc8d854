"""The trace checks catch what they claim to: each planted fault is reported."""

from __future__ import annotations

import copy
import json

import pytest
import trace_invariants as ti

HOST_PID, TID = 4242, 4243
DEV = 0


def base_trace() -> dict:
    """A small valid trace: one op launching one kernel on stream 1 of device 0."""
    return {
        "baseTimeNanoseconds": 1_000_000_000,
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::add",
                "pid": HOST_PID,
                "tid": TID,
                "ts": 10.000,
                "dur": 20.000,
                "args": {"External id": 7},
            },
            {
                "ph": "X",
                "cat": "privateuse1_runtime",
                "name": "orLaunchKernel",
                "pid": HOST_PID,
                "tid": TID,
                "ts": 12.000,
                "dur": 2.000,
                "args": {"External id": 7, "correlation": 1073741824, "device": 0},
            },
            {"ph": "s", "id": 1073741824, "pid": HOST_PID, "tid": TID, "ts": 12.000, "cat": "ac2g", "name": "ac2g"},
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": DEV,
                "tid": 1,
                "ts": 15.000,
                "dur": 5.000,
                "args": {"External id": 7, "device": 0, "stream": 1, "correlation": 1073741824},
            },
            {"ph": "f", "id": 1073741824, "pid": DEV, "tid": 1, "ts": 15.000, "cat": "ac2g", "name": "ac2g", "bp": "e"},
            {
                "ph": "X",
                "cat": "gpu_user_annotation",
                "name": "range",
                "pid": DEV,
                "tid": 1,
                "ts": 15.000,
                "dur": 5.000,
                "args": {"External id": 3},
            },
            {"ph": "M", "name": "process_name", "pid": DEV, "tid": 0, "args": {"name": "openreg:0 (dev)"}},
            {"ph": "M", "name": "process_sort_index", "pid": DEV, "tid": 0, "args": {"sort_index": 5000000}},
            {"ph": "M", "name": "process_sort_index", "pid": HOST_PID, "tid": 0, "args": {"sort_index": HOST_PID}},
            {"ph": "M", "name": "thread_name", "pid": DEV, "tid": 1, "args": {"name": "Stream 1 (default)"}},
        ],
    }


def load(tmp_path, raw: dict) -> ti.Trace:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(raw))
    return ti.Trace.load(path)


def events(raw: dict, **match) -> list[dict]:
    return [e for e in raw["traceEvents"] if all(e.get(k) == v for k, v in match.items())]


WINDOW = (1_000_000_000 + 9_000, 1_000_000_000 + 40_000)


def test_the_base_trace_is_clean(tmp_path):
    trace = load(tmp_path, base_trace())
    ti.assert_clean(trace, device_events=1, window=WINDOW)
    assert set(ti.findings(trace, window=WINDOW)) == set(ti.CHECKS) | {"in_window"}


def plant(raw: dict, fault: str) -> None:
    kernel = events(raw, cat="kernel")[0]
    if fault == "missing stream arg":
        del kernel["args"]["stream"]
    elif fault == "stream 0":
        kernel["args"]["stream"] = 0
        kernel["tid"] = 0
    elif fault == "device lane above host":
        events(raw, name="process_sort_index", pid=DEV)[0]["args"]["sort_index"] = 1
    elif fault == "unnamed stream row":
        raw["traceEvents"].remove(events(raw, name="thread_name")[0])
    elif fault == "backward flow":
        kernel["ts"] = 11.0
        events(raw, ph="f")[0]["ts"] = 11.0
    elif fault == "flow without finish":
        raw["traceEvents"].remove(events(raw, ph="f")[0])
    elif fault == "duplicate flow start":
        raw["traceEvents"].append(dict(events(raw, ph="s")[0]))
    elif fault == "partial overlap on a row":
        raw["traceEvents"].append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k2",
                "pid": DEV,
                "tid": 1,
                "ts": 19.999,
                "dur": 3.0,
                "args": {"device": 0, "stream": 1, "correlation": 5},
            }
        )
    elif fault == "duplicate correlation":
        raw["traceEvents"].append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k2",
                "pid": DEV,
                "tid": 1,
                "ts": 21.0,
                "dur": 1.0,
                "args": {"device": 0, "stream": 1, "correlation": 1073741824},
            }
        )
    elif fault == "launch outside its op":
        events(raw, cat="privateuse1_runtime")[0]["ts"] = 29.0
    elif fault == "stream arg on a host row":
        events(raw, cat="privateuse1_runtime")[0]["args"]["stream"] = 1
    elif fault == "outside the window":
        kernel["ts"] = 100.0
        events(raw, ph="f")[0]["ts"] = 100.0
    else:
        raise AssertionError(fault)


# Each planted fault and the check meant to catch it. Some faults trip other
# checks too; the one named here must fire whatever the others do.
EXPECTED_CHECK = {
    "missing stream arg": "device_args",
    "stream 0": "device_args",
    "device lane above host": "lanes",
    "unnamed stream row": "lanes",
    "backward flow": "flows",
    "flow without finish": "flows",
    "duplicate flow start": "flows",
    "partial overlap on a row": "rows_nest",
    "duplicate correlation": "correlations",
    "launch outside its op": "launches_inside_ops",
    "stream arg on a host row": "device_args",
    "outside the window": "in_window",
}


@pytest.mark.parametrize("fault", sorted(EXPECTED_CHECK))
def test_planted_faults_are_reported(tmp_path, fault):
    raw = copy.deepcopy(base_trace())
    plant(raw, fault)
    found = ti.findings(load(tmp_path, raw), window=WINDOW)
    assert found[EXPECTED_CHECK[fault]], f"{fault} went unnoticed by {EXPECTED_CHECK[fault]}: {found}"


def test_every_check_has_a_planted_fault():
    assert set(EXPECTED_CHECK.values()) == set(ti.CHECKS) | {"in_window"}


def test_nested_spans_are_not_overlaps(tmp_path):
    raw = base_trace()
    raw["traceEvents"].append(
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": "outer",
            "pid": DEV,
            "tid": 1,
            "ts": 14.0,
            "dur": 7.0,
            "args": {},
        }
    )
    assert ti.check_rows_nest(load(tmp_path, raw)) == []


def test_nanosecond_precision(tmp_path):
    raw = base_trace()
    # Epoch-scale µs with ns decimals: a 1 ns overlap must still be seen.
    for e in raw["traceEvents"]:
        if "ts" in e:
            e["ts"] = round(e["ts"] + 5_093_348_600_000.0, 3)
    raw["traceEvents"].append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k2",
            "pid": DEV,
            "tid": 1,
            "ts": 5_093_348_600_019.999,
            "dur": 1.0,
            "args": {"device": 0, "stream": 1, "correlation": 9},
        }
    )
    problems = ti.check_rows_nest(load(tmp_path, raw))
    assert len(problems) == 1 and "'k2'" in problems[0], problems
