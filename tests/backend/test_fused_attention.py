"""Fused scaled-dot-product attention on openreg (csrc/backend/aten/Attention.cpp).

scaled_dot_product_attention asks the device's _fused_sdp_choice which backend
runs a call; openreg answers SDPBackend.OVERRIDEABLE for the calls its fused
kernel takes, and runs them as one flash-style device kernel per pass
(_scaled_dot_product_fused_attention_overrideable and its backward). The
results are compared with CPU's; every case also checks that the fused ops,
and none of the math path's, ran (without the fused kernels the same calls
run the math path, and CPU's results alone would not tell).
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

DEVICE = torch.device("openreg", 0)
FORWARD = "aten._scaled_dot_product_fused_attention_overrideable.default"
BACKWARD = "aten._scaled_dot_product_fused_attention_overrideable_backward.default"
MATH_OPS = ("aten.bmm.default", "aten._softmax.default", "aten._safe_softmax.default", "aten.matmul.default")


class RecordedOps(TorchDispatchMode):
    """Names of the ATen ops that reach the backends (below autograd), forward and backward."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def assert_fused(ops: RecordedOps, backward: bool = True):
    assert ops.names.count(FORWARD) == 1, ops.names
    assert ops.names.count(BACKWARD) == (1 if backward else 0), ops.names
    assert not [name for name in ops.names if name in MATH_OPS], ops.names


def leaves(*tensors, device=DEVICE):
    return [t.detach().to(device).requires_grad_() for t in tensors]


def sdpa_with_grads(q, k, v, grad, mask=None, **kwargs):
    """Output and gradients (of q, k, v and a differentiable mask) of one SDPA call and its backward."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)
    out.backward(grad)
    inputs = [q, k, v] + ([mask] if mask is not None and mask.requires_grad else [])
    return [out.detach().cpu()] + [t.grad.cpu() for t in inputs]


def compare_with_cpu(q, k, v, mask=None, dtype=torch.float32, tolerance=None, **kwargs):
    """SDPA forward and backward on openreg (fused, checked) against CPU's."""
    q, k, v = (t.to(dtype) for t in (q, k, v))
    masks = [None, None]
    if mask is not None:  # a leaf that requires grad only if the given mask does
        typed = mask.detach().to(dtype) if mask.is_floating_point() else mask
        masks = [typed.to(device).detach().requires_grad_(mask.requires_grad) for device in ("cpu", DEVICE)]
    torch.manual_seed(1)
    grad = torch.randn(*q.shape[:-1], v.shape[-1], dtype=dtype)
    expected = sdpa_with_grads(*leaves(q, k, v, device="cpu"), grad, masks[0], **kwargs)
    with RecordedOps() as ops, sdpa_kernel(SDPBackend.OVERRIDEABLE):
        actual = sdpa_with_grads(*leaves(q, k, v), grad.to(DEVICE), masks[1], **kwargs)
    assert_fused(ops)
    tolerance = tolerance or {"atol": 2e-5, "rtol": 2e-5}
    for name, a, e in zip(["output", "grad_query", "grad_key", "grad_value", "grad_mask"], actual, expected):
        torch.testing.assert_close(a, e, **tolerance, msg=lambda m, name=name: f"{name}: {m}")


def randn(*shape):
    return torch.randn(*shape)


# (name, q shape, k shape, v shape, mask maker (or None), SDPA keyword arguments)
SHAPES = {
    "one_tile": ((2, 3, 16, 8), (2, 3, 16, 8), (2, 3, 16, 8)),
    # Lengths and head dims that are no multiple of the 64 x 128 tiles, keys longer than queries
    "ragged_tiles": ((2, 3, 70, 20), (2, 3, 150, 20), (2, 3, 150, 12)),
    # More queries than keys (causal rows past the last key see every key)
    "queries_longer": ((1, 2, 150, 24), (1, 2, 70, 24), (1, 2, 70, 24)),
    "three_dim": ((3, 70, 20), (3, 130, 20), (3, 130, 20)),
}


def minus_inf_rows(rows, keys, every):
    return torch.zeros(rows, keys).masked_fill(torch.arange(rows)[:, None] % every == 0, -math.inf)


