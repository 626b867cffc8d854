"""``python -m torch_openreg memory SNAPSHOT``: what the memory viewer is opened for, as text.

Reads a memory snapshot in CUDA's format (``torch.cuda.memory._dump_snapshot``,
``torch.openreg.memory._dump_snapshot``, or any backend that writes the same
dict) and answers:

- the peak of memory in use, and what was live at it, grouped by the Python
  frame that allocated it;
- fragmentation: memory reserved but not allocated, by segment;
- at each out-of-memory in the history, what held the memory.

Memory "in use" runs from an ``alloc`` entry to its ``free_completed`` (as the
viewer's Active Memory Timeline counts it). Needs neither torch nor a browser:
the pickle is read with an unpickler that accepts plain data only.
"""

from __future__ import annotations

import argparse
import io
import json
import pickle
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# Frames inside torch itself do not say which line of the user's code allocated.
_TORCH_INTERNAL = re.compile(r"[/\\](site|dist)-packages[/\\]torch[/\\]|^<frozen |^<built-in")
_UNKNOWN_ORIGIN = "<allocated before the recorded history; no stack>"
_NO_STACK = "<no stack recorded>"


class SnapshotError(Exception):
    """The file is not a readable memory snapshot."""


class _PlainDataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise SnapshotError(f"the pickle refers to {module}.{name}; a memory snapshot holds plain data only")


def load_snapshot(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = _PlainDataUnpickler(io.BytesIO(f.read())).load()
    except OSError as error:
        raise SnapshotError(f"cannot read {path}: {error.strerror}") from error
    except (pickle.UnpicklingError, EOFError, ValueError) as error:
        raise SnapshotError(f"{path} is not a pickle: {error}") from error
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list):
        raise SnapshotError(f"{path} is not a memory snapshot (no 'segments' list)")
    return data


def _is_python(filename: str) -> bool:
    # C++ frames (stacks="all") name a C/C++ source or "??"; code run by -c or a notebook is "<string>"-like.
    return filename.endswith(".py") or (filename.startswith("<") and filename.endswith(">"))


def allocation_site(frames: list[dict[str, Any]] | None) -> str:
    """The innermost frame outside torch (frames are innermost first), as file:line in function."""
    if not frames:
        return _NO_STACK
    python = [f for f in frames if _is_python(str(f.get("filename", "")))]
    chosen = next((f for f in python if not _TORCH_INTERNAL.search(str(f["filename"]))), None)
    chosen = chosen or (python[0] if python else frames[0])
    return f"{chosen.get('filename', '?')}:{chosen.get('line', '?')} in {chosen.get('name', '?')}"


@dataclass
class _Live:
    size: int
    site: str


@dataclass
class DeviceReport:
    device: int
    reserved: int = 0
    allocated: int = 0
    history_entries: int = 0
    peak: int = 0
    peak_time_us: int | None = None
    peak_reserved: int = 0
    live_at_peak: list[tuple[str, int, int]] = field(default_factory=list)  # (site, bytes, blocks)
    segments: list[dict[str, int]] = field(default_factory=list)
    ooms: list[dict[str, Any]] = field(default_factory=list)


def _group(live: Iterable[_Live]) -> list[tuple[str, int, int]]:
    groups: dict[str, list[int]] = {}
    for block in live:
        entry = groups.setdefault(block.site, [0, 0])
        entry[0] += block.size
        entry[1] += 1
    return sorted(((site, b, n) for site, (b, n) in groups.items()), key=lambda g: (-g[1], g[0]))


def _blocks_in_use(segments: list[dict[str, Any]]) -> dict[int, _Live]:
    live = {}
    for seg in segments:
        address = seg["address"]
        for block in seg.get("blocks", []):
            if block["state"] in ("active_allocated", "active_pending_free"):
                live[address] = _Live(block["size"], allocation_site(block.get("frames")))
            address += block["size"]
    return live


