"""Teaches the installed HolisticTraceAnalysis (HTA) openreg's traces, without renaming anything in them.

    from openreg_trace import hta as openreg_hta
    from hta.trace_analysis import TraceAnalysis

    openreg_hta.teach()  # once per process, before TraceAnalysis(...); calling it again does nothing
    analysis = TraceAnalysis(trace_dir="traces", include_last_profiler_step=True)  # every step, as summary
    analysis.get_comm_comp_overlap(visualize=False)
    # The step by name: HTA also counts the device rows' ProfilerStep annotations as instances.
    graph, ok = analysis.critical_path_analysis(rank=0, annotation="ProfilerStep#2", instance_id=0)
    openreg_hta.forget()  # puts HTA back as it was (tests do)

HTA recognises a backend by the names CUDA, HIP and MTIA write. openreg writes its own (a trace must not claim a
device it was not recorded on), so HTA reads an openreg trace as one without launches, without communication and
without synchronisation. ``teach()`` tells HTA what openreg's rows are, changing only HTA's module-level tables,
patterns and options, and wrapping a few of its functions at run time; no file of HTA's is changed:

========================================  ===================================================================
what openreg writes                       what HTA is taught (0.6.1)
========================================  ===================================================================
host runtime rows, category               ``TraceSymbolTable.get_operator_or_cuda_runtime_mask`` also takes
``privateuse1_runtime``                   them: they become nodes of the critical-path graph;
                                          ``DEVICE_RUNTIME_CATEGORY_PATTERN`` and
                                          ``CPU_AND_GPU_EVENTS_CATEGORY_PATTERN`` name the category.
launches ``orLaunchKernel``,              ``get_runtime_launch_events_mask`` (queue length, critical path),
``orLaunchKernelEx``,                     ``KERNEL_LAUNCH_CATEGORY_PATTERN`` (aten-op kernels and launch
``orLaunchCollective``,                   delay) and the launch statistics, which look the CUDA names up one
``orMemcpyAsync``, ``orMemsetAsync``      by one: during that call only, each CUDA name absent from the trace
                                          finds its openreg counterpart (``LAUNCH_STATS_SLOTS``).
collectives ``openregComm_*``             ``CommunicateKernelGroupingPattern`` and ``ComputeKernelGroupingPattern``
                                          (kernel breakdown, overlap); the straggler metric (which keeps
                                          names that ``startswith("ncclKernel")``) sees them as NCCL kernels.
``orEventRecord``, ``orStreamWaitEvent``  found where the critical path looks up ``cudaEventRecord`` and
                                          ``cudaStreamWaitEvent`` (the sync-edge builders, only while they run).
``orDeviceSynchronize``,                  ``CPGraph.BLOCKING_SYNC_CALLS``.
``orStreamSynchronize``,
``orEventSynchronize``, ``orMemcpy``,
``orMemcpyAsync``
per-kernel metric ranges                 after HTA parses a trace, their rows get correlation -1: HTA would take
(``cuda_profiler_range`` with the         each for a second launch of its kernel (launch statistics, idle time
kernel's ``correlation``)                 breakdown, critical path)
Inductor's launch op (``cpu_op`` with     after HTA parses a trace (``hta.common.trace.parse_trace_dataframe``),
a ``stream`` arg, with record_shapes)     ``cpu_op`` rows get stream -1: HTA takes any row with a stream for a
                                          kernel and would count the op's host time as compute (on CUDA too).
sub-microsecond device rows               ``HTAEnvOptions.set_disable_ns_rounding(True)`` (the option of
(ns timestamps)                           ``HTA_DISABLE_NS_ROUNDING=1``): HTA would ceil starts and floor ends,
                                          giving such rows negative durations.
========================================  ===================================================================

The sync rows (``cuda_sync``: "Stream Wait Event", "Event Sync", "Stream Sync", "Context Sync" with
``wait_on_stream`` and ``wait_on_cuda_event_record_corr_id``) are Kineto's schema and need no teaching.

Supported versions: ``SUPPORTED`` (traceinsight 0.6.1, the maintained line; HolisticTraceAnalysis 0.5.0, where
the communication patterns are the regular expressions ``NCCL_KERNEL_RE`` and ``NCCL_COMPUTE_KERNEL_RE`` of
``hta.utils.utils``, the rounding switch is read from the environment and the launch mask is a query string).
Any other version raises ``RuntimeError``: HTA's internals change between releases, and a teaching that silently
missed one of them would give wrong numbers.

Teaching is process-wide and also applies to CUDA, ROCm and MTIA traces read in the same process: their names are
left as they were, but their timestamps keep nanoseconds (no rounding; under 0.5.0 through the environment
variable, which child processes inherit) and their Inductor launch ops stay host ops. Traces HTA parsed before
``teach()`` keep what parsing decided: ``teach()`` warns (RuntimeWarning) when it finds such a trace. What cannot
be taught without editing HTA's source is listed in README.md, section "HolisticTraceAnalysis".

This module imports neither torch nor HTA until ``teach()`` runs.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import re
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "BLOCKING_CALLS",
    "COMM_KERNEL_RE",
    "LAUNCH_CALLS",
    "LAUNCH_STATS_SLOTS",
    "RUNTIME_CATEGORY",
    "SUPPORTED",
    "forget",
    "hta_version",
    "is_taught",
    "teach",
]

# What openreg writes (runtime/src/activity/recorder.cpp, csrc/profiler, csrc/distributed).
RUNTIME_CATEGORY = "privateuse1_runtime"
KERNEL_LAUNCHES = ("orLaunchKernel", "orLaunchKernelEx", "orLaunchCollective")
MEMORY_LAUNCHES = ("orMemcpyAsync", "orMemsetAsync")
LAUNCH_CALLS = KERNEL_LAUNCHES + MEMORY_LAUNCHES
EVENT_RECORD = "orEventRecord"
STREAM_WAIT_EVENT = "orStreamWaitEvent"
# As CUDA's in CPGraph.BLOCKING_SYNC_CALLS: calls during which the host may wait for the device.
BLOCKING_CALLS = ("orDeviceSynchronize", "orStreamSynchronize", "orEventSynchronize", "orMemcpy", "orMemcpyAsync")
COMM_KERNEL_PREFIX = "openregComm_"
COMM_KERNEL_RE = r"^openregComm_"
LAUNCH_KERNEL_RE = r"^orLaunch(Kernel|KernelEx|Collective)$"
# HTA's launch statistics look up these CUDA/MTIA names one by one; each slot takes one openreg call.
LAUNCH_STATS_SLOTS = {
    "cudaLaunchKernel": "orLaunchKernel",
    "cudaLaunchKernelExC": "orLaunchKernelEx",
    "runFunction - job_prep_and_submit_for_execution": "orLaunchCollective",
    "cudaMemcpyAsync": "orMemcpyAsync",
    "cudaMemsetAsync": "orMemsetAsync",
}
# The critical path's sync-edge builders look these up.
SYNC_LOOKUPS = {"cudaEventRecord": EVENT_RECORD, "cudaStreamWaitEvent": STREAM_WAIT_EVENT}

SUPPORTED = ("0.6.1", "0.5.0")
_taught: str | None = None
_MARK = "_openreg_taught"
_undo: list[Any] = []  # how to put back each change teach() made, in the order made


def hta_version() -> str:
    """The installed HTA's version (traceinsight or HolisticTraceAnalysis: both install ``hta``)."""
    import hta.version

    # 0.6.1 has __version__; 0.5.0 only __version_tuple__.
    return ".".join(map(str, hta.version.__version_tuple__))


