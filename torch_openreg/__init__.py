"""openreg: a simulated, asynchronous accelerator as a PyTorch device.

``import torch`` is enough (through the ``torch.backends`` entry point, see
``_autoload.py``); ``import torch_openreg`` works as well. Either registers,
once per process:

- the PrivateUse1 backend under the name ``openreg`` (``device="openreg"``);
- the device module ``torch.openreg`` (see ``torch_openreg/openreg``);
- ``Tensor.openreg()``, ``Tensor.is_openreg``, ``Module.openreg()`` and the
  storage methods ``torch.load`` needs;
- the profiler plugin, when its library is present;
- the c10d backend ``orccl`` for openreg tensors (``torch_openreg/distributed.py``).

When torch or the compiled backend cannot be loaded (not built, a broken or
mismatched library), the import still succeeds, with a ``RuntimeWarning``
naming the cause, and registers nothing: ``backend_error`` holds the cause
(``None`` when the device is registered). The trace tools
(``openreg_trace``, ``python -m torch_openreg summary/check/timeline``)
need neither torch nor the backend; and through autoload, a broken install
would otherwise make every ``import torch`` in the environment fail, as a
missing GPU driver does not.
"""

# Read by _autoload: torch calls it while this module is still importing.
_importing = True

import atexit
import os
import sys
import warnings

__all__ = ["backend_error"]

# Why the device is unavailable; None once it is registered.
backend_error: BaseException | None = None


def _register() -> None:
    if torch._C._get_privateuse1_backend_name() != "openreg":
        torch.utils.rename_privateuse1_backend("openreg")
    if getattr(torch, "openreg", None) is not openreg:
        torch._register_device_module("openreg", openreg)
    if not hasattr(torch.Tensor, "is_openreg"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
    from torch_openreg._inductor import interface_hook  # imports nothing of Dynamo

    interface_hook.install()


def _load_profiler() -> None:
    try:
        from torch_openreg import _profiler
    except ImportError as error:
        warnings.warn(f"openreg: profiler integration unavailable: {error}", RuntimeWarning, stacklevel=2)
        return
    _profiler.load_profiler_plugin()


def _register_distributed() -> None:
    # The device works without it: a failure here is a warning, as for the profiler.
    try:
        from torch_openreg import distributed

        distributed.register()
    except Exception as error:  # noqa: BLE001  (any failure leaves torch.distributed without orccl)
        warnings.warn(f"openreg: torch.distributed backend orccl unavailable: {error}", RuntimeWarning, stacklevel=2)


# How long exit waits for each device's queued work (the runtime's own drain,
# after the interpreter is gone, waits as long again and then drops the rest).
_EXIT_TIMEOUT_MS = 10_000


def _synchronize_at_exit() -> None:
    # Queued kernels would otherwise still run while the interpreter tears
    # down; a stuck one must not hold the exit.
    if not openreg.is_initialized() or openreg._is_in_bad_fork():
        return
    for index in range(openreg.device_count()):
        try:
            if not _C._synchronize_with_timeout(index, _EXIT_TIMEOUT_MS):
                warnings.warn(
                    f"openreg: device {index} still busy at exit after {_EXIT_TIMEOUT_MS} ms; "
                    "not waiting for it any longer",
                    RuntimeWarning,
                    stacklevel=1,
                )
        except Exception as error:  # a failed kernel nobody synchronized on
            warnings.warn(f"openreg: device {index} at exit: {error}", RuntimeWarning, stacklevel=1)


# `python -m torch_openreg summary|check|...` (or the `openreg` script) imports this
# package on its way to __main__; the trace tools' commands read trace or snapshot
# files only, so torch is not imported for them (it costs most of their run time).
# While -m locates __main__, sys.argv[0] is "-m".
def _trace_command_only() -> bool:
    if "torch" in sys.modules or len(sys.argv) < 2:
        return False
    if sys.argv[0] != "-m" and os.path.basename(sys.argv[0]) != "openreg":
        return False
    try:
        from openreg_trace.cli import COMMANDS
    except ImportError:  # the tools package is missing: __main__ says so
        return False
    return sys.argv[1] in COMMANDS


def _load_backend() -> None:
    global backend_error, _C, openreg, torch
    try:
        import torch

        from torch_openreg._lib import load_extension

        _C = load_extension()

        from torch_openreg import openreg  # the device module; needs _C
    except (ImportError, OSError, RuntimeError) as error:
        # ImportError: not built, or a library that fails to load; RuntimeError:
        # torch's own import failed (its autoload of a broken backend).
        backend_error = error
        warnings.warn(
            f"openreg: the device is unavailable ({type(error).__name__}: {error}); only the trace tools work. "
            "Build the backend with `pip install --no-build-isolation -e .`",
            RuntimeWarning,
            stacklevel=3,
        )
    else:
        __all__.append("openreg")
        _register()
        # Before the profiler's exit hook (atexit runs the last registered
        # first): an on-demand trace in progress ends before this last sync.
        atexit.register(_synchronize_at_exit)
        _load_profiler()
        _register_distributed()


if _trace_command_only():
    backend_error = RuntimeError("not loaded: a trace command needs neither torch nor the device")
else:
    _load_backend()

_importing = False
