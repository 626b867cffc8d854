"""Set-up for a test subprocess that profiles real ops on the openreg backend.

The plugin is loaded by ``import torch_openreg`` and finds the runtime by its
default search (the copy the backend loaded); no replay library is involved.
"""

from __future__ import annotations

import json
import os
import time

# Test bodies run after `from backend_harness import *`: torch is part of what they get.
import torch  # noqa: F401

import torch_openreg  # noqa: F401  (registers the backend and loads the plugin)


def now_ns() -> int:
    return time.time_ns()


def write_result(result: dict) -> None:
    with open(os.environ["OPENREG_TEST_RESULT"], "w") as f:
        json.dump(result, f)
