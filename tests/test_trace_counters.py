"""The trace tools read counters, anyone's (issue 44, point 4): the roofline per kernel from metric ranges
(cat cuda_profiler_range: openreg's per-kernel metrics, CUPTI's range profiler) against the device's peaks,
counter tracks ("ph": "C") per series, what a trace lacks said precisely, and metric ranges counted nowhere
else. Exact values on synthetic traces (openreg_trace.synthetic.metrics_trace) and on the real CUDA and MTIA
traces of ../shared/traces."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import subprocess
from pathlib import Path

import pytest

from openreg_trace import open_trace
from openreg_trace.report._native import report_data
from openreg_trace.synthetic import (
    ADD_BYTES,
    ADD_FLOPS,
    GEMM_BYTES,
    GEMM_FLOPS,
    PEAK_BYTES_PER_S,
    PEAK_FLOPS,
    metrics_trace,
)

REPO = Path(__file__).resolve().parents[1]
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
MS = 1_000_000
SASS = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
FLOPS_PER_INSTRUCTION = {
    op: 2 if "fma" in op else 1 for op in ("ffma", "fmul", "fadd", "hfma", "hmul", "hadd", "dfma", "dmul", "dadd")
}


def run_cli(*args: object) -> subprocess.CompletedProcess:
    """openreg-trace in this process (no torch, no fresh interpreter)."""
    from openreg_trace.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def summary(path: Path, **options: object) -> dict:
    with open_trace(path) as t:
        return t.summary(top=100, **options)


def shared(name: str) -> Path:
    path = SHARED / f"{name}.json.gz"
    if not path.is_file():
        pytest.fail(f"missing shared trace {path}")
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("counters")
    return {
        "per_kernel": metrics_trace("per_kernel").write(folder / "per_kernel.json"),
        "total": metrics_trace("total").write(folder / "total.json"),
        "plain": metrics_trace("none", counters=False).write(folder / "plain.json"),
        "no_peaks": metrics_trace("per_kernel", counters=False, peaks=False).write(folder / "no_peaks.json"),
    }


def row(device: dict, name: str) -> dict:
    (found,) = [k for k in device["kernels"] if k["name"] == name]
    return found


# ---------------------------------------------------------------- the roofline


def test_roofline_of_a_step_against_the_declared_peaks(traces):
    (d,) = summary(traces["per_kernel"])["roofline"]["devices"]
    assert (d["device"], d["name"], d["ranges"], d["flops_from"]) == (0, "openreg 0", 5, "flops")
    assert (d["peak_flops_per_s"], d["peak_flops_source"]) == (PEAK_FLOPS, "deviceProperties")
    assert (d["peak_bytes_per_s"], d["peak_bytes_source"], d["ridge_flops_per_byte"]) == (2e11, "deviceProperties", 5)
    assert [k["name"] for k in d["kernels"]] == ["gemm", "add"]  # most time first
    gemm, add = d["kernels"]
    gemm_bytes = sum(GEMM_BYTES)
    assert (gemm["count"], gemm["time_basis"], gemm["time_ns"]) == (3, "kernel", 3 * MS)
    assert (gemm["flops"], gemm["bytes_read"], gemm["bytes_written"]) == (3 * GEMM_FLOPS, 3 * 32768, 3 * 16384)
    assert gemm["intensity_flops_per_byte"] == pytest.approx(GEMM_FLOPS / gemm_bytes, rel=1e-15)  # 10.67
    assert gemm["flops_per_s"] == pytest.approx(524_288_000, rel=1e-15)  # 2^19 FLOPs per ms
    assert gemm["bytes_per_s"] == pytest.approx(49_152_000, rel=1e-15)
    assert gemm["peak_flops_share"] == pytest.approx(524_288_000 / PEAK_FLOPS, rel=1e-15)
    assert gemm["peak_bytes_share"] == pytest.approx(49_152_000 / PEAK_BYTES_PER_S, rel=1e-15)
    assert (gemm["attainable_flops_per_s"], gemm["bound"]) == (PEAK_FLOPS, "compute")
    assert (add["count"], add["time_ns"], add["flops"], add["bytes"]) == (2, MS, 2 * ADD_FLOPS, 2 * sum(ADD_BYTES))
    assert add["intensity_flops_per_byte"] == pytest.approx(1 / 12, rel=1e-15)
    assert add["attainable_flops_per_s"] == pytest.approx(PEAK_BYTES_PER_S / 12, rel=1e-15)
    assert add["bound"] == "memory"
    total = d["total"]
    assert (total["name"], total["count"], total["time_ns"]) == (None, 5, 4 * MS)
    assert total["flops"] == 3 * GEMM_FLOPS + 2 * ADD_FLOPS
    assert d["notes"] == []


def test_one_range_per_device_is_timed_by_its_kernels(traces):
    (d,) = summary(traces["total"])["roofline"]["devices"]
    (total,) = d["kernels"]
    assert (total["name"], total["device_total"], total["kernels"]) == ("openreg kernels", True, 5)
    # The kernels' summed time (3 gemms of 1 ms, 2 adds of 0.5 ms), not the range's 5.5 ms span.
    assert (total["time_basis"], total["time_ns"]) == ("kernels", 4 * MS)
    assert total["flops_per_s"] == pytest.approx((3 * GEMM_FLOPS + 2 * ADD_FLOPS) / 4e-3, rel=1e-15)
    assert d["total"]["flops"] == total["flops"]


def test_options_override_the_peaks_and_say_how_to_give_them(traces):
    d = summary(traces["per_kernel"], peak_flops=4e12)["roofline"]["devices"][0]
    assert (d["peak_flops_per_s"], d["peak_flops_source"], d["peak_bytes_source"]) == (
        4e12,
        "options",
        "deviceProperties",
    )
    assert d["ridge_flops_per_byte"] == 20
    (d,) = summary(traces["no_peaks"])["roofline"]["devices"]
    assert d["peak_flops_per_s"] is None and d["ridge_flops_per_byte"] is None
    assert row(d, "gemm")["bound"] is None and row(d, "gemm")["flops_per_s"] == pytest.approx(524_288_000)
    assert d["notes"] == [
        "peak FLOP/s unknown: the trace's deviceProperties has no entry for device 0, so no peakFlopsPerSecond; "
        "give one with --peak-flops (summary option peak_flops)",
        "peak bytes/s unknown: the trace's deviceProperties has no entry for device 0, so no peakBytesPerSecond; "
        "give one with --peak-bytes-per-s (summary option peak_bytes_per_s)",
    ]
    done = run_cli("summary", traces["no_peaks"], "--peak-flops", "1e12", "--peak-bytes-per-s", "2e11", "--json")
    (d,) = json.loads(done.stdout)["roofline"]["devices"]
    assert (d["peak_flops_source"], d["peak_bytes_source"], row(d, "add")["bound"]) == ("options", "options", "memory")
    bad = run_cli("summary", traces["no_peaks"], "--peak-flops", "-1")
    assert bad.returncode == 2 and 'option "peak_flops" must be a positive number' in bad.stderr


def test_summary_prints_the_roofline_and_the_counters(traces):
    text = run_cli("summary", traces["per_kernel"]).stdout
    lines = text.splitlines()
    at = lines.index(
        "Roofline of device 0 (openreg 0): peaks 1.000 TFLOP/s and 200.000 GB/s (from deviceProperties), "
        "ridge 5.00 FLOP/B; 5 metric ranges"
    )
    assert lines[at + 2].split() == [
        "3", "3.000", "ms", "1.573", "MFLOP", "147.456", "kB", "10.7", "524.288", "MFLOP/s", "0.052%",
        "49.152", "MB/s", "0.025%", "compute", "gemm",
    ]  # fmt: skip
    assert lines[at + 3].split()[-2:] == ["memory", "add"]
    at = lines.index("  device 0  queued_tasks [mtia_counters]: 4 samples from +0 ns to +8.000 ms")
    assert lines[at + 1].split() == ["stream", "7", "min", "0", "max", "3", "last", "0", "mean", "1.75"]
    assert "  device 0  memory_allocated [mtia_counters]: 4 samples from +0 ns to +8.000 ms" in lines


def test_metric_ranges_and_counters_change_no_other_number(traces):
    """The ranges nest exactly under their kernels on the stream rows: counted as device work they would
    double device time, kernel counts, busy time; the counters would add rows."""
    with_all, plain = summary(traces["per_kernel"]), summary(traces["plain"])
    for s in (with_all, plain):
        for key in ("events", "bytes", "phases", "categories"):
            del s["trace"][key]
        del s["roofline"], s["counters"]
    assert with_all == plain
    assert plain["device_total_ns"] == 4 * MS + MS // 10
    with open_trace(traces["per_kernel"]) as a, open_trace(traces["plain"]) as b:
        checks = [
            [(c["name"], c["status"], c["violations"], c["warnings"]) for c in t.check(strict=True)["checks"]]
            for t in (a, b)
        ]
    assert checks[0] == checks[1]
    reports = [report_data(traces[k], events=False)["report"] for k in ("per_kernel", "plain")]
    for r in reports:
        del r["counters"]
    assert reports[0] == reports[1]


# ---------------------------------------------------------------- real traces


def sass_flops(args: dict) -> int:
    return sum(args.get(SASS.format(op), 0) * n for op, n in FLOPS_PER_INSTRUCTION.items())


def test_cuda_cupti_ranges_give_flops_and_say_what_is_missing():
    path = shared("cuda_cupti_counters")
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ranges = [e for e in events if e.get("cat") == "cuda_profiler_range"]
    name = "ampere_sgemm_32x32_sliced1x4_tn"
    want = sum(sass_flops(e["args"]) for e in ranges if e["name"] == name)
    assert want == 30_160_191_488  # 6 ranges, FMAs counted twice (HTA's cupti_counter_analysis)
    r = summary(path, peak_flops=19.5e12)["roofline"]
    (d,) = r["devices"]
    assert (d["device"], d["ranges"], d["flops_from"], d["peak_flops_source"]) == (0, 77, "sass_counters", "options")
    sgemm = row(d, name)
    assert (sgemm["count"], sgemm["flops"], sgemm["bytes"]) == (6, want, None)
    # CUPTI's range mode writes no kernel events, and Kineto splits the span evenly among the ranges.
    assert (sgemm["time_basis"], sgemm["time_ns"], sgemm["flops_per_s"], sgemm["bound"]) == (
        "cupti_range_split",
        None,
        None,
        None,
    )
    assert d["total"]["flops"] == sum(sass_flops(e["args"]) for e in ranges)
    assert d["notes"] == [
        "arithmetic intensity unknown: it needs the bytes each kernel moved, and none of device 0's 77 ranges has "
        "them (args bytes_read and bytes_written, or CUPTI's dram__bytes_read.sum and dram__bytes_write.sum); their "
        "args are CUPTI's SASS instruction counters (smsp__sass_thread_inst_executed_op_*)",
        "achieved FLOP/s and bytes/s unknown: the trace has no kernel events to time device 0's 77 ranges by "
        "(CUPTI's range mode suppresses them), and their own ts and dur are not the kernels': Kineto's CUPTI range "
        "profiler splits its profiling span evenly among its ranges (here 77 of 121.431 ms)",
        "peak bytes/s unknown: device 0's deviceProperties entry has no peakBytesPerSecond; give one with "
        "--peak-bytes-per-s (summary option peak_bytes_per_s)",
    ]
    assert r["notes"] == []


def test_mtia_trace_says_it_has_neither():
    s = summary(shared("mtia_inference"))
    assert s["roofline"] == {
        "ranges": 0,
        "devices": [],
        "notes": [
            "no per-kernel metrics: the trace has no complete events of category cuda_profiler_range (openreg "
            "writes one per kernel with flops, bytes_read and bytes_written; Kineto's CUPTI range profiler with "
            "SASS instruction counters), so no FLOPs, bytes, arithmetic intensity or achieved rates"
        ],
    }
    assert s["counters"] == {
        "tracks": [],
        "note": 'no counter tracks: the trace has no counter events ("ph": "C", as Kineto writes MTIA\'s counters, '
        "its PM sampling and openreg's)",
    }
    text = run_cli("summary", shared("mtia_inference")).stdout.splitlines()
    assert "Roofline: " + s["roofline"]["notes"][0] in text
    assert "No counter tracks: the trace has no counter events" in text[-1]


# ---------------------------------------------------------------- counter tracks


def series(s: dict, track: str) -> dict:
    (t,) = [t for t in s["counters"]["tracks"] if t["name"] == track]
    return {c["name"]: c for c in t["series"]}


def test_counter_tracks_per_series(traces):
    s = summary(traces["per_kernel"])
    assert [(t["device"], t["name"], t["category"], t["samples"]) for t in s["counters"]["tracks"]] == [
        (0, "copy_bandwidth", "mtia_counters", 2),
        (0, "memory_allocated", "mtia_counters", 4),
        (0, "memory_reserved", "mtia_counters", 4),
        (0, "queued_tasks", "mtia_counters", 4),
    ]
    mem = series(s, "memory_allocated")["bytes"]
    # 1 MiB for 2 ms, 3 MiB for 4 ms, 1 MiB for 2 ms: a mean of 2 MiB over the 8 ms.
    assert (mem["min"], mem["max"], mem["last"], mem["mean"]) == (1 << 20, 3 << 20, 1 << 20, 2 << 20)
    queued = series(s, "queued_tasks")
    assert (queued["stream 7"]["mean"], queued["stream 13"]["mean"]) == (1.75, 1.25)
    assert (queued["stream 7"]["max"], queued["stream 7"]["last"]) == (3, 0)
    bw = series(s, "copy_bandwidth")["bytes_per_s"]
    assert (bw["mean"], bw["max"], bw["first_ns"], bw["last_ns"]) == (2.5e10, 2.5e10, 7 * MS, 7 * MS + MS // 10)


def test_report_data_holds_each_tracks_samples(traces):
    r = report_data(traces["per_kernel"], events=False)
    (queued,) = [c for c in r["report"]["counters"] if c["name"] == "queued_tasks"]
    assert queued == {
        "device": 0,
        "name": "queued_tasks",
        "category": "mtia_counters",
        "samples": 4,
        "series": ["stream 7", "stream 13"],
        "t_ns": [0, 2 * MS, 4 * MS, 8 * MS],
        "values": [[3, 2, 1, 0], [2, 1, 1, 0]],
    }
    assert r["summary"]["roofline"]["devices"][0]["peak_flops_source"] == "deviceProperties"
    r = report_data(traces["per_kernel"], events=False, peak_flops=3e12)
    assert r["summary"]["roofline"]["devices"][0]["peak_flops_per_s"] == 3e12


def test_hta_taught_reads_metric_ranges_as_no_launches(traces, tmp_path):
    """openreg_trace.hta: a metric range carries its kernel's correlation; untaught, HTA pairs it with the
    kernel as a second launch (launch statistics doubled, idle time re-classified)."""
    import logging

    from openreg_trace import hta as openreg_hta

    folders = {}
    for key in ("plain", "per_kernel"):
        folders[key] = tmp_path / key
        folders[key].mkdir()
        (folders[key] / "rank0.json").write_bytes(traces[key].read_bytes())
    openreg_hta.teach()
    logging.disable(logging.WARNING)
    try:
        from hta.trace_analysis import TraceAnalysis

        results = []
        for key in ("plain", "per_kernel"):
            a = TraceAnalysis(trace_dir=str(folders[key]), include_last_profiler_step=True)
            (launches,) = a.get_cuda_kernel_launch_stats(visualize=False).values()
            idle = a.get_idle_time_breakdown(visualize=False)[0]
            graph, ok = a.critical_path_analysis(rank=0, annotation="ProfilerStep#1", instance_id=0)
            results.append((launches.to_dict("records"), idle.to_dict("records"), ok, len(graph.critical_path_nodes)))
    finally:
        logging.disable(logging.NOTSET)
        openreg_hta.forget()
    assert len(results[1][0]) == 6  # five kernels and the copy, each launched once
    assert results[0] == results[1]
