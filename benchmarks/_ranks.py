"""Runs a benchmark script on 2 local ranks: ``python BENCH.py`` re-runs itself per rank.

The parent picks a free 127.0.0.1 port, spawns the ranks with the torchrun
environment (MASTER_ADDR/PORT, RANK, WORLD_SIZE; Gloo on the loopback), relays
rank 0's output, and kills every rank on the way out.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

RANK_ENV = "OPENREG_BENCH_RANK"


def is_rank() -> bool:
    return RANK_ENV in os.environ


def spawn(script: str, argv: list[str], world: int = 2, timeout_s: float = 1800.0) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = []
    try:
        for rank in range(world):
            env = dict(
                os.environ,
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
                RANK=str(rank),
                WORLD_SIZE=str(world),
                GLOO_SOCKET_IFNAME="lo",
                **{RANK_ENV: "1"},
            )
            procs.append(
                subprocess.Popen(
                    [sys.executable, script, *argv],
                    env=env,
                    start_new_session=True,
                    stdout=None if rank == 0 else subprocess.DEVNULL,
                )
            )
        codes = [p.wait(timeout=timeout_s) for p in procs]
        return max(codes, key=abs)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
