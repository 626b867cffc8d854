"""Runs a benchmark script on 2 local ranks: ``python BENCH.py`` re-runs itself per rank.

The parent picks a free 127.0.0.1 port, spawns the ranks with the torchrun
environment (MASTER_ADDR/PORT, RANK, WORLD_SIZE; Gloo on the loopback), relays
rank 0's output, and kills every rank on the way out.
"""

from __future__ import annotations

import os
import subprocess
import sys

from torch_openreg._local_ranks import LocalRanks, free_port, rank_environment

RANK_ENV = "OPENREG_BENCH_RANK"


def is_rank() -> bool:
    return RANK_ENV in os.environ


def spawn(script: str, argv: list[str], world: int = 2, timeout_s: float = 1800.0) -> int:
    port = free_port()
    with LocalRanks() as ranks:
        for rank in range(world):
            env = rank_environment(rank, world, port, **{RANK_ENV: "1"})
            ranks.spawn([sys.executable, script, *argv], env, stdout=None if rank == 0 else subprocess.DEVNULL)
        if not ranks.wait_all(timeout_s):
            print(f"error: the ranks did not finish within {timeout_s:.0f} s", file=sys.stderr)
            return 1
        return max((p.returncode for p in ranks.procs), key=abs)
