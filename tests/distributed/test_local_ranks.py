"""LocalRanks leaves no rank behind, however its launcher ends.

A launcher (a small Python program here, as `demo --ranks` is) spawns two ranks that would sleep for
ten minutes and prints their pids; the test then ends the launcher as a user, a scheduler or the
kernel would, and checks that the ranks are gone within a bound. No torch: only the process handling.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GONE_S = 30.0  # a killed rank is reaped at once; the bound is for a loaded machine

RANK = textwrap.dedent(
    """
    import sys, time
    from torch_openreg._local_ranks import exit_with_launcher
    if sys.argv[1] == "guarded":
        exit_with_launcher()
    print("ready", flush=True)
    time.sleep(600)
    """
)

LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from torch_openreg._local_ranks import LocalRanks
    with LocalRanks() as ranks:
        procs = [ranks.spawn([sys.executable, "-c", sys.argv[1], sys.argv[2]], dict(os.environ),
                             stdout=subprocess.PIPE, text=True) for _ in range(2)]
        for proc in procs:
            assert proc.stdout.readline() == "ready\\n"
        print(" ".join(str(p.pid) for p in procs), flush=True)
        time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    """Running, not a zombie awaiting its parent's wait."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _start(mode: str) -> tuple[subprocess.Popen, list[int]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, RANK, mode], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    line = launcher.stdout.readline()
    assert line, f"the launcher printed no pids (exit {launcher.wait(timeout=30)})"
    return launcher, [int(pid) for pid in line.split()]


def _wait_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + GONE_S
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


@pytest.mark.parametrize(
    "mode, sig, code",
    [
        ("plain", signal.SIGTERM, 128 + signal.SIGTERM),  # a scheduler's or `kill`'s: the block is left
        ("plain", signal.SIGHUP, 128 + signal.SIGHUP),  # the terminal closed
        ("guarded", signal.SIGKILL, -signal.SIGKILL),  # no handler runs: the kernel kills the ranks
    ],
    ids=["sigterm", "sighup", "sigkill"],
)
def test_ranks_end_with_their_launcher(mode, sig, code):
    launcher, pids = _start(mode)
    try:
        assert all(_alive(pid) for pid in pids)
        launcher.send_signal(sig)
        assert launcher.wait(timeout=GONE_S) == code
        assert _wait_gone(pids) == [], "ranks left running"
    finally:
        for pid in [launcher.pid, *pids]:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        launcher.wait(timeout=GONE_S)
