"""all_reduce bus bandwidth on two local ranks: orccl on openreg tensors against Gloo on CPU tensors.

Both run in one process group ("cpu:gloo,openreg:orccl"), so the same Gloo
transport carries both; the difference is orccl's staging (device -> pinned
copy, Gloo on the pinned buffer, copy back, on the communication stream) and
its per-call work (record_param_comms, the size agreement between ranks).
Sizes 4 KiB to 64 MiB of float32; each size is timed in rounds that
alternate the two backends. A timed call is issued and waited for
completion (openreg: torch.openreg.synchronize()), so latency counts.

    python benchmarks/allreduce_bench.py [--rounds 5] [--min-time 0.2]

Bus bandwidth = 2 (n - 1) / n x bytes / time (NCCL's definition; n = 2 gives
bytes / time). Prints per size both medians and their ratio; the goal is at
least 0.8 of Gloo's bandwidth at 64 MiB.
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


def timed_calls(run, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        run()
    return (time.perf_counter() - start) / count


def rank_main(args) -> int:
    import torch
    import torch.distributed as dist

    import torch_openreg  # noqa: F401

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.openreg.set_device(rank % torch.openreg.device_count())
    dist.init_process_group("cpu:gloo,openreg:orccl")
    device = torch.device("openreg", torch.openreg.current_device())
    factor = 2 * (world - 1) / world
    if rank == 0:
        print(
            f"all_reduce (SUM, float32), {world} ranks on 127.0.0.1; bus bandwidth in GB/s, "
            f"median of {args.rounds} rounds"
        )
        print(f"{'size':>9}  {'orccl (openreg)':>16}  {'Gloo (CPU)':>11}  {'ratio':>6}  {'orccl latency':>14}")
    for size in SIZES:
        n = size // 4
        host = torch.ones(n)
        dev = torch.ones(n, device=device)

        def on_device():
            dist.all_reduce(dev)
            torch.openreg.synchronize()

        def on_host():
            dist.all_reduce(host)

        on_device()
        on_host()
        # Both ranks must issue the same number of calls: rank 0 decides and broadcasts it.
        probe = torch.tensor([max(1, int(args.min_time / max(timed_calls(on_host, 2), 1e-6)))], dtype=torch.int64)
        dist.broadcast(probe, src=0)
        count = int(probe.item())
        device_s, host_s = [], []
        for _ in range(args.rounds):
            dist.barrier()
            device_s.append(timed_calls(on_device, count))
            dist.barrier()
            host_s.append(timed_calls(on_host, count))
        if rank == 0:
            d, h = statistics.median(device_s), statistics.median(host_s)
            busbw = lambda s: factor * size / s / 1e9  # noqa: E731
            label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
            print(
                f"{label:>9}  {busbw(d):>16.3f}  {busbw(h):>11.3f}  {busbw(d) / busbw(h):>6.2f}  {d * 1e6:>11.1f} us",
                flush=True,
            )
    dist.destroy_process_group()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.2, help="seconds per timed block (default 0.2)")
    args = parser.parse_args()
    if _ranks.is_rank():
        return rank_main(args)
    return _ranks.spawn(os.path.abspath(__file__), sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
