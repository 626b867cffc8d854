"""Numbers on openreg agree with CPU, forward and backward, per dtype.

Each case builds CPU inputs, runs the same function on CPU and on openreg
copies, and compares outputs (and, for floating dtypes, input gradients under
the same upstream gradient) with torch.testing's default tolerances for the
dtype. Cases covered by device kernels must not touch the CPU fallback; the
few that go through it on purpose say so (`fallback=True`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest
import torch
import torch.nn.functional as F

F32, F16, BF16, I64, BOOL = torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool
FLOATS = (F32, F16, BF16)
NUMERIC = (F32, F16, BF16, I64)
ALL = (F32, F16, BF16, I64, BOOL)


def rand(*shape, positive=False):
    """Spec of a random input; materialized per dtype by `make_input`."""
    return ("rand", shape, positive)


def index(high, *shape):
    return ("index", shape, high)


def mask(*shape):
    return ("mask", shape, None)


def make_input(spec, dtype, generator):
    kind, shape, extra = spec
    if kind == "index":
        return torch.randint(0, extra, shape, generator=generator)
    if kind == "mask":
        return torch.rand(shape, generator=generator) > 0.5
    if dtype == BOOL:
        return torch.rand(shape, generator=generator) > 0.5
    if dtype == I64:
        low = 1 if extra else -5
        return torch.randint(low, 6, shape, generator=generator)
    values = torch.randn(shape, generator=generator)
    if extra:
        values = values.abs() + 0.5
    return values.to(dtype)


@dataclass
class Case:
    name: str
    fn: Callable
    inputs: Sequence
    dtypes: Sequence[torch.dtype] = FLOATS
    grad: bool = True
    fallback: bool = False  # runs through the CPU fallback on purpose
    tol: dict = field(default_factory=dict)


CASES = [
    # Pointwise
    Case("add", lambda a, b: a + b, [rand(4, 5), rand(4, 5)], ALL),
    Case("add_broadcast_alpha", lambda a, b: torch.add(a, b, alpha=2), [rand(4, 5), rand(5)], NUMERIC),
    Case("add_scalar_tensor", lambda a: a + torch.tensor(2.5), [rand(3, 3)]),
    Case("sub", lambda a, b: a - b, [rand(4, 5), rand(4, 5)], NUMERIC),
    Case("mul", lambda a, b: a * b, [rand(4, 5), rand(1, 5)], NUMERIC),
    Case("div", lambda a, b: a / b, [rand(4, 5), rand(4, 5, positive=True)]),
    Case(
        "div_floor",
        lambda a, b: torch.div(a, b, rounding_mode="floor"),
        [rand(4, 5), rand(4, 5, positive=True)],
        NUMERIC,
        grad=False,
    ),
    Case("neg", torch.neg, [rand(7)], NUMERIC),
    Case("abs", torch.abs, [rand(7)], NUMERIC),
    Case("exp", torch.exp, [rand(3, 4)]),
    Case("log", torch.log, [rand(3, 4, positive=True)]),
    Case("sqrt", torch.sqrt, [rand(3, 4, positive=True)]),
    Case("rsqrt", torch.rsqrt, [rand(3, 4, positive=True)]),
    Case("reciprocal", torch.reciprocal, [rand(3, 4, positive=True)]),
    Case("sigmoid", torch.sigmoid, [rand(3, 4)]),
    Case("tanh", torch.tanh, [rand(3, 4)]),
    Case("sin_cos", lambda a: torch.sin(a) * torch.cos(a), [rand(3, 4)]),
    Case("pow_scalar", lambda a: a**2, [rand(3, 4)], NUMERIC),
    Case("pow_tensor", torch.pow, [rand(3, 4, positive=True), rand(3, 4)]),
    Case("maximum_minimum", lambda a, b: torch.maximum(a, b) - torch.minimum(a, b), [rand(6), rand(6)], NUMERIC),
    Case("clamp", lambda a: torch.clamp(a, -0.5, 0.5), [rand(4, 4)], NUMERIC),
    Case("relu", F.relu, [rand(4, 6)], NUMERIC),
    Case("gelu", F.gelu, [rand(4, 6)]),
    Case("gelu_tanh", lambda a: F.gelu(a, approximate="tanh"), [rand(4, 6)]),
    Case("silu", F.silu, [rand(4, 6)]),
    Case("lerp", lambda a, b: torch.lerp(a, b, 0.3), [rand(5), rand(5)]),
    Case(
        "addcmul_addcdiv",
        lambda a, b, c: torch.addcmul(a, b, c, value=0.5) + torch.addcdiv(a, b, c, value=2),
        [rand(5), rand(5), rand(5, positive=True)],
    ),
    Case("floor_round", lambda a: torch.floor(a) + torch.round(a), [rand(8)], grad=False),
    Case("where", lambda c, a, b: torch.where(c, a, b), [mask(4, 5), rand(4, 5), rand(5)], ALL),
    Case("where_scalar", lambda c, a: torch.where(c, a, 0.0), [mask(4, 5), rand(4, 5)]),
    Case("type_conversion", lambda a: a.to(torch.float64).to(torch.int32) + 1, [rand(6)], ALL, grad=False),
    # Comparisons and logic
    Case(
        "compare",
        lambda a, b: torch.stack([a == b, a != b, a < b, a <= b, a > b, a >= b]),
        [rand(9), rand(9)],
        ALL,
        grad=False,
    ),
    Case("compare_scalar", lambda a: torch.stack([a > 0, a == 1, a < 2]), [rand(9)], NUMERIC, grad=False),
    Case(
        "logical",
        lambda a, b: torch.stack([a & b, a | b, a ^ b, ~a, torch.logical_and(a, b)]),
        [rand(9), rand(9)],
        (BOOL,),
        grad=False,
    ),
    Case("logical_not", torch.logical_not, [rand(9)], ALL, grad=False),
    # Reductions
    Case("sum", lambda a: a.sum(), [rand(4, 5)], ALL),
    Case("sum_dim_keepdim", lambda a: a.sum(dim=1, keepdim=True), [rand(4, 5, 3)], NUMERIC),
    Case("mean", lambda a: a.mean(dim=(0, 2)), [rand(4, 5, 3)]),
    Case("prod", lambda a: a.prod(dim=1), [rand(3, 4)], NUMERIC),
    Case("amax_amin", lambda a: a.amax(dim=0) + a.amin(dim=1).sum(), [rand(4, 5)], NUMERIC),
    Case("max_min_all", lambda a: a.max() - a.min(), [rand(4, 5)], NUMERIC),
    Case("max_dim", lambda a: a.max(dim=1), [rand(4, 5)], NUMERIC),
    Case("argmax_argmin", lambda a: torch.stack([a.argmax(dim=1), a.argmin(dim=1)]), [rand(4, 5)], NUMERIC, grad=False),
    Case("var_std", lambda a: a.var(dim=1) + a.std(), [rand(4, 6)]),
    Case("var_mean", lambda a: torch.var_mean(a, dim=0), [rand(4, 6)]),
    Case("norm", lambda a: torch.linalg.vector_norm(a) + a.norm(dim=1).sum(), [rand(4, 6)]),
    Case("cumsum", lambda a: a.cumsum(dim=1), [rand(3, 5)], NUMERIC),
    Case("logsumexp", lambda a: torch.logsumexp(a, dim=1), [rand(3, 5)]),
    Case("any_all", lambda a: torch.stack([a.any(), a.all(), a.any(dim=0).all()]), [rand(3, 4)], ALL, grad=False),
    Case("sort_topk", lambda a: (torch.sort(a, dim=1).values, torch.topk(a, 2, dim=1).values), [rand(3, 6)], NUMERIC),
    # Matrix products
    Case("mm", torch.mm, [rand(4, 6), rand(6, 3)]),
    Case("mm_transposed", lambda a, b: a.t() @ b.t(), [rand(6, 4), rand(3, 6)]),
    Case("matmul_3d", torch.matmul, [rand(2, 4, 6), rand(6, 3)]),
    Case("bmm", torch.bmm, [rand(2, 4, 6), rand(2, 6, 3)], NUMERIC),
    Case("baddbmm", lambda c, a, b: torch.baddbmm(c, a, b, alpha=0.5), [rand(2, 4, 3), rand(2, 4, 6), rand(2, 6, 3)]),
    Case("addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5), [rand(3), rand(4, 6), rand(6, 3)]),
    Case("linear", F.linear, [rand(2, 5, 6), rand(3, 6), rand(3)], NUMERIC),
    Case("dot_mv", lambda v, m: torch.dot(v, v) + (m @ v).sum(), [rand(6), rand(3, 6)], (F32, F16, BF16, I64)),
    Case("matmul_int", torch.matmul, [rand(3, 4), rand(4, 2)], (I64,), grad=False),
    # Neural network
    Case("layer_norm", lambda x, w, b: F.layer_norm(x, (6,), w, b), [rand(2, 4, 6), rand(6), rand(6)]),
    Case("layer_norm_no_affine", lambda x: F.layer_norm(x, (4, 6)), [rand(3, 4, 6)]),
    Case("softmax", lambda x: F.softmax(x, dim=-1), [rand(3, 4, 7)]),
    Case("log_softmax", lambda x: F.log_softmax(x, dim=1), [rand(3, 7)]),
    Case("cross_entropy", lambda x, t: F.cross_entropy(x, t), [rand(6, 10), index(10, 6)]),
    Case(
        "cross_entropy_ignore",
        lambda x, t: F.cross_entropy(x, t, ignore_index=2, reduction="sum"),
        [rand(6, 10), index(10, 6)],
    ),
    Case("nll_loss", F.nll_loss, [rand(5, 4), index(4, 5)]),
    Case("mse_loss", F.mse_loss, [rand(5, 4), rand(5, 4)]),
    Case("embedding", lambda w, i: F.embedding(i, w), [rand(10, 4), index(10, 3, 5)]),
    Case("embedding_padding", lambda w, i: F.embedding(i, w, padding_idx=0), [rand(10, 4), index(10, 7)]),
    Case("dropout_p0", lambda x: F.dropout(x, p=0.0, training=True), [rand(4, 4)]),
    # openreg runs SDPA's math path; CPU would pick its flash kernel, whose
    # half-precision rounding differs, so the reference is CPU's math path too.
    Case("sdpa", lambda q, k, v: math_sdpa(q, k, v), [rand(2, 2, 5, 4)] * 3),
    Case("sdpa_causal", lambda q, k, v: math_sdpa(q, k, v, is_causal=True), [rand(2, 2, 5, 4)] * 3),
    Case(
        "sdpa_mask",
        lambda q, k, v, m: math_sdpa(q, k, v, attn_mask=m),
        [rand(1, 2, 5, 4), rand(1, 2, 5, 4), rand(1, 2, 5, 4), mask(5, 5)],
    ),
    # Indexing
    Case("index_tensor", lambda x, i: x[i], [rand(8, 3), index(8, 5)], ALL),
    Case("index_2d", lambda x, i, j: x[i, j], [rand(6, 7), index(6, 4), index(7, 4)], NUMERIC),
    Case("index_cpu_indices", lambda x: x[torch.tensor([0, 2, 2])], [rand(5, 2)], NUMERIC),
    Case("boolean_mask", lambda x, m: x[m], [rand(4, 5), mask(4, 5)], ALL),
    Case("boolean_mask_rows", lambda x, m: x[m.any(dim=1)], [rand(4, 5), mask(4, 5)], NUMERIC),
    Case("index_put", lambda x, i, v: x.index_put((i,), v, accumulate=True), [rand(6, 3), index(6, 4), rand(4, 3)]),
    Case(
        "setitem",
        lambda x, i: x.clone().index_fill_(0, i, 2).masked_fill(x > 0, -1),
        [rand(6, 3), index(6, 2)],
        NUMERIC,
    ),
    Case("index_select", lambda x, i: x.index_select(1, i), [rand(3, 6), index(6, 4)], ALL),
    Case("gather", lambda x, i: x.gather(1, i), [rand(3, 6), index(6, 3, 4)], NUMERIC),
    Case("scatter", lambda x, i, s: x.scatter(1, i, s), [rand(3, 6), index(6, 3, 1), rand(3, 1)], NUMERIC),
    Case("scatter_add", lambda x, i, s: x.scatter_add(0, i, s), [rand(4, 3), index(4, 5, 3), rand(5, 3)], NUMERIC),
    Case("index_add", lambda x, i, s: x.index_add(0, i, s), [rand(4, 3), index(4, 5), rand(5, 3)], NUMERIC),
    Case("masked_fill", lambda x, m: x.masked_fill(m, 3.0), [rand(4, 5), mask(4, 5)], ALL),
    Case("nonzero", torch.nonzero, [rand(4, 5)], ALL, grad=False),
    Case("masked_select", torch.masked_select, [rand(4, 5), mask(5)], NUMERIC),
    Case(
        "masked_select_0dim",
        lambda x: torch.masked_select(x, torch.ones((), dtype=torch.bool, device=x.device)),
        [rand()],
        NUMERIC,
    ),
    Case("take_fallback", lambda x, i: torch.take(x, i), [rand(4, 5), index(20, 6)], (F32,), fallback=True),
    # Shapes
    Case("cat", lambda a, b: torch.cat([a, b, a], dim=1), [rand(2, 3), rand(2, 4)], ALL),
    Case("stack", lambda a, b: torch.stack([a, b], dim=0), [rand(2, 3), rand(2, 3)], ALL),
    Case("views_contiguous", lambda a: a.transpose(0, 1).reshape(-1).contiguous()[1::2], [rand(3, 4)], ALL),
    Case("permute_expand", lambda a: a.permute(2, 0, 1).unsqueeze(0).expand(2, -1, -1, -1) * 1, [rand(2, 3, 4)]),
    Case("split_chunk", lambda a: [t.sum() for t in a.split(2, dim=1)] + [a.chunk(2)[1]], [rand(4, 5)]),
    Case("tril_triu", lambda a: a.tril() + a.triu(1), [rand(4, 4)], NUMERIC),
    Case("repeat", lambda a: a.repeat(2, 3), [rand(2, 3)], ALL),
    Case("flip_roll", lambda a: a.flip(0) + a.roll(1, 1), [rand(3, 4)], NUMERIC),
    Case("copy_strided", lambda a: a.t().clone(memory_format=torch.contiguous_format), [rand(5, 3)], ALL),
]


def math_sdpa(*args, **kwargs):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.MATH]):
        return F.scaled_dot_product_attention(*args, **kwargs)


def _device(tree):
    if isinstance(tree, torch.Tensor):
        return tree.detach().to("openreg").requires_grad_(tree.requires_grad)
    return tree


def _flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    flat = []
    for item in out:
        flat.extend(_flatten(item))
    return flat


def _params(cases):
    for case in cases:
        for dtype in case.dtypes:
            yield pytest.param(case, dtype, id=f"{case.name}-{str(dtype).removeprefix('torch.')}")


@pytest.fixture
def cpu_on_one_thread():
    """CPU's reference sums in the order a device kernel body does: on one thread (test_kernel_threads.py).

    Half-precision reductions split over the host's threads round differently (layer_norm's float16 weight
    gradient differs by 4 ulps with two); on one thread openreg's results are CPU's bit for bit.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("case,dtype", list(_params(CASES)))
