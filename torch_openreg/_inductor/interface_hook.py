"""Dynamo's device interface for openreg from the backend's load on, without importing Dynamo.

``torch._dynamo.device_interface.get_interface_for_device("openreg")`` must answer in any
process where the backend is loaded: Dynamo asks it to trace streams and events in compiled
code, Inductor for device properties, users for the device's capabilities. Importing that
module imports ``torch._dynamo`` and ``torch._inductor`` (about 1.6 s on the development VM),
far too much for the backend's load, which runs at every ``import torch``. So the backend
calls :func:`install`: the interface is registered the moment that module finishes loading,
whoever imports it, or at once if it already has.
"""

from __future__ import annotations

import sys
import threading
import warnings

__all__ = ["DYNAMO_MODULE", "install", "register_device_interface"]

DYNAMO_MODULE = "torch._dynamo.device_interface"

_lock = threading.Lock()


def register_device_interface() -> None:
    """Registers openreg's interface with Dynamo, for "openreg" and each "openreg:<index>"."""
    from torch._dynamo.device_interface import register_interface_for_device

    from torch_openreg._inductor.device_interface import OpenRegInterface

    register_interface_for_device("openreg", OpenRegInterface)
    for index in range(OpenRegInterface.device_count()):
        register_interface_for_device(f"openreg:{index}", OpenRegInterface)


class _RegisterAfterLoad:
    """The module's own loader, then the registration, in the importing thread."""

    def __init__(self, loader, finder: _DynamoInterfaceFinder):
        self._loader = loader
        self._finder = finder

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        self._finder.remove()
        try:
            register_device_interface()
        except Exception as error:  # noqa: BLE001  (Dynamo's import must not fail for openreg's sake)
            warnings.warn(
                f"openreg: Dynamo's device interface is not registered: {error}", RuntimeWarning, stacklevel=2
            )

    def __getattr__(self, name):  # get_code, get_source, ... for tools that ask the loader
        return getattr(self._loader, name)


class _DynamoInterfaceFinder:
    """Finds nothing itself: wraps the loader that the other finders find for Dynamo's module."""

    def find_spec(self, fullname, path, target=None):
        if fullname != DYNAMO_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _RegisterAfterLoad(spec.loader, self)
                return spec
        return None

    def remove(self) -> None:
        with _lock:
            if self in sys.meta_path:
                sys.meta_path.remove(self)


def install() -> None:
    """Registers the interface now if Dynamo's module is loaded, else when it is; idempotent."""
    if DYNAMO_MODULE in sys.modules:
        register_device_interface()
        return
    with _lock:
        if not any(isinstance(finder, _DynamoInterfaceFinder) for finder in sys.meta_path):
            sys.meta_path.insert(0, _DynamoInterfaceFinder())
