"""The device module's core: the extension, the runtime's lazy start (and the
fork guard), the device count and how a device argument names an index. The
device module's parts (memory, random, streams) import it from here, so that
none of them imports the package that imports them.
"""

from __future__ import annotations

import threading

import torch

from torch_openreg._lib import load_extension

_C = load_extension()

_Device = torch.device | str | int | None

_initialized = False
_init_lock = threading.Lock()


def _is_in_bad_fork() -> bool:
    """True in a forked child of a process that had started the device (which it cannot use)."""
    return _C._is_in_bad_fork()


def _lazy_init() -> None:
    """Starts the device runtime on first use (torch calls this before device work)."""
    global _initialized
    if is_initialized():
        return
    with _init_lock:
        if is_initialized():
            return
        # In a forked child the parent's _initialized was copied: the backend,
        # which marks the child at the fork, says why it cannot start.
        _C._init()
        _initialized = True


def init() -> None:
    """Starts openreg's device runtime now; torch otherwise does it at the first device use.

    Does nothing if it is already started. Raises ``RuntimeError`` when the runtime
    cannot start (a malformed ``OPENREG_*`` variable), or in a process forked from one
    that had started it: the runtime's worker threads do not survive ``fork()``, so such
    a child must not use the device (start workers with the 'spawn' method instead).
    """
    _lazy_init()


def is_initialized() -> bool:
    """True once the device runtime is started in this process (False in a forked child of one)."""
    return _initialized and not _is_in_bad_fork()


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
