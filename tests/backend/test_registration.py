"""Registration: autoload, explicit import, the device module, tensor and module methods."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch
from backend_support import run_python

import torch_openreg


def test_entry_point_is_installed():
    names = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="torch.backends")}
    assert names.get("torch_openreg") == "torch_openreg._autoload:autoload", (
        "the torch.backends entry point is missing: install with `pip install --no-build-isolation -e .`"
    )


def test_import_torch_alone_registers_openreg():
    result = run_python(
        """
        import torch
        x = torch.ones(3, device="openreg")
        print(x.device, hasattr(torch, "openreg"), (x + 1).sum().item())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["openreg:0", "True", "6.0"]


def test_autoload_can_be_disabled():
    result = run_python(
        """
        import torch
        print(hasattr(torch, "openreg"), torch._C._get_privateuse1_backend_name())
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "privateuseone"]


@pytest.mark.parametrize("autoload", ["0", "1"])
def test_import_package_first_then_again(autoload):
    result = run_python(
        """
        import torch_openreg
        import torch_openreg._autoload
        import torch
        torch_openreg._autoload.autoload()  # a second registration is a no-op
        torch_openreg._register()
        print(torch.ones(2, device="openreg").sum().item(), torch.openreg is torch_openreg.openreg)
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": autoload},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2.0", "True"]


def test_device_module_surface():
    assert torch.openreg is torch_openreg.openreg
    assert torch.get_device_module("openreg") is torch.openreg
    assert torch.openreg.is_available()
    assert torch.openreg.device_count() == 2  # the runtime's default
    for name in [
        "current_device",
        "set_device",
        "device",
        "synchronize",
        "Stream",
        "Event",
        "current_stream",
        "stream",
        "manual_seed",
        "seed",
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "reset_peak_memory_stats",
        "empty_cache",
        "memory_stats",
        "get_device_name",
        "get_device_properties",
        "_lazy_init",
        "is_initialized",
        "get_amp_supported_dtype",
        "manual_seed_all",
        "_is_in_bad_fork",
    ]:
        assert hasattr(torch.openreg, name), name
    assert torch.accelerator.current_accelerator() == torch.device("openreg")
    assert torch.accelerator.device_count() == 2


def test_current_device_and_context():
    assert torch.openreg.current_device() == 0
    with torch.openreg.device(1):
        assert torch.openreg.current_device() == 1
        assert torch.empty(2, device="openreg").device == torch.device("openreg", 1)
    assert torch.openreg.current_device() == 0
    torch.openreg.set_device("openreg:1")
    assert torch.accelerator.current_device_index() == 1
    torch.openreg.set_device(0)


def test_device_properties():
    props = torch.openreg.get_device_properties(0)
    assert props.total_memory > 0 and props.executor_threads >= 1
    assert torch.openreg.get_device_name(1) == torch.openreg.get_device_properties(1).name
    assert isinstance(props.name, str) and props.name


def test_tensor_and_module_methods():
    t = torch.arange(6.0).reshape(2, 3)
    d = t.openreg()
    assert d.is_openreg and d.device == torch.device("openreg", 0)
    assert not t.is_openreg
    assert torch.equal(d.cpu(), t)
    module = torch.nn.Linear(3, 2).to("openreg")
    assert module.weight.device.type == "openreg"
    assert module.openreg(1).weight.device == torch.device("openreg", 1)


def test_module_to_keeps_tied_weights():
    model = torch.nn.Module()
    model.embed = torch.nn.Embedding(5, 3)
    model.head = torch.nn.Linear(3, 5, bias=False)
    model.head.weight = model.embed.weight
    model.to("openreg")
    assert model.head.weight is model.embed.weight
    assert model.embed.weight.is_openreg
    model.to("cpu")
    assert model.head.weight is model.embed.weight


def test_lazy_init_and_accelerator_synchronize():
    torch.openreg._lazy_init()
    assert torch.openreg.is_initialized()
    x = torch.randn(64, 64, device="openreg")
    y = x @ x
    torch.accelerator.synchronize()
    assert torch.openreg.current_stream().query()
    assert y.is_openreg


def test_amp_autocast_lowers_matmul():
    assert torch.openreg.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    a = torch.randn(4, 4, device="openreg")
    with torch.autocast(device_type="openreg", dtype=torch.bfloat16):
        out = a @ a
        soft = torch.softmax(out, dim=-1)
    assert out.dtype == torch.bfloat16
    assert soft.dtype == torch.float32


def test_save_and_load_roundtrip(tmp_path):
    t = torch.arange(5.0, device="openreg")
    torch.save(t, tmp_path / "t.pt")
    loaded = torch.load(tmp_path / "t.pt")
    assert loaded.device == torch.device("openreg", 0)
    assert torch.equal(loaded.cpu(), torch.arange(5.0))
    on_cpu = torch.load(tmp_path / "t.pt", map_location="cpu")
    assert on_cpu.device.type == "cpu"
