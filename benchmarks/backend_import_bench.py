"""What loading the openreg backend adds to ``import torch``, side by side in one run.

For each tree given (default: this checkout), fresh interpreters alternate ``import torch``
without the backend (``TORCH_DEVICE_BACKEND_AUTOLOAD=0``) and with it (torch's autoload), and
report the medians, the backend's share, the import time of the modules that register the
Dynamo device interface early (``python -X importtime``), and whether ``torch._dynamo`` or
``torch._inductor`` were imported (they must not be: they cost seconds).

    python benchmarks/backend_import_bench.py [--runs 12] [--tree PATH ...]

Give the tree before a change and the tree after to compare them (each needs its built
``torch_openreg/lib``); interpreters run from a scratch directory so that each tree's package
is the one imported.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CODE = (
    "import time, sys; t = time.perf_counter(); import torch; wall = time.perf_counter() - t; "
    "print('WALL', wall, [m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules])"
)
HOOK_MODULES = ("torch_openreg._inductor", "torch_openreg._inductor.interface_hook")


def one_import(tree: Path, backend: bool, scratch: str) -> tuple[float, float, str]:
    """(wall seconds, self import µs of HOOK_MODULES, heavy modules imported) of one fresh `import torch`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    if not backend:
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", CODE], env=env, capture_output=True, text=True, cwd=scratch
    )
    match = re.search(r"WALL (\S+) (.*)", out.stdout)
    if match is None:
        raise RuntimeError(f"import failed in {tree}:\n{out.stderr[-2000:]}")
    hook_us = sum(
        int(line.split("|")[0].split(":")[1])
        for line in out.stderr.splitlines()
        if line.split("|")[-1].strip() in HOOK_MODULES
    )
    return float(match.group(1)), hook_us, match.group(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--tree", type=Path, action="append", help="a checkout with a built torch_openreg/lib")
    args = parser.parse_args()
    trees = [t.resolve() for t in (args.tree or [Path(__file__).resolve().parents[1]])]
    walls = {(t, b): [] for t in trees for b in (False, True)}
    hooks = {t: [] for t in trees}
    heavy = {t: set() for t in trees}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(args.runs):
            for tree in trees:
                for backend in (False, True):
                    wall, hook_us, imported = one_import(tree, backend, scratch)
                    walls[(tree, backend)].append(wall)
                    if backend:
                        hooks[tree].append(hook_us)
                        heavy[tree].add(imported)
    print(f"{args.runs} interleaved runs per cell, load average {os.getloadavg()[0]:.1f}")
    for tree in trees:
        alone = statistics.median(walls[(tree, False)])
        loaded = statistics.median(walls[(tree, True)])
        print(
            f"{tree}: import torch {alone * 1000:.0f} ms alone, {loaded * 1000:.0f} ms with the backend "
            f"(x{loaded / alone:.2f}); interface hook modules {statistics.median(hooks[tree]) / 1000:.2f} ms; "
            f"compiler modules imported: {sorted(heavy[tree])}"
        )


if __name__ == "__main__":
    main()
