"""The report in a real browser (headless Chromium over the DevTools protocol): it loads with no console error
and no network request, shows what the trace holds (kernels in the table, a selected kernel's op, the memory
peak, the ranks), and zooms, pans, selects and searches through real input events. A screenshot of each view
is kept (the folder is printed). Expectations are read from the trace files themselves, not from the page's data.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_support import DEVICE_CATS, SHARED, VIEWS, Expected, ns, read_trace, run_cli


def make_report(tmp_path: Path, *inputs: Path, name: str = "report.html", extra: tuple = ()) -> Path:
    out = tmp_path / name
    done = run_cli("report", *map(str, inputs), "-o", str(out), *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"wrote {out}"), done.stdout
    return out


def open_clean(browser, page: Path, view: str | None = None) -> None:
    """Opens the page; asserts that it logged no error or warning and asked for nothing over the network."""
    browser.events.clear()
    browser.open(page, view)
    browser.frame()
    assert browser.evaluate("window.__report.errors") == []
    assert browser.console_errors() == []
    assert browser.requests() == []


def click_selector(browser, selector: str) -> None:
    box = browser.evaluate(
        f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
        " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
    )
    browser.click(*box)
    browser.frame()


def show_view(browser, view: str) -> None:
    click_selector(browser, f'nav button[data-view="{view}"]')
    assert browser.evaluate("window.__report.view") == view


def screenshots(browser, artifacts: Path, prefix: str) -> None:
    for view in VIEWS:
        show_view(browser, view)
        if view == "timeline":
            browser.wait_for("window.__timeline && window.__timeline.ready")
            browser.frame()
        shot = browser.screenshot(artifacts / f"{prefix}-{view}.png")
        assert shot.stat().st_size > 10_000, shot  # a drawn page, not a blank one


def check_kernel_table(browser, expected: Expected) -> None:
    show_view(browser, "tables")
    rows = browser.evaluate("document.querySelectorAll('#kernels tbody tr').length")
    assert rows == len(expected.kernel_names)
    names = browser.evaluate(
        "[...document.querySelectorAll('#kernels tbody tr td:first-child')].map(td => td.textContent)"
    )
    assert set(names) == expected.kernel_names
    calls = browser.evaluate(
        "[...document.querySelectorAll('#kernels tbody tr td:nth-child(3)')].map(td => Number(td.title))"
    )
    assert sum(calls) == len(expected.device)
    # Sorting by a real click on the header: most calls first.
    click_selector(browser, '#kernels th[data-key="count"]')
    first = browser.evaluate("Number(document.querySelector('#kernels tbody tr td:nth-child(3)').title)")
    assert first == max(calls)
    # Filtering by typing: only the matching kernels stay.
    word = sorted(expected.kernel_names)[0][:6]
    click_selector(browser, "#kernel-table input.filter")
    browser.send("Input.insertText", text=word)
    browser.frame()
    kept = browser.evaluate(
        "[...document.querySelectorAll('#kernels tbody tr td:first-child')].map(td => td.textContent)"
    )
    want = {n for n in expected.kernel_names if word.lower() in n.lower()}
    assert want and set(kept) <= {n for n in expected.kernel_names} and set(kept) >= want


def check_table_to_timeline(browser, expected: Expected) -> None:
    """Clicking a kernel's name in the table opens the timeline on its first occurrence."""
    show_view(browser, "tables")
    name = sorted(expected.kernel_names)[0]
    rows = browser.evaluate(
        "[...document.querySelectorAll('#kernels tbody tr td:first-child')].map(td => td.textContent)"
    )
    click_selector(browser, f"#kernels tbody tr:nth-child({rows.index(name) + 1}) td:first-child")
    assert browser.evaluate("window.__report.view") == "timeline"
    browser.wait_for("window.__timeline && window.__timeline.ready && window.__timeline.selected >= 0")
    assert browser.evaluate("document.getElementById('sel-name').textContent") == name
    first = min(ns(e["ts"]) for e in expected.device if e["name"] == name) - expected.origin
    assert browser.evaluate("window.__timeline.ev.ts[window.__timeline.selected]") == pytest.approx(first, abs=1)
    assert browser.evaluate("window.__timeline.matches.length") == sum(1 for e in expected.device if e["name"] == name)
    browser.key("Escape", "Escape", 27)


