"""Old import paths of the trace tools, kept working after they moved to the ``openreg_trace`` package.

``torch_openreg.trace`` is ``openreg_trace`` and ``torch_openreg.report`` is ``openreg_trace.report``:
the same module objects under a second name (not copies), so state such as ``hta.teach()``'s is shared
and the library is loaded once.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys


def alias_package(old_name: str, new_name: str) -> None:
    """Makes ``old_name`` and each ``old_name.<sub>`` name the module ``new_name[.<sub>]``.
    Called from the old package's ``__init__``, which the new package then replaces in sys.modules."""
    package = importlib.import_module(new_name)
    for info in pkgutil.walk_packages(package.__path__, new_name + "."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue  # importing it would run a command line
        sys.modules[old_name + info.name[len(new_name) :]] = importlib.import_module(info.name)
    sys.modules[old_name] = package
