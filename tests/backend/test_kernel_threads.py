"""Threads and cores: ATen kernel bodies run on their executor thread alone
(OPENREG_KERNEL_THREADS to change it), and the host gives the device a core.

An OpenMP team started inside a kernel body would compete with the host thread
and the other device queues for the same cores. The host's own team, at its
default size, would have a member sharing a core with a busy executor: at the
device's first use the host keeps one core fewer than its default, unless the
user chose a count (OMP_NUM_THREADS, OPENREG_HOST_THREADS).
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
    torch.zeros(1, device="openreg")  # the device's first use sets the host's count (tested below)
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


def _host_threads(env: dict[str, str]) -> subprocess.CompletedProcess:
    """Prints the host's thread count before the device's first use, and after."""
    code = (
        "import torch, torch_openreg\n"
        "before = torch.get_num_threads()\n"
        "torch.zeros(1, device='openreg')\n"
        "print(before, torch.get_num_threads())\n"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENREG_HOST_THREADS")}
    return subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=120
    )


def _counts(done: subprocess.CompletedProcess) -> tuple[int, int]:
    assert done.returncode == 0, done.stderr
    before, after = (int(word) for word in done.stdout.split()[-2:])
    return before, after


def test_the_host_gives_the_device_a_core_at_its_first_use():
    before, after = _counts(_host_threads({}))
    # Importing changes nothing: torch's default without openreg loaded.
    plain = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env={**{k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plain.returncode == 0, plain.stderr
    assert before == int(plain.stdout.split()[-1])
    # The first use takes one from the default, never going below one.
    assert after == max(1, before - 1), (before, after)


def test_a_count_the_user_chose_is_kept():
    assert _counts(_host_threads({"OMP_NUM_THREADS": "2"})) == (2, 2)
    assert _counts(_host_threads({"OPENREG_HOST_THREADS": "3"}))[1] == 3


def test_a_malformed_host_thread_count_is_refused_naming_it():
    for value in ("0", "junk", "-2"):
        done = _host_threads({"OPENREG_HOST_THREADS": value})
        assert done.returncode == 1, (value, done.returncode, done.stderr)
        assert f"OPENREG_HOST_THREADS must be a whole number from 1 to 1024, got '{value}'" in done.stderr