def test_matches_cpu(case: Case, dtype: torch.dtype, fallback_counts, cpu_on_one_thread):
    generator = torch.Generator().manual_seed(0)
    cpu_inputs = [make_input(spec, dtype, generator) for spec in case.inputs]
    differentiable = case.grad and dtype.is_floating_point
    if differentiable:
        for t in cpu_inputs:
            if t.dtype.is_floating_point:
                t.requires_grad_()
    device_inputs = [_device(t) for t in cpu_inputs]
    try:
        expected = _flatten(case.fn(*cpu_inputs))
    except (RuntimeError, NotImplementedError) as error:
        # An op ATen's CPU kernels lack for this dtype must fail on openreg too.
        with pytest.raises(type(error)):
            _flatten(case.fn(*device_inputs))
            torch.openreg.synchronize()
        return
    actual = _flatten(case.fn(*device_inputs))
    assert all(t.device.type == "openreg" for t in actual)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.cpu(), e, **case.tol, equal_nan=True)

    if differentiable:
        cpu_wrt = [t for t in cpu_inputs if t.requires_grad]
        device_wrt = [t for t in device_inputs if t.requires_grad]
        outputs = [(e, a) for e, a in zip(expected, actual) if e.requires_grad]
        upstream = [torch.randn(e.shape, generator=generator).to(e.dtype) for e, _ in outputs]
        expected_grads = torch.autograd.grad([e for e, _ in outputs], cpu_wrt, upstream, allow_unused=True)
        actual_grads = torch.autograd.grad(
            [a for _, a in outputs], device_wrt, [u.to("openreg") for u in upstream], allow_unused=True
        )
        for a, e in zip(actual_grads, expected_grads):
            if e is None:
                assert a is None
                continue
            assert a.device.type == "openreg"
            torch.testing.assert_close(a.cpu(), e, **case.tol, equal_nan=True)

    counts = fallback_counts()
    if not case.fallback:
        assert counts == {}, f"ran through the CPU fallback: {counts}"


