"""Bad input raises a clear RuntimeError, and the process keeps working."""

from __future__ import annotations

import pytest
import torch
from backend_support import run_python


def still_works():
    assert (torch.arange(4.0, device="openreg") + 1).sum().item() == 10.0


def test_invalid_device_index():
    with pytest.raises(RuntimeError, match="invalid device index 7"):
        torch.empty(2, device="openreg:7")
    with pytest.raises(RuntimeError, match="invalid device index"):
        torch.openreg.set_device(5)
    with pytest.raises(RuntimeError, match="invalid device index"):
        torch.ones(2).to("openreg:2")
    still_works()


def test_tensors_on_different_devices():
    a = torch.ones(3, device="openreg:0")
    b = torch.ones(3, device="openreg:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(a.view(1, 3), b.view(3, 1))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + torch.ones(3)
    assert (a + torch.tensor(1.0)).sum().item() == 6.0  # a 0-dim CPU tensor is a scalar
    still_works()


def test_shape_errors_raise_at_the_call():
    a = torch.ones(2, 3, device="openreg")
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        a @ a
    with pytest.raises(RuntimeError):
        torch.cat([a, torch.ones(2, 4, device="openreg")], dim=0)
    still_works()


def test_failing_kernel_surfaces_at_synchronize():
    x = torch.ones(3, device="openreg")
    torch.ops.openreg._fail_kernel(x, "simulated fault")  # returns at once
    with pytest.raises(RuntimeError) as info:
        torch.openreg.synchronize()
    assert "test_fail_kernel" in str(info.value) and "simulated fault" in str(info.value)
    still_works()


@pytest.mark.parametrize("read", ["item", "cpu", "print"])
def test_failing_kernel_surfaces_at_host_reads(read):
    x = torch.ones(3, device="openreg")
    torch.ops.openreg._fail_kernel(x, "bad read")
    y = x.sum()
    with pytest.raises(RuntimeError, match="test_fail_kernel.*bad read|bad read"):
        if read == "item":
            y.item()
        elif read == "cpu":
            y.cpu()
        else:
            repr(y)
    still_works()


def test_an_error_inside_an_aten_kernel_names_the_kernel():
    weight = torch.randn(5, 2, device="openreg")
    indices = torch.tensor([0, 9], device="openreg")  # out of range: found only by the kernel
    out = torch.nn.functional.embedding(indices, weight)
    with pytest.raises(RuntimeError, match="index_select") as info:
        out.cpu()
    assert "out of range" in str(info.value)
    still_works()


def test_bad_configuration_is_reported():
    result = run_python(
        """
        import torch
        import torch_openreg
        print(torch.openreg.is_available(), torch.openreg.device_count())
        try:
            torch.ones(1, device="openreg")
        except RuntimeError as error:
            print("error:", error)
        """,
        env={"OPENREG_DEVICE_COUNT": "many"},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "False 0"
    assert lines[1].startswith("error:") and "OPENREG_DEVICE_COUNT" in lines[1]


def test_forked_child_cannot_use_a_started_device():
    result = run_python(
        """
        import os, torch, torch_openreg
        torch.ones(1, device="openreg").sum().item()
        pid = os.fork()
        if pid == 0:
            try:
                torch.ones(1, device="openreg")
            except RuntimeError as error:
                os._exit(0 if "forked child" in str(error) else 2)
            os._exit(1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), torch.ones(2, device="openreg").sum().item())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "2.0"]


def test_arguments_that_crash_cpu_kernels_are_refused_on_the_host():
    # ATen's CPU batch norm reads absent running statistics in evaluation mode
    # (the CPU itself dies with SIGSEGV), and its group norm indexes by the
    # sizes it is given; on openreg those kernels run on the device's thread,
    # so the arguments are checked before the launch. In a child process: a
    # regression kills it, not the test run.
    result = run_python(
        """
        import torch, torch_openreg
        x = torch.randn(2, 6, 5, device="openreg")
        calls = {
            "legit": lambda: torch.ops.aten._native_batch_norm_legit(x, None, None, False, 0.1, 1e-5),
            "native": lambda: torch.ops.aten.native_batch_norm(x, None, None, None, None, False, 0.1, 1e-5),
            "groups": lambda: torch.ops.aten.native_group_norm(x, None, None, 2, 6, 5, 4, 1e-5),
            "sizes": lambda: torch.ops.aten.native_group_norm(x, None, None, 3, 6, 5, 3, 1e-5),
            "weight": lambda: torch.ops.aten.native_group_norm(x, torch.ones(5, device="openreg"), None, 2, 6, 5, 3, 1e-5),
        }
        for name, call in calls.items():
            try:
                call()
                torch.openreg.synchronize()
                print(name, "ran")
            except RuntimeError as e:
                print(name, "refused:", str(e).splitlines()[0])
        print("alive", (torch.arange(4.0, device="openreg") + 1).sum().item())
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == [
        "legit refused: batch_norm: running_mean and running_var are required in evaluation mode (training=False)",
        "native refused: batch_norm: running_mean and running_var are required in evaluation mode (training=False)",
        "groups refused: group_norm: 6 channels do not divide into 4 groups",
        "sizes refused: group_norm: an input of 60 elements is not N * C * HxW = 3 * 6 * 5",
        "weight refused: group_norm: expected weight of 6 elements, got 5",
        "alive 10.0",
    ]


def test_host_checks_raise_at_the_call_and_keep_other_dtypes_working():
    mask = torch.tensor([True, False, True, False], device="openreg")
    # CPU's fill refuses a value its dtype cannot hold; on openreg the check is
    # made on the host, so it raises at the call rather than from the kernel.
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t without overflow"):
        torch.zeros(4, dtype=torch.int8, device="openreg").masked_fill(mask, 1000)
    # A dtype the check does not cover still reaches the kernel (complex32 is CPU's too).
    filled = torch.zeros(4, dtype=torch.complex32, device="openreg").masked_fill(mask, 1)
    assert filled.cpu().real.tolist() == [1.0, 0.0, 1.0, 0.0]
    with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dimensions"):
        torch.roll(torch.tensor(1.0, device="openreg"), 1, 0)
    still_works()
