"""Out of memory as on CUDA, memory_summary, memory_stats' keys, and PYTORCH_ALLOC_CONF.

Runs that need a small device or an environment variable run in a fresh interpreter.
"""

from __future__ import annotations

import json

import torch
from backend_support import run_python

MiB = 1 << 20

# torch.cuda.memory_stats() keys in 2.13 (torch/csrc/cuda/Module.cpp), pools expanded.
_POOLED = (
    "allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes", "active_bytes",
    "inactive_split_bytes", "requested_bytes",
)  # fmt: skip
CUDA_KEYS = (
    {f"{f}.{p}.{c}" for f in _POOLED for p in ("all", "small_pool", "large_pool") for c in ("current", "peak", "allocated", "freed")}
    | {f"{f}.{c}" for f in ("oversize_allocations", "oversize_segments") for c in ("current", "peak", "allocated", "freed")}
    | {"num_alloc_retries", "num_ooms", "max_split_size", "num_sync_all_streams", "num_device_alloc", "num_device_free", "num_oom_rejections"}
)  # fmt: skip


def test_memory_stats_has_every_key_of_cudas():
    torch.empty(1, device="openreg")
    stats = torch.openreg.memory_stats()
    assert CUDA_KEYS <= set(stats), sorted(CUDA_KEYS - set(stats))
    assert list(stats) == sorted(stats)
    assert stats["num_oom_rejections"] == 0 and stats["max_split_size"] == -1


