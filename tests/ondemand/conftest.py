"""Fixtures of the on-demand tests: the daemon's end of Kineto's protocol, and jobs in daemon mode.

The daemon's socket name is one per machine (an abstract unix socket name), so
test runs that overlap take turns through a lock file; a real dynolog daemon
on the machine fails the fixture with a message saying so.
"""

from __future__ import annotations

import fcntl
import time
from pathlib import Path

import pytest
from dynolog_daemon import DaemonEnd
from ondemand_job import Job

LOCK_FILE = Path("/tmp/openreg-ondemand-tests.lock")
LOCK_WAIT_S = 900.0


@pytest.fixture(scope="session", autouse=True)
def _plugin_built():
    plugin = Path(__file__).resolve().parents[2] / "torch_openreg" / "lib" / "libopenreg_profiler.so"
    if not plugin.exists():
        pytest.fail(f"{plugin} is not built")


@pytest.fixture
def daemon():
    with open(LOCK_FILE, "a") as lock:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another test run held {LOCK_FILE} for {LOCK_WAIT_S:.0f} s")
                time.sleep(0.5)
        with DaemonEnd() as end:
            yield end
            assert not end.errors, end.errors


@pytest.fixture
def start_job(tmp_path):
    """Starts workload.py in daemon mode (extra args for it); every job is killed at the end of the test."""
    jobs: list[Job] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Job:
        job = Job(tmp_path, *args, env=env)
        jobs.append(job)
        return job

    yield start
    for job in jobs:
        job.close()
