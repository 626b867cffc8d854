"""Convolutions on openreg next to CPU eager: host overhead per launch, and the device kernels' own time.

Two comparisons per op, measured side by side in one run:

- *host*: the calling thread's CPU time (time.thread_time) per call. An
  openreg call returns once its kernels are queued, so this is the backend's
  launch overhead (dispatch, shape checks, allocation, argument packing, the
  runtime launch); CPU eager's time for the same call includes the
  computation itself.
- *device*: the openreg kernels' own time per call, from torch.profiler's
  key_averages() (the device clock of each kernel), against the time of CPU's
  oneDNN (mkldnn) convolution for the same shapes and dtype, called directly
  (aten::mkldnn_convolution for a forward; aten::convolution_backward on CPU,
  which picks its oneDNN backend, for a backward; the backend CPU selects is
  printed per row).

The openreg kernels run CPU's own convolution (oneDNN for float32) on an
executor thread, so the device ratio is what running it there costs (the
float conversions and contiguous copies of the operands, the executor's
threads); before issue 18 they ran an explicit im2col and a GEMM. Rounds
interleave the devices; medians (and the best round) are printed. Nothing is
asserted.

    python benchmarks/conv_bench.py [--rounds 7] [--calls 20] [--ops stem,3x3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass, field

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import torch_openreg  # noqa: E402,F401


@dataclass(frozen=True)
class ConvOp:
    name: str
    input: tuple[int, ...]
    weight: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    groups: int = 1
    transposed: bool = False
    backward: bool = False
    dilation: tuple[int, ...] = field(default=())

    def dilations(self) -> list[int]:
        return list(self.dilation or (1,) * len(self.stride))


OPS = [
    ConvOp("stem 7x7/2 3->32 64px", (8, 3, 64, 64), (32, 3, 7, 7), (2, 2), (3, 3)),
    ConvOp("3x3 32->32 16px", (8, 32, 16, 16), (32, 32, 3, 3), (1, 1), (1, 1)),
    ConvOp("3x3/2 64->128 16px", (8, 64, 16, 16), (128, 64, 3, 3), (2, 2), (1, 1)),
    ConvOp("1x1 128->128 8px", (8, 128, 8, 8), (128, 128, 1, 1), (1, 1), (0, 0)),
    ConvOp("depthwise 3x3 64 16px", (8, 64, 16, 16), (64, 1, 3, 3), (1, 1), (1, 1), groups=64),
    ConvOp("1d k5 64->64 L256", (8, 64, 256), (64, 64, 5), (1,), (2,)),
    ConvOp("3d 3x3x3 16->16 8^3", (2, 16, 8, 8, 8), (16, 16, 3, 3, 3), (1, 1, 1), (1, 1, 1)),
    ConvOp("transpose 4x4/2 32->16", (8, 32, 16, 16), (32, 16, 4, 4), (2, 2), (1, 1), transposed=True),
    ConvOp("3x3 32->32 16px bwd", (8, 32, 16, 16), (32, 32, 3, 3), (1, 1), (1, 1), backward=True),
    ConvOp("3x3/2 64->128 16px bwd", (8, 64, 16, 16), (128, 64, 3, 3), (2, 2), (1, 1), backward=True),
]


def output_shape(op: ConvOp) -> tuple[int, ...]:
    x, w = torch.empty(op.input, device="meta"), torch.empty(op.weight, device="meta")
    return torch.ops.aten.convolution(
        x, w, None, list(op.stride), list(op.padding), op.dilations(), op.transposed, [0] * len(op.stride), op.groups
    ).shape


def make_call(op: ConvOp, device: str):
    """The eager call timed on both devices: a forward convolution, or its backward (input and weight grads)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(op.input, generator=g).to(device)
    w = torch.randn(op.weight, generator=g).to(device)
    b = torch.randn(op.weight[1] * op.groups if op.transposed else op.weight[0], generator=g).to(device)
    stride, padding, dilation = list(op.stride), list(op.padding), op.dilations()
    output_padding = [0] * len(stride)
    if op.backward:
        grad = torch.randn(output_shape(op), generator=g).to(device)
        return lambda: torch.ops.aten.convolution_backward(
            grad,
            x,
            w,
            [b.numel()],
            stride,
            padding,
            dilation,
            op.transposed,
            output_padding,
            op.groups,
            [True, True, True],
        )
    return lambda: torch.ops.aten.convolution(
        x, w, b, stride, padding, dilation, op.transposed, output_padding, op.groups
    )


