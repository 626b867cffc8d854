"""torch.openreg answers what torch reads from a device module, with torch.cuda's meaning.

torch finds a device's module by name (``getattr(torch, device.type)``,
``torch.get_device_module``) and often reads it with ``getattr(module, name,
default)`` or ``hasattr``: a missing name is no error there, only a silent
change of behaviour (``torch.utils.checkpoint`` skipped saving the RNG state,
so recomputed dropout drew new masks). The survey reads torch's own source,
so a name torch starts reading in a later release fails here until openreg has
it or the list below says why it need not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint

import torch_openreg  # noqa: F401

# The names torch gives a device module when it holds one.
_MODULE_VARIABLES = r"(?:self\.)?(?:device_module|device_mod|_device_module|device_handle|_device_handle)"
_ATTRIBUTE = re.compile(rf"\b{_MODULE_VARIABLES}\.([A-Za-z_][A-Za-z0-9_]*)")
_BY_CALL = re.compile(r"\bget_device_module\([^()]*\)\.([A-Za-z_][A-Za-z0-9_]*)")
_LOOKUP = re.compile(rf"\b(?:getattr|hasattr)\(\s*{_MODULE_VARIABLES},\s*[\"']([A-Za-z_][A-Za-z0-9_]*)[\"']")

# Names torch reads that openreg has no reason to have, and why.
NOT_NEEDED = {
    "sparse": "sparse layouts are refused on openreg (test_sparse.py); torch checks hasattr first",
    "set_rng_ctx": "read for device type 'hpu' only (torch/distributed/tensor/_random.py)",
    "unset_rng_ctx": "read for device type 'hpu' only (torch/distributed/tensor/_random.py)",
}


def _torch_sources():
    root = Path(torch.__file__).parent
    for path in root.rglob("*.py"):
        relative = path.relative_to(root).as_posix()
        if relative.startswith("testing/") or "/test" in relative:
            continue
        yield relative, path.read_text(encoding="utf-8", errors="replace")


def _names_torch_reads() -> dict[str, set[str]]:
    names: dict[str, set[str]] = {}
    for relative, text in _torch_sources():
        for pattern in (_ATTRIBUTE, _BY_CALL, _LOOKUP):
            for match in pattern.finditer(text):
                names.setdefault(match.group(1), set()).add(relative)
    return names


@pytest.fixture(scope="module")
def names_torch_reads():
    return _names_torch_reads()


def test_the_survey_finds_what_torch_is_known_to_read(names_torch_reads):
    # A survey that matched nothing would pass everything: these reads are in torch 2.13.
    assert "utils/checkpoint.py" in names_torch_reads["_initialized"]
    assert "distributed/tensor/_random.py" in names_torch_reads["set_rng_state"]
    assert "serialization.py" in names_torch_reads["_utils"]
    assert len(names_torch_reads) >= 20


def test_every_name_torch_reads_from_a_device_module_exists(names_torch_reads):
    missing = {
        name: sorted(files)
        for name, files in names_torch_reads.items()
        if name not in NOT_NEEDED and not hasattr(torch.openreg, name)
    }
    assert missing == {}, f"torch reads these from a device module; torch.openreg lacks them: {missing}"


def test_every_exception_is_still_read_by_torch(names_torch_reads):
    assert sorted(set(NOT_NEEDED) - set(names_torch_reads)) == []


def test_initialized_is_live_as_on_cuda():
    torch.empty(1, device="openreg")  # starts the runtime (the conftest already did)
    assert torch.openreg._initialized is True
    assert getattr(torch.openreg, "_initialized", False) == torch.openreg.is_initialized()


def test_serialization_finds_the_device_index():
    assert torch.openreg._utils._get_device_index("openreg:1") == 1
    assert torch.openreg._utils._get_device_index(torch.device("openreg"), optional=True) == 0
    assert torch.openreg._utils._get_device_index("cpu", allow_cpu=True) == -1


def test_the_default_generators_are_the_devices_own():
    generators = torch.openreg.default_generators
    assert len(generators) == torch.openreg.device_count()
    torch.openreg.manual_seed_all(1234)
    assert [g.initial_seed() for g in generators] == [1234] * len(generators)
    assert torch.openreg._get_generator(torch.device("openreg:1")).initial_seed() == 1234
    assert generators[1].device == torch.device("openreg:1")


class _DropoutBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 32)

    def forward(self, x):
        return self.fc2(F.dropout(F.gelu(self.fc1(x)), p=0.3, training=True))


def _gradients(block, x, use_checkpoint: bool, use_reentrant: bool):
    block.zero_grad(set_to_none=True)
    torch.manual_seed(7)
    x = x.detach().requires_grad_()
    if use_checkpoint:
        y = checkpoint.checkpoint(block, x, use_reentrant=use_reentrant)
    else:
        y = block(x)
    (y * y).sum().backward()
    return [x.grad.cpu()] + [p.grad.cpu() for p in block.parameters()]


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpointed_dropout_recomputes_the_same_masks(use_reentrant):
    # The recomputed forward restores the device's RNG state (torch reads
    # torch.openreg._initialized to decide), so its dropout masks are those of
    # the first forward and the gradients equal the plain run's, bit for bit.
    # Without the state, they were off by about 4e-2.
    torch.manual_seed(0)
    block = _DropoutBlock().to("openreg")
    x = torch.randn(16, 32, device="openreg")
    plain = _gradients(block, x, False, use_reentrant)
    checkpointed = _gradients(block, x, True, use_reentrant)
    for a, b in zip(plain, checkpointed):
        assert torch.equal(a, b)


def test_a_stream_is_idle_once_its_last_event_is_done():
    stream = torch.openreg.Stream()
    x = torch.ones(64, device="openreg")
    for _ in range(50):
        with torch.openreg.stream(stream):
            for _ in range(4):
                x.add_(1)
            event = torch.openreg.Event()
            event.record(stream)
        event.synchronize()
        assert event.query()
        assert stream.query()
    torch.openreg.synchronize()
    assert x[0].item() == 201.0