CASES = [
    ("plain", "ragged_tiles", None, {}),
    ("plain_one_tile", "one_tile", None, {}),
    ("plain_three_dim", "three_dim", None, {}),
    ("causal", "ragged_tiles", None, {"is_causal": True}),
    ("causal_queries_longer", "queries_longer", None, {"is_causal": True}),
    ("causal_three_dim", "three_dim", None, {"is_causal": True}),
    # Both apply, as in CPU's flash kernel (which needs equal head dims; its math path refuses the pair)
    ("mask_with_causal", "queries_longer", lambda rows, keys: torch.randn(rows, keys), {"is_causal": True}),
    ("scale", "ragged_tiles", None, {"scale": 0.3}),
    ("negative_scale", "ragged_tiles", None, {"scale": -0.2, "is_causal": True}),
    ("bool_mask_rows_keys", "ragged_tiles", lambda rows, keys: torch.rand(rows, keys) > 0.3, {}),
    ("bool_mask_per_batch", "ragged_tiles", lambda rows, keys: torch.rand(2, 1, rows, keys) > 0.5, {}),
    ("bool_mask_per_head", "ragged_tiles", lambda rows, keys: torch.rand(1, 3, rows, keys) > 0.5, {}),
    ("bool_mask_keys_only", "ragged_tiles", lambda rows, keys: torch.rand(2, 3, 1, keys) > 0.2, {}),
    ("float_mask_full", "ragged_tiles", lambda rows, keys: torch.randn(2, 3, rows, keys), {}),
    ("float_mask_rows_keys", "ragged_tiles", lambda rows, keys: torch.randn(rows, keys), {}),
    ("float_mask_three_dim", "three_dim", lambda rows, keys: torch.randn(1, rows, keys), {}),
    # Rows that see no key at all: the math path's safe softmax gives them zero output and gradients
    ("fully_masked_rows", "ragged_tiles", lambda rows, keys: torch.arange(rows)[:, None] % 7 != 3, {}),
    ("float_minus_inf_rows", "ragged_tiles", lambda rows, keys: minus_inf_rows(rows, keys, every=5), {}),
]  # fmt: skip


@pytest.mark.parametrize("name, shape, make_mask, kwargs", CASES, ids=[c[0] for c in CASES])
def test_forward_and_gradients_match_cpu(name, shape, make_mask, kwargs):
    torch.manual_seed(0)
    q, k, v = (randn(*s) for s in SHAPES[shape])
    mask = make_mask(q.shape[-2], k.shape[-2]) if make_mask else None
    compare_with_cpu(q, k, v, mask, **kwargs)


@pytest.mark.parametrize("mask_shape", [(70, 150), (2, 1, 70, 150), (1, 3, 1, 150), (70, 1)])
def test_gradient_of_a_float_mask_matches_cpu(mask_shape):
    """An additive mask that requires grad gets dS summed over the dimensions it broadcasts along."""
    torch.manual_seed(0)
    q, k, v = (randn(*s) for s in SHAPES["ragged_tiles"])
    mask = torch.randn(mask_shape).requires_grad_()
    compare_with_cpu(q, k, v, mask)


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_heads(causal):
    torch.manual_seed(0)
    q, k, v = randn(2, 6, 70, 16), randn(2, 2, 90, 16), randn(2, 2, 90, 8)
    compare_with_cpu(q, k, v, enable_gqa=True, is_causal=causal)


def test_strided_views_as_a_transformer_makes_them():
    """q, k, v split from one projection and transposed (the demo GPT's layout); the output keeps that layout."""
    torch.manual_seed(0)
    batch, time, heads, dim = 2, 40, 4, 12
    qkv = randn(batch, time, 3 * heads * dim)
    q, k, v = (t.view(batch, time, heads, dim).transpose(1, 2) for t in qkv.split(heads * dim, dim=2))
    compare_with_cpu(q, k, v, is_causal=True)
    on_device = [t.to(DEVICE) for t in (q, k, v)]
    split = qkv.to(DEVICE).split(heads * dim, dim=2)
    views = [t.view(batch, time, heads, dim).transpose(1, 2) for t in split]
    out = F.scaled_dot_product_attention(*views, is_causal=True)
    # (batch, time, heads, dim) in memory, as the op's meta function lays it out: the usual
    # out.transpose(1, 2).reshape(batch, time, -1) is then a view, not a copy kernel.
    assert out.transpose(1, 2).is_contiguous()
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(*[t.cpu() for t in on_device], is_causal=True))


