"""Shared fixtures for the openreg backend tests.

The package is imported explicitly (so the tests also run with
TORCH_DEVICE_BACKEND_AUTOLOAD=0); the autoload path has its own subprocess
tests in test_registration.py.
"""

from __future__ import annotations

import pytest
import torch

import torch_openreg


@pytest.fixture(autouse=True)
def _clean_device_state():
    """Every test starts on device 0 with the default streams, and leaves no queued failure behind."""
    torch.openreg.set_device(0)
    yield
    # A kernel failure still queued at the end is the test's: synchronizing
    # every device reports (and clears) it, and the test fails with it.
    left = []
    for index in range(torch.openreg.device_count()):
        try:
            torch.openreg.synchronize(index)
        except RuntimeError as error:
            left.append(f"openreg:{index}: {error}")
    torch.openreg.set_device(0)
    if left:
        pytest.fail("the test left a queued device failure:\n" + "\n".join(left), pytrace=False)


@pytest.fixture
def fallback_counts():
    """Counts of CPU-fallback calls made inside the test (reset at its start)."""
    torch_openreg._C._reset_fallback_counts()
    return torch_openreg._C._fallback_counts
