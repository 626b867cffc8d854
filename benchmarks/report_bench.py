"""The HTML report on a large trace: how fast it is written (against HolisticTraceAnalysis loading the same
trace), how large it is, how soon the page is usable in headless Chromium and how long a zoom or pan frame
takes there.

    python benchmarks/report_bench.py --events 1000000            # synthetic openreg-style trace
    python benchmarks/report_bench.py --trace T.json [--no-hta]

Each tool runs in a fresh process, as a user runs it; wall time, CPU time (user + system of the child) and
peak RSS come from wait4. In the browser (Debian's chromium, driven over the DevTools protocol by
tests/report/report_browser.py): the page's own performance.now() marks (navigation start = 0) when the overview is
drawn and when the whole document is read (every view usable), the time to build the timeline, then the
draw time of each animation frame (performance.now() around the draw, inside requestAnimationFrame) while
wheel zooms and mouse drags arrive through Input.dispatchMouseEvent. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "report"))

HTA_LOAD = """
import logging, sys, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1])
"""


def measure(cmd: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of a child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{cmd} failed: {err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def browser_figures(page: Path, loads: int, gestures: int) -> dict[str, float]:
    from report_browser import Browser

    out: dict[str, float] = {}
    with Browser() as b:
        overview, ready = [], []
        for _ in range(loads):
            b.open(page)
            t = b.evaluate("window.__report.timing")
            overview.append(t["overview"])
            ready.append(t["ready"])
        out["overview_ms"] = statistics.median(overview)
        out["ready_ms"] = statistics.median(ready)
        start = b.evaluate("performance.now()")
        b.evaluate("document.querySelector('nav button[data-view=timeline]').click()")
        b.wait_for("window.__timeline && window.__timeline.ready")
        b.frame()
        out["timeline_build_ms"] = b.evaluate("performance.now()") - start
        left, top, width, height = b.evaluate(
            "(() => { const r = document.getElementById('tl-canvas').getBoundingClientRect();"
            " return [r.left, r.top, r.width, r.height]; })()"
        )
        x, y = left + width * 0.6, top + height * 0.4
        b.evaluate("window.__timeline.frameTimes.length = 0")
        for i in range(gestures):  # zoom in step by step to ~1e-4 of the trace, panning on the way, then back out
            b.wheel(x, y, -250)
            b.frame()
            if i % 3 == 0:
                b.drag(x, y, x - 150, y + 20, steps=4)
                b.frame()
        for _ in range(gestures):
            b.wheel(x, y, 250)
            b.frame()
            b.drag(x, y, x + 80, y, steps=2)
            b.frame()
        frames = sorted(b.evaluate("window.__timeline.frameTimes"))
        out["frames"] = len(frames)
        out["frame_median_ms"] = statistics.median(frames)
        out["frame_p95_ms"] = frames[int(0.95 * (len(frames) - 1))]
        out["frame_max_ms"] = frames[-1]
        errors = b.console_errors() + b.requests()
        if errors:
            raise RuntimeError(f"the page logged errors or asked for the network: {errors[:5]}")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000, help="events of the synthetic trace (default 1e6)")
    p.add_argument("--trace", type=Path, help="use this trace instead of a synthetic one")
    p.add_argument("--no-hta", action="store_true", help="skip HTA (minutes on a million events)")
    p.add_argument("--loads", type=int, default=3, help="page loads in the browser (median reported)")
    p.add_argument("--gestures", type=int, default=30, help="wheel steps in and out")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        tmp = Path(tmp)
        if args.trace:
            trace = args.trace.resolve()
        else:
            trace = tmp / "traces" / "synthetic.pt.trace.json"
            trace.parent.mkdir()
            # In a child: a child's peak RSS counts what it inherits at fork, so the parent imports nothing heavy.
            gen = "import sys; from openreg_trace.synthetic import write_workload as w; print(w(sys.argv[1], int(sys.argv[2])))"
            events = int(subprocess.check_output([sys.executable, "-c", gen, str(trace), str(args.events)], cwd=REPO))
            print(f"synthetic trace: {events:,} events, {trace.stat().st_size / 1e6:.1f} MB")
        page = tmp / "report.html"
        wall, cpu, rss = measure([sys.executable, "-m", "torch_openreg", "report", str(trace), "-o", str(page)])
        size, trace_size = page.stat().st_size, trace.stat().st_size
        print(f"report:    wall {wall:7.2f} s  CPU {cpu:7.2f} s  peak RSS {rss:6.0f} MB")
        print(f"page:      {size / 1e6:.1f} MB = 1/{trace_size / size:.1f} of the trace ({trace_size / 1e6:.1f} MB)")
        if not args.no_hta:
            hta_dir = tmp / "hta"
            hta_dir.mkdir()
            (hta_dir / trace.name).symlink_to(trace)
            h_wall, h_cpu, h_rss = measure([sys.executable, "-c", HTA_LOAD, str(hta_dir)])
            print(f"HTA load:  wall {h_wall:7.2f} s  CPU {h_cpu:7.2f} s  peak RSS {h_rss:6.0f} MB")
            print(f"report vs HTA load: {h_wall / wall:.1f}x faster (wall), {h_cpu / cpu:.1f}x (CPU)")
        b = browser_figures(page, args.loads, args.gestures)
        print(
            f"browser:   overview drawn {b['overview_ms']:.0f} ms, whole page read {b['ready_ms']:.0f} ms after "
            f"navigation start (median of {args.loads}); timeline built in {b['timeline_build_ms']:.0f} ms"
        )
        print(
            f"frames:    {b['frames']} zoom/pan frames: draw median {b['frame_median_ms']:.1f} ms, "
            f"p95 {b['frame_p95_ms']:.1f} ms, max {b['frame_max_ms']:.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
