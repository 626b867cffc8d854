"""Fails when Python modules import each other, directly or around a longer loop.

    python scripts/import_cycles.py [PACKAGE_DIR ...]     (default: torch_openreg)

Every import statement counts, those inside functions too: a lazy import still
ties the two modules together. Only imports between modules of the packages
given are followed; a package is its __init__.py. A submodule does not depend
on its parent package by being imported (Python imports the parent first, but
that is not an edge one module chose). Exit status 1 and one line per cycle
when there is one, 0 otherwise.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def module_files(package_dir: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module under package_dir (its own name first)."""
    root = package_dir.resolve().parent
    modules = {}
    for path in sorted(package_dir.resolve().rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_names(path: Path, module: str) -> list[str]:
    """The dotted names a module imports, relative imports resolved; `from X
    import Y` gives X.Y, which names the module X.Y, or else something of X."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names.extend(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for name in imported_names(path, module):
            # `import a.b.c` or `from a.b import c`: the deepest module named
            # (a, when c is a function of a).
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                graph[module].add(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[tuple[list[str], list[str]]]:
    """Strongly connected components of more than one module (Tarjan), each as
    one loop through them and all its modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[list[str], list[str]]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append((loop_through(graph, set(component)), sorted(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def loop_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """One cycle inside a strongly connected component: a shortest way back to its first module."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    return paths[v] + [start]
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError("a strongly connected component has a cycle")


def main(argv: list[str]) -> int:
    dirs = [Path(a) for a in argv] or [Path(__file__).resolve().parent.parent / "torch_openreg"]
    modules: dict[str, Path] = {}
    for d in dirs:
        if not (d / "__init__.py").is_file():
            print(f"import_cycles: {d} is not a package (no __init__.py)")
            return 2
        modules.update(module_files(d))
    found = cycles(import_graph(modules))
    for loop, component in found:
        others = [m for m in component if m not in loop]
        print("import cycle: " + " -> ".join(loop) + (f" (also tied in: {', '.join(others)})" if others else ""))
    print(f"import_cycles: {len(modules)} modules, {len(found)} cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
