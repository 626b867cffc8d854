"""`check` on real Kineto traces from other hardware (../shared/traces, data of
HolisticTraceAnalysis' test suite): a recorded verdict for every trace, and
defects planted into a real trace, each caught by the check meant for it.
Why each failure is a real one is written down in trace/README.md."""

from __future__ import annotations

import copy
import gzip
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from openreg_trace import list_checks, open_trace  # noqa: E402

# $OPENREG_SHARED_TRACES, else ../shared/traces beside the tree (/work/main) or
# beside the worktrees' folder (/work/wt/<branch>).
SHARED = next(
    (
        p
        for p in (
            Path(os.environ.get("OPENREG_SHARED_TRACES", "/nonexistent")),
            REPO.parent / "shared" / "traces",
            REPO.parent.parent / "shared" / "traces",
        )
        if p.is_dir()
    ),
    REPO.parent / "shared" / "traces",
)

# Per trace: (checks that fail, checks that only warn) in the default mode.
VERDICTS = {
    "cpu_only": (set(), set()),
    # Stream Sync spans start during the copies they wait for on stream 7 (Kineto's layout): the span
    # spills in Perfetto, the copies stay.
    "cuda_alexnet": (set(), {"device_rows_nest", "flow_pairs"}),
    "cuda_cupti_counters": (set(), {"flow_pairs"}),
    "cuda_event_sync_multi_stream": (set(), {"flow_pairs"}),
    "cuda_sampled_rank0": (set(), set()),
    "cuda_triton": (set(), {"flow_pairs"}),
    # synchronize calls partly overlap on device rows, runtime calls cross ops on host rows.
    "mtia_inference": (
        {"device_rows_nest", "host_rows_nest"},
        {
            "device_args",
            "flow_pairs",
            "device_events_in_window",
            "correlation_unique",
            "device_lanes_match_args",
            "device_events_linked",
            "device_events_launched",
        },
    ),
    # HIP's default stream is 0.
    "rocm_mi250_train": (set(), {"device_args", "flow_pairs"}),
}

# Finding counts of the failing checks, and of the artifacts, so a changed rule shows.
COUNTS = {
    ("cuda_alexnet", "device_rows_nest"): (0, 8),
    ("cuda_alexnet", "flow_pairs"): (0, 222),
    ("cuda_cupti_counters", "flow_pairs"): (0, 1862),
    ("cuda_event_sync_multi_stream", "flow_pairs"): (0, 31),
    ("cuda_triton", "flow_pairs"): (0, 1),
    ("mtia_inference", "device_rows_nest"): (3, 0),
    ("mtia_inference", "host_rows_nest"): (12, 0),
    ("mtia_inference", "flow_pairs"): (0, 126),
    ("mtia_inference", "correlation_unique"): (0, 110),
    ("rocm_mi250_train", "device_args"): (0, 16),
}


def shared_trace(name: str) -> Path:
    path = SHARED / f"{name}.json.gz"
    if not path.is_file():
        pytest.fail(f"missing shared trace {path}")
    return path


def test_every_shared_trace_has_a_verdict():
    assert sorted(p.name.removesuffix(".json.gz") for p in SHARED.glob("*.json.gz")) == sorted(VERDICTS)


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_recorded_verdict(name):
    with open_trace(shared_trace(name)) as t:
        r = t.check(examples=3)
        strict = t.check(strict=True, examples=0)
    fails, warns = VERDICTS[name]
    assert {c["name"] for c in r["checks"] if c["status"] == "fail"} == fails
    assert {c["name"] for c in r["checks"] if c["status"] == "warn"} == warns
    assert r["ok"] == (not fails)
    for c in r["checks"]:
        if (name, c["name"]) in COUNTS:
            assert (c["violations"], c["warnings"]) == COUNTS[(name, c["name"])], c["name"]
        if c["status"] == "fail":
            assert c["breaks"] and c["consumer"], c
            assert any(not e["artifact"] for e in c["examples"])
        if c["status"] == "warn":
            assert c["violations"] == 0
    # Strict keeps full strictness: every finding fails.
    strict_fails = {c["name"] for c in strict["checks"] if c["status"] == "fail"}
    assert strict_fails == fails | warns
    assert strict["ok"] == (not (fails | warns))


