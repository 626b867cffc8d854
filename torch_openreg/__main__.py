"""Command line: python -m torch_openreg {demo,summary,check,diff,timeline,memory,report}.

summary, check, diff and timeline read any torch.profiler chrome trace and need
only libopenreg_trace.so: they import neither torch nor the openreg backend.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _classification(args: argparse.Namespace) -> dict[str, Any]:
    from torch_openreg.trace import load_options

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
    from torch_openreg.trace import commands

    return commands.summary(
        args.trace, top=args.top, gaps=args.gaps, as_json=args.json, classification=_classification(args)
    )


def _cmd_check(args: argparse.Namespace) -> int:
    from torch_openreg.trace import commands, list_checks
    from torch_openreg.trace.format import explain_text

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
    from torch_openreg.trace import commands

    return commands.diff(args.base, args.new, top=args.top, as_json=args.json, classification=_classification(args))


def _cmd_timeline(args: argparse.Namespace) -> int:
    from torch_openreg.trace import commands

    return commands.timeline(
        args.trace, args.output, width=args.width, title=args.title, classification=_classification(args)
    )


def _count(minimum: int):
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its error messages
    return parse


def _cmd_demo(args: argparse.Namespace) -> int:
    from torch_openreg.demo import DemoOptions, run

    options = DemoOptions(
        output=Path(args.output),
        steps=args.steps,
        size=args.size,
        model=args.model,
        seed=args.seed,
        wait=args.wait,
        warmup=args.warmup,
        active=args.active,
        repeat=args.repeat,
        gzip=args.gzip,
        check=args.check,
        top=args.top,
        gaps=args.gaps,
        ranks=args.ranks,
        compile=args.compile,
    )
    return run(options)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torch_openreg",
        description="openreg: a simulated PyTorch accelerator, and tools for torch.profiler traces.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo",
        help="train a small GPT on openreg under torch.profiler and summarise the traces",
        description="Trains a small GPT-style model on the openreg device for a few steps under torch.profiler "
        "(CPU + PrivateUse1 activities, a schedule, record_shapes, profile_memory, with_stack), writes "
        "one trace per active cycle in the layout of tensorboard_trace_handler, then prints "
        "key_averages() and the summary of the last trace.",
        epilog="exit status: 0 done; 1 a check failed or no trace was written; 2 usage or I/O error; "
        "3 the backend, the profiler plugin or the trace library could not be loaded",
    )
    demo.add_argument(
        "-o",
        "--output",
        default="openreg_demo_traces",
        help="folder for the traces (default ./openreg_demo_traces); older traces there are kept",
    )
    demo.add_argument(
        "--steps",
        type=_count(1),
        default=None,
        help="training steps (default: the schedule's (wait+warmup+active)*repeat)",
    )
    demo.add_argument(
        "--size",
        choices=["tiny", "small", "medium"],
        default="small",
        help="model size (default small: a GPT of 2 blocks, width 64, context 32; a ResNet of widths "
        "16-128 on 32x32 images)",
    )
    demo.add_argument(
        "--model",
        choices=["gpt", "resnet"],
        default="gpt",
        help="workload (default gpt: a GPT-style language model; resnet: a ResNet-18-shaped CNN on synthetic images)",
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the weights, dropout and batches (default 0)")
    sched = demo.add_argument_group("profiler schedule", "torch.profiler.schedule(wait, warmup, active, repeat)")
    sched.add_argument("--wait", type=_count(0), default=1, help="default 1")
    sched.add_argument("--warmup", type=_count(0), default=1, help="default 1")
    sched.add_argument("--active", type=_count(1), default=2, help="steps recorded per cycle (default 2)")
    sched.add_argument("--repeat", type=_count(1), default=2, help="cycles, one trace each (default 2)")
    demo.add_argument(
        "--ranks",
        type=_count(1),
        default=None,
        metavar="N",
        help="train with DistributedDataParallel on N local processes (one per device when N is "
        "the device count), every rank's traces in the output folder",
    )
    demo.add_argument(
        "--compile",
        action="store_true",
        help="train the model under torch.compile (Inductor's C++ kernels, launched on the device)",
    )
    demo.add_argument("--gzip", action="store_true", help="write .json.gz traces")
    demo.add_argument("--check", action="store_true", help="also run the invariant checks on every trace written")
    demo.add_argument(
        "--top", type=_count(1), default=10, help="rows in key_averages and the summary tables (default 10)"
    )
    demo.add_argument("--gaps", type=_count(0), default=5, help="idle gaps shown in the summary (default 5)")
    demo.set_defaults(func=_cmd_demo)

    summary = sub.add_parser(
        "summary", help="what the device did: kernels, ops, streams, idle time, launches, communication, memory"
    )
    summary.add_argument("trace", nargs="+", help="trace file (.json or .json.gz) or a folder of traces")
    summary.add_argument("--top", type=int, default=10, help="rows per table (default 10)")
    summary.add_argument("--gaps", type=int, default=5, help="idle gaps to show (default 5)")
    summary.add_argument("--json", action="store_true", help="print the result as JSON")
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

    timeline = sub.add_parser("timeline", help="draw host ops, device streams and memory to an image")
    timeline.add_argument("trace", help="trace file (.json or .json.gz)")
    timeline.add_argument("-o", "--output", required=True, help="image file (png, svg, pdf...)")
    timeline.add_argument("--width", type=int, default=2000, help="time buckets across the plot (default 2000)")
    timeline.add_argument("--title", default=None, help="figure title (default: the file name)")
    _add_classification(timeline)
    timeline.set_defaults(func=_cmd_timeline)

    from torch_openreg.trace import critical_path  # `critical-path TRACE|DIR`: its parser and logic live there

    critical_path.add_command(sub, _add_classification).set_defaults(
        func=lambda args: critical_path.run(args, classification=_classification(args))
    )

    from torch_openreg.trace import memory_report  # `memory SNAPSHOT`: its parser and logic live there

    memory_report.add_command(sub)
    from torch_openreg.report import command as report_command  # `report TRACE|DIR`: one offline HTML page

    report_command.add_command(sub, _add_classification, _classification)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Exception as e:  # noqa: BLE001 - report library errors as one line, not a traceback
        from torch_openreg.trace import TraceError

        if isinstance(e, TraceError):
            print(f"error: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
