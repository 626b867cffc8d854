"""The demo command, end to end: `python -m torch_openreg demo` in a subprocess, then its traces and output.

One run (tiny model, schedule wait=1 warmup=1 active=2 repeat=2, --check) is
shared by the tests of its outcomes; the failure paths run on their own.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

WAIT, WARMUP, ACTIVE, REPEAT = 1, 1, 2, 2
STEPS = (WAIT + WARMUP + ACTIVE) * REPEAT


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


@dataclass
class DemoRun:
    returncode: int
    stdout: str
    stderr: str
    pid: int
    output: Path

    def describe(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout[-6000:]}\n--- stderr\n{self.stderr[-4000:]}"


def run_demo(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> DemoRun:
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch_openreg", "demo", *args],
        cwd=cwd,
        env=env or _env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        pytest.fail(f"the demo did not finish in {timeout} s\n{stdout[-3000:]}\n{stderr[-3000:]}")
    output = cwd / "traces"
    return DemoRun(proc.returncode, stdout, stderr, proc.pid, output)


STALE_TRACE = "stale_worker.1.pt.trace.json"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> DemoRun:
    cwd = tmp_path_factory.mktemp("demo")
    # A trace left by an earlier run: kept, and neither counted nor checked
    # (it is not valid JSON, so checking it would fail the run).
    (cwd / "traces").mkdir()
    (cwd / "traces" / STALE_TRACE).write_text("{not a trace")
    return run_demo(
        [
            "--size",
            "tiny",
            "--seed",
            "3",
            "-o",
            "traces",
            "--check",
            "--wait",
            str(WAIT),
            "--warmup",
            str(WARMUP),
            "--active",
            str(ACTIVE),
            "--repeat",
            str(REPEAT),
        ],
        cwd,
    )


def written_traces(run: DemoRun) -> list[Path]:
    return sorted(p for p in run.output.iterdir() if p.name not in (STALE_TRACE, "report.html"))


def section(text: str, title: str) -> list[str]:
    """The lines after the line starting with `title`, up to the next blank line."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(title):
            body = []
            for following in lines[i + 1 :]:
                if not following.strip():
                    break
                body.append(following)
            return body
    raise AssertionError(f"no section {title!r} in the output")


def last_cell(row: str) -> str:
    """The last column of a summary table row (columns are two spaces apart; "1.5 ms" is one cell)."""
    return re.split(r"\s{2,}", row.strip())[-1]


def microseconds(cell: str) -> float:
    match = re.fullmatch(r"([\d.]+)(ns|us|ms|s)", cell.strip())
    assert match, f"not a duration: {cell!r}"
    return float(match.group(1)) * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[match.group(2)]


def test_demo_exits_zero(demo):
    assert demo.returncode == 0, demo.describe()


def test_demo_writes_its_report(demo):
    # The run's one-page HTML report (trace/python/openreg_trace/report), beside the traces; tests/report opens it in a browser.
    report = demo.output / "report.html"
    assert re.search(
        r"^Report \(one offline HTML page, open it in any browser\): \S*report\.html$", demo.stdout, re.M
    ), demo.describe()
    assert report.is_file() and report.read_text(encoding="utf-8").startswith("<!doctype html>")


def test_one_trace_per_active_cycle_in_tensorboard_layout(demo):
    traces = written_traces(demo)
    assert (demo.output / STALE_TRACE).exists(), "the demo removed a file it did not write"
    # tensorboard_trace_handler: <dir>/<hostname>_<pid>.<time ns>.pt.trace.json
    pattern = re.compile(rf"{re.escape(socket.gethostname())}_{demo.pid}\.\d+\.pt\.trace\.json")
    assert [p.name for p in traces if not pattern.fullmatch(p.name)] == [], demo.describe()
    assert len(traces) == REPEAT, demo.describe()

    # Each trace holds exactly the active steps of its cycle.
    cycle = WAIT + WARMUP + ACTIVE
    for index, path in enumerate(traces):  # time-stamped names sort in writing order
        events = json.loads(path.read_text())["traceEvents"]
        steps = sorted(
            {
                int(e["name"].split("#")[1])
                for e in events
                if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
            }
        )
        first_active = index * cycle + WAIT + WARMUP
        assert steps == list(range(first_active, first_active + ACTIVE)), (path.name, steps)
        assert any(e.get("cat") == "kernel" for e in events), f"{path.name} has no kernels"


