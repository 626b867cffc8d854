"""Writes the one-file HTML report of a run: `python -m torch_openreg report TRACE|DIR`.

Every number on the page comes from libopenreg_trace (`ortrace_report_data`:
the summary plus the report's tables, steps, memory curves and packed
timeline events); this module only assembles the page: the library's JSON is
inlined as it came (not parsed again unless ranks must be compared), with
Chart.js (Debian's libjs-chart.js), the page's CSS and script. The file is
written to a temporary name beside the output and renamed, so a failure never
leaves a half-written page.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._native import report_data_text

HERE = Path(__file__).resolve().parent
TRACE_SUFFIXES = (".json", ".json.gz")
# Chart.js: $OPENREG_CHARTJS, else the wheel's own copy (trace/cmake/BundleChartJs.cmake), else Debian's
# libjs-chart.js (scripts/bootstrap.sh installs it; a checkout's package has no copy of its own).
CHARTJS_CANDIDATES = (
    str(HERE / "vendor" / "chart.min.js"),
    "/usr/share/javascript/chart.js/chart.umd.min.js",
    "/usr/share/javascript/chart.js/chart.min.js",
    "/usr/share/nodejs/chart.js/dist/chart.min.js",
)


class ReportError(Exception):
    """Bad input (no trace, not a trace, truncated) or a missing page library: one clear line."""


def chartjs_path() -> Path:
    env = os.environ.get("OPENREG_CHARTJS")
    for candidate in ([env] if env else []) + list(CHARTJS_CANDIDATES):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise ReportError(
        "Chart.js was not found (looked in $OPENREG_CHARTJS and "
        + ", ".join(CHARTJS_CANDIDATES)
        + "): install Debian's libjs-chart.js, or point $OPENREG_CHARTJS at chart.umd.min.js"
    )


def report_traces(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """The trace files named: a folder gives its *.json / *.json.gz files."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise ReportError(f"no *.json or *.json.gz trace in the folder {p}")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise ReportError(f"{p}: no such file or folder")
    if not files:
        raise ReportError("no trace given")
    return files


def _trace_text(
    path: Path, classification: dict[str, Any] | None, events: bool, peaks: dict[str, float] | None = None
) -> str:
    from openreg_trace import TraceError

    try:
        return report_data_text(path, classification, events=events, **(peaks or {}))
    except TraceError as e:
        what = {"parse": "not a valid trace", "io": "cannot be read"}.get(e.status, e.status)
        raise ReportError(f"{path}: {what}: {e}") from e


def _snapshot(path: str | os.PathLike) -> Any:
    from openreg_trace import memory_report

    try:
        reports = memory_report.analyse(memory_report.load_snapshot(str(path)))
    except (memory_report.SnapshotError, KeyError, TypeError, OSError) as e:
        raise ReportError(f"{path}: not a memory snapshot: {e}") from e
    return json.loads(memory_report._as_json(reports, 15))


def _script_safe(text: str) -> str:
    # In JSON "<" occurs only inside strings, where \u003c means the same: no "</script>" can close the tag.
    return text.replace("<", "\\u003c")


def _split_timeline(text: str) -> tuple[str, str]:
    """The library writes the timeline last in "report": {"summary":...,"report":{...,"timeline":{...}}}.
    Moved into a tag of its own after the page's script, the overview draws before the bulk is read."""
    key = ',"timeline":{'
    at = text.rfind(key)
    if at < 0 or not text.endswith("}}"):
        raise ReportError("the trace library's report data has no timeline (rebuild libopenreg_trace)")
    return text[:at] + "}}", text[at + len(key) - 1 : -2]


def build_page(
    paths: Sequence[str | os.PathLike],
    memory: str | os.PathLike | None = None,
    classification: dict[str, Any] | None = None,
    title: str | None = None,
    peaks: dict[str, float] | None = None,
) -> str:
    """The page's HTML for the traces named (a folder of rank traces: every one, the views showing one at a
    time, the first at first). `peaks`: the roofline's peak_flops and peak_bytes_per_s, as summary's."""
    files = report_traces(paths)
    chartjs = chartjs_path().read_text(encoding="utf-8")
    texts, timelines = [], []
    for f in files:  # every trace's events: the page shows any one of them (a selector chooses)
        text, timeline = _split_timeline(_trace_text(f, classification, events=True, peaks=peaks))
        texts.append(text)
        timelines.append(timeline)
    ranks = None
    if len(files) > 1:
        from openreg_trace.ranks import compare_ranks

        summaries = [(str(f), json.loads(t)["summary"]) for f, t in zip(files, texts)]
        ranks = compare_ranks(summaries, top=20)
    meta = {
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "traces": [{"path": str(f)} for f in files],
        "snapshot": str(memory) if memory else None,
    }
    data = (
        '{"meta":' + json.dumps(meta) + ',"main":0,"traces":[' + ",".join(texts) + "]"
        ',"ranks":' + json.dumps(ranks) + ',"snapshot":' + json.dumps(_snapshot(memory) if memory else None) + "}"
    )
    page = (HERE / "page.html").read_text(encoding="utf-8")
    title = title or ("openreg report: " + files[0].name + (f" (+{len(files) - 1})" if len(files) > 1 else ""))
    parts = {
        "__TITLE__": title.replace("&", "&amp;").replace("<", "&lt;"),
        "__CSS__": (HERE / "page.css").read_text(encoding="utf-8"),
        "__CHARTJS__": chartjs.replace("</script", "<\\/script"),
        "__JS__": (HERE / "page.js").read_text(encoding="utf-8"),
        "__DATA__": _script_safe(data),
        "__TIMELINES__": "\n".join(
            f'<script type="application/json" id="timeline-data-{i}">{_script_safe(t)}</script>'
            for i, t in enumerate(timelines)
        ),
    }
    # One pass, so that no part's text is searched for another's placeholder.
    out, pos = [], 0
    while True:
        hits = [(page.find(k, pos), k) for k in parts if page.find(k, pos) >= 0]
        if not hits:
            out.append(page[pos:])
            break
        at, key = min(hits)
        out.append(page[pos:at])
        out.append(parts[key])
        pos = at + len(key)
    return "".join(out)


def write_report(
    paths: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    memory: str | os.PathLike | None = None,
    classification: dict[str, Any] | None = None,
    title: str | None = None,
    peaks: dict[str, float] | None = None,
) -> Path:
    """Writes the page atomically (a temporary file beside `output`, then a rename); returns its path."""
    output = Path(output)
    if output.is_dir():
        raise ReportError(f"{output} is a folder: name the page's file (e.g. {output / 'report.html'})")
    html = build_page(paths, memory=memory, classification=classification, title=title, peaks=peaks)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="." + output.name + ".", suffix=".tmp", dir=output.parent)
    except OSError as e:
        raise ReportError(f"cannot write {output}: {e}") from e
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(html)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, output)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise ReportError(f"cannot write {output}: {e}") from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return output