def test_out_variant_resizes_and_validates():
    a = torch.randn(3, 4, device="openreg")
    out = torch.empty(0, device="openreg")
    torch.add(a, 1, out=out)
    assert out.shape == (3, 4)
    torch.testing.assert_close(out.cpu(), a.cpu() + 1)
    out = torch.empty(0, device="openreg")
    torch.sum(a, dim=0, out=out)
    torch.testing.assert_close(out.cpu(), a.cpu().sum(0))
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.add(a, torch.randn(5, device="openreg"))


def test_creation_ops(fallback_counts):
    cases = {
        "zeros": lambda d: torch.zeros(3, 4, device=d),
        "ones": lambda d: torch.ones(2, 5, dtype=torch.float16, device=d),
        "full": lambda d: torch.full((3,), 7, dtype=torch.int64, device=d),
        "full_bool": lambda d: torch.full((3,), True, device=d),
        "full_float": lambda d: torch.full((4, 2), -1.5, device=d),
        "arange": lambda d: torch.arange(0, 10, 3, device=d),
        "arange_float": lambda d: torch.arange(0.0, 1.0, 0.1, device=d),
        "linspace": lambda d: torch.linspace(-1, 1, 9, device=d),
        "eye": lambda d: torch.eye(3, 4, device=d),
        "zeros_like": lambda d: torch.zeros_like(torch.empty(2, 3, device=d), dtype=torch.bfloat16),
        "tensor": lambda d: torch.tensor([[1, 2], [3, 4]], device=d),
        "empty_fill": lambda d: torch.empty(5, dtype=torch.float64, device=d).fill_(0.25),
        "zero_": lambda d: torch.ones(3, 3, device=d).t().zero_(),
    }
    for name, make in cases.items():
        torch.testing.assert_close(make("openreg").cpu(), make("cpu"), msg=name)
    assert fallback_counts() == {}


