"""Operators of op_db that do not match CPU on openreg, with the reason.

tests/backend/test_opdb_conformance.py expects exactly these (operator, dtype)
pairs to fail with one sample each. The table only shrinks: fix an operator,
then delete its line (the test says which). A crash or a hang is never listed:
it is a defect to fix. Regenerate the reasons with
`python tests/backend/opdb_survey.py --samples 1 --failures`.
"""

EXPECTED_FAILURES: dict[tuple[str, str], str] = {
    (
        "native_dropout_backward",
        "int64",
    ): "wrong: sample 0 output[0]: The values for attribute 'dtype' do not match: torch.int64 != torch.float32.",
    (
        "native_dropout_backward",
        "bool",
    ): "wrong: sample 0 output[0]: The values for attribute 'dtype' do not match: torch.bool != torch.float32.",
    (
        "nn.functional.linear_cross_entropy.chunked",
        "bfloat16",
    ): "wrong: sample 0 gradient[1]: Tensor-likes are not close!; Mismatched elements: 1 / 12 (8.3%); Greatest absolute difference: 0.00146484375 at index (3, 2) (up to 1e-05 allowed)",
    (
        "nn.functional.linear_cross_entropy.chunked",
        "float16",
    ): "wrong: sample 0 gradient[1]: Tensor-likes are not close!; Mismatched elements: 1 / 12 (8.3%); Greatest absolute difference: 0.000244140625 at index (1, 1) (up to 1e-05 allowed)",
    (
        "nn.functional.linear_cross_entropy.chunked_none",
        "bfloat16",
    ): "wrong: sample 0 gradient[1]: Tensor-likes are not close!; Mismatched elements: 1 / 12 (8.3%); Greatest absolute difference: 0.00146484375 at index (3, 2) (up to 1e-05 allowed)",
    (
        "nn.functional.mish",
        "bfloat16",
    ): "wrong: sample 0 gradient[0]: Tensor-likes are not close!; Mismatched elements: 1 / 20 (5.0%); Greatest absolute difference: 0.00146484375 at index (3,) (up to 1e-05 allowed)",
    (
        "nn.functional.mish",
        "float16",
    ): "wrong: sample 0 gradient[0]: Tensor-likes are not close!; Mismatched elements: 3 / 20 (15.0%); Greatest absolute difference: 0.0009765625 at index (12,) (up to 1e-05 allowed)",
    (
        "sparse.mm.reduce",
        "float32",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_sparse_mm_reduce_impl with layout torch.sparse_csr); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "sparse.mm.reduce",
        "float64",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_sparse_mm_reduce_impl with layout torch.sparse_csr); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "sparse.mm.reduce",
        "bfloat16",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_sparse_mm_reduce_impl with layout torch.sparse_csr); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "sparse.mm.reduce",
        "float16",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_sparse_mm_reduce_impl with layout torch.sparse_csr); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "sparse.sampled_addmm",
        "float32",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::sparse_sampled_addmm with layout torch.sparse_csr); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "sparse.sampled_addmm",
        "float64",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::sparse_sampled_addmm with layout torch.sparse_csr); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "sparse.sampled_addmm",
        "complex64",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::sparse_sampled_addmm with layout torch.sparse_csr); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "tensor_split",
        "float32",
    ): "error: sample 0: RuntimeError: tensor_split expected tensor_indices_or_sections to be on cpu, but it's on openreg:0",
    (
        "tensor_split",
        "float64",
    ): "error: sample 0: RuntimeError: tensor_split expected tensor_indices_or_sections to be on cpu, but it's on openreg:0",
    (
        "tensor_split",
        "bfloat16",
    ): "error: sample 0: RuntimeError: tensor_split expected tensor_indices_or_sections to be on cpu, but it's on openreg:0",
    (
        "tensor_split",
        "float16",
    ): "error: sample 0: RuntimeError: tensor_split expected tensor_indices_or_sections to be on cpu, but it's on openreg:0",
    (
        "tensor_split",
        "complex64",
    ): "error: sample 0: RuntimeError: tensor_split expected tensor_indices_or_sections to be on cpu, but it's on openreg:0",
    (
        "tensor_split",
        "int64",
    ): "error: sample 0: RuntimeError: tensor_split expected tensor_indices_or_sections to be on cpu, but it's on openreg:0",
    (
        "tensor_split",
        "bool",
    ): "error: sample 0: RuntimeError: tensor_split expected tensor_indices_or_sections to be on cpu, but it's on openreg:0",
    ("to", "float32"): "wrong: sample 0 output[0]: result on cpu, not openreg",
    ("to", "float64"): "wrong: sample 0 output[0]: result on cpu, not openreg",
    ("to", "bfloat16"): "wrong: sample 0 output[0]: result on cpu, not openreg",
    ("to", "float16"): "wrong: sample 0 output[0]: result on cpu, not openreg",
    ("to", "complex64"): "wrong: sample 0 output[0]: result on cpu, not openreg",
    ("to", "int64"): "wrong: sample 0 output[0]: result on cpu, not openreg",
    ("to", "bool"): "wrong: sample 0 output[0]: result on cpu, not openreg",
    (
        "to_sparse",
        "float32",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_to_sparse with layout torch.sparse_coo); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "to_sparse",
        "float64",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_to_sparse with layout torch.sparse_coo); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "to_sparse",
        "bfloat16",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_to_sparse with layout torch.sparse_coo); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "to_sparse",
        "float16",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_to_sparse with layout torch.sparse_coo); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "to_sparse",
        "complex64",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_to_sparse with layout torch.sparse_coo); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "to_sparse",
        "int64",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_to_sparse with layout torch.sparse_coo); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "to_sparse",
        "bool",
    ): "error: sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_to_sparse with layout torch.sparse_coo); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    # A sparse layout is refused at once on openreg (aten/Sparse.cpp): the
    # sample's sparse operands cannot move to the device.
    (
        "sparse.mm.reduce",
        "refused_dtypes",
    ): "wrong: complex32 sample 0: moving the inputs: NotImplementedError: openreg: sparse layouts are not supported (aten::_sparse_compressed_tensor_unsafe with layout torch.sparse_csr); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "sparse.sampled_addmm",
        "refused_dtypes",
    ): "wrong: float16 sample 0: moving the inputs: NotImplementedError: openreg: sparse layouts are not supported (aten::_sparse_compressed_tensor_unsafe with layout torch.sparse_csr); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first",
    (
        "to_sparse",
        "refused_dtypes",
    ): "wrong: complex32 sample 0: NotImplementedError: openreg: sparse layouts are not supported (aten::_to_sparse with layout torch.sparse_coo); openreg tensors are strided: keep sparse tensors on the CPU, or call to_dense() first; CPU: (no error)",
    # Flash attention has no CPU kernel (the OpInfo lists no CPU dtype): openreg runs it, as CUDA does
    # (aten/FlashAttention.cpp; tests/backend/test_flash_attention.py holds it to CPU's attention in float64).
    (
        "torch.ops.aten._flash_attention_forward",
        "refused_dtypes",
    ): "wrong: float32 sample 0: (no error); CPU: NotImplementedError: Could not run 'aten::_flash_attention_forward' with arguments from the 'CPU' backend",
    # torch's tensor_split takes its indices tensor on the CPU only (CUDA's
    # path raises the same): the survey moves every sample tensor to openreg.
    (
        "tensor_split",
        "refused_dtypes",
    ): "wrong: complex32 sample 0: RuntimeError: tensor_split expected tensor_indices_or_sections to be on cpu, but it's on openreg:0; CPU: (no error)",
}
