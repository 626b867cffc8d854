"""What a CPU kernel refuses, openreg refuses at the call, with CPU's exception and message.

openreg's kernels run ATen's CPU kernels on the device's threads. A CPU kernel
refuses a dtype it lacks inside its body (`"normal_kernel_cpu" not
implemented for 'Int'`); on openreg that surfaced at the next synchronisation
as a failed kernel, or as a warning at exit. CPU and CUDA raise at the call.
The backend now finds these refusals on the host before it launches: a dry
run of the body on small stand-ins (aten/KernelProbe.h) for NotImplementedError,
host checks (aten/ArgumentChecks.cpp) for the refusals CPU raises as other
errors. test_opdb_conformance.py sweeps op_db for the same ("refused_dtypes");
these are the cases a user meets first, each compared with CPU's own answer.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_openreg


def _outcome(call, device: str) -> tuple[str, str]:
    """(exception type, first line of its message) of `call(device)`, ("", "") when it does not raise; on openreg
    also nothing queued: a refusal raises at the call or not at all."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ComplexHalf is experimental, and says so
        try:
            call(device)
        except Exception as error:  # noqa: BLE001 - the error is the answer
            return type(error).__name__, str(error).splitlines()[0]
    if device == "openreg":
        torch.openreg.synchronize()  # a refusal left to the kernel fails here, and the test with it
    return "", ""


def assert_refused_like_cpu(call):
    expected = _outcome(call, "cpu")
    assert expected[0], "CPU runs this call: nothing to compare"
    assert _outcome(call, "openreg") == expected


def ones(shape, dtype, device):
    return torch.ones(shape, dtype=dtype, device=device)


RANDOM_FILLS = {
    "randn": lambda dtype, d: torch.randn(4, dtype=dtype, device=d),
    "rand": lambda dtype, d: torch.rand(4, dtype=dtype, device=d),
    "normal_": lambda dtype, d: torch.empty(4, dtype=dtype, device=d).normal_(),
    "uniform_": lambda dtype, d: torch.empty(4, dtype=dtype, device=d).uniform_(),
    "exponential_": lambda dtype, d: torch.empty(4, dtype=dtype, device=d).exponential_(),
    "cauchy_": lambda dtype, d: torch.empty(4, dtype=dtype, device=d).cauchy_(),
    "log_normal_": lambda dtype, d: torch.empty(4, dtype=dtype, device=d).log_normal_(),
    "randn_like": lambda dtype, d: torch.randn_like(torch.empty(4, dtype=dtype, device=d)),
    "bernoulli": lambda dtype, d: torch.bernoulli(torch.zeros(4, dtype=dtype, device=d)),
    "randperm": lambda dtype, d: torch.randperm(4, dtype=dtype, device=d),
}


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.bool], ids=str)
@pytest.mark.parametrize("fill", RANDOM_FILLS)
def test_random_fills_refuse_what_cpu_refuses_at_the_call(fill, dtype):
    expected = _outcome(lambda d: RANDOM_FILLS[fill](dtype, d), "cpu")
    assert _outcome(lambda d: RANDOM_FILLS[fill](dtype, d), "openreg") == expected


def test_the_issues_example_raises_at_the_call_and_empty_calls_run_as_on_cpu():
    with pytest.raises(NotImplementedError, match="\"normal_kernel_cpu\" not implemented for 'Int'"):
        torch.randn(4, dtype=torch.int32, device="openreg")
    torch.openreg.synchronize()  # nothing was queued
    # CPU's kernel dispatches on the dtype only when there is work: so does openreg.
    assert torch.randn(0, dtype=torch.int32, device="openreg").shape == (0,)
    assert _outcome(lambda d: torch.randperm(5000, dtype=torch.float16, device=d), "openreg") == (
        "RuntimeError",
        "n cannot be greater than 2049 for Half type.",
    )


KERNEL_REFUSALS = {
    "sum complex32": lambda d: ones((3, 3), torch.complex32, d).sum(),
    "mm bool": lambda d: ones((2, 3), torch.bool, d) @ ones((3, 2), torch.bool, d),
    "softmax int64": lambda d: torch.softmax(ones(4, torch.int64, d), 0),
    "pow bool": lambda d: torch.pow(ones(4, torch.bool, d), ones(4, torch.bool, d)),
    "cumsum complex32": lambda d: ones(4, torch.complex32, d).cumsum(0),
    "layer_norm complex32": lambda d: torch.nn.functional.layer_norm(ones((2, 3), torch.complex32, d), (3,)),
    "batch_norm uint8": lambda d: torch.nn.functional.batch_norm(
        ones((2, 3), torch.uint8, d), None, None, training=True
    ),
    "max_pool2d complex32": lambda d: torch.nn.functional.max_pool2d(ones((1, 1, 4, 4), torch.complex32, d), 3),
    "elu uint8": lambda d: torch.nn.functional.elu(ones(4, torch.uint8, d)),
    "flip complex32": lambda d: ones(4, torch.complex32, d).flip(0),
    "equal complex32": lambda d: torch.equal(ones(4, torch.complex32, d), ones(4, torch.complex32, d)),
    "conv_transpose2d uint8": lambda d: torch.nn.functional.conv_transpose2d(
        ones((1, 2, 3, 3), torch.uint8, d), ones((2, 2, 2, 2), torch.uint8, d)
    ),
    # a call above the dry run's exact-size limit: its stand-ins are cut to two elements per dimension
    "sum complex32 (large)": lambda d: ones((300, 300), torch.complex32, d).sum(1),
}


