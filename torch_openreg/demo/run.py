"""The demo's steps: load the backend, train under torch.profiler, then report.

Reporting reads the traces that tensorboard_trace_handler wrote, through
libopenreg_trace (openreg_trace): the summary and the checks are the
same ones `python -m torch_openreg summary|check` prints.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from . import ondemand
from .progress import ProgressBar

# Exit codes (also documented in the command's help).
EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_BACKEND_UNAVAILABLE = 3

TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")


@dataclass(frozen=True)
class DemoOptions:
    output: Path = Path("openreg_demo_traces")
    steps: int | None = None  # None: exactly the schedule's cycles
    size: str = "small"
    model: str = "gpt"  # "gpt" or "resnet"
    seed: int = 0
    wait: int = 1
    warmup: int = 1
    active: int = 2
    repeat: int = 2
    gzip: bool = False
    check: bool = False
    top: int = 10
    gaps: int = 5
    learning_rate: float = 3e-3
    ranks: int | None = None  # DDP on this many local processes (demo/distributed.py)
    compile: bool = False  # torch.compile the model (Inductor's C++ kernels, launched on the device)
    on_demand: bool = False  # no torch.profiler: traced from outside (Kineto's daemon mode, demo/ondemand.py)

    @property
    def schedule_steps(self) -> int:
        return (self.wait + self.warmup + self.active) * self.repeat

    @property
    def total_steps(self) -> int:
        if self.steps is not None:
            return self.steps
        return ondemand.STEPS if self.on_demand else self.schedule_steps


class BackendUnavailable(RuntimeError):
    pass


def load_backend() -> None:
    """Everything the demo needs, checked before any work: raises BackendUnavailable saying what is missing."""
    build_hint = "build and install it with scripts/bootstrap.sh (pip install --no-build-isolation --no-deps -e .)"
    try:
        import torch
    except ImportError as error:
        raise BackendUnavailable(f"torch is not installed ({error})") from error
    try:
        import torch_openreg  # noqa: F401  (registers the backend, loads the profiler plugin)
        from torch_openreg import _profiler
    except (ImportError, OSError, RuntimeError) as error:
        raise BackendUnavailable(f"the openreg backend did not load: {error}; {build_hint}") from error
    if not torch.openreg.is_available():
        raise BackendUnavailable(
            "the openreg runtime reports no device (is OPENREG_DEVICE_COUNT set to an invalid value?)"
        )
    try:
        _profiler.load_profiler_plugin(required=True)
    except RuntimeError as error:
        raise BackendUnavailable(f"{error}; {build_hint}") from error
    if torch.profiler.ProfilerActivity.PrivateUse1 not in torch.profiler.supported_activities():
        raise BackendUnavailable("torch.profiler does not offer ProfilerActivity.PrivateUse1 (is Kineto missing?)")
    from openreg_trace import LibraryNotFound, library_path

    try:
        library_path()
    except LibraryNotFound as error:
        raise BackendUnavailable(str(error)) from error


def _profiler_phase(action: Any, step: int, schedule_steps: int) -> str:
    name = getattr(action, "name", "")
    if name == "NONE":
        return "waiting" if step < schedule_steps else "done"
    return {"WARMUP": "warming up", "RECORD": "recording", "RECORD_AND_SAVE": "recording"}.get(name, str(action))


def _trace_files(folder: Path) -> set[Path]:
    if not folder.is_dir():
        return set()
    return {p for p in folder.iterdir() if p.name.endswith(TRACE_SUFFIXES)}


class TraceWriter:
    """tensorboard_trace_handler, remembering which files this run wrote (the folder may hold older ones)."""

    def __init__(self, folder: Path, use_gzip: bool, on_write: Callable[[int], None]):
        import torch.profiler

        self.folder = folder
        self.written: list[Path] = []
        self._on_write = on_write
        worker = f"{socket.gethostname()}_{os.getpid()}"  # the handler's default name, made explicit
        self._handler = torch.profiler.tensorboard_trace_handler(str(folder), worker_name=worker, use_gzip=use_gzip)

    def __call__(self, prof: Any) -> None:
        self._on_write(len(self.written) + 1)
        before = _trace_files(self.folder)
        self._handler(prof)
        self.written.extend(sorted(_trace_files(self.folder) - before))


def train_step(model: Any, optimizer: Any, batches: Any) -> float:
    import torch

    inputs, targets = batches.next()
    loss = model(inputs, targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    batches.prefetch()  # the next batch is drawn and copied while the device runs the backward
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
    optimizer.step()
    return loss.item()  # the host reads the loss, so it waits for the device here, once per step


COMPILE_NOTE = (
    "torch.compile: default Inductor; its C++ kernels are launched on the device's current stream, each inside "
    "a host op of its name, and each kernel's trace event names the model lines and ATen ops it fused; the first "
    "step compiles, outside the profiler's recorded steps"
)


def compile_if_asked(model: Any, options: DemoOptions) -> Any:
    """The model under torch.compile when the demo was asked to compile it (the first step compiles)."""
    if not options.compile:
        return model
    import torch

    return torch.compile(model)


def start_demo(options: DemoOptions, folder: Path, err: TextIO) -> int | None:
    """Loads the backend and makes `folder` (inside the trace folder); the exit code if either fails."""
    try:
        load_backend()
    except BackendUnavailable as error:
        print(f"error: {error}", file=err)
        return EXIT_BACKEND_UNAVAILABLE
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"error: cannot use {options.output} as the trace folder: {error}", file=err)
        return EXIT_USAGE
    return None


def run_single(options: DemoOptions, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The demo in this process (without --ranks)."""
    out = out or sys.stdout
    err = err or sys.stderr
    if options.on_demand and not ondemand.in_daemon_mode():
        print(f"error: {ondemand.daemon_mode_missing()}", file=err)
        return EXIT_USAGE
    if (code := start_demo(options, options.output, err)) is not None:
        return code

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(options.seed)
    device = torch.device("openreg", torch.openreg.current_device())
    if options.model == "resnet":
        model, batches, description = _resnet_workload(options, device)
    else:
        model, batches, description = _gpt_workload(options, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.learning_rate, weight_decay=0.1, foreach=True)
    model = compile_if_asked(model, options)

    steps = options.total_steps
    print(f"{description} on {device} ({torch.openreg.get_device_name(device)}), AdamW, {steps} steps", file=out)
    if options.on_demand:
        ondemand.request_hint([os.getpid()], out)
        losses = ondemand.train(lambda: train_step(model, optimizer, batches), steps, err)
        print(f"\nloss {losses[0]:.3f} -> {losses[-1]:.3f} over {steps} steps", file=out)
        return EXIT_OK
    print(
        f"torch.profiler: activities CPU + PrivateUse1, schedule(wait={options.wait}, warmup={options.warmup}, "
        f"active={options.active}, repeat={options.repeat}), record_shapes, profile_memory, with_stack; "
        f"traces to {options.output}/",
        file=out,
    )
    if options.compile:
        print(COMPILE_NOTE, file=out)
    if steps < options.schedule_steps:
        print(
            f"note: {steps} steps cover only part of the schedule's {options.schedule_steps}; "
            "fewer traces will be written",
            file=out,
        )
    out.flush()

    losses: list[float] = []
    with ProgressBar(steps, "training", stream=err) as bar:
        writer = TraceWriter(options.output, options.gzip, on_write=lambda n: bar.update(note=f"writing trace {n}..."))
        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
            schedule=schedule(wait=options.wait, warmup=options.warmup, active=options.active, repeat=options.repeat),
            on_trace_ready=writer,
            record_shapes=True,
            profile_memory=True,
            with_stack=True,
            acc_events=True,  # key_averages over every recorded cycle, not only the last
        ) as prof:
            for step in range(steps):
                phase = _profiler_phase(prof.current_action, step, options.schedule_steps)
                bar.update(note=f"profiler {phase}" + (", compiling" if options.compile and step == 0 else ""))
                losses.append(train_step(model, optimizer, batches))
                bar.clear()  # Kineto logs a line to stderr when a cycle starts or stops
                prof.step()
                bar.update(step + 1, note=f"loss {losses[-1]:.3f}, {len(writer.written)} traces written")
        bar.update(note=f"loss {losses[-1]:.3f}, {len(writer.written)} traces written")

    print(f"\nloss {losses[0]:.3f} -> {losses[-1]:.3f} over {steps} steps", file=out)
    _print_key_averages(prof, options, out)
    return _report_traces(writer.written, options, out, err)