def is_taught() -> bool:
    return _taught is not None


def teach() -> str:
    """Teaches the installed HTA openreg's traces; returns its version. Idempotent.

    Raises RuntimeError, naming the version, when the installed HTA is one this module was not written for.
    """
    global _taught
    version = hta_version()
    if _taught is not None:
        if _taught != version:  # pragma: no cover - another hta imported in the same process
            raise RuntimeError(f"openreg taught HTA {_taught}, but HTA {version} is loaded now")
        return version
    if version not in SUPPORTED:
        raise RuntimeError(
            f"openreg_trace.hta supports HolisticTraceAnalysis {' and '.join(SUPPORTED)}, "
            f"not the installed {version}: its tables and functions may differ; see README.md, "
            "section HolisticTraceAnalysis"
        )
    try:
        if version == "0.6.1":
            _teach_061()
        else:
            _teach_050()
    except BaseException:
        forget()
        raise
    _taught = version
    return version


def forget() -> None:
    """Puts back every table, pattern, option and function teach() changed (tests use it to leave HTA as found)."""
    global _taught
    while _undo:
        _undo.pop()()
    _taught = None


def _set(owner: Any, name: str, value: Any) -> None:
    """setattr, remembered for forget()."""
    old = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, value)
    _undo.append(lambda: setattr(owner, name, old))


