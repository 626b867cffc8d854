"""Convolutions on openreg agree with CPU, forward and every gradient, and show up in traces as CUDA's do.

Each configuration runs F.conv*/F.conv_transpose* on CPU and on openreg copies
of the same inputs, backpropagates the same upstream gradient, and compares
the output and the gradients of input, weight and bias within the dtype's
tolerance. The grid covers every geometry (1-d/2-d/3-d, transposed, stride,
padding, dilation, groups, depthwise, bias or not) in float32 and float64 and
a representative part of it in the reduced dtypes and in complex64.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

F64, F32, F16, BF16, C64 = torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64
DEVICE = torch.autograd.DeviceType.PrivateUse1

FORWARD = {
    (1, False): F.conv1d,
    (2, False): F.conv2d,
    (3, False): F.conv3d,
    (1, True): F.conv_transpose1d,
    (2, True): F.conv_transpose2d,
    (3, True): F.conv_transpose3d,
}
LAYOUT = {1: "ncw", 2: "nchw", 3: "ncdhw"}


@dataclass(frozen=True)
class Conv:
    name: str
    input: tuple[int, ...]  # N, C, *spatial
    out_channels: int
    kernel: tuple[int, ...]
    transposed: bool = False
    bias: bool = True
    kwargs: dict = field(default_factory=dict)
    dtypes: tuple[torch.dtype, ...] = (F32, F64)

    @property
    def dims(self) -> int:
        return len(self.kernel)

    def weight_shape(self) -> tuple[int, ...]:
        groups = self.kwargs.get("groups", 1)
        in_channels = self.input[1]
        if self.transposed:
            return (in_channels, self.out_channels // groups, *self.kernel)
        return (self.out_channels, in_channels // groups, *self.kernel)


REDUCED = (F32, F64, BF16, F16)
CONVS = [
    Conv("2d", (2, 3, 8, 7), 4, (3, 3), dtypes=REDUCED),
    Conv(
        "2d_strided_padded",
        (2, 3, 9, 8),
        5,
        (3, 2),
        kwargs=dict(stride=(2, 1), padding=(1, 2)),
        dtypes=REDUCED + (C64,),
    ),
    Conv("2d_dilated_no_bias", (1, 2, 10, 9), 3, (3, 3), bias=False, kwargs=dict(dilation=(2, 3), padding=1)),
    Conv("2d_grouped", (2, 4, 6, 6), 6, (3, 3), kwargs=dict(groups=2, padding=1), dtypes=REDUCED),
    Conv("2d_depthwise", (2, 4, 7, 7), 8, (3, 3), kwargs=dict(groups=4, stride=2, padding=1)),
    Conv("2d_1x1", (3, 5, 4, 4), 2, (1, 1)),
    Conv("1d", (2, 3, 11), 4, (3,), kwargs=dict(padding=1), dtypes=REDUCED),
    Conv("1d_strided_dilated_grouped", (2, 4, 16), 6, (3,), kwargs=dict(stride=2, dilation=2, groups=2)),
    Conv("3d", (1, 2, 5, 6, 4), 3, (3, 2, 3), kwargs=dict(padding=(1, 0, 1)), dtypes=REDUCED),
    Conv(
        "3d_strided_depthwise_no_bias",
        (2, 3, 6, 5, 5),
        3,
        (3, 3, 3),
        bias=False,
        kwargs=dict(stride=2, padding=1, groups=3),
    ),
    # Complex convolutions reach the backend as three real ones (ATen's Gauss trick).
    Conv("transpose2d", (2, 3, 5, 4), 4, (3, 3), transposed=True, dtypes=REDUCED + (C64,)),
    Conv(
        "transpose2d_strided_output_padding",
        (2, 4, 4, 5),
        6,
        (3, 3),
        transposed=True,
        kwargs=dict(stride=2, padding=1, output_padding=1, groups=2),
    ),
    Conv(
        "transpose2d_dilated_no_bias",
        (1, 2, 4, 4),
        3,
        (2, 3),
        transposed=True,
        bias=False,
        kwargs=dict(dilation=2, stride=(1, 2)),
    ),
    Conv("transpose1d", (2, 3, 7), 2, (4,), transposed=True, kwargs=dict(stride=3, padding=1)),
    Conv(
        "transpose3d",
        (1, 2, 3, 4, 3),
        4,
        (2, 3, 2),
        transposed=True,
        kwargs=dict(stride=2, output_padding=(1, 0, 0)),
        dtypes=REDUCED,
    ),
    Conv("transpose3d_depthwise", (1, 3, 3, 3, 3), 3, (3, 3, 3), transposed=True, kwargs=dict(groups=3, padding=1)),
]
CASES = [pytest.param(c, d, id=f"{c.name}-{str(d).removeprefix('torch.')}") for c in CONVS for d in c.dtypes]


def tolerance(dtype: torch.dtype, reference: torch.Tensor) -> dict:
    """torch.testing's defaults, with the reduced dtypes' absolute error scaled to the values' magnitude:
    sums of many products rounded once differ from CPU's by a few units in the last place of the largest term."""
    if dtype in (F16, BF16):
        scale = reference.abs().max().item()
        return dict(rtol=1.6e-2 if dtype == BF16 else 1e-3, atol=(8e-3 if dtype == BF16 else 1e-3) * max(scale, 1.0))
    return {}


