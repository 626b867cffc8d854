"""Scenarios the replay library plays into the tracing window: skewed and
drifting device clocks, several devices and streams, records from a newer
runtime, runtime-side drops and refused buffers, work outside the window."""

from __future__ import annotations

import re

import trace_invariants as ti
from trace_invariants import Trace

# Times are µs after the tracing window opened; the case sleeps past them.
CLOCK_SCENARIO = """
device index=0 name=SkewedDevice offset_ns=5000000000000 skew_ppm=500 drift_ppm_per_s=1000
device index=1 name=SlowDevice offset_ns=42 skew_ppm=-800 drift_ppm_per_s=-300
stream device=0 id=1 default=1
stream device=0 id=5 priority=-1
stream device=1 id=1 default=1
kernel device=0 stream=1 start_us=1000 dur_us=40 name=k0 repeat=40 period_us=4000
kernel device=0 stream=5 start_us=3000 dur_us=25 name=k5 repeat=40 period_us=4000
memcpy device=1 stream=1 start_us=2000 dur_us=30 copy=DtoD bytes=65536 repeat=40 period_us=4000
"""

RUN_SCENARIO = """
import time
from torch.profiler import profile, ProfilerActivity
start = now_ns()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    time.sleep(SLEEP_S)
end = now_ns()
prof.export_chrome_trace("trace.json")
write_result(dict(start=start, end=end, opened=replay.orReplayWindowOpenedAt(),
                  scenario_error=replay.orReplayScenarioError().decode()))
"""


def run_scenario(run_case, tmp_path, scenario: str, sleep_s: float = 0.3, env: dict | None = None):
    path = tmp_path / "scenario.txt"
    path.write_text(scenario)
    case = run_case(
        RUN_SCENARIO.replace("SLEEP_S", str(sleep_s)), env={"OPENREG_REPLAY_SCENARIO": str(path), **(env or {})}
    ).check()
    assert case.result["scenario_error"] == ""
    return case, Trace.load(tmp_path / "trace.json")


def test_skewed_drifting_clocks_map_to_host_time(run_case, tmp_path):
    case, trace = run_scenario(run_case, tmp_path, CLOCK_SCENARIO)
    opened = case.result["opened"]
    events = trace.complete(["kernel", "gpu_memcpy"])
    assert len(events) == 120
    first_start = {"k0": 1000, "k5": 3000, "Memcpy DtoD (Device -> Device)": 2000}
    duration = {"k0": 40, "k5": 25, "Memcpy DtoD (Device -> Device)": 30}
    seen = {}
    for e in sorted(events, key=lambda e: e.ts):
        i = seen.get(e.name, 0)
        seen[e.name] = i + 1
        expected = opened + (first_start[e.name] + 4000 * i) * 1000
        # Within 100 ns, though the device clocks are 5000 s apart, 0.13% apart
        # in rate and drifting; a single offset would be off by microseconds.
        assert abs(trace.epoch_ns(e.ts) - expected) <= 100, (e.name, i, trace.epoch_ns(e.ts) - expected)
        assert abs(e.dur - duration[e.name] * 1000) <= 100, (e.name, i, e.dur)
    ti.assert_clean(trace, device_events=120, window=(case.result["start"], case.result["end"]))
    meta = trace.openreg_metadata()
    assert meta["clock_samples"] >= 2 * 30  # every 10 ms on both devices
    assert meta["rejected_clock_samples"] == 0


def test_devices_and_streams_are_named(run_case, tmp_path):
    _, trace = run_scenario(run_case, tmp_path, CLOCK_SCENARIO)
    names = trace.metadata("process_name")
    assert names[0]["name"] == "openreg:0 (SkewedDevice)"
    assert names[1]["name"] == "openreg:1 (SlowDevice)"
    sort = trace.metadata("process_sort_index")
    assert sort[0]["sort_index"] == 5_000_000 and sort[1]["sort_index"] == 5_000_001
    rows = trace.metadata("thread_name")
    assert rows[(0, 1)]["name"] == "Stream 1 (default)"
    assert rows[(0, 5)]["name"] == "Stream 5 (priority -1)"
    assert rows[(1, 1)]["name"] == "Stream 1 (default)"
    assert [p["name"] for p in trace.raw["deviceProperties"]] == ["SkewedDevice", "SlowDevice"]
    assert not [n for n in names.values() if n["name"].startswith("GPU")]


def test_work_outside_the_window_is_left_out_and_reported(run_case, tmp_path):
    scenario = """
kernel device=0 stream=1 start_us=-50000 launch_us=-50010 dur_us=10 name=before
kernel device=0 stream=1 start_us=1000 dur_us=10 name=inside
kernel device=0 stream=1 launch_us=2000 start_us=60000000 dur_us=10 name=late
"""
    case, trace = run_scenario(run_case, tmp_path, scenario, sleep_s=0.05)
    assert [e.name for e in trace.kernels()] == ["inside"]
    assert trace.openreg_metadata()["device_activities_outside_window"] == 2
    assert "finished after it ended" in case.stderr


def test_runtime_drops_are_reported(run_case, tmp_path):
    scenario = """
kernel device=0 stream=1 start_us=1000 dur_us=10 name=kept
drop device=0 count=5
drop device=0 count=2 kind=3
"""
    case, trace = run_scenario(run_case, tmp_path, scenario, sleep_s=0.05)
    assert trace.raw["openreg_dropped_records"] == 7
    meta = trace.openreg_metadata()
    assert meta["dropped_by_runtime"] == 7
    assert meta["dropped_by_kind"] == {"kernel": 5, "memcpy": 2}
    assert re.search(
        r"openreg profiler: 7 activity records were dropped by the runtime \(kernel 5, memcpy 2\)", case.stderr
    ), case.stderr
    assert [e.name for e in trace.kernels()] == ["kept"]


