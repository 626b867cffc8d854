"""Entry point for torch's backend autoload (group ``torch.backends``).

``import torch`` calls :func:`autoload` at its very end, unless
``TORCH_DEVICE_BACKEND_AUTOLOAD=0``. Loading this entry point imports the
``torch_openreg`` package, whose ``__init__`` registers the backend.

If ``import torch_openreg`` came first, its ``__init__`` is itself in the
middle of ``import torch`` when torch calls us: the package is only partly
initialised, so we return and let its ``__init__`` finish the registration
(importing it again here is the circular-import trap).

Kept cheap: autoload runs in every process that imports torch (DataLoader
workers included), and starting the device is left to first use.
"""

import sys


def autoload() -> None:
    package = sys.modules.get("torch_openreg")
    if package is not None and getattr(package, "_importing", False):
        return
    import torch_openreg  # noqa: F401  (registers the backend)
