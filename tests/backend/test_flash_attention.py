"""Flash attention's ops on openreg (csrc/backend/aten/FlashAttention.cpp).

LLM code calls flash attention in three ways, all run here by openreg's fused
kernel, one device kernel per pass:
- `_flash_attention_forward/backward` directly, fixed (batch, sequence, heads,
  features) or packed variable-length (total, heads, features) with
  cum_seq_q/k (torch.nn.attention.varlen.varlen_attn, torchtitan's llama3
  variable-length attention);
- `scaled_dot_product_attention` restricted to `sdpa_kernel([..., FLASH_ATTENTION, MATH])`
  (torchtitan), which on any device but CUDA runs
  `_scaled_dot_product_flash_attention_for_cpu` and its backward;
- `_scaled_dot_product_flash_attention` and its backward (CUDA's SDPA flash op).

Every result is compared with CPU: flash attention has no CPU kernel, so the
reference is CPU's attention in float64 over the same band (flash attention's
causal and window masks are bottom-right aligned), per sequence for the
packed form; the SDPA path is compared with the same SDPA call on CPU.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.varlen import varlen_attn
from torch.profiler import ProfilerActivity, profile

DEVICE = torch.device("openreg", 0)
PRIVATEUSE1 = torch.autograd.DeviceType.PrivateUse1
TOLERANCE = {torch.float64: 1e-10, torch.float32: 2e-5, torch.bfloat16: 3e-2, torch.float16: 3e-3}
TORCHTITAN_BACKENDS = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]


def band_mask(rows: int, keys: int, causal: bool, left: int = -1, right: int = -1) -> torch.Tensor:
    """Flash attention's visibility (rows x keys): bottom-right aligned band."""
    i = torch.arange(rows)[:, None]
    j = torch.arange(keys)[None, :]
    diagonal = i + keys - rows
    keep = torch.ones(rows, keys, dtype=torch.bool)
    if causal:
        right = 0
    if right >= 0:
        keep &= j <= diagonal + right
    if left >= 0:
        keep &= j >= diagonal - left
    return keep


def reference(q, k, v, keep, scale=None):
    """CPU attention in float64 over (heads, rows, features) with `keep` (rows x keys): output and log-sum-exp.
    Rows that see no key give zeros and +inf, as flash attention's."""
    q, k, v = (t.double() for t in (q, k, v))
    if k.shape[-3] != q.shape[-3]:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-1, -2) * scale).masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return probs @ v, torch.where(torch.isinf(lse), torch.full_like(lse, math.inf), lse)


def leaves(*tensors, device="cpu"):
    return [t.detach().to(device).requires_grad_() for t in tensors]


def fixed_reference(q, k, v, grad, causal, left=-1, right=-1):
    """Output, lse and q/k/v gradients for (batch, sequence, heads, features) tensors."""
    q, k, v = leaves(*(t.double() for t in (q, k, v)))
    keep = band_mask(q.shape[1], k.shape[1], causal, left, right)
    out, lse = reference(*(t.transpose(1, 2) for t in (q, k, v)), keep)
    out = out.transpose(1, 2)
    out.backward(grad.double())
    return out.detach(), lse.detach(), q.grad, k.grad, v.grad


def assert_close(actual, expected, dtype, name):
    tolerance = TOLERANCE[dtype] * max(1.0, expected.abs().max().item())
    difference = (actual.cpu().double() - expected.double()).abs().max().item()
    assert difference <= tolerance, f"{name}: {difference} > {tolerance}"


