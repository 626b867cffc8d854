"""``demo --on-demand``: the demo's training with no torch.profiler in it, for a trace asked for from outside.

The run is in Kineto's daemon mode (``KINETO_USE_DAEMON=1``): Kineto registers
the process with the Dynolog daemon, and ``dyno gputrace`` asks it for a
trace, which Kineto writes where the request says (``--log-file``, with the
pid added). Nothing in the training loop knows about it: it is the loop of a
job that runs as usual. With ``--ranks``, the demo starts the ranks in daemon
mode itself.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from .progress import ProgressBar

DAEMON_MODE_ENV = "KINETO_USE_DAEMON"
# Long enough to ask for a trace by hand while it trains.
STEPS = 300


def in_daemon_mode() -> bool:
    """Whether Kineto runs in daemon mode in this process (it reads the variable when torch loads)."""
    return os.environ.get(DAEMON_MODE_ENV) is not None


def daemon_mode_missing() -> str:
    return (
        f"--on-demand needs Kineto's daemon mode, which Kineto sets up when torch loads: start the demo with "
        f"{DAEMON_MODE_ENV}=1 in its environment"
    )


def request_hint(pids: list[int], out: TextIO) -> None:
    """How to ask for a trace of these processes (a running dynolog daemon answers `dyno`)."""
    listed = ",".join(str(pid) for pid in pids)
    print(
        f"no torch.profiler in this run; ask for a trace from outside (dynolog running, installed from its own "
        f"instructions):\n  dyno gputrace --pids {listed} --iterations 5 --profile-start-iteration-roundup 10 "
        f"--log-file /tmp/openreg_ondemand.json\nKineto writes /tmp/openreg_ondemand_<pid>.json in each process "
        "(python -m torch_openreg summary / critical-path read them)",
        file=out,
    )
    out.flush()


def train(step: Any, steps: int, err: TextIO | None = None) -> list[float]:
    """`steps` calls of step() (one training step, returning the loss), with a progress bar; the losses."""
    losses: list[float] = []
    with ProgressBar(steps, "training", stream=err or sys.stderr) as bar:
        for n in range(steps):
            losses.append(step())
            bar.update(n + 1, note=f"loss {losses[-1]:.3f}")
    return losses