# ---------------------------------------------------------------------------------------------------------------
# Helpers shared by both versions.


def _wrap(owner: Any, name: str, make: Any) -> None:
    """Replaces owner.name (a function or a classmethod) by make(original) once: the wrapper is marked, so that
    nothing is wrapped twice."""
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    function = original.__func__ if isinstance(original, classmethod) else original
    if getattr(function, _MARK, False):
        return
    wrapper = make(function)
    setattr(wrapper, _MARK, True)
    _set(owner, name, classmethod(wrapper) if isinstance(original, classmethod) else wrapper)


@contextlib.contextmanager
def _lookups(symbol_table: Any, aliases: Mapping[str, str]) -> Iterator[None]:
    """While it lasts, symbol_table.get_sym_id_map() also answers each alias key (a CUDA name absent from the
    trace) with the id of its openreg name. The table itself, its sym_index and every name stay as they are."""
    sym_index = symbol_table.sym_index
    extra = {alias: sym_index[ours] for alias, ours in aliases.items() if alias not in sym_index and ours in sym_index}
    if not extra:
        yield
        return
    view = {**sym_index, **extra}
    had_own = "get_sym_id_map" in vars(symbol_table)
    previous = vars(symbol_table).get("get_sym_id_map")
    symbol_table.get_sym_id_map = lambda: view
    try:
        yield
    finally:
        if had_own:
            symbol_table.get_sym_id_map = previous
        else:
            del symbol_table.get_sym_id_map


def _with_lookups(aliases: Mapping[str, str], table_of: Any) -> Any:
    def make(original: Any) -> Any:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _lookups(table_of(*args, **kwargs), aliases):
                return original(*args, **kwargs)

        return wrapper

    return make


class _CommKernelName(str):
    """An openreg collective's name, unchanged, that answers startswith("ncclKernel") as NCCL's kernels do: HTA's
    straggler metric keeps the symbols that start with it (analyzers/straggler.py) and has no pattern to widen."""

    def startswith(self, prefix: Any, *args: Any) -> bool:  # type: ignore[override]
        if prefix == "ncclKernel" and not args:
            return True
        return str.startswith(self, prefix, *args)


class _StragglerSymbols:
    """A symbol table as the straggler metric reads it: names of collectives as _CommKernelName."""

    def __init__(self, table: Any):
        self._table = table

    def get_sym_table(self) -> list[str]:
        return [_CommKernelName(s) if s.startswith(COMM_KERNEL_PREFIX) else s for s in self._table.get_sym_table()]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def _teach_stragglers(straggler: Any) -> None:
    def make(original: Any) -> Any:
        @functools.wraps(original)
        def wrapper(df: Any, symbol_table: Any, *args: Any, **kwargs: Any) -> Any:
            return original(df, _StragglerSymbols(symbol_table), *args, **kwargs)

        return wrapper

    _wrap(straggler, "_compute_normalized_start_time_of_significant_comm_kernels", make)


