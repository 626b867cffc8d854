"""Memory statistics of the openreg caching allocator (as ``torch.cuda``'s).

The allocator keeps CUDA's statistics (see csrc/backend/CachingAllocator.h);
these functions read them through ``torch.accelerator``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

from torch_openreg.openreg._core import _get_device_index, _lazy_init, is_initialized


def _index(device) -> int:
    _lazy_init()
    return _get_device_index(device)


def memory_stats(device=None) -> OrderedDict[str, Any]:
    return torch.accelerator.memory_stats(_index(device))


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
