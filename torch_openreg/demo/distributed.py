"""``demo --ranks N``: the demo's GPT trained with DDP on N local processes.

The command spawns N ranks on this machine (127.0.0.1, a port free at start,
``cpu:gloo,openreg:orccl``), rank r on device ``openreg:(r mod devices)``.
Each rank trains ``DistributedDataParallel(model, device_ids=[index])`` on
its own batches under the demo's torch.profiler settings and writes its
traces into the one output folder as ``rank<r>.<ns>.pt.trace.json``. Then the
command prints each rank's results and the summary of every trace written.

Each rank is ``python -m torch_openreg.demo.distributed`` with the options in
the environment; its log and result are in ``<output>/ranks/`` (a subfolder,
so that ``summary``/``check`` of the output folder see only traces). A rank that fails or
outlives the time limit stops the run: the others are killed, none is left
behind.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from .._local_ranks import LocalRanks, exit_with_launcher, free_port, rank_environment
from . import ondemand
from .run import (
    COMPILE_NOTE,
    EXIT_CHECK_FAILED,
    EXIT_OK,
    TRACE_SUFFIXES,
    DemoOptions,
    compile_if_asked,
    load_backend,
    start_demo,
    train_step,
)

BACKEND = "cpu:gloo,openreg:orccl"
_OPTIONS_ENV = "OPENREG_DEMO_OPTIONS"
_RESULT_ENV = "OPENREG_DEMO_RESULT"
# "R:MS[:after],...": rank R spends at least MS ms in one host op (openreg_demo::host_delay) before each step,
# counted from when every other rank has begun that step (a key in the process group's store), so that it arrives
# late at the step's first collective by MS whatever the load on the machine; with ":after", MS ms (sleeping) at
# the end of each step (work after the last collective): the critical path across ranks then runs through the
# late rank into the other (its tests).
_DELAY_ENV = "OPENREG_DEMO_DELAY"
# DDP's default buckets (25 MiB) hold the whole demo model: its one all_reduce
# would start after the backward, with nothing left to hide behind. Buckets of
# a quarter of the model start as their gradients are ready and overlap the
# rest of the backward, as a real model's many buckets do.
BUCKETS_PER_MODEL = 4
# Generous: importing torch and writing traces dominate; steps are short.
_STARTUP_S = 120.0
_PER_STEP_S = 30.0


def _delay_s(rank: int) -> tuple[float, float]:
    """(before, after) each step, in seconds, from OPENREG_DEMO_DELAY."""
    delays = [0.0, 0.0]
    for spec in filter(None, os.environ.get(_DELAY_ENV, "").split(",")):
        who, ms, *where = spec.split(":")
        if int(who) == rank:
            delays[where == ["after"]] += float(ms) / 1000
    return delays[0], delays[1]


_delay_op: Any = None
_delay_wait: Any = None  # what the next host_delay runs before it sleeps
_STEP_KEY = "openreg_demo/step{step}/rank{rank}"


def _host_delay(seconds: float, wait_for: Any = None) -> None:
    """One host op ("openreg_demo::host_delay", a cpu_op in the trace) that first calls `wait_for` (when given),
    then sleeps `seconds`: it holds no core, so the other rank's simulated device is not slowed by it on a small
    machine."""
    global _delay_op, _delay_wait
    import torch

    if _delay_op is None:
        # The schema is given: this module's annotations are strings (from __future__ import annotations).
        @torch.library.custom_op(
            "openreg_demo::host_delay", mutates_args=(), schema="(Tensor x, float seconds) -> Tensor"
        )
        def host_delay(x, seconds):
            if _delay_wait is not None:
                _delay_wait()
            time.sleep(seconds)
            return x.clone()

        _delay_op = host_delay
    _delay_wait = wait_for
    try:
        _delay_op(torch.zeros(1), seconds)
    finally:
        _delay_wait = None


def _step_begins(store: Any, step: int, rank: int, world_size: int, late: bool) -> Any:
    """Says in `store` that this rank has begun `step`; for a late rank, returns the wait for every other rank's
    word (bounded), which its delay runs first."""
    store.set(_STEP_KEY.format(step=step, rank=rank), "1")
    if not late:
        return None
    others = [_STEP_KEY.format(step=step, rank=r) for r in range(world_size) if r != rank]
    return lambda: store.wait(others, datetime.timedelta(seconds=_PER_STEP_S))


def _encode(options: DemoOptions) -> str:
    fields = dataclasses.asdict(options)
    fields["output"] = str(options.output)
    return json.dumps(fields)


def _decode(text: str) -> DemoOptions:
    fields = json.loads(text)
    fields["output"] = Path(fields["output"])
    return DemoOptions(**fields)


def bucket_cap_mb(model: Any) -> float:
    """DDP's bucket_cap_mb that splits `model`'s gradients into BUCKETS_PER_MODEL buckets."""
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return grad_bytes / BUCKETS_PER_MODEL / 2**20


def _rank_folder(options: DemoOptions) -> Path:
    return options.output / "ranks"


def _spawn(ranks: LocalRanks, options: DemoOptions, rank: int, port: int) -> Any:
    env = rank_environment(
        rank,
        options.ranks,
        port,
        **{_OPTIONS_ENV: _encode(options), _RESULT_ENV: str(_rank_folder(options) / f"rank{rank}.json")},
    )
    if options.on_demand:
        env[ondemand.DAEMON_MODE_ENV] = "1"  # Kineto's daemon mode in the ranks: traced from outside
    log = open(_rank_folder(options) / f"rank{rank}.log", "w")
    ranks.spawn([sys.executable, "-m", "torch_openreg.demo.distributed"], env, stdout=log, stderr=subprocess.STDOUT)
    return log


def _wait_all(procs: list[subprocess.Popen], limit_s: float, err: TextIO) -> bool:
    """Waits for every rank; False (after saying which) if one failed or the limit passed."""
    deadline = time.monotonic() + limit_s
    while True:
        codes = [p.poll() for p in procs]
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            print(f"error: rank {failed[0]} exited with status {codes[failed[0]]}", file=err)
            return False
        if all(c == 0 for c in codes):
            return True
        if time.monotonic() > deadline:
            print(f"error: the ranks did not finish within {limit_s:.0f} s", file=err)
            return False
        time.sleep(0.1)


def run_distributed(options: DemoOptions, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The parent: spawns the ranks, waits, reports. Returns the demo's exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    if (code := start_demo(options, _rank_folder(options), err)) is not None:
        return code
    import torch

    devices = torch.openreg.device_count()
    print(
        f"openreg demo: DDP on {options.ranks} local ranks ({BACKEND}) over {devices} openreg devices, "
        f"{options.total_steps} steps each; traces of every rank to {options.output}/",
        file=out,
    )
    if options.compile:
        print(COMPILE_NOTE, file=out)
    out.flush()
    port = free_port()
    logs = []
    started = time.monotonic()
    try:
        with LocalRanks() as ranks:
            for rank in range(options.ranks):
                logs.append(_spawn(ranks, options, rank, port))
            if options.on_demand:
                print("ranks: " + ", ".join(f"rank {r} pid {p.pid}" for r, p in enumerate(ranks.procs)), file=out)
                ondemand.request_hint([p.pid for p in ranks.procs], out)
            ok = _wait_all(ranks.procs, _STARTUP_S + _PER_STEP_S * options.total_steps, err)
            spawned = len(ranks.procs)
    finally:
        for log in logs:
            log.close()
    if not ok:
        for rank in range(spawned):
            path = _rank_folder(options) / f"rank{rank}.log"
            print(f"--- rank {rank} log (last lines of {path}):\n{path.read_text(errors='replace')[-2000:]}", file=err)
        return EXIT_CHECK_FAILED
    results = [json.loads((_rank_folder(options) / f"rank{r}.json").read_text()) for r in range(options.ranks)]
    print(f"all {options.ranks} ranks finished in {time.monotonic() - started:.1f} s\n", file=out)
    _print_results(results, out)
    print(
        f"\nDDP all-reduces the gradients in buckets of about {results[0]['bucket_kib']:.0f} KiB (a "
        f"{BUCKETS_PER_MODEL}th of the model), each as soon as its gradients are computed,\nwhile the "
        "backward computes the rest. In the summary, 'hidden behind compute' is the share of the collectives'"
        "\ndevice time during which a kernel ran on the same device; the 'exposed' rest is communication the "
        "step waited for.",
        file=out,
    )
    if options.on_demand:
        return EXIT_OK  # the traces asked for are where each request said
    return _report(options, [Path(p) for r in results for p in r["traces"]], out)


def _print_results(results: list[dict], out: TextIO) -> None:
    print("rank  device     loss first -> last  traces  collectives  comm device time  busiest collective", file=out)
    for r in results:
        busiest = max(r["collectives"].items(), key=lambda kv: kv[1]["device_us"], default=("-", {}))[0]
        calls = sum(c["calls"] for c in r["collectives"].values())
        comm_ms = sum(c["device_us"] for c in r["collectives"].values()) / 1000
        print(
            f"{r['rank']:>4}  {r['device']:<9}  {r['first_loss']:>7.3f} -> {r['last_loss']:<7.3f}  "
            f"{len(r['traces']):>6}  {calls:>11}  {comm_ms:>13.3f} ms  {busiest}",
            file=out,
        )


def _report(options: DemoOptions, traces: list[Path], out: TextIO) -> int:
    from openreg_trace import commands

    if not traces:
        print(f"error: no trace was written to {options.output}/", file=out)
        return EXIT_CHECK_FAILED
    status = EXIT_OK
    if options.check:
        print("\nInvariant checks of every rank's traces (python -m torch_openreg check):", file=out)
        if commands.check(traces, out=out) != 0:
            status = EXIT_CHECK_FAILED
    print(f"\nSummary of all ranks' traces (python -m torch_openreg summary {options.output}):\n", file=out)
    commands.summary(traces, top=options.top, gaps=options.gaps, out=out)
    from torch_openreg.demo.report import write_demo_report

    write_demo_report(traces, options.output, out)
    return status


def _trace_files(folder: Path) -> set[Path]:
    return {p for p in folder.iterdir() if p.name.endswith(TRACE_SUFFIXES)} if folder.is_dir() else set()


def rank_main() -> int:
    """One rank: DDP training under torch.profiler; writes its result JSON."""
    exit_with_launcher()  # no rank trains on, orphaned, when the demo is killed
    options = _decode(os.environ[_OPTIONS_ENV])
    rank = int(os.environ["RANK"])
    load_backend()
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    from .data import TEXT, CharacterVocabulary, PrefetchingBatches
    from .model import GPT, config_for

    device = torch.device("openreg", rank % torch.openreg.device_count())
    torch.openreg.set_device(device)
    dist.init_process_group(BACKEND)
    torch.manual_seed(options.seed)  # the same initial weights on every rank (DDP also broadcasts them)
    vocabulary = CharacterVocabulary(TEXT)
    config = config_for(options.size, len(vocabulary))
    model = GPT(config).to(device)
    cap_mb = bucket_cap_mb(model)
    model = DistributedDataParallel(model, device_ids=[device.index], bucket_cap_mb=cap_mb)
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.learning_rate, weight_decay=0.1, foreach=True)
    model = compile_if_asked(model, options)
    batches = PrefetchingBatches(
        vocabulary.encode(TEXT), config.batch_size, config.context, device, options.seed + 1000 * rank
    )
    if options.on_demand:
        return _train_on_demand(options, rank, device, cap_mb, lambda: train_step(model, optimizer, batches))
    delay_s = _delay_s(rank)
    store = dist.distributed_c10d._get_default_store() if any(delay_s) else None
    before = _trace_files(options.output)
    handler = tensorboard_trace_handler(str(options.output), worker_name=f"rank{rank}", use_gzip=options.gzip)
    losses = []
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        schedule=schedule(wait=options.wait, warmup=options.warmup, active=options.active, repeat=options.repeat),
        on_trace_ready=handler,
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        acc_events=True,
    ) as prof:
        for step in range(options.total_steps):
            wait = _step_begins(store, step, rank, dist.get_world_size(), bool(delay_s[0])) if store else None
            if delay_s[0]:
                _host_delay(delay_s[0], wait_for=wait)
            losses.append(train_step(model, optimizer, batches))
            if delay_s[1]:
                _host_delay(delay_s[1])
            prof.step()
    collectives = {
        e.key: {"calls": e.count, "device_us": e.device_time_total}
        for e in prof.key_averages()
        if e.key.startswith("openregComm")
    }
    traces = sorted(str(p) for p in _trace_files(options.output) - before if p.name.startswith(f"rank{rank}."))
    dist.destroy_process_group()
    result = {
        "rank": rank,
        "device": str(device),
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "traces": traces,
        "collectives": collectives,
        "bucket_kib": cap_mb * 1024,
    }
    Path(os.environ[_RESULT_ENV]).write_text(json.dumps(result))
    return 0


def _train_on_demand(options: DemoOptions, rank: int, device: Any, cap_mb: float, step: Any) -> int:
    """A rank of --on-demand: trains with no torch.profiler (a daemon's request traces it); writes its result."""
    import torch.distributed as dist

    losses = ondemand.train(step, options.total_steps)
    dist.destroy_process_group()
    result = {
        "rank": rank,
        "device": str(device),
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "traces": [],
        "collectives": {},
        "bucket_kib": cap_mb * 1024,
    }
    Path(os.environ[_RESULT_ENV]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(rank_main())
