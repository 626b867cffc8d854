"""Allocation + free cost with memory history off, "state" and "all", against the allocator before the change.

Each measurement is a fresh interpreter that imports ``torch_openreg`` from a given source tree and times
``torch.empty(n, device="openreg")`` followed by its free (the block comes back from the cache: no device
allocation), in the calling thread's CPU time. ``--baseline`` names a tree built before the history existed
(e.g. a checkout of the previous commit); it runs with history off only. Rounds interleave the
configurations so that all see the same machine; the median over rounds is printed with the best round,
and each configuration's ratio to the baseline. Nothing is asserted.

    python benchmarks/memory_history_bench.py --baseline /path/to/old/tree [--rounds 9] [--calls 20000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

_CHILD = """
import time
import torch
import torch_openreg
assert torch_openreg.__file__.startswith({tree!r}), torch_openreg.__file__
mode, calls, numel = {mode!r}, {calls}, {numel}
if mode != "none":
    enabled = None if mode == "off" else mode
    torch.openreg.memory._record_memory_history(enabled=enabled, stacks="python", max_entries=100_000)
torch.empty(numel, device="openreg")  # the cache holds the block from here on
empty = torch.empty
for _ in range(calls // 10):  # warm up
    empty(numel, device="openreg")
start = time.thread_time_ns()
for _ in range(calls):
    empty(numel, device="openreg")
print((time.thread_time_ns() - start) / calls)
"""


def measure(tree: Path, mode: str, calls: int, numel: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    code = textwrap.dedent(_CHILD.format(tree=str(tree), mode=mode, calls=calls, numel=numel))
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{tree} ({mode}) failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="tree with the allocator before the change")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--numel", type=int, default=1024, help="float32 elements per allocation (default 1024)")
    args = parser.parse_args()
    configs = [("before the change", args.baseline, "none"), ("history off", HERE, "off")]
    configs += [('history "state"', HERE, "state"), ('history "all"', HERE, "all")]
    times: dict[str, list[float]] = {name: [] for name, _, _ in configs}
    for _ in range(args.rounds):
        for name, tree, mode in configs:
            times[name].append(measure(tree, mode, args.calls, args.numel))
    base = statistics.median(times[configs[0][0]])
    print(f"ns per torch.empty({args.numel}) + free, thread CPU time, median of {args.rounds} rounds [best]:")
    for name, _, _ in configs:
        median = statistics.median(times[name])
        print(f"  {name:<18} {median:8.0f} [{min(times[name]):6.0f}]   x{median / base:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
