"""The command line of the trace tools: ``openreg-trace COMMAND`` (also ``python -m openreg_trace``, and
``python -m torch_openreg COMMAND`` where the backend is installed, which adds its parser to the same commands).

Every command reads files only (chrome traces, memory snapshots) and imports neither torch nor anything of a
backend. Exit status: 0 done; 1 a check failed; 2 bad input, a usage error or a missing optional part.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

# The subcommands add_commands() adds, in the order of --help.
COMMANDS = ("summary", "check", "diff", "timeline", "critical-path", "memory", "report")


def _classification(args: argparse.Namespace) -> dict[str, Any]:
    from . import load_options

    return load_options(
        device_categories=args.device_cat,
        runtime_categories=args.runtime_cat,
        annotation_categories=args.annotation_cat,
        op_categories=args.op_cat,
        flow_categories=args.flow_cat,
        infer_device_categories=False if args.no_infer_device else None,
    )


def _add_classification(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "event classification",
        "for traces of other backends; each option may repeat and replaces the default list",
    )
    g.add_argument(
        "--device-cat",
        action="append",
        metavar="CAT",
        help="category of device work (default: kernel, gpu_memcpy, gpu_memset)",
    )
    g.add_argument(
        "--no-infer-device",
        action="store_true",
        help="do not treat other categories carrying stream+correlation args as device work",
    )
    g.add_argument(
        "--runtime-cat",
        action="append",
        metavar="CAT",
        help="category of host launch calls (default: any *_runtime or *_driver)",
    )
    g.add_argument(
        "--annotation-cat",
        action="append",
        metavar="CAT",
        help="device-row events that are not work (default: gpu_user_annotation, cuda_sync)",
    )
    g.add_argument("--op-cat", action="append", metavar="CAT", help="host ops (default: cpu_op, user_annotation)")
    g.add_argument("--flow-cat", action="append", metavar="CAT", help="host-to-device arrows (default: ac2g)")


def _cmd_summary(args: argparse.Namespace) -> int:
    from . import commands
    from .peak_options import peaks

    return commands.summary(
        args.trace,
        top=args.top,
        gaps=args.gaps,
        as_json=args.json,
        classification=_classification(args),
        peaks=peaks(args),
    )


def _cmd_check(args: argparse.Namespace) -> int:
    from . import commands, list_checks
    from .format import explain_text

    if args.list:
        for c in list_checks():
            print(f"{c['name']:<26} {c['severity']:<8} {c['description']}")
        return 0
    if args.explain:
        print(explain_text(list_checks()))
        return 0
    if not args.trace:
        raise SystemExit("error: check needs a TRACE (or --list, --explain)")
    options: dict[str, Any] = {
        "examples": args.examples,
        "strict": args.strict,
        "window_slack_ns": int(round(args.window_slack_us * 1000)),
    }
    if args.skip:
        options["skip"] = args.skip
    if args.only:
        options["only"] = args.only
    return commands.check(args.trace, options, as_json=args.json, classification=_classification(args))


def _cmd_diff(args: argparse.Namespace) -> int:
    from . import commands

    return commands.diff(args.base, args.new, top=args.top, as_json=args.json, classification=_classification(args))


def _cmd_timeline(args: argparse.Namespace) -> int:
    from . import commands

    return commands.timeline(
        args.trace, args.output, width=args.width, title=args.title, classification=_classification(args)
    )


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Adds every trace command to a parser's subcommands (this one's, or torch_openreg's beside its demo)."""
    summary = sub.add_parser(
        "summary",
        help="what the device did: kernels, ops, streams, idle time, launches, communication, memory, roofline, "
        "counters",
    )
    summary.add_argument("trace", nargs="+", help="trace file (.json or .json.gz) or a folder of traces")
    summary.add_argument("--top", type=int, default=10, help="rows per table (default 10)")
    summary.add_argument("--gaps", type=int, default=5, help="idle gaps to show (default 5)")
    summary.add_argument("--json", action="store_true", help="print the result as JSON")
    from .peak_options import add_peaks

    add_peaks(summary)
    _add_classification(summary)
    summary.set_defaults(func=_cmd_summary)

    check = sub.add_parser("check", help="structural invariants; exits 1 when one fails")
    check.add_argument("trace", nargs="*", help="trace file (.json or .json.gz) or a folder of traces")
    check.add_argument("--list", action="store_true", help="list the checks and exit")
    check.add_argument("--skip", action="append", metavar="CHECK", help="do not run CHECK (repeatable)")
    check.add_argument("--only", action="append", metavar="CHECK", help="run only CHECK (repeatable)")
    check.add_argument("--examples", type=int, default=5, help="example violations shown per check (default 5)")
    check.add_argument(
        "--window-slack-us", type=float, default=0.0, help="tolerance of the profiling-window check, in microseconds"
    )
    check.add_argument(
        "--explain",
        action="store_true",
        help="print, for every check, the consumer it protects and what breaks there, and exit",
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="every finding fails: warning-level checks and known Kineto artifacts too (for openreg's own traces)",
    )
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_classification(check)
    check.set_defaults(func=_cmd_check)

    diff = sub.add_parser("diff", help="compare two traces or folders: per op and per kernel count and device time")
    diff.add_argument("base", help="trace file or folder of traces (the baseline)")
    diff.add_argument("new", help="trace file or folder of traces (compared with the baseline)")
    diff.add_argument("--top", type=int, default=15, help="rows per table, largest changes first (default 15)")
    diff.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_classification(diff)
    diff.set_defaults(func=_cmd_diff)

    timeline = sub.add_parser(
        "timeline",
        help="draw host ops, device streams and memory to an image (matplotlib: openreg-trace[plot])",
    )
    timeline.add_argument("trace", help="trace file (.json or .json.gz)")
    timeline.add_argument("-o", "--output", required=True, help="image file (png, svg, pdf...)")
    timeline.add_argument("--width", type=int, default=2000, help="time buckets across the plot (default 2000)")
    timeline.add_argument("--title", default=None, help="figure title (default: the file name)")
    _add_classification(timeline)
    timeline.set_defaults(func=_cmd_timeline)

    from . import critical_path  # `critical-path TRACE|DIR`: its parser and logic live there

    critical_path.add_command(sub, _add_classification).set_defaults(
        func=lambda args: critical_path.run(args, classification=_classification(args))
    )

    from . import memory_report  # `memory SNAPSHOT`: its parser and logic live there

    memory_report.add_command(sub)
    from .report import command as report_command  # `report TRACE|DIR`: one offline HTML page

    report_command.add_command(sub, _add_classification, _classification)


def build_parser(prog: str = "openreg-trace") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Tools for torch.profiler traces of any backend (CUDA, ROCm, MTIA, openreg...): summary, "
        "structural checks, diff, timeline, critical path, an offline HTML report, and memory snapshots.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add_commands(sub)
    return parser


def run(args: argparse.Namespace) -> int:
    """Runs the parsed command; a library error (unreadable trace, bad option) is one line on stderr, exit 2."""
    from . import TraceError

    try:
        return args.func(args)
    except TraceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, with the status a shell gives SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