def make_mkldnn_call(op: ConvOp):
    """CPU's oneDNN convolution for the same shapes, without the framework's routing above it."""
    if op.backward or op.transposed:
        return make_call(op, "cpu")  # convolution_backward / transposed: CPU routes to its oneDNN backend
    g = torch.Generator().manual_seed(0)
    x = torch.randn(op.input, generator=g)
    w = torch.randn(op.weight, generator=g)
    b = torch.randn(op.weight[0], generator=g)
    return lambda: torch.ops.aten.mkldnn_convolution(
        x, w, b, list(op.padding), list(op.stride), op.dilations(), op.groups
    )


def cpu_backend(op: ConvOp) -> str:
    x, w = torch.empty(op.input), torch.empty(op.weight)
    backend = torch._C._select_conv_backend(
        x,
        w,
        None,
        list(op.stride),
        list(op.padding),
        op.dilations(),
        op.transposed,
        [0] * len(op.stride),
        op.groups,
        None,
    )
    name = str(backend).split(".")[-1]
    return "MkldnnTranspose" if name == "???" and op.transposed else name


def host_us(fn, calls: int, device: str) -> float:
    start = time.thread_time()
    for _ in range(calls):
        fn()
    elapsed = time.thread_time() - start
    if device == "openreg":
        torch.openreg.synchronize()  # untimed: keeps the queue short
    return elapsed / calls * 1e6


def wall_us(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def device_us(fn, calls: int) -> tuple[float, list[str]]:
    """The openreg kernels' own device time per call, and their names."""
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(calls):
            fn()
        torch.openreg.synchronize()
    rows = [
        a
        for a in prof.key_averages()
        if a.device_type == torch.autograd.DeviceType.PrivateUse1 and a.key.startswith("conv")
    ]
    return sum(a.self_device_time_total for a in rows) / calls, sorted(a.key for a in rows)


def median_best(values: list[float]) -> str:
    return f"{statistics.median(values):9.1f} ({min(values):8.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--ops", default="", help="comma-separated substrings of the op names")
    args = parser.parse_args()
    ops = [op for op in OPS if not args.ops or any(s in op.name for s in args.ops.split(","))]

    calls = {
        op: {"openreg": make_call(op, "openreg"), "cpu": make_call(op, "cpu"), "mkldnn": make_mkldnn_call(op)}
        for op in ops
    }
    for op in ops:  # warm up: oneDNN's primitive cache, the allocator's pools
        host_us(calls[op]["openreg"], 3, "openreg")
        host_us(calls[op]["cpu"], 3, "cpu")
        wall_us(calls[op]["mkldnn"], 3)

    samples = {op: {k: [] for k in ("host_openreg", "host_cpu", "device", "mkldnn")} for op in ops}
    kernels = {}
    for round_index in range(args.rounds):
        for op in ops:
            s = samples[op]
            order = ("openreg", "cpu") if round_index % 2 == 0 else ("cpu", "openreg")
            for device in order:
                s[f"host_{device}"].append(host_us(calls[op][device], args.calls, device))
            device_time, kernels[op] = device_us(calls[op]["openreg"], args.calls)
            s["device"].append(device_time)
            s["mkldnn"].append(wall_us(calls[op]["mkldnn"], args.calls))

    print(
        f"{args.rounds} rounds x {args.calls} calls, float32, torch {torch.__version__}, {os.cpu_count()} CPUs, "
        f"{torch.get_num_threads()} intra-op threads; median (best round) microseconds per call"
    )
    print(
        f"{'op':24s} | {'openreg host':>20s} {'cpu eager':>20s} {'ratio':>6s} | {'openreg device':>20s} "
        f"{'cpu oneDNN':>20s} {'ratio':>6s} | cpu backend"
    )
    for op in ops:
        s = samples[op]
        host_ratio = statistics.median(d / c for d, c in zip(s["host_openreg"], s["host_cpu"]))
        device_ratio = statistics.median(d / c for d, c in zip(s["device"], s["mkldnn"]))
        print(
            f"{op.name:24s} | {median_best(s['host_openreg']):>20s} {median_best(s['host_cpu']):>20s} "
            f"{host_ratio:6.2f} | {median_best(s['device']):>20s} {median_best(s['mkldnn']):>20s} "
            f"{device_ratio:6.2f} | {cpu_backend(op)}"
        )
    print("\nkernels per call:")
    for op in ops:
        print(f"  {op.name:24s} {', '.join(kernels[op])}")


if __name__ == "__main__":
    main()
