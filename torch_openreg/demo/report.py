"""The demo's report: one page for the run, its path printed."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO


def write_demo_report(traces: list[Path], output_folder: Path, out: TextIO) -> Path | None:
    """Writes <output_folder>/report.html from the run's traces (several: one per rank, compared);
    a failure is printed, not raised: the run itself succeeded."""
    from openreg_trace.report.build import ReportError, write_report

    target = Path(output_folder) / "report.html"
    try:
        write_report(traces, target)
    except ReportError as e:
        print(f"\nreport not written: {e}", file=out)
        return None
    print(f"\nReport (one offline HTML page, open it in any browser): {target}", file=out)
    return target
