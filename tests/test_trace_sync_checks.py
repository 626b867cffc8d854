"""The synchronisation rules of `check` (trace/src/checks_sync.cpp) on the real
Kineto traces in ../shared/traces: which hold on each trace, and a defect
planted into a real trace for each, caught by that rule alone. Why the rules
hold or skip where they do is written down in trace/README.md."""

from __future__ import annotations

import copy
import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from openreg_trace import list_checks, open_trace  # noqa: E402

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

SYNC_RULES = (
    "sync_rows_described",
    "sync_wait_record_known",
    "sync_record_before_wait",
    "sync_after_stream_work",
    "device_after_launch",
)

NO_SYNC_ROWS = {
    "sync_rows_described": "skipped",
    "sync_wait_record_known": "skipped",
    "sync_record_before_wait": "skipped",
    "sync_after_stream_work": "skipped",
    "device_after_launch": "pass",
}
ALL_PASS = dict.fromkeys(SYNC_RULES, "pass")

# Per trace: the status of each sync rule. Only two traces have cuda_sync rows.
EXPECTED = {
    "cpu_only": {**NO_SYNC_ROWS, "device_after_launch": "skipped"},  # no runtime rows
    "cuda_alexnet": ALL_PASS,
    "cuda_cupti_counters": NO_SYNC_ROWS,
    "cuda_event_sync_multi_stream": ALL_PASS,
    "cuda_sampled_rank0": NO_SYNC_ROWS,
    "cuda_triton": NO_SYNC_ROWS,
    "mtia_inference": NO_SYNC_ROWS,
    "rocm_mi250_train": NO_SYNC_ROWS,
}

# The notes that show the rules read the sync rows they judged.
NOTES = {
    ("cuda_event_sync_multi_stream", "sync_wait_record_known"): (
        "1 of 4 waits name no record (-1): their producer did not see it (made before the capture window, "
        "or never recorded)"
    ),
}


def shared_trace(name: str) -> Path:
    path = SHARED / f"{name}.json.gz"
    if not path.is_file():
        pytest.fail(f"missing shared trace {path}")
    return path


def checks_of(path: Path, **options) -> dict[str, dict]:
    with open_trace(path) as t:
        return {c["name"]: c for c in t.check(**options)["checks"]}


def test_every_shared_trace_is_listed():
    assert sorted(p.name.removesuffix(".json.gz") for p in SHARED.glob("*.json.gz")) == sorted(EXPECTED)


def test_rules_are_in_the_table():
    table = {c["name"]: c for c in list_checks()}
    severities = {name: table[name]["severity"] for name in SYNC_RULES}
    assert severities == {
        "sync_rows_described": "error",
        "sync_wait_record_known": "warning",
        "sync_record_before_wait": "error",
        "sync_after_stream_work": "error",
        "device_after_launch": "error",
    }
    for name in SYNC_RULES:
        assert table[name]["consumer"] and table[name]["breaks"], name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rules_on_real_trace(name):
    checks = checks_of(shared_trace(name), examples=3)
    assert {rule: checks[rule]["status"] for rule in SYNC_RULES} == EXPECTED[name]
    for rule in SYNC_RULES:
        c = checks[rule]
        assert (c["violations"], c["warnings"]) == (0, 0), c
        if c["status"] == "pass":
            assert c.get("note", "") == NOTES.get((name, rule), ""), rule


def test_alexnet_stream_syncs_only_warn_in_device_rows_nest():
    """Kineto draws each Stream Sync on the stream it waits for, from the host's call on: it starts while
    the copy it waits for runs and ends after it. That is an artifact, not a failure."""
    c = checks_of(shared_trace("cuda_alexnet"), examples=20)["device_rows_nest"]
    assert (c["status"], c["violations"], c["warnings"]) == ("warn", 0, 8)
    for e in c["examples"]:
        assert e["artifact"], e
        copy_event, sync = e["events"]
        assert (copy_event["cat"], sync["cat"], sync["name"]) == ("gpu_memcpy", "cuda_sync", "Stream Sync")


# ---------------------------------------------------------------- planted defects


def load(name: str) -> dict:
    with gzip.open(shared_trace(name), "rt") as f:
        return json.load(f)


def complete(doc: dict, pred) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and pred(e)]


def syncs(doc: dict, kind: str) -> list[dict]:
    return complete(doc, lambda e: e.get("cat") == "cuda_sync" and e["args"].get("cuda_sync_kind") == kind)


def runtime_by_correlation(doc: dict) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for e in complete(doc, lambda e: str(e.get("cat")).endswith("_runtime") and "correlation" in e.get("args", {})):
        out.setdefault(e["args"]["correlation"], e)
    return out


def plant_sync_without_kind(doc):
    del syncs(doc, "Stream Sync")[0]["args"]["cuda_sync_kind"]


