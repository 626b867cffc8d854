"""The critical path of a step, on one trace or across rank traces (libopenreg_trace's
ortrace_critical_path), its text report, the overlay trace, and the command

    python -m torch_openreg critical-path TRACE|DIR [--step N | --range NAME] [--json]
        [--what-if NAME=K ...] [--overlay OUT.json]

No torch import: like the other trace commands it only needs the library.
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import json
import math
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from . import _native, open_trace

KINDS = ("host_op", "launch_overhead", "kernel", "copy", "sync_wait", "communication", "idle")


def _bind() -> ctypes.CDLL:
    lib = _native._load()
    fn = lib.ortrace_critical_path
    if fn.argtypes is None:
        fn.restype = ctypes.c_int
        fn.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_size_t,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_void_p),
        ]
    return lib


def parse_what_if(specs: Sequence[str]) -> list[dict[str, Any]]:
    """["aten::mm=2", "kind:kernel=1.5"] -> [{"target", "factor"}]."""
    out = []
    for spec in specs:
        target, sep, factor = spec.rpartition("=")
        try:
            k = float(factor)
        except ValueError:
            k = 0.0
        if not sep or not target or not (0 < k < math.inf):
            raise ValueError(f"--what-if {spec!r}: expected NAME=K with K > 0 (e.g. aten::mm=2 or kind:kernel=1.5)")
        out.append({"target": target, "factor": k})
    return out


def _call(lib: ctypes.CDLL, traces: Sequence[Any], options: dict[str, Any]) -> dict[str, Any]:
    handles = (ctypes.c_void_p * len(traces))(*[t._handle.value for t in traces])
    out = ctypes.c_void_p()
    status = lib.ortrace_critical_path(handles, len(traces), json.dumps(options).encode(), ctypes.byref(out))
    text = _native._take_string(lib, out)
    if status != 0:
        _native._raise(lib, status, text)
    return json.loads(text)


def critical_path(
    paths: Sequence[str | Path],
    step: int | None = None,
    range_name: str | None = None,
    instance: int = 0,
    top: int = 10,
    what_if: Sequence[dict[str, Any]] = (),
    path_events: bool = True,
    whole_trace: bool = False,
    classification: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The critical path of a step over the given traces (a folder gives its rank traces).
    Raises TraceError (a RuntimeError) with the library's message on a missing step,
    a trace without device rows, or traces of different runs."""
    from .commands import trace_files

    options: dict[str, Any] = {"top": top, "path_events": path_events}
    if step is not None:
        options["step"] = step
    if range_name is not None:
        options["range"] = range_name
        options["instance"] = instance
    if whole_trace:
        options["whole_trace"] = True
    if what_if:
        options["what_if"] = list(what_if)
    files = trace_files(paths)
    traces = [open_trace(f, **(classification or {})) for f in files]
    try:
        result = _call(_bind(), traces, options)
    finally:
        for t in traces:
            t.close()
    result["files"] = [str(files[i]) for i in result["traces"]]  # the trace of each rank holding the step
    return result


