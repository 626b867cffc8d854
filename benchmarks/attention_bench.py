"""openreg's fused attention against the math path, side by side in one run.

Two measurements, each alternating the two paths in rounds (the order rotates
each round, so drift in the machine's load hits both alike):

    gpt step     the demo GPT's training step (torch_openreg/demo), forward,
                 backward and AdamW, loss read back each step
    attention    scaled_dot_product_attention alone, causal, forward and
                 forward + backward, at a few shapes; each call ends in a
                 synchronisation

`fused` is the default choice (SDPBackend.OVERRIDEABLE: one flash-style kernel
per pass); `math` forces the math path with
torch.nn.attention.sdpa_kernel(SDPBackend.MATH). Prints per path the median
wall time (a GPT step waits for the device once, at the loss) and process CPU
time (host and device executor threads together: steadier than the wall time
on a loaded machine), the device kernels per call and their device time
(torch.profiler, 5 calls), the peak device memory an attention call adds, and
the math / fused ratios.

    python benchmarks/attention_bench.py [--rounds 7] [--steps 20] [--sizes small medium] [--calls 20]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import torch_openreg  # noqa: E402,F401
from torch_openreg.demo.data import TEXT, CharacterVocabulary, PrefetchingBatches  # noqa: E402
from torch_openreg.demo.model import GPT, config_for  # noqa: E402
from torch_openreg.demo.run import train_step  # noqa: E402

DEVICE = torch.device("openreg", 0)
PATHS = {"fused": contextlib.nullcontext, "math": lambda: sdpa_kernel(SDPBackend.MATH)}
# (batch, heads, sequence, head dim)
ATTENTION_SHAPES = [(8, 4, 32, 16), (8, 8, 256, 64), (2, 8, 1024, 64)]


def interleaved(rounds: int, measure) -> dict[str, list]:
    """measure(path) -> samples, run for each path in each round, the order rotating; per path, per round."""
    names = list(PATHS)
    times: dict[str, list] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            with PATHS[name]():
                times[name].append(measure(name))
    return times


def timed(fn, count: int) -> list[tuple[float, float]]:
    """(wall, process CPU) seconds of `count` calls of fn, one by one; the CPU time counts every thread
    (the host's and the device executors'), so it holds up better than the wall time on a loaded machine."""
    samples = []
    for _ in range(count):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        samples.append((time.perf_counter() - wall, time.process_time() - cpu))
    return samples


def kernels_per_call(fn, calls: int = 5) -> tuple[int, float]:
    """(device kernels, their device time in seconds) per call, from torch.profiler."""
    with profile(activities=[ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(calls):
            fn()
        torch.openreg.synchronize()
    kernels = [
        e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1 and "Sync" not in e.name
    ]
    return len(kernels) // calls, sum(e.device_time_total for e in kernels) / calls / 1e6


def peak_added_bytes(fn) -> int:
    torch.openreg.synchronize()
    before = torch.openreg.memory_allocated()
    torch.openreg.reset_peak_memory_stats()
    fn()
    torch.openreg.synchronize()
    return torch.openreg.max_memory_allocated() - before


def report(title: str, times, kernels: dict[str, tuple[int, float]], memory=None):
    """Medians over all calls per path (wall and CPU), the ratios of the medians, and the spread of the
    wall ratio over the rounds (min-max)."""

    def median(rounds, which):
        return statistics.median(sample[which] for block in rounds for sample in block)

    wall = {name: median(rounds, 0) for name, rounds in times.items()}
    cpu = {name: median(rounds, 1) for name, rounds in times.items()}
    paired = [median([m], 0) / median([f], 0) for m, f in zip(times["math"], times["fused"])]
    print(title)
    for name in PATHS:
        count, device_s = kernels[name]
        extra = "" if memory is None else f", peak +{memory[name] / 2**20:.2f} MiB"
        print(
            f"    {name:<6} wall {wall[name] * 1e3:9.3f} ms  cpu {cpu[name] * 1e3:9.3f} ms  "
            f"({count} kernels, {device_s * 1e3:.3f} ms device{extra})"
        )
    print(
        f"    math/fused: wall {wall['math'] / wall['fused']:.2f} (per round {min(paired):.2f}-{max(paired):.2f}), "
        f"cpu {cpu['math'] / cpu['fused']:.2f}, device time {kernels['math'][1] / kernels['fused'][1]:.2f}"
    )


def gpt_step(args, size: str) -> None:
    torch.manual_seed(0)
    vocabulary = CharacterVocabulary(TEXT)
    config = config_for(size, len(vocabulary))
    model = GPT(config).to(DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, foreach=True)
    batches = PrefetchingBatches(vocabulary.encode(TEXT), config.batch_size, config.context, DEVICE, 0)
    step = lambda: train_step(model, optimizer, batches)  # noqa: E731

    kernels = {}
    for name in PATHS:
        with PATHS[name]():
            for _ in range(3):  # warm-up: allocator pools, GEMM micro-kernels
                step()
            kernels[name] = kernels_per_call(step)

    def measure(_name):
        return timed(step, args.steps)

    times = interleaved(args.rounds, measure)
    title = f"gpt step '{size}' (context {config.context}, width {config.width}, {config.heads} heads)"
    report(title, times, kernels, None)


def attention(args, shape, backward: bool) -> None:
    batch, heads, length, dim = shape
    torch.manual_seed(0)
    q, k, v = (torch.randn(batch, heads, length, dim, device=DEVICE, requires_grad=backward) for _ in range(3))
    grad = torch.randn(batch, heads, length, dim, device=DEVICE)

    def call():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if backward:
            q.grad = k.grad = v.grad = None
            out.backward(grad)
        return out

    kernels, memory = {}, {}
    for name in PATHS:
        with PATHS[name]():
            call()
            kernels[name] = kernels_per_call(call)
            memory[name] = peak_added_bytes(call)

    def measure(_name):
        return timed(lambda: (call(), torch.openreg.synchronize()), args.calls)

    times = interleaved(args.rounds, measure)
    report(f"attention {shape} causal {'fwd+bwd' if backward else 'fwd'}", times, kernels, memory)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--sizes", nargs="+", default=["small", "medium"], choices=["tiny", "small", "medium"])
    args = parser.parse_args()
    load = os.getloadavg()
    print(
        f"{args.rounds} rounds per measurement, paths interleaved; load average {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f} on {os.cpu_count()} CPUs; float32"
    )
    for size in args.sizes:
        gpt_step(args, size)
    for shape in ATTENTION_SHAPES:
        for backward in (False, True):
            attention(args, shape, backward)
    return 0


if __name__ == "__main__":
    sys.exit(main())