def test_inplace_and_views_share_memory():
    a = torch.zeros(4, 4, device="openreg")
    row = a[1]
    row.add_(2)
    a[:, 3] = 5
    a.t()[0, 2] = 7
    expected = torch.zeros(4, 4)
    expected[1] += 2
    expected[:, 3] = 5
    expected.t()[0, 2] = 7
    torch.testing.assert_close(a.cpu(), expected)


def test_item_and_printing():
    a = torch.arange(6, device="openreg").reshape(2, 3)
    assert a[1, 2].item() == 5
    assert "device='openreg:0'" in repr(a)
    assert bool(a.sum() > 10)
    assert a.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert torch.equal(a, a.clone())
    assert not torch.equal(a, a + 1) and not torch.equal(a, a.view(3, 2))


FOREACH = {
    "add_scalar": lambda ts, us: torch._foreach_add_(ts, 2.0),
    "add_list_alpha": lambda ts, us: torch._foreach_add_(ts, us, alpha=-0.5),
    "mul_tensor": lambda ts, us: torch._foreach_mul_(ts, us[0].sum()),
    "lerp": lambda ts, us: torch._foreach_lerp_(ts, us, 0.1),
    "addcmul_addcdiv": lambda ts, us: (
        torch._foreach_addcmul_(ts, us, us, value=0.5),
        torch._foreach_addcdiv_(ts, us, [u.abs() + 1 for u in us], value=2),
    ),
    "div_scalarlist": lambda ts, us: torch._foreach_div_(ts, [1.0, 2.0, 3.0]),
    "zero": lambda ts, us: torch._foreach_zero_(ts),
    "sqrt_functional": lambda ts, us: torch._foreach_sqrt([t.abs() for t in ts]),
    "norm_functional": lambda ts, us: torch._foreach_norm(ts),
    "exp_functional": lambda ts, us: torch._foreach_exp(ts),
}


@pytest.mark.parametrize("name", FOREACH)
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_foreach_matches_cpu(name, dtype, fallback_counts):
    generator = torch.Generator().manual_seed(0)
    shapes = [(3, 4), (7,), (2, 2, 2)]
    cpu_ts = [torch.randn(s, generator=generator).to(dtype) for s in shapes]
    cpu_us = [torch.randn(s, generator=generator).to(dtype) for s in shapes]
    dev_ts = [t.to("openreg") for t in cpu_ts]
    dev_us = [u.to("openreg") for u in cpu_us]
    expected = FOREACH[name](cpu_ts, cpu_us)
    actual = FOREACH[name](dev_ts, dev_us)
    for a, e in zip(dev_ts, cpu_ts):
        torch.testing.assert_close(a.cpu(), e)
    if expected is not None and isinstance(expected, list):
        for a, e in zip(actual, expected):
            assert a.is_openreg
            torch.testing.assert_close(a.cpu(), e)
    assert fallback_counts() == {}
