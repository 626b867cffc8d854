"""Every compile test starts from a clean Dynamo and compiles with Inductor's caches off.

Caches off: a wrapper loaded from an earlier run (or an earlier test) would not
exercise today's code generation. The cache tests turn them on in subprocesses
of their own.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch._inductor.config as inductor_config

import torch_openreg  # noqa: F401  (registers the device with TORCH_DEVICE_BACKEND_AUTOLOAD=0 too)


@pytest.fixture(autouse=True)
def _fresh_compiler():
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    torch.openreg.set_device(0)
    with inductor_config.patch(force_disable_caches=True):
        yield
    torch._dynamo.reset()
    failures = []
    for index in range(torch.openreg.device_count()):
        try:
            torch.openreg.synchronize(index)
        except RuntimeError as error:
            failures.append(f"openreg:{index}: {error}")
    torch.openreg.set_device(0)
    if failures:
        pytest.fail("the test left a queued device failure:\n" + "\n".join(failures), pytrace=False)
