#!/usr/bin/env bash
# Installs everything openreg needs on a fresh Debian machine, then builds and
# installs the package. Safe to run again: what is present is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

apt_packages=(cmake ninja-build ccache g++ clang libclang-rt-14-dev libgtest-dev libgmock-dev
              libbenchmark-dev zlib1g-dev clang-format-14 clang-tidy-14
              chromium fonts-dejavu-core libjs-chart.js)  # the report: its browser tests, its charts' library
missing=()
for package in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null
fi

# torch: exactly 2.13.0 (the CPU wheel on this machine's disk).
# Read the version from metadata: importing torch would autoload an installed
# openreg, whose state is not this check's business.
if ! "$PYTHON" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('torch').startswith('2.13.0') else 1)" 2>/dev/null; then
  echo "bootstrap: installing torch==2.13.0"
  "$PYTHON" -m pip install -q torch==2.13.0
fi

# The build backend, pinned: a fresh venv brings setuptools 65, which has no
# bdist_wheel and cannot build the editable install (pyproject needs >= 70.1).
"$PYTHON" -m pip install -q setuptools==84.2.1
"$PYTHON" -m pip install -q -r requirements-test.txt
# HolisticTraceAnalysis: traceinsight 0.6.1, the maintained line (import name
# hta, the code of HTA v0.6.1). It declares jupyterlab as a dependency although
# analysis does not need it; its real dependencies are in requirements-test.txt.
# The older HolisticTraceAnalysis package installs the same hta module: remove
# it first (removing it afterwards would delete files both own), and reinstall
# traceinsight when it was there. tests/test_hta_openreg.py runs 0.5.0 in a
# virtual environment of its own.
if "$PYTHON" -m pip show HolisticTraceAnalysis > /dev/null 2>&1; then
  "$PYTHON" -m pip uninstall -q -y HolisticTraceAnalysis
  "$PYTHON" -m pip install -q --no-deps --force-reinstall traceinsight==0.6.1
else
  "$PYTHON" -m pip install -q --no-deps traceinsight==0.6.1
fi

# torchtitan 0.3.0 and what it imports, for tests/torchtitan (scripts/install_torchtitan.sh: every package
# pinned and --no-deps, so that torch stays 2.13.0); skipped once installed.
if ! "$PYTHON" -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('torchtitan') == '0.3.0' else 1)" 2>/dev/null; then
  PYTHON="$PYTHON" scripts/install_torchtitan.sh
fi

# The trace tools first (trace/: the package openreg_trace, the command openreg-trace): the backend
# depends on them. Editable, so the checkout's Python is what runs; no torch, and no build isolation:
# its pinned build backend came with requirements-test.txt.
"$PYTHON" -m pip install -q --no-build-isolation --no-deps -e ./trace

# Build the C++ layers and install the package against the installed torch.
export TORCH_DEVICE_BACKEND_AUTOLOAD=0
"$PYTHON" -m pip install -q --no-build-isolation --no-deps -e .
