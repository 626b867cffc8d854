#!/usr/bin/env python3
"""The trace tools against HolisticTraceAnalysis, side by side in one run.

    python benchmarks/trace_tools_bench.py [--events 1000000] [--trace FILE ...] [--repeat 1]

For each trace (by default the largest in ../shared/traces and a synthetic
training-like trace of --events events, see trace/python/openreg_trace/synthetic.py)
it runs, each in a fresh process, as a user would:

  ours: python -m torch_openreg summary --json TRACE   (kernel classes,
        temporal and idle breakdowns, launches, communication, memory...)
  HTA:  TraceAnalysis(trace_dir) + get_temporal_breakdown +
        get_gpu_kernel_breakdown + get_idle_time_breakdown

and prints wall time and peak RSS of each process (best of --repeat), and the
ratios. Also times `check` and the library alone (no interpreter start).
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# This process imports nothing heavy: a child's peak RSS starts from what it
# inherits at fork, so the children must be measured from a small parent.
LIBRARY_SCRIPT = """
import sys, time
sys.path.insert(0, sys.argv[1])
from openreg_trace import library_path, open_trace
best = float("inf")
for _ in range(int(sys.argv[3])):
    start = time.perf_counter()
    with open_trace(sys.argv[2]) as t:
        t.summary()
    best = min(best, time.perf_counter() - start)
print(library_path(), best)
"""

WORKLOAD_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from openreg_trace.synthetic import write_workload
print(write_workload(sys.argv[2], int(sys.argv[3])))
"""

HTA_SCRIPT = """
import logging, sys, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = TraceAnalysis(trace_dir=sys.argv[1])
t.get_temporal_breakdown(visualize=False)
t.get_gpu_kernel_breakdown(visualize=False)
t.get_idle_time_breakdown(visualize=False)
"""


def measure(cmd: list[str], ok_codes: tuple[int, ...] = (0,)) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system: unlike wall time, not inflated
    by other processes on a shared machine) and peak RSS (MB) of one child."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in ok_codes:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def best(repeat: int, cmd: list[str], ok_codes: tuple[int, ...] = (0,)) -> tuple[float, float, float]:
    runs = [measure(cmd, ok_codes) for _ in range(repeat)]
    return tuple(min(r[k] for r in runs) for k in range(3))


def in_process(path: Path, repeat: int) -> tuple[str, float]:
    """The library alone (no interpreter start): open + summary, in seconds."""
    out = subprocess.run(
        [sys.executable, "-c", LIBRARY_SCRIPT, str(REPO), str(path), str(repeat)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return out[0], float(out[1])


def compare(path: Path, label: str, repeat: int) -> None:
    # HTA reads a folder of *.json / *.gz traces.
    folder = Path(tempfile.mkdtemp(prefix="hta_bench_"))
    try:
        os.symlink(path.resolve(), folder / path.name)
        ours_s, ours_cpu, ours_mb = best(
            repeat, [sys.executable, "-m", "torch_openreg", "summary", "--json", str(path)]
        )
        # check exits 1 when a check fails (the MTIA trace's do).
        check_s, check_cpu, check_mb = best(repeat, [sys.executable, "-m", "torch_openreg", "check", str(path)], (0, 1))
        hta_s, hta_cpu, hta_mb = best(repeat, [sys.executable, "-c", HTA_SCRIPT, str(folder)])
    finally:
        shutil.rmtree(folder)
    library, lib_s = in_process(path, repeat)
    size = path.stat().st_size / 1e6
    print(f"\n{label}: {path.name}, {size:.1f} MB on disk (library {library})")
    print(f"  {'':<44}{'wall s':>9}{'CPU s':>9}{'peak MB':>9}")
    print(f"  {'python -m torch_openreg summary --json':<44}{ours_s:>9.2f}{ours_cpu:>9.2f}{ours_mb:>9.0f}")
    print(f"  {'python -m torch_openreg check':<44}{check_s:>9.2f}{check_cpu:>9.2f}{check_mb:>9.0f}")
    print(f"  {'HTA load + temporal, kernel, idle breakdowns':<44}{hta_s:>9.2f}{hta_cpu:>9.2f}{hta_mb:>9.0f}")
    print(f"  {'libopenreg_trace open + summary (in process)':<44}{lib_s:>9.2f}")
    print(
        f"  summary vs HTA: {hta_s / ours_s:.1f}x faster in wall time, {hta_cpu / ours_cpu:.1f}x in CPU time, "
        f"{ours_mb / hta_mb:.2f} of its peak memory"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="synthetic trace size (0: none)")
    parser.add_argument("--trace", action="append", type=Path, help="a real trace (default: largest shared one)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    print(f"python {sys.version.split()[0]}; {os.cpu_count()} CPUs visible")
    traces = args.trace
    if traces is None:
        shared = next(
            (p for p in (REPO.parent / "shared" / "traces", REPO.parent.parent / "shared" / "traces") if p.is_dir()),
            None,
        )
        traces = [max(shared.glob("*.json.gz"), key=lambda p: p.stat().st_size)] if shared else []
    for path in traces:
        compare(path, "real trace", args.repeat)
    if args.events:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "synthetic.json"
            n = int(
                subprocess.run(
                    [sys.executable, "-c", WORKLOAD_SCRIPT, str(REPO), str(path), str(args.events)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            compare(path, f"synthetic trace ({n:,} events)", args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