def each_step(
    paths: Sequence[str | Path], top: int = 3, classification: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The critical path of every ProfilerStep#N of the first trace (over all the traces given), in short, in one
    call of the library (each trace indexed once): {"files", "steps": [{step, step_ns, path_ns, path_share,
    bounding_rank, start_rank, end_rank, kinds, top_ops, top_kernels, last_ranks}], "skipped": [{step, reason}]}
    (a step missing from a trace is skipped, with the reason)."""
    from .commands import trace_files

    files = trace_files(paths)
    traces = [open_trace(f, **(classification or {})) for f in files]
    try:
        result = _call(_bind(), traces, {"each_step": True, "top": top})
    finally:
        for t in traces:
            t.close()
    result["files"] = [str(f) for f in files]
    return result


def _steps_note(r: dict[str, Any]) -> list[str]:
    """How the steps were found, when not from ProfilerStep#N ranges (an on-demand trace has none)."""
    if not r.get("steps_note"):  # ProfilerStep#N ranges: nothing to say
        return []
    return [f"  steps: {r['steps_note']}"]


def each_step_text(r: dict[str, Any]) -> str:
    ranks = len(r["files"]) > 1
    lines = [f"Critical path of each step ({len(r['steps'])} steps{', across ranks' if ranks else ''}):"]
    lines.extend(_steps_note(r))
    for s in r["steps"]:
        kind = max(s["kinds"], key=s["kinds"].get)
        longest = sorted(s["top_ops"] + s["top_kernels"], key=lambda x: -x["path_ns"])[:1]
        line = (
            f"  {s['step']:<18} {_ms(s['path_ns']):>12} of {_ms(s['step_ns']):>12} "
            f"({100 * s['path_share']:5.1f}%)  mostly {kind}"
        )
        if s.get("lag_ns"):
            line += f"; device {_ms(s['lag_ns'])} behind the host range"
        if longest:
            line += f"; longest on it: {longest[0]['name'][:50]}"
        if ranks:
            line += f"; bound by rank {s['bounding_rank']} (path rank {s['start_rank']} -> {s['end_rank']})"
        lines.append(line)
    for s in r["skipped"]:
        lines.append(f"  {s['step']}: skipped ({s['reason']})")
    return "\n".join(lines)


# ---------------------------------------------------------------- overlay


def _load_json(path: Path) -> dict[str, Any]:
    with open(path, "rb") as f:
        head = f.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


RANK_PID_STRIDE = 10_000_000  # merged overlay: rank i's numeric pids move up by i x this


def _flow(point: dict[str, Any], ev: dict[str, Any], ph: str, flow_id: int, edge: dict[str, Any]) -> dict[str, Any]:
    ts = float(ev["ts"])
    if point["at"] == "end" and ev.get("dur"):
        ts += float(ev["dur"]) - min(0.001, float(ev["dur"]))  # inside the slice, so the arrow binds to it
    flow = {"ph": ph, "id": flow_id, "pid": ev["pid"], "tid": ev["tid"], "ts": round(ts, 3)}
    flow.update({"cat": "critical_path", "name": "critical_path"})
    flow["args"] = {"weight_ns": edge["weight_ns"], "type": edge["type"], "critical": 1}
    if ph == "f":
        flow["bp"] = "e"
    return flow


RANK_ID_STRIDE = 10**12  # merged overlay: rank i's flow ids and correlations move up by i x this
_ID_ARGS = ("correlation", "External id", "wait_on_cuda_event_record_corr_id")


def _move_rank(events: list[dict[str, Any]], i: int, rank: Any) -> None:
    """Rank i's rows in a merged trace: numeric pids + i x RANK_PID_STRIDE, string pids and process names
    prefixed with the rank, flow ids and correlation ids + i x RANK_ID_STRIDE (each rank numbers its own)."""
    for ev in events:
        args = ev.get("args")
        if i and isinstance(ev.get("id"), int):
            ev["id"] += i * RANK_ID_STRIDE
        if i and isinstance(args, dict):
            for key in _ID_ARGS:
                if isinstance(args.get(key), int) and args[key] >= 0:
                    args[key] += i * RANK_ID_STRIDE
        pid = ev.get("pid")
        if isinstance(pid, int) and i:
            ev["pid"] = pid + i * RANK_PID_STRIDE
        elif isinstance(pid, str):
            ev["pid"] = f"rank {rank} {pid}"
        if ev.get("ph") == "M" and ev.get("name") == "process_name" and isinstance(ev.get("args"), dict):
            ev["args"]["name"] = f"rank {rank}: {ev['args'].get('name', pid)}"


def write_overlay(result: dict[str, Any], output: str | Path) -> list[Path]:
    """A copy of the trace with the path's events flagged (args "critical": 1) and its edges between rows drawn as
    flow arrows (cat "critical_path", as HTA's overlaid_critical_path_* trace: launches, syncs, waits, collectives). Several ranks: one trace holding
    every rank (rank i's pids moved up by i x RANK_PID_STRIDE, its processes named "rank r: ..."), with the
    arrows that cross ranks at collectives."""
    if "path" not in result:
        raise ValueError("the result has no path edges (path_events was off)")
    files = [Path(f) for f in result["files"]]
    docs = [_load_json(f) for f in files]
    for i, doc in enumerate(docs):
        for idx in result["events"][i]:
            doc["traceEvents"][idx].setdefault("args", {})["critical"] = 1
    if len(docs) > 1:
        for i, doc in enumerate(docs):
            _move_rank(
                doc["traceEvents"], i, result["ranks"][i]["rank"] if result["ranks"][i]["rank"] is not None else i
            )
    flows = []
    for edge in result["path"]:
        a, b = edge["from"], edge["to"]
        start, finish = (docs[p["rank"]]["traceEvents"][p["event_index"]] for p in (a, b))
        if (start["pid"], start["tid"]) == (finish["pid"], finish["tid"]):
            continue  # along one row (an op's span, the next op, the next kernel): flagged, no arrow looping there
        flow_id = len(flows) // 2
        flows.append(_flow(a, start, "s", flow_id, edge))
        flows.append(_flow(b, finish, "f", flow_id, edge))
    merged = docs[0]
    for doc in docs[1:]:
        merged["traceEvents"].extend(doc["traceEvents"])
    merged["traceEvents"].extend(flows)
    output = Path(output)
    if any(output.resolve() == f.resolve() for f in files):
        raise ValueError(f"--overlay {output}: that is a trace being analysed; write the overlay elsewhere")
    opener = gzip.open if output.name.endswith(".gz") else open
    fd, temp = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".part")
    os.close(fd)
    try:
        with opener(temp, "wt", encoding="utf-8") as f:
            f.write(json.dumps(merged))  # dumps: C's encoder (dump is pure Python)
        os.replace(temp, output)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return [output]


