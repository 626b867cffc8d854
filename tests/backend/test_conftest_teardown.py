"""The backend tests' teardown fails a test that leaves a kernel failure queued (it never swallows it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

LEAVES_A_FAILURE = """
import torch


def test_leaves_a_failure_queued():
    x = torch.ones(4, device="openreg")
    torch.ops.openreg._fail_kernel(x, "left in the queue")  # returns at once; nobody synchronizes


def test_clean():
    assert torch.ones(4, device="openreg").sum().item() == 4
"""


def test_a_queued_failure_fails_its_test(tmp_path):
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_queued.py").write_text(LEAVES_A_FAILURE)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "2 passed, 1 error" in out, out  # the test body passed; its teardown failed it
    assert "ERROR at teardown of test_leaves_a_failure_queued" in out, out
    assert "the test left a queued device failure" in out and "left in the queue" in out, out
