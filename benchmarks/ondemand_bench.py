"""What on-demand tracing (Kineto's daemon mode, `dyno gputrace`) costs a training step of the demo's model.

Two comparisons, each side by side in one run, in rounds whose order alternates:

1. daemon mode on, no trace asked for, against daemon mode off: the goal is no measurable cost (ratio <= 1.02).
   Daemon mode is chosen when torch loads, so each round starts one process of each, and the two take turns
   at blocks of steps; the "on" one registers with the daemon and polls it at Kineto's default interval, as a
   job under a dynolog daemon does.
2. the step during an on-demand trace (an iteration-based request, the default activities: CPU ops, device
   work, runtime rows) against the same step under torch.profiler.profile(activities=[CPU, PrivateUse1]), in one
   daemon-mode process per round. A step counts when it lies inside the trace's window.

dynolog is in neither Debian nor PyPI: the daemon's end of Kineto's protocol is played by
tests/ondemand/dynolog_daemon.py, as in the tests.

    python benchmarks/ondemand_bench.py [--rounds 7] [--steps 120] [--size medium]   (about 8 minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "ondemand"))
from dynolog_daemon import DaemonEnd, gputrace_config  # noqa: E402

WARMUP_STEPS = 5
BLOCKS = 6  # turns per round of the daemon-mode comparison


# ---------------------------------------------------------------- the job (a child process)


def _job(size: str) -> int:
    """Trains; commands on stdin, one JSON line per answer on stdout."""
    import torch

    import torch_openreg  # noqa: F401
    from torch_openreg.demo.data import TEXT, CharacterVocabulary, PrefetchingBatches
    from torch_openreg.demo.model import GPT, config_for
    from torch_openreg.demo.run import train_step

    sys.path.insert(0, str(HERE))
    from _profiled_blocks import activities_by_mode, time_block

    torch.manual_seed(0)
    vocabulary = CharacterVocabulary(TEXT)
    config = config_for(size, len(vocabulary))
    device = torch.device("openreg", 0)
    model = GPT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, foreach=True)
    batches = PrefetchingBatches(vocabulary.encode(TEXT), config.batch_size, config.context, device, 0)

    def step() -> None:
        train_step(model, optimizer, batches)

    def answer(value) -> None:
        print(json.dumps(value), flush=True)

    for _ in range(WARMUP_STEPS):
        step()
    answer({"pid": os.getpid()})
    for line in sys.stdin:
        command = line.split()
        if command[0] == "steps":  # plain steps, timed
            walls, cpus, _ = time_block(None, int(command[1]), step)
            answer({"walls": walls, "cpus": cpus})
        elif command[0] == "profile":  # under torch.profiler.profile
            walls, cpus, _ = time_block(activities_by_mode()["cpu+device"], int(command[1]), step)
            answer({"walls": walls, "cpus": cpus})
        elif command[0] == "until":  # steps until the file exists: (start, end) epoch ns and CPU seconds of each
            spans = []
            deadline = time.monotonic() + 300
            while not os.path.exists(command[1]) and time.monotonic() < deadline:
                start, cpu = time.time_ns(), time.process_time()
                step()
                spans.append((start, time.time_ns(), time.process_time() - cpu))
            answer({"spans": spans})
        elif command[0] == "stop":
            break
    return 0


# ---------------------------------------------------------------- the parent


class Job:
    def __init__(self, size: str, daemon_mode: bool, poll_s: int | None, folder: Path) -> None:
        env = dict(os.environ)
        env.pop("KINETO_USE_DAEMON", None)
        env.pop("KINETO_IPC_SOCKET_DIR", None)
        if daemon_mode:
            env["KINETO_USE_DAEMON"] = "1"
        if poll_s is not None:
            config = folder / "kineto.conf"
            config.write_text(f"ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS={poll_s}\n")
            env["KINETO_CONFIG"] = str(config)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--job", "--size", size],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.pid = self.ask(None)["pid"]

    def ask(self, command: str | None) -> dict:
        if command:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the job exited ({self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def trace_window_ns(path: Path) -> tuple[int, int]:
    """The on-demand trace's window (Kineto's span), in epoch ns."""
    trace = json.loads(path.read_text())
    base = trace["baseTimeNanoseconds"]
    span = next(e for e in trace["traceEvents"] if e.get("cat") == "Trace" and e["name"].startswith("PyTorch Profiler"))
    start = base + round(span["ts"] * 1000)
    return start, start + round(span["dur"] * 1000)


class Samples:
    """Per-step wall and CPU seconds of one mode, and each round's medians."""

    def __init__(self) -> None:
        self.walls: list[float] = []
        self.cpus: list[float] = []
        self.round_medians: list[tuple[float, float]] = []

    def add(self, walls: list[float], cpus: list[float]) -> None:
        self.walls += walls
        self.cpus += cpus
        self.round_medians.append((statistics.median(walls), statistics.median(cpus)))