def test_memory_summary_is_cudas_table():
    keep = torch.empty(3 * MiB, dtype=torch.uint8, device="openreg")
    stats = torch.openreg.memory_stats()
    lines = torch.openreg.memory_summary().splitlines()
    assert all(len(line) == 77 for line in lines), [line for line in lines if len(line) != 77]
    assert lines[1].strip("| ") == "PyTorch openreg memory summary, device ID 0"
    assert lines[3] == (
        "|" + f"openreg OOMs: {stats['num_ooms']}".center(37) + "|"
        + f"orMalloc retries: {stats['num_alloc_retries']}".center(37) + "|"
    )  # fmt: skip
    assert lines[5] == "|         Metric        |  Cur Usage | Peak Usage |  Tot Alloc |  Tot Freed |"
    row = next(line for line in lines if line.startswith("| Allocated memory "))
    kib = [stats[f"allocated_bytes.all.{c}"] // 1024 for c in ("current", "peak", "allocated", "freed")]
    unit = "KiB" if stats["allocated_bytes.all.peak"] // 1024 < 768 * 1024 else "MiB"
    if unit == "KiB":
        assert row == "| Allocated memory      |" + "".join(f" {v:6d} KiB |" for v in kib)
    allocs = next(line for line in lines if line.startswith("| Allocations "))
    counts = [stats[f"allocation.all.{c}"] for c in ("current", "peak", "allocated", "freed")]
    if stats["allocation.all.peak"] < 750_000:
        assert allocs == "| Allocations           |" + "".join(f" {v:7d}    |" for v in counts)
    abbreviated = torch.openreg.memory_summary(abbreviated=True)
    assert "from large pool" in "\n".join(lines) and "from large pool" not in abbreviated
    assert len(abbreviated.splitlines()) == len(lines) - 18
    del keep


def test_mem_get_info_agrees_with_the_runtime():
    free, total = torch.openreg.mem_get_info()
    assert (free, total) == torch.accelerator.get_memory_info(0)
    assert total == torch.openreg.get_device_properties(0).total_memory


_OOM_RUN = """
import json
import torch
import torch_openreg
from torch.profiler import ProfilerActivity, profile

seen = []
torch.openreg.memory.attach_out_of_memory_observer(lambda *args: seen.append(args))
torch.openreg.memory._record_memory_history(enabled="all", stacks="python")
keep = torch.empty(40 << 20, dtype=torch.uint8, device="openreg")
try:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        torch.empty(40 << 20, dtype=torch.uint8, device="openreg")  # the failing line
except torch.OutOfMemoryError as caught:
    error = caught
snapshot = torch.openreg.memory._snapshot()
oom = [e for e in snapshot["device_traces"][0] if e["action"] == "oom"]
events = [(e.name, e.device_memory_usage) for e in prof.events() if "Memory" in e.name]
print(json.dumps({
    "args": list(error.args),
    "is_runtime_error": isinstance(error, RuntimeError),
    "num_ooms": torch.openreg.memory_stats()["num_ooms"],
    "observer": seen,
    "oom": [{k: e[k] for k in ("size", "device_free", "stream")} for e in oom],
    "oom_frames": [(f["filename"], f["line"]) for f in oom[0]["frames"]],
    "profiler": events,
}))
"""


def test_out_of_memory_end_to_end():
    result = run_python(_OOM_RUN, env={"OPENREG_DEVICE_MEMORY": "64M"})
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    # Hugging Face accelerate's should_reduce_batch_size: one argument containing " out of memory."
    assert out["is_runtime_error"] and len(out["args"]) == 1 and " out of memory." in out["args"][0]
    message = out["args"][0].splitlines()[0]
    assert message.startswith(
        "openreg out of memory. Tried to allocate 40.00 MiB (41943040 bytes). Device openreg:0 has a total "
        "capacity of 64.00 MiB of which 24.00 MiB is free. Of the allocated memory 40.00 MiB is allocated by "
        "PyTorch, and 0 bytes is reserved by PyTorch but unallocated."
    ), message
    assert out["num_ooms"] == 1
    assert out["observer"] == [[0, 40 * MiB, 64 * MiB, 24 * MiB]]
    assert out["oom"] == [{"size": 40 * MiB, "device_free": 24 * MiB, "stream": 1}]
    assert ["<string>", 13] in out["oom_frames"]
    assert "[OutOfMemory]" in [name for name, _ in out["profiler"]]


def test_an_observer_that_raises_is_a_warning_and_the_oom_stays():
    result = run_python(
        """
        import warnings
        import torch
        import torch_openreg
        def observer(*args):
            raise ValueError("observer broke")
        torch.openreg.memory.attach_out_of_memory_observer(observer)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                torch.empty(1 << 40, dtype=torch.uint8, device="openreg")
            except torch.OutOfMemoryError as error:
                print("OOM", " out of memory." in str(error))
        print([str(w.message).split(":")[0] for w in caught if "observer" in str(w.message)])
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["OOM True", "['openreg']"]


_SETTINGS_RUN = """
import json
import torch
import torch_openreg
big = torch.empty(8 << 20, dtype=torch.uint8, device="openreg")  # >= max_split_size: oversize
del big
small = torch.empty(3 << 19, dtype=torch.uint8, device="openreg")  # must not split the cached 8 MiB block
stats = torch.openreg.memory_stats()
print(json.dumps({
    "settings": torch.openreg.memory._snapshot()["allocator_settings"],
    "segments": stats["segment.all.current"],
    "oversize_segments": stats["oversize_segments.current"],
    "oversize_allocations": stats["oversize_allocations.allocated"],
    "max_split_size": stats["max_split_size"],
}))
"""


def test_max_split_size_is_honoured_and_reported():
    result = run_python(_SETTINGS_RUN, env={"PYTORCH_ALLOC_CONF": "max_split_size_mb:4"})
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["settings"] == {
        "PYTORCH_ALLOC_CONF": "max_split_size_mb:4",
        "max_split_size": 4 * MiB,
        "max_non_split_rounding_size": 20 * MiB,
        "garbage_collection_threshold": 0.0,
        "expandable_segments": False,
        "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
    }
    assert out["max_split_size"] == 4 * MiB
    assert (out["segments"], out["oversize_segments"], out["oversize_allocations"]) == (2, 1, 1)


def test_without_max_split_size_the_cached_block_is_split():
    result = run_python(_SETTINGS_RUN, env={"PYTORCH_ALLOC_CONF": ""})
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["settings"]["max_split_size"] == -1
    assert (out["segments"], out["oversize_segments"]) == (1, 0)


def test_garbage_collection_threshold_releases_the_cache_before_growing():
    code = """
        import torch
        import torch_openreg
        a = torch.empty(20 << 20, dtype=torch.uint8, device="openreg")
        del a  # cached: 20 MiB reserved
        b = torch.empty(30 << 20, dtype=torch.uint8, device="openreg")  # the cached block is too small
        stats = torch.openreg.memory_stats()
        print(stats["reserved_bytes.all.current"] >> 20, stats["num_device_free"])
        """
    env = {"OPENREG_DEVICE_MEMORY": "64M"}
    with_gc = run_python(code, env={**env, "PYTORCH_ALLOC_CONF": "garbage_collection_threshold:0.5"})
    without = run_python(code, env={**env, "PYTORCH_ALLOC_CONF": ""})
    assert with_gc.returncode == 0 and without.returncode == 0, with_gc.stderr + without.stderr
    assert with_gc.stdout.split() == ["30", "1"]  # 20 + 30 > 0.5 * 64: the 20 MiB went back first
    assert without.stdout.split() == ["50", "0"]


def test_bad_settings_are_clear_errors():
    cases = {
        "colour:blue": "unknown setting 'colour' (openreg honours max_split_size_mb, max_non_split_rounding_mb, "
        "garbage_collection_threshold, roundup_power2_divisions)",
        "roundup_power2_divisions:3": "roundup_power2_divisions must be 0 or a power of two, got 3",
        "roundup_power2_divisions:[3:4]": "roundup_power2_divisions intervals must be powers of two (MiB), got 3",
        "roundup_power2_divisions:[1:4,2]": "roundup_power2_divisions entry '2' is not interval:divisions",
        "roundup_power2_divisions:[1:4": "PYTORCH_ALLOC_CONF 'roundup_power2_divisions:[1:4': unbalanced brackets",
        "max_split_size_mb:big": "max_split_size_mb must be a whole number of MiB, got 'big'",
        "max_split_size_mb:1": "max_split_size_mb must be at least 2, got 1",
        "garbage_collection_threshold:1.5": "garbage_collection_threshold must lie strictly between 0 and 1, got 1.5",
        "max_split_size_mb": "'max_split_size_mb' is not key:value",
        "expandable_segments:maybe": "expandable_segments must be true or false, got 'maybe'",
    }
    for conf, expected in cases.items():
        result = run_python(
            """
            import torch
            import torch_openreg
            try:
                torch.empty(1, device="openreg")
            except RuntimeError as error:
                print(str(error).splitlines()[0])
            """,
            env={"PYTORCH_ALLOC_CONF": conf},
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().startswith(
            f"openreg: PYTORCH_ALLOC_CONF{'' if expected[0] == 'P' else ': '}"
            + expected.removeprefix("PYTORCH_ALLOC_CONF")
        ), conf


def test_settings_parser_reports_each_key():
    parse = __import__("torch_openreg")._C._parse_allocator_settings
    settings = parse(" max_split_size_mb:64 , garbage_collection_threshold:0.25,max_non_split_rounding_mb:0")
    assert settings["max_split_size"] == 64 * MiB and settings["garbage_collection_threshold"] == 0.25
    assert settings["max_non_split_rounding_size"] == 0


def test_roundup_power2_divisions_parses_as_cudas():
    parse = __import__("torch_openreg")._C._parse_allocator_settings
    intervals = [str(1 << i) for i in range(16)]
    assert parse("roundup_power2_divisions:4")["roundup_power2_divisions"] == dict.fromkeys(intervals, 4)
    # The first entry also covers the intervals below it; ">" every one after the last named.
    divisions = parse("roundup_power2_divisions:[2:4, 64:8, >:2]")["roundup_power2_divisions"]
    assert divisions == {**dict.fromkeys(intervals, 2), "1": 4, "2": 4, "4": 0, "8": 0, "16": 0, "32": 0, "64": 8}


def test_roundup_power2_divisions_rounds_requests():
    code = """
        import torch
        import torch_openreg
        sizes = {}
        for n in (2 * 2**20 + 7, 100 * 2**20 + 1, 64 * 2**20):
            t = torch.empty(n, dtype=torch.uint8, device="openreg")
            blocks = [b for s in torch.openreg.memory._snapshot()["segments"] for b in s["blocks"]]
            sizes[n] = next(b["size"] for b in blocks if b["address"] == t.data_ptr())
            del t
            torch.openreg.empty_cache()
        print(list(sizes.values()))
        """
    runs = {
        conf: run_python(code, env={"PYTORCH_ALLOC_CONF": conf})
        for conf in ("", "roundup_power2_divisions:4", "roundup_power2_divisions:[2:4,64:8,>:2]")
    }
    assert all(r.returncode == 0 for r in runs.values()), [r.stderr for r in runs.values()]
    # 512-byte multiples without it; with it, the next of N equal steps between
    # two powers of two (a power of two itself stays).
    assert runs[""].stdout.split("\n")[0] == str([2 * MiB + 512, 100 * MiB + 512, 64 * MiB])
    assert runs["roundup_power2_divisions:4"].stdout.split("\n")[0] == str([2 * MiB + MiB // 2, 112 * MiB, 64 * MiB])
    assert runs["roundup_power2_divisions:[2:4,64:8,>:2]"].stdout.split("\n")[0] == str(
        [2 * MiB + MiB // 2, 104 * MiB, 64 * MiB]
    )


def test_memory_stats_as_nested_dict():
    torch.empty(1, device="openreg")
    flat = torch.openreg.memory_stats()
    nested = torch.openreg.memory_stats_as_nested_dict()
    assert nested["allocation"]["all"]["current"] == flat["allocation.all.current"]
    assert nested["oversize_segments"]["peak"] == flat["oversize_segments.peak"]
    assert nested["num_ooms"] == flat["num_ooms"]
    # No private pools on openreg (CUDA makes them for graphs and MemPool): empty, as CUDA's without any.
    assert nested["reserved_bytes_by_private_pools"] == {}
