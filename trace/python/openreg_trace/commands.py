"""The trace commands, as the command line and the demo run them: summary,
check, diff and timeline over trace files or folders, printed as text or JSON.

`python -m torch_openreg` only parses its arguments and calls these; the demo
calls them for the traces it wrote. Each returns the command's exit status.
A library error (an unreadable trace) raises TraceError.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from . import TraceError, open_trace

TRACE_SUFFIXES = (".json", ".json.gz")
ALL_ROWS = 1_000_000_000  # a summary `top` that keeps every kernel and op


def trace_files(paths: Sequence[str | Path]) -> list[Path]:
    """Files as given; a directory (e.g. tensorboard_trace_handler's) gives its traces (TraceError if none)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise TraceError("invalid_argument", f"no *.json or *.json.gz trace in {p}")
            files.extend(found)
        else:
            files.append(p)
    return files


def analysed(
    paths: Sequence[str | Path], analyse: Callable[[Any], dict[str, Any]], classification: dict[str, Any]
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(path, analyse(trace)) for each trace named (a folder gives its traces), one open at a time."""
    for path in trace_files(paths):
        with open_trace(path, **classification) as t:
            yield path, analyse(t)


def _for_each_trace(
    paths: Sequence[str | Path],
    analyse: Callable[[Any], dict[str, Any]],
    text: Callable[[dict[str, Any], str], str] | None,
    classification: dict[str, Any],
    out: TextIO,
) -> list[tuple[Path, dict[str, Any]]]:
    """Runs `analyse` on each trace; unless text is None prints each result with it.
    Returns (path, result) pairs."""
    results: list[tuple[Path, dict[str, Any]]] = []
    for path, result in analysed(paths, analyse, classification):
        if text is not None:
            if results:
                print(file=out)
            print(text(result, str(path)), file=out)
        results.append((path, result))
    return results


def _print_json(doc: Any, out: TextIO) -> None:
    json.dump(doc, out, indent=1)
    print(file=out)


def summary(
    paths: Sequence[str | Path],
    top: int = 10,
    gaps: int = 5,
    as_json: bool = False,
    classification: dict[str, Any] | None = None,
    out: TextIO | None = None,
    peaks: dict[str, float] | None = None,
) -> int:
    """Each trace's summary; on several traces (a folder of rank traces) also what the ranks did together.
    `peaks`: the roofline's summary options peak_flops and peak_bytes_per_s (each overrides deviceProperties')."""
    from .format import ranks_text, summary_text
    from .ranks import compare_ranks

    out = out or sys.stdout

    def text(result: dict[str, Any], path: str) -> str:
        return summary_text(result, path, top=top)

    results = _for_each_trace(
        paths,
        lambda t: t.summary(top=top, gaps=gaps, **(peaks or {})),
        None if as_json else text,
        classification or {},
        out,
    )
    if len(results) == 1:
        if as_json:
            _print_json(results[0][1], out)
        return 0
    ranks = compare_ranks([(str(p), r) for p, r in results])
    if as_json:
        _print_json({"traces": [{"path": str(p), "summary": r} for p, r in results], "ranks": ranks}, out)
    elif ranks is not None:
        print(file=out)
        print(ranks_text(ranks), file=out)
    return 0


def check(
    paths: Sequence[str | Path],
    options: dict[str, Any] | None = None,
    as_json: bool = False,
    classification: dict[str, Any] | None = None,
    out: TextIO | None = None,
) -> int:
    """The structural checks of each trace (options as NativeTrace.check takes them); 1 when one fails."""
    from .format import check_text

    out = out or sys.stdout
    options = options or {}
    text = None if as_json else check_text
    results = _for_each_trace(paths, lambda t: t.check(**options), text, classification or {}, out)
    if as_json:
        _print_json(results[0][1] if len(results) == 1 else [{"path": str(p), "check": r} for p, r in results], out)
    return 0 if all(r["ok"] for _, r in results) else 1


def diff(
    base: str | Path,
    new: str | Path,
    top: int = 15,
    as_json: bool = False,
    classification: dict[str, Any] | None = None,
    out: TextIO | None = None,
) -> int:
    """Two traces or folders compared per op and per kernel."""
    from .diff import diff_summaries
    from .format import diff_text

    out = out or sys.stdout

    def summarise(t: Any) -> dict[str, Any]:
        return t.summary(top=ALL_ROWS, gaps=0)

    base_s, new_s = ([s for _, s in analysed([name], summarise, classification or {})] for name in (base, new))
    d = diff_summaries(base_s, new_s)
    if as_json:
        _print_json(d, out)
    else:
        print(diff_text(d, str(base), str(new), top=top), file=out)
    return 0


def timeline(
    trace: str | Path,
    output: str | Path,
    width: int = 2000,
    title: str | None = None,
    classification: dict[str, Any] | None = None,
    out: TextIO | None = None,
) -> int:
    """Draws the trace's host ops, device streams and memory to an image (needs matplotlib: TraceError without)."""
    from .timeline import draw, require_matplotlib

    require_matplotlib()  # before reading the trace
    out = out or sys.stdout
    with open_trace(trace, **(classification or {})) as t:
        data = t.timeline(width=width)
    draw(data, output, title=title if title is not None else Path(trace).name)
    print(f"wrote {output}", file=out)
    return 0
