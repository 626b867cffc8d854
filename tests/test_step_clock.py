"""A step measured where its work is (trace/src/steps.cpp): every step has a host range (ProfilerStep#N) and a
device span (the device work it launched), and when the device runs behind the host the tools take the device
span for step time and what bound it, and measure the critical path to the end of the step's work.

Checked on openreg traces made to lag (each step launches more work than the device runs in its host range) and
not to lag (each step synchronises), and on the held CUDA and ROCm traces (no path over 100 % of its step).
Exact figures for a synthetic lagging trace are in trace/tests/test_steps.cpp and test_report.cpp.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from openreg_trace import open_trace  # noqa: E402
from openreg_trace.critical_path import critical_path, each_step  # noqa: E402
from openreg_trace.format import summary_text  # noqa: E402
from openreg_trace.report._native import report_data  # noqa: E402

TRACES = Path(os.environ.get("OPENREG_SHARED_TRACES", REPO.parent / "shared" / "traces"))
STEPS = 4


def profiled_steps(path: Path, synchronize_each_step: bool) -> Path:
    """STEPS steps of six 512 x 512 matrix products; the host launches them in well under the device's time."""
    x = torch.randn(512, 512, device="openreg")
    torch.openreg.synchronize()
    activities = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    traced = {}
    on_ready = lambda p: traced.setdefault("path", p.export_chrome_trace(str(path)))  # noqa: E731
    with profile(
        activities=activities, schedule=schedule(wait=0, warmup=1, active=STEPS), on_trace_ready=on_ready
    ) as prof:
        for _ in range(STEPS + 1):
            for _ in range(6):
                x = torch.mm(x, x).tanh_()
            if synchronize_each_step:
                torch.openreg.synchronize()
            prof.step()
        torch.openreg.synchronize()
    assert "path" in traced, "the profiler wrote no trace"
    return path


@pytest.fixture(scope="module")
def lagging(tmp_path_factory) -> Path:
    return profiled_steps(tmp_path_factory.mktemp("lag") / "lagging.json", synchronize_each_step=False)


@pytest.fixture(scope="module")
def synced(tmp_path_factory) -> Path:
    return profiled_steps(tmp_path_factory.mktemp("sync") / "synced.json", synchronize_each_step=True)


def report_steps(path: Path) -> dict:
    return report_data(path)["report"]


def test_a_lagging_device_measures_steps_on_the_device(lagging):
    r = report_steps(lagging)
    assert r["step_clock"] == "device", r["step_clock_note"]
    assert r["step_clock_note"].startswith("each step is its device span")
    steps = [s for s in r["steps"] if s["device_duration_ns"] is not None]
    assert len(steps) >= STEPS
    for s in steps:
        assert s["clock"] == "device"
        assert (s["start_ns"], s["end_ns"]) == (s["device_start_ns"], s["device_end_ns"])
        # The step's shares add up to its span, counting only the work it launched.
        assert s["device_ns"] + s["communication_ns"] + s["host_ns"] + s["idle_ns"] == s["duration_ns"], s
        assert s["device_ns"] > 0, s  # its own products (how busy depends on the machine's load)
    first, second = steps[0], steps[1]
    assert first["lag_ns"] > 0 and second["lag_ns"] > first["lag_ns"], (first, second)  # the host pulls ahead
    assert second["device_start_ns"] >= first["device_end_ns"]  # one stream: step 2 begins where step 1 ends


def test_the_summary_says_which_clock_and_why(lagging):
    s = open_trace(lagging).summary()
    info = s["trace"]["steps"]
    assert info["clock"] == "device"
    report = [x for x in report_steps(lagging)["steps"] if x["device_duration_ns"] is not None]
    assert info["durations_ns"][: len(report)] == [x["duration_ns"] for x in report]
    assert info["host_durations_ns"][: len(report)] == [x["host_duration_ns"] for x in report]
    text = summary_text(s)
    assert "device spans; host ranges" in text and "the device runs behind the host" in text, text


def test_no_path_is_longer_than_its_step(lagging):
    r = each_step([lagging], top=1)
    assert r["steps"]
    for s in r["steps"]:
        assert s["path_ns"] <= s["step_ns"], s
        assert s["step_ns"] == s["host_step_ns"] + s["lag_ns"]
    assert r["steps"][0]["lag_ns"] > 0
    one = critical_path([lagging], step=1)
    assert one["path_share"] <= 1.0
    assert one["notes"][0].startswith("the step's work ends"), one["notes"]


def test_a_step_that_waits_for_its_work_is_its_host_range(synced):
    r = report_steps(synced)
    assert r["step_clock"] == "host", r["step_clock_note"]
    for s in r["steps"][:STEPS]:
        assert s["clock"] == "host"
        assert (s["start_ns"], s["end_ns"]) == (s["host_start_ns"], s["host_end_ns"])
        assert s["lag_ns"] <= 0, s
        assert s["device_ns"] + s["communication_ns"] + s["host_ns"] + s["idle_ns"] == s["duration_ns"]


@pytest.mark.parametrize("name", ["cuda_sampled_rank0", "rocm_mi250_train", "cuda_triton"])
def test_held_traces_keep_paths_within_their_steps(name):
    path = TRACES / f"{name}.json.gz"
    assert path.exists(), f"{path} is missing (../shared/traces)"
    r = each_step([path], top=1)
    assert r["steps"], name
    for s in r["steps"]:
        assert s["path_ns"] <= s["step_ns"], (name, s)
    # These GPUs keep up with their hosts (each step waits): the host clock, as before.
    assert report_steps(path)["step_clock"] == "host"


def test_the_demo_s_steps_add_up_on_their_clock(tmp_path):
    """openreg's own demo (the GPT, two profiled steps per trace): whichever clock its steps take, each step's shares
    add up to its span, the page's data names the clock, and no step's path is longer than the step."""
    out = tmp_path / "traces"
    done = subprocess.run(
        [sys.executable, "-m", "torch_openreg", "demo", "--size", "tiny", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    traces = sorted(out.glob("*.pt.trace.json"))
    assert traces
    for trace in traces:
        r = report_steps(trace)
        assert r["step_clock"] in ("host", "device") and r["step_clock_note"], r
        assert r["steps"]
        for s in r["steps"]:
            assert s["device_ns"] + s["communication_ns"] + s["host_ns"] + s["idle_ns"] == s["duration_ns"], s
            span = (
                (s["device_start_ns"], s["device_end_ns"])
                if s["clock"] == "device"
                else (s["host_start_ns"], s["host_end_ns"])
            )
            assert (s["start_ns"], s["end_ns"]) == span
        for s in each_step([trace], top=1)["steps"]:
            assert s["path_ns"] <= s["step_ns"], s
