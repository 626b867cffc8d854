"""Collective bus bandwidth on local ranks: orccl on openreg tensors against Gloo on CPU tensors.

all_reduce, all_gather (all_gather_single) and reduce_scatter
(reduce_scatter_single), on 2 ranks (one device each) or 4 ranks on 2
devices. Both backends run in one process group ("cpu:gloo,openreg:orccl"),
so the same Gloo transport carries both; the difference is orccl's staging
(device -> pinned copy, Gloo on the pinned buffer, copy back, on the
communication stream) and its per-call work (record_param_comms, the size
check between ranks). Sizes 4 KiB to 64 MiB of float32 (nccl-tests' sizes:
all_reduce's buffer, all_gather's output, reduce_scatter's input); each size
is timed in rounds that alternate the two backends. A timed call is issued
and waited for completion (openreg: torch.openreg.synchronize()), so latency
counts.

    python benchmarks/allreduce_bench.py [--rounds 5] [--min-time 0.2] [--ranks 2|4]
        [--collectives all_reduce,all_gather,reduce_scatter] [--sizes 4K,1M,64M]

Bus bandwidth (NCCL's definition, n ranks): all_reduce 2 (n - 1) / n x bytes
/ time, all_gather and reduce_scatter (n - 1) / n x bytes / time. Prints per
collective and size both medians and their ratio, then the smallest ratio;
the goal is at least 0.8 everywhere.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ranks  # noqa: E402

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def parse_sizes(text: str) -> list[int]:
    units = {"K": 1 << 10, "M": 1 << 20}
    try:
        return [int(item[:-1]) * units[item[-1].upper()] for item in text.split(",")]
    except (KeyError, ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"sizes look like 4K,16M, got {text!r}") from None


def timed_calls(run, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        run()
    return (time.perf_counter() - start) / count


COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")


def bus_factor(collective: str, world: int) -> float:
    return (2 if collective == "all_reduce" else 1) * (world - 1) / world


def call_for(collective: str, size: int, world: int, device):
    """A function running one collective of `size` bytes (nccl-tests' convention) on `device`."""
    import torch
    import torch.distributed as dist

    n = size // 4
    if collective == "all_reduce":
        buffer = torch.ones(n, device=device)
        return lambda: dist.all_reduce(buffer)
    if collective == "all_gather":
        part, whole = torch.ones(n // world, device=device), torch.empty(n, device=device)
        return lambda: dist.all_gather_single(whole, part)
    whole, part = torch.ones(n, device=device), torch.empty(n // world, device=device)
    return lambda: dist.reduce_scatter_single(part, whole)


def measure(collective: str, size: int, args, world: int, device) -> tuple[float, float]:
    """Median seconds per call of orccl (openreg) and of Gloo (CPU), alternating in rounds."""
    import torch
    import torch.distributed as dist

    device_call, on_host = call_for(collective, size, world, device), call_for(collective, size, world, "cpu")

    def on_device():
        device_call()
        torch.openreg.synchronize()

    on_device()
    on_host()
    # All ranks must issue the same number of calls: rank 0 decides and broadcasts it.
    probe = torch.tensor([max(1, int(args.min_time / max(timed_calls(on_host, 2), 1e-6)))], dtype=torch.int64)
    dist.broadcast(probe, src=0)
    count = int(probe.item())
    device_s, host_s = [], []
    for _ in range(args.rounds):
        dist.barrier()
        device_s.append(timed_calls(on_device, count))
        dist.barrier()
        host_s.append(timed_calls(on_host, count))
    return statistics.median(device_s), statistics.median(host_s)


def rank_main(args) -> int:
    import torch
    import torch.distributed as dist

    import torch_openreg  # noqa: F401

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.openreg.set_device(rank % torch.openreg.device_count())
    dist.init_process_group("cpu:gloo,openreg:orccl")
    device = torch.device("openreg", torch.openreg.current_device())
    collectives = args.collectives.split(",")
    if rank == 0:
        print(
            f"{world} ranks on 127.0.0.1, {torch.openreg.device_count()} devices; float32, SUM; bus bandwidth in "
            f"GB/s, median of {args.rounds} rounds; load average {os.getloadavg()[0]:.2f}"
        )
        print(f"{'collective':>14}  {'size':>7}  {'orccl':>7}  {'Gloo':>7}  {'ratio':>5}  {'orccl':>9}  {'Gloo':>9}")
    worst = None
    for collective in collectives:
        for size in args.sizes:
            d, h = measure(collective, size, args, world, device)
            if rank != 0:
                continue
            busbw = lambda s: bus_factor(collective, world) * size / s / 1e9  # noqa: E731
            ratio = busbw(d) / busbw(h)
            worst = ratio if worst is None else min(worst, ratio)
            label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
            print(
                f"{collective:>14}  {label:>7}  {busbw(d):>7.3f}  {busbw(h):>7.3f}  {ratio:>5.2f}  "
                f"{d * 1e6:>6.0f} us  {h * 1e6:>6.0f} us",
                flush=True,
            )
    if rank == 0:
        print(f"smallest ratio {worst:.2f} (goal: 0.80); load average {os.getloadavg()[0]:.2f}")
    dist.destroy_process_group()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.2, help="seconds per timed block (default 0.2)")
    parser.add_argument("--ranks", type=int, choices=[2, 4], default=2, help="4: two ranks per device")
    parser.add_argument(
        "--collectives", default=",".join(COLLECTIVES), help="comma-separated, of " + ", ".join(COLLECTIVES)
    )
    parser.add_argument("--sizes", type=parse_sizes, default=SIZES, help="comma-separated, as 4K or 64M (default: all)")
    args = parser.parse_args()
    unknown = set(args.collectives.split(",")) - set(COLLECTIVES)
    if unknown:
        parser.error(f"unknown collectives: {', '.join(sorted(unknown))}")
    if _ranks.is_rank():
        return rank_main(args)
    return _ranks.spawn(os.path.abspath(__file__), sys.argv[1:], world=args.ranks)


if __name__ == "__main__":
    sys.exit(main())
