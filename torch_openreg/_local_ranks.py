"""The ranks of a job on this machine, as torchrun would start them: one process each, over 127.0.0.1.

Used by ``demo --ranks``, the distributed tests and the distributed benchmarks. Each rank runs in a
session of its own, so that leaving the ``LocalRanks`` block kills whatever a rank left running (its
whole process group), whatever happened in the block. A SIGTERM or SIGHUP to the launcher leaves the
block too, and a rank that calls ``exit_with_launcher()`` dies with its launcher even when the launcher
is killed outright. Imports nothing of torch.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

# How long to wait for a killed rank to be reaped.
_REAP_S = 10.0
# The launcher's pid, in a rank's environment (exit_with_launcher).
_LAUNCHER_ENV = "OPENREG_LAUNCHER_PID"
# Signals that end a launcher by default without unwinding: LocalRanks turns them into SystemExit.
_ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


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
        self._previous_handlers: dict[int, Any] = {}

    def __enter__(self) -> LocalRanks:
        # The ranks are in sessions of their own (a terminal's Ctrl-C reaches the launcher only): a SIGTERM or
        # SIGHUP would end the launcher without leaving this block, and leave the ranks running.
        if threading.current_thread() is threading.main_thread():
            for sig in _ENDING_SIGNALS:
                self._previous_handlers[sig] = signal.signal(sig, _exit_on_signal)
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.kill_all()
        finally:
            for sig, handler in self._previous_handlers.items():
                signal.signal(sig, handler)
            self._previous_handlers.clear()

    def spawn(self, argv: list[str], env: dict[str, str], **popen: Any) -> subprocess.Popen:
        env = dict(env, **{_LAUNCHER_ENV: str(os.getpid())})
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


def _exit_on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def exit_with_launcher() -> None:
    """In a rank spawned by LocalRanks: the kernel kills this rank when its launcher dies, however it dies.

    A launcher killed with SIGKILL cannot kill its ranks, which would train on, orphaned. Linux only
    (prctl's PR_SET_PDEATHSIG); elsewhere, and outside a LocalRanks rank, it does nothing. A rank whose
    launcher is already gone exits at once.
    """
    launcher = os.environ.get(_LAUNCHER_ENV)
    if not launcher or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != int(launcher):  # it died before the prctl
        os._exit(1)