def _state_before_history(trace: list[dict[str, Any]], end: dict[int, _Live], reserved_end: int):
    """What was in use (and reserved) before the first entry: the end state, undone entry by entry."""
    live = dict(end)
    reserved = reserved_end
    for entry in reversed(trace):
        action = entry["action"]
        if action == "alloc":
            live.pop(entry["addr"], None)
        elif action == "free_completed":
            live[entry["addr"]] = _Live(entry["size"], _UNKNOWN_ORIGIN)
        elif action == "segment_alloc":
            reserved -= entry["size"]
        elif action == "segment_free":
            reserved += entry["size"]
    return live, reserved


class _Replay:
    """Walks the history forward from the state before it."""

    def __init__(self, trace, end, reserved_end):
        self.trace = trace
        self.live, self.reserved = _state_before_history(trace, end, reserved_end)
        self.in_use = sum(b.size for b in self.live.values())

    def step(self, entry: dict[str, Any]) -> None:
        action = entry["action"]
        if action == "alloc":
            self.live[entry["addr"]] = _Live(entry["size"], allocation_site(entry.get("frames")))
            self.in_use += entry["size"]
        elif action == "free_completed":
            block = self.live.pop(entry["addr"], None)
            self.in_use -= block.size if block else entry["size"]
        elif action == "segment_alloc":
            self.reserved += entry["size"]
        elif action == "segment_free":
            self.reserved -= entry["size"]

    def sites(self) -> list[_Live]:
        return list(self.live.values())


def _peak_and_ooms(report: DeviceReport, trace, end, reserved_end) -> None:
    replay = _Replay(trace, end, reserved_end)
    report.peak, report.peak_reserved = replay.in_use, replay.reserved
    peak_index = -1
    for i, entry in enumerate(trace):
        replay.step(entry)
        report.peak_reserved = max(report.peak_reserved, replay.reserved)
        if replay.in_use > report.peak:
            report.peak, peak_index = replay.in_use, i
    # Second pass: the state at the peak and at each out-of-memory.
    replay = _Replay(trace, end, reserved_end)
    if peak_index < 0:
        report.live_at_peak = _group(replay.sites())
    for i, entry in enumerate(trace):
        if entry["action"] == "oom":
            report.ooms.append(
                {
                    "time_us": entry.get("time_us"),
                    "requested": entry["size"],
                    "device_free": entry.get("device_free"),
                    "in_use": replay.in_use,
                    "reserved": replay.reserved,
                    "held_by": _group(replay.sites()),
                    "site": allocation_site(entry.get("frames")),
                }
            )
        replay.step(entry)
        if i == peak_index:
            report.live_at_peak = _group(replay.sites())
            report.peak_time_us = entry.get("time_us")


def _segment_rows(segments: list[dict[str, Any]]) -> list[dict[str, int]]:
    rows = []
    for seg in segments:
        allocated = sum(b["size"] for b in seg.get("blocks", []) if b["state"] == "active_allocated")
        free = [b["size"] for b in seg.get("blocks", []) if b["state"] == "inactive"]
        rows.append(
            {
                "address": seg["address"],
                "total": seg["total_size"],
                "allocated": allocated,
                "unallocated": seg["total_size"] - allocated,
                "free_blocks": len(free),
                "largest_free": max(free, default=0),
                "stream": seg.get("stream", 0),
            }
        )
    return sorted(rows, key=lambda r: (-r["unallocated"], r["address"]))


def _devices(snapshot: dict[str, Any]) -> list[int]:
    traces = snapshot.get("device_traces") or []
    found = {i for i, trace in enumerate(traces) if trace}
    found |= {seg["device"] for seg in snapshot["segments"]}
    return sorted(found)


def analyse(snapshot: dict[str, Any], device: int | None = None) -> list[DeviceReport]:
    devices = _devices(snapshot) if device is None else [device]
    traces = snapshot.get("device_traces") or []
    reports = []
    for d in devices:
        segments = [seg for seg in snapshot["segments"] if seg["device"] == d]
        trace = traces[d] if d < len(traces) else []
        report = DeviceReport(device=d, history_entries=len(trace))
        report.reserved = sum(seg["total_size"] for seg in segments)
        end = _blocks_in_use(segments)
        report.allocated = sum(
            b["size"] for seg in segments for b in seg.get("blocks", []) if b["state"] == "active_allocated"
        )
        report.segments = _segment_rows(segments)
        _peak_and_ooms(report, trace, end, report.reserved)
        reports.append(report)
    return reports


