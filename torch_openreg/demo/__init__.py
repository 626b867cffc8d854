"""``python -m torch_openreg demo``: train a small GPT on openreg under torch.profiler and show what it saw.

    data.py      the embedded text and a batch source that prefetches on a copy stream
    model.py     the GPT-style model (stock torch.nn)
    resnet.py    the ResNet-18-shaped CNN and synthetic images (--model resnet)
    progress.py  the progress bar
    run.py       backend checks, the profiled training loop, key_averages, summary and checks
    distributed.py  --ranks N: the same with DistributedDataParallel on N local processes
    ondemand.py  --on-demand: no torch.profiler in the loop; traced from outside (Kineto's daemon mode)
    report.py    the run's one-page HTML report (openreg_trace.report)

run() checks the backend, the profiler plugin and the trace library before
any work, and says which one is missing (exit code 3).
"""

from typing import TextIO

from .run import EXIT_BACKEND_UNAVAILABLE, EXIT_CHECK_FAILED, EXIT_OK, BackendUnavailable, DemoOptions, run_single

__all__ = ["BackendUnavailable", "DemoOptions", "EXIT_BACKEND_UNAVAILABLE", "EXIT_CHECK_FAILED", "EXIT_OK", "run"]


def run(options: DemoOptions, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The demo: in this process, or with DDP on options.ranks local processes. Returns the exit code."""
    if options.ranks is not None:
        from .distributed import run_distributed

        return run_distributed(options, out, err)
    return run_single(options, out, err)
