"""What the device executes, as torch.profiler sees it: kernel names, memsets, memcpys."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile


def device_event_names(fn) -> list[str]:
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        fn()
        torch.openreg.synchronize()
    # Device work only: the synchronize() calls' Context Sync rows are events too (no device time).
    return [
        e.name
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.PrivateUse1 and e.activity_type != "cuda_sync"
    ]


def test_fills_use_memsets_when_the_bit_pattern_allows():
    names = device_event_names(
        lambda: (
            torch.zeros(1000, device="openreg"),
            torch.full((1000,), 1.5, device="openreg"),
            torch.ones(1000, dtype=torch.bfloat16, device="openreg"),
        )
    )
    assert sum(name.startswith("Memset") for name in names) == 3, names
    assert not any(name.startswith("fill") for name in names), names
    names = device_event_names(lambda: torch.full((1000,), 1.5, dtype=torch.float64, device="openreg"))
    assert names == ["fill_f64"], names


def test_copies_are_memcpys():
    host = torch.randn(256)
    names = device_event_names(lambda: host.to("openreg").cpu())
    assert any("HtoD" in name for name in names) and any("DtoH" in name for name in names), names
    assert not any(name.startswith("copy_") for name in names), names
    converted = device_event_names(lambda: torch.randn(16, 16, device="openreg").t().to(torch.bfloat16))
    assert "copy_f32_to_bf16" in converted, converted


def test_kernel_names_read_like_device_kernels():
    x = torch.randn(4, 8, device="openreg", requires_grad=True)
    w = torch.randn(16, 8, device="openreg", requires_grad=True)

    def step():
        y = F.gelu(F.linear(x, w))
        F.layer_norm(y, (16,)).softmax(-1).sum().backward()

    names = set(device_event_names(step))
    for expected in [
        "gemm_f32_nt",
        "gelu_fwd_f32",
        "gelu_bwd_f32",
        "layer_norm_fwd_f32",
        "layer_norm_bwd_f32",
        "softmax_fwd_f32",
        "softmax_bwd_f32",
    ]:
        assert expected in names, sorted(names)
    assert not any(name.startswith(("or", "openreg")) for name in names), sorted(names)
