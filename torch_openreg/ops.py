"""Which path each ATen operator takes on openreg.

    python -m torch_openreg.ops              # summary, then the device-kernel table
    python -m torch_openreg.ops --markdown   # the same as Markdown (the README section)
    python -m torch_openreg.ops --all        # also list every operator that falls back

Paths, in the order PyTorch's dispatcher resolves them for PrivateUse1:

- device     an openreg kernel launches device kernels on the current stream;
- copy       runtime memcpy / memset (or a device copy kernel);
- sync       needs a host-visible value, synchronizes the stream;
- view       metadata only (views, record_stream);
- factory    allocation only;
- composite  no openreg kernel: decomposes (CompositeImplicit / CompositeExplicit)
             into operators that have one of the paths above;
- fallback   runs on the host through the CPU fallback (copies in and out,
             synchronizing); `torch_openreg._C._fallback_counts()` counts them.
"""

from __future__ import annotations

import argparse
import collections
import sys

import torch

import torch_openreg


def _schema_names() -> list[str]:
    names = set()
    for schema in torch._C._jit_get_all_schemas():
        if schema.name.startswith("aten::"):
            names.add(schema.name + (f".{schema.overload_name}" if schema.overload_name else ""))
    return sorted(names)


def classify() -> dict[str, tuple[str, str]]:
    """Maps "aten::op.overload" to (path, kernel) for every aten operator."""
    if torch_openreg.backend_error is not None:
        raise RuntimeError(f"openreg: the device backend is unavailable: {torch_openreg.backend_error}")
    registered = {op: (path, kernel) for op, path, kernel in torch_openreg._C._op_paths()}
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    table: dict[str, tuple[str, str]] = {}
    for name in _schema_names():
        if name in registered:
            table[name] = registered[name]
            continue
        try:
            composite = any(
                has(name, key)
                for key in (
                    "CompositeExplicitAutogradNonFunctional",
                    "CompositeExplicitAutograd",
                    "CompositeImplicitAutograd",
                )
            )
            on_cpu = has(name, "CPU")
        except RuntimeError:  # a schema without a dispatcher entry
            continue
        if composite:
            table[name] = ("composite", "")
        elif on_cpu:
            table[name] = ("fallback", "")
    return table


_ORDER = ["device", "copy", "sync", "view", "factory", "composite", "fallback"]
_LISTED = ("device", "copy", "sync", "view", "factory")


def _print(table: dict[str, tuple[str, str]], markdown: bool, show_all: bool) -> None:
    counts = collections.Counter(path for path, _ in table.values())
    listed = _LISTED + (("fallback",) if show_all else ())
    if markdown:
        print("| path | operators |\n|---|---|")
        for path in _ORDER:
            print(f"| {path} | {counts.get(path, 0)} |")
        for path in listed:
            names = [name.removeprefix("aten::") for name, (p, _) in table.items() if p == path]
            print(f"\n**{path}** ({len(names)}): " + ", ".join(f"`{n}`" for n in names))
        return
    for path in _ORDER:
        print(f"{path:10s} {counts.get(path, 0):5d}")
    print()
    for name, (path, kernel) in table.items():
        if path in listed:
            print(f"{name:55s} {path:8s} {kernel}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_openreg.ops", description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--all", action="store_true", help="also list the operators that use the CPU fallback")
    args = parser.parse_args(argv)
    _print(classify(), args.markdown, args.all)
    return 0


if __name__ == "__main__":
    sys.exit(main())
