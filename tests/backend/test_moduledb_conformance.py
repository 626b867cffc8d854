"""PyTorch's module database (ModuleInfo module_db) on openreg against CPU.

Every ModuleInfo's samples run through `moduledb_survey.py` (opdb's worker
processes, so that a crash is recorded, not fatal) in float32, float64 and,
where module_db lists them for CPU, float16, bfloat16 and complex64: the module
is built on CPU and copied to openreg, and outputs, gradients of inputs and
parameters, and buffers are compared with `assert_close`'s tolerances for the
dtype; random forwards by shape, dtype and distribution. Every module that does
not match is listed in `moduledb_expected_failures.EXPECTED_FAILURES` with its
reason; the table only shrinks, and a crash or a hang is never expected.

What this adds to test_nn_coverage.py, which runs one hand-written
configuration per nn class in float32 (random modules in eval mode):

- module_db's own configurations, every one of them by default: constructor
  options (reductions, class weights, label smoothing, ignore_index,
  norm_first, batch_first, bidirectional and projected RNNs, add_bias_kv,
  divisor_override, return_indices...) and inputs (unbatched, empty tensors,
  0-dim targets) that one configuration per class cannot hold;
- float64, and the half and complex dtypes module_db lists for CPU;
- eval mode as well where train and eval differ (normalization running
  statistics, RNNs, attention and Transformers);
- training mode for every module: module_db fixes the draws of its random
  ones (FractionalMaxPool's `_random_samples`, dropout 0), so they are
  compared by value; a forward that does draw is compared by distribution
  (the engine's own checks below use nn.Dropout);
- lazy modules materialized on openreg (test_nn_coverage copies them
  materialized from CPU);
- assert_close's default tolerances for the dtype (PyTorch's own overrides
  where module_db gives one), where test_nn_coverage allows rtol 1e-4.

The same survey, with each module's reason, is
`python tests/backend/moduledb_survey.py --failures`.
"""

from __future__ import annotations

import os
import re

import moduledb_survey as moduledb
import opdb_survey as opdb
import pytest
import torch
import torch.nn as nn
from moduledb_expected_failures import EXPECTED_FAILURES, ORDER_BOUND, ORDER_DEPENDENT

# Every sample by default (about a minute and a half on two cores);
# OPENREG_MODULEDB_SAMPLES=N takes N per module, dtype and mode instead.
SAMPLES = int(os.environ.get("OPENREG_MODULEDB_SAMPLES", "0"))


@pytest.fixture(scope="module")
def results() -> list[moduledb.Result]:
    return moduledb.survey(dtypes=(*moduledb.DTYPES, opdb.ERROR_INPUTS), samples=SAMPLES, jobs=2, timeout=180)


def _listing(results) -> str:
    return "\n".join(f"  ({r.op!r}, {r.dtype!r}): {r.status}: {r.reason}" for r in results)


def test_the_survey_covers_module_db(results):
    from torch.testing._internal.common_modules import module_db

    expected = {(info.name, name) for info in module_db for name in moduledb.cpu_dtypes(info)} | {
        (info.name, opdb.ERROR_INPUTS) for info in module_db if info.module_error_inputs_func is not None
    }
    assert {(r.op, r.dtype) for r in results} == expected
    # module_db's float32 and float64 are the survey's floor.
    assert all({"float32", "float64"} <= set(moduledb.cpu_dtypes(info)) for info in module_db)


def test_every_module_compared_a_sample(results):
    # A module whose samples CPU could not run would pass without a comparison.
    empty = [r for r in results if r.status == "correct" and r.samples == 0]
    assert not empty, "modules with nothing compared:\n" + _listing(empty)


def test_nothing_crashes_or_hangs(results):
    dead = [r for r in results if r.status in ("crash", "hang")]
    assert not dead, "modules that killed or hung their process:\n" + _listing(dead)


def test_every_failure_is_expected(results):
    unexpected = [r for r in results if r.status != "correct" and (r.op, r.dtype) not in EXPECTED_FAILURES]
    assert not unexpected, "modules that differ from CPU and are not in the table:\n" + _listing(unexpected)


