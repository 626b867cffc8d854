"""torch.compile on openreg against eager: a training step of the demo's GPT and ResNet.

For each model, one process builds two copies of the same weights, one eager and
one under torch.compile (default Inductor), and times the first compiled step
(the compile), then alternates, in rounds, a block of eager steps and a block of
compiled steps, and a block of compiled steps under torch.profiler
(activities=[CPU, PrivateUse1], entered before the block, one untimed step to
settle). Each step ends in loss.item(). Device device events per step (kernels, copies,
memsets) are counted in one profiled step of each.

    python benchmarks/compile_bench.py [--rounds 5] [--steps 10] [--models gpt,resnet] [--size small]

Prints medians per mode and the ratios compiled/eager and profiled/unprofiled.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time


def _workload(name: str, size: str, device):
    import torch

    from torch_openreg.demo.data import TEXT, CharacterVocabulary, PrefetchingBatches
    from torch_openreg.demo.model import GPT
    from torch_openreg.demo.model import config_for as gpt_config
    from torch_openreg.demo.resnet import ResNet, SyntheticImages
    from torch_openreg.demo.resnet import config_for as resnet_config

    torch.manual_seed(0)
    if name == "gpt":
        vocabulary = CharacterVocabulary(TEXT)
        config = gpt_config(size, len(vocabulary))
        model = GPT(config).to(device)
        batches = PrefetchingBatches(vocabulary.encode(TEXT), config.batch_size, config.context, device, 0)
    else:
        config = resnet_config(size)
        model = ResNet(config).to(device)
        batches = SyntheticImages(config, device, 0)
    return model, batches


def _trainer(model, compiled: bool):
    import torch

    from torch_openreg.demo.run import train_step

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    forward = torch.compile(model) if compiled else model
    return lambda batches: train_step(forward, optimizer, batches)


def _block(step, batches, count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        step(batches)
        times.append(time.perf_counter() - start)
    return times


def _kernels_per_step(step, batches) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        step(batches)
    # Device events (kernels, copies, memsets) carry the device's type, renamed "OPENREG".
    return sum(1 for e in prof.events() if e.device_type.name == "OPENREG")


def bench(name: str, args) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    device = torch.device("openreg", 0)
    model, batches = _workload(name, args.size, device)
    eager = _trainer(model, compiled=False)
    compiled = _trainer(copy.deepcopy(model), compiled=True)
    start = time.perf_counter()
    compiled(batches)
    first = time.perf_counter() - start
    for _ in range(2):
        eager(batches)
        compiled(batches)
    plain_eager, plain_compiled, profiled = [], [], []
    for _ in range(args.rounds):
        plain_eager += _block(eager, batches, args.steps)
        plain_compiled += _block(compiled, batches, args.steps)
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
        prof.__enter__()
        compiled(batches)
        profiled += _block(compiled, batches, args.steps)
        prof.__exit__(None, None, None)
    e, c, p = (statistics.median(t) for t in (plain_eager, plain_compiled, profiled))
    print(f"{name} '{args.size}', {args.rounds} rounds x {args.steps} steps (medians):")
    print(f"  first compiled step (compiles) {first:8.2f} s")
    print(f"  eager                {e * 1e3:8.2f} ms per step   {_kernels_per_step(eager, batches):5d} kernels")
    print(
        f"  compiled             {c * 1e3:8.2f} ms per step   {_kernels_per_step(compiled, batches):5d} kernels"
        f"   compiled/eager {c / e:.3f}"
    )
    print(f"  compiled, profiled   {p * 1e3:8.2f} ms per step   profiled/unprofiled {p / c:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--models", default="gpt,resnet")
    parser.add_argument("--size", default="small", choices=["tiny", "small", "medium"])
    args = parser.parse_args()
    import torch_openreg  # noqa: F401

    for name in args.models.split(","):
        bench(name, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
