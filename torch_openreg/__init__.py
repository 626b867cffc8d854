"""openreg: a simulated, asynchronous accelerator as a PyTorch device.

``import torch`` is enough (through the ``torch.backends`` entry point, see
``_autoload.py``); ``import torch_openreg`` works as well. Either registers,
once per process:

- the PrivateUse1 backend under the name ``openreg`` (``device="openreg"``);
- the device module ``torch.openreg`` (see ``torch_openreg/openreg``);
- ``Tensor.openreg()``, ``Tensor.is_openreg``, ``Module.openreg()`` and the
  storage methods ``torch.load`` needs;
- the profiler plugin, when its library is present.
"""

# Read by _autoload: torch calls it while this module is still importing.
_importing = True

import atexit
import warnings

import torch

from torch_openreg._lib import load_extension

_C = load_extension()

from torch_openreg import openreg  # noqa: E402  (the device module; needs _C)

__all__ = ["openreg"]


def _register() -> None:
    if torch._C._get_privateuse1_backend_name() != "openreg":
        torch.utils.rename_privateuse1_backend("openreg")
    if getattr(torch, "openreg", None) is not openreg:
        torch._register_device_module("openreg", openreg)
    if not hasattr(torch.Tensor, "is_openreg"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )


def _load_profiler() -> None:
    try:
        from torch_openreg import _profiler
    except ImportError as error:
        warnings.warn(f"openreg: profiler integration unavailable: {error}", RuntimeWarning, stacklevel=2)
        return
    _profiler.load_profiler_plugin()


def _synchronize_at_exit() -> None:
    # Queued kernels would otherwise still run while the interpreter tears down.
    if not openreg.is_initialized() or openreg._is_in_bad_fork():
        return
    for index in range(openreg.device_count()):
        try:
            _C._synchronize(index)
        except Exception as error:  # a failed kernel nobody synchronized on
            warnings.warn(f"openreg: device {index} at exit: {error}", RuntimeWarning, stacklevel=1)


_register()
_load_profiler()
atexit.register(_synchronize_at_exit)

_importing = False
