"""``torch.compile`` for openreg: Inductor's C++ kernels, launched on the device's streams.

Registered lazily: importing Inductor costs about two seconds, so ``import torch``
and ``import torch_openreg`` do not. Inductor's first compile in a process looks up
``torch.openreg.Scheduling`` (and the three wrapper classes) through the device
module; that lookup (``torch.openreg.__getattr__``) calls :func:`register`, which
registers everything Inductor and Dynamo need for the device:

- the scheduling (:mod:`.scheduling`) and the wrappers (:mod:`.wrapper`), with a
  cache key that follows openreg's code generation (:mod:`.cache_config`);
- the device op overrides (source text the wrapper may emit);
- Dynamo's device interface (:mod:`.device_interface`), which the backend's load has
  already registered, without importing Dynamo (:mod:`.interface_hook`);
- the fixes for Inductor's assumptions about non-CPU devices (:mod:`.patches`).

Calling :func:`register` directly is fine too; it runs once.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_registered = False

# What Inductor's init_backend_registration reads from the device module.
DEVICE_MODULE_HOOKS = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def _op_overrides():
    from torch._inductor.codegen.common import DeviceOpOverrides

    class OpenRegDeviceOpOverrides(DeviceOpOverrides):
        def import_get_raw_stream_as(self, name: str) -> str:
            return f"from torch_openreg._inductor.device_interface import get_raw_stream as {name}"

        def set_device(self, device_idx: int) -> str:
            return f"torch.openreg.set_device({device_idx})"

        def synchronize(self) -> str:
            return "torch.openreg.synchronize()"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.openreg.device({device_idx})"

        def current_stream(self) -> str:
            return "torch.openreg.current_stream()"

    return OpenRegDeviceOpOverrides()


def register() -> None:
    """Registers openreg with Inductor and Dynamo, once per process."""
    global _registered
    with _lock:
        if _registered:
            return
        from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides

        from torch_openreg._inductor import cache_config, patches
        from torch_openreg._inductor.interface_hook import register_device_interface
        from torch_openreg._inductor.scheduling import OpenRegScheduling
        from torch_openreg._inductor.wrapper import (
            OpenRegCppWrapperCodegen,
            OpenRegFxWrapperCodegen,
            OpenRegWrapperCodegen,
        )

        patches.apply()
        register_backend_for_device(
            "openreg",
            OpenRegScheduling,
            OpenRegWrapperCodegen,
            OpenRegCppWrapperCodegen,
            OpenRegFxWrapperCodegen,
            device_custom_config=cache_config,
        )
        register_device_op_overrides("openreg", _op_overrides())
        register_device_interface()  # already done since the backend loaded (interface_hook), unless it failed
        _registered = True


def device_module_hook(name: str):
    """``torch.openreg.<name>`` for one of :data:`DEVICE_MODULE_HOOKS`: registers, then answers.

    Inductor's first compile reads ``Scheduling`` first, so openreg is registered
    (with its cache key) before the rest is read. ``CppWrapperCodegen`` then reads
    as None: Inductor would otherwise register the device a second time, without
    the cache key; the registered C++ wrapper class refuses with a clear error.
    """
    register()
    from torch_openreg._inductor import scheduling, wrapper

    return {
        "Scheduling": scheduling.OpenRegScheduling,
        "PythonWrapperCodegen": wrapper.OpenRegWrapperCodegen,
        "CppWrapperCodegen": None,
        "WrapperFxCodegen": None,
    }[name]
