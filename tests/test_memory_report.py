"""`python -m torch_openreg memory SNAPSHOT`: the peak and what was live at it by allocating frame,
fragmentation by segment, and what held memory at an out-of-memory; on a snapshot in CUDA's format
built field by field, and on one of openreg's own (written by a fresh interpreter)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from openreg_trace.memory_report import allocation_site  # noqa: E402

MiB = 1 << 20
SEG = 0x7F00_0000_0000  # CUDA-like addresses, below 2**53


def frame(filename: str, line: int, name: str) -> dict:
    return {"filename": filename, "line": line, "name": name}


TORCH_LINEAR = frame("/usr/lib/python3/site-packages/torch/nn/modules/linear.py", 125, "forward")
USER_MODEL = frame("/home/me/train.py", 42, "step")
USER_OPT = frame("/home/me/train.py", 57, "update")
CPP = frame("??", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc")


def entry(action: str, addr: int, size: int, t: int, frames: list | None = None) -> dict:
    e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": frames or []}
    if action == "oom":
        e["device_free"] = e.pop("addr")
    return e


def cuda_snapshot() -> dict:
    """As torch.cuda.memory._snapshot() returns it: one 20 MiB segment on device 0, a history with a peak
    of 14 MiB (8 MiB from step, 6 MiB from update), then an out-of-memory holding 8 + 2 MiB."""
    trace = [
        entry("segment_alloc", SEG, 20 * MiB, 1000, [CPP, TORCH_LINEAR, USER_MODEL]),
        entry("alloc", SEG, 8 * MiB, 1001, [CPP, TORCH_LINEAR, USER_MODEL]),
        entry("alloc", SEG + 8 * MiB, 6 * MiB, 1002, [USER_OPT]),
        entry("free_requested", SEG + 8 * MiB, 6 * MiB, 1003),
        entry("free_completed", SEG + 8 * MiB, 6 * MiB, 1004),
        entry("alloc", SEG + 8 * MiB, 2 * MiB, 1005, [USER_OPT]),
        entry("oom", 1 * MiB, 40 * MiB, 1006, [USER_MODEL]),
        entry("snapshot", 0, 0, 1007),
    ]
    blocks = [
        {"address": SEG, "size": 8 * MiB, "requested_size": 8 * MiB, "state": "active_allocated",
         "frames": [TORCH_LINEAR, USER_MODEL]},
        {"address": SEG + 8 * MiB, "size": 2 * MiB, "requested_size": 2 * MiB - 100, "state": "active_allocated",
         "frames": [USER_OPT]},
        {"address": SEG + 10 * MiB, "size": 10 * MiB, "requested_size": 0, "state": "inactive", "frames": []},
    ]  # fmt: skip
    segment = {
        "device": 0, "address": SEG, "total_size": 20 * MiB, "allocated_size": 10 * MiB, "active_size": 10 * MiB,
        "requested_size": 10 * MiB - 100, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
        "is_expandable": False, "frames": [USER_MODEL], "blocks": blocks,
    }  # fmt: skip
    return {
        "segments": [segment],
        "device_traces": [trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": None, "max_split_size": -1},
        "external_annotations": [],
    }


def run_memory(path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "torch_openreg", "memory", str(path), *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_allocation_site_skips_torch_and_cpp_frames():
    assert allocation_site([CPP, TORCH_LINEAR, USER_MODEL]) == "/home/me/train.py:42 in step"
    assert allocation_site([CPP, TORCH_LINEAR]) == f"{TORCH_LINEAR['filename']}:125 in forward"
    assert allocation_site([]) == "<no stack recorded>"


def test_cuda_snapshot_json(tmp_path):
    path = tmp_path / "cuda.pickle"
    path.write_bytes(pickle.dumps(cuda_snapshot(), protocol=4))
    r = run_memory(path, "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "openreg_trace.memory_report" in imported and "torch" not in imported  # needs no torch
    (device,) = json.loads(r.stdout)
    assert device["device"] == 0 and device["reserved"] == 20 * MiB and device["allocated"] == 10 * MiB
    assert device["peak"] == {"bytes": 14 * MiB, "time_us": 1002, "reserved": 20 * MiB}
    assert device["live_at_peak"] == [
        {"site": "/home/me/train.py:42 in step", "bytes": 8 * MiB, "blocks": 1},
        {"site": "/home/me/train.py:57 in update", "bytes": 6 * MiB, "blocks": 1},
    ]
    assert device["segments"] == [
        {"address": SEG, "total": 20 * MiB, "allocated": 10 * MiB, "unallocated": 10 * MiB, "free_blocks": 1,
         "largest_free": 10 * MiB, "stream": 0}
    ]  # fmt: skip
    (oom,) = device["ooms"]
    assert (oom["requested"], oom["device_free"], oom["in_use"], oom["reserved"]) == (40 * MiB, MiB, 10 * MiB, 20 * MiB)
    assert oom["site"] == "/home/me/train.py:42 in step" and oom["time_us"] == 1006
    assert oom["held_by"] == [
        {"site": "/home/me/train.py:42 in step", "bytes": 8 * MiB, "blocks": 1},
        {"site": "/home/me/train.py:57 in update", "bytes": 2 * MiB, "blocks": 1},
    ]


def test_cuda_snapshot_text(tmp_path):
    path = tmp_path / "cuda.pickle"
    path.write_bytes(pickle.dumps(cuda_snapshot(), protocol=4))
    r = run_memory(path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "device 0: 20.00 MiB reserved, 10.00 MiB allocated at the snapshot" in out
    assert "peak in use: 14.00 MiB at 1002 us (history of 8 entries; peak reserved 20.00 MiB)" in out
    assert "     8.00 MiB       1 block   /home/me/train.py:42 in step" in out
    assert "fragmentation: 10.00 MiB reserved but not allocated (50.0% of reserved), by segment:" in out
    assert "out of memory at 1006 us: tried to allocate 40.00 MiB with 1.00 MiB free on the device" in out


def test_history_truncated_by_the_ring(tmp_path):
    """An allocation made before the ring's first entry, freed inside it, still counts."""
    snapshot = cuda_snapshot()
    snapshot["device_traces"][0] = snapshot["device_traces"][0][3:]  # starts at the free of the 6 MiB block
    path = tmp_path / "ring.pickle"
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    (device,) = json.loads(run_memory(path, "--json").stdout)
    assert device["peak"]["bytes"] == 14 * MiB and device["peak"]["time_us"] is None  # the state before the ring
    assert {g["site"] for g in device["live_at_peak"]} == {
        "/home/me/train.py:42 in step",
        "<allocated before the recorded history; no stack>",
    }