def _gpt_workload(options: DemoOptions, device: Any) -> tuple[Any, Any, str]:
    from .data import TEXT, CharacterVocabulary, PrefetchingBatches
    from .model import GPT, config_for

    vocabulary = CharacterVocabulary(TEXT)
    config = config_for(options.size, len(vocabulary))
    model = GPT(config).to(device)
    batches = PrefetchingBatches(vocabulary.encode(TEXT), config.batch_size, config.context, device, options.seed)
    description = (
        f"openreg demo: a GPT-style model ({config.layers} blocks, width {config.width}, "
        f"{config.heads} heads, context {config.context}, batch {config.batch_size}, "
        f"{model.parameter_count():,} parameters, {'tied' if config.tied_head else 'untied'} LM head) "
        f"learns a {len(TEXT):,}-character text"
    )
    return model, batches, description


def _resnet_workload(options: DemoOptions, device: Any) -> tuple[Any, Any, str]:
    from .resnet import ResNet, SyntheticImages, config_for

    config = config_for(options.size)
    model = ResNet(config).to(device)
    batches = SyntheticImages(config, device, options.seed)
    description = (
        f"openreg demo: a ResNet-18-shaped network ({model.convolution_count()} convolutions, "
        f"widths {config.width}-{config.width * 8}, batch norm, {model.parameter_count():,} parameters) "
        f"classifies synthetic {config.image}x{config.image} images into {config.classes} classes, "
        f"batch {config.batch_size}"
    )
    return model, batches, description