def check_timeline(browser, expected: Expected) -> None:
    show_view(browser, "timeline")
    browser.wait_for("window.__timeline && window.__timeline.ready")  # its events inflate asynchronously
    tl = "window.__timeline"
    rect = browser.evaluate(
        "(() => { const r = document.getElementById('tl-canvas').getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()"
    )
    left, top, width, height = rect
    plot_x, plot_y = left + (width + browser.evaluate(f"{tl}.LABEL_W")) / 2, top + height / 2
    span = lambda: browser.evaluate(f"{tl}.view.t1 - {tl}.view.t0")  # noqa: E731
    t0 = lambda: browser.evaluate(f"{tl}.view.t0")  # noqa: E731
    full = span()
    # Zoom in with the wheel, out with S, in with W; pan with D and by dragging.
    browser.wheel(plot_x, plot_y, -600)
    browser.frame()
    assert span() < full * 0.5
    zoomed = span()
    browser.key("s", "KeyS", 83)
    browser.frame()
    assert span() > zoomed * 1.2
    browser.key("w", "KeyW", 87)
    browser.frame()
    assert span() == pytest.approx(zoomed, rel=1e-6)
    before = t0()
    browser.key("d", "KeyD", 68)
    browser.frame()
    assert t0() > before
    before = t0()
    browser.drag(plot_x, plot_y, plot_x + 200, plot_y)
    browser.frame()
    assert t0() < before
    assert browser.evaluate(f"{tl}.frameTimes.length") > 0

    # Select the longest linked kernel by clicking it: its op and its launch are shown, with the arrow.
    kernel = expected.clickable_kernel()
    start = ns(kernel["ts"]) - expected.origin
    k = browser.evaluate(
        f"(() => {{ const t = {tl}, e = t.ev; const names = window.__report.names;"
        f" for (let k = 0; k < t.n; k++) if (names[e.name[k]] === {json.dumps(kernel['name'])} && Math.abs(e.ts[k] - {start}) < 1) return k;"
        " return -1; })()"
    )
    assert k >= 0, kernel
    browser.evaluate(f"{tl}.reveal({k})")
    browser.frame()
    x, y = browser.evaluate(f"[{tl}.xOf({tl}.ev.ts[{k}] + {tl}.ev.dur[{k}] / 2), {tl}.eventY({k})]")
    browser.click(left + x, top + y)
    browser.frame()
    assert browser.evaluate(f"{tl}.selected") == k, (x, y, rect, browser.evaluate(f"{tl}.view"), kernel)
    assert browser.evaluate("document.getElementById('sel-name').textContent") == kernel["name"]
    assert browser.evaluate("document.getElementById('sel-op').textContent") == expected.op_of(kernel)
    launch = expected.runtime[kernel["args"]["correlation"]]
    assert browser.evaluate("document.getElementById('sel-partner').textContent") == launch["name"]
    # Escape clears; the search box finds by name and Enter selects the first match.
    browser.key("Escape", "Escape", 27)
    browser.frame()
    assert browser.evaluate(f"{tl}.selected") == -1
    click_selector(browser, "#tl-search")
    browser.send("Input.insertText", text=kernel["name"])
    browser.key("Enter", "Enter", 13)
    browser.frame()
    matches = sum(1 for e in expected.device if e["name"] == kernel["name"])
    assert browser.evaluate(f"{tl}.matches.length") >= matches
    assert browser.evaluate("document.getElementById('sel-name').textContent") == kernel["name"]
    browser.key("Escape", "Escape", 27)


def check_memory(browser, expected: Expected) -> None:
    show_view(browser, "memory")
    if expected.memory_peak is None:
        assert "No [memory] events" in browser.evaluate("document.getElementById('memory-devices').textContent")
        return
    shown = browser.evaluate("Number(document.getElementById('memory-peak-0').dataset.bytes)")
    assert shown == expected.memory_peak


