"""What profiling costs a 2-rank DDP training step on openreg (orccl).

Both ranks train the demo's GPT with DistributedDataParallel(device_ids=[r])
and run, in rounds, one block per mode (the order rotates each round, so drift
in the machine's load hits every mode alike):

    unprofiled   no profiler
    cpu          torch.profiler.profile(activities=[CPU]): torch's op recording
    cpu+device   profile(activities=[CPU, PrivateUse1]): openreg's device
                 recording on top (the runtime's activity records, the plugin)

A block enters the profiler, runs one untimed step, times --steps steps (each
ends in loss.item()) and leaves the profiler; the exit is timed apart, as it is
paid once per trace. Besides wall time, each step's CPU time is measured: the
CPU seconds the whole rank process spent in it (host thread, the simulated
device's executors, Gloo's threads). On this 2-core host the two ranks and
their devices keep both cores busy, so whatever the profiler costs in CPU shows
in the step's wall time; on a host with a real device it would overlap the
device's work instead. --no-ddp trains each rank's model alone (the same two
processes, no gradient all_reduce): what the profiler costs two processes that
share the cores, without DDP or orccl.

    python benchmarks/ddp_step_bench.py [--rounds 5] [--steps 10] [--size small] [--no-ddp]

Prints rank 0's median step time and CPU time per mode, their ratios, the
spread of the per-round ratios and the median exit of the full profiler.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ranks  # noqa: E402
from _profiled_blocks import MODE_NAMES, activities_by_mode, time_block  # noqa: E402


def build(args, device):
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from torch_openreg.demo.data import TEXT, CharacterVocabulary, PrefetchingBatches
    from torch_openreg.demo.model import GPT, config_for

    torch.manual_seed(0)
    vocabulary = CharacterVocabulary(TEXT)
    config = config_for(args.size, len(vocabulary))
    model = GPT(config).to(device)
    if not args.no_ddp:
        model = DistributedDataParallel(model, device_ids=[device.index])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, foreach=True)
    rank = int(os.environ["RANK"])
    batches = PrefetchingBatches(vocabulary.encode(TEXT), config.batch_size, config.context, device, rank)
    return model, optimizer, batches


def report(args, walls, cpus, exits, block_medians) -> None:
    wall = {m: statistics.median(walls[m]) for m in MODE_NAMES}
    cpu = {m: statistics.median(cpus[m]) for m in MODE_NAMES}
    what = "each rank alone (no DDP)" if args.no_ddp else "DDP over orccl"
    print(f"GPT '{args.size}', 2 ranks, {what}; {args.rounds} rounds x {args.steps} steps per mode; rank 0:")
    print(f"{'mode':<12} {'wall ms':>8} {'ratio':>6} {'CPU ms':>8} {'ratio':>6}")
    for m in MODE_NAMES:
        print(
            f"{m:<12} {wall[m] * 1e3:8.2f} {wall[m] / wall['unprofiled']:6.3f} "
            f"{cpu[m] * 1e3:8.2f} {cpu[m] / cpu['unprofiled']:6.3f}"
        )
    for m in MODE_NAMES[1:]:
        paired = [p / u for p, u in zip(block_medians[m], block_medians["unprofiled"])]
        print(
            f"  {m} / unprofiled, per round: median {statistics.median(paired):.3f}, "
            f"min {min(paired):.3f}, max {max(paired):.3f}"
        )
    print(
        f"  cpu+device / cpu (openreg's part): wall {wall['cpu+device'] / wall['cpu']:.3f}, "
        f"CPU {cpu['cpu+device'] / cpu['cpu']:.3f}"
    )
    print(f"  profiler exit {statistics.median(exits) * 1e3:.1f} ms (median, once per trace)")
    load = os.getloadavg()
    print(f"  load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")


def rank_main(args) -> int:
    import torch
    import torch.distributed as dist

    import torch_openreg  # noqa: F401
    from torch_openreg.demo.run import train_step

    activities = activities_by_mode()
    rank = int(os.environ["RANK"])
    torch.openreg.set_device(rank % torch.openreg.device_count())
    dist.init_process_group("cpu:gloo,openreg:orccl")
    device = torch.device("openreg", torch.openreg.current_device())
    model, optimizer, batches = build(args, device)

    def step():
        train_step(model, optimizer, batches)

    for mode in MODE_NAMES:  # warm-up: allocator, caches, Kineto's first init
        time_block(activities[mode], 2, step)

    walls = {m: [] for m in MODE_NAMES}
    cpus = {m: [] for m in MODE_NAMES}
    block_medians = {m: [] for m in MODE_NAMES}
    exits = []
    for r in range(args.rounds):
        turn = r % len(MODE_NAMES)
        for mode in MODE_NAMES[turn:] + MODE_NAMES[:turn]:
            dist.barrier()
            wall, cpu, exit_s = time_block(activities[mode], args.steps, step)
            walls[mode] += wall
            cpus[mode] += cpu
            block_medians[mode].append(statistics.median(wall))
            if mode == "cpu+device":
                exits.append(exit_s)
    if rank == 0:
        report(args, walls, cpus, exits, block_medians)
    dist.destroy_process_group()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--size", choices=["tiny", "small", "medium"], default="small")
    parser.add_argument("--no-ddp", action="store_true", help="each rank trains alone: no DDP, no all_reduce")
    args = parser.parse_args()
    if _ranks.is_rank():
        return rank_main(args)
    return _ranks.spawn(os.path.abspath(__file__), sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
