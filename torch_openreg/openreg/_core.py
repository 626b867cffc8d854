"""The device module's core: the extension, the runtime's lazy start (and the
fork guard), the device count and how a device argument names an index. The
device module's parts (memory, random, streams) import it from here, so that
none of them imports the package that imports them.
"""

from __future__ import annotations

import os
import threading

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
