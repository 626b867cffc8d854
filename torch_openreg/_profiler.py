"""Loads openreg's profiler integration into the process.

``libopenreg_profiler.so`` registers, when loaded:

- the Kineto plugin (``REGISTER_PRIVATEUSE1_PROFILER``), which torch forwards
  to Kineto the first time ``torch.profiler.profile`` runs with
  ``ProfilerActivity.PrivateUse1``; in Kineto's daemon mode
  (``KINETO_USE_DAEMON``, on-demand traces) the plugin hands itself over at
  once;
- the legacy ``ProfilerStubs``, used by
  ``torch.autograd.profiler.profile(use_device="openreg")``.

The plugin finds the device through the activity tracing API at run time:
``OPENREG_ACTIVITY_LIBRARY`` if set, else ``libopenreg.so`` beside it. Without
that library profiling still works, with empty device lanes and a warning.

Loading the plugin also makes torch's post-processing of a trace give openreg's
synchronisation rows no device time (:func:`drop_wait_device_time`): they are in
``prof.events()`` as in the trace, but a wait is not device work.

This module imports nothing of torch_openreg, so tests can load it on its own.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import threading
import warnings
from pathlib import Path

from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

__all__ = [
    "DeviceWaitEvent",
    "PROFILER_LIBRARY_NAME",
    "drop_wait_device_time",
    "end_on_demand_trace_at_exit",
    "load_profiler_plugin",
    "profiler_library_path",
    "toggle_device_collection",
]

PROFILER_LIBRARY_NAME = "libopenreg_profiler.so"

_lock = threading.Lock()
_loaded: ctypes.CDLL | None = None


def profiler_library_path(lib_dir: str | os.PathLike | None = None) -> Path:
    """Where the plugin library is: ``lib_dir``, else the package's ``lib/``."""
    base = Path(lib_dir) if lib_dir is not None else Path(__file__).resolve().parent / "lib"
    return base / PROFILER_LIBRARY_NAME


def _run_lazy_torch_profiler_imports() -> None:
    """Runs, now and outside any trace, the import torch 2.13 does on the first ``record_function``.

    That import (``torch.profiler._cupti_monitor``) inside a ``with_stack`` trace
    is a python_function event named through a pointer into the module's code
    object, which dies with the import: parsing the trace then reads freed
    memory (a wrong name, or UnicodeDecodeError in ``evt.name()``).
    """
    import torch.autograd.profiler

    import_once = getattr(torch.autograd.profiler, "_maybe_cupti_monitor", None)  # absent in other torch versions
    if import_once is not None:
        import_once()  # torch's own cached import: record_function never imports again


def load_profiler_plugin(lib_dir: str | os.PathLike | None = None, *, required: bool = False) -> bool:
    """Loads the plugin once per process; later calls are no-ops.

    Call it after ``import torch`` (the library needs libtorch's symbols), at
    any point before the first trace. Returns True when the plugin is loaded.
    A missing or unloadable library raises ``RuntimeError`` naming the path
    if ``required``, else warns and returns False: the package stays usable,
    only without device lanes in traces.
    """
    global _loaded
    with _lock:
        if _loaded is not None:
            return True
        _run_lazy_torch_profiler_imports()
        path = profiler_library_path(lib_dir)
        try:
            # RTLD_GLOBAL like torch.ops.load_library: its static registrars
            # run now, and torch resolves nothing from it by name.
            _loaded = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            message = (
                f"openreg: cannot load the profiler plugin {path}: {error}. "
                "torch.profiler will show no openreg device activity."
            )
            if required:
                raise RuntimeError(message) from error
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            return False
        _install_collection_toggle()
        _install_wait_rows_without_device_time()
        if os.environ.get("KINETO_USE_DAEMON") is not None:
            atexit.register(end_on_demand_trace_at_exit)
        return True


# How long exit waits for Kineto to write an on-demand trace, past its end.
ON_DEMAND_EXIT_GRACE_MS = 30_000


def end_on_demand_trace_at_exit(grace_ms: int = ON_DEMAND_EXIT_GRACE_MS) -> int:
    """Daemon mode (``KINETO_USE_DAEMON``): ends the on-demand trace in progress as the process exits.

    Kineto then writes it before the exit handlers run: exiting while torch's
    on-demand collection is on crashes torch (a segfault in its exit handlers,
    CPU-only too). A duration-based trace runs to its end, an iteration-based
    one ends now (its remaining iterations hold no work; its metadata says
    ``ended_early_at_exit``). Returns the plugin's code: 0 no trace in
    progress, 1 written, 2 requested but not started (nothing traced), 3 not
    written within ``grace_ms`` of its end; says on stderr what it did.
    """
    if _loaded is None:
        return 0
    end = _loaded.openregProfilerEndOnDemandTrace
    end.argtypes = [ctypes.c_int64]  # ctypes.CDLL lets go of the GIL: a Kineto thread stops torch's collection
    return int(end(grace_ms))


