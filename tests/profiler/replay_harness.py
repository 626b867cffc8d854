"""Set-up for a test subprocess that profiles against the replay activity library.

The process looks to torch like one with the openreg backend: PrivateUse1 is
renamed ``openreg``, a minimal ``torch.openreg`` module exists (its
``synchronize`` is what ``profile.__exit__`` calls), and the plugin is loaded
through ``torch_openreg/_profiler.py``. There is no real device: custom ops
(``replaytest::*``) submit device work to the replay library, which stamps it
with the calling thread's correlation ids like a real launch would.

Import it first in a subprocess whose environment sets
OPENREG_ACTIVITY_LIBRARY (what the plugin loads) and OPENREG_REPLAY_CONTROL
(the replay library whose test controls the ops call; usually the same).
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]

KERNEL, MEMCPY, MEMSET, WAIT = 1, 2, 3, 4
HTOD, DTOH, DTOD = 1, 2, 3

torch.utils.rename_privateuse1_backend("openreg")

_spec = importlib.util.spec_from_file_location("openreg_profiler_glue", REPO / "torch_openreg" / "_profiler.py")
profiler_glue = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(profiler_glue)
profiler_glue.load_profiler_plugin(os.environ.get("OPENREG_PROFILER_LIB_DIR"), required=True)

replay = None
if os.environ.get("OPENREG_REPLAY_CONTROL"):
    replay = ctypes.CDLL(os.environ["OPENREG_REPLAY_CONTROL"])
    replay.orReplaySubmit.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_uint64,
        ctypes.c_char_p,
        ctypes.c_uint64,
        ctypes.c_uint64,
        ctypes.c_int,
    ]
    replay.orReplayWindowOpenedAt.restype = ctypes.c_uint64
    replay.orReplayDeviceTime.restype = ctypes.c_uint64
    replay.orReplayDeviceTime.argtypes = [ctypes.c_int, ctypes.c_uint64]
    replay.orReplayScenarioError.restype = ctypes.c_char_p


def submit(
    kind: int,
    device: int = 0,
    stream: int = 1,
    name: str = "replay_kernel",
    nbytes: int = 4096,
    duration_ns: int = 20_000,
    copy_kind: int = HTOD,
) -> None:
    rc = replay.orReplaySubmit(kind, device, stream, name.encode(), nbytes, duration_ns, copy_kind)
    if rc != 0:
        raise RuntimeError(f"orReplaySubmit failed with {rc}")


class _DeviceModule:
    """The slice of a device module torch.profiler touches."""

    @staticmethod
    def synchronize(device=None):
        if replay is not None:
            replay.orReplaySynchronize()

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def current_device():
        return 0


torch._register_device_module("openreg", _DeviceModule)


# Ops that "launch" device work; torch profiles them like any other op.
@torch.library.custom_op("replaytest::kernels", mutates_args=())
def kernels(x: torch.Tensor, count: int, device: int, stream: int, duration_ns: int) -> torch.Tensor:
    for i in range(count):
        submit(KERNEL, device, stream, f"replay_kernel_{i % 3}", 0, duration_ns)
    return x.clone()


@torch.library.custom_op("replaytest::copies", mutates_args=())
def copies(x: torch.Tensor, count: int, copy_kind: int, stream: int) -> torch.Tensor:
    for _ in range(count):
        submit(MEMCPY, 0, stream, "", x.numel() * x.element_size(), 10_000, copy_kind)
    return x.clone()


@torch.library.custom_op("replaytest::memsets", mutates_args=())
def memsets(x: torch.Tensor, count: int) -> torch.Tensor:
    for _ in range(count):
        submit(MEMSET, 0, 1, "", x.numel() * x.element_size(), 5_000)
    return x.clone()


@torch.library.custom_op("replaytest::wait", mutates_args=())
def wait(x: torch.Tensor, stream: int) -> torch.Tensor:
    submit(WAIT, 0, stream, "", 0, 3_000)
    return x.clone()


def now_ns() -> int:
    return time.time_ns()


def write_result(result: dict) -> None:
    with open(os.environ["OPENREG_TEST_RESULT"], "w") as f:
        json.dump(result, f)