def test_every_expected_failure_still_fails(results):
    failing = {(r.op, r.dtype) for r in results if r.status != "correct"}
    fixed = sorted(set(EXPECTED_FAILURES) - ORDER_DEPENDENT - failing)
    assert not fixed, "these pass now; remove them from moduledb_expected_failures.py:\n" + "\n".join(map(str, fixed))


def test_order_dependent_failures_stay_within_their_bound(results):
    assert ORDER_DEPENDENT <= set(EXPECTED_FAILURES)
    for r in results:
        if (r.op, r.dtype) not in ORDER_DEPENDENT or r.status == "correct":
            continue
        assert r.status == "wrong", f"{r.op} {r.dtype}: {r.status}: {r.reason}"
        found = re.search(r"Greatest absolute difference: ([0-9.e+-]+)", r.reason)
        assert found and float(found.group(1)) <= ORDER_BOUND, f"{r.op} {r.dtype}: {r.reason}"


def test_the_table_gives_reasons():
    from torch.testing._internal.common_modules import module_db

    names = {info.name for info in module_db}
    assert all(isinstance(reason, str) and reason for reason in EXPECTED_FAILURES.values())
    assert all(name in names and dtype in moduledb.DTYPES for name, dtype in EXPECTED_FAILURES)


def test_float32_modules_run_as_device_kernels(results):
    float32 = [r for r in results if r.dtype == "float32"]
    native = [r for r in float32 if r.status == "correct" and r.native]
    assert len(native) >= 0.9 * len(float32), (
        f"{len(native)} of {len(float32)} float32 modules are correct and native; "
        "these reach the CPU fallback:\n"
        + "\n".join(f"  {r.op}: {', '.join(r.fallback)}" for r in float32 if r.status == "correct" and not r.native)
    )


# --- the comparison itself catches what it should -----------------------------------------------------
# Modules that misbehave on openreg only, run through moduledb.check in this process.


class _ShiftedOutput(nn.Linear):
    def forward(self, x):
        out = super().forward(x)
        return out + 1e-3 if out.device.type == "openreg" else out


class _DoubledGradient(nn.Linear):
    def forward(self, x):
        out = super().forward(x)
        if out.device.type != "openreg":
            return out
        # Same value, twice the gradient.
        return 2 * out - out.detach()


class _RaisesOnDevice(nn.Linear):
    def forward(self, x):
        if x.device.type == "openreg":
            raise RuntimeError("not on this device")
        return super().forward(x)


class _DriftingBuffer(nn.Linear):
    def __init__(self, *args):
        super().__init__(*args)
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x):
        self.seen += 2 if x.device.type == "openreg" else 1
        return super().forward(x)


class _LoudDropout(nn.Dropout):
    """Random, and on openreg keeps ten times too much."""

    def forward(self, x):
        return super().forward(x) * (10 if x.device.type == "openreg" else 1)


def _info(cls, *constructor):
    from torch.testing._internal.common_modules import FunctionInput, ModuleInfo, ModuleInput

    def inputs(info, device, dtype, requires_grad, training, **kwargs):
        x = torch.randn(16, 8, device=device, dtype=dtype, requires_grad=requires_grad)
        return [ModuleInput(FunctionInput(*constructor), forward_input=FunctionInput(x))]

    return ModuleInfo(cls, module_inputs_func=inputs, dtypes=(torch.float32,))


@pytest.mark.parametrize(
    "cls, constructor, status, where",
    [
        (_ShiftedOutput, (8, 4), "wrong", "output"),
        (_DoubledGradient, (8, 4), "wrong", "gradient"),
        (_RaisesOnDevice, (8, 4), "error", "not on this device"),
        (_DriftingBuffer, (8, 4), "wrong", "buffer"),
        (_LoudDropout, (0.5,), "wrong", "values in"),
        (nn.Dropout, (0.5,), "correct", ""),
    ],
)
def test_the_comparison_catches_a_module_that_differs(cls, constructor, status, where):
    result = moduledb.check(_info(cls, *constructor), "float32", samples=1)
    assert result.status == status, result.reason
    assert where in result.reason
    assert result.samples == (1 if status == "correct" else 0)
