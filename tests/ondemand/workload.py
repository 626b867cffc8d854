"""A training job to trace on demand: run with KINETO_USE_DAEMON=1, driven by commands on stdin.

Trains a small model on openreg, the same work every step (a host-to-device
copy, kernels, memsets, and the loss read back: a device-to-host copy and a
sync), and prints one line per event on stdout: ``ready PID``, ``step N``,
``profiling``, ``profile ended``, ``profiled PATH STEPS`` (once exported),
``idle``, ``done``. Commands, one per
line, run between steps:

- ``profile SECONDS PATH``: whole steps under torch.profiler.profile (CPU +
  PrivateUse1) for about SECONDS, exported to PATH;
- ``idle SECONDS``: no work at all for SECONDS (the device sits idle);
- ``stop``: exit after the current step.

The optimizer's steps are what Kineto counts in an iteration-based request
(torch's daemon-mode optimizer hook). It exits by itself after
--max-seconds, so a test that lost track of it leaves nothing running.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import threading
import time


def _commands() -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            lines.put(line.split())
        lines.put(["stop"])  # stdin closed: the test is gone

    threading.Thread(target=read, daemon=True).start()
    return lines


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--step-sleep", type=float, default=0.01, help="host time between steps (s)")
    args = parser.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    import torch_openreg  # noqa: F401

    torch.manual_seed(0)
    device = torch.device("openreg")
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    inputs = torch.randn(32, 64)

    def train_step() -> float:
        x = inputs.to(device)
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        optimizer.step()
        return loss.item()

    commands = _commands()
    print(f"ready {os.getpid()}", flush=True)
    deadline = time.monotonic() + args.max_seconds
    step = 0
    while time.monotonic() < deadline:
        try:
            command = commands.get_nowait()
        except queue.Empty:
            command = []
        if command[:1] == ["stop"]:
            break
        if command[:1] == ["idle"]:
            print("idle", flush=True)
            time.sleep(float(command[1]))
            continue
        if command[:1] == ["profile"]:
            seconds, path = float(command[1]), command[2]
            steps = 0
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
                print("profiling", flush=True)
                end = time.monotonic() + seconds
                while steps == 0 or time.monotonic() < end:
                    train_step()
                    steps += 1
                    time.sleep(args.step_sleep)
            print("profile ended", flush=True)
            prof.export_chrome_trace(path)
            step += steps
            print(f"profiled {path} {steps}", flush=True)
            continue
        train_step()
        step += 1
        print(f"step {step}", flush=True)
        time.sleep(args.step_sleep)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
