"""``torch.openreg.init()`` and processes forked after the device started.

As with CUDA, a process forked after its parent started the device cannot use it (the
runtime's worker threads do not survive ``fork()``): every use raises a RuntimeError that
says so and names the 'spawn' start method, at once, never a hang or a signal. A child
forked before the device started, and a spawned child, use the device normally.

Each scenario runs in a fresh interpreter (a script file, so that 'spawn' can import its
functions); every wait on a child is bounded and a child still alive is killed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from backend_support import REPO

# Imported by every scenario: run a child with bounded waits, and report.
PRELUDE = """
import multiprocessing as mp, os, sys, time
import torch, torch_openreg

REFUSAL = ("forked subprocess", "'spawn'")

def attempt(name, call):
    try:
        call()
    except RuntimeError as error:
        text = str(error)
        return name, "refused" if all(part in text for part in REFUSAL) else "other error: " + text
    except Exception as error:
        return name, f"{type(error).__name__}: {error}"
    return name, "ran"

def run_child(method, target, *args):
    context = mp.get_context(method)
    results = context.Queue()
    child = context.Process(target=target, args=(results, *args))
    child.start()
    try:
        report = results.get(timeout=120)
    except Exception:
        report = "no report (the child hung or died)"
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        child.join(timeout=10)
        report = f"{report}; killed: still alive"
    return report, child.exitcode
"""


def run_scenario(tmp_path, body: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    script = tmp_path / "scenario.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    full_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    full_env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    return subprocess.run([sys.executable, str(script)], env=full_env, capture_output=True, text=True, timeout=400)


def test_init_starts_the_device_once(tmp_path):
    result = run_scenario(
        tmp_path,
        """
        before = torch.openreg.is_initialized()
        torch.openreg.init()
        torch.openreg.init()  # a no-op once started
        print(before, torch.openreg.is_initialized(), torch.openreg._is_in_bad_fork())
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True", "False"]


FORKED_CHILD = """
def child(results, x):
    report = [("initialized", torch.openreg.is_initialized()), ("bad fork", torch.openreg._is_in_bad_fork())]
    for name, call in [
        ("new tensor", lambda: torch.ones(2, device="openreg")),
        ("init", torch.openreg.init),
        ("synchronize", torch.openreg.synchronize),
        ("accelerator.synchronize", torch.accelerator.synchronize),
        ("inherited tensor to host", lambda: x.cpu()),
        ("new stream", torch.openreg.Stream),
        ("event record", lambda: torch.openreg.Event().record()),
    ]:
        report.append(attempt(name, call))
    del x  # the parent's memory: dropping it must neither crash nor touch the device
    results.put(report)
"""


def test_forked_child_is_refused_at_once_and_the_parent_goes_on(tmp_path):
    result = run_scenario(
        tmp_path,
        FORKED_CHILD
        + textwrap.dedent(
            """
        x = torch.randn(256, 256, device="openreg")
        for _ in range(8):
            y = x @ x  # still queued when the child is forked
        report, code = run_child("fork", child, x)
        print(report)
        print("exit", code)
        print("parent", torch.allclose(y.cpu(), x.cpu() @ x.cpu(), atol=1e-3))
        """
        ),
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert eval(lines[0]) == [
        ("initialized", False),
        ("bad fork", True),
        ("new tensor", "refused"),
        ("init", "refused"),
        ("synchronize", "refused"),
        ("accelerator.synchronize", "refused"),
        ("inherited tensor to host", "refused"),
        ("new stream", "refused"),
        ("event record", "refused"),
    ]
    assert lines[1:] == ["exit 0", "parent True"]


def test_forked_child_that_does_not_catch_the_error_exits_with_it(tmp_path):
    result = run_scenario(
        tmp_path,
        """
        def child(results):
            results.put("started")
            torch.openreg.synchronize()  # raises: an uncaught exception ends the child with status 1

        torch.ones(1, device="openreg").sum().item()
        report, code = run_child("fork", child)
        print(report, code)
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["started", "1"]  # an exception, not a signal (negative) or a hang
    # CUDA's words, as PyTorch's own OpenReg test (test_device_poison_fork) asserts them.
    assert (
        "RuntimeError: Cannot re-initialize OpenReg in forked subprocess. To use OpenReg with multiprocessing, "
        "you must use the 'spawn' start method"
    ) in result.stderr


def test_forked_child_exits_without_waiting_for_the_parents_queued_work(tmp_path):
    # The parent's device is held by a gate kernel while the child exits normally (atexit
    # handlers run): the child's copy of the runtime must not wait for that work.
    result = run_scenario(
        tmp_path,
        """
        x = torch.ones(4, device="openreg")
        torch.ops.openreg._wait_gate(x, 7001, 60.0)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)
        for _ in range(1200):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            status = -1
        torch_openreg._C._open_gate(7001)
        print("child", os.waitstatus_to_exitcode(status) if status != -1 else "killed", x.sum().item())
        """,
        env={"OPENREG_EXIT_DRAIN_TIMEOUT_MS": "2000"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["child", "0", "4.0"]
    assert "still busy at exit" not in result.stderr


def test_spawned_child_uses_the_device(tmp_path):
    result = run_scenario(
        tmp_path,
        """
        def child(results, values):
            x = torch.tensor(values, device="openreg")
            results.put((x * 2).sum().item())

        if __name__ == "__main__":
            torch.ones(1, device="openreg").sum().item()  # the parent started the device first
            report, code = run_child("spawn", child, [1.0, 2.0, 3.0])
            print(report, code, torch.tensor([1.0], device="openreg").item())
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["12.0", "0", "1.0"]


def test_child_forked_before_the_device_started_uses_it(tmp_path):
    result = run_scenario(
        tmp_path,
        """
        def child(results):
            x = torch.arange(4.0, device="openreg")
            results.put(((x @ x).item(), torch.openreg._is_in_bad_fork()))

        # The parent only asked how many devices there are (DataLoader workers are often
        # forked at that point); as with CUDA, that does not start the device.
        assert torch.openreg.is_available() and not torch.openreg.is_initialized()
        report, code = run_child("fork", child)
        print(report, code)
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["(14.0,", "False)", "0"]


def test_dataloader_fork_workers_after_the_device_started(tmp_path):
    # Workers forked after the parent used the device do CPU work only; torch seeds them with
    # torch.manual_seed, which skips a device whose module says the process is a bad fork.
    result = run_scenario(
        tmp_path,
        """
        from torch.utils.data import DataLoader, TensorDataset

        x = torch.randn(64, 64, device="openreg")
        (x @ x).sum().item()
        data = TensorDataset(torch.arange(32.0).reshape(16, 2))
        loader = DataLoader(data, batch_size=4, num_workers=2, multiprocessing_context="fork", timeout=60)
        print(sum(batch[0].to("openreg").sum().item() for batch in loader))
        """,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["496.0"]
