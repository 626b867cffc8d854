#!/usr/bin/env bash
# Runs every test: C++ (ctest), the torch-free C++ tests again under
# AddressSanitizer+UndefinedBehaviorSanitizer and under ThreadSanitizer, and
# the Python suites (pytest). Installs what is missing first.
#   scripts/test.sh              everything
#   SKIP_SANITIZERS=1 scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
JOBS=${OPENREG_BUILD_JOBS:-$(nproc)}

scripts/bootstrap.sh

echo "== C++ tests (build/py)"
ctest --test-dir build/py --output-on-failure -j "$JOBS"

if [[ -z "${SKIP_SANITIZERS:-}" ]]; then
  for sanitizer in address thread; do
    echo "== C++ tests under ${sanitizer} sanitizer (torch-free targets)"
    dir=build/$sanitizer
    if [[ ! -f $dir/build.ninja ]]; then
      CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DOPENREG_SANITIZER="$sanitizer" -DOPENREG_BUILD_BENCHMARKS=OFF > /dev/null
    fi
    cmake --build "$dir" -j "$JOBS"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      ctest --test-dir "$dir" --output-on-failure -j "$JOBS" -L sanitize
  done
fi

echo "== Python tests"
"$PYTHON" -m pytest -q tests
