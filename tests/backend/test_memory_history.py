"""Allocation history and snapshots in CUDA's format, read by torch.cuda._memory_viz.

Each test records its own history (cleared first) and stops recording after.
"""

from __future__ import annotations

import gc
import inspect
import pickle
import re
from pathlib import Path

import pytest
import torch
import torch.cuda._memory_viz as memory_viz
from backend_support import new_gate

import torch_openreg
from openreg_trace.memory_report import load_snapshot

MiB = 1 << 20
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "snapshot"}


@pytest.fixture
def history():
    """Records history ("all", Python stacks) from a clean device state; stops at the end."""
    gc.collect()
    torch.openreg.synchronize()
    torch.openreg.empty_cache()
    memory = torch.get_device_module("openreg").memory
    memory._record_memory_history(enabled="all", context="all", stacks="python", clear_history=True)
    yield memory
    memory._record_memory_history(enabled=None)


def here() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def frames_at(frames: list[dict], line: int) -> bool:
    return any(f["filename"] == __file__ and f["line"] == line for f in frames)


def device_trace(snapshot: dict, device: int = 0) -> list[dict]:
    return snapshot["device_traces"][device]


def test_reached_through_the_device_module():
    memory = torch.get_device_module("openreg").memory
    assert memory is torch.openreg.memory
    for name in ("_record_memory_history", "_snapshot", "_dump_snapshot", "memory_snapshot", "memory_summary"):
        assert callable(getattr(memory, name)), name


def test_snapshot_structure_and_invariants(history):
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="openreg")
    line_x = here() - 1
    y = torch.empty(1000, device="openreg")
    line_y = here() - 1
    z = torch.empty(5000, device="openreg")
    del z
    snapshot = history._snapshot()

    assert set(snapshot) == {"segments", "device_traces", "allocator_settings", "external_annotations"}
    assert len(snapshot["device_traces"]) == torch.openreg.device_count()
    for seg in snapshot["segments"]:
        assert set(seg) >= {
            "device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
            "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks",
        }  # fmt: skip
        address = seg["address"]
        for block in seg["blocks"]:  # blocks tile the segment
            assert block["address"] == address
            assert block["state"] in ("active_allocated", "active_pending_free", "inactive")
            address += block["size"]
        assert address == seg["address"] + seg["total_size"]
        allocated = [b for b in seg["blocks"] if b["state"] == "active_allocated"]
        assert seg["allocated_size"] == sum(b["size"] for b in allocated)
        assert seg["requested_size"] == sum(b["requested_size"] for b in allocated)

    blocks = {b["address"]: b for seg in snapshot["segments"] for b in seg["blocks"]}
    bx, by = blocks[x.data_ptr()], blocks[y.data_ptr()]
    # 3 MiB: a 4 MiB segment, whose 1 MiB rest is too small to split off from the large pool.
    assert (bx["size"], bx["requested_size"], bx["state"]) == (4 * MiB, 3 * MiB, "active_allocated")
    assert (by["size"], by["requested_size"], by["state"]) == (4096, 4000, "active_allocated")
    assert frames_at(bx["frames"], line_x) and frames_at(by["frames"], line_y)
    large = next(seg for seg in snapshot["segments"] if seg["address"] == x.data_ptr())
    assert (large["segment_type"], large["total_size"], large["stream"]) == ("large", 4 * MiB, 1)
    assert frames_at(large["frames"], line_x)

    trace = device_trace(snapshot)
    assert [e["action"] for e in trace if e["action"] != "segment_alloc"] == [
        "alloc",  # x
        "alloc",  # y
        "alloc", "free_requested", "free_completed",  # z, freed at once (no other stream used it)
        "snapshot",
    ]  # fmt: skip
    assert trace[0] == {**trace[0], "action": "segment_alloc", "addr": x.data_ptr(), "size": 4 * MiB}
    for entry in trace:
        assert entry["action"] in ACTIONS
        assert set(entry) >= {"action", "addr", "size", "stream", "time_us", "frames"}
        assert entry["time_us"] > 1_600_000_000_000_000
        assert entry["stream"] == 1 or entry["action"] == "snapshot"
    assert trace[1]["addr"] == x.data_ptr() and trace[1]["size"] == 4 * MiB and frames_at(trace[1]["frames"], line_x)
    times = [e["time_us"] for e in trace]
    assert times == sorted(times)
    # Every alloc is freed in the trace or still live.
    live = {b["address"] for b in blocks.values() if b["state"] == "active_allocated"}
    for i, entry in enumerate(trace):
        if entry["action"] == "alloc":
            freed = any(e["action"] == "free_completed" and e["addr"] == entry["addr"] for e in trace[i + 1 :])
            assert freed or entry["addr"] in live
    del x, y


