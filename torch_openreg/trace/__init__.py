"""Moved to ``openreg_trace`` (trace/ in the source tree; ``pip install ./trace``). This name stays
an alias of that package and its modules: ``from torch_openreg.trace import open_trace`` still works."""

from torch_openreg._moved import alias_package

alias_package(__name__, "openreg_trace")
