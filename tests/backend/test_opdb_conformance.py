"""PyTorch's operator database (OpInfo op_db) on openreg against CPU.

Every OpInfo's first sample runs on CPU and on openreg in float32, float64,
bfloat16, float16, complex64, int64 and bool (those CPU supports), through
`opdb_survey.py` (worker processes, so that a crash is recorded, not
fatal): outputs, and the gradients where the operator supports autograd,
compared with `torch.testing.assert_close`'s tolerances for the dtype; random
operators by shape, dtype and distribution. Each OpInfo's error inputs
(bad arguments) must raise at the call on openreg, with the OpInfo's error or
CPU's, not later from the device kernel ("error_inputs" in the table). So
must each OpInfo's first sample in every dtype that the OpInfo does not list
for CPU, where CPU raises ("refused_dtypes" in the table; CPU's exception
type and message). Every operator that does not match is listed in `opdb_expected_failures.EXPECTED_FAILURES` with its
reason. The table only shrinks: an entry that passes fails the test until it
is removed, and a crash or a hang is never expected.

The whole survey (more samples, all the details) is
`python tests/backend/opdb_survey.py --failures`.
"""

from __future__ import annotations

import os

import opdb_survey as opdb
import pytest
from opdb_expected_failures import EXPECTED_FAILURES

# One sample per operator and dtype keeps the suite within a few minutes on
# two cores; `python tests/backend/opdb_survey.py` runs three by default.
SAMPLES = int(os.environ.get("OPENREG_OPDB_SAMPLES", "1"))


@pytest.fixture(scope="module")
def results() -> list[opdb.Result]:
    return opdb.survey(
        dtypes=(*opdb.DTYPES, opdb.ERROR_INPUTS, opdb.REFUSED_DTYPES), samples=SAMPLES, jobs=2, timeout=180
    )


def _listing(results) -> str:
    return "\n".join(f"  ({r.op!r}, {r.dtype!r}): {r.status}: {r.reason}" for r in results)


def test_the_survey_covers_op_db(results):
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    expected = {
        (opdb.op_key(op), name)
        for op in op_db
        for name in opdb.DTYPES
        if getattr(torch, name) in op.supported_dtypes("cpu")
    } | {(opdb.op_key(op), opdb.ERROR_INPUTS) for op in op_db if op.error_inputs_func is not None}
    refusing = {
        (opdb.op_key(op), opdb.REFUSED_DTYPES)
        for op in op_db
        if any(getattr(torch, name) not in op.supported_dtypes("cpu") for name in opdb.ALL_DTYPES)
    }
    assert {(r.op, r.dtype) for r in results} == expected | refusing


def test_nothing_crashes_or_hangs(results):
    dead = [r for r in results if r.status in ("crash", "hang")]
    assert not dead, "operators that killed or hung their process:\n" + _listing(dead)


def test_every_failure_is_expected(results):
    unexpected = [r for r in results if r.status != "correct" and (r.op, r.dtype) not in EXPECTED_FAILURES]
    assert not unexpected, "operators that differ from CPU and are not in the table:\n" + _listing(unexpected)


def test_every_expected_failure_still_fails(results):
    failing = {(r.op, r.dtype) for r in results if r.status != "correct"}
    fixed = sorted(set(EXPECTED_FAILURES) - failing)
    assert not fixed, "these pass now; remove them from opdb_expected_failures.py:\n" + "\n".join(map(str, fixed))


def test_the_table_gives_reasons():
    assert all(isinstance(reason, str) and reason for reason in EXPECTED_FAILURES.values())
    assert all(dtype in (*opdb.DTYPES, opdb.ERROR_INPUTS, opdb.REFUSED_DTYPES) for _, dtype in EXPECTED_FAILURES)


def test_float32_operators_run_as_device_kernels(results):
    float32 = [r for r in results if r.dtype == "float32"]
    native = [r for r in float32 if r.status == "correct" and r.native]
    assert len(native) >= 0.95 * len(float32), (
        f"{len(native)} of {len(float32)} float32 operators are correct and native; "
        "these reach the CPU fallback:\n"
        + "\n".join(f"  {r.op}: {', '.join(r.fallback)}" for r in float32 if r.status == "correct" and not r.native)
    )