@pytest.mark.parametrize(
    "dtype, tolerance",
    [
        (torch.float64, {"atol": 1e-12, "rtol": 1e-12}),
        (torch.float16, {"atol": 5e-3, "rtol": 5e-3}),
        (torch.bfloat16, {"atol": 4e-2, "rtol": 4e-2}),
    ],
)
@pytest.mark.parametrize("causal", [False, True])
def test_other_dtypes_match_cpu(dtype, tolerance, causal):
    """Half and bfloat16 compute in float32 (CPU's math rounds every intermediate, hence the tolerances)."""
    torch.manual_seed(0)
    q, k, v = (randn(*s) for s in SHAPES["ragged_tiles"])
    compare_with_cpu(q, k, v, dtype=dtype, tolerance=tolerance, is_causal=causal)


def test_a_one_dim_mask_broadcasts_over_the_rows():
    """A mask of shape (S,) is broadcastable to the scores, as SDPA documents (CPU's choice function fails on it)."""
    torch.manual_seed(0)
    q, k, v = (randn(*s).to(DEVICE) for s in SHAPES["ragged_tiles"])
    mask = torch.randn(150, device=DEVICE)
    with RecordedOps() as ops:
        actual = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).cpu()
    assert_fused(ops, backward=False)
    expected = F.scaled_dot_product_attention(q.cpu(), k.cpu(), v.cpu(), attn_mask=mask.cpu().expand(70, 150))
    torch.testing.assert_close(actual, expected, atol=2e-5, rtol=2e-5)


def test_nan_propagates_as_on_cpu():
    """A NaN query row gives a NaN output row (and NaN gradients where CPU has them), nothing else."""
    torch.manual_seed(0)
    q, k, v = (randn(*s) for s in SHAPES["ragged_tiles"])
    q[0, 1, 5, 3] = math.nan
    on_cpu, on_device = leaves(q, k, v, device="cpu"), leaves(q, k, v)
    grad = torch.randn(2, 3, 70, 12)
    expected = sdpa_with_grads(*on_cpu, grad)
    with RecordedOps() as ops:
        actual = sdpa_with_grads(*on_device, grad.to(DEVICE))
    assert_fused(ops)
    assert actual[0].isnan().sum() == expected[0].isnan().sum() == 12
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, atol=2e-5, rtol=2e-5, equal_nan=True)


def test_float32_mask_with_half_queries():
    """SDPA accepts a float32 additive mask for any query dtype; the fused kernel reads it as float32."""
    torch.manual_seed(0)
    q, k, v = (randn(*s).to(torch.bfloat16) for s in SHAPES["ragged_tiles"])
    mask = torch.randn(70, 150)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    with RecordedOps() as ops:
        actual = F.scaled_dot_product_attention(*(t.to(DEVICE) for t in (q, k, v)), attn_mask=mask.to(DEVICE))
    assert_fused(ops, backward=False)
    torch.testing.assert_close(actual.cpu(), expected, atol=4e-2, rtol=4e-2)


def test_gradcheck_in_float64():
    torch.manual_seed(0)
    q, k, v = leaves(randn(1, 2, 5, 3).double(), randn(1, 2, 7, 3).double(), randn(1, 2, 7, 4).double())
    mask = torch.randn(5, 7, dtype=torch.float64, device=DEVICE, requires_grad=True)
    with RecordedOps() as ops:
        assert torch.autograd.gradcheck(lambda *t: F.scaled_dot_product_attention(*t), (q, k, v, mask))
    assert FORWARD in ops.names and BACKWARD in ops.names


# -- dropout ----------------------------------------------------------------------------------------------------------


