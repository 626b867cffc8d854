"""`python -m torch_openreg report TRACE|DIR [--memory SNAPSHOT] [-o report.html]`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def add_command(
    sub: argparse._SubParsersAction,
    add_classification: Callable[[argparse.ArgumentParser], None],
    classification: Callable[[argparse.Namespace], dict[str, Any]],
) -> None:
    """The `report` subcommand; the classification options (and how to read them) are the command line's,
    passed in so that this module does not import torch_openreg.__main__."""
    p = sub.add_parser(
        "report",
        help="one self-contained offline HTML page: overview, ops and kernels, timeline, memory, ranks",
        description="Writes one self-contained HTML file (no network, no server) from a torch.profiler trace "
        "of any backend, or a folder of rank traces. Exit status: 0 written; 2 bad input (nothing written).",
    )
    p.add_argument("trace", nargs="+", help="trace file (.json or .json.gz) or a folder of traces (one per rank)")
    p.add_argument("-o", "--output", default="report.html", help="the HTML file (default ./report.html)")
    p.add_argument("--memory", metavar="SNAPSHOT", help="a memory snapshot (_dump_snapshot) to add to the Memory view")
    p.add_argument("--title", default=None, help="the page's title")
    from openreg_trace.peak_options import add_peaks

    add_peaks(p)
    add_classification(p)
    p.set_defaults(func=lambda args: run(args, classification(args)))


def run(args: argparse.Namespace, classification: dict[str, Any] | None = None) -> int:
    from openreg_trace.peak_options import peaks

    from .build import ReportError, write_report

    try:
        out = write_report(
            args.trace,
            args.output,
            memory=args.memory,
            classification=classification,
            title=args.title,
            peaks=peaks(args),
        )
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    size = Path(out).stat().st_size
    print(f"wrote {out} ({size / 1e6:.1f} MB)")
    return 0