def _print_key_averages(prof: Any, options: DemoOptions, out: TextIO) -> None:
    print(f"\nkey_averages() of the recorded steps, by device time (top {options.top} rows)", file=out)
    print(
        prof.key_averages().table(sort_by="self_device_time_total", row_limit=options.top, max_name_column_width=40),
        file=out,
    )
    print(
        "Rows named after record_function ranges (ProfilerStep*, Optimizer.step#...) show the device time their "
        "range spans on the stream rows, as CUDA's do; the % columns leave them out.",
        file=out,
    )


def _report_traces(traces: list[Path], options: DemoOptions, out: TextIO, err: TextIO) -> int:
    from openreg_trace import open_trace
    from openreg_trace.format import check_text, size, summary_text

    if not traces:
        print(f"error: no trace was written to {options.output}/ (did the steps reach an active cycle?)", file=err)
        return EXIT_CHECK_FAILED
    print(f"\nTraces written by tensorboard_trace_handler ({len(traces)}, one per active cycle):", file=out)
    for path in traces:
        print(f"  {path}  ({size(path.stat().st_size)})", file=out)

    status = EXIT_OK
    if options.check:
        print("\nInvariant checks (python -m torch_openreg check):", file=out)
        for path in traces:
            with open_trace(path) as trace:
                result = trace.check(strict=True)  # our own traces have none of Kineto's artifacts
            if result["ok"]:
                passed = sum(c["status"] == "pass" for c in result["checks"])
                print(f"  OK      {path.name}: {passed} of {len(result['checks'])} checks pass", file=out)
            else:
                status = EXIT_CHECK_FAILED
                print(f"  FAILED  {path.name}:", file=out)
                print(check_text(result, str(path)), file=out)

    last = traces[-1]
    print(
        f"\nSummary of the last cycle (for every cycle: python -m torch_openreg summary {options.output})\n", file=out
    )
    with open_trace(last) as trace:
        print(summary_text(trace.summary(top=options.top, gaps=options.gaps), str(last), top=options.top), file=out)
    print(
        f"\nOpen the traces in https://ui.perfetto.dev or chrome://tracing; draw one with "
        f"python -m torch_openreg timeline {last} -o timeline.png",
        file=out,
    )
    from torch_openreg.demo.report import write_demo_report

    write_demo_report([last], options.output, out)
    return status