def check_critical_path(browser, trace: Path) -> None:
    """The overview's critical-path slot shows the summary's section (or says there is none)."""
    done = run_cli("summary", "--json", str(trace))
    assert done.returncode == 0, done.stderr
    cp = json.loads(done.stdout).get("critical_path")
    show_view(browser, "overview")
    state = browser.evaluate("document.getElementById('critical-path').dataset.state")
    if not cp:
        assert state == "empty"
        return
    assert state == "filled"
    items = browser.evaluate("[...document.querySelectorAll('#critical-path-items li .mono')].map(e => e.textContent)")
    heaviest = sorted(cp["top_ops"] + cp["top_kernels"], key=lambda r: -r["path_ns"])
    assert items == [r["name"] for r in heaviest][:6]
    assert cp["step"] in browser.evaluate("document.getElementById('critical-path').textContent")


def check_gap_link(browser, trace: Path) -> None:
    """'Look here first': clicking a gap's link opens the timeline on that gap (the summary's largest)."""
    done = run_cli("summary", "--json", str(trace))
    gap = json.loads(done.stdout)["idle_gaps"][0]
    show_view(browser, "overview")
    click_selector(browser, "#look-here li a.jump")
    assert browser.evaluate("window.__report.view") == "timeline"
    browser.wait_for("window.__timeline && window.__timeline.ready")
    browser.frame()
    t0, t1 = browser.evaluate("[window.__timeline.view.t0, window.__timeline.view.t1]")
    assert t0 < gap["start_ns"] and gap["end_ns"] < t1 and t1 - t0 < 2 * gap["duration_ns"]


def test_openreg_run(browser, artifacts, openreg_run, tmp_path):
    trace = next(openreg_run.glob("*.pt.trace.json"))
    expected = Expected(trace)
    page = openreg_run / "report.html"  # the demo's own report
    open_clean(browser, page)
    check_kernel_table(browser, expected)
    check_memory(browser, expected)
    assert expected.memory_peak is not None  # openreg's demo profiles memory
    check_critical_path(browser, trace)
    check_timeline(browser, expected)
    check_gap_link(browser, trace)
    screenshots(browser, artifacts, "openreg")
    assert browser.console_errors() == [] and browser.requests() == []


def test_cuda_trace(browser, artifacts, tmp_path):
    trace = SHARED / "cuda_alexnet.json.gz"
    expected = Expected(trace)
    page = make_report(tmp_path, trace)
    open_clean(browser, page)
    check_kernel_table(browser, expected)
    check_memory(browser, expected)
    check_critical_path(browser, trace)
    check_timeline(browser, expected)
    check_table_to_timeline(browser, expected)
    screenshots(browser, artifacts, "cuda_alexnet")
    assert browser.console_errors() == [] and browser.requests() == []


def test_two_ranks(browser, artifacts, two_rank_run, tmp_path):
    traces = sorted(two_rank_run.glob("*.pt.trace.json"))
    assert len(traces) == 2
    page = two_rank_run / "report.html"
    open_clean(browser, page, "ranks")
    ranks = browser.evaluate(
        "[...document.querySelectorAll('#rank-table tbody tr')].map(tr => Number(tr.children[0].textContent))"
    )
    assert sorted(ranks) == [read_trace(t)["distributedInfo"]["rank"] for t in traces] == [0, 1]
    # Who arrived last at each collective: the rank whose communication kernel started last, from the traces.
    starts = {}
    for t in traces:
        data = read_trace(t)
        rank = data["distributedInfo"]["rank"]
        for e in data["traceEvents"]:
            args = e.get("args", {})
            if e.get("cat") in DEVICE_CATS and "Seq" in args and "Collective name" in args:
                starts.setdefault((args.get("Process Group Name"), args["Seq"]), {})[rank] = ns(e["ts"])
    both = {k: v for k, v in starts.items() if len(v) == 2}
    assert both
    rows = browser.evaluate(
        "[...document.querySelectorAll('#longest-waits tbody tr')].map(tr => [...tr.children].map(td => td.textContent))"
    )
    assert rows
    for _collective, group, seq, last_rank, _wait in rows:
        arrivals = both[(group, int(seq))]
        assert int(last_rank) == max(arrivals, key=lambda r: (arrivals[r], r))
    screenshots(browser, artifacts, "two_ranks")
    # Each rank's own views: the selector reopens the page on rank 1's trace (its kernels, its timeline).
    other = Expected(traces[1])
    browser.evaluate(
        "(() => { const s = document.getElementById('trace-select'); s.value = '1';"
        " s.dispatchEvent(new Event('change')); })()"
    )
    browser.wait_for("window.__report && window.__report.ready === true && location.hash.includes('trace=1')")
    assert browser.console_errors() == []
    check_kernel_table(browser, other)
    check_timeline(browser, other)
    browser.screenshot(artifacts / "two_ranks-rank1-timeline.png")
    assert browser.console_errors() == [] and browser.requests() == []


