"""The errors openreg's compiler integration raises for what it does not do."""

from __future__ import annotations


def unsupported(what: str, instead: str) -> RuntimeError:
    """A ``RuntimeError`` naming what openreg cannot compile and what to use instead."""
    return RuntimeError(f"openreg: torch.compile does not support {what} on openreg; {instead}")
