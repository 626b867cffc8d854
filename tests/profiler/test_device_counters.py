"""The device's counters in torch.profiler (issue 44): per-kernel metrics on the kernels' args and counter tracks
("ph": "C") on the device's pid, asked for as on CUDA, with
`_ExperimentalConfig(profiler_metrics=[...], profiler_measure_per_kernel=...)`.

Values are exact where the kernel's arguments define them: a matmul of M x K by K x N is 2MKN floating-point
operations and reads and writes its operands' bytes; a copy kernel moves its tensors' bytes. The memory counters
are held to `torch.openreg.memory_allocated()` / `memory_reserved()` at the samples' times.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
import torch
from torch._C._profiler import _ExperimentalConfig
from torch.profiler import ProfilerActivity, profile, record_function
from trace_invariants import Trace, check_all

KERNEL_METRICS = ["flops", "bytes_read", "bytes_written", "busy_ns", "flops_per_s", "bytes_per_s"]
COUNTERS = ["memory_allocated", "memory_reserved", "queued_tasks", "copy_bandwidth"]
ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def traced(tmp_path, work, metrics=None, per_kernel=True, name="trace.json"):
    """Runs work() under profile(); returns (profiler, the exported trace as a dict)."""
    kwargs = {}
    if metrics is not None:
        kwargs["experimental_config"] = _ExperimentalConfig(
            profiler_metrics=metrics, profiler_measure_per_kernel=per_kernel
        )
    with profile(activities=ACTIVITIES, **kwargs) as prof:
        work()
        torch.openreg.synchronize()
    path = tmp_path / name
    prof.export_chrome_trace(str(path))
    return prof, json.loads(path.read_text())


def kernels(trace, name_start=""):
    return [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith(name_start)]


def counters(trace, name):
    return [e for e in trace["traceEvents"] if e.get("ph") == "C" and e["name"] == name]


def test_a_matmul_reports_2mkn_and_its_operands_bytes(tmp_path):
    a = torch.randn(32, 48, device="openreg")
    b = torch.randn(48, 16, device="openreg")
    batch_a = torch.randn(3, 8, 5, device="openreg", dtype=torch.float64)
    batch_b = torch.randn(3, 5, 7, device="openreg", dtype=torch.float64)
    bias = torch.randn(32, 16, device="openreg")

    def work():
        a @ b
        torch.bmm(batch_a, batch_b)
        torch.addmm(bias, a, b)

    _, trace = traced(tmp_path, work, KERNEL_METRICS)
    gemms = kernels(trace, "gemm")
    assert len(gemms) == 3, [k["name"] for k in kernels(trace)]
    mm, bmm, addmm = sorted(gemms, key=lambda k: k["ts"])
    assert mm["args"]["flops"] == 2 * 32 * 48 * 16
    assert (mm["args"]["bytes_read"], mm["args"]["bytes_written"]) == ((32 * 48 + 48 * 16) * 4, 32 * 16 * 4)
    assert bmm["args"]["flops"] == 2 * 3 * 8 * 5 * 7
    assert (bmm["args"]["bytes_read"], bmm["args"]["bytes_written"]) == ((3 * 8 * 5 + 3 * 5 * 7) * 8, 3 * 8 * 7 * 8)
    assert addmm["args"]["flops"] == 2 * 32 * 48 * 16  # the product's; the epilogue (bias, alpha, beta) is not counted
    assert addmm["args"]["bytes_read"] == (32 * 16 + 32 * 48 + 48 * 16) * 4  # the bias is read too
    for k in gemms:
        seconds = k["dur"] / 1e6
        assert k["args"]["flops_per_s"] == pytest.approx(k["args"]["flops"] / seconds, rel=1e-3)
        assert k["args"]["bytes_per_s"] == pytest.approx(
            (k["args"]["bytes_read"] + k["args"]["bytes_written"]) / seconds, rel=1e-3
        )
        assert 0 < k["args"]["busy_ns"] <= k["dur"] * 1000 + 1  # on a core, inside the kernel's span


def test_copies_and_elementwise_kernels_report_bytes_and_no_flops(tmp_path):
    x = torch.randn(1000, device="openreg")
    row = torch.randn(1, 250, device="openreg")
    grid = torch.randn(4, 250, device="openreg")

    def work():
        x.to(torch.float64)  # a conversion kernel: 4 bytes in, 8 out per element
        grid + row  # row is broadcast: its 250 elements are read once

    _, trace = traced(tmp_path, work, KERNEL_METRICS)
    (convert,) = kernels(trace, "copy_f32_to_f64")
    assert (convert["args"]["bytes_read"], convert["args"]["bytes_written"]) == (4000, 8000)
    (add,) = kernels(trace, "elementwise_add")
    assert (add["args"]["bytes_read"], add["args"]["bytes_written"]) == ((1000 + 250) * 4, 1000 * 4)
    for k in (convert, add):
        assert "flops" not in k["args"] and "flops_per_s" not in k["args"], k["args"]  # not defined: not made up


def test_only_the_named_metrics_are_written(tmp_path):
    a = torch.randn(16, 16, device="openreg")
    _, trace = traced(tmp_path, lambda: a @ a, ["flops"])
    (mm,) = kernels(trace, "gemm")
    assert mm["args"]["flops"] == 2 * 16**3
    assert not {"bytes_read", "bytes_written", "busy_ns", "flops_per_s", "bytes_per_s"} & mm["args"].keys()
    assert not [e for e in trace["traceEvents"] if e.get("ph") == "C"]


def test_asking_nothing_adds_nothing(tmp_path):
    a = torch.randn(16, 16, device="openreg")
    _, trace = traced(tmp_path, lambda: a @ a)
    assert not set(KERNEL_METRICS) & kernels(trace, "gemm")[0]["args"].keys()
    assert not [e for e in trace["traceEvents"] if e.get("ph") == "C"]
    assert trace["openreg_profiler"]["metrics"] is None


def test_key_averages_and_the_trace_rules_are_unchanged_by_metrics(tmp_path):
    """Per-kernel values ride on the kernels' own args (an extra event per kernel would be counted by key_averages
    as a second kernel, doubling device time); counter tracks are counter events, which add rows of zero time."""
    a = torch.randn(64, 64, device="openreg")

    def work():
        for _ in range(3):
            (a @ a).relu().sum().cpu()

    plain, plain_trace = traced(tmp_path, work, name="plain.json")
    measured, measured_trace = traced(tmp_path, work, KERNEL_METRICS + COUNTERS, name="measured.json")

    def device_work(trace):
        return [e for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]

    def device_rows(prof, trace):
        names = {e["name"] for e in device_work(trace)}
        return {e.key: (e.count, e.self_device_time_total) for e in prof.key_averages() if e.key in names}

    plain_rows, measured_rows = device_rows(plain, plain_trace), device_rows(measured, measured_trace)
    assert {k: n for k, (n, _) in measured_rows.items()} == {k: n for k, (n, _) in plain_rows.items()}
    # Each kernel counted once: key_averages' device time is the trace's.
    expected = Counter()
    for e in device_work(measured_trace):
        expected[e["name"]] += e["dur"]
    for key, (_, device_us) in measured_rows.items():
        assert device_us == pytest.approx(expected[key], abs=0.01), key
    for name in COUNTERS:
        row = [e for e in measured.key_averages() if e.key == name]
        assert row and row[0].self_device_time_total == 0 and row[0].cpu_time_total == 0, name
    assert check_all(Trace.load(tmp_path / "measured.json")) == []
    assert len(kernels(measured_trace)) == len(kernels(plain_trace))


def test_memory_counters_match_the_allocator_at_their_time(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENREG_COUNTER_PERIOD_US", "500")
    keep = []

    def work():
        expected.update(before=torch.openreg.memory_allocated())
        keep.append(torch.empty(1 << 20, device="openreg"))
        keep.append(torch.empty(1 << 19, device="openreg"))
        torch.openreg.synchronize()
        expected.update(allocated=torch.openreg.memory_allocated(), reserved=torch.openreg.memory_reserved())
        with record_function("steady"):
            time.sleep(0.03)  # nothing allocates meanwhile: every sample in here reads the same
        keep.clear()

    expected = {}
    _, trace = traced(tmp_path, work, ["memory_allocated", "memory_reserved"])
    (steady,) = [e for e in trace["traceEvents"] if e.get("name") == "steady" and e.get("ph") == "X"]
    inside = lambda e: steady["ts"] <= e["ts"] <= steady["ts"] + steady["dur"]  # noqa: E731
    for name, series, value in (
        ("memory_allocated", "bytes", expected["allocated"]),
        ("memory_reserved", "bytes", expected["reserved"]),
    ):
        track = [e for e in counters(trace, name) if e["pid"] == 0]
        assert track, name
        # Samples that repeat the previous value are left out, so the one in force during the sleep is the last
        # sample at or before its end.
        before_end = [e for e in track if e["ts"] <= steady["ts"] + steady["dur"]]
        assert before_end[-1]["args"] == {series: value}, (name, before_end[-3:], value)
        assert all(e["args"][series] == value for e in track if inside(e)), name
    assert expected["allocated"] - expected["before"] == (1 << 22) + (1 << 21)  # 4 bytes per element
    meta = trace["openreg_profiler"]["metrics"]
    assert meta["counters"] == ["memory_allocated", "memory_reserved"] and meta["kernel"] == []


def test_copy_bandwidth_and_queued_tasks_tracks(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENREG_COUNTER_PERIOD_US", "500")
    host = torch.randn(1 << 22)

    def work():
        for _ in range(4):
            host.to("openreg")
            time.sleep(0.002)

    _, trace = traced(tmp_path, work, ["copy_bandwidth", "queued_tasks"])
    bandwidth = [e for e in counters(trace, "copy_bandwidth") if e["pid"] == 0]
    assert max(e["args"]["bytes_per_s"] for e in bandwidth) > 0
    assert bandwidth[-1]["args"]["bytes_per_s"] == 0  # the window's end: nothing is measured after it
    copies = [e for e in trace["traceEvents"] if e.get("cat") == "gpu_memcpy"]
    assert sum(e["args"]["bytes"] for e in copies) == 4 * host.numel() * 4
    queued = [e for e in counters(trace, "queued_tasks") if e["pid"] == 0]
    assert queued and all(key.startswith("stream ") for e in queued for key in e["args"])


def test_range_mode_gives_totals_per_device(tmp_path):
    a = torch.randn(32, 32, device="openreg")

    def work():
        for _ in range(5):
            a @ a

    _, trace = traced(tmp_path, work, ["flops", "bytes_read"], per_kernel=False)
    assert not {"flops", "bytes_read"} & kernels(trace, "gemm")[0]["args"].keys()
    meta = trace["openreg_profiler"]["metrics"]
    assert meta["per_kernel"] is False
    (totals,) = meta["totals"]
    assert totals["device"] == 0 and totals["kernels_with_flops"] == 5
    assert totals["flops"] == 5 * 2 * 32**3
    assert totals["bytes_read"] == 5 * 2 * 32 * 32 * 4


def test_an_unknown_metric_is_a_runtime_error_naming_the_known_ones():
    a = torch.randn(8, 8, device="openreg")
    config = _ExperimentalConfig(profiler_metrics=["flops", "dram__bytes_read.sum"], profiler_measure_per_kernel=True)
    with pytest.raises(RuntimeError, match=r"unknown metric 'dram__bytes_read.sum'.*flops, bytes_read") as error:
        with profile(activities=ACTIVITIES, experimental_config=config):
            a @ a
    assert all(name in str(error.value) for name in KERNEL_METRICS + COUNTERS)
    # Nothing is left behind: the next profile traces the device.
    with profile(activities=ACTIVITIES) as prof:
        a @ a
        torch.openreg.synchronize()
    assert [e for e in prof.events() if e.name.startswith("gemm")]


def test_device_properties_declare_the_peaks_rooflines_need(tmp_path):
    a = torch.randn(8, 8, device="openreg")
    _, trace = traced(tmp_path, lambda: a @ a)
    for device in trace["deviceProperties"]:
        # Declared, as a datasheet would: a multiply-add per compute unit per cycle, 16 bytes per cycle per
        # executor thread (OPENREG_PEAK_GFLOPS / OPENREG_PEAK_GBPS override them).
        assert device["peakFlopsPerSecond"] == 2 * device["computeUnits"] * device["clockRateKHz"] * 1000
        assert device["peakBytesPerSecond"] == 16 * device["executorThreads"] * device["clockRateKHz"] * 1000


def test_the_trace_tools_roofline_reads_an_openreg_trace(tmp_path):
    """openreg-trace summary takes the kernels' metric args and the declared peaks: exact FLOPs and bytes, the kernel's
    own time, and the bound by the ridge point."""
    import subprocess
    import sys

    a = torch.randn(64, 64, device="openreg")
    traced(tmp_path, lambda: [a @ a for _ in range(3)], KERNEL_METRICS + COUNTERS)
    done = subprocess.run(
        [sys.executable, "-m", "openreg_trace", "summary", "--json", str(tmp_path / "trace.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    (device,) = [d for d in summary["roofline"]["devices"] if d["device"] == 0]
    assert device["peak_flops_source"] == "deviceProperties"
    (gemm,) = [k for k in device["kernels"] if k["name"].startswith("gemm")]
    assert (gemm["count"], gemm["flops"], gemm["bytes"]) == (3, 3 * 2 * 64**3, 3 * 3 * 64 * 64 * 4)
    assert gemm["time_basis"] == "kernel"
    ridge = device["ridge_flops_per_byte"]
    assert gemm["intensity_flops_per_byte"] == pytest.approx(2 * 64**3 / (3 * 64 * 64 * 4))
    assert gemm["bound"] == ("compute" if gemm["intensity_flops_per_byte"] >= ridge else "memory")
    assert {c["name"] for c in summary["counters"]["tracks"]} >= {"memory_allocated", "queued_tasks"}