def test_traces_carry_shapes_stacks_and_device_memory(demo):
    """record_shapes, with_stack and profile_memory are on: each leaves its mark in every trace."""
    for path in written_traces(demo):
        events = json.loads(path.read_text())["traceEvents"]
        ops = [e for e in events if e.get("cat") == "cpu_op"]
        assert any(e.get("args", {}).get("Input Dims") for e in ops), f"{path.name}: no input shapes"
        assert any(e.get("cat") == "python_function" for e in events), f"{path.name}: no Python stack"
        memory = [e for e in events if e.get("name") == "[memory]"]
        assert any(e["args"].get("Device Type") not in (None, 0) for e in memory), f"{path.name}: no device memory"


def test_every_trace_passes_check(demo):
    from openreg_trace import open_trace

    traces = written_traces(demo)
    assert traces, demo.describe()
    for path in traces:
        with open_trace(path) as trace:
            result = trace.check(strict=True)
        failed = [c["name"] for c in result["checks"] if c["status"] == "fail"]
        assert result["ok"] and not failed, (path.name, failed)
        # ...over every device event of the trace (counted here independently), and there are some.
        checked = sum(c["complete_events"] for c in result["trace"]["categories"] if c["role"] == "device")
        device = [
            e
            for e in json.loads(path.read_text())["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        ]
        assert checked == len(device) > 0, (path.name, checked, len(device))
    # ...and the demo's own --check said so, once per trace written by this run.
    reported = section(demo.stdout, "Invariant checks")
    assert len(reported) == REPEAT and all(line.split()[0] == "OK" for line in reported), reported


def test_key_averages_has_openreg_device_time(demo):
    lines = section(demo.stdout, "key_averages()")
    header = next(line for line in lines if line.strip().startswith("Name"))
    columns = re.split(r"\s{2,}", header.strip())
    for name in ("Self OPENREG", "Self OPENREG %", "OPENREG total", "OPENREG time avg", "OPENREG Mem"):
        assert name in columns, columns
    self_device = columns.index("Self OPENREG")
    rows = [
        re.split(r"\s{2,}", line.strip())
        for line in lines
        if not line.startswith("-") and line is not header and "time total" not in line
    ]
    op_rows = {r[0]: microseconds(r[self_device]) for r in rows if len(r) == len(columns) and r[0].startswith("aten::")}
    assert op_rows and max(op_rows.values()) > 0, op_rows
    total = re.search(r"Self OPENREG time total: (\S+)", demo.stdout)
    assert total and microseconds(total.group(1)) > 0, demo.describe()


def test_summary_of_the_last_trace(demo):
    from torch_openreg import _C

    traces = written_traces(demo)
    assert f"Trace traces/{traces[-1].name}:" in demo.stdout, demo.describe()

    # Top kernels: names of kernels the openreg backend launches (base name + dtype/layout suffix).
    # A path may name several kernels ("memcpy / copy_strided / copy_<from>_to_<to>", "a + b").
    names = (name.strip() for _, _, kernels in _C._op_paths() for name in re.split(r"[/+]", kernels))
    bases = {name for name in names if name and " " not in name}
    events = json.loads(traces[-1].read_text())["traceEvents"]
    kernels_in_trace = {e["name"] for e in events if e.get("cat") == "kernel"}
    top = [last_cell(line) for line in section(demo.stdout, "Top kernels by device time")[1:]]
    kernel_rows = [name for name in top if not name.endswith("]")]  # copies and memsets carry [category]
    assert kernel_rows, top
    for name in kernel_rows:
        assert name in kernels_in_trace, name
        assert any(name == b or name.startswith(b + "_") for b in bases), f"{name} is not an openreg kernel"

    ops = [last_cell(line) for line in section(demo.stdout, "Device time per op")[1:]]
    assert ops and all(op.startswith("aten::") for op in ops[:3]), ops

    linked = re.search(r"Device events linked to an op: ([\d,]+) of ([\d,]+) \(([\d.]+)%", demo.stdout)
    assert linked, demo.describe()
    assert int(linked.group(2).replace(",", "")) > 0 and float(linked.group(3)) > 90.0, linked.group(0)

    streams = section(demo.stdout, "Device utilisation per stream")[1:]
    default_stream = next(line.split() for line in streams if line.split()[:2] == ["0", "1"])
    assert float(default_stream[-1].rstrip("%")) > 0, streams
    # The batches are copied on a second stream, which has its own row.
    assert any(line.split()[:2] == ["0", "2"] for line in streams), streams

    gaps = section(demo.stdout, "Largest idle gaps on the device")
    assert gaps and "device 0" in gaps[0] and "host" in "\n".join(gaps), gaps

    peak = re.search(r"PrivateUse1:0\s+([\d.]+) (B|KiB|MiB|GiB) at \+\S+ \S+, reached in (\S+)", demo.stdout)
    assert peak and float(peak.group(1)) > 0 and peak.group(3).startswith("aten::"), demo.describe()


def test_training_and_progress(demo):
    loss = re.search(rf"loss ([\d.]+) -> ([\d.]+) over {STEPS} steps", demo.stdout)
    assert loss, demo.describe()
    first, last = float(loss.group(1)), float(loss.group(2))
    assert math.isfinite(first) and math.isfinite(last)
    # A cross-entropy over the text's characters starts near ln(vocabulary) with GPT-2's initialisation.
    assert 2.0 < first < 6.0, first
    assert last < first, f"the demo did not learn: loss {first} -> {last}"
    bars = [line for line in demo.stderr.splitlines() if line.startswith("training [")]
    assert bars and f"{STEPS}/{STEPS}" in bars[-1] and f"{REPEAT} traces written" in bars[-1], demo.stderr[-2000:]


def test_missing_device_is_a_clear_error(tmp_path):
    run = run_demo(["--size", "tiny", "-o", "traces"], tmp_path, env=_env(OPENREG_DEVICE_COUNT="0"))
    assert run.returncode == 3, run.describe()
    assert "error:" in run.stderr and "no device" in run.stderr, run.stderr
    assert not (tmp_path / "traces").exists()


def test_missing_trace_library_is_a_clear_error_before_training(tmp_path):
    missing = tmp_path / "nowhere" / "libopenreg_trace.so"
    run = run_demo(["--size", "tiny", "-o", "traces"], tmp_path, env=_env(OPENREG_TRACE_LIB=str(missing)))
    assert run.returncode == 3, run.describe()
    assert "OPENREG_TRACE_LIB" in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert "training [" not in run.stderr


def test_steps_that_reach_no_active_cycle_fail(tmp_path):
    run = run_demo(["--size", "tiny", "-o", "traces", "--steps", "1"], tmp_path)
    assert run.returncode == 1, run.describe()
    assert "error: no trace was written" in run.stderr
    assert list((tmp_path / "traces").iterdir()) == []


def test_a_failed_check_exits_one(tmp_path):
    """A device record on stream 0 (which the activity API forbids) from a replayed activity library
    reaches the trace; --check reports device_args failing and the demo exits 1."""
    replay_dir = Path(os.environ.get("OPENREG_REPLAY_DIR", REPO / "build" / "py" / "tests" / "activity_replay"))
    library = replay_dir / "libopenreg_activity_replay.so"
    assert library.exists(), f"{library} is not built (scripts/bootstrap.sh builds it)"
    scenario = tmp_path / "scenario.txt"
    scenario.write_text("kernel device=0 stream=0 start_us=1000 dur_us=40 name=on_stream_zero\n")
    run = run_demo(
        ["--size", "tiny", "-o", "traces", "--check", "--wait", "0", "--warmup", "0", "--active", "1", "--repeat", "1"],
        tmp_path,
        env=_env(OPENREG_ACTIVITY_LIBRARY=str(library), OPENREG_REPLAY_SCENARIO=str(scenario)),
    )
    assert run.returncode == 1, run.describe()
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    traces = written_traces(run)
    assert len(traces) == 1
    from openreg_trace import open_trace

    with open_trace(traces[0]) as trace:
        result = trace.check(strict=True)  # as demo --check runs it: stream 0 only warns otherwise
    failed = [c["name"] for c in result["checks"] if c["status"] == "fail"]
    # The replayed launch row sits at the scenario's time, wherever that falls among the demo's ops: it
    # may cross one (strict host_rows_nest) or fall between them, which links the kernel to no op
    # (device_events_linked), depending on where the window opened. Only device_args must fail.
    timing_dependent = {"host_rows_nest", "device_events_linked"}
    assert "device_args" in failed and set(failed) <= {"device_args"} | timing_dependent, result


def test_bad_arguments_are_usage_errors(tmp_path):
    for args in (["--repeat", "0"], ["--active", "-1"], ["--size", "huge"]):
        run = run_demo(args, tmp_path)
        assert run.returncode == 2 and "usage:" in run.stderr, (args, run.describe())


def test_progress_bar_outside_a_terminal_writes_lines_and_the_final_state_once():
    from torch_openreg.demo.progress import ProgressBar

    stream = io.StringIO()
    with ProgressBar(4, "work", stream=stream, min_interval_s=3600) as bar:
        for done in range(1, 5):
            bar.update(done, note=f"step {done}")
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("work [....") and "0/4" in lines[0]
    assert len(lines) == 2 and "4/4" in lines[1] and "step 4" in lines[1] and "#" * 28 in lines[1], lines


def test_console_script_is_declared():
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^openreg = "torch_openreg.__main__:main"$', text, re.M)


def test_installed_openreg_command_runs_the_demo(tmp_path):
    """The `openreg` console script pip installed beside this interpreter (pyproject's entry point)."""
    command = Path(sys.executable).parent / "openreg"
    assert command.exists(), f"{command} is not installed: pip install -e . installs it"
    proc = subprocess.run(
        [
            str(command),
            "demo",
            "--size",
            "tiny",
            "-o",
            "traces",
            "--wait",
            "0",
            "--warmup",
            "0",
            "--active",
            "1",
            "--repeat",
            "1",
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"loss [\d.]+ -> [\d.]+ over 1 steps", proc.stdout), proc.stdout[-3000:]
    assert len(list((tmp_path / "traces").glob("*.pt.trace.json"))) == 1
    help_text = subprocess.run([str(command), "--help"], capture_output=True, text=True, timeout=120, env=_env())
    assert help_text.returncode == 0 and "demo" in help_text.stdout and "check" in help_text.stdout


@pytest.mark.parametrize(
    "size, shape",
    [
        ("small", "(2 blocks, width 64, 4 heads, context 32, batch 8,"),
        ("medium", "(4 blocks, width 128, 4 heads, context 64, batch 16,"),
    ],
)
def test_model_sizes(tmp_path, size, shape):
    run = run_demo(
        ["--size", size, "-o", "traces", "--wait", "0", "--warmup", "0", "--active", "1", "--repeat", "1"], tmp_path
    )
    assert run.returncode == 0, run.describe()
    assert shape in run.stdout.splitlines()[0], run.stdout.splitlines()[0]
    assert len(list((tmp_path / "traces").glob("*.pt.trace.json"))) == 1


def test_missing_profiler_plugin_is_a_clear_error_before_training(tmp_path):
    """A copy of the package whose lib/ lacks libopenreg_profiler.so: exit 3, naming the plugin."""
    package = REPO / "torch_openreg"
    copy = tmp_path / "site" / "torch_openreg"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("lib", "__pycache__"))
    (copy / "lib").mkdir()
    for lib in (package / "lib").iterdir():
        if lib.name != "libopenreg_profiler.so":
            (copy / "lib" / lib.name).symlink_to(lib.resolve())
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "site"), env["PYTHONPATH"]])
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    run = run_demo(["--size", "tiny", "-o", "traces"], tmp_path, env=env)
    assert run.returncode == 3, run.describe()
    assert "libopenreg_profiler.so" in run.stderr and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert "training [" not in run.stderr


