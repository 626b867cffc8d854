"""The daemon's end of Kineto's on-demand protocol, played by the tests.

The traced process runs Kineto's own client (inside libtorch, with
``KINETO_USE_DAEMON=1``): it registers with the dynolog daemon over Kineto's
IPC fabric and polls it for a trace request. dynolog is in neither Debian nor
PyPI, so CI cannot run it; this module plays its end instead, with the socket
name and message layout of Kineto's IPC fabric and the answers of dynolog's
``IPCMonitor`` and ``LibkinetoConfigManager`` (facts read from their sources,
no code of theirs):

- one abstract unix datagram socket per endpoint; Kineto writes the abstract
  name with a trailing NUL that is part of the name (its address length counts
  both NULs): the daemon is ``"\\0dynolog\\0"``, each client
  ``"\\0dynoconfigclient<uuid4>\\0"``;
- a message is one datagram: ``{uint64 size; char type[32]}`` then ``size``
  bytes of payload;
- ``"req"`` (every poll, each ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS):
  ``{int32 type; int32 n; int64 job_id; int32 pids[n]}``, the pids of the
  process and its ancestors, leaf first; type has bit 1 (event profiler) and
  bit 2 (activities: Kineto can take a trace now). The answer, type ``"req"``,
  is the process's pending config text for the asked kinds, or empty;
- ``"ctxt"``: ``{int32 gpu; int32 pid; int64 job_id}``, answered with type
  ``"ctxt"`` and an int32, the processes registered for that gpu.

``request()`` is what ``dyno gputrace`` makes the daemon do: it matches the
registered processes of the job whose pid set holds one of the given pids (all
of them for pid 0), at most ``limit``, and leaves each a copy of the config with
``REQUEST_TRACE_ID`` appended; ``gputrace_config()`` writes the config text
``dyno gputrace`` sends for its flags.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field

DAEMON_ADDRESS = b"\0dynolog\0"
_METADATA = struct.Struct("<Q32s")  # size_t size; char type[32]
_REQUEST_HEAD = struct.Struct("<iiq")  # int type; int n; int64 jobid; then int32 pids[n]
_CONTEXT = struct.Struct("<iiq")  # int32 gpu; pid_t pid; int64 jobid
CONFIG_TYPE_EVENTS = 1
CONFIG_TYPE_ACTIVITIES = 2


def gputrace_config(
    log_file: str,
    *,
    duration_ms: int = 500,
    iterations: int = -1,
    profile_start_time_ms: int = 0,
    start_iteration_roundup: int = 1,
    record_shapes: bool = False,
    with_stacks: bool = False,
    extra: str = "",
) -> str:
    """The config text `dyno gputrace` sends for these flags (iterations > 0 takes precedence), plus `extra` lines."""

    def flag(value: bool) -> str:
        return "true" if value else "false"

    if iterations > 0:
        trigger = (
            f"PROFILE_START_ITERATION=0\nPROFILE_START_ITERATION_ROUNDUP={start_iteration_roundup}\n"
            f"ACTIVITIES_ITERATIONS={iterations}"
        )
    else:
        trigger = f"PROFILE_START_TIME={profile_start_time_ms}\nACTIVITIES_DURATION_MSECS={duration_ms}"
    options = (
        f"\nPROFILE_REPORT_INPUT_SHAPES={flag(record_shapes)}\nPROFILE_WITH_STACK={flag(with_stacks)}\n"
        "PROFILE_WITH_FLOPS=false\nPROFILE_WITH_MODULES=false"
    )
    return f"ACTIVITIES_LOG_FILE={log_file}\n{trigger}{options}" + (f"\n{extra}" if extra else "")


@dataclass
class Poll:
    """One "req" message as received."""

    at: float  # time.monotonic()
    pids: tuple[int, ...]  # leaf first
    job_id: int
    config_type: int
    answered: str  # the config text handed back ("" for none)


@dataclass
class Process:
    pids: frozenset[int]
    leaf: int
    job_id: int
    pending: str = ""  # activity config waiting for the process to ask
    polls: int = 0


@dataclass
class Request:
    """What request() did, as dynolog's answer to `dyno gputrace` says it."""

    matched: list[int] = field(default_factory=list)  # leaf pids
    triggered: list[int] = field(default_factory=list)
    busy: int = 0  # matched processes that still had a config pending
    trace_ids: list[str] = field(default_factory=list)


