"""Conjugate and negative views on openreg.

A conjugate view (`x.conj()`, `.mH`) or a negative view (`x.conj().imag`)
keeps the original memory and a bit saying how to read it. Before the fix,
copying such a view (`.cpu()`, `clone()`, any fallback argument) recursed
between PyTorch's conjugate fallback and openreg's `_copy_from` until the
stack overflowed (SIGSEGV); and kernels that take the views as they are
(the matrix products) read the memory without the bit. Each case runs in a
fresh interpreter first, so a crash fails the test instead of ending the run.
"""

from __future__ import annotations

import pytest
import torch
from backend_support import run_python

import torch_openreg  # noqa: F401


def _values(dtype=torch.complex64):
    real = torch.tensor([1.0, -2.0, 3.5, 0.25])
    return torch.complex(real, real * 2 + 1).to(dtype)


# Every path that copied a view with a bit set, in a subprocess: the process
# must exit normally and print True.
CASES = {
    "conj_to_cpu": "x = torch.complex(torch.arange(4.), torch.ones(4)).to('openreg'); "
    "print(torch.equal(x.conj().cpu(), x.cpu().conj().resolve_conj()))",
    "neg_view_to_cpu": "x = torch.complex(torch.arange(4.), torch.ones(4)).to('openreg'); "
    "print(torch.equal(x.conj().imag.cpu(), -torch.ones(4)))",
    "conj_clone": "x = torch.complex(torch.arange(4.), torch.ones(4)).to('openreg'); "
    "print(torch.equal(x.conj().clone().cpu(), x.cpu().conj().resolve_conj()))",
    "ifft_of_real": "x = torch.arange(8.); "
    "print(torch.allclose(torch.fft.ifft(x.to('openreg')).cpu(), torch.fft.ifft(x)))",
    "mH": "x = torch.complex(torch.randn(3, 2), torch.randn(3, 2)); "
    "print(torch.equal(x.to('openreg').mH.cpu(), x.mH.resolve_conj()))",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_copying_a_view_with_a_bit_does_not_crash(case):
    proc = run_python(f"import torch, torch_openreg\n{CASES[case]}")
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stderr[-2000:]}"
    assert proc.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_conj_view_round_trips_exactly(dtype):
    x = _values(dtype)
    d = x.to("openreg")
    expected = x.conj().resolve_conj()
    assert torch.equal(d.conj().cpu(), expected)
    assert torch.equal(d.conj().clone().cpu(), expected)
    assert torch.equal(d.conj().resolve_conj().cpu(), expected)
    # Device to device into a plain tensor, and a plain tensor into a view.
    out = torch.empty_like(d)
    out.copy_(d.conj())
    assert torch.equal(out.cpu(), expected)
    target = torch.zeros_like(d)
    target.conj().copy_(d)  # writes conj(d) into target's memory
    assert torch.equal(target.cpu(), expected)


def test_host_to_device_copies_resolve_bits():
    x = _values()
    d = torch.zeros(4, dtype=torch.complex64, device="openreg")
    d.copy_(x.conj())  # a conjugate host view
    assert torch.equal(d.cpu(), x.conj().resolve_conj())
    d.conj().copy_(x)  # into a conjugate device view
    assert torch.equal(d.cpu(), x.conj().resolve_conj())


def test_negative_view_reads_negated():
    x = _values()
    neg = x.to("openreg").conj().imag
    assert neg.is_neg()
    assert torch.equal(neg.cpu(), -x.imag)
    assert torch.equal((neg + 0).cpu(), -x.imag)


def test_matrix_product_reads_a_conjugate_operand_through_its_bit():
    # mm takes conjugate views as they are (PyTorch does not resolve them
    # first): the device kernel must read them conjugated.
    gen = torch.Generator().manual_seed(0)
    a = torch.complex(torch.randn(3, 4, generator=gen), torch.randn(3, 4, generator=gen))
    b = torch.complex(torch.randn(4, 2, generator=gen), torch.randn(4, 2, generator=gen))
    got = torch.mm(a.to("openreg").conj(), b.to("openreg")).cpu()
    torch.testing.assert_close(got, torch.mm(a.conj(), b))
