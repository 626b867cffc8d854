"""The trace tools as a distribution of their own (trace/: `pip install ./trace`, package openreg_trace,
command openreg-trace).

A wheel is built once from the checkout (`pip wheel ./trace`, the pinned build backend fetched by pip as
for any user) and installed into a fresh virtual environment that has no torch. There every command runs
on the real CUDA, ROCm and MTIA traces of ../shared/traces and must print, write and exit exactly as the
in-tree command line (`python -m torch_openreg ...`) does. Also: what the wheel and the sdist hold, that
no module of openreg_trace imports torch or torch_openreg, that `timeline` without matplotlib says what to
install (and with the `plot` extra draws the same image), and that torch_openreg loads the tools'
library, a single copy.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRACE_PROJECT = REPO / "trace"

# $OPENREG_SHARED_TRACES, else ../shared/traces beside the tree or beside the worktrees' folder, as
# tests/test_trace_verdicts.py finds them.
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
TRACES = sorted(p.name.removesuffix(".json.gz") for p in SHARED.glob("*.json.gz"))
# Real traces of each vendor, as ../shared/traces/README.md lists them.
VENDORS = {"cuda_alexnet", "rocm_mi250_train", "mtia_inference"}

# Where a command ran: the report's generation time is the one thing that may differ.
GENERATED = re.compile(r'"generated": "[^"]*"')
# Variables that would make the venv reach the checkout's library or modules.
LEAKS = ("OPENREG_TRACE_LIB", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in LEAKS}


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    files: dict[str, bytes]


@dataclass
class ToolsVenv:
    root: Path
    wheel: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def command(self) -> Path:
        return self.root / "bin" / "openreg-trace"

    def pip(self, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(self.python), "-m", "pip", "--disable-pip-version-check", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=clean_env(),
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done


def run_in(argv: list[str], cwd: Path, outputs: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Result:
    """Runs a command line in `cwd` (empty first); returns what it printed and the files it wrote."""
    cwd.mkdir(parents=True, exist_ok=True)
    for name in outputs:
        (cwd / name).unlink(missing_ok=True)
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    files = {name: (cwd / name).read_bytes() for name in outputs if (cwd / name).exists()}
    return Result(done.returncode, done.stdout, done.stderr, files)


@pytest.fixture(scope="module")
def tools(tmp_path_factory) -> ToolsVenv:
    """The wheel built from the checkout, installed into a fresh venv without torch."""
    if not SHARED.is_dir() or len(TRACES) < 8:
        pytest.fail(f"the shared traces are missing: {SHARED} (set OPENREG_SHARED_TRACES)")
    root = tmp_path_factory.mktemp("trace-package")
    venv.EnvBuilder(clear=True, with_pip=True).create(root / "venv")
    tools = ToolsVenv(root / "venv", Path())
    # As a user would: pip builds in isolation, fetching the pinned build backend (no torch comes along).
    tools.pip("wheel", "-q", "--no-deps", "-w", str(root / "wheels"), str(TRACE_PROJECT), timeout=900)
    (tools.wheel,) = (root / "wheels").glob("openreg_trace-*.whl")
    tools.pip("install", "-q", str(tools.wheel))
    return tools


def in_tree(args: list[str], cwd: Path, outputs: tuple[str, ...] = ()) -> Result:
    return run_in([sys.executable, "-m", "torch_openreg", *args], cwd, outputs)


def installed(tools: ToolsVenv, args: list[str], cwd: Path, outputs: tuple[str, ...] = ()) -> Result:
    return run_in([str(tools.command), *args], cwd, outputs, env=clean_env())


def assert_same(ours: Result, theirs: Result) -> None:
    """The installed command behaved exactly as the in-tree one (the report's generation time aside)."""
    assert (theirs.returncode, theirs.stderr) == (ours.returncode, ours.stderr)
    assert theirs.stdout == ours.stdout
    assert theirs.files.keys() == ours.files.keys()
    for name, data in ours.files.items():
        if name.endswith(".html"):
            expected = GENERATED.sub('"generated": ""', data.decode())
            assert GENERATED.sub('"generated": ""', theirs.files[name].decode()) == expected, name
        else:
            assert theirs.files[name] == data, name


def trace(name: str) -> str:
    return str(SHARED / f"{name}.json.gz")


# ------------------------------------------------------------------------------------------ the installation


def test_the_python_code_needs_no_more_than_3_10():
    """requires-python says 3.10; this machine has 3.11 only, so the code is read for what it needs (vermin)."""
    assert 'requires-python = ">=3.10"' in (TRACE_PROJECT / "pyproject.toml").read_text()
    done = subprocess.run(
        [sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())", "--no-tips", "-t=3.10-",
         "--violations", "--eval-annotations", str(TRACE_PROJECT / "python" / "openreg_trace")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_the_venv_has_no_torch_and_the_tools_own_library(tools):
    code = (
        "import importlib.util, json, openreg_trace, sysconfig\n"
        "print(json.dumps({'torch': importlib.util.find_spec('torch') is not None,\n"
        "  'torch_openreg': importlib.util.find_spec('torch_openreg') is not None,\n"
        "  'library': str(openreg_trace.library_path()), 'site': sysconfig.get_paths()['platlib'],\n"
        "  'version': openreg_trace.version()}))"
    )
    done = subprocess.run(
        [str(tools.python), "-c", code], cwd=tools.root, capture_output=True, text=True, timeout=60, env=clean_env()
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["torch"] is False and found["torch_openreg"] is False
    assert found["library"] == str(Path(found["site"]) / "openreg_trace" / "lib" / "libopenreg_trace.so")
    assert found["version"] == "0.1.0"
    listed = {p["name"] for p in json.loads(tools.pip("list", "--format=json").stdout)}
    assert listed - {"pip", "setuptools"} == {"openreg-trace"}  # what venv brings, and the tools alone


def test_the_wheel_holds_the_package_the_library_and_the_command(tools):
    assert tools.wheel.name == "openreg_trace-0.1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(tools.wheel) as wheel:
        names = wheel.namelist()
        metadata = wheel.read("openreg_trace-0.1.0.dist-info/METADATA").decode()
        entry_points = wheel.read("openreg_trace-0.1.0.dist-info/entry_points.txt").decode()
    assert {n.split("/")[0] for n in names} == {"openreg_trace", "openreg_trace-0.1.0.dist-info"}
    assert "openreg_trace/lib/libopenreg_trace.so" in names
    assert [n for n in names if n.endswith(".so")] == ["openreg_trace/lib/libopenreg_trace.so"]
    checkout = TRACE_PROJECT / "python"
    modules = sorted(str(p.relative_to(checkout)) for p in checkout.rglob("*.py"))
    assert sorted(n for n in names if n.endswith(".py")) == modules
    for asset in ("page.html", "page.css", "page.js", "vendor/chart.min.js", "vendor/chart.js.LICENSE"):
        assert f"openreg_trace/report/{asset}" in names
    assert "Requires-Python: >=3.10" in metadata.splitlines()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert requires == ['Requires-Dist: matplotlib>=3.5; extra == "plot"']
    assert "openreg-trace = openreg_trace.cli:main" in entry_points


def test_the_library_needs_nothing_of_torch_nor_of_the_backend(tools):
    with zipfile.ZipFile(tools.wheel) as wheel:
        library = tools.root.parent / "libopenreg_trace.so"
        library.write_bytes(wheel.read("openreg_trace/lib/libopenreg_trace.so"))
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, timeout=60).stdout
    needed = sorted(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))
    assert needed == ["libc.so.6", "libgcc_s.so.1", "libm.so.6", "libstdc++.so.6", "libz.so.1"]
    exported = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True).stdout
    symbols = {line.split()[-1] for line in exported.splitlines() if " T " in line}
    assert symbols and all(s.startswith("ortrace_") for s in symbols), sorted(symbols)[:10]


