"""A traced job for the on-demand tests: workload.py in daemon mode, and what its traces hold.

The job runs with ``KINETO_USE_DAEMON=1`` (Kineto's own client, inside
libtorch, registers with the daemon and polls it) and a Kineto base config
that polls every second, so that a request is taken within a second or two.
Every wait is bounded; the job runs in a session of its own and is killed
with it, whatever happened.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workload.py"
# Kineto's base config for the job (KINETO_CONFIG): how often it asks the daemon for a request.
KINETO_BASE_CONFIG = "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n"
STARTUP_S = 180.0  # import torch and the backend on a loaded machine
WAIT_S = 120.0


def daemon_mode_environment(folder: Path, **extra: str) -> dict[str, str]:
    """This environment in Kineto's daemon mode, polling every second, over abstract sockets."""
    config = folder / "kineto.conf"
    config.write_text(KINETO_BASE_CONFIG)
    env = dict(os.environ, KINETO_USE_DAEMON="1", KINETO_CONFIG=str(config), PYTHONUNBUFFERED="1", **extra)
    env.pop("KINETO_IPC_SOCKET_DIR", None)  # Kineto would use file sockets instead of the abstract names
    return env


class Job:
    """workload.py started in daemon mode; its stdout lines kept with the time they came."""

    def __init__(self, folder: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.stderr_path = folder / "job.stderr"
        self._stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKLOAD), *args],
            env=env or daemon_mode_environment(folder),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            start_new_session=True,
        )
        self.lines: list[tuple[float, str]] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self.pid = int(self.wait_line(lambda line: line.startswith("ready "), STARTUP_S).split()[1])

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append((time.monotonic(), line.strip()))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_line(self, predicate, timeout_s: float = WAIT_S, after: float = 0.0) -> str:
        """The first line (at or after monotonic time `after`) for which predicate holds; raises if none comes."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for at, line in self.lines:
                    if at >= after and predicate(line):
                        return line
                if self.proc.poll() is not None and not self._reading():
                    raise AssertionError(f"the job exited ({self.proc.returncode}):\n{self.stderr()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no such line from the job within {timeout_s:.0f} s; last: {self.lines[-3:]}")
                self._changed.wait(min(left, 0.5))

    def _reading(self) -> bool:
        return not self.proc.stdout.closed and self.proc.poll() is None

    def steps(self) -> int:
        """The steps the job has reported so far."""
        with self._changed:
            return sum(1 for _, line in self.lines if line.startswith("step "))

    def wait_steps(self, count: int) -> None:
        """Waits until the job has done `count` more steps than now."""
        target = self.steps() + count
        self.wait_line(lambda line: self.steps() >= target)

    def send(self, command: str) -> float:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return time.monotonic()

    def profile(self, seconds: float, path: Path) -> int:
        """Runs whole steps under torch.profiler.profile for about `seconds`; the number of steps."""
        sent = self.send(f"profile {seconds} {path}")
        line = self.wait_line(lambda line: line.startswith(f"profiled {path} "), after=sent)
        return int(line.split()[-1])

    def stop(self, timeout_s: float = WAIT_S) -> int:
        """Asks the job to exit; its exit status (negative: the signal that killed it)."""
        try:
            self.send("stop")
        except (BrokenPipeError, OSError):
            pass
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)

    def close(self) -> None:
        self.kill()
        self._stderr.close()

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")


def trace_path(log_file: Path, pid: int) -> Path:
    """Where Kineto writes an on-demand trace for ACTIVITIES_LOG_FILE=log_file: it adds _<pid> before .json."""
    return log_file.with_name(log_file.name.replace(".json", f"_{pid}.json"))


def wait_until_configured(trace: Path, timeout_s: float = WAIT_S) -> None:
    """Waits until Kineto has configured the on-demand trace `trace` (the plugin's session is made then).

    Kineto opens the trace's temporary file (<trace>.tmp) as it configures a
    request: for an iteration-based one, in the step it starts collecting.
    """
    deadline = time.monotonic() + timeout_s
    temporary = trace.with_name(trace.name + ".tmp")
    while not temporary.exists() and not trace.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"Kineto did not configure {trace} within {timeout_s:.0f} s")
        time.sleep(0.05)
    time.sleep(0.5)  # the logger is made just before the sessions


def wait_for_file(path: Path, timeout_s: float = WAIT_S, writer: subprocess.Popen | None = None) -> dict:
    """The trace Kineto writes at `path` (it renames its .tmp when done), parsed; fails at once if the `writer`
    process given exits first."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if writer is not None and writer.poll() is not None:
            raise AssertionError(f"the process exited ({writer.returncode}) before {path} was written")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} was not written within {timeout_s:.0f} s")
        time.sleep(0.1)
    return json.loads(path.read_text())


DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def events(trace: dict, *categories: str) -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in categories]


def names(trace: dict, *categories: str) -> collections.Counter:
    return collections.Counter(e["name"] for e in events(trace, *categories))


def device_lanes(trace: dict) -> dict[int, str]:
    """process_name of the openreg device processes, by pid."""
    return {
        e["pid"]: e["args"]["name"]
        for e in trace["traceEvents"]
        if e.get("ph") == "M"
        and e.get("name") == "process_name"
        and str(e["args"].get("name", "")).startswith("openreg")
    }


def stream_rows(trace: dict) -> set[tuple[int, str]]:
    lanes = device_lanes(trace)
    return {
        (e["pid"], e["args"]["name"])
        for e in trace["traceEvents"]
        if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") in lanes
    }


def arg_keys(trace: dict, category: str) -> set[str]:
    return {key for e in events(trace, category) for key in e.get("args", {})}
