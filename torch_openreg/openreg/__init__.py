"""``torch.openreg``: the openreg device module, with the surface of ``torch.cuda``.

Devices are numbered ``openreg:0`` .. ``openreg:N-1``; ``OPENREG_DEVICE_COUNT``
and ``OPENREG_DEVICE_MEMORY`` configure the simulated device (see the runtime
header). Work runs asynchronously on per-stream executors: use
:func:`synchronize`, events or a host read (``item()``, ``.cpu()``) to wait.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import torch

from torch_openreg._lib import load_extension

_C = load_extension()

_Device = torch.device | str | int | None

_initialized = False
_in_bad_fork = False
_init_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # The runtime's executor threads do not survive fork().
    global _in_bad_fork
    if _initialized:
        _in_bad_fork = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _is_in_bad_fork() -> bool:
    return _in_bad_fork


def _lazy_init() -> None:
    """Starts the device runtime on first use (torch calls this before device work)."""
    global _initialized
    if _initialized:
        return
    with _init_lock:
        if _initialized:
            return
        if _in_bad_fork:
            raise RuntimeError(
                "openreg: cannot re-initialize the device in a forked subprocess; use the 'spawn' start method"
            )
        _C._init()
        _initialized = True


def is_initialized() -> bool:
    return _initialized


def is_available() -> bool:
    """True when at least one openreg device can be used. Never raises."""
    return _C._device_count() > 0


def device_count() -> int:
    return _C._device_count()


def _get_device_index(device: _Device, optional: bool = True) -> int:
    """The index ``device`` names; the current device for ``None`` when ``optional``."""
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "openreg":
            raise ValueError(f"openreg: expected an openreg device, got {device}")
        if device.index is not None:
            return device.index
    elif device is not None:
        raise TypeError(f"openreg: cannot interpret {device!r} as a device")
    if not optional:
        raise ValueError(f"openreg: expected a device with an index, got {device!r}")
    return current_device()


def current_device() -> int:
    return _C._get_device()


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


from torch_openreg.openreg.memory import (  # noqa: E402
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from torch_openreg.openreg.random import (  # noqa: E402
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
from torch_openreg.openreg.streams import (  # noqa: E402
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)

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