def test_no_module_imports_torch_nor_torch_openreg(tools):
    """Every module of openreg_trace, imported: in the venv (where torch cannot load) and here (where it
    could, and an import of it would pass unnoticed but for this check)."""
    code = (
        "import importlib, json, pkgutil, sys, openreg_trace\n"
        "names = [m.name for m in pkgutil.walk_packages(openreg_trace.__path__, 'openreg_trace.')\n"
        "         if not m.name.endswith('__main__')]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(json.dumps({'modules': sorted(names), 'loaded': sorted(m for m in sys.modules\n"
        "  if m.split('.')[0] in ('torch', 'torch_openreg', 'numpy', 'matplotlib', 'hta'))}))"
    )
    results = []
    for python, env in ((tools.python, clean_env()), (Path(sys.executable), None)):
        done = subprocess.run(
            [str(python), "-c", code], cwd=tools.root, capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stderr[-3000:]
        results.append(json.loads(done.stdout))
    venv_result, here = results
    assert venv_result == here
    assert here["loaded"] == []
    expected = {
        "openreg_trace."
        + str(p.relative_to(TRACE_PROJECT / "python" / "openreg_trace").with_suffix("")).replace("/", ".")
        for p in (TRACE_PROJECT / "python" / "openreg_trace").rglob("*.py")
    }
    expected = {n.removesuffix(".__init__") for n in expected} - {"openreg_trace", "openreg_trace.__main__"}
    assert set(here["modules"]) == expected


def test_the_command_names_torch_openreg_skips_torch_for_are_the_parser_s(tools):
    """torch_openreg/__init__.py leaves torch unimported for the commands in cli.COMMANDS: exactly the parser's."""
    from openreg_trace import cli

    (sub,) = (a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert tuple(sub.choices) == cli.COMMANDS
    done = installed(tools, ["--help"], tools.root / "help")
    assert done.returncode == 0 and done.stdout.startswith("usage: openreg-trace [-h]")
    assert "{" + ",".join(cli.COMMANDS) + "}" in done.stdout.split("\n\n")[0]


# ------------------------------------------------------------------------------ every command, both ways


def compare(tools: ToolsVenv, args: list[str], tmp_path: Path, outputs: tuple[str, ...] = ()) -> Result:
    ours = in_tree(args, tmp_path / "in-tree", outputs)
    theirs = installed(tools, args, tmp_path / "installed", outputs)
    assert_same(ours, theirs)
    return ours


# Traces without device rows: the critical path has nothing to follow there (exit 2, the same on both sides).
HOST_ONLY = {"cpu_only", "cuda_cupti_counters"}
# Traces with ProfilerStep ranges: the critical path of the first step by default.
WITH_STEPS = {"cuda_sampled_rank0", "cuda_triton", "rocm_mi250_train"}


@pytest.mark.parametrize("name", TRACES)
def test_summary_check_and_critical_path_print_the_same(tools, tmp_path, name):
    ran = {}
    for key, args in (
        ("summary", ["summary", trace(name)]),
        ("summary json", ["summary", "--json", "--top", "5", trace(name)]),
        ("check", ["check", trace(name)]),
        ("check json", ["check", "--json", "--strict", trace(name)]),
        ("critical path", ["critical-path", trace(name)]),
        ("whole trace json", ["critical-path", "--json", "--whole-trace", trace(name)]),
    ):
        ran[key] = compare(tools, args, tmp_path)
    # The commands did their work (an error on both sides would compare equal too).
    assert ran["summary"].returncode == 0 and ran["summary"].stdout.startswith(f"Trace {trace(name)}: ")
    assert json.loads(ran["summary json"].stdout)["trace"]["events"] > 0
    assert ran["check"].returncode == (1 if name == "mtia_inference" else 0)
    assert json.loads(ran["check json"].stdout)["checks"]
    assert ran["critical path"].returncode == (0 if name in WITH_STEPS else 2)
    assert ran["whole trace json"].returncode == (2 if name in HOST_ONLY else 0)
    if name not in HOST_ONLY:
        assert json.loads(ran["whole trace json"].stdout)["path_ns"] > 0


@pytest.mark.parametrize("name", sorted(VENDORS))
def test_report_writes_the_same_page(tools, tmp_path, name):
    ours = compare(tools, ["report", trace(name), "-o", "report.html"], tmp_path, outputs=("report.html",))
    assert ours.returncode == 0 and ours.stdout.startswith("wrote report.html (")
    assert f"openreg report: {name}.json.gz".encode() in ours.files["report.html"]


def test_the_other_commands_print_the_same(tools, tmp_path):
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for name in ("cuda_sampled_rank0", "cuda_alexnet"):
        (ranks / f"{name}.json.gz").symlink_to(trace(name))
    overlay = ("overlay.json",)
    for args, outputs, status in (
        (["diff", trace("cuda_alexnet"), trace("cuda_sampled_rank0")], (), 0),
        (["diff", "--json", trace("rocm_mi250_train"), trace("cuda_triton")], (), 0),
        (["summary", str(ranks)], (), 0),
        (["check", "--list"], (), 0),
        (["check", "--explain"], (), 0),
        (["critical-path", "--each-step", trace("cuda_sampled_rank0")], (), 0),
        (
            ["critical-path", "--overlay", overlay[0], "--what-if", "kind:kernel=2", trace("cuda_sampled_rank0")],
            overlay,
            0,
        ),
        (["summary", str(tmp_path / "missing.json")], (), 2),
    ):
        ours = compare(tools, args, tmp_path, outputs)
        assert ours.returncode == status, (args, ours.stderr)
    assert json.loads((tmp_path / "in-tree" / "overlay.json").read_text())["traceEvents"]  # written, and compared


def test_memory_reads_a_real_snapshot_the_same(tools, tmp_path):
    """A snapshot the backend wrote (torch.openreg.memory._dump_snapshot), read by both."""
    snapshot = tmp_path / "snapshot.pickle"
    code = (
        "import sys, torch, torch_openreg\n"
        "m = torch.openreg.memory\n"
        "m._record_memory_history(enabled='all', context='all', stacks='python')\n"
        "kept = [torch.empty(1 << 20, device='openreg') for _ in range(3)]\n"
        "del kept[1]\n"
        "m._dump_snapshot(sys.argv[1])\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(snapshot)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = compare(tools, ["memory", str(snapshot)], tmp_path)
    as_json = compare(tools, ["memory", "--json", str(snapshot)], tmp_path)
    assert text.returncode == 0 and as_json.returncode == 0
    device = next(d for d in json.loads(as_json.stdout) if d["device"] == 0)
    # Three float tensors of 1 Mi elements at once, one freed before the snapshot.
    assert (device["peak"]["bytes"], device["allocated"]) == (3 * (4 << 20), 2 * (4 << 20))
    assert [(g["bytes"], g["blocks"]) for g in device["live_at_peak"]] == [(3 * (4 << 20), 3)]


def test_the_front_page_python_example_runs_in_the_venv(tools, tmp_path):
    """trace/README.md's first example under "From Python", as written, without torch: it prints what its
    comments say and writes the report."""
    section = (TRACE_PROJECT / "README.md").read_text().split("\n## From Python\n", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    expected = [line.split("  # ", 1)[1] for line in example.splitlines() if line.startswith("print(")]
    assert len(expected) == 2
    (tmp_path / "cuda_sampled_rank0.json.gz").write_bytes(Path(trace("cuda_sampled_rank0")).read_bytes())
    done = subprocess.run(
        [str(tools.python), "-c", example], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=clean_env()
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == expected
    assert (tmp_path / "report.html").stat().st_size > 100_000


# ----------------------------------------------------------------------------- timeline: an optional part


def test_timeline_without_matplotlib_says_what_to_install(tools, tmp_path):
    done = installed(tools, ["timeline", trace("cuda_alexnet"), "-o", "t.png"], tmp_path, ("t.png",))
    assert done.returncode == 2 and done.files == {} and done.stdout == ""
    assert done.stderr == (
        "error: timeline draws with matplotlib, which is not installed: pip install 'openreg-trace[plot]' "
        "(or pip install matplotlib)\n"
    )


def test_timeline_with_the_plot_extra_draws_the_same_image(tools, tmp_path):
    """Runs after the test above (file order): installs the extra into the same venv."""
    import matplotlib

    constraints = tmp_path / "constraints.txt"
    constraints.write_text(f"matplotlib=={matplotlib.__version__}\n")  # this environment's: the same pixels
    tools.pip("install", "-q", "-c", str(constraints), f"{tools.wheel}[plot]")
    for name in ("cuda_alexnet", "rocm_mi250_train"):
        ours = compare(tools, ["timeline", trace(name), "-o", "t.png"], tmp_path, outputs=("t.png",))
        assert ours.returncode == 0 and ours.files["t.png"].startswith(b"\x89PNG")


# -------------------------------------------------------------------------------------------- the sdist


def test_the_sdist_carries_the_shared_json_writer(tmp_path):
    """`pip install` of the sdist, far from the checkout, must find common/ inside it."""
    code = "import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=TRACE_PROJECT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    sdist = tmp_path / done.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as archive:
        names = {n.removeprefix("openreg_trace-0.1.0/") for n in archive.getnames()}
        archive.extractall(tmp_path / "unpacked", filter="data")
    # What git does not ignore (tracked, or new and not yet added): the files an sdist of the work tree holds.
    tracked = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "trace", "common"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    expected = {p.removeprefix("trace/") for p in tracked if not p.startswith(("common/tests/",))}
    assert names == expected | {"PKG-INFO"}
    # CMake finds the copy: the project configures and builds the JSON writer from the unpacked sdist alone.
    source, build = tmp_path / "unpacked" / "openreg_trace-0.1.0", tmp_path / "build"
    for argv in (
        ["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja"],
        ["cmake", "--build", str(build), "--target", "openreg_common_json"],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (build / "common" / "libopenreg_common_json.a").is_file()
    assert str(source / "common" / "src" / "json_writer.cpp") in (build / "build.ninja").read_text()


# ------------------------------------------------------------------------------------- one library, here


def test_torch_openreg_loads_the_tools_library_once():
    """The backend's package ships no copy: its trace commands and torch_openreg.trace use openreg_trace's."""
    code = (
        "import json, torch, torch_openreg, openreg_trace\n"
        "from torch_openreg.trace import open_trace\n"
        f"with open_trace({trace('cuda_triton')!r}) as t: t.summary()\n"
        "maps = {l.split()[-1] for l in open('/proc/self/maps') if 'libopenreg_trace' in l}\n"
        "print(json.dumps({'maps': sorted(maps), 'library': str(openreg_trace.library_path()),\n"
        "  'same': torch_openreg.trace is openreg_trace, 'backend': torch_openreg.backend_error is None}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["backend"] and found["same"]
    assert found["maps"] == [str(Path(found["library"]).resolve())]
    package_lib = REPO / "torch_openreg" / "lib"
    assert not (package_lib / "libopenreg_trace.so").exists()
    dependencies = re.search(r"^dependencies = (\[.*\])$", (REPO / "pyproject.toml").read_text(), re.M)
    assert dependencies is not None and "openreg-trace==0.1.0" in json.loads(dependencies.group(1))
