#!/usr/bin/env python3
"""Speed of the trace tools on a synthetic Kineto-layout trace.

    python benchmarks/trace_tools_bench.py [--events 1000000] [--gzip] [--repeat 3]

Writes a training-like trace of about --events events (device lanes, arrows,
memory events; see torch_openreg/trace/synthetic.py), then times opening
(streamed parse + indexing) plus summary, and opening plus check, through
the same library the command line uses. Prints events/s and MB/s (of the
uncompressed JSON) for the best of --repeat runs. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torch_openreg.trace import library_path, open_trace  # noqa: E402
from torch_openreg.trace.synthetic import write_workload  # noqa: E402


def best_of(repeat: int, fn) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gzip", action="store_true", help="also time the .json.gz form")
    parser.add_argument("--keep", help="copy the generated trace here")
    args = parser.parse_args()

    print(f"library: {library_path()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.json"
        start = time.perf_counter()
        events = write_workload(path, args.events)
        size = path.stat().st_size
        print(f"trace: {events:,} events, {size / 1e6:.1f} MB (written in {time.perf_counter() - start:.1f} s)")
        files = [("json", path)]
        if args.gzip:
            gz = Path(tmp) / "bench.json.gz"
            with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst)
            print(f"gzip: {gz.stat().st_size / 1e6:.1f} MB")
            files.append(("json.gz", gz))
        if args.keep:
            shutil.copy(path, args.keep)

        def summary(p):
            with open_trace(p) as t:
                t.summary()

        def check(p):
            with open_trace(p) as t:
                assert t.check()["ok"]

        def parse(p):
            with open_trace(p):
                pass

        print(f"{'task':<26}{'seconds':>9}{'M events/s':>12}{'MB/s':>9}")
        for label, p in files:
            for name, fn in (("open", parse), ("open + summary", summary), ("open + check", check)):
                seconds = best_of(args.repeat, lambda: fn(p))
                print(f"{name + ' (' + label + ')':<26}{seconds:>9.3f}{events / seconds / 1e6:>12.2f}"
                      f"{size / seconds / 1e6:>9.0f}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak_mb:.0f} MB")
    print(f"machine: {os.cpu_count()} CPUs visible")
    return 0


if __name__ == "__main__":
    sys.exit(main())