# --- README.md (top level) ----------------------------------------------------------------------------------


def readme_section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_readme_opens_with_the_two_commands():
    readme = (REPO / "README.md").read_text()
    first_block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()]
    assert commands == ["scripts/demo.sh", "scripts/test.sh"], commands
    assert readme.index("```bash") < readme.index("\n## ")
    for script in commands:
        assert os.access(REPO / script, os.X_OK), script
    assert re.search(r"-m torch_openreg demo", (REPO / "scripts/demo.sh").read_text())
    assert re.search(r"pytest .*tests", (REPO / "scripts/test.sh").read_text())


def test_readme_usage_examples_are_the_ones_the_profiler_tests_run():
    # tests/profiler/test_openreg_backend.py::test_readme_examples runs the Usage
    # blocks of csrc/profiler/README.md as written; the top-level README shows
    # the same text, so running them once covers both.
    ours = python_blocks(readme_section((REPO / "README.md").read_text(), "Usage"))
    profiler_readme = (REPO / "csrc" / "profiler" / "README.md").read_text()
    theirs = python_blocks(readme_section(profiler_readme, "Usage"))
    assert len(ours) == 3
    assert ours == theirs
    runner = (REPO / "tests" / "profiler" / "test_openreg_backend.py").read_text()
    assert "def test_readme_examples" in runner and '"csrc" / "profiler" / "README.md"' in runner
    examples = "\n".join(ours)
    assert "ProfilerActivity.PrivateUse1" in examples
    assert 'use_device="openreg"' in examples
    assert "on_trace_ready=" in examples and "schedule(" in examples