def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _site_table(groups: list[tuple[str, int, int]], top: int, indent: str = "  ") -> list[str]:
    lines = [f"{indent}{_bytes(b):>12}  {n:>6} block{'s' if n != 1 else ' '}  {site}" for site, b, n in groups[:top]]
    if len(groups) > top:
        rest = groups[top:]
        lines.append(
            f"{indent}{_bytes(sum(g[1] for g in rest)):>12}  {sum(g[2] for g in rest):>6} blocks   "
            f"({len(rest)} more sites)"
        )
    return lines


def format_report(reports: list[DeviceReport], top: int) -> str:
    out: list[str] = []
    for r in reports:
        out.append(f"device {r.device}: {_bytes(r.reserved)} reserved, {_bytes(r.allocated)} allocated at the snapshot")
        if r.history_entries == 0:
            out.append("  no allocation history recorded (_record_memory_history was off): peak = the snapshot")
        peak_at = f" at {r.peak_time_us} us" if r.peak_time_us is not None else ""
        out.append(
            f"\npeak in use: {_bytes(r.peak)}{peak_at} (history of {r.history_entries} entries; "
            f"peak reserved {_bytes(r.peak_reserved)}), live at the peak by allocating frame:"
        )
        out.extend(_site_table(r.live_at_peak, top))
        unallocated = r.reserved - r.allocated
        share = f" ({100.0 * unallocated / r.reserved:.1f}% of reserved)" if r.reserved else ""
        out.append(f"\nfragmentation: {_bytes(unallocated)} reserved but not allocated{share}, by segment:")
        for s in r.segments[:top]:
            out.append(
                f"  segment 0x{s['address']:x} stream {s['stream']}: {_bytes(s['unallocated']):>12} of "
                f"{_bytes(s['total'])} unallocated, {s['free_blocks']} free block(s), largest {_bytes(s['largest_free'])}"
            )
        if len(r.segments) > top:
            out.append(f"  ({len(r.segments) - top} more segments)")
        for oom in r.ooms:
            out.append(
                f"\nout of memory at {oom['time_us']} us: tried to allocate {_bytes(oom['requested'])} with "
                f"{_bytes(oom['device_free'] or 0)} free on the device, from {oom['site']}; "
                f"{_bytes(oom['in_use'])} in use, {_bytes(oom['reserved'])} reserved, held by:"
            )
            out.extend(_site_table(oom["held_by"], top))
        out.append("")
    return "\n".join(out)


def _as_json(reports: list[DeviceReport], top: int) -> str:
    def groups(g):
        return [{"site": s, "bytes": b, "blocks": n} for s, b, n in g[:top]]

    return json.dumps(
        [
            {
                "device": r.device,
                "reserved": r.reserved,
                "allocated": r.allocated,
                "history_entries": r.history_entries,
                "peak": {"bytes": r.peak, "time_us": r.peak_time_us, "reserved": r.peak_reserved},
                "live_at_peak": groups(r.live_at_peak),
                "segments": r.segments[:top],
                "ooms": [{**o, "held_by": groups(o["held_by"])} for o in r.ooms],
            }
            for r in reports
        ],
        indent=1,
    )


def add_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "memory",
        help="a memory snapshot (_dump_snapshot, CUDA's or openreg's): peak, fragmentation, out-of-memory",
        description=__doc__.split("\n\n")[1],
    )
    p.add_argument("snapshot", help="pickle written by torch.{cuda,openreg}.memory._dump_snapshot")
    p.add_argument("--device", type=int, default=None, help="only this device index (default: every device)")
    p.add_argument("--top", type=int, default=10, help="rows per table (default 10)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        reports = analyse(load_snapshot(args.snapshot), args.device)
    except (SnapshotError, KeyError, TypeError) as error:
        what = f"missing field {error}" if isinstance(error, KeyError) else str(error)
        print(f"error: {args.snapshot}: {what}", file=sys.stderr)
        return 2
    print(_as_json(reports, args.top) if args.json else format_report(reports, args.top))
    return 0