def fused_with_mask(q, k, v, p, causal=False):
    """The op itself, with its debug output: the keep mask the dropout drew."""
    return torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v, None, p, causal, True)


def test_dropout_keeps_each_element_with_probability_one_minus_p():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 128, 16, device=DEVICE) for _ in range(3))
    for p in (0.1, 0.5, 0.9):
        keep = fused_with_mask(q, k, v, p)[-1].float()
        n = keep.numel()
        assert abs(keep.mean().item() - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n)
        # Neighbours (which share one 64-bit random output) are independent: both kept with (1 - p)^2.
        both = (keep[..., 0::2] * keep[..., 1::2]).mean().item()
        assert abs(both - (1 - p) ** 2) < 5 * math.sqrt((1 - p) ** 2 * (1 - (1 - p) ** 2) / (n // 2))
        # Independent draws: rows, heads and batches do not repeat one another.
        assert not torch.equal(keep[0, 0, 0], keep[0, 0, 1])
        assert not torch.equal(keep[0, 0], keep[0, 1]) and not torch.equal(keep[0], keep[1])
    # Kept probabilities are scaled by 1 / (1 - p): with ones for values each output is
    # sum_j P_ij Z_ij / (1 - p), whose mean over many rows is 1.
    ones = torch.ones(2, 4, 128, 16, device=DEVICE)
    out = F.scaled_dot_product_attention(q, k, ones, dropout_p=0.5)
    assert abs(out.mean().item() - 1.0) < 0.02


def test_dropout_all_or_nothing():
    torch.manual_seed(0)
    q, k, v = leaves(*(torch.randn(1, 2, 20, 8) for _ in range(3)))
    with RecordedOps() as ops:
        dropped = F.scaled_dot_product_attention(q, k, v, dropout_p=1.0)
        dropped.sum().backward()
    assert_fused(ops)
    assert torch.count_nonzero(dropped.detach().cpu()) == 0
    assert all(torch.count_nonzero(t.grad.cpu()) == 0 for t in (q, k, v))
    with RecordedOps() as ops:
        kept = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
    assert_fused(ops, backward=False)
    expected = F.scaled_dot_product_attention(*(t.detach().cpu() for t in (q, k, v)))
    torch.testing.assert_close(kept.detach().cpu(), expected, atol=2e-5, rtol=2e-5)


def test_dropout_is_reproducible_with_the_seed():
    q, k, v = (torch.randn(2, 2, 50, 8).to(DEVICE) for _ in range(3))

    def draw(seed):
        torch.manual_seed(seed)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.4).cpu()

    with RecordedOps() as ops:
        first, again, other = draw(3), draw(3), draw(4)
    assert ops.names.count(FORWARD) == 3 and not set(ops.names) & set(MATH_OPS)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    # The device's generator alone decides: torch.openreg.manual_seed reproduces it too.
    torch.openreg.manual_seed(11)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4).cpu()
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4).cpu()
    torch.openreg.manual_seed(11)
    assert torch.equal(F.scaled_dot_product_attention(q, k, v, dropout_p=0.4).cpu(), a)
    assert not torch.equal(a, b)  # successive calls draw anew


@pytest.mark.parametrize("causal", [False, True])
def test_dropout_forward_and_backward_use_one_mask(causal):
    """SDPA with dropout equals math with the mask the fused kernel drew, in its output and gradients."""
    torch.manual_seed(0)
    q, k, v = randn(2, 3, 70, 20).double(), randn(2, 3, 150, 20).double(), randn(2, 3, 150, 12).double()
    grad = torch.randn(2, 3, 70, 12, dtype=torch.float64)
    p = 0.3
    on_device = leaves(q, k, v)
    torch.manual_seed(5)
    with RecordedOps() as ops:
        actual = sdpa_with_grads(*on_device, grad.to(DEVICE), dropout_p=p, is_causal=causal)
    assert_fused(ops)
    torch.manual_seed(5)  # the same draw, with the mask returned
    keep = fused_with_mask(*(t.detach() for t in on_device), p, causal)[-1].cpu()
    assert 0.6 < keep.float().mean().item() < 0.8
    on_cpu = leaves(q, k, v, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Dropout mask should only be used for testing purposes."
        out, _ = torch.ops.aten._scaled_dot_product_attention_math(*on_cpu, None, p, causal, keep)
    out.backward(grad)
    expected = [out.detach()] + [t.grad for t in on_cpu]
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, atol=1e-12, rtol=1e-12)


