"""Autocast on openreg follows CUDA's policy, op by op.

CUDA's autocast kernels are part of every torch build (``aten/src/ATen/autocast_mode.cpp``
registers them on the AutocastCUDA key), so this CPU-only machine can run them: on fake
CUDA tensors (``FakeTensorMode``, which keys a tensor as its device's), with CUDA's autocast
switched on through torch's thread-local state (``torch.autocast("cuda")`` turns itself off
without a GPU). Each call of torch's own CUDA autocast lists
(``torch.testing._internal.autocast_test_lists.AutocastTestLists``, what torch's
``test_cuda.py`` runs) is made on openreg tensors under ``torch.autocast("openreg")`` and on
fake CUDA tensors under CUDA's autocast; the result dtypes must be the same, and the refused
op must fail with CUDA's own error.
"""

from __future__ import annotations

import collections
import contextlib

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing._internal.autocast_test_lists import AutocastTestLists

import torch_openreg  # noqa: F401

AMP_DTYPES = [torch.float16, torch.bfloat16]


def _ops_with_kernel(key: str) -> set[str]:
    return {
        name
        for name in torch._C._dispatch_get_all_op_names()
        if torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
    }


def test_every_op_cuda_autocasts_has_an_openreg_policy():
    cuda = _ops_with_kernel("AutocastCUDA")
    openreg = _ops_with_kernel("AutocastPrivateUse1")
    assert len(cuda) > 100  # the tables were read
    assert sorted(cuda - openreg) == []
    assert sorted(openreg - cuda) == []


@contextlib.contextmanager
def _cuda_autocast(dtype: torch.dtype):
    """CUDA's autocast on, as ``torch.autocast("cuda")`` would turn it on with a GPU."""
    enabled, previous = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
    torch.set_autocast_enabled("cuda", True)
    torch.set_autocast_dtype("cuda", dtype)
    torch.autocast_increment_nesting()
    try:
        yield
    finally:
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
        torch.set_autocast_enabled("cuda", enabled)
        torch.set_autocast_dtype("cuda", previous)


class _FakeCuda:
    """Fake CUDA twins of openreg arguments (same dtype, shape and strides)."""

    def __init__(self):
        self.mode = FakeTensorMode()

    def twin(self, value):
        if isinstance(value, torch.Tensor):
            with self.mode:
                return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="cuda")
        if isinstance(value, (tuple, list)):
            return type(value)(self.twin(v) for v in value)
        return value


def _dtypes(result) -> list[torch.dtype]:
    if isinstance(result, torch.Tensor):
        return [result.dtype]
    if isinstance(result, collections.abc.Iterable) and not isinstance(result, str):
        return [d for r in result for d in _dtypes(r)]
    return []


def _call(module, op: str, args, kwargs):
    if module is None:  # a Tensor method
        return getattr(args[0], op)(*args[1:], **kwargs)
    return getattr(module, op)(*args, **kwargs)