def daemon_mode_cost(args, folder: Path, daemon: DaemonEnd) -> tuple[Samples, Samples]:
    """Steps with daemon mode off, and on with no trace asked for: one process of each per round, both
    alive for the round, taking turns at blocks of steps (a drift of the machine's speed hits both)."""
    samples = {False: Samples(), True: Samples()}
    per_block = max(1, args.steps // BLOCKS)
    for r in range(args.rounds):
        jobs = {on: Job(args.size, on, None, folder) for on in (False, True)}
        try:
            daemon.wait_registered(jobs[True].pid, 120)
            walls: dict[bool, list[float]] = {False: [], True: []}
            cpus: dict[bool, list[float]] = {False: [], True: []}
            for b in range(BLOCKS):
                for on in (b % 2 == r % 2, b % 2 != r % 2):
                    result = jobs[on].ask(f"steps {per_block}")
                    walls[on] += result["walls"]
                    cpus[on] += result["cpus"]
        finally:
            for job in jobs.values():
                job.close()
        for on in (False, True):
            samples[on].add(walls[on], cpus[on])
    return samples[False], samples[True]


def traced_against_profiled(args, folder: Path, daemon: DaemonEnd) -> tuple[Samples, Samples]:
    """Steps during an on-demand trace and under profile(), in one daemon-mode process per round."""
    traced, profiled = Samples(), Samples()
    for r in range(args.rounds):
        job = Job(args.size, True, 1, folder)
        try:
            daemon.wait_registered(job.pid, 120)
            for mode in ("profile", "on-demand") if r % 2 == 0 else ("on-demand", "profile"):
                if mode == "profile":
                    result = job.ask(f"profile {args.steps}")
                    profiled.add(result["walls"], result["cpus"])
                    continue
                log_file = folder / f"round{r}.json"
                written = log_file.with_name(f"round{r}_{job.pid}.json")
                daemon.request([job.pid], gputrace_config(str(log_file), iterations=args.steps + 2))
                spans = job.ask(f"until {written}")["spans"]
                time.sleep(0.5)  # Kineto renames the file when it is complete
                start, end = trace_window_ns(written)
                inside = [(e - s, cpu) for s, e, cpu in spans if s >= start and e <= end]
                traced.add([wall / 1e9 for wall, _ in inside], [cpu for _, cpu in inside])
        finally:
            job.close()
    return traced, profiled


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def row(name: str, samples: Samples) -> str:
    walls, cpus = samples.walls, samples.cpus
    return (
        f"{name:<34} {statistics.median(walls) * 1e3:9.3f} {percentile(walls, 0.1) * 1e3:8.3f} "
        f"{percentile(walls, 0.9) * 1e3:8.3f} {statistics.median(cpus) * 1e3:9.3f} {len(walls):6d}"
    )


def ratio_line(name: str, num: Samples, den: Samples) -> tuple[str, float]:
    """The median over rounds of each round's ratio of medians, wall and CPU (a round's modes ran side by side)."""
    per_round = [(a[0] / b[0], a[1] / b[1]) for a, b in zip(num.round_medians, den.round_medians)]
    wall = statistics.median(r[0] for r in per_round)
    cpu = statistics.median(r[1] for r in per_round)
    spread = f"rounds {min(r[0] for r in per_round):.3f}-{max(r[0] for r in per_round):.3f}"
    return f"{name:<28} wall {wall:.3f} ({spread}), CPU {cpu:.3f}", wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--size", default="medium", choices=["tiny", "small", "medium"])
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        return _job(args.size)

    with tempfile.TemporaryDirectory(prefix="ondemand_bench_") as tmp, DaemonEnd() as daemon:
        folder = Path(tmp)
        off, on = daemon_mode_cost(args, folder, daemon)
        traced, profiled = traced_against_profiled(args, folder, daemon)
    load = os.getloadavg()
    print(
        f"demo model '{args.size}', {args.rounds} rounds x {args.steps} timed steps per mode, alternating; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"{'mode':<34} {'wall ms':>9} {'p10 ms':>8} {'p90 ms':>8} {'CPU ms':>9} {'steps':>6}")
    print(row("daemon mode off", off))
    print(row("daemon mode on, no trace", on))
    print(row("under profile(CPU, PrivateUse1)", profiled))
    print(row("during an on-demand trace", traced))
    line, idle = ratio_line("daemon on / off", on, off)
    print(f"{line}; goal <= 1.02: {'met' if idle <= 1.02 else 'NOT met'}")
    print(ratio_line("on-demand / profile()", traced, profiled)[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
