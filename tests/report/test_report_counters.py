"""The report's roofline and counter tracks in a real browser (headless Chromium, as test_report_browser.py):
the roofline plots each kernel at its intensity and achieved FLOP/s under the peaks' roof, or says what the
trace lacks (the real CUDA and MTIA traces); a step chart per counter track sits under the timeline and follows
its zoom. Expectations are read from the trace files themselves."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from report_support import SHARED, read_trace

from openreg_trace.synthetic import metrics_trace


def make_report(tmp_path: Path, trace: Path, *extra: str) -> Path:
    from openreg_trace.cli import main

    out = tmp_path / (trace.name.split(".")[0] + ".html")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["report", str(trace), "-o", str(out), *extra]) == 0
    return out


def open_clean(browser, page: Path, view: str) -> None:
    browser.events.clear()
    browser.open(page, view)
    browser.frame()
    assert browser.evaluate("window.__report.errors") == []
    assert browser.console_errors() == []
    assert browser.requests() == []


def per_kernel_expectations(trace: Path) -> dict[str, tuple[float, float]]:
    """Per kernel name: (FLOP per byte, FLOP/s over the kernels' time), from the metric ranges' args."""
    sums: dict[str, list[float]] = {}
    for e in read_trace(trace)["traceEvents"]:
        if e.get("cat") == "cuda_profiler_range":
            a = e["args"]
            s = sums.setdefault(e["name"], [0, 0, 0])
            s[0] += a["flops"]
            s[1] += a["bytes_read"] + a["bytes_written"]
            s[2] += e["dur"] * 1e-6  # Kineto's microseconds
    return {name: (f / b, f / t) for name, (f, b, t) in sums.items()}


def test_roofline_plots_each_kernel_under_the_roof(browser, tmp_path, artifacts):
    trace = metrics_trace("per_kernel").write(tmp_path / "openreg_metrics.json")
    open_clean(browser, make_report(tmp_path, trace), "tables")
    assert browser.evaluate("window.__report.roofline.mode") == "roofline"
    plotted = browser.evaluate(
        "Chart.getChart('roofline-chart').data.datasets.filter(d => d.type === 'scatter')"
        ".flatMap(d => d.data.map(p => [p.row.name, p.x, p.y, p.row.bound]))"
    )
    want = per_kernel_expectations(trace)
    assert {name for name, *_ in plotted} == set(want)
    for name, x, y, bound in plotted:
        assert (x, y) == pytest.approx(want[name], rel=1e-9)
        assert bound == ("compute" if want[name][0] >= 1e12 / 2e11 else "memory")
    # The roof: min(peak FLOP/s, intensity x peak bytes/s), bent at the ridge of the declared peaks.
    roof = browser.evaluate(
        "Chart.getChart('roofline-chart').data.datasets.find(d => d.type === 'line').data.map(p => [p.x, p.y])"
    )
    assert roof[1] == pytest.approx([5, 1e12])
    assert roof[0][1] == pytest.approx(roof[0][0] * 2e11) and roof[2][1] == pytest.approx(1e12)
    bounds = browser.evaluate(
        "[...document.querySelectorAll('#roofline-table tbody tr')].map(tr => [tr.children[0].textContent,"
        " tr.lastChild.textContent])"
    )
    assert sorted(bounds) == [["add", "memory"], ["gemm", "compute"]]
    browser.screenshot(artifacts / "roofline-openreg.png")


def test_counter_tracks_under_the_timeline_follow_its_zoom(browser, tmp_path, artifacts):
    trace = metrics_trace("per_kernel").write(tmp_path / "openreg_counters.json")
    samples: dict[str, list[dict]] = {}
    for e in read_trace(trace)["traceEvents"]:
        if e.get("ph") == "C":
            samples.setdefault(e["name"], []).append(e["args"])
    open_clean(browser, make_report(tmp_path, trace), "timeline")
    browser.wait_for("window.__timeline && window.__timeline.ready")
    charts = browser.evaluate(
        "window.__report.counterCharts.map(c => [c.canvas.parentElement.dataset.track,"
        " c.data.datasets.map(d => [d.label, d.data.length])])"
    )
    assert sorted(track for track, _ in charts) == sorted(f"0/{name}" for name in samples)
    for track, datasets in charts:
        args = samples[track.split("/", 1)[1]]
        assert datasets == [[series, len(args)] for series in args[0]]
    stepped = browser.evaluate("window.__report.counterCharts.every(c => c.data.datasets.every(d => d.stepped))")
    assert stepped
    # Zoomed with the wheel, every chart shows the timeline's new span.
    rect = browser.evaluate(
        "(() => { const r = document.getElementById('tl-canvas').getBoundingClientRect();"
        " return [r.left + (r.width + 230) / 2, r.top + r.height / 2]; })()"
    )
    browser.wheel(*rect, -600)
    browser.frame()
    view = browser.evaluate("[window.__timeline.view.t0 / 1e6, window.__timeline.view.t1 / 1e6]")
    spans = browser.evaluate("window.__report.counterCharts.map(c => [c.options.scales.x.min, c.options.scales.x.max])")
    assert view[1] - view[0] < 5 and all(s == pytest.approx(view) for s in spans)
    # The value held from before the view stays on the chart: memory_allocated's 3 MiB from 2 ms.
    top = browser.evaluate(
        "window.__report.counterCharts.find(c => c.canvas.parentElement.dataset.track === '0/memory_allocated')"
        ".scales.y.max"
    )
    assert view[0] > 2 and top >= 3
    browser.evaluate("document.getElementById('counter-tracks').scrollIntoView()")
    browser.frame()
    browser.screenshot(artifacts / "counters-openreg.png")


def test_real_traces_say_what_they_lack(browser, tmp_path):
    cuda = make_report(tmp_path, SHARED / "cuda_cupti_counters.json.gz", "--peak-flops", "19.5e12")
    open_clean(browser, cuda, "tables")
    assert browser.evaluate("window.__report.roofline.mode") == "flops"  # FLOPs per kernel: nothing to place
    bars = browser.evaluate("Chart.getChart('roofline-chart').data.datasets[0].data")
    flops: dict[str, int] = {}  # per kernel: SASS instructions, FMAs twice
    for e in read_trace(SHARED / "cuda_cupti_counters.json.gz")["traceEvents"]:
        if e.get("cat") == "cuda_profiler_range":
            flops[e["name"]] = flops.get(e["name"], 0) + sum(
                v * (2 if "fma" in k else 1) for k, v in e["args"].items() if k.startswith("smsp__sass_thread_inst")
            )
    assert bars == sorted((f for f in flops.values() if f > 0), reverse=True)[:20]
    notes = browser.evaluate("[...document.querySelectorAll('#roofline-notes li')].map(li => li.textContent)")
    assert [n.split(":")[0] for n in notes] == [
        "arithmetic intensity unknown",
        "achieved FLOP/s and bytes/s unknown",
        "peak bytes/s unknown",
    ]
    open_clean(browser, cuda, "timeline")
    assert browser.evaluate("document.getElementById('counters-note').textContent").startswith(
        "no counter tracks: the trace has no counter events"
    )
    mtia = make_report(tmp_path, SHARED / "mtia_inference.json.gz")
    open_clean(browser, mtia, "tables")
    assert browser.evaluate("window.__report.roofline.mode") == "none"
    (note,) = browser.evaluate("[...document.querySelectorAll('#roofline-notes li')].map(li => li.textContent)")
    assert note.startswith("no per-kernel metrics: the trace has no complete events of category cuda_profiler_range")
    assert json.loads(browser.evaluate("JSON.stringify(window.__report.roofline.notes)")) == [note]
