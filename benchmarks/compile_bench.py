"""torch.compile on openreg against eager: a training step of the demo's GPT and ResNet.

For each model, one process builds three copies of the same weights: eager, the
model under torch.compile (default Inductor; the optimizer eager), and the model
and the optimizer's step compiled (as PyTorch's tutorial on compiling the
optimizer does). It times each compiled trainer's first step (the compile), then
alternates, in rounds, a block of steps of each and a block of the fully compiled
steps under torch.profiler (activities=[CPU, PrivateUse1], entered before the
block, one untimed step to settle). Each step is forward, backward, gradient
clipping, AdamW (foreach) and loss.item(). Device events per step (kernels,
copies, memsets) are counted in one profiled step of each.

    python benchmarks/compile_bench.py [--rounds 5] [--steps 10] [--models gpt,resnet] [--size small]

Prints medians per mode and the ratios compiled/eager and profiled/unprofiled,
of wall time and of CPU time (the host thread's, and the other threads', which
is the device's work): on a shared machine the CPU times are the steadier.
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


class _CompiledOptimizer:
    """The optimizer with its step compiled (as PyTorch's tutorial on compiling the optimizer does)."""

    def __init__(self, optimizer):
        import torch

        self._optimizer = optimizer
        self._step = torch.compile(optimizer.step)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        self._step()


def _trainer(model, mode: str):
    """A training step: "eager", "model" (the model compiled) or "all" (the optimizer step too)."""
    import torch

    from torch_openreg.demo.run import train_step

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    forward = model if mode == "eager" else torch.compile(model)
    if mode == "all":
        optimizer = _CompiledOptimizer(optimizer)
    return lambda batches: train_step(forward, optimizer, batches)


def _block(step, batches, count: int) -> list[tuple[float, float, float]]:
    """(wall, host CPU, other threads' CPU) seconds of each step.

    The host is the calling thread; the other threads' CPU time is the device's
    work (executor threads, the thread teams of the ATen kernels they run). The
    CPU times hold still when other processes share the cores; wall time does not.
    """
    times = []
    for _ in range(count):
        wall, process, host = time.perf_counter(), time.process_time(), time.thread_time()
        step(batches)
        host = time.thread_time() - host
        times.append((time.perf_counter() - wall, host, time.process_time() - process - host))
    return times


def _medians(samples: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    return tuple(statistics.median(column) for column in zip(*samples, strict=True))


def _kernels_per_step(step, batches) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        step(batches)
    # Device events (kernels, copies, memsets) carry the device's type, renamed "OPENREG".
    return sum(1 for e in prof.events() if e.device_type.name == "OPENREG")


def _first_steps(trainers: dict, batches) -> dict[str, float]:
    """Seconds of each compiled trainer's first step (its compile), then two more steps of each to settle."""
    first = {}
    for mode, step in trainers.items():
        start = time.perf_counter()
        step(batches)
        first[mode] = time.perf_counter() - start
    for _ in range(2):
        for step in trainers.values():
            step(batches)
    return first


def _profiled_block(step, batches, count: int) -> list[tuple[float, float, float]]:
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
    prof.__enter__()
    step(batches)
    times = _block(step, batches, count)
    prof.__exit__(None, None, None)
    return times


def _report(name: str, args, trainers: dict, first: dict, samples: dict, batches) -> None:
    medians = {mode: _medians(times) for mode, times in samples.items()}
    e, e_host, e_device = medians["eager"]
    print(f"{name} '{args.size}', {args.rounds} rounds x {args.steps} steps (medians; CPU ms: host / device threads):")
    print(f"  first step, model compiled {first['model']:8.2f} s; with the optimizer step {first['all']:8.2f} s")
    for mode, label in (("eager", "eager"), ("model", "model compiled"), ("all", "model + optimizer compiled")):
        wall, host, device = medians[mode]
        print(
            f"  {label:27s} {wall * 1e3:8.2f} ms per step   {_kernels_per_step(trainers[mode], batches):5d} kernels"
            f"   CPU {host * 1e3:7.2f} / {device * 1e3:7.2f}   against eager: wall {wall / e:.3f}"
            f"  host CPU {host / e_host:.3f}  device CPU {device / e_device:.3f}"
        )
    wall = medians["all"][0]
    print(
        f"  {'profiled (all compiled)':27s} {medians['profiled'][0] * 1e3:8.2f} ms per step"
        f"   profiled/unprofiled {medians['profiled'][0] / wall:.3f}"
    )


def bench(name: str, args) -> None:
    import torch

    device = torch.device("openreg", 0)
    model, batches = _workload(name, args.size, device)
    trainers = {mode: _trainer(copy.deepcopy(model), mode) for mode in ("eager", "model", "all")}
    first = _first_steps(trainers, batches)
    samples = {mode: [] for mode in (*trainers, "profiled")}
    for _ in range(args.rounds):
        for mode, step in trainers.items():
            samples[mode] += _block(step, batches, args.steps)
        samples["profiled"] += _profiled_block(trainers["all"], batches, args.steps)
    _report(name, args, trainers, first, samples, batches)


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
