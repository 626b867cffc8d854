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

from types import ModuleType

from torch_openreg._lib import load_native_module

BACKEND_NAME = "orccl"
# Keys of the host group in the store, beside those of the group itself.
_HOST_PREFIX = "orccl-host/"

__all__ = ["BACKEND_NAME", "register", "load_extension"]


def load_extension() -> ModuleType:
    """The compiled backend, ``lib/_distributed*.so`` (needs torch.distributed)."""
    import torch.distributed  # noqa: F401  (registers the c10d types the module derives from)

    return load_native_module("_distributed", "the distributed module")


def _create_backend(options, backend_options):
    """The creator torch calls per group (extended API)."""
    import torch.distributed as dist

    extension = load_extension()
    host = dist.ProcessGroupGloo(
        dist.PrefixStore(_HOST_PREFIX, options.store), options.group_rank, options.group_size, options.timeout
    )
    return extension.ProcessGroupOpenReg(
        host, options.group_rank, options.group_size, list(options.global_ranks_in_group), options.timeout
    )


def _orccl_backend(pg):
    """The group's orccl backend, or None (not a member, or no openreg backend)."""
    import torch
    import torch.distributed as dist

    if not isinstance(pg, dist.ProcessGroup):
        return None
    try:
        ours = pg._get_backend(torch.device("openreg"))
    except RuntimeError:
        return None
    return ours if ours.name() == BACKEND_NAME else None


def _has_gloo_for_cpu(pg) -> bool:
    import torch

    try:
        return pg._get_backend(torch.device("cpu")).name() == "gloo"
    except RuntimeError:
        return False


def _repair_default_backend(pg) -> None:
    """Makes orccl the group's default backend where torch 2.13 leaves none.

    torch picks a group's default backend (what DDP's logger and hooks ask
    for) before creating its backends, and misses plugins: with no backend
    argument it names Gloo (absent when only openreg:orccl was made), and for
    "cpu:gloo,openreg:orccl" it compares the plugin's upper-case key with
    lower-case names and leaves it undefined ("No backend of type 0 found").
    """
    import torch.distributed as dist

    if _orccl_backend(pg) is None:  # not a member of the new group, or no orccl in it
        return
    default = pg.name()
    if default == "gloo":
        if _has_gloo_for_cpu(pg):
            return
    elif default != "undefined":
        return
    pg._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)


def _wrap_group_creation(c10d) -> None:
    create = c10d._new_process_group_helper
    if getattr(create, "_openreg_wrapped", False):
        return

    def new_process_group_helper(*args, **kwargs):
        pg, store = create(*args, **kwargs)
        _repair_default_backend(pg)
        return pg, store

    new_process_group_helper._openreg_wrapped = True
    c10d._new_process_group_helper = new_process_group_helper


def _wrap_set_pg_timeout(c10d) -> None:
    """torch 2.13's ``_set_pg_timeout`` sets only Gloo's and NCCL's backends (it
    warns and does nothing for a plugin's): it sets orccl's too, as NCCL's."""
    set_timeout = c10d._set_pg_timeout
    if getattr(set_timeout, "_openreg_wrapped", False):
        return

    def set_pg_timeout(timeout, group=None):
        pg = c10d._get_default_group() if group is None else group
        ours = _orccl_backend(pg)
        if ours is None:
            return set_timeout(timeout, group)
        ours._set_default_timeout(timeout)
        if _has_gloo_for_cpu(pg):  # torch's own path sets the CPU side
            set_timeout(timeout, group)
        return None

    set_pg_timeout._openreg_wrapped = True
    set_pg_timeout.__doc__ = set_timeout.__doc__
    c10d._set_pg_timeout = set_pg_timeout


def register() -> None:
    """Registers orccl with torch.distributed; idempotent, a no-op without it."""
    import torch.distributed as dist

    if not dist.is_available() or BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    # devices must be a list: a string would be split into characters.
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["openreg"])
    dist.Backend.default_device_backend_map["openreg"] = BACKEND_NAME
    _wrap_group_creation(dist.distributed_c10d)
    _wrap_set_pg_timeout(dist.distributed_c10d)
