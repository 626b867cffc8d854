"""Structural checks on an exported chrome trace with openreg device lanes.

Each check returns a list of problems (empty when the trace is fine), so a
test can assert on all of them at once and print what broke. Timestamps are
read as exact integers of nanoseconds: a float cannot hold an epoch-scale
``ts`` to the nanosecond, and 1 ns overlaps are what the row checks look for.

These checks deliberately re-implement what ``trace/src/checks.cpp`` (the
``check`` command) verifies: they are the tests' independent oracle. A bug in
the shipped checker cannot hide a bug in the plugin's traces from the tests.
Each side has its own planted-fault tests (test_trace_invariants.py here;
trace/tests/test_checks.cpp and tests/test_trace_tools.py for the command).
Keep them separate; fix a disagreement in whichever one is wrong.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
DEVICE_ROW_CATEGORIES = DEVICE_CATEGORIES + ("gpu_user_annotation", "cuda_sync")
RUNTIME_CATEGORY = "privateuse1_runtime"


@dataclass
class Event:
    raw: dict[str, Any]
    ph: str
    cat: str
    name: str
    pid: Any
    tid: Any
    ts: int  # ns since baseTimeNanoseconds
    dur: int  # ns
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def end(self) -> int:
        return self.ts + self.dur

    @property
    def row(self) -> tuple[Any, Any]:
        return (self.pid, self.tid)


def _ns(value: Any) -> int:
    """µs (JSON number, 3 decimals) → integer ns."""
    if value is None:
        return 0
    return int(Decimal(str(value)) * 1000)


@dataclass
class Trace:
    raw: dict[str, Any]
    events: list[Event]
    base_ns: int

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        with open(path) as f:
            raw = json.load(f, parse_float=Decimal)
        events = []
        for e in raw.get("traceEvents", []):
            events.append(
                Event(
                    raw=e,
                    ph=e.get("ph", ""),
                    cat=e.get("cat", ""),
                    name=e.get("name", ""),
                    pid=e.get("pid"),
                    tid=e.get("tid"),
                    ts=_ns(e.get("ts")),
                    dur=_ns(e.get("dur")),
                    args=e.get("args", {}) or {},
                )
            )
        return cls(raw=raw, events=events, base_ns=int(raw.get("baseTimeNanoseconds", 0)))

    # --------------------------------------------------------- selections
    def complete(self, cats: Iterable[str] | None = None) -> list[Event]:
        cats = set(cats) if cats is not None else None
        return [e for e in self.events if e.ph == "X" and (cats is None or e.cat in cats)]

    def device_events(self) -> list[Event]:
        return self.complete(DEVICE_CATEGORIES)

    def kernels(self) -> list[Event]:
        return self.complete(["kernel"])

    def runtime_events(self) -> list[Event]:
        return self.complete([RUNTIME_CATEGORY])

    def annotations(self) -> list[Event]:
        return self.complete(["gpu_user_annotation"])

    def cpu_ops(self) -> list[Event]:
        return self.complete(["cpu_op"])

    def metadata(self, name: str) -> dict[Any, Any]:
        """M events of one kind, by pid (process_*) or (pid, tid) (thread_*)."""
        out = {}
        for e in self.events:
            if e.ph == "M" and e.name == name:
                key = e.pid if name.startswith("process") else (e.pid, e.tid)
                out[key] = e.args
        return out

    def device_pids(self) -> set[Any]:
        return {e.pid for e in self.events if e.ph == "X" and e.cat in DEVICE_ROW_CATEGORIES}

    def epoch_ns(self, trace_ns: int) -> int:
        return self.base_ns + trace_ns

    def openreg_metadata(self) -> dict[str, Any]:
        value = self.raw.get("openreg_profiler", {})
        return value if isinstance(value, dict) else {}


# ------------------------------------------------------------------ checks


def check_device_args(trace: Trace) -> list[str]:
    """Kernels, copies and memsets carry integer device, stream (>= 1) and correlation."""
    problems = []
    for e in trace.device_events():
        for key in ("device", "stream", "correlation"):
            if not isinstance(e.args.get(key), int):
                problems.append(f"{e.cat} {e.name!r} at {e.ts} lacks an integer {key!r} arg: {e.args}")
        if isinstance(e.args.get("stream"), int) and e.args["stream"] < 1:
            problems.append(f"{e.name!r} has stream {e.args['stream']} < 1")
        if e.args.get("device") != e.pid:
            problems.append(f"{e.name!r}: args.device {e.args.get('device')} != pid {e.pid}")
        if e.args.get("stream") != e.tid:
            problems.append(f"{e.name!r}: args.stream {e.args.get('stream')} != tid {e.tid}")
    for e in trace.runtime_events():
        if "stream" in e.args:
            problems.append(f"runtime row {e.name!r} carries a 'stream' arg (HTA would take it for device work)")
    return problems


def check_lanes(trace: Trace) -> list[str]:
    """Device processes are named and sort below every host process; stream rows are named."""
    problems = []
    names = trace.metadata("process_name")
    sort = trace.metadata("process_sort_index")
    device_pids = trace.device_pids()
    host_pids = {
        e.pid for e in trace.events if e.ph == "X" and e.cat not in DEVICE_ROW_CATEGORIES and isinstance(e.pid, int)
    }
    host_sort = [sort[p]["sort_index"] for p in host_pids if p in sort]
    host_max = max(host_sort + list(host_pids) or [0])
    for pid in device_pids:
        if pid not in names:
            problems.append(f"device pid {pid} has no process_name")
        if pid not in sort:
            problems.append(f"device pid {pid} has no process_sort_index")
        elif sort[pid]["sort_index"] <= host_max:
            problems.append(f"device pid {pid} sorts at {sort[pid]['sort_index']}, not below the host ({host_max})")
    thread_names = trace.metadata("thread_name")
    for e in trace.complete(DEVICE_ROW_CATEGORIES):
        if (e.pid, e.tid) not in thread_names:
            problems.append(f"device row {(e.pid, e.tid)} has no thread_name")
    # Each row descriptor once: duplicated M events bloat traces.
    seen = defaultdict(int)
    for e in trace.events:
        if e.ph == "M" and e.pid in device_pids:
            seen[(e.name, e.pid, e.tid)] += 1
    problems += [f"metadata {k} written {n} times" for k, n in seen.items() if n > 1]
    return problems


def _enclosing(events: list[Event], ts: int) -> bool:
    return any(e.ts <= ts <= e.end for e in events)


def check_flows(trace: Trace) -> list[str]:
    """ac2g flows: one start and one finish per id, forward in time, across lanes, starts inside a host slice."""
    problems = []
    starts = defaultdict(list)
    finishes = defaultdict(list)
    for e in trace.events:
        if e.cat == "ac2g":
            if e.ph == "s":
                starts[e.raw.get("id")].append(e)
            elif e.ph == "f":
                finishes[e.raw.get("id")].append(e)
                if e.raw.get("bp") != "e":
                    problems.append(f"flow finish {e.raw.get('id')} lacks bp=e")
    by_row = defaultdict(list)
    for e in trace.complete():
        by_row[e.row].append(e)
    for fid in set(starts) | set(finishes):
        if not fid:
            problems.append("flow with id 0")
        if len(starts[fid]) != 1 or len(finishes[fid]) != 1:
            problems.append(f"flow {fid}: {len(starts[fid])} starts, {len(finishes[fid])} finishes")
            continue
        s, f = starts[fid][0], finishes[fid][0]
        if f.ts < s.ts:
            problems.append(f"flow {fid} points backwards by {s.ts - f.ts} ns")
        if s.row == f.row:
            problems.append(f"flow {fid} starts and ends on one lane {s.row}")
        if not _enclosing(by_row[s.row], s.ts):
            problems.append(f"flow {fid} starts outside any slice on {s.row}")
        if not _enclosing(by_row[f.row], f.ts):
            problems.append(f"flow {fid} ends outside any slice on {f.row}")
    return problems


def check_rows_nest(trace: Trace, cats: Iterable[str] = DEVICE_ROW_CATEGORIES) -> list[str]:
    """No two complete events on one device row partially overlap (nesting is fine)."""
    problems = []
    rows = defaultdict(list)
    for e in trace.complete(cats):
        rows[e.row].append(e)
    for row, events in rows.items():
        events.sort(key=lambda e: (e.ts, -e.dur))
        open_stack: list[Event] = []
        for e in events:
            while open_stack and open_stack[-1].end <= e.ts:
                open_stack.pop()
            if open_stack and e.end > open_stack[-1].end:
                top = open_stack[-1]
                problems.append(f"row {row}: {e.name!r} [{e.ts}, {e.end}] overlaps {top.name!r} [{top.ts}, {top.end}]")
                continue
            open_stack.append(e)
    return problems


def check_in_window(trace: Trace, start_epoch_ns: int, end_epoch_ns: int) -> list[str]:
    """Device events lie inside [start, end] (host epoch ns, measured around the profiler)."""
    problems = []
    for e in trace.complete(DEVICE_ROW_CATEGORIES):
        s, t = trace.epoch_ns(e.ts), trace.epoch_ns(e.end)
        if s < start_epoch_ns or t > end_epoch_ns:
            problems.append(f"{e.name!r} [{s}, {t}] outside the window [{start_epoch_ns}, {end_epoch_ns}]")
    return problems


def check_correlations(trace: Trace) -> list[str]:
    """Correlation ids are unique among device events; a launch row and its device event share one."""
    problems = []
    seen = defaultdict(list)
    for e in trace.device_events() + trace.complete(["cuda_sync"]):
        seen[e.args.get("correlation")].append(e)
    problems += [f"correlation {c} on {len(es)} device events" for c, es in seen.items() if len(es) > 1]
    runtime = defaultdict(list)
    for e in trace.runtime_events():
        runtime[e.args.get("correlation")].append(e)
    problems += [f"correlation {c} on {len(es)} runtime rows" for c, es in runtime.items() if len(es) > 1]
    for c, es in seen.items():
        if c in runtime and es[0].ts < runtime[c][0].ts:
            problems.append(f"{es[0].name!r} (correlation {c}) starts before its launch")
    return problems


def check_launches_inside_ops(trace: Trace) -> list[str]:
    """A linked launch row lies inside its op, on the op's thread, so its arrow starts in that op."""
    problems = []
    ops = {e.args["External id"]: e for e in trace.cpu_ops() if "External id" in e.args}
    for e in trace.runtime_events():
        op = ops.get(e.args.get("External id"))
        if op is None:
            continue
        if op.row != e.row:
            problems.append(f"{e.name!r} runs on {e.row}, its op {op.name!r} on {op.row}")
        elif not (op.ts <= e.ts and e.end <= op.end):
            problems.append(f"{e.name!r} [{e.ts}, {e.end}] is not inside its op {op.name!r} [{op.ts}, {op.end}]")
    return problems


