"""The ranks of a job on this machine, as torchrun would start them: one process each, over 127.0.0.1.

Used by ``demo --ranks``, the distributed tests and the distributed benchmarks. Each rank runs in a
session of its own, so that leaving the ``LocalRanks`` block kills whatever a rank left running (its
whole process group), whatever happened in the block. Imports nothing of torch.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from typing import Any

# How long to wait for a killed rank to be reaped.
_REAP_S = 10.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (asked of the kernel)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rank_environment(rank: int, world: int, port: int, **extra: str) -> dict[str, str]:
    """This process's environment plus torchrun's variables for one rank, Gloo kept on the loopback."""
    return dict(
        os.environ,
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        GLOO_SOCKET_IFNAME="lo",
        PYTHONUNBUFFERED="1",
        **extra,
    )


class LocalRanks:
    """Spawns rank processes; on leaving the block, kills and reaps every one still running."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> LocalRanks:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.kill_all()

    def spawn(self, argv: list[str], env: dict[str, str], **popen: Any) -> subprocess.Popen:
        proc = subprocess.Popen(argv, env=env, start_new_session=True, **popen)
        self.procs.append(proc)
        return proc

    def wait_all(self, timeout_s: float) -> bool:
        """Waits for every rank to exit, at most timeout_s in all; False if one is still running then."""
        deadline = time.monotonic() + timeout_s
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        return True

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=_REAP_S)
