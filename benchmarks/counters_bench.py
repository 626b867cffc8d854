"""What the device's counters cost a training step of the demo's model (issue 44), side by side in one run.

Four modes, interleaved in rounds (the order rotates each round):

    unprofiled   no profiler: what every step pays for the counters' always-on parts (the allocator's one
                 atomic store per allocation, one atomic add per copy, one atomic load per launch)
    device       torch.profiler.profile(activities=[CPU, PrivateUse1]), nothing asked of the counters
    kernel       the same with profiler_metrics = every per-kernel metric, profiler_measure_per_kernel=True
    all          every per-kernel metric and every counter track (1 ms period)

Each block enters the profiler, settles with one untimed step, times --steps steps (each ends in loss.item()),
then exits (timed apart). Prints per mode the median step and exit time, and the ratios of the medians:
device / unprofiled is what tracing costs; kernel / device and all / device are what asking for counters adds.

    python benchmarks/counters_bench.py [--rounds 5] [--steps 15] [--size small]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import torch  # noqa: E402
from _profiled_blocks import time_block  # noqa: E402
from torch._C._profiler import _ExperimentalConfig  # noqa: E402
from torch.profiler import ProfilerActivity  # noqa: E402

import torch_openreg  # noqa: E402,F401
from torch_openreg.demo.data import TEXT, CharacterVocabulary, PrefetchingBatches  # noqa: E402
from torch_openreg.demo.model import GPT, config_for  # noqa: E402
from torch_openreg.demo.run import train_step  # noqa: E402

KERNEL = ["flops", "bytes_read", "bytes_written", "busy_ns", "flops_per_s", "bytes_per_s"]
COUNTERS = ["memory_allocated", "memory_reserved", "queued_tasks", "copy_bandwidth"]
DEVICE = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
MODES = {
    "unprofiled": (None, None),
    "device": (DEVICE, None),
    "kernel": (DEVICE, KERNEL),
    "all": (DEVICE, KERNEL + COUNTERS),
}


def run_block(mode: str, steps: int, step) -> tuple[list[float], float]:
    activities, metrics = MODES[mode]
    options = {}
    if metrics:
        options["experimental_config"] = _ExperimentalConfig(profiler_metrics=metrics, profiler_measure_per_kernel=True)
    walls, _, exit_s = time_block(activities, steps, step, **options)
    return walls, exit_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--size", default="small", choices=["tiny", "small", "medium"])
    args = parser.parse_args()

    torch.manual_seed(0)
    vocabulary = CharacterVocabulary(TEXT)
    config = config_for(args.size, len(vocabulary))
    device = torch.device("openreg", 0)
    model = GPT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, foreach=True)
    batches = PrefetchingBatches(vocabulary.encode(TEXT), config.batch_size, config.context, device, 0)
    step = lambda: train_step(model, optimizer, batches)  # noqa: E731
    for mode in MODES:  # warm-up
        run_block(mode, 2, step)

    names = list(MODES)
    steps: dict[str, list[float]] = {m: [] for m in names}
    exits: dict[str, list[float]] = {m: [] for m in names}
    for r in range(args.rounds):
        for mode in names[r % len(names) :] + names[: r % len(names)]:
            times, exit_s = run_block(mode, args.steps, step)
            steps[mode] += times
            exits[mode].append(exit_s)

    load = os.getloadavg()
    print(
        f"demo model '{args.size}'; {args.rounds} rounds x {args.steps} timed steps per mode, interleaved; "
        f"load average {load[0]:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"{'mode':<12} {'median ms':>10} {'exit ms':>8}")
    medians = {m: statistics.median(steps[m]) for m in names}
    for mode in names:
        exit_ms = f"{statistics.median(exits[mode]) * 1e3:8.1f}" if MODES[mode][0] else f"{'-':>8}"
        print(f"{mode:<12} {medians[mode] * 1e3:10.3f} {exit_ms}")
    print(f"device / unprofiled {medians['device'] / medians['unprofiled']:.3f}")
    print(f"kernel / device     {medians['kernel'] / medians['device']:.3f}")
    print(f"all / device        {medians['all'] / medians['device']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
