// Sparse layouts are not supported on openreg: every call that would make or
// take a sparse openreg tensor fails at once with an error naming openreg and
// the layout, instead of computing on the CPU first and failing when the
// result is moved (or PyTorch's generic "could not run ... Sparseopenreg").
// csrc/backend/README.md says why.
#include <string>

#include <torch/library.h>

#include "backend/OpRegistry.h"

namespace openreg::backend {

namespace {

const char* layoutName(c10::Layout layout) {
  switch (layout) {
    case c10::kSparse:
      return "sparse_coo";
    case c10::kSparseCsr:
      return "sparse_csr";
    case c10::kSparseCsc:
      return "sparse_csc";
    case c10::kSparseBsr:
      return "sparse_bsr";
    case c10::kSparseBsc:
      return "sparse_bsc";
    default:
      return "strided";
  }
}

// The sparse layout a call involves: a tensor argument's, else a factory's
// `layout` argument, else the dispatch key's family.
std::string sparseLayout(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args, c10::DispatchKeySet keys) {
  for (const c10::IValue& arg : args) {
    if (arg.isTensor() && arg.toTensor().defined() && arg.toTensor().layout() != c10::kStrided) {
      return layoutName(arg.toTensor().layout());
    }
  }
  for (size_t i = 0; i < args.size() && i < schema.arguments().size(); ++i) {
    if (schema.arguments()[i].name() == "layout" && args[i].isInt()) {
      const auto layout = static_cast<c10::Layout>(args[i].toInt());
      if (layout != c10::kStrided) return layoutName(layout);
    }
  }
  return keys.has(c10::DispatchKey::SparsePrivateUse1) ? "sparse_coo" : "sparse_csr";
}

[[noreturn]] void refuseSparse(const std::string& op, const std::string& layout) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "openreg: sparse layouts are not supported (", op, " with layout torch.", layout,
                              "); openreg tensors are strided: keep sparse tensors on the CPU, or call ",
                              "to_dense() first");
}

void sparseFallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const size_t numArgs = op.schema().arguments().size();
  refuseSparse(c10::toString(op.schema().operator_name()),
               sparseLayout(op.schema(), torch::jit::last(*stack, numArgs), keys));
}

template <const char* kLayout>
void refuseConversion(const c10::OperatorHandle& op, torch::jit::Stack*) {
  refuseSparse(c10::toString(op.schema().operator_name()), kLayout);
}

constexpr char kCoo[] = "sparse_coo";
constexpr char kCsr[] = "sparse_csr";
constexpr char kCsc[] = "sparse_csc";
constexpr char kBsr[] = "sparse_bsr";
constexpr char kBsc[] = "sparse_bsc";

}  // namespace

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparseFallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparseFallback>());
}

// A compressed-layout openreg tensor (CSR, CSC, BSR, BSC) is assembled by
// these composite constructors, which every path reaches: moving a CPU tensor
// (`_to_copy`), the `sparse_*_tensor` factories, `zeros(layout=...)`. As
// composites they run before the fallback above, so they are refused here,
// before the tensor exists.
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  for (const char* schema :
       {"_sparse_compressed_tensor_unsafe", "_sparse_compressed_tensor_with_dims", "_sparse_csr_tensor_unsafe",
        "_sparse_csc_tensor_unsafe", "_sparse_bsr_tensor_unsafe", "_sparse_bsc_tensor_unsafe"}) {
    m.impl(schema, torch::CppFunction::makeFromBoxedFunction<&sparseFallback>());
  }
}

// Dense openreg tensors to a sparse layout: refused before any work.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const auto& [schema, kernel] : std::initializer_list<std::pair<const char*, torch::CppFunction (*)()>>{
           {"_to_sparse", [] { return torch::CppFunction::makeFromBoxedFunction<&refuseConversion<kCoo>>(); }},
           {"_to_sparse.sparse_dim",
            [] { return torch::CppFunction::makeFromBoxedFunction<&refuseConversion<kCoo>>(); }},
           {"_to_sparse_csr", [] { return torch::CppFunction::makeFromBoxedFunction<&refuseConversion<kCsr>>(); }},
           {"_to_sparse_csc", [] { return torch::CppFunction::makeFromBoxedFunction<&refuseConversion<kCsc>>(); }},
           {"_to_sparse_bsr", [] { return torch::CppFunction::makeFromBoxedFunction<&refuseConversion<kBsr>>(); }},
           {"_to_sparse_bsc", [] { return torch::CppFunction::makeFromBoxedFunction<&refuseConversion<kBsc>>(); }},
       }) {
    m.impl(schema, kernel());
    recordOpPath(std::string("aten::") + schema, OpPath::Unsupported, "sparse layouts are not supported");
  }
}

}  // namespace openreg::backend