def test_bad_files_are_clear_errors(tmp_path):
    not_pickle = tmp_path / "text.pickle"
    not_pickle.write_text("hello")
    assert "is not a pickle" in run_memory(not_pickle).stderr
    with_class = tmp_path / "class.pickle"
    with_class.write_bytes(pickle.dumps({"segments": [Path("x")]}))
    r = run_memory(with_class)
    assert r.returncode == 2 and "a memory snapshot holds plain data only" in r.stderr
    no_segments = tmp_path / "dict.pickle"
    no_segments.write_bytes(pickle.dumps({"a": 1}))
    assert "is not a memory snapshot (no 'segments' list)" in run_memory(no_segments).stderr
    assert "cannot read" in run_memory(tmp_path / "missing.pickle").stderr


def test_openreg_snapshot(tmp_path):
    path = tmp_path / "openreg.pickle"
    code = f"""
        import torch
        import torch_openreg
        torch.openreg.memory._record_memory_history(stacks="python")
        def layer():
            return torch.empty(3 << 20, dtype=torch.uint8, device="openreg")
        keep = layer()
        temporary = torch.empty(5 << 20, dtype=torch.uint8, device="openreg")
        del temporary
        try:
            torch.empty(1 << 40, dtype=torch.uint8, device="openreg")
        except torch.OutOfMemoryError:
            pass
        torch.openreg.memory._dump_snapshot({str(path)!r})
        """
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    made = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-2000:]
    r = run_memory(path, "--json", "--device", "0")
    assert r.returncode == 0, r.stderr[-2000:]
    (device,) = json.loads(r.stdout)
    # Blocks round up to 2 MiB in the large pool: 3 MiB takes 4, 5 MiB takes 6.
    assert device["peak"]["bytes"] == 10 * MiB
    assert device["live_at_peak"] == [
        {"site": "<string>:8 in <module>", "bytes": 6 * MiB, "blocks": 1},
        {"site": "<string>:6 in layer", "bytes": 4 * MiB, "blocks": 1},
    ]
    (oom,) = device["ooms"]
    assert oom["requested"] == 1 << 40 and oom["site"] == "<string>:11 in <module>"
    assert oom["held_by"] == [{"site": "<string>:6 in layer", "bytes": 4 * MiB, "blocks": 1}]
