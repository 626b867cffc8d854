"""What the report's tests share: the command line, and what a trace file says, read with json."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch_openreg", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        start_new_session=True,
    )


REPO = Path(__file__).resolve().parents[2]
# $OPENREG_SHARED_TRACES, else ../shared/traces beside the tree or beside the worktrees' folder (as
# tests/test_trace_verdicts.py finds them).
SHARED = next(
    (
        p
        for p in (
            Path(os.environ.get("OPENREG_SHARED_TRACES", "/nonexistent")),
            REPO.parent / "shared" / "traces",
            REPO.parent.parent / "shared" / "traces",
        )
        if p.is_dir()
    ),
    REPO.parent / "shared" / "traces",
)
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
VIEWS = ("overview", "tables", "timeline", "memory", "ranks")


def read_trace(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def ns(us: float) -> int:
    # Exact for Kineto's microseconds with 3 decimals (floats lose ns at epoch magnitudes).
    return us * 1000 if isinstance(us, int) else round(Decimal(repr(us)) * 1000)


class Expected:
    """What the trace says, read with json: device events, their ops and launches, the memory peak."""

    def __init__(self, path: Path):
        events = read_trace(path)["traceEvents"]
        complete = [e for e in events if e.get("ph") == "X"]
        self.origin = min(ns(e["ts"]) for e in events if "ts" in e and e.get("ph") in ("X", "i", "s", "f"))
        self.device = [e for e in complete if e.get("cat") in DEVICE_CATS]
        self.kernel_names = {e["name"] for e in self.device}
        ops = {}
        for e in complete:
            if e.get("cat") in ("cpu_op", "user_annotation") and "External id" in e.get("args", {}):
                ops.setdefault(e["args"]["External id"], e)
        self.runtime = {
            e["args"]["correlation"]: e
            for e in complete
            if str(e.get("cat", "")).endswith("_runtime") and "correlation" in e.get("args", {})
        }
        self.ops = ops
        peaks = [
            int(e["args"]["Total Allocated"])
            for e in events
            if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) != 0
        ]
        self.memory_peak = max(peaks) if peaks else None

    def op_of(self, kernel: dict) -> str | None:
        ext = kernel.get("args", {}).get("External id")
        if ext in self.ops:
            return self.ops[ext]["name"]
        launch = self.runtime.get(kernel.get("args", {}).get("correlation"))
        if launch and launch.get("args", {}).get("External id") in self.ops:
            return self.ops[launch["args"]["External id"]]["name"]
        return None

    def clickable_kernel(self) -> dict:
        """The longest kernel whose op and launch the trace names."""
        linked = [k for k in self.device if self.op_of(k) and k.get("args", {}).get("correlation") in self.runtime]
        assert linked, "the trace has no kernel linked to an op and a launch"
        return max(linked, key=lambda k: (float(k["dur"]), -float(k["ts"])))
