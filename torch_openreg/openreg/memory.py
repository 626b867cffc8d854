"""Memory of the openreg caching allocator, with ``torch.cuda.memory``'s API.

The allocator keeps CUDA's statistics (see csrc/backend/CachingAllocator.h),
read here through ``torch.accelerator``. Allocation history and snapshots
(csrc/backend/MemoryHistory.h) come in CUDA's snapshot format, so
``torch.cuda._memory_viz`` and https://pytorch.org/memory_viz read them.
Tools reach this module as ``torch.get_device_module("openreg").memory``.
"""

from __future__ import annotations

import pickle
import sys
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch

from torch_openreg.openreg._core import _get_device_index, _lazy_init, is_initialized
from torch_openreg.openreg._summary import format_memory_summary

# The memory viewer's pickle reader handles protocols 2 to 4 only.
_VIEWER_PICKLE_PROTOCOL = 4


def _index(device) -> int:
    _lazy_init()
    return _get_device_index(device)


def _bindings():
    from torch_openreg.openreg._core import _C

    return _C


def memory_stats(device=None) -> OrderedDict[str, Any]:
    """CUDA's statistics dict (``torch.cuda.memory_stats``), every key included."""
    stats = dict(torch.accelerator.memory_stats(_index(device)))
    if stats:
        # No preemptive rejection policy (throw_on_cudamalloc_oom) on openreg.
        stats.setdefault("num_oom_rejections", 0)
    return OrderedDict(sorted(stats.items()))


def memory_stats_as_nested_dict(device=None) -> dict[str, Any]:
    """The statistics nested as ``torch.cuda.memory_stats_as_nested_dict`` returns them.

    ``"allocation.all.current"`` becomes ``["allocation"]["all"]["current"]``.
    ``reserved_bytes_by_private_pools`` is always empty: openreg has no private
    pools (CUDA makes them for graph capture and ``MemPool``), which is also why
    the flat ``memory_stats`` has no keys under it, as CUDA's has none without pools.
    """
    nested: dict[str, Any] = {"reserved_bytes_by_private_pools": {}}
    for key, value in memory_stats(device).items():
        *path, leaf = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """The allocator's statistics as the table ``torch.cuda.memory_summary`` prints."""
    index = _index(device)
    return format_memory_summary(memory_stats(index), index, abbreviated)


def memory_allocated(device=None) -> int:
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device=None) -> int:
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device=None) -> int:
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device=None) -> int:
    return torch.accelerator.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device=None) -> None:
    torch.accelerator.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Returns cached, unused blocks of every device to the runtime."""
    if is_initialized():
        torch.accelerator.empty_cache()


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of the device, as the runtime counts them."""
    return torch.accelerator.get_memory_info(_index(device))


def _record_memory_history(
    enabled: str | bool | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device=None,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
    **legacy: Any,
) -> None:
    """Starts or stops recording allocation history on every openreg device (as CUDA's).

    ``enabled``: None stops, ``"state"`` keeps the stack of each live block, ``"all"``
    also keeps a ring of the last ``max_entries`` allocator events. ``context``: which
    stacks to keep (``"state"`` live blocks, ``"alloc"`` also allocation events, ``"all"``
    also frees; None none). ``stacks``: ``"python"``, or ``"all"`` to add C++ frames.
    ``device`` is accepted for CUDA's signature; history is kept for every device.
    """
    if isinstance(enabled, bool):
        enabled, context, stacks, max_entries = _legacy_history_arguments(enabled, legacy)
    elif legacy:
        raise TypeError(f"_record_memory_history() got unexpected keyword arguments {sorted(legacy)}")
    if compile_context or global_record_annotations:
        warnings.warn(
            "openreg: compile_context and global_record_annotations are not recorded", RuntimeWarning, stacklevel=2
        )
    if max_entries < 1:
        raise ValueError(f"_record_memory_history: max_entries must be at least 1, got {max_entries}")
    _index(device)  # starts the device, as CUDA's does
    _bindings()._record_memory_history(
        enabled, context, stacks, min(max_entries, sys.maxsize), clear_history, skip_actions or []
    )


def _legacy_history_arguments(enabled: bool, legacy: dict[str, Any]):
    # CUDA's boolean form: (enabled, record_context, trace_alloc_max_entries,
    # trace_alloc_record_context, record_context_cpp).
    known = {"record_context", "trace_alloc_max_entries", "trace_alloc_record_context", "record_context_cpp"}
    unknown = set(legacy) - known
    if unknown:
        raise TypeError(f"_record_memory_history() got unexpected keyword arguments {sorted(unknown)}")
    if not enabled:
        return None, None, "python", 1
    max_entries = legacy.get("trace_alloc_max_entries", 1)
    context = None
    if legacy.get("record_context", True):
        context = "all" if legacy.get("trace_alloc_record_context", False) else "state"
    stacks = "all" if legacy.get("record_context_cpp", False) else "python"
    return ("all" if max_entries > 1 else "state"), context, stacks, max_entries


def _snapshot(device=None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    """Every openreg device's segments, history and allocator settings, in CUDA's format."""
    _lazy_init()
    snapshot = _bindings()._memory_snapshot()
    if augment_with_fx_traces:
        snapshot = torch._utils._augment_memory_snapshot_stack_traces(snapshot)
    return snapshot


def _dump_snapshot(filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    """Pickles :func:`_snapshot` for https://pytorch.org/memory_viz (protocol 4, which the viewer reads)."""
    snapshot = _snapshot(augment_with_fx_traces=augment_with_fx_traces)
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f, protocol=_VIEWER_PICKLE_PROTOCOL)


def memory_snapshot(mempool_id=None, include_traces: bool = True) -> list[dict[str, Any]]:
    """The segments of :func:`_snapshot` (``torch.cuda.memory_snapshot``)."""
    if mempool_id is not None:
        raise ValueError("openreg has no private memory pools: mempool_id must be None")
    return _snapshot()["segments"]


def _save_segment_usage(filename: str = "output.svg", snapshot: dict[str, Any] | None = None) -> None:
    from torch.cuda._memory_viz import segments

    with open(filename, "w") as f:
        f.write(segments(snapshot if snapshot is not None else _snapshot()))


def _save_memory_usage(filename: str = "output.svg", snapshot: dict[str, Any] | None = None) -> None:
    from torch.cuda._memory_viz import memory

    with open(filename, "w") as f:
        f.write(memory(snapshot if snapshot is not None else _snapshot()))


def attach_out_of_memory_observer(observer: Callable[[int, int, int, int], None]) -> None:
    """Calls ``observer(device, bytes_requested, device_total, device_free)`` before each
    ``torch.OutOfMemoryError`` (as ``torch._C._cuda_attachOutOfMemoryObserver``); it may
    take a snapshot. An exception it raises becomes a warning."""
    _bindings()._attach_out_of_memory_observer(observer)
