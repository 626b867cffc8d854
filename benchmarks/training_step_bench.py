"""What profiling costs a training step of the demo's model on openreg.

Three modes, interleaved in rounds (the order rotates each round, so drift in
the machine's load hits every mode alike):

    unprofiled   no profiler
    cpu          torch.profiler.profile(activities=[CPU])
    cpu+device   torch.profiler.profile(activities=[CPU, PrivateUse1])

A round runs each mode for one block: the profiler is entered, one untimed
step settles it, then --steps steps are timed one by one (each ends in
loss.item(), so it includes waiting for the device), then the profiler exits.
The exit (stop, processTrace, torch's post-processing) is timed apart: it is
paid once per trace, not per step.

Prints per mode the median step time and its spread (10th-90th percentile),
the median exit time, and the ratios of the medians; the goal is that
cpu+device costs at most 5 % more per step than cpu. Also the ratio of the
per-round block medians, whose spread shows how steady the comparison is.

    python benchmarks/training_step_bench.py [--rounds 7] [--steps 20] [--size small] [--demo-options]

--demo-options profiles with the demo's record_shapes, profile_memory and
with_stack, in both profiled modes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import torch  # noqa: E402
from _profiled_blocks import activities_by_mode, time_block  # noqa: E402
from torch.profiler import profile  # noqa: E402

import torch_openreg  # noqa: E402,F401
from torch_openreg.demo.data import TEXT, CharacterVocabulary, PrefetchingBatches  # noqa: E402
from torch_openreg.demo.model import GPT, config_for  # noqa: E402
from torch_openreg.demo.run import train_step  # noqa: E402

MODES = activities_by_mode()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_block(mode: str, steps: int, model, optimizer, batches, demo_options: bool) -> tuple[list[float], float]:
    options = dict(record_shapes=True, profile_memory=True, with_stack=True) if demo_options else {}
    walls, _, exit_s = time_block(MODES[mode], steps, lambda: train_step(model, optimizer, batches), **options)
    return walls, exit_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--size", default="small", choices=["tiny", "small", "medium"])
    parser.add_argument("--demo-options", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(0)
    vocabulary = CharacterVocabulary(TEXT)
    config = config_for(args.size, len(vocabulary))
    device = torch.device("openreg", 0)
    model = GPT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, foreach=True)
    batches = PrefetchingBatches(vocabulary.encode(TEXT), config.batch_size, config.context, device, 0)

    # Kernels launched per step, counted once under the profiler (for the record).
    with profile(activities=MODES["cpu+device"]) as prof:
        train_step(model, optimizer, batches)
    device_events = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1)
    cpu_ops = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU)
    for mode in MODES:  # warm-up: allocator, caches, Kineto's first init
        run_block(mode, 3, model, optimizer, batches, args.demo_options)

    names = list(MODES)
    steps: dict[str, list[float]] = {m: [] for m in names}
    exits: dict[str, list[float]] = {m: [] for m in names}
    block_medians: dict[str, list[float]] = {m: [] for m in names}
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for mode in order:
            times, exit_s = run_block(mode, args.steps, model, optimizer, batches, args.demo_options)
            steps[mode] += times
            exits[mode].append(exit_s)
            block_medians[mode].append(statistics.median(times))

    load = os.getloadavg()
    print(
        f"demo model '{args.size}' ({config.layers} blocks, width {config.width}, batch {config.batch_size}, "
        f"context {config.context}); one step: {cpu_ops} host events, {device_events} device activities"
    )
    print(
        f"{args.rounds} rounds x {args.steps} timed steps per mode, interleaved; profiler options: "
        f"{'record_shapes, profile_memory, with_stack' if args.demo_options else 'defaults'}; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"{'mode':<12} {'median ms':>10} {'p10 ms':>8} {'p90 ms':>8} {'exit ms':>8}")
    medians = {}
    for mode in names:
        medians[mode] = statistics.median(steps[mode])
        exit_ms = f"{statistics.median(exits[mode]) * 1e3:8.1f}" if MODES[mode] else f"{'-':>8}"
        print(
            f"{mode:<12} {medians[mode] * 1e3:10.3f} {percentile(steps[mode], 0.1) * 1e3:8.3f} "
            f"{percentile(steps[mode], 0.9) * 1e3:8.3f} {exit_ms}"
        )
    paired = [d / c for d, c in zip(block_medians["cpu+device"], block_medians["cpu"])]
    cpu_cost = medians["cpu"] / medians["unprofiled"]
    device_cost = medians["cpu+device"] / medians["cpu"]
    print(f"cpu / unprofiled        {cpu_cost:.3f}")
    print(f"cpu+device / unprofiled {medians['cpu+device'] / medians['unprofiled']:.3f}")
    print(
        f"cpu+device / cpu        {device_cost:.3f}  (per-round ratios: median {statistics.median(paired):.3f}, "
        f"min {min(paired):.3f}, max {max(paired):.3f})"
    )
    print(f"goal: cpu+device / cpu <= 1.05: {'met' if device_cost <= 1.05 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
