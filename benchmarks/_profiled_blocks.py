"""One timed block of training steps, unprofiled or under torch.profiler.

Shared by the benchmarks that compare profiled against unprofiled steps
(training_step_bench.py, ddp_step_bench.py): the same modes, the same block.
"""

from __future__ import annotations

import gc
import time

MODE_NAMES = ["unprofiled", "cpu", "cpu+device"]


def activities_by_mode() -> dict:
    """The profiler's activities of each mode (None: no profiler)."""
    from torch.profiler import ProfilerActivity

    return {
        "unprofiled": None,
        "cpu": [ProfilerActivity.CPU],
        "cpu+device": [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
    }


def time_block(activities, steps: int, step, **profiler_options) -> tuple[list[float], list[float], float]:
    """(wall seconds per step, CPU seconds per step, profiler exit seconds) of one block.

    The profiler (if any) is entered, one untimed step settles it, `steps` calls of `step` are timed one by one,
    then the profiler exits, timed apart: a trace pays its exit once, not per step. A step's CPU time is what the
    whole process spent in it, every thread included.
    """
    from torch.profiler import profile

    gc.collect()
    gc.disable()  # the collector's pauses would land on random steps
    try:
        prof = profile(activities=activities, **profiler_options) if activities else None
        if prof:
            prof.__enter__()
        step()
        walls, cpus = [], []
        for _ in range(steps):
            wall, cpu = time.perf_counter(), time.process_time()
            step()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        start = time.perf_counter()
        if prof:
            prof.__exit__(None, None, None)
        return walls, cpus, time.perf_counter() - start if prof else 0.0
    finally:
        gc.enable()
