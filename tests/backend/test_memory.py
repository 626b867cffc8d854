"""Caching allocator statistics, the profiler's memory events, and running out of memory."""

from __future__ import annotations

import gc

import pytest
import torch
from backend_support import run_python

MiB = 1 << 20


def test_statistics_follow_allocations():
    gc.collect()  # tensors held by earlier tests' reference cycles must not be freed mid-test
    torch.openreg.synchronize()
    torch.openreg.empty_cache()
    torch.openreg.reset_peak_memory_stats()
    base = torch.openreg.memory_allocated()
    requested = torch.openreg.memory_stats()["requested_bytes.all.current"]
    x = torch.empty(4 * MiB, dtype=torch.uint8, device="openreg")  # exactly one 4 MiB block
    assert torch.openreg.memory_allocated() == base + 4 * MiB
    assert torch.openreg.memory_reserved() >= torch.openreg.memory_allocated()
    assert torch.openreg.max_memory_allocated() >= base + 4 * MiB
    stats = torch.openreg.memory_stats()
    assert stats["requested_bytes.all.current"] == requested + 4 * MiB
    assert stats["allocation.all.current"] >= 1
    assert stats["segment.large_pool.current"] >= 1
    y = torch.empty(1000, device="openreg")  # small pool: 4000 bytes round to 4096
    assert torch.openreg.memory_allocated() == base + 4 * MiB + 4096
    del x, y
    assert torch.openreg.memory_allocated() == base
    assert torch.openreg.max_memory_allocated() >= base + 4 * MiB
    torch.openreg.reset_peak_memory_stats()
    assert torch.openreg.max_memory_allocated() == base
    reserved = torch.openreg.memory_reserved()
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved() <= reserved - 4 * MiB
    free, total = torch.openreg.mem_get_info()
    assert 0 < free <= total == torch.openreg.get_device_properties().total_memory


def test_reset_accumulated_statistics_keeps_the_current_ones():
    gc.collect()
    torch.openreg.synchronize()
    x = torch.empty(MiB, dtype=torch.uint8, device="openreg")
    y = torch.empty(MiB, dtype=torch.uint8, device="openreg")
    del y
    before = torch.accelerator.memory_stats(0)
    assert before["allocation.all.allocated"] >= 2 and before["allocation.all.freed"] >= 1
    torch.accelerator.reset_accumulated_memory_stats(0)
    after = torch.accelerator.memory_stats(0)
    for family in ("allocation", "segment", "active", "allocated_bytes", "reserved_bytes", "requested_bytes"):
        for pool in ("all", "small_pool", "large_pool"):
            assert after[f"{family}.{pool}.allocated"] == after[f"{family}.{pool}.freed"] == 0, (family, pool)
            assert after[f"{family}.{pool}.current"] == before[f"{family}.{pool}.current"], (family, pool)
    assert after["num_alloc_retries"] == after["num_ooms"] == after["num_device_alloc"] == 0
    del x


def test_statistics_are_per_device():
    gc.collect()
    before = torch.openreg.memory_allocated(1)
    y = torch.empty(MiB, dtype=torch.uint8, device="openreg:1")
    assert torch.openreg.memory_allocated(1) == before + MiB
    del y
    assert torch.openreg.memory_allocated(1) == before


def test_profiler_sees_device_memory():
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        x = torch.empty(2 * MiB, dtype=torch.uint8, device="openreg")
        del x
    empties = [e for e in prof.events() if e.name == "aten::empty"]
    assert any(e.device_memory_usage == 2 * MiB for e in empties), [(e.name, e.device_memory_usage) for e in empties]
    memory_events = [e for e in prof.events() if e.name == "[memory]"]
    assert sorted(e.device_memory_usage for e in memory_events) == [-2 * MiB]


def test_out_of_memory_in_process_leaves_device_usable():
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(1 << 42, dtype=torch.uint8, device="openreg")
    message = str(info.value)
    assert "openreg:0" in message and str(1 << 42) in message and "free" in message
    assert torch.openreg.memory_stats()["num_ooms"] >= 1
    assert (torch.ones(4, device="openreg") * 2).sum().item() == 8.0


def test_out_of_memory_with_a_small_device():
    result = run_python(
        """
        import torch
        import torch_openreg
        assert torch.openreg.get_device_properties(0).total_memory == 64 << 20
        keep = torch.empty(40 << 20, dtype=torch.uint8, device="openreg")
        try:
            torch.empty(40 << 20, dtype=torch.uint8, device="openreg")
        except torch.OutOfMemoryError as error:
            print("OOM", str(error).splitlines()[0])
        del keep
        again = torch.empty(40 << 20, dtype=torch.uint8, device="openreg")  # fits once freed
        print("after", (torch.ones(3, device="openreg") + 1).sum().item())
        """,
        env={"OPENREG_DEVICE_MEMORY": "64M"},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("OOM openreg out of memory. Tried to allocate 40.00 MiB (41943040 bytes).")
    assert "of which 24.00 MiB is free" in lines[0]
    assert lines[1] == "after 6.0"