FIXED_CASES = [
    # name, q (batch, rows, heads, features), key rows, kv heads, causal, window (left, right)
    ("square", (2, 70, 4, 16), 70, 4, False, (-1, -1)),
    ("causal_square", (2, 70, 4, 16), 70, 4, True, (-1, -1)),
    ("causal_more_keys", (2, 70, 4, 16), 150, 4, True, (-1, -1)),
    ("causal_more_queries", (1, 150, 2, 8), 70, 2, True, (-1, -1)),
    ("window", (2, 90, 4, 16), 130, 4, False, (10, 5)),
    ("causal_window", (1, 200, 2, 32), 200, 2, True, (33, -1)),
    ("grouped_heads", (2, 65, 8, 16), 129, 2, True, (-1, -1)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
@pytest.mark.parametrize(
    "name, q_shape, key_rows, kv_heads, causal, window", FIXED_CASES, ids=[c[0] for c in FIXED_CASES]
)
def test_fixed_form_matches_cpu(name, q_shape, key_rows, kv_heads, causal, window, dtype):
    torch.manual_seed(0)
    batch, rows, heads, features = q_shape
    q = torch.randn(q_shape).to(dtype)
    k = torch.randn(batch, key_rows, kv_heads, features).to(dtype)
    v = torch.randn(batch, key_rows, kv_heads, features).to(dtype)
    grad = torch.randn(q_shape).to(dtype)
    out_ref, lse_ref, *grads_ref = fixed_reference(q, k, v, grad, causal, *window)
    qd, kd, vd = leaves(q, k, v, device=DEVICE)
    out, lse, rng, unused, debug = torch.ops.aten._flash_attention_forward(
        qd,
        kd,
        vd,
        None,
        None,
        rows,
        key_rows,
        0.0,
        causal,
        False,
        window_size_left=window[0],
        window_size_right=window[1],
    )
    assert out.shape == q.shape and out.dtype == dtype
    assert lse.shape == (batch, heads, rows) and lse.dtype == torch.float32
    assert_close(out, out_ref, dtype, "output")
    finite = torch.isfinite(lse_ref)
    assert torch.equal(torch.isfinite(lse.cpu()), finite)
    assert_close(lse.cpu()[finite], lse_ref[finite], torch.float32 if dtype == torch.float64 else dtype, "lse")
    assert rng.dtype == torch.uint64 and rng.cpu().tolist() == [0, 0]
    # The fixed form's backward takes undefined offsets, which only autograd passes.
    gq, gk, gv = torch.autograd.grad(out, (qd, kd, vd), grad.to(DEVICE))
    for actual, expected, which in zip((gq, gk, gv), grads_ref, "qkv"):
        assert actual.shape == expected.shape
        assert_close(actual, expected, dtype, f"grad {which}")


def test_autograd_through_the_fixed_form_runs_the_flash_backward():
    """_flash_attention_forward's derivative is _flash_attention_backward (derivatives.yaml)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 40, 4, 16) for _ in range(3))
    grad = torch.randn(2, 40, 4, 16)
    _, _, *expected = fixed_reference(q, k, v, grad, causal=True)
    qd, kd, vd = leaves(q, k, v, device=DEVICE)
    out = torch.ops.aten._flash_attention_forward(qd, kd, vd, None, None, 40, 40, 0.0, True, False)[0]
    grad = grad.to(DEVICE)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        out.backward(grad)
        torch.openreg.synchronize()
    assert kernels_by_op(prof) == {"aten::_flash_attention_backward": ["flash_attention_bwd_f32"]}
    for leaf, want in zip((qd, kd, vd), expected):
        assert_close(leaf.grad, want, torch.float32, "grad")


def packed(lengths_q, lengths_k, heads, kv_heads, features, dtype, spare_rows=0):
    """Packed q, k, v with `spare_rows` rows past the last sequence, and their int32 offsets."""
    cum_q = torch.tensor([0] + torch.tensor(lengths_q).cumsum(0).tolist(), dtype=torch.int32)
    cum_k = torch.tensor([0] + torch.tensor(lengths_k).cumsum(0).tolist(), dtype=torch.int32)
    q = torch.randn(sum(lengths_q) + spare_rows, heads, features).to(dtype)
    k = torch.randn(sum(lengths_k) + spare_rows, kv_heads, features).to(dtype)
    v = torch.randn(sum(lengths_k) + spare_rows, kv_heads, features).to(dtype)
    return q, k, v, cum_q, cum_k


def packed_reference(q, k, v, cum_q, cum_k, grad, causal):
    """Per sequence, CPU attention in float64; rows outside every sequence: zero output and gradient, +inf lse."""
    q, k, v = leaves(*(t.double() for t in (q, k, v)))
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[2], dtype=torch.float64)
    lse = torch.full((q.shape[1], q.shape[0]), math.inf, dtype=torch.float64)
    pieces = []
    for s in range(len(cum_q) - 1):
        qs, ks, vs = q[cum_q[s] : cum_q[s + 1]], k[cum_k[s] : cum_k[s + 1]], v[cum_k[s] : cum_k[s + 1]]
        keep = band_mask(qs.shape[0], ks.shape[0], causal)
        o, row_lse = reference(qs.transpose(0, 1), ks.transpose(0, 1), vs.transpose(0, 1), keep)
        pieces.append((s, o.transpose(0, 1), row_lse))
    total = sum((o * grad[cum_q[s] : cum_q[s + 1]].double()).sum() for s, o, _ in pieces)
    total.backward()
    for s, o, row_lse in pieces:
        out[cum_q[s] : cum_q[s + 1]] = o.detach()
        lse[:, cum_q[s] : cum_q[s + 1]] = row_lse.detach()
    grads = [t.grad if t.grad is not None else torch.zeros_like(t) for t in (q, k, v)]
    return out, lse, grads


PACKED_CASES = [
    # name, query lengths, key lengths, heads, kv heads, causal, spare rows
    ("equal_lengths_causal", [64, 64, 64], [64, 64, 64], 4, 4, True, 0),
    ("mixed_lengths", [5, 33, 130, 1], [9, 33, 200, 7], 4, 2, False, 0),
    ("mixed_lengths_causal", [5, 33, 130, 1], [9, 33, 200, 7], 4, 2, True, 0),
    ("empty_sequence", [7, 0, 12], [7, 5, 12], 2, 2, True, 0),
    ("spare_rows", [10, 20], [10, 20], 2, 1, True, 6),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name, lq, lk, heads, kv_heads, causal, spare", PACKED_CASES, ids=[c[0] for c in PACKED_CASES])
def test_packed_sequences_match_cpu_per_sequence(name, lq, lk, heads, kv_heads, causal, spare, dtype):
    torch.manual_seed(0)
    q, k, v, cum_q, cum_k = packed(lq, lk, heads, kv_heads, 16, dtype, spare)
    grad = torch.randn(q.shape[0], heads, 16).to(dtype)
    out_ref, lse_ref, grads_ref = packed_reference(q, k, v, cum_q, cum_k, grad, causal)
    qd, kd, vd = (t.to(DEVICE) for t in (q, k, v))
    cq, ck = cum_q.to(DEVICE), cum_k.to(DEVICE)
    out, lse, rng, unused, _ = torch.ops.aten._flash_attention_forward(
        qd, kd, vd, cq, ck, max(lq), max(lk), 0.0, causal, False
    )
    assert lse.shape == (heads, q.shape[0])
    assert_close(out, out_ref, dtype, "output")
    finite = torch.isfinite(lse_ref)
    assert torch.equal(torch.isfinite(lse.cpu()), finite)
    assert_close(lse.cpu()[finite], lse_ref[finite], dtype, "lse")
    grads = torch.ops.aten._flash_attention_backward(
        grad.to(DEVICE), qd, kd, vd, out, lse, cq, ck, max(lq), max(lk), 0.0, causal, rng, unused
    )
    for actual, expected, which in zip(grads, grads_ref, "qkv"):
        assert_close(actual, expected, dtype, f"grad {which}")


def test_varlen_attn_trains_as_on_cpu():
    """torch.nn.attention.varlen.varlen_attn (what torchtitan's llama3 calls) with autograd."""
    torch.manual_seed(0)
    q, k, v, cum_q, cum_k = packed([17, 64, 3], [17, 64, 3], 4, 4, 32, torch.float32)
    grad = torch.randn_like(q)
    out_ref, _, grads_ref = packed_reference(q, k, v, cum_q, cum_k, grad, causal=True)
    qd, kd, vd = leaves(q, k, v, device=DEVICE)
    out = varlen_attn(qd, kd, vd, cum_q.to(DEVICE), cum_k.to(DEVICE), 64, 64, window_size=(-1, 0))
    out.backward(grad.to(DEVICE))
    assert_close(out.detach(), out_ref, torch.float32, "output")
    for leaf, want, which in zip((qd, kd, vd), grads_ref, "qkv"):
        assert_close(leaf.grad, want, torch.float32, f"grad {which}")


def sdpa_with_grads(device, q, k, v, grad, **kwargs):
    q, k, v = leaves(q, k, v, device=device)
    out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    out.backward(grad.to(device))
    return [out.detach().cpu()] + [t.grad.cpu() for t in (q, k, v)]


SDPA_CASES = [
    ("causal", (2, 4, 100, 16), (2, 4, 100, 16), {"is_causal": True}),
    ("causal_more_keys", (2, 4, 60, 16), (2, 4, 90, 16), {"is_causal": True}),  # top-left, as CPU's
    ("float_mask", (2, 4, 50, 16), (2, 4, 70, 16), {"attn_mask": "float"}),
    ("bool_mask", (2, 4, 50, 16), (2, 4, 70, 16), {"attn_mask": "bool"}),
    ("grouped_heads", (2, 8, 40, 16), (2, 2, 40, 16), {"is_causal": True, "enable_gqa": True}),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("name, q_shape, kv_shape, kwargs", SDPA_CASES, ids=[c[0] for c in SDPA_CASES])
def test_sdpa_restricted_to_flash_runs_fused_and_matches_cpu(name, q_shape, kv_shape, kwargs, dtype):
    torch.manual_seed(0)
    q, k, v = torch.randn(q_shape).to(dtype), torch.randn(kv_shape).to(dtype), torch.randn(kv_shape).to(dtype)
    grad = torch.randn(q_shape).to(dtype)
    kwargs = dict(kwargs)
    if kwargs.get("attn_mask") == "float":
        kwargs["attn_mask"] = torch.randn(q_shape[-2], kv_shape[-2]).to(dtype)
    elif kwargs.get("attn_mask") == "bool":
        kwargs["attn_mask"] = torch.rand(q_shape[-2], kv_shape[-2]) > 0.3
    expected = sdpa_with_grads("cpu", q, k, v, grad, **kwargs)
    on_device = {key: val.to(DEVICE) if isinstance(val, torch.Tensor) else val for key, val in kwargs.items()}
    with sdpa_kernel(TORCHTITAN_BACKENDS):
        args = [t.to(DEVICE) for t in (q, k, v)]
        choice = torch._fused_sdp_choice(
            *args,
            attn_mask=on_device.get("attn_mask"),
            is_causal=on_device.get("is_causal", False),
            enable_gqa=on_device.get("enable_gqa", False),
        )
        assert choice == int(SDPBackend.FLASH_ATTENTION)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            actual = sdpa_with_grads(DEVICE, q, k, v, grad, **on_device)
            torch.openreg.synchronize()
    names = {e.name for e in prof.events()}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in names
    assert "aten::_scaled_dot_product_flash_attention_for_cpu_backward" in names
    assert not names & {"aten::_safe_softmax", "aten::_softmax", "aten::bmm"}, "the math path ran"
    for a, e, which in zip(actual, expected, ("output", "grad q", "grad k", "grad v")):
        assert a.dtype == e.dtype and a.shape == e.shape and a.stride() == e.stride(), which
        assert_close(a, e, dtype, which)


def test_the_flash_path_leaves_dropout_to_math_and_says_why():
    q = torch.randn(2, 4, 16, 8, device=DEVICE)
    with sdpa_kernel(TORCHTITAN_BACKENDS):
        assert torch._fused_sdp_choice(q, q, q, dropout_p=0.1) == int(SDPBackend.MATH)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION), pytest.warns(UserWarning, match="the flash path has no dropout"):
        with pytest.raises(RuntimeError, match="No viable backend"):
            F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    # The default choice stays openreg's overrideable kernel, which has dropout.
    assert torch._fused_sdp_choice(q, q, q, dropout_p=0.1) == int(SDPBackend.OVERRIDEABLE)


def device_kernels(prof):
    return [e for e in prof.events() if e.device_type == PRIVATEUSE1 and not e.name.endswith(" Sync")]


def kernels_by_op(prof):
    return {e.name: [k.name for k in e.kernels] for e in prof.events() if e.device_type != PRIVATEUSE1 and e.kernels}


def test_each_pass_is_one_kernel_linked_to_its_op():
    """Four packed sequences, forward and backward: two kernels, each under the op that launched it."""
    torch.manual_seed(0)
    q, k, v, cum_q, cum_k = packed([10, 50, 3, 70], [10, 50, 3, 70], 4, 4, 16, torch.float32)
    qd, kd, vd = leaves(q, k, v, device=DEVICE)
    cq, ck = cum_q.to(DEVICE), cum_k.to(DEVICE)
    grad = torch.randn_like(qd)
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        out = torch.ops.aten._flash_attention_forward(qd, kd, vd, cq, ck, 70, 70, 0.0, True, False)
        torch.ops.aten._flash_attention_backward(
            grad, qd, kd, vd, out[0], out[1], cq, ck, 70, 70, 0.0, True, out[2], out[3]
        )
        torch.openreg.synchronize()
    assert [e.name for e in device_kernels(prof)] == ["flash_attention_fwd_f32", "flash_attention_bwd_f32"]
    assert kernels_by_op(prof) == {
        "aten::_flash_attention_forward": ["flash_attention_fwd_f32"],
        "aten::_flash_attention_backward": ["flash_attention_bwd_f32"],
    }


def dropout_reference(q, k, v, grad, keep_mask, p, causal_top_left=False):
    """CPU math with the kernel's own dropout mask (SDPA's math takes one for checking fused kernels)."""
    q, k, v = leaves(*(t.double() for t in (q, k, v)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out, _ = torch.ops.aten._scaled_dot_product_attention_math(
            q, k, v, None, p, causal_top_left, dropout_mask=keep_mask.cpu()
        )
    out.backward(grad.double())
    return [out.detach(), q.grad, k.grad, v.grad]


def test_sdpa_flash_op_with_dropout_keeps_its_mask_between_passes():
    """_scaled_dot_product_flash_attention (CUDA's op): the backward redraws the forward's dropout mask from the
    rng_state the forward's kernel wrote; both passes match CPU math given that mask."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 40, 8) for _ in range(3))
    grad = torch.randn(2, 3, 40, 8)
    qd, kd, vd = (t.to(DEVICE) for t in (q, k, v))
    out, lse, cum_q, cum_k, max_q, max_k, seed, offset, keep = torch.ops.aten._scaled_dot_product_flash_attention(
        qd, kd, vd, 0.3, False, True
    )
    assert (max_q, max_k) == (40, 40) and cum_q is None and cum_k is None
    assert keep.dtype == torch.bool and keep.shape == (2, 3, 40, 40)
    kept = keep.float().mean().item()
    assert 0.6 < kept < 0.8, kept
    assert seed.cpu()[0].item() != 0
    grads = torch.ops.aten._scaled_dot_product_flash_attention_backward(
        grad.to(DEVICE), qd, kd, vd, out, lse, cum_q, cum_k, max_q, max_k, 0.3, False, seed, offset
    )
    expected = dropout_reference(q, k, v, grad, keep, 0.3)
    for actual, want, which in zip((out, *grads), expected, ("output", "grad q", "grad k", "grad v")):
        assert_close(actual, want, torch.float32, which)


def test_two_forwards_draw_different_masks_and_follow_the_seed():
    q = torch.randn(1, 2, 32, 8, device=DEVICE)
    torch.manual_seed(5)
    first = torch.ops.aten._scaled_dot_product_flash_attention(q, q, q, 0.5, False, True)[-1].cpu()
    second = torch.ops.aten._scaled_dot_product_flash_attention(q, q, q, 0.5, False, True)[-1].cpu()
    torch.manual_seed(5)
    again = torch.ops.aten._scaled_dot_product_flash_attention(q, q, q, 0.5, False, True)[-1].cpu()
    assert not torch.equal(first, second)
    assert torch.equal(first, again)


def bad_offsets_error(cum_q, lengths_total=20, max_q=20):
    q = torch.randn(lengths_total, 2, 8, device=DEVICE)
    cq = torch.tensor(cum_q, dtype=torch.int32, device=DEVICE)
    torch.ops.aten._flash_attention_forward(q, q, q, cq, cq, max_q, max_q, 0.0, True, False)
    with pytest.raises(RuntimeError) as error:
        torch.openreg.synchronize()
    return str(error.value)


def test_bad_offsets_fail_the_kernel_with_their_name_and_the_device_goes_on():
    assert "cum_seq_q must not decrease" in bad_offsets_error([0, 12, 8, 20])
    assert "cum_seq_q[2] = 25 is past the tensor's 20 rows" in bad_offsets_error([0, 10, 25])
    assert "sequence 1 has 15 rows by cum_seq_q, more than the maximum 10 given" in bad_offsets_error(
        [0, 5, 20], max_q=10
    )
    assert "cum_seq_q[0] is -1" in bad_offsets_error([-1, 20])
    x = torch.ones(3, device=DEVICE)
    assert (x + x).cpu().tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize(
    "name, call, message",
    [
        (
            "int64_offsets",
            lambda q, c: torch.ops.aten._flash_attention_forward(q, q, q, c.long(), c.long(), 20, 20, 0.0, True, False),
            "must be a 1-d int32 tensor",
        ),
        (
            "cpu_offsets",
            lambda q, c: torch.ops.aten._flash_attention_forward(q, q, q, c.cpu(), c.cpu(), 20, 20, 0.0, True, False),
            "same device|on the query's device",
        ),
        (
            "one_offset_tensor",
            lambda q, c: torch.ops.aten._flash_attention_forward(q, q, q, c, None, 20, 20, 0.0, True, False),
            "both cum_seq_q and cum_seq_k",
        ),
        (
            "seqused_k",
            lambda q, c: torch.ops.aten._flash_attention_forward(q, q, q, c, c, 20, 20, 0.0, True, False, seqused_k=c),
            "seqused_k is not supported",
        ),
        (
            "alibi",
            lambda q, c: torch.ops.aten._flash_attention_forward(
                q, q, q, c, c, 20, 20, 0.0, True, False, alibi_slopes=torch.ones(2, device=DEVICE)
            ),
            "alibi_slopes is not supported",
        ),
        (
            "window",
            lambda q, c: torch.ops.aten._flash_attention_forward(
                q, q, q, c, c, 20, 20, 0.0, False, False, window_size_left=-2
            ),
            "window_size_left and window_size_right",
        ),
        (
            "fixed_form_3d",
            lambda q, c: torch.ops.aten._flash_attention_forward(q, q, q, None, None, 20, 20, 0.0, True, False),
            r"4-d \(batch, sequence, heads, features\)",
        ),
        (
            "value_features",
            lambda q, c: torch.ops.aten._flash_attention_forward(
                q, q, torch.randn(20, 2, 4, device=DEVICE), c, c, 20, 20, 0.0, True, False
            ),
            "one non-zero feature size",
        ),
        (
            "heads",
            lambda q, c: torch.ops.aten._flash_attention_forward(
                q,
                torch.randn(20, 3, 8, device=DEVICE),
                torch.randn(20, 3, 8, device=DEVICE),
                c,
                c,
                20,
                20,
                0.0,
                True,
                False,
            ),
            "a multiple of the key's",
        ),
        (
            "dropout",
            lambda q, c: torch.ops.aten._flash_attention_forward(q, q, q, c, c, 20, 20, 1.5, True, False),
            "dropout_p must be between 0 and 1",
        ),
        (
            "packed_debug_mask",
            lambda q, c: torch.ops.aten._flash_attention_forward(q, q, q, c, c, 20, 20, 0.2, True, True),
            "return_debug_mask is not supported for packed",
        ),
        (
            "for_cpu_dropout",
            lambda q, c: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q[None], q[None], q[None], 0.1),
            "dropout_p must be 0",
        ),
    ],
)
def test_bad_calls_raise_at_the_call(name, call, message):
    q = torch.randn(20, 2, 8, device=DEVICE)
    c = torch.tensor([0, 20], dtype=torch.int32, device=DEVICE)
    with pytest.raises(RuntimeError, match=message):
        call(q, c)


def test_offsets_must_be_contiguous():
    """The kernel reads cum_seq_q/k as arrays: a strided view of other offsets would be read wrong, silently."""
    q = torch.randn(20, 2, 8, device=DEVICE)
    store = torch.tensor([0, 3, 10, 15, 20], dtype=torch.int32, device=DEVICE)
    for offsets in (store[::2], torch.zeros(1, dtype=torch.int32, device=DEVICE).expand(3)):
        with pytest.raises(RuntimeError, match="cum_seq_q must be contiguous"):
            torch.ops.aten._flash_attention_forward(q, q, q, offsets, offsets, 20, 20, 0.0, False, False)


@pytest.mark.parametrize(
    "q_rows, k_rows, causal, left, right",
    [(16, 16, False, -1, 2**63 - 1), (16, 8, True, 2**63 - 1, -1), (8, 16, False, 2**63 - 1, 2**63 - 1)],
)
def test_a_window_of_int64_max_is_unbounded(q_rows, k_rows, causal, left, right):
    """A window wider than the scores (sys.maxsize as "unbounded") must not overflow the band's arithmetic."""
    torch.manual_seed(0)
    q, k, v = torch.randn(1, q_rows, 2, 8), torch.randn(1, k_rows, 2, 8), torch.randn(1, k_rows, 2, 8)
    expected = reference(*(t.transpose(1, 2) for t in (q, k, v)), band_mask(q_rows, k_rows, causal))[0].transpose(1, 2)
    out = torch.ops.aten._flash_attention_forward(
        *(t.to(DEVICE) for t in (q, k, v)),
        None,
        None,
        q_rows,
        k_rows,
        0.0,
        causal,
        False,
        window_size_left=left,
        window_size_right=right,
    )[0]
    assert_close(out, expected, torch.float32, "output")