def test_readme_links_resolve():
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [link.split("#")[0] for link in links if not re.match(r"[a-z]+://", link)]
    assert local
    missing = [link for link in local if not (REPO / link).exists()]
    assert missing == []
    for folder_readme in ("runtime/README.md", "csrc/profiler/README.md", "trace/README.md", "benchmarks/README.md"):
        assert f"]({folder_readme})" in readme, folder_readme


def test_readme_porting_section_matches_what_the_plugin_resolves():
    """Required = what the plugin needs to show a device lane; optional = what it can do without."""
    resolver = (REPO / "csrc" / "profiler" / "activity_api.cpp").read_text()
    resolved = re.findall(r'resolve\(handle_, "(\w+)", fn_\.\w+, (m|nullptr)\);', resolver)
    required = {name for name, missing in resolved if missing == "m"}
    optional = {name for name, missing in resolved if missing == "nullptr"}
    assert required and optional

    section = readme_section((REPO / "README.md").read_text(), "Porting the plugin to real hardware")
    required_part = section.split("**Required.**", 1)[1].split("**Optional**", 1)[0]
    optional_part = section.split("**Optional**", 1)[1].split("**Records.**", 1)[0]
    name = r"`(or[A-Z]\w+)`"
    table_rows = [line for line in required_part.splitlines() if line.startswith("| ") and "`or" in line]
    readme_required = {n for row in table_rows for n in re.findall(name, row.split("|")[2])}
    assert readme_required == required
    assert set(re.findall(name, optional_part)) == optional

    headers = (REPO / "runtime/include/openreg/activity.h").read_text() + (
        REPO / "runtime/include/openreg/runtime.h"
    ).read_text()
    for function in required | optional:
        assert re.search(rf"OR_API [^;]*\b{function}\(", headers), function