def _teach_host_ops(trace_module: Any) -> None:
    """Host ops are never device work. Inductor's launch op (a ``cpu_op``) carries its launch's ``stream`` arg, on
    CUDA as on openreg, when shapes are recorded; HTA takes every row whose stream is not -1 for a kernel and would
    count that op's host time as compute. After HTA parses a trace, its ``cpu_op`` rows get stream -1.
    Nor are metrics launches: openreg's per-kernel metric ranges (``cuda_profiler_range``) carry their kernel's
    ``correlation``, which HTA would pair with the kernel as a second launch; they get correlation -1 (the rows
    stay, for HTA's CUPTI counter analysis)."""

    def make(original: Any) -> Any:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            meta, df, table = original(*args, **kwargs)
            cpu_op = table.sym_index.get("cpu_op")
            if cpu_op is not None and "stream" in df.columns:
                df.loc[df["cat"].eq(cpu_op) & df["stream"].ge(0), "stream"] = -1
            metric = table.sym_index.get(METRIC_CATEGORY)
            if metric is not None and "correlation" in df.columns:
                df.loc[df["cat"].eq(metric), "correlation"] = -1
            return meta, df, table

        return wrapper

    _wrap(trace_module, "parse_trace_dataframe", make)


METRIC_CATEGORY = "cuda_profiler_range"  # metric ranges: openreg's per-kernel metrics, CUPTI's range profiler


def _warn_if_parsed_already(trace_module: Any) -> None:
    """Traces HTA parsed before teach() keep what parsing decided (microsecond rounding, host ops read as kernels);
    the patterns taught apply to them, so their results would be part taught, part not: say so."""
    trace_type = trace_module.Trace  # issubclass on type(o): isinstance would read lazy __class__ attributes
    parsed = sum(1 for o in gc.get_objects() if issubclass(type(o), trace_type) and getattr(o, "is_parsed", False))
    if parsed:
        warnings.warn(
            f"openreg_trace.hta.teach() ran after HTA parsed {parsed} trace(s): those keep microsecond "
            "rounding and untaught rows, and give wrong results; create TraceAnalysis after teach()",
            RuntimeWarning,
            stacklevel=5,  # teach()'s caller (through _teach_<version> and _teach_lookups)
        )


def _launch_ids(table: Any) -> list[int]:
    return [table.sym_index[n] for n in LAUNCH_CALLS if n in table.sym_index]


# ---------------------------------------------------------------------------------------------------------------
# traceinsight 0.6.1


def _widen(pattern: Any, alternative: str) -> None:
    """Adds an alternative to a GroupingPattern in place (every module that imported it sees the change)."""
    if alternative not in pattern.pattern.pattern:
        _set(pattern, "pattern", re.compile(f"{pattern.pattern.pattern}|({alternative})"))


def _extend(calls: list[str], names: tuple[str, ...]) -> None:
    """Appends the names missing from an HTA list in place."""
    before = list(calls)
    calls.extend(n for n in names if n not in calls)
    _undo.append(lambda: calls.__setitem__(slice(None), before))


def _widen_patterns(types: Any) -> None:
    """The communication, compute, launch and runtime patterns of ``hta.common.types`` (both versions)."""
    _widen(types.CommunicateKernelGroupingPattern, COMM_KERNEL_RE)
    _widen(types.ComputeKernelGroupingPattern, COMM_KERNEL_RE)  # an inverse match: collectives are not compute
    _widen(types.KERNEL_LAUNCH_CATEGORY_PATTERN, LAUNCH_KERNEL_RE)
    _widen(types.DEVICE_RUNTIME_CATEGORY_PATTERN, RUNTIME_CATEGORY)
    _widen(types.CPU_AND_GPU_EVENTS_CATEGORY_PATTERN, RUNTIME_CATEGORY)


def _teach_lookups(cpa: Any, cka: Any, straggler: Any) -> None:
    """Blocking calls, the sync-edge and launch-statistics name lookups, stragglers, and host ops that carry a
    stream (both versions)."""
    import hta.common.trace as trace_module

    _warn_if_parsed_already(trace_module)
    _teach_host_ops(trace_module)
    graph = cpa.CPGraph
    _extend(graph.BLOCKING_SYNC_CALLS, BLOCKING_CALLS)
    for method in ("_get_cuda_event_record_df", "_get_cuda_stream_wait_event_df"):
        _wrap(graph, method, _with_lookups(SYNC_LOOKUPS, lambda self, *a, **k: self.symbol_table))
    _wrap(
        cka.CudaKernelAnalysis,
        "cuda_kernel_launch_stats",
        _with_lookups(LAUNCH_STATS_SLOTS, lambda cls, t, *a, **k: t.symbol_table),
    )
    _teach_stragglers(straggler)