def test_late_clock_samples_are_reported(run_case, tmp_path):
    scenario = "kernel device=0 stream=1 start_us=1000 dur_us=10 name=kept\nlate_clock_syncs count=3\n"
    _, trace = run_scenario(run_case, tmp_path, scenario, sleep_s=0.05)
    meta = trace.openreg_metadata()
    assert meta["late_clock_syncs"] == 3 and meta["dropped_by_kind"] == {}


def test_device_work_on_stream_zero_is_kept_and_reported(run_case, tmp_path):
    scenario = (
        "kernel device=0 stream=1 start_us=1000 dur_us=10 name=on_one\n"
        "kernel device=0 stream=0 start_us=2000 dur_us=10 name=on_zero\n"
    )
    case, trace = run_scenario(run_case, tmp_path, scenario, sleep_s=0.05)
    assert sorted(e.name for e in trace.kernels()) == ["on_one", "on_zero"]
    assert trace.openreg_metadata()["device_activities_on_stream_0"] == 1
    assert "openreg profiler: 1 device activities came on stream 0 from the activity library" in case.stderr


def test_an_older_runtime_cannot_tell_drops_by_kind(run_case, tmp_path):
    # orActivityStats as it was before lateClockSyncs: 8 bytes of header and 8 counters.
    scenario = "kernel device=0 stream=1 start_us=1000 dur_us=10 name=kept\ndrop device=0 count=2\n"
    _, trace = run_scenario(run_case, tmp_path, scenario, sleep_s=0.05, env={"OPENREG_REPLAY_STATS_SIZE": "72"})
    meta = trace.openreg_metadata()
    assert meta["dropped_by_runtime"] == 2
    assert meta["dropped_by_kind"] is None and meta["late_clock_syncs"] is None


def test_refused_buffers_are_counted_not_silent(run_case, tmp_path):
    # 20000 kernels and launches (~4 MB of records) against a 1 MB buffer limit.
    scenario = "kernel device=0 stream=1 start_us=100 dur_us=2 name=many repeat=20000 period_us=5\n"
    case, trace = run_scenario(
        run_case,
        tmp_path,
        scenario,
        sleep_s=0.2,
        env={"OPENREG_PROFILER_BUFFER_LIMIT_MB": "1", "OPENREG_PROFILER_BUFFER_KB": "64"},
    )
    meta = trace.openreg_metadata()
    assert meta["buffers_refused"] > 0
    assert meta["dropped_by_runtime"] > 0
    kept = len(trace.kernels())
    assert 0 < kept < 20000
    assert "activity records were dropped" in case.stderr
    ti.assert_clean(trace, device_events=kept)


def test_records_from_a_newer_runtime(run_case, tmp_path):
    scenario = """
unknown kind=77 size=40
kernel device=0 stream=1 start_us=1000 dur_us=10 name=padded pad=24
memset device=0 stream=1 start_us=2000 dur_us=10 bytes=128 pad=8
"""
    _, trace = run_scenario(run_case, tmp_path, scenario, sleep_s=0.05)
    assert [e.name for e in trace.kernels()] == ["padded"]
    assert trace.complete(["gpu_memset"])[0].args["bytes"] == 128
    meta = trace.openreg_metadata()
    assert meta["unknown_records"] == 1 and meta["truncated_records"] == 0


def test_host_syncs_annotate_their_call_and_get_a_sync_row(run_case, tmp_path):
    scenario = "hostsync device=0 stream=1 start_us=1000 dur_us=500\n"
    _, trace = run_scenario(run_case, tmp_path, scenario, sleep_s=0.05)
    syncs = [e for e in trace.runtime_events() if e.name == "orStreamSynchronize"]
    assert len(syncs) == 1
    assert syncs[0].args["sync"] == "stream" and syncs[0].args["sync stream"] == 1
    # A Stream Sync row as Kineto writes CUPTI's, on Kineto's "stream 1 (sync)" row, never on the kernels' row.
    rows = [e for e in trace.complete(["cuda_sync"]) if e.name == "Stream Sync"]
    assert len(rows) == 1
    assert {k: v for k, v in rows[0].args.items() if k != "External id"} == {
        "device": 0,
        "stream": 1,
        "correlation": syncs[0].args["correlation"],
        "cuda_sync_kind": "Stream Sync",
    }
    assert rows[0].tid != 1
    assert trace.metadata("thread_name")[(0, rows[0].tid)]["name"] == "stream 1 (sync)"


def test_every_copy_kind_has_its_name(run_case, tmp_path):
    """The five copy kinds of the activity API, each named as CUDA's are (HtoH is one the backend
    never makes, so only a replayed record shows it)."""
    kinds = ["HtoD", "DtoH", "DtoD", "HtoH", "PtoP"]
    scenario = "".join(
        f"memcpy device=0 stream=1 start_us={1000 + 100 * i} dur_us=10 copy={kind} bytes=4096\n"
        for i, kind in enumerate(kinds)
    )
    _, trace = run_scenario(run_case, tmp_path, scenario)
    names = {e.args["kind"]: e.name for e in trace.complete(["gpu_memcpy"])}
    assert names == {
        "HtoD": "Memcpy HtoD (Host -> Device)",
        "DtoH": "Memcpy DtoH (Device -> Host)",
        "DtoD": "Memcpy DtoD (Device -> Device)",
        "HtoH": "Memcpy HtoH (Host -> Host)",
        "PtoP": "Memcpy PtoP (Device -> Device)",
    }
    ti.assert_clean(trace, device_events=5)
