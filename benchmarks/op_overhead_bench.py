"""Host time per operator call on openreg, next to CPU eager.

An openreg op returns once its kernel is queued, so the time the calling
thread spends per call is the backend's host overhead: dispatch, meta
(shapes, dtypes), allocation, the kernel's argument packing and the runtime
launch. The tensors are tiny, so CPU eager's time is mostly the same
framework overhead plus a trivial computation: the ratio shows what openreg
adds on top of an eager call.

The main figure is the calling thread's CPU time (time.thread_time): the
device's executor threads run the kernels meanwhile, and on a small, shared
machine they and other processes preempt the caller, which inflates wall
time. Wall time per call is printed too.

Each round times --calls calls per op and device in one block (the device
is synchronized, untimed, after each block so the queue stays short), the
rounds interleave devices and ops, and the median over rounds is printed
with the best round. Nothing is asserted.

    python benchmarks/op_overhead_bench.py [--rounds 15] [--calls 2000] [--ops add,sum]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import torch  # noqa: E402

import torch_openreg  # noqa: E402,F401


def make_ops(device: str) -> dict[str, callable]:
    torch.manual_seed(0)
    a = torch.randn(16, 16, device=device)
    b = torch.randn(16, 16, device=device)
    v = torch.randn(16, device=device)
    inplace = torch.randn(16, 16, device=device)
    return {
        "add": lambda: torch.add(a, b),
        "add_ (in-place)": lambda: inplace.add_(b),
        "mul scalar": lambda: a * 2.0,
        "relu": lambda: torch.relu(a),
        "sum": lambda: a.sum(),
        "sum(dim)": lambda: a.sum(1),
        "mm": lambda: torch.mm(a, b),
        "softmax": lambda: torch.softmax(a, -1),
        "add bcast": lambda: a + v,
    }


def time_block(fn, calls: int, device: str) -> tuple[float, float]:
    """(thread CPU, wall) microseconds per call."""
    start_cpu, start_wall = time.thread_time(), time.perf_counter()
    for _ in range(calls):
        fn()
    cpu, wall = time.thread_time() - start_cpu, time.perf_counter() - start_wall
    if device == "openreg":
        torch.openreg.synchronize()
    return cpu / calls * 1e6, wall / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--ops", default="", help="comma-separated subset of the op names")
    args = parser.parse_args()

    devices = ("cpu", "openreg")
    ops = {device: make_ops(device) for device in devices}
    names = [n for n in ops["cpu"] if not args.ops or n in args.ops.split(",")]
    for device in devices:  # warm up: first-call caches, the allocator's pools
        for name in names:
            time_block(ops[device][name], 200, device)

    samples = {(name, device): [] for name in names for device in devices}
    for round_index in range(args.rounds):
        order = devices if round_index % 2 == 0 else devices[::-1]
        for name in names:
            for device in order:
                samples[(name, device)].append(time_block(ops[device][name], args.calls, device))

    print(
        f"{args.rounds} rounds x {args.calls} calls, torch {torch.__version__}, {os.cpu_count()} CPUs; "
        "median (best) microseconds per call"
    )
    print(
        f"{'op':16s} {'openreg CPU':>16s} {'cpu CPU':>14s} {'openreg/cpu':>11s}   {'openreg wall':>12s} {'cpu wall':>9s}"
    )
    for name in names:
        dev = samples[(name, "openreg")]
        cpu = samples[(name, "cpu")]
        ratio = statistics.median(d[0] / c[0] for d, c in zip(dev, cpu))

        def cell(values, index):
            column = [v[index] for v in values]
            return f"{statistics.median(column):7.2f} ({min(column):5.2f})"

        print(
            f"{name:16s} {cell(dev, 0):>16s} {cell(cpu, 0):>14s} {ratio:11.2f}   "
            f"{statistics.median(v[1] for v in dev):12.2f} {statistics.median(v[1] for v in cpu):9.2f}"
        )


if __name__ == "__main__":
    main()