def _teach_061() -> None:
    import hta.analyzers.critical_path_analysis as cpa
    import hta.analyzers.cuda_kernel_analysis as cka
    import hta.analyzers.straggler as straggler
    import hta.common.trace_symbol_table as tst
    import hta.common.types as types
    from hta.configs.env_options import HTAEnvOptions

    options = HTAEnvOptions.instance()
    was = options.disable_ns_rounding()
    options.set_disable_ns_rounding(True)
    _undo.append(lambda: options.set_disable_ns_rounding(was))

    _widen_patterns(types)

    table = tst.TraceSymbolTable

    def runtime_mask(original: Any) -> Any:
        @functools.wraps(original)
        def wrapper(self: Any, df: Any) -> Any:
            mask = original(self, df)
            cat = self.sym_index.get(RUNTIME_CATEGORY)
            return mask if cat is None else mask | (df["cat"] == cat)

        return wrapper

    def launch_mask(original: Any) -> Any:
        @functools.wraps(original)
        def wrapper(self: Any, df: Any) -> Any:
            mask = original(self, df)
            ids = _launch_ids(self)
            return mask if not ids else mask | (df["name"].isin(ids) & (df["index_correlation"] > 0))

        return wrapper

    _wrap(table, "get_operator_or_cuda_runtime_mask", runtime_mask)
    _wrap(table, "get_runtime_launch_events_mask", launch_mask)

    _teach_lookups(cpa, cka, straggler)


# ---------------------------------------------------------------------------------------------------------------
# HolisticTraceAnalysis 0.5.0


def _teach_050() -> None:
    import hta.analyzers.critical_path_analysis as cpa
    import hta.analyzers.cuda_kernel_analysis as cka
    import hta.analyzers.straggler as straggler
    import hta.common.trace_symbol_table as tst
    import hta.common.types as types
    import hta.utils.utils as utils

    # 0.5.0 reads the switch from the environment each time it parses.
    was = os.environ.get("HTA_DISABLE_NS_ROUNDING")
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    _undo.append(
        lambda: (
            os.environ.pop("HTA_DISABLE_NS_ROUNDING", None)
            if was is None
            else os.environ.__setitem__("HTA_DISABLE_NS_ROUNDING", was)
        )
    )

    # Collectives are communication and not compute; neither are Stream Wait Event rows (a stream waiting for a
    # collective would read as overlap), which 0.5.0's compute pattern leaves in.
    _set(utils, "NCCL_KERNEL_RE", re.compile(f"{utils.NCCL_KERNEL_RE.pattern}|({COMM_KERNEL_RE})"))
    _set(
        utils,
        "NCCL_COMPUTE_KERNEL_RE",
        re.compile(f"{utils.NCCL_COMPUTE_KERNEL_RE.pattern}|({COMM_KERNEL_RE})|(^Stream Wait Event)"),
    )
    _widen_patterns(types)

    # 0.5.0's symbol table answers with DataFrame.query strings where 0.6.1 answers with masks.
    table = tst.TraceSymbolTable

    def runtime_query(original: Any) -> Any:
        @functools.wraps(original)
        def wrapper(self: Any) -> str:
            query = original(self)
            cat = self.sym_index.get(RUNTIME_CATEGORY)
            return query if cat is None else f"({query} or cat == {cat})"

        return wrapper

    def launch_query(original: Any) -> Any:
        @functools.wraps(original)
        def wrapper(self: Any) -> str:
            query = original(self)
            ids = _launch_ids(self)
            if not ids:
                return query
            ours = " or ".join(f"(name == {i})" for i in ids)
            return f"(({query}) or (({ours}) and (index_correlation > 0)))"

        return wrapper

    _wrap(table, "get_operator_or_cuda_runtime_query", runtime_query)
    _wrap(table, "get_runtime_launch_events_query", launch_query)

    _teach_lookups(cpa, cka, straggler)