def run_conv(conv: Conv, dtype: torch.dtype, device: str, host: dict[str, torch.Tensor]):
    inputs = {k: v.to(device, copy=True).requires_grad_() for k, v in host.items() if k != "grad"}
    fn = FORWARD[(conv.dims, conv.transposed)]
    out = fn(inputs["x"], inputs["w"], inputs.get("b"), **conv.kwargs)
    out.backward(host["grad"].to(device))
    return out, {k: v.grad for k, v in inputs.items()}


def host_inputs(conv: Conv, dtype: torch.dtype, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    host = {
        "x": torch.randn(conv.input, generator=g).to(dtype),
        "w": torch.randn(conv.weight_shape(), generator=g).to(dtype),
    }
    if conv.bias:
        host["b"] = torch.randn(conv.out_channels, generator=g).to(dtype)
    fn = FORWARD[(conv.dims, conv.transposed)]
    shape = fn(
        torch.empty(conv.input, device="meta"), torch.empty(conv.weight_shape(), device="meta"), None, **conv.kwargs
    ).shape
    host["grad"] = torch.randn(shape, generator=g).to(dtype)
    return host


@pytest.mark.parametrize("conv, dtype", CASES)
def test_forward_and_every_gradient_match_cpu(conv: Conv, dtype: torch.dtype, fallback_counts):
    host = host_inputs(conv, dtype)
    expected, expected_grads = run_conv(conv, dtype, "cpu", host)
    actual, actual_grads = run_conv(conv, dtype, "openreg", host)
    assert actual.device.type == "openreg" and actual.dtype == dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected, **tolerance(dtype, expected))
    assert set(actual_grads) == set(expected_grads) == ({"x", "w", "b"} if conv.bias else {"x", "w"})
    for name, grad in expected_grads.items():
        assert grad.abs().sum() > 0, name  # a gradient the comparison cannot miss
        torch.testing.assert_close(
            actual_grads[name].cpu(), grad, **tolerance(dtype, grad), msg=lambda m: f"{name}: {m}"
        )
    assert fallback_counts() == {}


def test_channels_last_and_strided_inputs_match_cpu():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 8, 8, generator=g).to(memory_format=torch.channels_last)
    w = torch.randn(4, 3, 3, 3, generator=g)
    expected = F.conv2d(x[:, :, ::2], w, padding=1)
    actual = F.conv2d(x.to("openreg")[:, :, ::2], w.to("openreg"), padding=1)
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize(
    "input_format, weight_format",
    [
        (torch.channels_last, torch.contiguous_format),
        (torch.contiguous_format, torch.channels_last),
        (torch.contiguous_format, torch.contiguous_format),
    ],
    ids=["input_nhwc", "weight_nhwc", "nchw"],
)
@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "transposed"])
def test_results_keep_cpus_memory_format(input_format, weight_format, transposed):
    """Channels-last operands give channels-last outputs and gradients, as on CPU (and CUDA)."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 4, 6, 6, generator=g).to(memory_format=input_format)
    w = torch.randn(4, 2, 3, 3, generator=g).to(memory_format=weight_format)
    args = ([2, 2], [1, 1], [1, 1], transposed, [1, 1] if transposed else [0, 0], 2)
    expected = torch.ops.aten.convolution(x, w, None, *args)
    actual = torch.ops.aten.convolution(x.to("openreg"), w.to("openreg"), None, *args)
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual.cpu(), expected)
    grad = torch.randn(expected.shape, generator=g)
    expected_grads = torch.ops.aten.convolution_backward(grad, x, w, None, *args, [True, True, False])
    actual_grads = torch.ops.aten.convolution_backward(
        grad.to("openreg"), x.to("openreg"), w.to("openreg"), None, *args, [True, True, False]
    )
    for a, e in zip(actual_grads[:2], expected_grads[:2]):
        assert a.stride() == e.stride()
        torch.testing.assert_close(a.cpu(), e)


@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "transposed"])
@pytest.mark.parametrize(
    "mask", [(True, False, False), (False, True, False), (False, False, True), (False, True, True), (True, True, True)]
)
def test_backward_computes_only_the_gradients_asked_for(mask, transposed):
    """convolution_backward's output_mask: one kernel per gradient asked for, none for the others."""
    conv = Conv("mask", (2, 4, 6, 6), 6, (3, 3), transposed=transposed, kwargs=dict(groups=2, stride=2, padding=1))
    host = host_inputs(conv, F32)
    stride, padding, dilation = [2, 2], [1, 1], [1, 1]
    output_padding = [0, 0]

    def call(grad, x, w):
        return torch.ops.aten.convolution_backward(
            grad, x, w, [conv.out_channels], stride, padding, dilation, transposed, output_padding, 2, list(mask)
        )

    expected = call(host["grad"], host["x"], host["w"])
    on_device = [host[k].to("openreg") for k in ("grad", "x", "w")]
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        actual = call(*on_device)
        torch.openreg.synchronize()
    prefix = "conv_transpose2d" if transposed else "conv2d"
    wanted = [
        name
        for name, asked in zip(
            [
                f"{prefix}_bwd_data_nchw_f32",
                f"{prefix}_bwd_filter_nchw_f32",
                "conv_bwd_bias_reduce_f32",
            ],
            mask,
        )
        if asked
    ]
    kernels = [e.name for e in prof.events() if e.device_type == DEVICE and e.activity_type != "cuda_sync"]
    assert kernels == wanted
    for asked, got, reference in zip(mask, actual, expected):
        if asked:
            torch.testing.assert_close(got.cpu(), reference)
        else:
            assert got is None