def test_memory_viz_reads_our_snapshot(history, tmp_path):
    keep = [torch.empty(n * 4096, device="openreg") for n in (1, 7, 300)]
    del keep[1]
    path = tmp_path / "snapshot.pickle"
    history._dump_snapshot(str(path))
    raw = path.read_bytes()
    assert raw[:2] == b"\x80\x04"  # protocol 4: the viewer reads 2 to 4 only
    snapshot = pickle.loads(raw)
    assert load_snapshot(str(path)) == snapshot  # plain data only: no class the viewer's reader lacks
    stats = memory_viz.segsum(snapshot)  # raises "Segment size mismatch" unless blocks tile segments
    assert "segments:" in stats and "total_reserved:" in stats
    assert "alloc" in memory_viz.trace(snapshot)

    def lines(text):  # instead of flamegraph.pl (downloaded from the network)
        return text

    assert f"{__file__.split('/')[-1]}:" in memory_viz.segments(snapshot, format_flamegraph=lines)
    assert "active_allocated" in memory_viz.memory(snapshot, format_flamegraph=lines)
    for html in (memory_viz.trace_plot(snapshot), memory_viz.segment_plot(snapshot)):
        assert "snapshot.pickle" in html and "MemoryViz.js" in html
    del keep


def test_record_stream_frees_show_requested_then_completed(history):
    side = torch.openreg.Stream()
    x = torch.empty(1 << 16, dtype=torch.uint8, device="openreg")
    address = x.data_ptr()
    gate = new_gate()
    with torch.openreg.stream(side):
        torch.ops.openreg._wait_gate(x, gate)  # `side` uses x, blocked until the gate opens
    x.record_stream(side)
    del x
    try:
        pending = history._snapshot()
    finally:
        torch_openreg._C._open_gate(gate)
    block = next(b for seg in pending["segments"] for b in seg["blocks"] if b["address"] == address)
    assert block["state"] == "active_pending_free"
    assert actions_at(pending, address) == ["alloc", "free_requested"]
    side.synchronize()
    torch.empty(1, device="openreg")  # the allocator notices finished streams on its next call
    assert actions_at(history._snapshot(), address)[:3] == ["alloc", "free_requested", "free_completed"]


def actions_at(snapshot: dict, address: int) -> list[str]:
    return [e["action"] for e in device_trace(snapshot) if e.get("addr") == address and e["action"] != "segment_alloc"]


def test_state_mode_keeps_stacks_and_only_the_latest_event():
    # As CUDA's: "state" keeps the history ring at one entry, here the
    # snapshot's own; the allocation before it is gone from the trace.
    memory = torch.openreg.memory
    memory._record_memory_history(enabled="state", clear_history=True, max_entries=1000)
    try:
        x = torch.empty(4096, device="openreg")
        line = here() - 1
        snapshot = memory._snapshot()
    finally:
        memory._record_memory_history(enabled=None)
    assert [e["action"] for e in device_trace(snapshot)] == ["snapshot"]
    block = next(b for seg in snapshot["segments"] for b in seg["blocks"] if b["address"] == x.data_ptr())
    assert frames_at(block["frames"], line)
    y = torch.empty(4096, device="openreg")  # recording off: no stack
    block = next(b for seg in memory._snapshot()["segments"] for b in seg["blocks"] if b["address"] == y.data_ptr())
    assert block["frames"] == [] and memory._snapshot()["device_traces"][0] == []
    del x, y


