"""Command line: python -m torch_openreg {demo,summary,check,diff,timeline,critical-path,memory,report}.

demo is the backend's. The others are the trace tools' commands (openreg_trace.cli, the same as the
`openreg-trace` command of the tools' own package): they read files only and import neither torch nor
the openreg backend.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


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
        on_demand=args.on_demand,
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
    demo.add_argument(
        "--on-demand",
        action="store_true",
        help="train with no torch.profiler, for a trace asked for from outside (dyno gputrace): Kineto's "
        "daemon mode, KINETO_USE_DAEMON=1 in the environment (with --ranks the demo sets it for the ranks); "
        "default 300 steps",
    )
    demo.add_argument("--gzip", action="store_true", help="write .json.gz traces")
    demo.add_argument("--check", action="store_true", help="also run the invariant checks on every trace written")
    demo.add_argument(
        "--top", type=_count(1), default=10, help="rows in key_averages and the summary tables (default 10)"
    )
    demo.add_argument("--gaps", type=_count(0), default=5, help="idle gaps shown in the summary (default 5)")
    demo.set_defaults(func=_cmd_demo)

    from openreg_trace import cli  # summary, check, ...: the trace tools' own commands

    cli.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from openreg_trace import cli

    return cli.run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
