"""``python -m torch_openreg demo``: train a small GPT on openreg under torch.profiler and show what it saw.

    data.py      the embedded text and a batch source that prefetches on a copy stream
    model.py     the GPT-style model (stock torch.nn)
    resnet.py    the ResNet-18-shaped CNN and synthetic images (--model resnet)
    progress.py  the progress bar
    run.py       backend checks, the profiled training loop, key_averages, summary and checks

run() checks the backend, the profiler plugin and the trace library before
any work, and says which one is missing (exit code 3).
"""

from .run import EXIT_BACKEND_UNAVAILABLE, EXIT_CHECK_FAILED, EXIT_OK, BackendUnavailable, DemoOptions, run

__all__ = ["BackendUnavailable", "DemoOptions", "EXIT_BACKEND_UNAVAILABLE", "EXIT_CHECK_FAILED", "EXIT_OK", "run"]
