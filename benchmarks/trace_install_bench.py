"""What installing the trace tools costs a user: `pip install ./trace` from source into a fresh virtual
environment with no compiler cache (CCACHE_DISABLE=1), against installing the wheel that the same source gives;
and the wheel's size.

Each step runs pip in a child process, as a user would (isolated build: pip fetches the pinned scikit-build-core,
CMake and Ninja come from the machine); wall time and CPU time (user + system of the children: unlike wall time,
not inflated by other processes on a shared machine) are printed. Nothing is asserted.

    python benchmarks/trace_install_bench.py [--runs 1]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import venv
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACE_PROJECT = REPO / "trace"
# A fresh environment must not see the checkout's library or modules, nor a compiler cache.
LEAKS = ("OPENREG_TRACE_LIB", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LEAKS}
    env["CCACHE_DISABLE"] = "1"
    return env


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the children) of one command, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=environment(), timeout=3600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def fresh_venv(folder: Path) -> Path:
    venv.EnvBuilder(clear=True, with_pip=True).create(folder)
    return folder / "bin" / "python"


def pip(python: Path, *args: str) -> list[str]:
    return [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args]


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def one_run(scratch: Path) -> dict[str, float]:
    source_python = fresh_venv(scratch / "source")
    source = timed(pip(source_python, "install", str(TRACE_PROJECT)))
    wheel_dir = scratch / "wheels"
    built = timed(pip(source_python, "wheel", "--no-deps", "-w", str(wheel_dir), str(TRACE_PROJECT)))
    (wheel,) = wheel_dir.glob("openreg_trace-*.whl")
    wheel_python = fresh_venv(scratch / "wheel")
    from_wheel = timed(pip(wheel_python, "install", str(wheel)))
    site = next((scratch / "wheel" / "lib").glob("python3*/site-packages"))
    with zipfile.ZipFile(wheel) as archive:
        library = archive.getinfo("openreg_trace/lib/libopenreg_trace.so").file_size
    return {
        "source_wall": source[0],
        "source_cpu": source[1],
        "wheel_build_wall": built[0],
        "wheel_build_cpu": built[1],
        "wheel_install_wall": from_wheel[0],
        "wheel_install_cpu": from_wheel[1],
        "wheel_bytes": wheel.stat().st_size,
        "library_bytes": library,
        "installed_bytes": tree_bytes(site / "openreg_trace"),
        "wheel_name": wheel.name,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="repeat the whole measurement (default 1)")
    args = parser.parse_args()
    print(f"trace install bench: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, CCACHE_DISABLE=1")
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="trace-install-") as scratch:
            r = one_run(Path(scratch))
        print(f"run {run + 1}: {r['wheel_name']}")
        print(f"  {'':<44}{'wall s':>9}{'CPU s':>9}")
        print(f"  {'pip install ./trace (fresh venv, from source)':<44}{r['source_wall']:>9.1f}{r['source_cpu']:>9.1f}")
        print(f"  {'pip wheel ./trace':<44}{r['wheel_build_wall']:>9.1f}{r['wheel_build_cpu']:>9.1f}")
        print(
            f"  {'pip install the wheel (fresh venv)':<44}{r['wheel_install_wall']:>9.1f}{r['wheel_install_cpu']:>9.1f}"
        )
        print(
            f"  from source / from the wheel: {r['source_wall'] / r['wheel_install_wall']:.0f}x wall, "
            f"{r['source_cpu'] / r['wheel_install_cpu']:.0f}x CPU"
        )
        print(
            f"  wheel {r['wheel_bytes'] / 1e6:.2f} MB (library {r['library_bytes'] / 1e6:.2f} MB unpacked), "
            f"installed package {r['installed_bytes'] / 1e6:.2f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