def toggle_device_collection(enable: bool) -> bool:
    """Stops (``False``) or resumes (``True``) recording openreg device work in the running trace.

    Work launched while off is absent from the trace; work launched before
    stays, linked to its op. Returns False when no openreg trace is running
    (nothing to toggle) or the plugin is not loaded.
    """
    if _loaded is None:
        return False
    return bool(_loaded.openregProfilerToggleCollection(ctypes.c_int(1 if enable else 0)))


def _install_collection_toggle() -> None:
    """Lets ``toggle_collection_dynamic`` toggle ``ProfilerActivity.PrivateUse1``.

    torch 2.13 hands the toggle to Kineto for CUDA only and logs that it skips
    any other device; torch.profiler.profile reaches it through
    ``torch.autograd.profiler.profile.toggle_collection_dynamic``, which this
    wraps: PrivateUse1 goes to the plugin, the rest to torch as before.
    """
    import torch.autograd.profiler as autograd_profiler
    from torch.profiler import ProfilerActivity

    original = autograd_profiler.profile.toggle_collection_dynamic
    if getattr(original, "_openreg_toggle", False):
        return

    def toggle_collection_dynamic(self, enabled, activities):
        rest = set(activities)
        if ProfilerActivity.PrivateUse1 in rest:
            rest.discard(ProfilerActivity.PrivateUse1)
            if not toggle_device_collection(enabled):
                warnings.warn(
                    "openreg: toggle_collection_dynamic(PrivateUse1) outside a running openreg trace "
                    "(before its schedule's warm-up, or without ProfilerActivity.PrivateUse1): nothing toggled",
                    RuntimeWarning,
                    stacklevel=2,
                )
        if rest:
            return original(self, enabled, rest)
        return None

    toggle_collection_dynamic._openreg_toggle = True
    toggle_collection_dynamic.__doc__ = original.__doc__
    autograd_profiler.profile.toggle_collection_dynamic = toggle_collection_dynamic


SYNC_ACTIVITY = "cuda_sync"


class DeviceWaitEvent(FunctionEvent):
    """An openreg row where the host or a stream waited: in the event list, but no device time."""

    @property
    def device_time_total(self):
        return 0

    @property
    def self_device_time_total(self):
        return 0


def _is_openreg_wait(event: FunctionEvent) -> bool:
    return event.device_type == DeviceType.PrivateUse1 and event.activity_type == SYNC_ACTIVITY


def _frontend_ops(events: list[FunctionEvent]) -> dict[int, FunctionEvent]:
    """The ops torch appends linked device rows to, by id (as ``_parse_kineto_results`` picks them)."""
    ops: dict[int, FunctionEvent] = {}
    for event in events:
        if event.device_type == DeviceType.CPU and not event.is_async and not event.linked_correlation_id:
            ops.setdefault(event.id, event)
    return ops


def drop_wait_device_time(events: list[FunctionEvent]) -> None:
    """Gives openreg's wait rows in ``events`` no device time, and takes them off the kernels of their op.

    Other devices' rows, CUDA's included, are left as torch made them.
    """
    waits = [event for event in events if _is_openreg_wait(event)]
    if not waits:
        return
    ops = _frontend_ops(events)
    for wait in waits:
        wait.__class__ = DeviceWaitEvent
        op = ops.get(wait.linked_correlation_id) if wait.linked_correlation_id else None
        if op is None:
            continue
        # torch appended (name, device, end - start) of this row to its op.
        appended = (wait.name, wait.device_index, wait.time_range.end - wait.time_range.start)
        for index, kernel in enumerate(op.kernels):
            if tuple(kernel) == appended:
                del op.kernels[index]
                break


def _install_wait_rows_without_device_time() -> None:
    """Wraps torch's profiler post-processing with :func:`drop_wait_device_time`; once per process.

    openreg's synchronisation rows are in ``prof.events()`` as in the trace (the same
    (name, External id) pairs, torch's ``test_profiler_external_id_parity``). torch 2.13
    takes every device-typed event's duration as device time and appends a linked one to
    its op as a kernel (``deviceTypeFromActivity`` types ``CUDA_SYNC`` as the device, and
    nothing looks at the activity type): on CUDA with ``enable_cuda_sync_events`` a
    ``Context Sync`` as long as the kernels it waited for is counted in "Self CUDA time
    total" again, and a ``Stream Sync`` adds its wait to the op that waited. A wait is not
    device work, so for openreg's rows only it is no device time here.
    """
    import torch.autograd.profiler as autograd_profiler

    original = autograd_profiler.profile._parse_kineto_results
    if getattr(original, "_openreg_waits", False):
        return

    @functools.wraps(original)
    def _parse_kineto_results(self, *args, **kwargs):
        events = original(self, *args, **kwargs)
        drop_wait_device_time(events)
        return events

    _parse_kineto_results._openreg_waits = True
    autograd_profiler.profile._parse_kineto_results = _parse_kineto_results