# -- the choice -------------------------------------------------------------------------------------------------------

OVERRIDEABLE = int(SDPBackend.OVERRIDEABLE)
MATH = int(SDPBackend.MATH)


def t(*shape, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype, device=DEVICE)


CHOICES = [
    ("four_dim", (t(2, 3, 8, 4), t(2, 3, 9, 4), t(2, 3, 9, 6)), {}, OVERRIDEABLE),
    ("three_dim", (t(3, 8, 4), t(3, 9, 4), t(3, 9, 4)), {}, OVERRIDEABLE),
    ("bfloat16", (t(2, 3, 8, 4, dtype=torch.bfloat16),) * 3, {}, OVERRIDEABLE),
    ("float64", (t(2, 3, 8, 4, dtype=torch.float64),) * 3, {}, OVERRIDEABLE),
    ("causal_dropout", (t(2, 3, 8, 4),) * 3, {"is_causal": True, "dropout_p": 0.2}, OVERRIDEABLE),
    ("bool_mask", (t(2, 3, 8, 4),) * 3, {"attn_mask": t(8, 8, dtype=torch.bool)}, OVERRIDEABLE),
    ("gqa", (t(2, 4, 8, 4), t(2, 2, 8, 4), t(2, 2, 8, 4)), {"enable_gqa": True}, OVERRIDEABLE),
    # Both apply, as in CPU's flash kernel (math alone refuses the pair)
    ("mask_and_causal", (t(2, 3, 8, 4),) * 3, {"attn_mask": t(2, 1, 8, 8), "is_causal": True}, OVERRIDEABLE),
    # Left to math (which raises CPU's error for the bad ones)
    ("heads_differ_without_gqa", (t(2, 4, 8, 4), t(2, 2, 8, 4), t(2, 2, 8, 4)), {}, MATH),
    ("gqa_indivisible", (t(2, 3, 8, 4), t(2, 2, 8, 4), t(2, 2, 8, 4)), {"enable_gqa": True}, MATH),
    ("five_dim", (t(2, 2, 3, 8, 4),) * 3, {}, MATH),
    ("two_dim", (t(8, 4),) * 3, {}, MATH),
    ("batch_broadcast", (t(2, 3, 8, 4), t(1, 3, 8, 4), t(1, 3, 8, 4)), {}, MATH),
    ("mask_grows_the_scores", (t(2, 3, 8, 4),) * 3, {"attn_mask": t(4, 3, 8, 8)}, MATH),
    ("key_value_lengths_differ", (t(2, 3, 8, 4), t(2, 3, 9, 4), t(2, 3, 8, 4)), {}, MATH),
    ("integer", (t(2, 3, 8, 4, dtype=torch.int64),) * 3, {}, MATH),
    ("empty_sequence", (t(2, 3, 0, 4), t(2, 3, 8, 4), t(2, 3, 8, 4)), {}, MATH),
    ("dropout_above_one", (t(2, 3, 8, 4),) * 3, {"dropout_p": 1.5}, MATH),
]  # fmt: skip


@pytest.mark.parametrize("name, args, kwargs, expected", CHOICES, ids=[c[0] for c in CHOICES])
def test_fused_sdp_choice(name, args, kwargs, expected, fallback_counts):
    assert torch._fused_sdp_choice(*args, **kwargs) == expected
    # openreg's own answer, from the arguments' metadata: not CPU's through the fallback
    assert "aten::_fused_sdp_choice" not in dict(fallback_counts())


