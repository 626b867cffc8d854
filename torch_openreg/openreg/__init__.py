"""``torch.openreg``: the openreg device module, with the surface of ``torch.cuda``.

Devices are numbered ``openreg:0`` .. ``openreg:N-1``; ``OPENREG_DEVICE_COUNT``
and ``OPENREG_DEVICE_MEMORY`` configure the simulated device (see the runtime
header). Work runs asynchronously on per-stream executors: use
:func:`synchronize`, events or a host read (``item()``, ``.cpu()``) to wait.

The runtime starts at the first device use, or at :func:`init`. As with CUDA, a
process forked after that cannot use the device (its executor threads do not
survive ``fork()``): there :func:`is_initialized` is False, ``_is_in_bad_fork()``
True, and any use raises a ``RuntimeError`` naming the 'spawn' start method.
A process forked before the device started, or spawned, uses it normally.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from torch_openreg.openreg import _utils as _utils  # torch.serialization reads _utils._get_device_index
from torch_openreg.openreg._core import (
    _C,
    _Device,
    _get_device_index,
    _lazy_init,
    current_device,
    device_count,
    init,
    is_available,
    is_initialized,
)
from torch_openreg.openreg._core import (
    _is_in_bad_fork as _is_in_bad_fork,  # read by torch_openreg at exit
)
from torch_openreg.openreg.memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from torch_openreg.openreg.random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from torch_openreg.openreg.streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)


def set_device(device: _Device) -> None:
    index = _get_device_index(device)
    if index >= 0:
        _C._set_device(index)


class device:  # noqa: N801 (torch.cuda's name)
    """Context manager that makes ``device`` current (a negative index: no change)."""

    def __init__(self, device: _Device):
        self.idx = _get_device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = _C._exchange_device(self.idx)
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self.idx >= 0:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):  # noqa: N801 (torch.cuda's name)
    """Context manager that makes the device of tensor ``obj`` current."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.is_openreg else -1)


def synchronize(device: _Device = None) -> None:
    """Waits for all work queued on the device. Kernel failures surface here."""
    _lazy_init()
    _C._synchronize(_get_device_index(device))


@dataclass(frozen=True)
class _DeviceProperties:
    name: str
    total_memory: int
    multi_processor_count: int
    clock_rate_khz: int
    executor_threads: int
    stream_priority_least: int
    stream_priority_greatest: int

    def __repr__(self) -> str:
        return (
            f"_OpenRegDeviceProperties(name='{self.name}', total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"multi_processor_count={self.multi_processor_count}, executor_threads={self.executor_threads})"
        )


def get_device_properties(device: _Device = None) -> _DeviceProperties:
    _lazy_init()
    return _DeviceProperties(**_C._get_device_properties(_get_device_index(device)))


def get_device_name(device: _Device = None) -> str:
    return get_device_properties(device).name


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16]


def _get_generator(device: torch.device) -> torch.Generator:
    """The default generator of ``device`` (torch's graph-safe RNG asks for it)."""
    from torch_openreg.openreg.random import _generator

    return _generator(device)


def __getattr__(name: str):
    # Live values torch reads with getattr(module, name, default), as on
    # torch.cuda: torch.utils.checkpoint saves and restores the device's RNG
    # state only when `_initialized` is true (a stale copy made at import
    # would silently give recomputed dropout new masks).
    if name == "_initialized":
        return is_initialized()
    if name == "default_generators":
        from torch_openreg.openreg.random import _all_generators

        return tuple(_all_generators())
    # Inductor's hooks for a custom device, answered on first use: importing
    # Inductor to define them here would cost every `import torch` seconds.
    from torch_openreg import _inductor

    if name in _inductor.DEVICE_MODULE_HOOKS:
        return _inductor.device_module_hook(name)
    raise AttributeError(f"module 'torch.openreg' has no attribute {name!r}")


__all__ = [
    "Event",
    "Stream",
    "StreamContext",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "init",
    "initial_seed",
    "is_available",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]
