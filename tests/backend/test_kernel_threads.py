"""ATen kernel bodies run on their executor thread alone (OPENREG_KERNEL_THREADS to change it).

An OpenMP team started inside a kernel body would compete with the host thread
and the other device queues for the same cores; the host keeps its own setting.
"""

from __future__ import annotations

import os
import subprocess
import sys

import torch

import torch_openreg  # noqa: F401


def _threads_inside_a_kernel() -> int:
    out = torch.zeros(1, dtype=torch.long, device="openreg")
    torch.ops.openreg._kernel_threads(out)
    return int(out.item())


def test_a_kernel_body_runs_on_one_thread_and_the_host_keeps_its_own():
    host_before = torch.get_num_threads()
    assert _threads_inside_a_kernel() == 1
    x = torch.randn(256, 256, device="openreg")
    torch.testing.assert_close((x @ x).cpu(), x.cpu() @ x.cpu())  # MKL inside the body, one thread
    assert _threads_inside_a_kernel() == 1
    assert torch.get_num_threads() == host_before


def _run_with_kernel_threads(value: str) -> subprocess.CompletedProcess:
    code = (
        "import torch, torch_openreg\n"
        "out = torch.zeros(1, dtype=torch.long, device='openreg')\n"
        "torch.ops.openreg._kernel_threads(out)\n"
        "print(int(out.item()))\n"
    )
    env = dict(os.environ, OPENREG_KERNEL_THREADS=value)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_the_environment_sets_the_threads_of_a_kernel_body():
    for value, expected in (("3", "3"), ("1", "1")):
        done = _run_with_kernel_threads(value)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split()[-1] == expected, (value, done.stdout)


def test_a_malformed_setting_fails_the_kernel_naming_it():
    for value in ("0", "junk", "2x", "-1"):
        done = _run_with_kernel_threads(value)
        assert done.returncode == 1, (
            value,
            done.returncode,
            done.stderr,
        )  # a Python error (a RuntimeError), not a signal
        assert "torch.AcceleratorError" in done.stderr and "kernel 'test_kernel_threads' failed" in done.stderr, (
            done.stderr
        )
        assert f"OPENREG_KERNEL_THREADS must be a whole number from 1 to 1024, got '{value}'" in done.stderr
