"""Builds the C++ layers with CMake + Ninja against the installed torch.

Install with:  pip install --no-build-isolation -e .
The shared libraries land in torch_openreg/lib/ (see csrc/CMakeLists.txt); the trace
tools' libopenreg_trace lands in their own package (trace/python/openreg_trace/lib),
which is installed first (pip install -e ./trace; scripts/bootstrap.sh does both).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
BUILD_DIR = ROOT / "build" / "py"
PACKAGE_LIB = ROOT / "torch_openreg" / "lib"


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        if not (BUILD_DIR / "build.ninja").exists():
            BUILD_DIR.mkdir(parents=True, exist_ok=True)
            subprocess.check_call(
                [
                    "cmake",
                    "-S",
                    str(ROOT),
                    "-B",
                    str(BUILD_DIR),
                    "-G",
                    "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release",
                    "-DOPENREG_BUILD_TORCH=ON",
                    "-DOPENREG_BUILD_TESTS=ON",
                    "-DOPENREG_BUILD_BENCHMARKS=ON",
                    f"-DPython3_EXECUTABLE={sys.executable}",
                ],
                env=env,
            )
        jobs = os.environ.get("OPENREG_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", str(BUILD_DIR), "-j", jobs], env=env)
        # A non-editable install copies the package; bring the libraries along.
        target = Path(self.get_ext_fullpath(ext.name)).parent / "lib"
        self._copied = []
        if target.resolve() != PACKAGE_LIB.resolve():
            target.mkdir(parents=True, exist_ok=True)
            for lib in PACKAGE_LIB.glob("*.so*"):
                # Wheels hold no symlinks: copy the files they point to.
                (target / lib.name).unlink(missing_ok=True)
                shutil.copy2(lib, target / lib.name)
                self._copied.append(str(target / lib.name))

    # `_cmake` only makes setuptools run this command: CMake writes the real
    # libraries straight into torch_openreg/lib, so there is no module file to
    # copy back into the source tree (editable installs) or to list.
    def copy_extensions_to_source(self):
        pass

    def get_outputs(self):
        return list(getattr(self, "_copied", []))


setup(
    ext_modules=[Extension("torch_openreg._cmake", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
