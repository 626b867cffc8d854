"""`python -m torch_openreg report TRACE|DIR [--memory SNAPSHOT] [-o report.html]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_command(sub: argparse._SubParsersAction) -> None:
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
    from torch_openreg.__main__ import _add_classification

    _add_classification(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torch_openreg.__main__ import _classification

    from .build import ReportError, write_report

    try:
        out = write_report(
            args.trace, args.output, memory=args.memory, classification=_classification(args), title=args.title
        )
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    size = Path(out).stat().st_size
    print(f"wrote {out} ({size / 1e6:.1f} MB)")
    return 0