def test_healthy_cuda_traces_pass():
    """The complaint behind issue 11: FAILED on healthy CUDA traces for Kineto's own flow halves (and, issue 32,
    on cuda_alexnet for Kineto's Stream Sync spans over the copies they wait for)."""
    names = ("cuda_alexnet", "cuda_cupti_counters", "cuda_event_sync_multi_stream", "cuda_sampled_rank0", "cuda_triton")
    for name in names:
        with open_trace(shared_trace(name)) as t:
            result = t.check()
        assert result["ok"], name
        # ...having looked at every device event of the file (counted here independently).
        checked = sum(c["complete_events"] for c in result["trace"]["categories"] if c["role"] == "device")
        with gzip.open(shared_trace(name), "rt") as f:
            device = [
                e
                for e in json.load(f)["traceEvents"]
                if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            ]
        assert checked == len(device), (name, checked, len(device))
        assert checked > 0 or name == "cuda_cupti_counters", name  # that one holds counters only


def test_every_check_names_its_consumer():
    for c in list_checks():
        assert c["consumer"] and c["breaks"], c["name"]


# ---------------------------------------------------------------- planted defects


@pytest.fixture(scope="module")
def real_traces() -> dict[str, dict]:
    return {
        name: json.loads(gzip.open(shared_trace(name)).read())
        for name in ("cuda_sampled_rank0", "cuda_event_sync_multi_stream")
    }


def events(doc: dict, pred) -> list[dict]:
    return [e for e in doc["traceEvents"] if pred(e)]


def is_kernel(e: dict) -> bool:
    return e.get("ph") == "X" and e.get("cat") == "kernel"


def plant_no_dur(doc):
    op = events(doc, lambda e: e.get("ph") == "X" and e.get("cat") == "cpu_op")[0]
    del op["dur"]


def plant_no_stream(doc):
    del events(doc, is_kernel)[0]["args"]["stream"]


def plant_device_above_host(doc):
    for e in events(doc, lambda e: e.get("ph") == "M" and e.get("name") == "process_sort_index"):
        if isinstance(e["pid"], int) and e["pid"] < 100:  # the GPU process
            e["args"]["sort_index"] = 1


def plant_duplicate_flow_start(doc):
    start = events(doc, lambda e: e.get("ph") == "s" and e.get("cat") == "ac2g")[0]
    doc["traceEvents"].append(copy.deepcopy(start))


def paired_flow(doc) -> tuple[dict, dict]:
    """A flow with both halves (many of Kineto's are halves)."""
    starts = {e["id"]: e for e in events(doc, lambda e: e.get("ph") == "s" and e.get("cat") == "ac2g")}
    finish = next(e for e in events(doc, lambda e: e.get("ph") == "f" and e.get("cat") == "ac2g") if e["id"] in starts)
    return starts[finish["id"]], finish


def plant_backward_flow(doc):
    start, finish = paired_flow(doc)
    # Start it again inside a later slice of its thread, after its finish.
    later = next(
        e
        for e in sorted(
            events(doc, lambda e: e.get("ph") == "X" and e.get("pid") == start["pid"] and e.get("tid") == start["tid"]),
            key=lambda e: e["ts"],
        )
        if e["ts"] > finish["ts"] and e["dur"] > 0
    )
    start["ts"] = later["ts"] + later["dur"] / 2


def plant_flow_on_one_lane(doc):
    start, finish = paired_flow(doc)
    finish["pid"], finish["tid"] = start["pid"], start["tid"]


