"""Can staging copies hide behind Gloo's transfer on this machine? Gloo alone against Gloo with copies.

orccl stages a collective through pinned memory: a device -> pinned copy, Gloo
on the pinned buffer, a pinned -> device copy. On openreg the device is
simulated, so those copies run on the same cores as Gloo's transfer. NCCL hides
its copies by pipelining chunks; this measures whether that could work here,
with CPU tensors only (no orccl, no device): per call of all_reduce (SUM,
float32) on 2 local ranks,

- plain:   Gloo on the buffer, no copies (what orccl is compared with);
- serial:  copy in, Gloo, copy out (orccl's order today);
- chunkN:  the buffer in N chunks, each copied in then reduced asynchronously
           while the next is copied, each copied out once its reduction ends.

    python benchmarks/staging_overlap_bench.py [--mib 64] [--rounds 5] [--chunks 4,8,16]

Rounds alternate the variants; medians are printed, with each against plain.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ranks  # noqa: E402


def variants(elements: int, chunk_counts: list[int]):
    import torch
    import torch.distributed as dist

    source, staged, result = torch.ones(elements), torch.empty(elements), torch.empty(elements)

    def plain():
        dist.all_reduce(staged)

    def serial():
        staged.copy_(source)
        dist.all_reduce(staged)
        result.copy_(staged)

    def chunked(count: int):
        def run():
            size = elements // count
            pending = []
            for i in range(count):
                part = slice(i * size, (i + 1) * size)
                staged[part].copy_(source[part])
                pending.append((part, dist.all_reduce(staged[part], async_op=True)))
            for part, work in pending:
                work.wait()
                result[part].copy_(staged[part])

        return run

    table = {"plain": plain, "serial": serial}
    table.update({f"chunk{count}": chunked(count) for count in chunk_counts})
    return table


def rank_main(args) -> int:
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    table = variants(args.mib * (1 << 20) // 4, [int(c) for c in args.chunks.split(",")])
    seconds = {name: [] for name in table}
    for run in table.values():
        run()  # warm up
    for _ in range(args.rounds):
        for name, run in table.items():
            dist.barrier()
            start = time.perf_counter()
            run()
            run()
            seconds[name].append((time.perf_counter() - start) / 2)
    if rank == 0:
        plain = statistics.median(seconds["plain"])
        print(
            f"all_reduce of {args.mib} MiB float32 on 2 ranks, median of {args.rounds} rounds; "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        for name, values in seconds.items():
            median = statistics.median(values)
            print(f"  {name:>8}  {median * 1e3:8.1f} ms  {median / plain:5.2f} x plain")
    dist.destroy_process_group()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunks", default="4,8,16", help="comma-separated chunk counts")
    args = parser.parse_args()
    if _ranks.is_rank():
        return rank_main(args)
    return _ranks.spawn(os.path.abspath(__file__), sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
