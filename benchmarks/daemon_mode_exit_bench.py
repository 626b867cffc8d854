"""What daemon mode costs a job when no daemon runs: openreg against torch alone.

`KINETO_USE_DAEMON=1` makes Kineto register its daemon config loader at start; with no dynolog listening, the
job's exit waits for the loader's IPC send to fail. Is that openreg's doing? Four short jobs, each in its own
process, taking turns round by round so that every variant sees the same machine:

    torch           TORCH_DEVICE_BACKEND_AUTOLOAD=0: torch alone (its CPU build), a CPU op
    torch+daemon    the same with KINETO_USE_DAEMON=1
    openreg         torch with openreg loaded, an op on the device and a synchronize
    openreg+daemon  the same with KINETO_USE_DAEMON=1

Each job's wall time from start to exit, and the lines it wrote to stderr (the noise). Prints the medians, the
daemon-mode delay of each (daemon minus plain), and the stderr lines seen.

    python benchmarks/daemon_mode_exit_bench.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB = {
    False: "import torch; x = torch.ones(4) + 1",
    True: "import torch; x = torch.ones(4, device='openreg') + 1; torch.openreg.synchronize()",
}


def run_job(openreg: bool, daemon: bool, timeout: float = 120.0) -> tuple[float, list[str]]:
    env = dict(os.environ, PYTHONPATH=str(REPO), TORCH_DEVICE_BACKEND_AUTOLOAD="1" if openreg else "0")
    env.pop("KINETO_USE_DAEMON", None)
    if daemon:
        env["KINETO_USE_DAEMON"] = "1"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", JOB[openreg]], env=env, capture_output=True, text=True, timeout=timeout, cwd="/"
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"job failed (openreg={openreg}, daemon={daemon}):\n{done.stderr}")
    return wall, [line for line in done.stderr.splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    variants = [
        ("torch", False, False),
        ("torch+daemon", False, True),
        ("openreg", True, False),
        ("openreg+daemon", True, True),
    ]
    walls: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    noise: dict[str, set[str]] = {name: set() for name, _, _ in variants}
    run_job(True, False)  # warm the file cache once
    for _ in range(args.rounds):
        for name, openreg, daemon in variants:
            wall, lines = run_job(openreg, daemon)
            walls[name].append(wall)
            # The message without its timestamp and pid, so that rounds collapse.
            noise[name].update(line.split("] ", 1)[-1] for line in lines)
    median = {name: statistics.median(v) for name, v in walls.items()}
    print(f"{'job':<16} {'median s':>9} {'min s':>7} {'max s':>7}  stderr lines (distinct)")
    for name, _, _ in variants:
        print(f"{name:<16} {median[name]:9.2f} {min(walls[name]):7.2f} {max(walls[name]):7.2f}  {len(noise[name])}")
    for base in ("torch", "openreg"):
        print(f"daemon mode adds {median[base + '+daemon'] - median[base]:.2f} s to {base}")
    for name in ("torch+daemon", "openreg+daemon"):
        for line in sorted(noise[name]):
            print(f"  {name}: {line}")


if __name__ == "__main__":
    main()
