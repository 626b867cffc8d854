"""Random number generation: per-device generators, seeding, RNG ops, dropout."""

from __future__ import annotations

import torch


def test_manual_seed_makes_results_reproducible(fallback_counts):
    torch.manual_seed(123)
    a = torch.randn(1000, device="openreg")
    b = torch.rand(1000, device="openreg")
    torch.manual_seed(123)
    assert torch.equal(a.cpu(), torch.randn(1000, device="openreg").cpu())
    assert torch.equal(b.cpu(), torch.rand(1000, device="openreg").cpu())
    torch.openreg.manual_seed(7)
    c = torch.randn(1000, device="openreg")
    assert not torch.equal(a.cpu(), c.cpu())
    torch.openreg.manual_seed(7)  # the device module's own seeding reproduces too
    assert torch.equal(c.cpu(), torch.randn(1000, device="openreg").cpu())
    assert torch.openreg.initial_seed() == 7
    torch.openreg.seed()  # a fresh, non-deterministic seed
    assert torch.openreg.initial_seed() != 7
    assert fallback_counts() == {}


def test_devices_have_their_own_generators():
    torch.openreg.manual_seed_all(3)
    a = torch.randn(100, device="openreg:0")
    b = torch.randn(100, device="openreg:1")
    assert torch.equal(a.cpu(), b.cpu())  # same seed, separate streams of numbers
    c = torch.randn(100, device="openreg:0")
    assert not torch.equal(a.cpu(), c.cpu())


def test_rng_state_roundtrip_and_explicit_generators():
    state = torch.openreg.get_rng_state()
    first = torch.rand(50, device="openreg").cpu()
    torch.openreg.set_rng_state(state)
    assert torch.equal(first, torch.rand(50, device="openreg").cpu())
    g1 = torch.Generator(device="openreg").manual_seed(9)
    g2 = torch.Generator(device="openreg").manual_seed(9)
    assert g1.device == torch.device("openreg", 0)
    assert torch.equal(
        torch.randn(20, device="openreg", generator=g1).cpu(), torch.randn(20, device="openreg", generator=g2).cpu()
    )
    torch.openreg.manual_seed(11)
    assert torch.openreg.initial_seed() == 11


def test_distributions_are_plausible():
    torch.manual_seed(0)
    n = 200_000
    normal = torch.empty(n, device="openreg").normal_(2.0, 3.0).cpu()
    assert abs(normal.mean().item() - 2.0) < 0.05 and abs(normal.std().item() - 3.0) < 0.05
    uniform = torch.empty(n, device="openreg").uniform_(-1, 1).cpu()
    assert uniform.min() >= -1 and uniform.max() < 1 and abs(uniform.mean().item()) < 0.01
    ints = torch.randint(3, 9, (n,), device="openreg").cpu()
    assert ints.min() == 3 and ints.max() == 8
    coins = torch.bernoulli(torch.full((n,), 0.25, device="openreg")).cpu()
    assert abs(coins.mean().item() - 0.25) < 0.01
    expo = torch.empty(n, device="openreg").exponential_(2.0).cpu()
    assert abs(expo.mean().item() - 0.5) < 0.01
    perm = torch.randperm(1000, device="openreg").cpu()
    assert torch.equal(perm.sort().values, torch.arange(1000))
    probs = torch.tensor([0.0, 1.0, 0.0, 2.0], device="openreg")
    samples = torch.multinomial(probs, 500, replacement=True).cpu()
    assert set(samples.tolist()) <= {1, 3}


def test_dropout_masks_and_scales(fallback_counts):
    torch.manual_seed(0)
    x = torch.ones(100_000, device="openreg", requires_grad=True)
    y = torch.nn.functional.dropout(x, p=0.2, training=True)
    kept = (y != 0).cpu()
    assert abs(kept.float().mean().item() - 0.8) < 0.01
    torch.testing.assert_close(y.cpu()[kept], torch.full((int(kept.sum()),), 1.25))
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.where(kept, 1.25, 0.0))
    assert torch.equal(torch.nn.functional.dropout(x, p=0.2, training=False).cpu(), x.detach().cpu())
    assert fallback_counts() == {}