def _widest(args) -> torch.dtype:
    floats = [a.dtype for a in _flatten(args) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    return torch.float32 if torch.float32 in floats else floats[0]


def _flatten(args):
    for a in args:
        if isinstance(a, (tuple, list)):
            yield from _flatten(a)
        else:
            yield a


def _cases(lists: AutocastTestLists):
    """(list name, module or None for a Tensor method, op, args, kwargs) of torch's CUDA autocast lists."""
    modules = {
        "torch_fp16": torch,
        "torch_fp32": torch,
        "torch_need_autocast_promote": torch,
        "nn_fp16": torch._C._nn,
        "nn_fp32": torch._C._nn,
        "linalg_fp16": torch._C._linalg,
        "methods_fp16": None,
        "methods_fp32": None,
    }
    for name, module in modules.items():
        for entry in getattr(lists, name):
            op, args = entry[0], entry[1]
            third = entry[2] if len(entry) > 2 else {}
            if op.startswith("cudnn_") or not isinstance(third, dict):
                # cuDNN's own kernels (no openreg or fake tensor runs them), and the entry
                # torch's own runner skips (einsum: a third element that is not kwargs).
                continue
            yield name, module, op, args, third


def _extra_cases():
    """Ops of CUDA's policy that torch's lists do not call: attention, resampling, losses, norms."""
    q = torch.randn(2, 3, 8, 4, device="openreg")
    image = torch.randn(1, 2, 6, 6, device="openreg")
    half = torch.randn(4, 4, device="openreg", dtype=torch.float16)
    yield "torch_fp16", torch, "einsum", ("bij,bjk->bik", q[0], q[0].transpose(-1, -2)), {}
    yield "torch_fp16", F, "scaled_dot_product_attention", (q, q, q), {"is_causal": True}
    yield "torch_fp32", F, "interpolate", (image.half(),), {"scale_factor": 2, "mode": "nearest"}
    yield "torch_fp32", F, "interpolate", (image.half(),), {"scale_factor": 2, "mode": "bilinear"}
    yield "torch_fp32", torch._C._nn, "huber_loss", (half, half), {}
    yield "torch_fp32", torch.linalg, "vector_norm", (half,), {}
    yield "torch_fp32", torch, "native_layer_norm", (half, (4,), None, None, 1e-5), {}
    yield "unlisted", torch, "relu", (half,), {}


def _expected(list_name: str, args, amp: torch.dtype):
    if list_name.endswith("fp16"):
        return amp
    if list_name.endswith("fp32"):
        return torch.float32
    if list_name.endswith("promote"):
        return _widest(args)
    return None  # not autocast: the op's own result dtype


# CUDA's path of these needs a GPU even on fake tensors (gru_cell's fused kernel has no fake
# implementation; grid_sampler asks cuDNN): their CUDA dtype is the one torch's list states.
NOT_RUNNABLE_ON_FAKE_CUDA = {"gru_cell", "grid_sampler"}
PRIORITIZE_REFUSAL = "Unexpected floating ScalarType in at::autocast::prioritize"


def _outcome(run):
    """The result dtypes of `run()`, or the error it raised (type and message)."""
    try:
        return _dtypes(run())
    except RuntimeError as error:
        return (type(error).__name__, str(error).splitlines()[0])


def _cuda_outcome(fake: _FakeCuda, amp: torch.dtype, module, op: str, args, kwargs):
    if op in NOT_RUNNABLE_ON_FAKE_CUDA:
        return None
    with _cuda_autocast(amp), fake.mode:
        return _outcome(lambda: _call(module, op, fake.twin(args), fake.twin(kwargs)))


@pytest.mark.parametrize("amp", AMP_DTYPES, ids=["float16", "bfloat16"])
def test_autocast_result_dtypes_match_cuda_op_by_op(amp):
    torch.manual_seed(0)
    fake = _FakeCuda()
    ran_on_cuda, errors, mismatches = set(), [], []
    cases = list(_cases(AutocastTestLists(torch.device("openreg")))) + list(_extra_cases())
    for list_name, module, op, args, kwargs in cases:
        with torch.autocast("openreg", dtype=amp):
            ours = _outcome(lambda: _call(module, op, args, kwargs))
        cuda = _cuda_outcome(fake, amp, module, op, args, kwargs)
        if cuda is not None:
            ran_on_cuda.add(op)
        if isinstance(ours, tuple):
            errors.append(op)
            # Refused as CUDA refuses it; where CUDA's path cannot run here, by the promote
            # policy's own check, which CUDA's promoting kernels share.
            expected = cuda if cuda is not None else ("RuntimeError", PRIORITIZE_REFUSAL)
        else:
            expected_dtype = _expected(list_name, args, amp)
            expected = [expected_dtype] + ours[1:] if expected_dtype is not None else ours
            if cuda is not None and cuda != expected:
                mismatches.append((list_name, op, "CUDA", cuda, expected))
        if not ours or ours != expected:
            mismatches.append((list_name, op, "openreg", ours, expected))
    assert mismatches == []
    assert len(cases) == 104  # every call of torch's lists and ours ran (none skipped silently)
    assert {case[2] for case in cases} - ran_on_cuda == NOT_RUNNABLE_ON_FAKE_CUDA
    # torch's lists hold float16 operands: a bfloat16 autocast refuses the promoting ops given both
    # float16 and float32 (at::autocast::prioritize), on CUDA as here.
    refused = ["bilinear", "dot", "vdot", "grid_sampler", "index_put", "scatter_add"]
    assert errors == ([] if amp == torch.float16 else refused)


def _cuda_refusal(amp: torch.dtype) -> RuntimeError:
    fake = _FakeCuda()
    with _cuda_autocast(amp), fake.mode:
        args = fake.twin((torch.rand(4, 4, device="openreg"), torch.rand(4, 4, device="openreg")))
        with pytest.raises(RuntimeError) as refused:
            F.binary_cross_entropy(*args)
    return refused.value


@pytest.mark.parametrize("amp", AMP_DTYPES, ids=["float16", "bfloat16"])
def test_binary_cross_entropy_is_refused_as_on_cuda(amp):
    expected = str(_cuda_refusal(amp))
    assert "unsafe to autocast" in expected
    probabilities = torch.rand(4, 4, device="openreg")
    targets = torch.rand(4, 4, device="openreg")
    with torch.autocast("openreg", dtype=amp):
        with pytest.raises(RuntimeError) as functional:
            F.binary_cross_entropy(probabilities, targets)
        with pytest.raises(RuntimeError) as module:
            torch.nn.BCELoss()(probabilities, targets)
        # The safe form CUDA's message points to runs, in float32.
        assert F.binary_cross_entropy_with_logits(probabilities, targets).dtype == torch.float32
    assert str(functional.value) == expected
    assert str(module.value) == expected
    # Outside autocast the op is CPU's.
    loss = F.binary_cross_entropy(probabilities, targets)
    assert torch.allclose(loss.cpu(), F.binary_cross_entropy(probabilities.cpu(), targets.cpu()))