def test_fused_sdp_choice_is_not_cpus_and_follows_sdpa_kernel():
    args = (t(2, 3, 8, 4),) * 3
    assert torch._fused_sdp_choice(*(a.cpu() for a in args)) == int(SDPBackend.FLASH_ATTENTION)
    assert torch._fused_sdp_choice(*args) == OVERRIDEABLE
    with sdpa_kernel(SDPBackend.MATH):
        assert torch._fused_sdp_choice(*args) == MATH
        with RecordedOps() as ops:
            F.scaled_dot_product_attention(*args)
        assert FORWARD not in ops.names
    with sdpa_kernel([SDPBackend.MATH, SDPBackend.OVERRIDEABLE]):
        assert torch._fused_sdp_choice(*args) == OVERRIDEABLE


def test_no_backend_left_raises_with_the_reason():
    q, k = t(2, 3, 8, 4), t(2, 2, 8, 4)
    with sdpa_kernel(SDPBackend.OVERRIDEABLE):
        with pytest.warns(UserWarning, match="query's heads must equal"):
            with pytest.raises(RuntimeError, match="No viable backend for scaled_dot_product_attention"):
                F.scaled_dot_product_attention(q, k, k)


# -- errors -----------------------------------------------------------------------------------------------------------

# (name, shapes of q, k, v, other arguments, why the fused kernel refuses the call)
ERRORS = [
    ("head_dims_differ", ((2, 3, 8, 4), (2, 3, 8, 5), (2, 3, 8, 5)), {}, "one non-zero feature size"),
    ("mask_grows_the_scores", ((2, 3, 8, 4),) * 3, {"attn_mask": (4, 3, 8, 8)}, "does not broadcast"),
    ("gqa_indivisible", ((2, 3, 8, 4), (2, 2, 8, 4), (2, 2, 8, 4)), {"enable_gqa": True}, "or be a multiple"),
    ("heads_differ_without_gqa", ((2, 4, 8, 4), (2, 2, 8, 4), (2, 2, 8, 4)), {}, "enable_gqa=True allows"),
    ("batch_differs", ((2, 3, 8, 4), (3, 3, 8, 4), (3, 3, 8, 4)), {}, "the same batch size"),
    ("five_dim_heads_differ", ((1, 2, 3, 8, 4), (1, 2, 2, 8, 4), (1, 2, 2, 8, 4)), {}, "must all be 4-d"),
    ("dropout_above_one", ((2, 3, 8, 4),) * 3, {"dropout_p": 1.5}, "dropout_p must be between 0 and 1"),
]  # fmt: skip


def sdpa_error(device, shapes, kwargs) -> pytest.ExceptionInfo:
    torch.manual_seed(0)
    q, k, v = (torch.randn(s, device=device) for s in shapes)
    extra = {key: torch.randn(val, device=device) if key == "attn_mask" else val for key, val in kwargs.items()}
    with pytest.raises(Exception) as error:
        F.scaled_dot_product_attention(q, k, v, **extra)
    return error


@pytest.mark.parametrize("name, shapes, kwargs, reason", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_shapes_raise_what_cpu_raises(name, shapes, kwargs, reason):
    """Refused by the fused kernel, the call goes to math, which raises CPU's error; with math
    disabled, SDPA says why the fused kernel refused it."""
    on_cpu, on_device = sdpa_error("cpu", shapes, kwargs), sdpa_error(DEVICE, shapes, kwargs)
    assert on_device.type is on_cpu.type
    assert str(on_device.value) == str(on_cpu.value)
    with sdpa_kernel(SDPBackend.OVERRIDEABLE), pytest.warns(UserWarning, match=reason):
        assert "No viable backend" in str(sdpa_error(DEVICE, shapes, kwargs).value)


def test_mismatched_key_and_value_lengths_raise_math_s_error():
    """CPU's flash kernel accepts keys longer than values (reading past the values); its math path and openreg raise."""
    shapes = ((2, 3, 8, 4), (2, 3, 9, 4), (2, 3, 8, 4))
    with sdpa_kernel(SDPBackend.MATH):
        on_cpu = sdpa_error("cpu", shapes, {})
    assert str(sdpa_error(DEVICE, shapes, {}).value) == str(on_cpu.value)
    with sdpa_kernel(SDPBackend.OVERRIDEABLE), pytest.warns(UserWarning, match="one sequence length"):
        sdpa_error(DEVICE, shapes, {})


OP_ERRORS = [
    ("key_value_lengths", ((2, 3, 8, 4), (2, 3, 9, 4), (2, 3, 8, 4)), None, "key and value need one sequence length"),
    ("heads_indivisible", ((2, 3, 8, 4), (2, 2, 8, 4), (2, 2, 8, 4)), None, "or be a multiple of them"),
    ("mask_grows_the_scores", ((2, 3, 8, 4),) * 3, (3, 8, 9), "does not broadcast to the attention scores' size"),
    ("five_dim", ((1, 2, 3, 8, 4),) * 3, None, "must all be 4-d"),
]  # fmt: skip


@pytest.mark.parametrize("name, shapes, mask, match", OP_ERRORS, ids=[e[0] for e in OP_ERRORS])
def test_the_op_checks_its_arguments_at_the_call(name, shapes, mask, match):
    """Called directly, the op refuses what its kernel cannot compute, before any launch."""
    q, k, v = (torch.randn(s, device=DEVICE) for s in shapes)
    bias = torch.randn(mask, device=DEVICE) if mask else None
    with pytest.raises(RuntimeError, match=match):
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v, bias)


