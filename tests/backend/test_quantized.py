"""Quantized tensors on openreg (QuantizedPrivateUse1), against CPU's.

quantize_per_tensor and quantize_per_channel give the integers CPU gives
(compared exactly, int_repr against int_repr), dequantize the floats CPU gives
(exactly: the device runs CPU's own quantization functions), and the tensor
keeps its quantizer (qscheme, scale and zero point, per-channel scales, zero
points and axis) through copies to the CPU and back. Errors raise at the call
with CPU's type and message; the device work is one kernel per op, linked to
the op in torch.profiler.
"""

from __future__ import annotations

import signal
import warnings

import pytest
import torch
from backend_support import run_python
from torch.profiler import ProfilerActivity, profile

# PyTorch deprecates its quantized dtypes (pytorch#184982) and warns once per process; CPU's calls warn alike.
pytestmark = pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*:UserWarning")

QDTYPES = [torch.quint8, torch.qint8, torch.qint32]


def values(*shape, seed=0):
    """Floats that cover the dtypes' ranges and their clamping, rounding ties (x.5 / scale) included."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=generator) * 40
    x.view(-1)[::7] = 0.25  # 2.5 steps of 0.1: a tie, rounded to even as CPU does
    return x


def zero_point(dtype):
    return {torch.quint8: 3, torch.qint8: -2, torch.qint32: 7}[dtype]


def assert_same_quantized(got, want):
    assert got.device.type == "openreg"
    assert got.dtype == want.dtype and got.shape == want.shape and got.qscheme() == want.qscheme()
    if want.qscheme() == torch.per_tensor_affine:
        assert (got.q_scale(), got.q_zero_point()) == (want.q_scale(), want.q_zero_point())
    else:
        assert torch.equal(got.q_per_channel_scales().cpu(), want.q_per_channel_scales())
        assert torch.equal(got.q_per_channel_zero_points().cpu(), want.q_per_channel_zero_points())
        assert got.q_per_channel_axis() == want.q_per_channel_axis()
    representation = got.int_repr()
    assert representation.device.type == "openreg" and representation.dtype == want.int_repr().dtype
    assert torch.equal(representation.cpu(), want.int_repr())
    assert torch.equal(got.dequantize().cpu(), want.dequantize())


@pytest.mark.parametrize("dtype", QDTYPES, ids=str)
@pytest.mark.parametrize(
    "make",
    [
        lambda: values(5, 7),
        lambda: values(2, 3, 4, 5).to(memory_format=torch.channels_last),
        lambda: values(6, 4).t(),  # a non-contiguous input
        lambda: values(0, 3),
    ],
    ids=["matrix", "channels_last", "transposed", "empty"],
)
def test_quantize_per_tensor_gives_cpus_integers(make, dtype):
    x = make()
    want = torch.quantize_per_tensor(x, 0.1, zero_point(dtype), dtype)
    got = torch.quantize_per_tensor(x.to("openreg"), 0.1, zero_point(dtype), dtype)
    assert_same_quantized(got, want)
    assert got.stride() == want.stride()  # CPU's layout (channels-last stays channels-last)
    # the tensor-parameter overload reads them on the host, as CPU does
    scale, zero = torch.tensor(0.1), torch.tensor(zero_point(dtype))
    assert_same_quantized(
        torch.quantize_per_tensor(x.to("openreg"), scale.to("openreg"), zero.to("openreg"), dtype),
        torch.quantize_per_tensor(x, scale, zero, dtype),
    )


# Float zero points with qint32 are refused: see test_float_zero_points_with_qint32_are_refused.
PER_CHANNEL_KINDS = [(dtype, False) for dtype in QDTYPES] + [(torch.quint8, True), (torch.qint8, True)]


@pytest.mark.parametrize(("dtype", "float_zero_points"), PER_CHANNEL_KINDS, ids=lambda v: str(v))
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_quantize_per_channel_gives_cpus_integers(dtype, float_zero_points, axis):
    x = values(3, 4, 5)
    channels = x.shape[axis]
    scales = torch.linspace(0.05, 0.4, channels, dtype=torch.float64)
    zeros = torch.arange(channels) - (1 if dtype == torch.qint8 else 0)
    if float_zero_points:
        zeros = zeros.float() + 0.5
    want = torch.quantize_per_channel(x, scales, zeros, axis, dtype)
    got = torch.quantize_per_channel(x.to("openreg"), scales.to("openreg"), zeros.to("openreg"), axis, dtype)
    assert_same_quantized(got, want)
    assert got.q_per_channel_scales().device.type == "openreg"  # the parameters stay where the caller put them


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_copies_to_the_cpu_and_back_keep_the_quantizer(per_channel):
    x = values(4, 6)
    if per_channel:
        want = torch.quantize_per_channel(
            x, torch.rand(6, dtype=torch.float64) + 0.01, torch.arange(6), 1, torch.quint8
        )
    else:
        want = torch.quantize_per_tensor(x, 0.2, 5, torch.qint8)
    on_device = want.to("openreg")
    assert_same_quantized(on_device, want)
    back = on_device.cpu()
    assert back.device.type == "cpu" and back.qscheme() == want.qscheme()
    assert torch.equal(back.int_repr(), want.int_repr()) and torch.equal(back.dequantize(), want.dequantize())
    if per_channel:  # a CPU tensor's per-channel parameters are CPU tensors, which CPU's kernels read
        assert back.q_per_channel_scales().device.type == "cpu"
    assert_same_quantized(on_device.clone(), want)
    assert torch.equal(on_device, on_device.clone())
    assert not torch.equal(on_device, torch.quantize_per_tensor(x.to("openreg"), 0.3, 5, torch.qint8))


def test_views_of_a_quantized_tensor_read_as_on_cpu():
    x = values(6, 4)
    want = torch.quantize_per_tensor(x, 0.1, 3, torch.quint8)
    got = torch.quantize_per_tensor(x.to("openreg"), 0.1, 3, torch.quint8)
    for view in (lambda t: t.t(), lambda t: t[1:5, ::2], lambda t: t.reshape(4, 6), lambda t: t.unsqueeze(0)[0]):
        assert torch.equal(view(got).int_repr().cpu(), view(want).int_repr())
        assert torch.equal(view(got).dequantize().cpu(), view(want).dequantize())
        assert torch.equal(view(got).contiguous().int_repr().cpu(), view(want).contiguous().int_repr())
    made = torch._make_per_tensor_quantized_tensor(want.int_repr().to("openreg"), 0.1, 3)
    assert_same_quantized(made, want)
    assert_same_quantized(got.clone().copy_(x.to("openreg")), want)  # a float copied into a quantized tensor


def _outcome(call, device):
    try:
        call(device)
    except Exception as error:  # noqa: BLE001 - the error is the answer
        return type(error).__name__, str(error).splitlines()[0]
    if device == "openreg":
        torch.openreg.synchronize()  # an error left to a kernel fails here
    return "", ""


ERRORS = {
    "zero point above quint8": lambda d: torch.quantize_per_tensor(values(3).to(d), 0.1, 300, torch.quint8),
    "double input": lambda d: torch.quantize_per_tensor(values(3).double().to(d), 0.1, 0, torch.quint8),
    "not a quantized dtype": lambda d: torch.quantize_per_tensor(values(3).to(d), 0.1, 0, torch.float32),
    "scales of the wrong length": lambda d: torch.quantize_per_channel(
        values(3, 4).to(d),
        torch.ones(3, dtype=torch.float64, device=d),
        torch.zeros(3, dtype=torch.long, device=d),
        1,
        torch.quint8,
    ),
    "axis out of range": lambda d: torch.quantize_per_channel(
        values(3, 4).to(d),
        torch.ones(4, dtype=torch.float64, device=d),
        torch.zeros(4, dtype=torch.long, device=d),
        2,
        torch.quint8,
    ),
    "a channel's zero point below qint8": lambda d: torch.quantize_per_channel(
        values(3, 4).to(d),
        torch.ones(4, dtype=torch.float64, device=d),
        torch.tensor([0, -200, 0, 0], device=d),
        1,
        torch.qint8,
    ),
    "quantized into a float tensor": lambda d: torch.zeros(3, device=d).copy_(
        torch.quantize_per_tensor(values(3).to(d), 0.1, 0, torch.quint8)
    ),
    "integers of a float tensor": lambda d: torch._make_per_tensor_quantized_tensor(values(3).to(d), 0.1, 0),
}


@pytest.mark.parametrize("case", ERRORS)
def test_errors_raise_at_the_call_as_on_cpu(case):
    expected = _outcome(ERRORS[case], "cpu")
    assert expected[0]
    assert _outcome(ERRORS[case], "openreg") == expected


def test_float_zero_points_with_qint32_are_refused():
    # torch 2.13's CPU kernel for them dies of an illegal instruction (SIGILL): the same call, on CPU, in a child.
    child = run_python(
        "import torch\n"
        "torch.quantize_per_channel(torch.ones(3, 4), torch.ones(4), torch.zeros(4) + 0.5, 1, torch.qint32)\n",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert child.returncode == -signal.SIGILL, (child.returncode, child.stderr[-500:])
    x = values(3, 4).to("openreg")
    scales, zeros = torch.ones(4, device="openreg"), torch.zeros(4, device="openreg") + 0.5
    with pytest.raises(RuntimeError, match="float zero points with torch.qint32 are not supported"):
        torch.quantize_per_channel(x, scales, zeros, 1, torch.qint32)
    with pytest.raises(RuntimeError, match="float zero points with torch.qint32 are not supported"):
        torch._make_per_channel_quantized_tensor(
            torch.zeros(3, 4, dtype=torch.int32, device="openreg"), scales, zeros, 1
        )


def test_sub_byte_dtypes_are_refused_at_the_call():
    with pytest.raises(NotImplementedError, match="quantized dtype QUInt4x2 is not supported"):
        torch.quantize_per_tensor(values(4).to("openreg"), 0.1, 0, torch.quint4x2)


def test_each_op_is_one_kernel_linked_to_it():
    x = values(8, 8).to("openreg")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        q = torch.quantize_per_tensor(x, 0.1, 3, torch.qint8)
        q.int_repr()
        q.dequantize()
        torch.quantize_per_channel(
            x, torch.ones(8, device="openreg"), torch.zeros(8, device="openreg", dtype=torch.long), 0, torch.quint8
        )
        torch.openreg.synchronize()
    linked = {e.name: [k.name for k in e.kernels] for e in prof.events() if e.kernels}
    assert linked["aten::quantize_per_tensor"] == ["quantize_per_tensor_qi8"]
    assert linked["aten::int_repr"] == ["int_repr_qi8"]
    assert linked["aten::dequantize"] == ["dequantize_per_tensor_qi8"]
    assert "quantize_per_channel_qu8" in linked["aten::quantize_per_channel"]


def test_nothing_reaches_the_cpu_fallback(fallback_counts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = torch.quantize_per_channel(
            values(4, 5).to("openreg"),
            torch.ones(5, device="openreg"),
            torch.zeros(5, device="openreg", dtype=torch.long),
            1,
            torch.qint8,
        )
        q.dequantize().cpu()
        q.int_repr().cpu()
        q.cpu().to("openreg")
    assert fallback_counts() == {}