class DaemonEnd:
    """Binds the daemon's socket and answers Kineto's messages on a thread, until close()."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._sock.bind(DAEMON_ADDRESS)
        except OSError as error:
            self._sock.close()
            raise RuntimeError(
                f"cannot bind Kineto's daemon socket (abstract name {DAEMON_ADDRESS!r}): {error}; "
                "is a dynolog daemon (or another test run) using it?"
            ) from error
        self._sock.settimeout(0.05)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._processes: dict[frozenset[int], Process] = {}
        self.polls: list[Poll] = []
        self.contexts: list[tuple[int, int, int]] = []  # (gpu, pid, job id)
        self.errors: list[str] = []  # messages that break the protocol
        self.send_failures: list[str] = []  # answers to a process that is gone (dynolog logs them too)
        self._next_trace_id = 1
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name="dynolog-daemon-end", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closing = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> DaemonEnd:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the test's side ----

    def request(self, pids: list[int], config: str, *, job_id: int = 0, limit: int = 3) -> Request:
        """Leaves `config` for the registered processes matching `pids` (dynolog's setOnDemandConfig)."""
        everyone = not pids or pids == [0]
        result = Request()
        with self._lock:
            for process in self._processes.values():
                if process.job_id != job_id or not (everyone or process.pids & set(pids)):
                    continue
                result.matched.append(process.leaf)
                if len(result.triggered) >= limit:
                    continue
                if process.pending:
                    result.busy += 1
                    continue
                trace_id = str(self._next_trace_id)
                self._next_trace_id += 1
                process.pending = f"{config}\nREQUEST_TRACE_ID={trace_id}"
                result.triggered.append(process.leaf)
                result.trace_ids.append(trace_id)
        return result

    def wait_registered(self, leaf: int, timeout_s: float) -> None:
        """Waits until the process `leaf` has polled the daemon; raises TimeoutError naming it."""
        self.wait_for(lambda: any(p.leaf == leaf for p in self._processes.values()), timeout_s, f"pid {leaf} polled")

    def wait_handed(self, leaf: int, timeout_s: float) -> None:
        """Waits until process `leaf` was handed the config left for it."""

        def handed() -> bool:
            return any(p.leaf == leaf and not p.pending for p in self._processes.values()) and any(
                poll.pids[0] == leaf and poll.answered for poll in self.polls
            )

        self.wait_for(handed, timeout_s, f"pid {leaf} took its config")

    def wait_for(self, predicate, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"dynolog daemon end: not within {timeout_s:.0f} s: {what}")
                self._changed.wait(timeout=min(left, 0.5))

    def pending(self, leaf: int) -> str:
        with self._lock:
            return next((p.pending for p in self._processes.values() if p.leaf == leaf), "")

    # ---- Kineto's side ----

    def _serve(self) -> None:
        while not self._closing:
            try:
                data, sender = self._sock.recvfrom(1 << 16)
            except TimeoutError:
                continue
            except OSError as error:
                self.errors.append(f"recvfrom: {error}")
                return
            try:
                self._answer(data, sender)
            except (struct.error, ValueError) as error:
                self.errors.append(f"malformed message from {sender!r}: {error}")

    def _answer(self, data: bytes, sender: bytes) -> None:
        size, raw_type = _METADATA.unpack_from(data)
        kind = raw_type.split(b"\0", 1)[0]
        payload = data[_METADATA.size : _METADATA.size + size]
        if len(payload) != size:
            raise ValueError(f"{kind!r}: {len(payload)} payload bytes, the header says {size}")
        if kind == b"req":
            answer = self._poll(payload).encode()
            self._send(b"req", answer, sender)
        elif kind == b"ctxt":
            gpu, pid, job_id = _CONTEXT.unpack_from(payload)
            with self._changed:
                self.contexts.append((gpu, pid, job_id))
                count = sum(1 for c in self.contexts if c[0] == gpu and c[2] == job_id)
                self._changed.notify_all()
            self._send(b"ctxt", struct.pack("<i", count), sender)
        else:
            raise ValueError(f"unknown message type {kind!r}")

    def _poll(self, payload: bytes) -> str:
        config_type, n, job_id = _REQUEST_HEAD.unpack_from(payload)
        if n <= 0:
            raise ValueError(f"req with {n} pids")
        pids = struct.unpack_from(f"<{n}i", payload, _REQUEST_HEAD.size)
        key = frozenset(pids)
        with self._changed:
            process = self._processes.setdefault(key, Process(key, pids[0], job_id))
            process.polls += 1
            answer = ""
            if config_type & CONFIG_TYPE_ACTIVITIES and process.pending:
                answer, process.pending = process.pending + "\n", ""
            self.polls.append(Poll(time.monotonic(), pids, job_id, config_type, answer))
            self._changed.notify_all()
        return answer

    def _send(self, kind: bytes, payload: bytes, to: bytes) -> None:
        try:
            self._sock.sendto(_METADATA.pack(len(payload), kind) + payload, to)
        except OSError as error:  # the process is gone: dynolog logs it and goes on
            self.send_failures.append(f"sendto {to!r}: {error}")