def test_profiled_kernels_sit_on_the_device_lane_linked_to_convolution_ops(tmp_path):
    """Every convolution kernel is on a device row, correlated with the convolution op that launched it, with an
    ac2g arrow from its launch (inside that op) to the kernel; key_averages gives the ops their kernels' time."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.ConvTranspose2d(4, 2, 2, stride=2)
    ).to("openreg")
    x = torch.randn(2, 3, 6, 6, device="openreg", requires_grad=True)
    model(x).sum().backward()
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        model(x).sum().backward()
        torch.openreg.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]

    ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op" and "External id" in e["args"]}
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") == "privateuse1_runtime" and e["name"] == "orLaunchKernel"
    }
    starts = {e["id"]: e for e in events if e.get("cat") == "ac2g" and e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e.get("cat") == "ac2g" and e["ph"] == "f"}
    host_pid = next(iter(ops.values()))["pid"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("conv")]
    assert sorted(k["name"] for k in kernels) == sorted(
        [
            "conv2d_fwd_nchw_f32",
            "conv_transpose2d_fwd_nchw_f32",
            "conv_transpose2d_bwd_data_nchw_f32",
            "conv_transpose2d_bwd_filter_nchw_f32",
            "conv_bwd_bias_reduce_f32",
            "conv2d_bwd_data_nchw_f32",
            "conv2d_bwd_filter_nchw_f32",
            "conv_bwd_bias_reduce_f32",
        ]
    )
    for kernel in kernels:
        assert kernel["pid"] != host_pid, kernel  # the device lane, not a host thread
        op = ops[kernel["args"]["External id"]]
        assert op["name"] in ("aten::convolution_overrideable", "aten::convolution_backward_overrideable"), op["name"]
        correlation = kernel["args"]["correlation"]
        launch = launches[correlation]
        assert op["ts"] <= launch["ts"] <= op["ts"] + op["dur"]
        start, finish = starts[correlation], finishes[correlation]
        assert (start["pid"], start["tid"], start["ts"]) == (launch["pid"], launch["tid"], launch["ts"])
        assert (finish["pid"], finish["tid"], finish["ts"]) == (kernel["pid"], kernel["tid"], kernel["ts"])

    averages = {a.key: a for a in prof.key_averages()}
    forward = [e for e in prof.events() if e.device_type == DEVICE and "_fwd_" in e.name and e.name.startswith("conv")]
    assert averages["aten::convolution_overrideable"].count == 2
    assert averages["aten::convolution_overrideable"].device_time_total == pytest.approx(
        sum(k.device_time_total for k in forward)
    )
    assert averages["aten::convolution_overrideable"].device_time_total > 0
    assert averages["aten::convolution_backward_overrideable"].device_time_total > 0


def test_bad_arguments_raise():
    x = torch.randn(1, 2, 5, 5, device="openreg")
    with pytest.raises(RuntimeError, match="same device|Expected all tensors"):
        F.conv2d(x, torch.randn(3, 2, 3, 3))
    with pytest.raises(RuntimeError, match="input type .* and weight type|should be the same"):
        F.conv2d(x, torch.randn(3, 2, 3, 3, device="openreg", dtype=F64))
    with pytest.raises(RuntimeError, match="channels"):
        torch.ops.aten.convolution_overrideable(
            x, torch.randn(3, 4, 3, 3, device="openreg"), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1
        )
    with pytest.raises(RuntimeError, match="too small"):
        torch.ops.aten.convolution_overrideable(
            x, torch.randn(3, 2, 7, 7, device="openreg"), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1
        )


def test_empty_batch():
    x = torch.randn(0, 2, 5, 5, device="openreg", requires_grad=True)
    conv = torch.nn.Conv2d(2, 3, 3).to("openreg")
    out = conv(x)
    assert out.shape == (0, 3, 3, 3)
    out.sum().backward()
    assert conv.weight.grad.abs().sum().item() == 0 and conv.bias.grad.abs().sum().item() == 0


def test_a_resnet18_shaped_network_trains_with_cpus_losses(fallback_counts):
    """The demo's ResNet (convolutions, batch norm, max pooling, residual adds) trains step for step like CPU,
    every op on device kernels."""
    import copy

    from torch_openreg.demo.resnet import ResNet, ResNetConfig, SyntheticImages

    config = ResNetConfig(width=8, image=32, classes=4, batch_size=8)
    torch.manual_seed(0)
    cpu_model = ResNet(config)
    device_model = copy.deepcopy(cpu_model).to("openreg")
    batches = SyntheticImages(config, torch.device("openreg"), seed=0)
    host_batches = [batches.draw() for _ in range(5)]

    def train(model, device):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
        losses = []
        for images, labels in host_batches:
            loss = model(images.to(device), labels.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses

    expected = train(cpu_model, "cpu")
    actual = train(device_model, "openreg")
    assert fallback_counts() == {}
    assert min(expected[1:]) < expected[0]  # it learns
    assert actual == pytest.approx(expected, rel=1e-3)
    for (name, b_cpu), b_dev in zip(cpu_model.named_buffers(), device_model.buffers()):
        torch.testing.assert_close(b_dev.cpu(), b_cpu, rtol=1e-3, atol=1e-4, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize(
    "fn, kernel",
    [
        (
            lambda d: F.conv2d(
                torch.randn(1, 2, 5, 5, device=d, dtype=F16), torch.randn(3, 2, 3, 3, device=d, dtype=F16)
            ),
            "conv2d_fwd_nchw_f16",
        ),
        # ATen's _convolution views a 1-d convolution as a 2-d one of height 1 before it reaches the backend.
        (
            lambda d: F.conv1d(torch.randn(1, 2, 5, device=d), torch.randn(3, 2, 3, device=d)),
            "conv2d_fwd_nchw_f32",
        ),
        (
            lambda d: torch.ops.aten.convolution_overrideable(
                torch.randn(1, 2, 5, device=d), torch.randn(3, 2, 3, device=d), None, [1], [0], [1], False, [0], 1
            ),
            "conv1d_fwd_ncw_f32",
        ),
        (
            lambda d: F.conv3d(
                torch.randn(1, 2, 3, 3, 3, device=d, dtype=BF16), torch.randn(2, 2, 2, 2, 2, device=d, dtype=BF16)
            ),
            "conv3d_fwd_ncdhw_bf16",
        ),
        (
            lambda d: F.conv_transpose3d(
                torch.randn(1, 2, 3, 3, 3, device=d, dtype=F64), torch.randn(2, 2, 2, 2, 2, device=d, dtype=F64)
            ),
            "conv_transpose3d_fwd_ncdhw_f64",
        ),
    ],
    ids=["2d_f16", "conv1d_module", "1d_direct", "3d_bf16", "transpose3d_f64"],
)
def test_kernel_names_say_dimensions_layout_and_dtype(fn, kernel):
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        fn("openreg")
        torch.openreg.synchronize()
    assert [e.name for e in prof.events() if e.device_type == DEVICE and e.name.startswith("conv")] == [kernel]


def test_direct_1d_convolution_matches_cpu():
    g = torch.Generator().manual_seed(4)
    x, w, b = torch.randn(2, 3, 9, generator=g), torch.randn(4, 3, 3, generator=g), torch.randn(4, generator=g)
    args = ([2], [1], [2], False, [0], 1)
    expected = torch.ops.aten.convolution(x, w, b, *args)
    actual = torch.ops.aten.convolution_overrideable(x.to("openreg"), w.to("openreg"), b.to("openreg"), *args)
    torch.testing.assert_close(actual.cpu(), expected)
