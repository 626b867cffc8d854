#!/usr/bin/env bash
# Runs every test: the style gate (scripts/lint.sh), the C++ tests (ctest) of the release build, the C++ tests
# again in one build per sanitizer (AddressSanitizer+UndefinedBehaviorSanitizer
# with assertions on, and ThreadSanitizer), which include the backend, the
# profiler plugin and its session, torch itself uninstrumented; then the
# Python suites (pytest). Installs what is missing first.
#   scripts/test.sh                      everything
#   SKIP_SANITIZERS=1 scripts/test.sh    no sanitizer builds (the log says so)
#   GTEST_RANDOM_SEED=N scripts/test.sh  the gtest order of an earlier run
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
JOBS=${OPENREG_BUILD_JOBS:-$(nproc)}
SUPPRESSIONS=$PWD/scripts/sanitizers

scripts/bootstrap.sh

# Style first: one C++ layout (clang-format), one naming (clang-tidy), one
# Python style (ruff). It needs build/py's compile commands, which the
# bootstrap just wrote.
echo "== Style (scripts/lint.sh)"
PYTHON="$PYTHON" scripts/lint.sh

# Every gtest binary runs its tests in a random order (a test that passes only
# after another shows); the seed is in the log to replay the order.
export GTEST_SHUFFLE=1
export GTEST_RANDOM_SEED=${GTEST_RANDOM_SEED:-$((RANDOM % 99999 + 1))}
echo "== gtest order: shuffled with seed $GTEST_RANDOM_SEED (GTEST_RANDOM_SEED=$GTEST_RANDOM_SEED repeats it)"

echo "== C++ tests (build/py, release)"
ctest --test-dir build/py --output-on-failure --no-tests=error -j "$JOBS"

# One build per sanitizer, of everything but the Python extension; the
# address build also keeps assertions (no NDEBUG, libstdc++ checks).
sanitizer_tests() {
  local sanitizer=$1 dir=build/$1 started=$SECONDS
  shift
  echo "== C++ tests under the ${sanitizer} sanitizer ($dir)"
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DOPENREG_SANITIZER="$sanitizer" -DOPENREG_BUILD_TORCH=ON -DOPENREG_BUILD_BENCHMARKS=OFF \
    -DPython3_EXECUTABLE="$(command -v "$PYTHON")" "$@" > /dev/null
  cmake --build "$dir" -j "$JOBS"
  echo "== ${sanitizer}: built in $((SECONDS - started)) s"
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$JOBS" -L sanitize
  echo "== ${sanitizer}: built and tested in $((SECONDS - started)) s"
}

if [[ -z "${SKIP_SANITIZERS:-}" ]]; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  LSAN_OPTIONS=suppressions=$SUPPRESSIONS/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$SUPPRESSIONS/ubsan.supp \
    sanitizer_tests address \
      "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g -D_GLIBCXX_ASSERTIONS"
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPPRESSIONS/tsan.supp \
    sanitizer_tests thread
else
  echo "== SKIPPED: the sanitizer builds and their C++ tests (SKIP_SANITIZERS is set)"
fi

echo "== Python tests"
# -rs lists every skipped test with its reason in the log.
"$PYTHON" -m pytest -q -rs tests

# Not a pytest module: two torchrun jobs of about 20 s each, checked against each other (tests/torchtitan/README.md).
echo "== torchtitan 0.3.0 on openreg: FSDP2 on 2 ranks against 1 rank (tests/torchtitan)"
"$PYTHON" tests/torchtitan/run_torchtitan_check.py

if [[ -n "${SKIP_SANITIZERS:-}" ]]; then
  echo "== NOTE: the sanitizer runs were SKIPPED (SKIP_SANITIZERS is set)"
fi
