"""Streams and events on openreg, as ``torch.Stream`` / ``torch.Event`` subclasses.

A stream's ``stream_id`` is the runtime's stream number (the default stream
is 1), the same number the profiler uses for the stream's row in traces.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_openreg.openreg._core import _C, _get_device_index, _lazy_init


def _index(device) -> int:
    _lazy_init()
    return _get_device_index(device)


class Stream(torch.Stream):
    """An openreg stream: ``Stream(device=None, priority=0)``.

    Priority 0 is normal; negative values run first. ``with stream:`` makes it
    the current stream of its device for the block.
    """

    def __new__(cls, device=None, priority: int = 0, **kwargs: Any):
        if "stream_id" in kwargs:  # wrapping an existing stream
            return super().__new__(cls, **kwargs)
        index = _index(device)
        return super().__new__(cls, device=torch.device("openreg", index), priority=priority)

    def __repr__(self) -> str:
        return f"<torch.openreg.Stream device=openreg:{self.device_index} stream_id={self.stream_id}>"


def _wrap(base: torch.Stream) -> Stream:
    return Stream(stream_id=base.stream_id, device_index=base.device_index, device_type=base.device_type)


class _EventType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, torch.Event) and obj.device.type == "openreg"


class Event(metaclass=_EventType):
    """An openreg event: ``Event(enable_timing=False, blocking=False, interprocess=False)``.

    Returns a ``torch.Event`` on openreg (torch's event methods accept only
    that exact type as their argument, so no subclass is made);
    ``isinstance(e, torch.openreg.Event)`` holds for any openreg event.
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        return torch.Event(device="openreg", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(device=None) -> Stream:
    return _wrap(torch.accelerator.current_stream(_index(device)))


def default_stream(device=None) -> Stream:
    index = _index(device)
    current = torch.accelerator.current_stream(index)
    # The default stream always has runtime stream number 1.
    return Stream(stream_id=1, device_index=index, device_type=current.device_type)


def set_stream(stream: torch.Stream) -> None:
    """Makes ``stream`` current on its device (and makes that device current)."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager selecting ``stream``; restores the previous streams on exit."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self._previous: list[torch.Stream] = []
        self._previous_device = -1

    def __enter__(self):
        if self.stream is None:
            return self
        self._previous_device = _C._get_device()
        self._previous = [torch.accelerator.current_stream(self.stream.device_index)]
        if self._previous_device != self.stream.device_index:
            self._previous.append(torch.accelerator.current_stream(self._previous_device))
        torch.accelerator.set_stream(self.stream)
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self.stream is None:
            return False
        for previous in reversed(self._previous):
            torch.accelerator.set_stream(previous)
        _C._set_device(self._previous_device)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)
