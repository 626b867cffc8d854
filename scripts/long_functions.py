"""Fails when a C++ function is longer than a screenful.

    python scripts/long_functions.py [--max-lines 120] FILE...

A function's length is lizard's: from its first line to its last, comments
and blank lines included. Operator-registration tables (TORCH_LIBRARY,
TORCH_LIBRARY_IMPL, TORCH_LIBRARY_FRAGMENT blocks) are lists, not logic, and
are exempt by name. Exit status 1 and one line per long function when there
is one, 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys

import lizard

REGISTRATION_TABLES = frozenset({"TORCH_LIBRARY", "TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_FRAGMENT"})


def long_functions(files: list[str], max_lines: int) -> list[str]:
    found = []
    for path in files:
        for f in lizard.analyze_file(path).function_list:
            if f.length > max_lines and f.name.rpartition("::")[2] not in REGISTRATION_TABLES:
                found.append(f"{path}:{f.start_line}: {f.name} has {f.length} lines (at most {max_lines})")
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-lines", type=int, default=120)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    found = long_functions(args.files, args.max_lines)
    for line in found:
        print(line)
    print(f"long_functions: {len(args.files)} files, {len(found)} functions over {args.max_lines} lines")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