# ---------------------------------------------------------------- text


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f} ms"


def _lag_text(r: dict[str, Any]) -> str:
    """Where the step's work outran its host range: the step is measured to the end of its work."""
    if not r.get("lag_ns"):
        return ""
    return f", to the end of its work (host range {_ms(r['host_step_ns'])}, the device {_ms(r['lag_ns'])} behind)"


def report_text(r: dict[str, Any], top: int = 10) -> str:
    lines = [
        f"Critical path of {r['step']}: {_ms(r['path_ns'])} of a {_ms(r['step_ns'])} step "
        f"({100 * r['path_share']:.1f}%)" + _lag_text(r)
    ]
    lines.extend(_steps_note(r))
    lines.extend(f"  note: {n}" for n in r.get("notes", []))
    lines.append("  where the step's time went, along the path:")
    for k in KINDS:
        v = r["kinds"][k]
        if v["ns"]:
            lines.append(f"    {k:<16} {_ms(v['ns']):>14}  {100 * v['share']:5.1f}%")
    for key, title in (("top_ops", "host ops"), ("top_kernels", "device work")):
        rows = r[key][:top]
        if rows:
            lines.append(f"  {title} on the path (time on the path, events):")
            for row in rows:
                src = f"  [{row['source']}]" if row["source"] else ""
                lines.append(f"    {_ms(row['path_ns']):>12}  {row['events']:>5}  {row['name']}{src}")
    if len(r["ranks"]) > 1:

        def rank(index: int | None) -> str:
            named = None if index is None else r["ranks"][index]["rank"]
            return str(named) if named is not None else f"#{index} (trace {index + 1}, no rank in it)"

        lines.append(
            f"  rank bounding the step: {rank(r['bounding_rank'])} (the path ends on rank {rank(r['end_rank'])})"
        )
        worst = sorted(r["collectives"], key=lambda c: -c["max_wait_ns"])[:top]
        if worst:
            lines.append("  collectives (last to arrive; longest wait of the others):")
            for c in worst:
                mark = (
                    "  the path crosses ranks here" if c["crosses_ranks"] else "  on the path" if c["on_path"] else ""
                )
                lines.append(
                    f"    {c['collective']} seq {c['seq']}: rank {rank(c['last_rank'])} last, "
                    f"others waited up to {_ms(c['max_wait_ns'])}{mark}"
                )
    for w in r["what_if"]:
        speed = f"ran {w['factor']:g}x faster" if w["factor"] >= 1 else f"ran {1 / w['factor']:g}x slower"
        saved = w["saved_ns"]
        change = "unchanged" if saved == 0 else f"-{_ms(saved)}" if saved > 0 else f"+{_ms(-saved)}"
        lines.append(
            f"  what if {w['target']} {speed}: path {_ms(w['path_ns'])} ({change}), step about {_ms(w['step_ns'])}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- command


def run(args: argparse.Namespace, classification: dict[str, Any] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if args.each_step:
        if args.step is not None or args.range or args.whole_trace or args.what_if or args.overlay:
            print(
                "error: --each-step takes none of --step, --range, --whole-trace, --what-if, --overlay", file=sys.stderr
            )
            return 2
        steps = each_step(args.trace, top=min(args.top, 3), classification=classification)
        out.write(json.dumps(steps) + "\n" if args.json else each_step_text(steps) + "\n")
        return 0
    if args.instance and not args.range:
        print("error: --instance counts the instances of a --range: name one", file=sys.stderr)
        return 2
    if args.overlay and any(
        Path(p).is_dir() and Path(p).resolve() == Path(args.overlay).resolve().parent for p in args.trace
    ):
        print(
            f"error: --overlay {args.overlay}: the overlay would join the rank traces of its folder (analysed here); "
            "write it elsewhere",
            file=sys.stderr,
        )
        return 2
    try:
        what_if = parse_what_if(args.what_if or [])
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    result = critical_path(
        args.trace,
        step=args.step,
        range_name=args.range,
        instance=args.instance,
        top=args.top,
        what_if=what_if,
        path_events=bool(args.overlay) or args.json,
        whole_trace=args.whole_trace,
        classification=classification,
    )
    if args.overlay:
        try:
            written = write_overlay(result, args.overlay)
        except (OSError, ValueError) as e:
            print(f"error: cannot write the overlay: {e}", file=sys.stderr)
            return 2
        for p in written:
            print(f"wrote {p}", file=sys.stderr if args.json else out)
    if args.json:
        out.write(json.dumps(result) + "\n")  # dumps, compact: C's encoder (dump and indent= are pure Python)
    else:
        print(report_text(result, top=args.top), file=out)
    return 0


def add_command(sub: Any, add_classification: Any = None) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "critical-path",
        help="the critical path of a step (across ranks for a folder of rank traces), what-if, overlay trace",
        description="The longest chain of host ops, launches, device work, stream waits, syncs and "
        "collectives (matched across rank traces) that a step's end depends on (HTA's model).",
    )
    p.add_argument("trace", nargs="+", help="trace file (.json or .json.gz) or a folder of rank traces")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--step", type=int, default=None, help="ProfilerStep#N (default: the first ProfilerStep)")
    g.add_argument("--range", default=None, metavar="NAME", help="a record_function range's exact name instead")
    g.add_argument("--whole-trace", action="store_true", help="the whole trace instead of one step")
    g.add_argument(
        "--each-step",
        action="store_true",
        help="every ProfilerStep in short: its path, what it went to, the rank bounding it",
    )
    p.add_argument("--instance", type=int, default=0, help="which instance of --range (default 0, the first)")
    p.add_argument("--top", type=int, default=10, help="rows per table (default 10)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--what-if",
        action="append",
        metavar="NAME=K",
        help="the step if NAME (an op or kernel name, or kind:<kind>) ran K times faster (repeatable)",
    )
    p.add_argument("--overlay", metavar="OUT.json", help="write the trace with the path flagged and drawn as arrows")
    if add_classification is not None:
        add_classification(p)
    return p
