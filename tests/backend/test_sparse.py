"""Sparse layouts are refused at once, with an error naming openreg and the layout.

(csrc/backend/README.md, "Sparse layouts", says why openreg does not run them.)
"""

from __future__ import annotations

import pytest
import torch

import torch_openreg  # noqa: F401


def _refused(layout: str):
    return pytest.raises(NotImplementedError, match=rf"openreg: sparse layouts are not supported .*torch\.{layout}")


@pytest.mark.parametrize(
    ("convert", "layout"),
    [
        (lambda x: x.to_sparse(), "sparse_coo"),
        (lambda x: x.to_sparse(1), "sparse_coo"),
        (lambda x: x.to_sparse_csr(), "sparse_csr"),
        (lambda x: x.to_sparse_csc(), "sparse_csc"),
        (lambda x: x.to_sparse_bsr((1, 1)), "sparse_bsr"),
        (lambda x: x.to_sparse_bsc((1, 1)), "sparse_bsc"),
    ],
)
def test_dense_to_sparse_is_refused_before_any_work(convert, layout, fallback_counts):
    x = torch.ones(2, 3, device="openreg")
    with _refused(layout):
        convert(x)
    assert fallback_counts() == {}  # nothing ran on the CPU first


def test_sparse_factories_and_moves_are_refused():
    indices = torch.tensor([[0, 1], [1, 0]])
    values = torch.tensor([1.0, 2.0])
    with _refused("sparse_coo"):
        torch.sparse_coo_tensor(indices, values, (2, 2), device="openreg")
    with _refused("sparse_coo"):
        torch.sparse_coo_tensor(indices, values, (2, 2)).to("openreg")
    # A compressed layout moved from the CPU is assembled by PyTorch without
    # a dispatch to openreg, so the move itself cannot be refused; what uses
    # the result is (csrc/backend/README.md, "Sparse layouts").
    moved = torch.eye(3).to_sparse_csr().to("openreg")
    with _refused("sparse_csr"):
        moved.to_dense()
    with _refused("sparse_csr"):
        moved.sum()


def test_the_error_is_a_runtime_error():
    # NotImplementedError, as PyTorch raises for an unsupported backend, is a RuntimeError.
    with pytest.raises(RuntimeError):
        torch.ones(2, device="openreg").to_sparse()
