"""A missing or broken backend library: the package still imports, warns with
the cause, registers nothing, and the trace tools keep working."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from backend_support import REPO


@pytest.fixture(params=["missing", "corrupt"])
def broken_install(request, tmp_path) -> Path:
    """A copy of the package whose extension is missing, or not a loadable library."""
    copy = tmp_path / "site"
    shutil.copytree(
        REPO / "torch_openreg", copy / "torch_openreg", ignore=shutil.ignore_patterns("__pycache__", "demo")
    )
    extension = next((copy / "torch_openreg" / "lib").glob("_C*.so"))
    if request.param == "missing":
        extension.unlink()
    else:
        extension.write_bytes(b"not a shared library")
    return copy


def run_in(site: Path, args: list[str], autoload: str = "1") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(site), TORCH_DEVICE_BACKEND_AUTOLOAD=autoload)
    return subprocess.run([sys.executable, *args], cwd=site, env=env, capture_output=True, text=True, timeout=240)


def test_import_warns_and_registers_nothing(broken_install):
    code = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("always")
        import torch_openreg, torch
        assert torch_openreg.__file__.startswith(%r), torch_openreg.__file__
        print(type(torch_openreg.backend_error).__name__, hasattr(torch, "openreg"),
              torch._C._get_privateuse1_backend_name())
        """  # noqa: UP031 (the code holds braces of its own)
        % str(broken_install)
    )
    result = run_in(broken_install, ["-c", code], autoload="0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ImportError", "False", "privateuseone"]
    assert "openreg: the device is unavailable" in result.stderr and "_C" in result.stderr, result.stderr


def test_import_torch_still_works_through_autoload(broken_install):
    result = run_in(broken_install, ["-c", "import torch; print(torch.ones(2).sum().item())"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2.0"]
    assert "openreg: the device is unavailable" in result.stderr, result.stderr


def test_trace_tools_work(broken_install, tmp_path):
    from openreg_trace.synthetic import write_workload

    trace = tmp_path / "trace.json"
    write_workload(trace, target_events=2_000)
    for command in (["summary"], ["check", "--strict"]):
        result = run_in(broken_install, ["-m", "torch_openreg", *command, str(trace)])
        assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])
        assert result.stdout.strip(), command


def test_healthy_install_has_no_backend_error():
    import torch_openreg

    assert torch_openreg.backend_error is None
    assert "openreg" in torch_openreg.__all__