def test_context_levels():
    memory = torch.openreg.memory
    for context, alloc_frames, free_frames in (("alloc", True, False), ("all", True, True), (None, False, False)):
        memory._record_memory_history(enabled="all", context=context, stacks="python", clear_history=True)
        try:
            x = torch.empty(4096, device="openreg")
            del x
            trace = device_trace(memory._snapshot())
        finally:
            memory._record_memory_history(enabled=None)
        by_action = {e["action"]: e for e in trace}
        assert bool(by_action["alloc"]["frames"]) is alloc_frames, context
        assert bool(by_action["free_requested"]["frames"]) is free_frames, context


def test_ring_keeps_the_newest_max_entries():
    memory = torch.openreg.memory
    memory._record_memory_history(enabled="all", stacks="python", max_entries=5, clear_history=True)
    try:
        sizes = [4096 * (i + 1) for i in range(10)]
        for size in sizes:
            torch.empty(size // 4, device="openreg")  # alloc, free_requested, free_completed each
        trace = device_trace(memory._snapshot())
    finally:
        memory._record_memory_history(enabled=None)
    assert len(trace) == 5
    assert [e["action"] for e in trace] == ["free_completed", "alloc", "free_requested", "free_completed", "snapshot"]
    assert [e["size"] for e in trace[:4]] == [sizes[8], sizes[9], sizes[9], sizes[9]]


def test_skip_actions_and_bad_arguments():
    memory = torch.openreg.memory
    memory._record_memory_history(
        enabled="all", stacks="python", clear_history=True, skip_actions=["free_requested", "snapshot"]
    )
    try:
        torch.empty(4096, device="openreg")
        assert [e["action"] for e in device_trace(memory._snapshot())] == ["alloc", "free_completed"]
    finally:
        memory._record_memory_history(enabled=None)
    with pytest.raises(ValueError, match="enabled must be None or one of 'state', 'all', got 'yes'"):
        memory._record_memory_history(enabled="yes")
    with pytest.raises(ValueError, match="stacks must be 'python' or 'all', got 'cpp'"):
        memory._record_memory_history(stacks="cpp")
    with pytest.raises(RuntimeError, match="Unknown TraceEntry action: allocs"):
        memory._record_memory_history(skip_actions=["allocs"])
    memory._record_memory_history(enabled=None)


def test_cpp_stacks_with_stacks_all(history):
    history._record_memory_history(enabled="all", context="alloc", stacks="all", clear_history=True)
    x = torch.empty(4096, device="openreg")
    line = here() - 1
    alloc = next(e for e in device_trace(history._snapshot()) if e["action"] == "alloc")
    assert frames_at(alloc["frames"], line)
    cpp = [f for f in alloc["frames"] if not f["filename"].endswith(".py")]
    assert any("openreg" in f["name"] and "allocate" in f["name"] for f in cpp), cpp[:20]
    del x


def test_legacy_boolean_form():
    memory = torch.openreg.memory
    memory._record_memory_history(True, trace_alloc_max_entries=100, trace_alloc_record_context=True)
    try:
        torch.empty(4096, device="openreg")
        actions = [e["action"] for e in device_trace(memory._snapshot())]
    finally:
        memory._record_memory_history(False)
    assert actions[-4:] == ["alloc", "free_requested", "free_completed", "snapshot"]
    assert not torch_openreg._C._memory_history_enabled()


def test_memory_snapshot_is_the_segments(history):
    x = torch.empty(4096, device="openreg")
    segments = torch.openreg.memory_snapshot()
    assert any(b["address"] == x.data_ptr() for seg in segments for b in seg["blocks"])
    with pytest.raises(ValueError, match="no private memory pools"):
        torch.openreg.memory_snapshot(mempool_id=(1, 2))
    del x


def test_readme_memory_example(tmp_path, monkeypatch):
    """The README's Memory debugging example, run as written."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("\n## Memory debugging\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README.md", "exec"), {})
    snapshot = load_snapshot(str(tmp_path / "openreg_memory.pickle"))
    assert [e["action"] for e in device_trace(snapshot)].count("alloc") >= 3
    assert not torch_openreg._C._memory_history_enabled()
