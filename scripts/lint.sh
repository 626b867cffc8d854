#!/usr/bin/env bash
# Style gate: clang-format (layout), clang-tidy (C++ naming) and ruff (Python)
# over the tracked sources. Exits non-zero on the first tool that finds
# something, after printing what it found.
#   scripts/lint.sh            check everything (needs build/py/compile_commands.json)
#   scripts/lint.sh --fix      rewrite layout in place (clang-format, ruff format)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
JOBS=${OPENREG_BUILD_JOBS:-$(nproc)}
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
CLANG_TIDY=${CLANG_TIDY:-clang-tidy-14}

mapfile -t cxx_files < <(git ls-files '*.c' '*.cc' '*.cpp' '*.h' '*.hpp')

if [[ "${1:-}" == "--fix" ]]; then
  "$CLANG_FORMAT" -i "${cxx_files[@]}"
  "$PYTHON" -m ruff format .
  "$PYTHON" -m ruff check --fix .
  exit 0
fi

echo "lint: clang-format on ${#cxx_files[@]} files"
"$CLANG_FORMAT" --dry-run --Werror "${cxx_files[@]}"

echo "lint: ruff"
"$PYTHON" -m ruff format --check .
"$PYTHON" -m ruff check .

# clang-tidy reads the compile commands of the torch build. Its PCH is gcc's,
# which clang cannot read, so the commands are rewritten without it.
db=build/lint
mkdir -p "$db"
"$PYTHON" - build/py/compile_commands.json "$db/compile_commands.json" <<'EOF'
import json, re, sys
source, target = sys.argv[1:]
commands = [
    dict(c, command=re.sub(r" -include \S*cmake_pch\.hxx| -Winvalid-pch", "", c["command"]))
    for c in json.load(open(source))
    if "cmake_pch" not in c["file"] and "/build/" not in c["file"]
]
json.dump(commands, open(target, "w"))
print("\n".join(sorted({c["file"] for c in commands})), file=open(target + ".files", "w"))
EOF
echo "lint: clang-tidy (naming) on $(wc -l < "$db/compile_commands.json.files") translation units"
report=$db/clang-tidy.txt
xargs -P "$JOBS" -n 4 "$CLANG_TIDY" -p "$db" --quiet < "$db/compile_commands.json.files" > "$report" 2>&1 || true
if grep -q "error:" "$report"; then
  grep "error:" "$report" | sort -u
  echo "lint: clang-tidy found $(grep "error:" "$report" | sort -u | wc -l) naming problems (full log: $report)"
  exit 1
fi
echo "lint: clean"
