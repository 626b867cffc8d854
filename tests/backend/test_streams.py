"""Asynchrony, streams and events, record_stream, and asynchronous copies.

Ordering is made observable without timing: torch.ops.openreg._wait_gate
queues a kernel that blocks its stream until the test opens the gate.
"""

from __future__ import annotations

import torch
from backend_support import new_gate

import torch_openreg


def block(stream: torch.Stream | None = None) -> int:
    """Blocks `stream` (default: current) with a gate kernel; returns the gate."""
    gate = new_gate()
    anchor = torch.empty(1, device="openreg")
    if stream is None:
        torch.ops.openreg._wait_gate(anchor, gate)
    else:
        with torch.openreg.stream(stream):
            torch.ops.openreg._wait_gate(anchor, gate)
    return gate


def test_launch_returns_before_the_kernel_runs():
    x = torch.ones(1000, device="openreg")
    torch.openreg.synchronize()
    gate = block()
    y = x * 2  # queued behind the gate: the call returned without running it
    done = torch.openreg.Event()
    done.record()
    assert not done.query()
    assert not torch.openreg.current_stream().query()
    torch_openreg._C._open_gate(gate)
    done.synchronize()
    assert done.query()
    assert torch.equal(y.cpu(), torch.full((1000,), 2.0))


def test_streams_are_independent_and_wait_stream_orders_them():
    x = torch.ones(16, device="openreg")
    torch.openreg.synchronize()
    default = torch.openreg.current_stream()
    side = torch.openreg.Stream()
    gate = block()
    x.fill_(5)  # queued on the blocked default stream

    with torch.openreg.stream(side):
        unordered = x + 1  # side is not blocked: runs now, sees the old value
    side.synchronize()  # completes although the default stream is still blocked
    assert not default.query()

    side.wait_stream(default)
    with torch.openreg.stream(side):
        ordered = x + 1
    assert not side.query()  # waits for the gate through the default stream
    torch_openreg._C._open_gate(gate)
    side.synchronize()
    assert torch.equal(ordered.cpu(), torch.full((16,), 6.0))
    assert torch.equal(unordered.cpu(), torch.full((16,), 2.0))


def test_event_orders_streams():
    x = torch.zeros(8, device="openreg")
    torch.openreg.synchronize()
    side = torch.openreg.Stream()
    gate = block()
    x.add_(3)
    ready = torch.openreg.Event()
    ready.record()  # on the default stream, after the add
    side.wait_event(ready)
    with torch.openreg.stream(side):
        y = x * 10
    assert not ready.query() and not side.query()
    torch_openreg._C._open_gate(gate)
    side.synchronize()
    assert torch.equal(y.cpu(), torch.full((8,), 30.0))


def _freed_block_reused(record: bool) -> tuple[bool, torch.Tensor]:
    """A kernel on a blocked side stream reads `x`, which is then freed on the host.

    Returns whether the next same-size allocation on the default stream got
    x's memory, and what the side-stream kernel computed from x (3.0 * 2).
    """
    torch.openreg.synchronize()
    torch.openreg.empty_cache()
    numel = 1_234_567  # a size no other test caches
    side = torch.openreg.Stream()
    x = torch.full((numel,), 3.0, device="openreg")
    torch.openreg.synchronize()
    gate = block(side)
    with torch.openreg.stream(side):
        y = x * 2  # reads x once the gate opens
    if record:
        x.record_stream(side)
    freed_ptr = x.data_ptr()
    del x
    z = torch.empty(numel, device="openreg")
    z.fill_(7.0)
    reused = z.data_ptr() == freed_ptr
    torch.openreg.current_stream().synchronize()  # the fill has run
    torch_openreg._C._open_gate(gate)
    side.synchronize()
    return reused, y.cpu()


def test_record_stream_keeps_memory_from_early_reuse():
    reused, y = _freed_block_reused(record=True)
    assert not reused
    assert torch.equal(y, torch.full_like(y, 6.0))


def test_without_record_stream_the_block_is_reused_early():
    # The control for the test above: the scenario does expose the hazard.
    reused, y = _freed_block_reused(record=False)
    assert reused
    assert torch.equal(y, torch.full_like(y, 14.0))


def test_blocks_are_reused_on_their_own_stream():
    torch.openreg.synchronize()
    a = torch.empty(1000, device="openreg")
    ptr = a.data_ptr()
    del a
    b = torch.empty(1000, device="openreg")
    assert b.data_ptr() == ptr
    side = torch.openreg.Stream()
    del b
    with torch.openreg.stream(side):
        c = torch.empty(1000, device="openreg")
    assert c.data_ptr() != ptr


def test_stream_surface():
    default = torch.openreg.current_stream()
    assert default.stream_id == 1 and default == torch.openreg.default_stream()
    s = torch.openreg.Stream(priority=-1)
    assert isinstance(s, torch.Stream) and s.device == torch.device("openreg", 0)
    with s:
        assert torch.openreg.current_stream() == s
        assert torch.accelerator.current_stream() == s
    assert torch.openreg.current_stream() == default
    generic = torch.Stream(device="openreg:1")
    assert generic.device_index == 1
    start, end = torch.openreg.Event(enable_timing=True), torch.openreg.Event(enable_timing=True)
    start.record()
    torch.randn(256, 256, device="openreg").sum()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    assert isinstance(start, torch.openreg.Event) and isinstance(start, torch.Event)


def test_non_blocking_copies_with_pinned_memory():
    host = torch.arange(4096, dtype=torch.float32).pin_memory()
    assert host.is_pinned()
    device = host.to("openreg", non_blocking=True)
    gate = block()
    doubled = device * 2
    result = torch.empty(4096).pin_memory()
    result.copy_(doubled, non_blocking=True)  # returns at once: the stream is blocked
    done = torch.openreg.Event()
    done.record()
    assert not done.query()
    torch_openreg._C._open_gate(gate)
    done.synchronize()
    assert torch.equal(result, torch.arange(4096, dtype=torch.float32) * 2)


def test_blocking_copies_see_all_queued_work():
    x = torch.zeros(64, device="openreg")
    gate = block()
    x.add_(1)
    import threading

    opener = threading.Timer(0.2, torch_openreg._C._open_gate, args=(gate,))
    opener.start()
    assert torch.equal(x.cpu(), torch.ones(64))  # waits for the gate, then the add
    opener.join()


def test_second_device_and_cross_device_copy():
    a = torch.arange(10.0, device="openreg:1")
    assert a.device.index == 1 and torch.openreg.current_device() == 0
    b = (a * 3).to("openreg:0")
    c = b.t() if b.dim() > 1 else b
    assert c.device.index == 0
    assert torch.equal(c.cpu(), torch.arange(10.0) * 3)
    strided = torch.arange(20.0, device="openreg:0").view(4, 5).t()
    moved = strided.to("openreg:1", dtype=torch.float16)
    assert torch.equal(moved.cpu(), torch.arange(20.0).view(4, 5).t().half())