def plant_flow_start_outside_slices(doc):
    start = events(doc, lambda e: e.get("ph") == "s" and e.get("cat") == "ac2g")[0]
    first = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X" and "ts" in e)
    start["ts"] = first - 1000.0


def plant_overlapping_kernels(doc):
    by_stream: dict = {}
    for k in sorted(events(doc, is_kernel), key=lambda e: e["ts"]):
        by_stream.setdefault((k["pid"], k["tid"]), []).append(k)
    first, second = next(v for v in by_stream.values() if len(v) >= 2 and v[1]["dur"] >= 10)[:2]
    # The first runs on into the second (moving the second earlier would also start it before its launch).
    first["dur"] = second["ts"] - first["ts"] + second["dur"] / 2


def plant_crossing_annotation(doc):
    k = events(doc, lambda e: is_kernel(e) and e["dur"] >= 10)[0]
    doc["traceEvents"].append(
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": "planted",
            "pid": k["pid"],
            "tid": k["tid"],
            "ts": k["ts"] + k["dur"] / 2,
            "dur": k["dur"],
        }
    )


def plant_crossing_host_ops(doc):
    op = events(doc, lambda e: e.get("ph") == "X" and e.get("cat") == "cpu_op" and e["dur"] >= 10)[0]
    doc["traceEvents"].append(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "planted",
            "pid": op["pid"],
            "tid": op["tid"],
            "ts": op["ts"] + op["dur"] / 2,
            "dur": op["dur"],
            "args": {"External id": 1},
        }
    )


def plant_shared_correlation(doc):
    kernels = events(doc, is_kernel)
    other = next(k for k in kernels if k["name"] != kernels[0]["name"])
    other["args"]["correlation"] = kernels[0]["args"]["correlation"]


def plant_truncation(doc):
    return "truncate"


# check -> (the real trace it is planted in, the defect). cuda_sampled_rank0 has
# no flows, so flow defects go into cuda_event_sync_multi_stream.
SAMPLED, SYNC = "cuda_sampled_rank0", "cuda_event_sync_multi_stream"
PLANTS = {
    "json_valid": (SAMPLED, plant_truncation),
    "events_well_formed": (SAMPLED, plant_no_dur),
    "device_args": (SAMPLED, plant_no_stream),
    "device_lanes_below_host": (SAMPLED, plant_device_above_host),
    "flow_pairs": (SYNC, plant_duplicate_flow_start),
    "flow_forward": (SYNC, plant_backward_flow),
    "flow_distinct_lanes": (SYNC, plant_flow_on_one_lane),
    "flow_start_in_host_slice": (SYNC, plant_flow_start_outside_slices),
    "device_rows_disjoint": (SAMPLED, plant_overlapping_kernels),
    "device_rows_nest": (SAMPLED, plant_crossing_annotation),
    "host_rows_nest": (SAMPLED, plant_crossing_host_ops),
    "correlation_unique": (SAMPLED, plant_shared_correlation),
}


def statuses(path: Path) -> dict[str, str]:
    with open_trace(path) as t:
        return {c["name"]: c["status"] for c in t.check(examples=0)["checks"]}


@pytest.mark.parametrize("check_name", sorted(PLANTS))
def test_planted_defect_is_caught_by_its_check(real_traces, tmp_path, check_name):
    base, plant = PLANTS[check_name]
    doc = copy.deepcopy(real_traces[base])
    action = plant(doc)
    text = json.dumps(doc)
    if action == "truncate":
        text = text[: len(text) // 2]
    path = tmp_path / "planted.json"
    path.write_text(text)
    before, after = statuses(shared_trace(base)), statuses(path)
    changed = {n for n in after if after[n] != before[n] and after[n] != "skipped"}
    # Exactly the check meant for the defect reacts; a warning-level check warns.
    assert changed == {check_name}, {n: (before[n], after[n]) for n in changed}
    severity = next(c["severity"] for c in list_checks() if c["name"] == check_name)
    assert after[check_name] == ("fail" if severity == "error" else "warn")
