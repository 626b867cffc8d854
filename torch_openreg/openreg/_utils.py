"""``torch.openreg._utils``: what torch reads from ``torch.cuda._utils``.

``torch.serialization`` maps a saved tensor's location ("openreg:1") to a device
index through ``_utils._get_device_index`` of the device module.
"""

from __future__ import annotations

import torch

from torch_openreg.openreg._core import _get_device_index as _index_of


def _get_device_index(device, optional: bool = False, allow_cpu: bool = False) -> int:
    """The index ``device`` names, as ``torch.cuda._utils._get_device_index``.

    ``optional``: a device with no index means the current one; ``allow_cpu``:
    a CPU device is accepted and gives -1.
    """
    if isinstance(device, str):
        device = torch.device(device)
    if allow_cpu and isinstance(device, torch.device) and device.type == "cpu":
        return -1
    return _index_of(device, optional=optional)