def test_empty_queries_launch_nothing():
    q, k = torch.randn(2, 3, 0, 4, device=DEVICE), torch.randn(2, 3, 5, 4, device=DEVICE)
    out, lse, *_ = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, k)
    assert out.shape == (2, 3, 0, 4) and lse.shape == (2, 3, 0)


# -- the profiler's view ----------------------------------------------------------------------------------------------

PRIVATEUSE1 = torch.autograd.DeviceType.PrivateUse1


def profiled(fn) -> profile:
    fn()  # first-call work (allocator pools, GEMM micro-kernels) stays out
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        fn()
        torch.openreg.synchronize()
    return prof


def device_kernels(prof: profile):
    """The device rows that are kernels (synchronisations have rows too)."""
    return [e for e in prof.events() if e.device_type == PRIVATEUSE1 and not e.name.endswith(" Sync")]


def assert_one_kernel_linked(prof: profile, op: str, kernel: str):
    events = prof.events()
    device = device_kernels(prof)
    assert [e.name for e in device] == [kernel]
    host_ops = [e for e in events if e.device_type != PRIVATEUSE1]
    records = [e for e in host_ops if e.name == op]
    assert len(records) == 1
    assert [k.name for k in records[0].kernels] == [kernel]
    assert [e.name for e in host_ops for k in e.kernels] == [op]
    averages = {a.key: a for a in prof.key_averages()}
    assert averages[op].device_time_total == pytest.approx(device[0].device_time_total)
    assert averages[op].device_time_total > 0


def test_one_sdpa_call_is_one_kernel_linked_to_its_op():
    q, k, v = (torch.randn(2, 4, 100, 16, device=DEVICE) for _ in range(3))
    prof = profiled(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1))
    assert_one_kernel_linked(prof, "aten::_scaled_dot_product_fused_attention_overrideable", "flash_attention_fwd_f32")
    parents = {e.cpu_parent.name for e in prof.events() if e.name.startswith("aten::_scaled_dot_product_fused")}
    assert parents == {"aten::scaled_dot_product_attention"}


def test_one_backward_is_one_kernel_linked_to_its_op():
    q, k, v = leaves(*(torch.randn(2, 4, 100, 16) for _ in range(3)))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1)
    grad = torch.randn_like(out)

    def backward():
        q.grad = k.grad = v.grad = None  # no accumulation kernels
        out.backward(grad, retain_graph=True)

    prof = profiled(backward)
    assert_one_kernel_linked(
        prof, "aten::_scaled_dot_product_fused_attention_overrideable_backward", "flash_attention_bwd_f32"
    )


def test_kernels_are_named_by_dtype():
    q = torch.randn(1, 2, 10, 8, device=DEVICE, dtype=torch.bfloat16)
    prof = profiled(lambda: F.scaled_dot_product_attention(q, q, q))
    assert [e.name for e in device_kernels(prof)] == ["flash_attention_fwd_bf16"]
