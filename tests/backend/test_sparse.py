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


_CSR = torch.eye(3).to_sparse_csr()


@pytest.mark.parametrize(
    ("make", "layout"),
    [
        (lambda: _CSR.to("openreg"), "sparse_csr"),
        (lambda: _CSR.to(device="openreg", dtype=torch.float64), "sparse_csr"),
        (lambda: _CSR.clone().requires_grad_().to("openreg"), "sparse_csr"),
        (lambda: torch.eye(3).to_sparse_csc().to("openreg"), "sparse_csc"),
        (lambda: torch.eye(4).to_sparse_bsr((2, 2)).to("openreg"), "sparse_bsr"),
        (lambda: torch.eye(4).to_sparse_bsc((2, 2)).to("openreg"), "sparse_bsc"),
        (
            lambda: torch.sparse_csr_tensor(_CSR.crow_indices(), _CSR.col_indices(), _CSR.values(), device="openreg"),
            "sparse_csr",
        ),
        (
            lambda: torch.sparse_csr_tensor(
                _CSR.crow_indices().to("openreg"), _CSR.col_indices().to("openreg"), _CSR.values().to("openreg"), (3, 3)
            ),
            "sparse_csr",
        ),
        (
            lambda: torch.sparse_compressed_tensor(
                _CSR.crow_indices(),
                _CSR.col_indices(),
                _CSR.values(),
                (3, 3),
                layout=torch.sparse_csc,
                device="openreg",
            ),
            "sparse_csc",
        ),
        (lambda: torch.zeros(3, 3, layout=torch.sparse_csr, device="openreg"), "sparse_csr"),
        (lambda: torch.empty(3, 3, layout=torch.sparse_bsc, device="openreg"), "sparse_bsc"),
        (
            lambda: torch.ops.aten._sparse_compressed_tensor_with_dims(
                1, 0, [3, 3], [], torch.int64, dtype=torch.float32, layout=torch.sparse_csr, device="openreg"
            ),
            "sparse_csr",
        ),
    ],
)
def test_compressed_layouts_are_refused_before_the_tensor_exists(make, layout, fallback_counts):
    # PyTorch assembles these in composite constructors; openreg refuses the
    # constructor, so no compressed openreg tensor ever exists to fail later
    # with PyTorch's own "unsupported tensor layout".
    with _refused(layout):
        make()
    assert fallback_counts() == {}


def test_compressed_layouts_still_move_between_cpu_dtypes():
    # The refusal is registered for openreg's key only: the CPU's moves are untouched.
    moved = _CSR.to(torch.float64)
    assert moved.layout == torch.sparse_csr
    assert torch.equal(moved.to_dense(), torch.eye(3, dtype=torch.float64))


def test_the_error_is_a_runtime_error():
    # NotImplementedError, as PyTorch raises for an unsupported backend, is a RuntimeError.
    with pytest.raises(RuntimeError):
        torch.ones(2, device="openreg").to_sparse()