def plant_wait_on_missing_record(doc):
    syncs(doc, "Stream Wait Event")[0]["args"]["wait_on_cuda_event_record_corr_id"] = 10**9


def plant_wait_on_later_record(doc):
    """The first wait names the record that a later wait waits on: one made after it."""
    runtime = runtime_by_correlation(doc)
    waits = syncs(doc, "Stream Wait Event")
    first = waits[0]
    call_ts = runtime[first["args"]["correlation"]]["ts"]
    later = next(
        w["args"]["wait_on_cuda_event_record_corr_id"]
        for w in waits
        if runtime[w["args"]["wait_on_cuda_event_record_corr_id"]]["ts"] > call_ts
    )
    first["args"]["wait_on_cuda_event_record_corr_id"] = later


def plant_stream_sync_ending_early(doc):
    """A Stream Sync that started while a copy ran on its stream now ends halfway through that copy."""
    work = complete(doc, lambda e: e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    for sync in syncs(doc, "Stream Sync"):
        running = [
            w
            for w in work
            if (w["pid"], w["tid"]) == (sync["pid"], sync["tid"]) and w["ts"] < sync["ts"] < w["ts"] + w["dur"]
        ]
        if running:
            sync["dur"] = (running[0]["ts"] + running[0]["dur"] - sync["ts"]) / 2
            return
    raise AssertionError("no Stream Sync starts during a copy")


def plant_kernel_before_launch(doc):
    """The first kernel of a stream starts 1 us before its launch call (the trace has no arrows)."""
    runtime = runtime_by_correlation(doc)
    kernels = sorted(complete(doc, lambda e: e.get("cat") == "kernel"), key=lambda e: e["ts"])
    kernel = kernels[0]
    kernel["ts"] = runtime[kernel["args"]["correlation"]]["ts"] - 1.0


ALEXNET, SAMPLED = "cuda_alexnet", "cuda_sampled_rank0"
PLANTS = {
    "sync_rows_described": (ALEXNET, plant_sync_without_kind),
    "sync_wait_record_known": (ALEXNET, plant_wait_on_missing_record),
    "sync_record_before_wait": (ALEXNET, plant_wait_on_later_record),
    "sync_after_stream_work": (ALEXNET, plant_stream_sync_ending_early),
    "device_after_launch": (SAMPLED, plant_kernel_before_launch),
}


@pytest.mark.parametrize("rule", SYNC_RULES)
def test_planted_defect_is_caught_by_its_rule(tmp_path, rule):
    base, plant = PLANTS[rule]
    doc = copy.deepcopy(load(base))
    plant(doc)
    path = tmp_path / "planted.json"
    path.write_text(json.dumps(doc))
    before = {n: c["status"] for n, c in checks_of(shared_trace(base), examples=0).items()}
    after = checks_of(path, examples=1)
    changed = {n for n, c in after.items() if c["status"] != before[n]}
    # Exactly the rule meant for the defect reacts, once; a warning-level rule warns.
    assert changed == {rule}, {n: (before[n], after[n]["status"]) for n in changed}
    c = after[rule]
    severity = next(x["severity"] for x in list_checks() if x["name"] == rule)
    expected = (1, 0) if severity == "error" else (0, 1)
    assert (c["status"], c["violations"], c["warnings"]) == (
        "fail" if severity == "error" else "warn",
        *expected,
    )


# ---------------------------------------------------------------- openreg's own sync rows

SYNC_PROGRAM = textwrap.dedent(
    """
    import sys
    import torch
    import torch_openreg  # noqa: F401
    from torch.profiler import profile, ProfilerActivity

    x = torch.randn(256, 256, device="openreg")
    side = torch.openreg.Stream()
    first, second = torch.openreg.Event(), torch.openreg.Event()
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(2):
            y = x @ x
            first.record()
            with torch.openreg.stream(side):
                side.wait_event(first)
                z = y.relu() @ y
            second.record(side)
            second.synchronize()
            w = z @ z
            side.synchronize()
            torch.openreg.synchronize()
    prof.export_chrome_trace(sys.argv[1])
    """
)


def test_rules_hold_on_openreg_sync_rows(tmp_path):
    """Every kind of sync row openreg writes is judged by the rules (none skips) and holds, strictly."""
    path = tmp_path / "openreg_sync.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-c", SYNC_PROGRAM, str(path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    kinds = sorted({e["name"] for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cuda_sync"})
    assert kinds == ["Context Sync", "Event Sync", "Stream Sync", "Stream Wait Event"]
    checks = checks_of(path, strict=True, examples=3)
    assert {rule: checks[rule]["status"] for rule in SYNC_RULES} == ALL_PASS
    assert checks["sync_wait_record_known"].get("note", "") == ""  # every wait names its record
    assert checks["device_rows_nest"]["status"] == "pass"
