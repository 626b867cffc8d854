"""Seeding and RNG state of the per-device openreg generators.

Each device has one default generator (``_C._get_default_generator(i)``). Device
RNG kernels draw their seeds from it, so results are deterministic under
:func:`manual_seed` / ``torch.manual_seed``.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from torch_openreg.openreg._core import _C, _get_device_index, device_count


def _generator(device=None) -> torch.Generator:
    index = _get_device_index(device)
    return _C._get_default_generator(index)


def _all_generators() -> list[torch.Generator]:
    return [_C._get_default_generator(i) for i in range(device_count())]


def manual_seed(seed: int) -> None:
    """Seeds the current device's generator."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for generator in _all_generators():
        generator.manual_seed(int(seed))


def seed() -> None:
    """Seeds the current device's generator with a non-deterministic number."""
    _generator().seed()


def seed_all() -> None:
    generators = _all_generators()
    if generators:
        value = generators[0].seed()
        for generator in generators[1:]:
            generator.manual_seed(value)


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device="openreg") -> torch.Tensor:
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device="openreg") -> None:
    _generator(device).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [generator.get_state() for generator in _all_generators()]


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for generator, state in zip(_all_generators(), new_states):
        generator.set_state(state)
