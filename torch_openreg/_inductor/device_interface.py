"""Dynamo's view of the openreg device (``torch._dynamo.device_interface``).

Inductor asks it for device properties (every reduction sizes its split by
``multi_processor_count``), the current device, and synchronisation; Dynamo uses
the stream and event classes to trace stream code inside compiled functions.
"""

from __future__ import annotations

import torch
from torch._dynamo.device_interface import DeviceInterface


class OpenRegInterface(DeviceInterface):
    device = torch.openreg.device
    Event = torch.Event
    Stream = torch.openreg.Stream

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            torch.openreg.set_device(device)

        @staticmethod
        def current_device() -> int:
            return torch.openreg.current_device()

        @staticmethod
        def get_device_properties(device=None):
            return torch.openreg.get_device_properties(device)

    current_device = staticmethod(torch.openreg.current_device)
    set_device = staticmethod(torch.openreg.set_device)
    device_count = staticmethod(torch.openreg.device_count)
    is_available = staticmethod(torch.openreg.is_available)
    stream = staticmethod(torch.openreg.stream)
    current_stream = staticmethod(torch.openreg.current_stream)
    set_stream = staticmethod(torch.openreg.set_stream)
    synchronize = staticmethod(torch.openreg.synchronize)
    get_device_properties = staticmethod(torch.openreg.get_device_properties)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return torch.openreg._C._exchange_device(device) if device >= 0 else -1

    @staticmethod
    def exchange_device(device: int) -> int:
        return torch.openreg._C._exchange_device(device)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.openreg.set_stream(
            torch.openreg.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)
        )

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return torch.openreg.current_stream(device_idx).stream_id

    @staticmethod
    def get_compute_capability(device=None) -> str:
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def is_dtype_supported(dtype: torch.dtype, including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def memory_allocated(device=None) -> int:
        return torch.openreg.memory_allocated(device)

    @staticmethod
    def is_triton_capable(device=None) -> bool:
        return False

    @staticmethod
    def raise_if_triton_unavailable(device=None) -> None:
        raise RuntimeError("openreg: Triton does not target openreg; Inductor generates C++ kernels for it")
