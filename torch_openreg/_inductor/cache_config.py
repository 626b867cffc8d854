"""A key for Inductor's caches that changes with openreg's code generation.

Inductor's FX graph cache and AOTAutograd's cache key on the graph, Inductor's
config and torch's own source, not on a backend's scheduling or wrapper: after a
change to how openreg emits launches, they would serve a wrapper written for the
old convention. Registered as openreg's ``device_custom_config``, this config
module goes into their keys; ``codegen_version`` hashes the sources that shape
the generated code (a config module holds config entries only: the hash is
computed in ``_codegen_version.py``).
"""

import sys as _sys

from torch.utils._config_module import install_config_module as _install

from torch_openreg._inductor._codegen_version import codegen_version as _version

codegen_version: str = _version()

_install(_sys.modules[__name__])
