"""orccl: torch.distributed on openreg devices.

``import torch_openreg`` (or torch's autoload) registers the c10d backend
``orccl`` for ``devices=["openreg"]`` and makes it the default for openreg
tensors, so ``dist.init_process_group()`` with no backend (openreg tensors go
to orccl, CPU tensors to Gloo) and ``backend="cpu:gloo,openreg:orccl"`` both
work. The backend itself is C++ (``csrc/distributed``): collectives run on a
communication stream of the device, staged through pinned memory, with a Gloo
group over the same store carrying the bytes. Its compiled module is loaded
only when a group is created.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from types import ModuleType

from torch_openreg._lib import LIB_DIR

BACKEND_NAME = "orccl"
# Keys of the host group in the store, beside those of the group itself.
_HOST_PREFIX = "orccl-host/"

__all__ = ["BACKEND_NAME", "register", "load_extension"]


def load_extension() -> ModuleType:
    """The compiled backend, ``lib/_distributed*.so`` (needs torch.distributed)."""
    existing = sys.modules.get("torch_openreg._distributed")
    if existing is not None:
        return existing
    import torch.distributed  # noqa: F401  (registers the c10d types the module derives from)

    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = LIB_DIR / f"_distributed{suffix}"
        if path.exists():
            break
    else:
        raise ImportError(f"torch_openreg: the distributed module _distributed is missing from {LIB_DIR}; "
                          "build it with `pip install --no-build-isolation -e .`")
    spec = importlib.util.spec_from_file_location("torch_openreg._distributed", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["torch_openreg._distributed"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["torch_openreg._distributed"]
        raise
    return module


def _create_backend(options, backend_options):
    """The creator torch calls per group (extended API)."""
    import torch.distributed as dist

    extension = load_extension()
    host = dist.ProcessGroupGloo(dist.PrefixStore(_HOST_PREFIX, options.store), options.group_rank,
                                 options.group_size, options.timeout)
    return extension.ProcessGroupOpenReg(host, options.group_rank, options.group_size,
                                         list(options.global_ranks_in_group), options.timeout)


def register() -> None:
    """Registers orccl with torch.distributed; idempotent, a no-op without it."""
    import torch.distributed as dist

    if not dist.is_available() or BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    # devices must be a list: a string would be split into characters.
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["openreg"])
    dist.Backend.default_device_backend_map["openreg"] = BACKEND_NAME
