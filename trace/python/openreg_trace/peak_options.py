"""The roofline's peaks on the command line (`summary` and `report`): --peak-flops and --peak-bytes-per-s."""

from __future__ import annotations

import argparse


def add_peaks(p: argparse.ArgumentParser) -> None:
    """The roofline's peaks (summary and report): each overrides what the trace's deviceProperties declare."""
    g = p.add_argument_group("roofline", "the device's peaks; by default the trace's deviceProperties' (openreg's)")
    g.add_argument("--peak-flops", type=float, metavar="FLOP/S", help="peak FLOP/s of every device (e.g. 312e12)")
    g.add_argument("--peak-bytes-per-s", type=float, metavar="B/S", help="peak memory bandwidth of every device (B/s)")


def peaks(args: argparse.Namespace) -> dict[str, float]:
    """The summary options of the peaks given (none: {})."""
    given = {"peak_flops": args.peak_flops, "peak_bytes_per_s": args.peak_bytes_per_s}
    return {k: v for k, v in given.items() if v is not None}