def test_memory_snapshot(browser, artifacts, openreg_run, tmp_path):
    import pickle
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from test_memory_report import cuda_snapshot

    snap = tmp_path / "snapshot.pickle"
    snap.write_bytes(pickle.dumps(cuda_snapshot(), protocol=4))
    expected = json.loads(run_cli("memory", str(snap), "--json").stdout)
    page = make_report(tmp_path, next(openreg_run.glob("*.pt.trace.json")), extra=("--memory", str(snap)))
    open_clean(browser, page, "memory")
    for device in expected:
        rows = browser.evaluate(
            f"[...document.querySelectorAll('#snapshot-sites-{device['device']} tbody tr')]"
            ".map(tr => [tr.children[0].textContent, Number(tr.children[1].title)])"
        )
        assert rows == [[g["site"], g["bytes"]] for g in device["live_at_peak"]]
    browser.evaluate("document.getElementById('snapshot').scrollIntoView()")
    browser.frame()
    browser.screenshot(artifacts / "openreg-memory-snapshot.png")
    assert browser.console_errors() == [] and browser.requests() == []


def test_what_a_reader_sees_without_reading_the_code(browser, openreg_run, tmp_path):
    """Details a reader trips over: every stream's bar labelled (MTIA's 12), memory curves in a unit that fits
    their size, how many live allocations the table leaves out, profiling cycles not called ranks, and the
    browser's Back going back a view."""
    mtia = SHARED / "mtia_inference.json.gz"
    open_clean(browser, make_report(tmp_path, mtia, name="mtia.html"))
    labels, ticks = browser.evaluate(
        "(() => { const c = Chart.getChart('streams-chart'); return [c.data.labels.length, c.scales.y.ticks.length]; })()"
    )
    assert labels == ticks == 12

    open_clean(browser, openreg_run / "report.html", "memory")
    charts = browser.evaluate(
        "[...document.querySelectorAll('[id^=memory-peak-]')].map(s => { const c = Chart.getChart('memory-chart-'"
        " + s.id.split('-').pop()); return [Number(s.dataset.bytes), c.options.scales.y.title.text,"
        " Math.max(...c.data.datasets.flatMap(d => d.data.map(p => p.y)))]; })"
    )
    assert charts and any(peak < 1024**2 for peak, _, _ in charts)  # the host's curve is small
    for peak, unit, highest in charts:  # the curve's highest point reads between 1 and 1024 of its unit
        assert 1 <= highest < 1024 and unit in ("B", "KiB", "MiB", "GiB"), (peak, unit, highest)
    heading = browser.evaluate("document.querySelector('#memory-devices h3').textContent")
    rows = browser.evaluate("document.querySelector('#memory-devices tbody').children.length")
    live = int(heading.split(": ")[1].split(" ")[0])
    assert heading == f"Live at the peak: {live} allocations" + (f", the largest {rows}:" if rows < live else ":")

    # Two traces of one process (no distributedInfo): two cycles, not ranks 0 and 1.
    cycles = tmp_path / "cycles"
    cycles.mkdir()
    for name in ("a.json.gz", "b.json.gz"):
        (cycles / name).write_bytes((SHARED / "rocm_mi250_train.json.gz").read_bytes())
    open_clean(browser, make_report(tmp_path, cycles, name="cycles.html"), "ranks")
    assert browser.evaluate("Chart.getChart('ranks-chart').data.labels") == ["a.json.gz", "b.json.gz"]
    assert browser.evaluate(
        "[...document.querySelectorAll('#rank-table tbody tr')].map(tr => tr.children[0].textContent)"
    ) == ["–", "–"]

    show_view(browser, "overview")
    show_view(browser, "tables")
    browser.evaluate("history.back()")
    browser.wait_for("window.__report.view === 'overview'")
    assert browser.evaluate("location.hash") == "#overview"
    assert browser.console_errors() == [] and browser.requests() == []
