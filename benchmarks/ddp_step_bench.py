"""What profiling costs a 2-rank DDP training step on openreg (orccl).

Both ranks train the demo's GPT with DistributedDataParallel(device_ids=[r])
and alternate, in rounds, a block of unprofiled steps, a block under
torch.profiler.profile(activities=[CPU]) and a block under
profile(activities=[CPU, PrivateUse1]) (the profiler entered before the block
and left after it, one untimed step to settle it; the exit is timed apart,
paid once per trace). Each step ends in loss.item(). The CPU-only block splits
the cost: what torch's own op recording costs, and what recording the device
adds on top (openreg's part).

    python benchmarks/ddp_step_bench.py [--rounds 5] [--steps 10] [--size small]

Prints rank 0's median step time per mode, their ratios to unprofiled, and the
median exit of the full profiler.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ranks  # noqa: E402


def rank_main(args) -> int:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile

    import torch_openreg  # noqa: F401
    from torch_openreg.demo.data import TEXT, CharacterVocabulary, PrefetchingBatches
    from torch_openreg.demo.model import GPT, config_for
    from torch_openreg.demo.run import train_step

    rank = int(os.environ["RANK"])
    torch.openreg.set_device(rank % torch.openreg.device_count())
    dist.init_process_group("cpu:gloo,openreg:orccl")
    device = torch.device("openreg", torch.openreg.current_device())
    torch.manual_seed(0)
    vocabulary = CharacterVocabulary(TEXT)
    config = config_for(args.size, len(vocabulary))
    model = DistributedDataParallel(GPT(config).to(device), device_ids=[device.index])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, foreach=True)
    batches = PrefetchingBatches(vocabulary.encode(TEXT), config.batch_size, config.context, device, rank)
    for _ in range(3):
        train_step(model, optimizer, batches)

    def block() -> list[float]:
        times = []
        for _ in range(args.steps):
            start = time.perf_counter()
            train_step(model, optimizer, batches)
            times.append(time.perf_counter() - start)
        return times

    def profiled_block(activities) -> tuple[list[float], float]:
        prof = profile(activities=activities)
        prof.__enter__()
        train_step(model, optimizer, batches)
        times = block()
        start = time.perf_counter()
        prof.__exit__(None, None, None)
        return times, time.perf_counter() - start

    plain, cpu_only, profiled, exits = [], [], [], []
    for _ in range(args.rounds):
        dist.barrier()
        plain += block()
        dist.barrier()
        cpu_only += profiled_block([ProfilerActivity.CPU])[0]
        dist.barrier()
        times, exit_time = profiled_block([ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
        profiled += times
        exits.append(exit_time)
    if rank == 0:
        p, c, q = statistics.median(plain), statistics.median(cpu_only), statistics.median(profiled)
        print(f"DDP step, GPT '{args.size}', 2 ranks (orccl), {args.rounds} rounds x {args.steps} steps; rank 0:")
        print(f"  unprofiled          {p * 1e3:8.2f} ms per step (median)")
        print(f"  CPU only            {c * 1e3:8.2f} ms per step (median)   ratio {c / p:.3f}")
        print(f"  CPU + PrivateUse1   {q * 1e3:8.2f} ms per step (median)   ratio {q / p:.3f}")
        print(f"  profiler exit       {statistics.median(exits) * 1e3:8.2f} ms (median, once per trace)")
    dist.destroy_process_group()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--size", choices=["tiny", "small", "medium"], default="small")
    args = parser.parse_args()
    if _ranks.is_rank():
        return rank_main(args)
    return _ranks.spawn(os.path.abspath(__file__), sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