CHECKS = {
    "device_args": check_device_args,
    "lanes": check_lanes,
    "flows": check_flows,
    "rows_nest": check_rows_nest,
    "correlations": check_correlations,
    "launches_inside_ops": check_launches_inside_ops,
}


def findings(trace: Trace, window: tuple[int, int] | None = None) -> dict[str, list[str]]:
    """Problems by check name (``in_window`` only with a window); every check appears."""
    out = {name: check(trace) for name, check in CHECKS.items()}
    if window is not None:
        out["in_window"] = check_in_window(trace, *window)
    return out


def check_all(trace: Trace, window: tuple[int, int] | None = None) -> list[str]:
    return [p for problems in findings(trace, window).values() for p in problems]


def assert_clean(trace: Trace, device_events: int, window: tuple[int, int] | None = None) -> None:
    """No check finds a problem, in a trace holding exactly `device_events` kernels, copies and memsets
    (so an empty or truncated trace cannot pass as clean)."""
    problems = check_all(trace, window)
    assert not problems, "\n".join(problems[:20])
    assert len(trace.device_events()) == device_events, (len(trace.device_events()), device_events)


def linked_op_names(trace: Trace) -> dict[int, str]:
    """External id → CPU op name, for joining device events to ops."""
    return {e.args["External id"]: e.name for e in trace.cpu_ops() if "External id" in e.args}