@pytest.mark.parametrize("case", KERNEL_REFUSALS)
def test_kernels_refuse_dtypes_at_the_call(case):
    assert_refused_like_cpu(KERNEL_REFUSALS[case])


HOST_CHECKS = {
    "mm mixed dtypes": lambda d: torch.mm(ones((2, 2), torch.bfloat16, d), ones((2, 2), torch.float32, d)),
    "linear mixed dtypes": lambda d: torch.nn.functional.linear(ones((2, 2), torch.bfloat16, d), ones((2, 2), None, d)),
    "bmm mixed dtypes": lambda d: torch.bmm(ones((1, 2, 2), None, d), ones((1, 2, 2), torch.bfloat16, d)),
    "layer_norm bf16 weight": lambda d: torch.nn.functional.layer_norm(
        ones((2, 2), None, d), (2,), ones(2, torch.bfloat16, d)
    ),
    "batch_norm f64 running stats": lambda d: torch.nn.functional.batch_norm(
        ones((2, 2), None, d), ones(2, torch.float64, d), ones(2, torch.float64, d), training=False
    ),
    "group_norm f64 weight": lambda d: torch.nn.functional.group_norm(
        ones((2, 2, 2), None, d), 1, ones(2, torch.float64, d)
    ),
    "hardtanh bool": lambda d: torch.nn.functional.hardtanh(ones(3, torch.bool, d)),
    "std uint8": lambda d: torch.std(ones(3, torch.uint8, d)),
    "var_mean int64": lambda d: torch.var_mean(ones(3, torch.int64, d)),
    "nansum complex64": lambda d: torch.nansum(ones(3, torch.complex64, d)),
    "heaviside complex64": lambda d: torch.heaviside(ones(3, torch.complex64, d), ones(3, torch.complex64, d)),
    "irfft complex32": lambda d: torch.fft.irfft(ones(4, torch.complex32, d)),
    "renorm complex32": lambda d: torch.renorm(ones((2, 2), torch.complex32, d), 2, 0, 1.0),
    "segment_reduce complex32": lambda d: torch.segment_reduce(
        ones(4, torch.complex32, d), "sum", lengths=torch.tensor([2, 2], device=d)
    ),
    "masked_fill value overflow": lambda d: ones(3, torch.int64, d).masked_fill(
        ones(3, torch.bool, d), torch.tensor(1e30j, device=d)
    ),
    "masked_scatter mixed dtypes": lambda d: torch.zeros(3, device=d).masked_scatter_(
        ones(3, torch.bool, d), ones(3, torch.bfloat16, d)
    ),
}


@pytest.mark.parametrize("case", HOST_CHECKS)
def test_refusals_cpu_raises_as_runtime_errors_raise_at_the_call(case):
    assert_refused_like_cpu(HOST_CHECKS[case])


def test_integer_convolutions_run_as_on_cpu():
    x = torch.arange(2 * 2 * 4 * 4, dtype=torch.int64).reshape(2, 2, 4, 4) % 5
    w = torch.arange(3 * 2 * 2 * 2, dtype=torch.int64).reshape(3, 2, 2, 2) % 3
    expected = torch.nn.functional.conv2d(x, w, padding=1)
    got = torch.nn.functional.conv2d(x.to("openreg"), w.to("openreg"), padding=1)
    assert torch.equal(got.cpu(), expected)


def test_a_refusal_is_remembered_and_other_dtypes_keep_running():
    for _ in range(2):  # the second call takes the remembered verdict
        with pytest.raises(NotImplementedError, match="\"sum_cpu\" not implemented for 'ComplexHalf'"):
            ones((3, 5), torch.complex32, "openreg").sum(0)
    assert torch.equal(ones((3, 5), torch.float32, "openreg").sum(0).cpu(), torch.full((5,), 3.0))
    assert torch.equal(ones((3, 5), torch.complex64, "openreg").sum(0).cpu(), torch.full((5,), 3.0 + 0j))


def test_the_dry_run_is_invisible_to_profilers_and_the_fallback(fallback_counts):
    x = torch.arange(6, dtype=torch.float64, device="openreg").view(2, 3)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        y = torch.logcumsumexp(x, 1)  # a signature no other test launches first in this process
        torch.openreg.synchronize()
    names = [e.name for e in prof.events() if e.name.startswith("aten::")]
    assert names.count("aten::logcumsumexp") == 1
    assert "aten::empty" not in names and "aten::zeros" not in names  # no stand-in was recorded
    assert torch.allclose(y.cpu(), torch.logcumsumexp(x.cpu(), 1))
    assert fallback_counts() == {}
    assert torch_openreg._C._fallback_counts() == {}
