"""Moved to ``openreg_trace.report``. This name stays an alias of that package and its modules."""

from torch_openreg._moved import alias_package

alias_package(__name__, "openreg_trace.report")
