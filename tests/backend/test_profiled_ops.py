"""Each operator call is one operator record in torch.profiler, as on CUDA.

ATen's default kernel for the functional and in-place overloads of a
structured operator (add.Tensor, add_.Tensor) calls the .out overload through
the dispatcher: a backend that relies on it shows every such call twice, an
aten::add inside an aten::add, with "# of Calls" 2 and the device time counted
twice in key_averages(). openreg registers every overload itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

DEVICE = torch.autograd.DeviceType.PrivateUse1


@dataclass
class Call:
    name: str
    fn: Callable[[dict[str, torch.Tensor]], object]
    op: str  # the one aten:: record expected
    kernel: str  # the one device kernel it launches


def tensors() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    host = {
        "a": torch.randn(16, 16),
        "b": torch.randn(16, 16),
        "v": torch.randn(16),
        "idx": torch.tensor([3, 0, 7]),
        "src": torch.randn(3, 16),
        "target": torch.randint(0, 16, (16,)),
    }
    return {k: t.to("openreg") for k, t in host.items()}


CALLS = [
    Call("add", lambda t: t["a"] + t["b"], "aten::add", "elementwise_add_f32"),
    Call("add_", lambda t: t["a"].clone().add_(t["b"]), "aten::add_", "elementwise_add_f32"),
    Call("mul_python_scalar", lambda t: t["a"] * 2.5, "aten::mul", "elementwise_mul_f32"),
    Call("sub_broadcast", lambda t: t["a"] - t["v"], "aten::sub", "elementwise_sub_f32"),
    Call("sigmoid_", lambda t: t["a"].clone().sigmoid_(), "aten::sigmoid_", "elementwise_sigmoid_f32"),
    Call("clamp_", lambda t: t["a"].clone().clamp_(-0.5, 0.5), "aten::clamp_", "elementwise_clamp_f32"),
    Call("eq", lambda t: t["a"] == t["b"], "aten::eq", "elementwise_eq_f32"),
    Call("pow_scalar_base", lambda t: torch.pow(2.0, t["a"]), "aten::pow", "elementwise_pow_f32"),
    Call("gelu", lambda t: F.gelu(t["a"]), "aten::gelu", "gelu_fwd_f32"),
    Call(
        "gelu_backward", lambda t: torch.ops.aten.gelu_backward(t["b"], t["a"]), "aten::gelu_backward", "gelu_bwd_f32"
    ),
    Call(
        "silu_backward", lambda t: torch.ops.aten.silu_backward(t["b"], t["a"]), "aten::silu_backward", "silu_bwd_f32"
    ),
    Call("mm", lambda t: t["a"] @ t["b"], "aten::mm", "gemm_f32_nn"),
    Call("addmm", lambda t: F.linear(t["a"], t["b"], t["v"]), "aten::addmm", "gemm_bias_f32_nt"),
    Call("softmax", lambda t: t["a"].softmax(-1), "aten::_softmax", "softmax_fwd_f32"),
    Call("log_softmax", lambda t: t["a"].log_softmax(-1), "aten::_log_softmax", "log_softmax_fwd_f32"),
    Call("sum_dim", lambda t: t["a"].sum(1), "aten::sum", "reduce_sum_f32"),
    Call("mean", lambda t: t["a"].mean(), "aten::mean", "reduce_mean_f32"),
    Call("max_dim", lambda t: t["a"].max(1), "aten::max", "reduce_max_f32"),
    Call("cumsum", lambda t: t["a"].cumsum(0), "aten::cumsum", "scan_cumsum_f32"),
    Call("sort", lambda t: t["a"].sort(stable=True, dim=-1), "aten::sort", "sort_f32"),
    Call("cat", lambda t: torch.cat([t["a"], t["b"]]), "aten::cat", "concat_f32"),
    Call("tril_", lambda t: t["a"].clone().tril_(), "aten::tril_", "tril_f32"),
    Call("index", lambda t: t["a"][t["idx"]], "aten::index", "index_gather_f32"),
    Call("index_add", lambda t: t["a"].index_add(0, t["idx"], t["src"]), "aten::index_add", "index_add_f32"),
    Call("where", lambda t: torch.where(t["a"] > 0, t["a"], t["b"]), "aten::where", "where_f32"),
    Call("nll_loss", lambda t: F.nll_loss(t["a"], t["target"]), "aten::nll_loss_forward", "nll_loss_fwd_f32"),
]


def profile_once(fn) -> profile:
    fn()  # first-call work (allocator pools) stays out of the profile
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        fn()
        torch.openreg.synchronize()
    return prof


@pytest.mark.parametrize("call", CALLS, ids=[c.name for c in CALLS])
def test_one_call_is_one_operator_record(call: Call):
    t = tensors()
    prof = profile_once(lambda: call.fn(t))
    events = prof.events()
    host_ops = [e for e in events if e.device_type != DEVICE]
    records = [e for e in host_ops if e.name == call.op]
    assert len(records) == 1, [(e.name, e.cpu_parent.name if e.cpu_parent else None) for e in records]

    kernels = [e for e in events if e.device_type == DEVICE and e.name == call.kernel]
    assert len(kernels) == 1, sorted(e.name for e in events if e.device_type == DEVICE)
    # The kernel is linked to this op, and to no other record.
    assert [k.name for k in records[0].kernels] == [call.kernel]
    linked = [e.name for e in host_ops for k in e.kernels if k.name == call.kernel]
    assert linked == [call.op]

    averages = {a.key: a for a in prof.key_averages()}
    assert averages[call.op].count == 1
    assert averages[call.op].device_time_total == pytest.approx(kernels[0].device_time_total)
    assert averages[call.op].self_device_time_total == pytest.approx(kernels[0].device_time_total)


def test_no_operator_is_recorded_inside_itself_in_a_training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 8)
    ).to("openreg")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(4, 16, device="openreg")
    y = torch.randint(0, 8, (4,), device="openreg")

    def step():
        loss = F.cross_entropy(model(x).softmax(-1).log(), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    prof = profile_once(step)
    nested = set()
    for event in prof.events():
        parent = event.cpu_parent
        while parent is not None:
            if parent.name == event.name and event.name.startswith("aten::"):
                nested.add(event.name)
            parent = parent.cpu_parent
    assert not nested


def _structured_groups():
    """(out, functional, in-place) names of ATen's structured families, from torchgen's own parser."""
    import torchgen  # ships with the torch wheel
    from torchgen.gen import get_grouped_native_functions, parse_native_yaml
    from torchgen.model import NativeFunctionsGroup

    native = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native")
    parsed = parse_native_yaml(os.path.join(native, "native_functions.yaml"), os.path.join(native, "tags.yaml"))
    for group in get_grouped_native_functions(parsed.native_functions):
        if isinstance(group, NativeFunctionsGroup):
            yield (
                str(group.out.func.name),
                str(group.functional.func.name),
                str(group.inplace.func.name) if group.inplace is not None else None,
            )


def test_every_overload_of_a_covered_family_has_its_own_kernel():
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    covered = 0
    missing = []
    for out, *siblings in _structured_groups():
        if not has_kernel(f"aten::{out}", "PrivateUse1"):
            continue
        covered += 1
        for name in filter(None, siblings):
            # Only ATen's default structured kernel redispatches to .out.
            if has_kernel(f"aten::{name}", "CompositeExplicitAutogradNonFunctional") and not has_kernel(
                f"aten::{name}", "PrivateUse1"
            ):
                missing.append(name)
    assert covered > 100
    assert not missing


def test_overloads_are_listed_as_device_ops():
    from torch_openreg.ops import classify

    table = classify()
    for name in (
        "aten::add.Tensor",
        "aten::add_.Tensor",
        "aten::mm",
        "aten::_softmax",
        "aten::index.Tensor",
        "aten::silu_backward",
    ):
        assert table[name][0] == "device", (name, table[name])
    assert table["aten::add.Tensor"][1] == "elementwise_add"


@pytest.mark.parametrize(
    "name, fn",
    [
        ("inplace_broadcast_to_self", lambda a, b, m: a[:1].add_(b)),
        ("inplace_dtype_downcast", lambda a, b, m: a.long().add_(b)),
        ("inplace_addmm_shape", lambda a, b, m: a[:, :3].addmm_(m, m)),
        ("inplace_cumsum_dtype", lambda a, b, m: a.clone().cumsum_(0, dtype=torch.float64)),
        ("functional_mm_shapes", lambda a, b, m: torch.mm(a, m)),
    ],
)
def test_overload_kernels_raise_what_cpu_raises(name, fn):
    """The functional and in-place kernels run ATen's own meta functions: same checks, same messages."""
    host = (torch.randn(4, 4), torch.randn(4, 4), torch.randn(3, 3))
    with pytest.raises(RuntimeError) as on_cpu:
        fn(*host)
    with pytest.raises(RuntimeError) as on_device:
        fn(*(t.to("openreg") for t in host))
    assert str(on_device.value).splitlines()[0] == str(on_cpu.value).splitlines()[0]


def test_functional_outputs_follow_ats_layout_rules():
    """Outputs are allocated like the meta function's: channels-last in, channels-last out; dtype promotion."""
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    for fn in (
        lambda t: t + 1,
        lambda t: t.sigmoid(),
        lambda t: t * torch.ones(5, dtype=torch.float64, device=t.device),
    ):
        expected = fn(x)
        actual = fn(x.to("openreg"))
        assert actual.stride() == expected.stride() and actual.dtype == expected.dtype
        torch.testing.assert_close(actual.cpu(), expected)
    ints = torch.arange(6).reshape(2, 3)
    assert (ints.to("openreg") / 2).dtype == (ints / 2).dtype == torch.float32
