"""The structure checks of scripts/lint.sh: they pass on this tree and fail on
a planted long function and a planted import cycle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / name), *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def tracked_cxx() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "*.c", "*.cc", "*.cpp", "*.h", "*.hpp"], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def function_of(lines: int, name: str = "fn") -> str:
    """A C++ function spanning exactly `lines` lines, braces included."""
    body = "".join(f"  x += {k};\n" for k in range(lines - 3))
    return f"int {name}(int x) {{\n{body}  return x;\n}}\n"


def test_no_long_function_in_the_tree():
    r = run_script("long_functions.py", *tracked_cxx())
    assert r.returncode == 0, r.stdout + r.stderr
    assert ", 0 functions over 120 lines" in r.stdout


def test_a_long_function_fails(tmp_path):
    src = tmp_path / "planted.cpp"
    src.write_text("namespace ns {\n" + function_of(120, "justFits") + function_of(121, "tooLong") + "}\n")
    r = run_script("long_functions.py", str(src))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{src}:122: ns::tooLong has 121 lines (at most 120)" in r.stdout
    assert "justFits" not in r.stdout


def test_registration_tables_are_exempt_by_name(tmp_path):
    entries = "".join(f'  m.impl("op{k}", &op{k});\n' for k in range(150))
    src = tmp_path / "Registration.cpp"
    src.write_text(f"TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {{\n{entries}}}\n" + function_of(150, "notATable"))
    r = run_script("long_functions.py", str(src))
    assert r.returncode == 1
    assert "notATable has 150 lines" in r.stdout
    assert "TORCH_LIBRARY" not in r.stdout


def test_no_import_cycle_in_torch_openreg():
    r = run_script("import_cycles.py", "torch_openreg")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.endswith(" 0 cycles\n")


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_cycle_through_a_lazy_import_fails(tmp_path):
    pkg = plant(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/cli.py": "def main():\n    from pkg.demo import start\n    return start()\n",
            "pkg/demo/__init__.py": "from .run import start\n",
            "pkg/demo/run.py": "def start():\n    from pkg.cli import main\n    return main\n",
            "pkg/other.py": "import pkg.cli\n",
        },
    )
    r = run_script("import_cycles.py", str(pkg))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "import cycle: pkg.cli -> pkg.demo -> pkg.demo.run -> pkg.cli\n" in r.stdout
    assert r.stdout.endswith("5 modules, 1 cycles\n")


def test_a_package_and_its_module_importing_each_other_fail(tmp_path):
    pkg = plant(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.memory import stats\n\ndef _lazy_init():\n    pass\n",
            "pkg/memory.py": "def stats():\n    from pkg import _lazy_init\n    _lazy_init()\n",
        },
    )
    r = run_script("import_cycles.py", str(pkg))
    assert r.returncode == 1
    assert "import cycle: pkg -> pkg.memory -> pkg\n" in r.stdout


def test_relative_imports_without_a_cycle_pass(tmp_path):
    pkg = plant(
        tmp_path,
        {
            "pkg/__init__.py": "from . import a\nfrom .b import f\n",
            "pkg/a.py": "from ._core import g\n",
            "pkg/b.py": "from . import _core\n\ndef f():\n    from .a import g\n",
            "pkg/_core.py": "import os\n\ndef g():\n    pass\n",
        },
    )
    r = run_script("import_cycles.py", str(pkg))
    assert r.returncode == 0, r.stdout
