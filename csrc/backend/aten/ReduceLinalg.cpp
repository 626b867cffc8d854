// Reductions, scans, sorting, matrix products, softmax and losses, shape
// ops (cat, tril/triu) and range factories: structured .out kernels through
// the generic mechanism; var/std and dot with explicit output shapes.
#include <ATen/MetaFunctions.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

KernelSpec reduction(const char* base) { return KernelSpec{base, KernelStyle::Reduction}; }
KernelSpec rowwise(const char* base, int dimArg) { return KernelSpec{base, KernelStyle::Rowwise, -1, -1, -1, dimArg}; }
KernelSpec gemm(const char* base, int lhs, int rhs) { return KernelSpec{base, KernelStyle::Gemm, -1, lhs, rhs}; }
KernelSpec elementwise(const char* base, int dtypeArg = -1) {
  return KernelSpec{base, KernelStyle::Elementwise, dtypeArg};
}
KernelSpec viaFunctional(KernelSpec spec) {
  spec.functionalOverload = "";
  return spec;
}
// Range factories and eye: their Meta kernel is the CPU kernel (see KernelSpec).
KernelSpec factory(const char* base, int outArg) {
  KernelSpec spec{base, KernelStyle::Elementwise, outArg};
  spec.metaOnTwins = true;
  return spec;
}

void registerSpec(torch::Library& m, const char* schema, c10::KernelFunction meta, KernelSpec spec) {
  registerMetaKernel(m, schema, std::move(meta), std::move(spec));
}

template <class F>
c10::KernelFunction metaOf(F* fn) {
  return c10::KernelFunction::makeFromUnboxedRuntimeFunction(fn);
}

// The out= signatures of overloaded at::meta names.
using ReduceDim = at::Tensor& (*)(const at::Tensor&, int64_t, bool, at::Tensor&);
using ReduceDims = at::Tensor& (*)(const at::Tensor&, at::OptionalIntArrayRef, bool, at::Tensor&);
using ReduceAll = at::Tensor& (*)(const at::Tensor&, at::Tensor&);
using Norm = at::Tensor& (*)(const at::Tensor&, const std::optional<at::Scalar>&, at::IntArrayRef, bool, at::Tensor&);
using NormDtype = at::Tensor& (*)(const at::Tensor&, const std::optional<at::Scalar>&, at::IntArrayRef, bool,
                                  at::ScalarType, at::Tensor&);

// var / std / var_mean / std_mean: reduced shape from dims and keepdim.
c10::DimVector reducedShape(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  const auto mask = at::native::make_dim_mask(dim, self.dim());
  return at::native::shape_from_dim_mask(self, mask, keepdim);
}

c10::ScalarType realType(c10::ScalarType type) { return c10::toRealValueType(type); }

void launchReduction(const char* schemaName, const char* overload, c10::ArrayRef<ArgRef> args, const at::Tensor& self,
                     c10::ArrayRef<at::Tensor> outputs, const char* base, bool functional) {
  const c10::OperatorHandle op = findOp(schemaName, overload);
  const int64_t outputsCount = std::max<int64_t>(1, outputs[0].numel());
  launchCpuOp(op, args, self.device().index(), kernelName(base, self.scalar_type()),
              reductionShape(outputsCount, std::max<int64_t>(1, self.numel() / outputsCount)),
              functional ? outputs : c10::ArrayRef<at::Tensor>{});
}

at::Tensor& varCorrectionOut(const at::Tensor& self, at::OptionalIntArrayRef dim,
                             const std::optional<c10::Scalar>& correction, bool keepdim, at::Tensor& out) {
  c10::DeviceGuard guard(self.device());
  at::native::resize_output(out, reducedShape(self, dim, keepdim));
  launchReduction("aten::var", "correction_out", refArgs(self, dim, correction, keepdim, out), self, {out},
                  "reduce_var", false);
  return out;
}

at::Tensor varCorrection(const at::Tensor& self, at::OptionalIntArrayRef dim,
                         const std::optional<c10::Scalar>& correction, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options().dtype(realType(self.scalar_type())));
  return varCorrectionOut(self, dim, correction, keepdim, out);
}

at::Tensor& stdCorrectionOut(const at::Tensor& self, at::OptionalIntArrayRef dim,
                             const std::optional<c10::Scalar>& correction, bool keepdim, at::Tensor& out) {
  c10::DeviceGuard guard(self.device());
  at::native::resize_output(out, reducedShape(self, dim, keepdim));
  launchReduction("aten::std", "correction_out", refArgs(self, dim, correction, keepdim, out), self, {out},
                  "reduce_std", false);
  return out;
}

at::Tensor stdCorrection(const at::Tensor& self, at::OptionalIntArrayRef dim,
                         const std::optional<c10::Scalar>& correction, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options().dtype(realType(self.scalar_type())));
  return stdCorrectionOut(self, dim, correction, keepdim, out);
}

std::tuple<at::Tensor, at::Tensor> varMeanCorrection(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                     const std::optional<c10::Scalar>& correction, bool keepdim) {
  c10::DeviceGuard guard(self.device());
  const auto shape = reducedShape(self, dim, keepdim);
  at::Tensor var = at::empty(shape, self.options().dtype(realType(self.scalar_type())));
  at::Tensor mean = at::empty(shape, self.options());
  launchReduction("aten::var_mean", "correction", refArgs(self, dim, correction, keepdim), self, {var, mean},
                  "reduce_var_mean", true);
  return {var, mean};
}

std::tuple<at::Tensor, at::Tensor> stdMeanCorrection(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                     const std::optional<c10::Scalar>& correction, bool keepdim) {
  c10::DeviceGuard guard(self.device());
  const auto shape = reducedShape(self, dim, keepdim);
  at::Tensor std = at::empty(shape, self.options().dtype(realType(self.scalar_type())));
  at::Tensor mean = at::empty(shape, self.options());
  launchReduction("aten::std_mean", "correction", refArgs(self, dim, correction, keepdim), self, {std, mean},
                  "reduce_std_mean", true);
  return {std, mean};
}

// max() / min() over all elements.
at::Tensor reduceAll(const at::Tensor& self, const char* name, const char* base) {
  TORCH_CHECK(self.numel() > 0, name, "(): Expected reduction dim to be specified for input.numel() == 0. ",
              "Specify the reduction dim with the 'dim' argument.");
  c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({}, self.options());
  launchReduction((std::string("aten::") + name).c_str(), "", refArgs(self), self, {out}, base, true);
  return out;
}

at::Tensor maxAll(const at::Tensor& self) { return reduceAll(self, "max", "reduce_max"); }
at::Tensor minAll(const at::Tensor& self) { return reduceAll(self, "min", "reduce_min"); }

// dot / vdot: 1-D x 1-D -> 0-dim.
at::Tensor dotLike(const at::Tensor& self, const at::Tensor& other, const char* name) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ", other.dim(),
              "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [", self.numel(), "] and src [",
              other.numel(), "] to have the same number of elements, but got ", self.numel(), " and ", other.numel(),
              " elements respectively");
  TORCH_CHECK(self.device() == other.device(), "Expected all tensors to be on the same device, but found at least ",
              "two devices, ", self.device(), " and ", other.device(), "!");
  c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({}, self.options());
  launchReduction((std::string("aten::") + name).c_str(), "", refArgs(self, other), self, {out}, name, true);
  return out;
}

at::Tensor dot(const at::Tensor& self, const at::Tensor& other) { return dotLike(self, other, "dot"); }
at::Tensor vdot(const at::Tensor& self, const at::Tensor& other) { return dotLike(self, other, "vdot"); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Reductions.
  OPENREG_STRUCTURED(m, "sum.IntList_out", sum, NO_INPLACE, reduction("reduce_sum"));
  OPENREG_STRUCTURED(m, "mean.out", mean, NO_INPLACE, reduction("reduce_mean"));
  OPENREG_STRUCTURED(m, "prod.int_out", prod, NO_INPLACE, reduction("reduce_prod"));
  OPENREG_STRUCTURED(m, "amax.out", amax, NO_INPLACE, reduction("reduce_amax"));
  OPENREG_STRUCTURED(m, "amin.out", amin, NO_INPLACE, reduction("reduce_amin"));
  OPENREG_STRUCTURED(m, "aminmax.out", aminmax, NO_INPLACE, reduction("reduce_aminmax"));
  OPENREG_STRUCTURED(m, "argmax.out", argmax, NO_INPLACE, reduction("reduce_argmax"));
  OPENREG_STRUCTURED(m, "argmin.out", argmin, NO_INPLACE, reduction("reduce_argmin"));
  OPENREG_STRUCTURED(m, "max.dim_max", max, NO_INPLACE, reduction("reduce_max"));
  OPENREG_STRUCTURED(m, "min.dim_min", min, NO_INPLACE, reduction("reduce_min"));
  OPENREG_STRUCTURED_SIG(m, "all.out", all, ReduceDim, NO_INPLACE, reduction("reduce_all"));
  OPENREG_STRUCTURED_SIG(m, "all.dims_out", all, ReduceDims, NO_INPLACE, reduction("reduce_all"));
  OPENREG_STRUCTURED_SIG(m, "all.all_out", all, ReduceAll, NO_INPLACE, reduction("reduce_all"));
  OPENREG_STRUCTURED_SIG(m, "any.out", any, ReduceDim, NO_INPLACE, reduction("reduce_any"));
  OPENREG_STRUCTURED_SIG(m, "any.dims_out", any, ReduceDims, NO_INPLACE, reduction("reduce_any"));
  OPENREG_STRUCTURED_SIG(m, "any.all_out", any, ReduceAll, NO_INPLACE, reduction("reduce_any"));
  OPENREG_STRUCTURED_SIG(m, "norm.out", norm, Norm, NO_INPLACE, reduction("reduce_norm"));
  OPENREG_STRUCTURED_SIG(m, "norm.dtype_out", norm, NormDtype, NO_INPLACE, reduction("reduce_norm"));
  OPENREG_STRUCTURED(m, "linalg_vector_norm.out", linalg_vector_norm, NO_INPLACE, reduction("reduce_vector_norm"));
  m.impl("var.correction_out", TORCH_FN(varCorrectionOut));
  m.impl("var.correction", TORCH_FN(varCorrection));
  m.impl("std.correction_out", TORCH_FN(stdCorrectionOut));
  m.impl("std.correction", TORCH_FN(stdCorrection));
  m.impl("var_mean.correction", TORCH_FN(varMeanCorrection));
  m.impl("std_mean.correction", TORCH_FN(stdMeanCorrection));
  m.impl("max", TORCH_FN(maxAll));
  m.impl("min", TORCH_FN(minAll));

  // Scans and sorting.
  OPENREG_STRUCTURED(m, "cumsum.out", cumsum, WITH_INPLACE, rowwise("scan_cumsum", 1));
  OPENREG_STRUCTURED(m, "cumprod.out", cumprod, WITH_INPLACE, rowwise("scan_cumprod", 1));
  OPENREG_STRUCTURED(m, "sort.values_stable", sort, NO_INPLACE, rowwise("sort", 2));
  OPENREG_STRUCTURED(m, "topk.values", topk, NO_INPLACE, rowwise("topk", 2));

  // Matrix products.
  OPENREG_STRUCTURED(m, "mm.out", mm, NO_INPLACE, gemm("gemm", 0, 1));
  OPENREG_STRUCTURED(m, "addmm.out", addmm, WITH_INPLACE, gemm("gemm_bias", 1, 2));
  OPENREG_STRUCTURED(m, "_addmm_activation.out", _addmm_activation, NO_INPLACE, gemm("gemm_bias_act", 1, 2));
  OPENREG_STRUCTURED(m, "bmm.out", bmm, NO_INPLACE, gemm("gemm_batched", 0, 1));
  OPENREG_STRUCTURED(m, "baddbmm.out", baddbmm, WITH_INPLACE, gemm("gemm_batched_bias", 1, 2));
  OPENREG_STRUCTURED(m, "addmv.out", addmv, WITH_INPLACE, reduction("gemv"));
  m.impl("dot", TORCH_FN(dot));
  m.impl("vdot", TORCH_FN(vdot));

  // Softmax and losses.
  OPENREG_STRUCTURED(m, "_softmax.out", _softmax, NO_INPLACE, rowwise("softmax_fwd", 1));
  OPENREG_STRUCTURED(m, "_log_softmax.out", _log_softmax, NO_INPLACE, rowwise("log_softmax_fwd", 1));
  OPENREG_STRUCTURED(m, "_softmax_backward_data.out", _softmax_backward_data, NO_INPLACE, rowwise("softmax_bwd", 2));
  OPENREG_STRUCTURED(m, "_log_softmax_backward_data.out", _log_softmax_backward_data, NO_INPLACE,
                     rowwise("log_softmax_bwd", 2));
  OPENREG_STRUCTURED(m, "nll_loss_forward.output", nll_loss_forward, NO_INPLACE, reduction("nll_loss_fwd"));
  OPENREG_STRUCTURED(m, "nll_loss_backward.grad_input", nll_loss_backward, NO_INPLACE, elementwise("nll_loss_bwd", 1));
  OPENREG_STRUCTURED(m, "mse_loss.out", mse_loss, NO_INPLACE, viaFunctional(reduction("mse_loss_fwd")));
  OPENREG_STRUCTURED(m, "smooth_l1_loss.out", smooth_l1_loss, NO_INPLACE,
                     viaFunctional(reduction("smooth_l1_loss_fwd")));

  // Shapes and factories.
  OPENREG_STRUCTURED(m, "cat.out", cat, NO_INPLACE, elementwise("concat"));
  OPENREG_STRUCTURED(m, "tril.out", tril, WITH_INPLACE, elementwise("tril"));
  OPENREG_STRUCTURED(m, "triu.out", triu, WITH_INPLACE, elementwise("triu"));
  registerSpec(m, "arange.start_out", metaOf(&at::meta::arange_outf), factory("arange", 3));
  registerSpec(m, "range.out", metaOf(&at::meta::range_outf), factory("range", 3));
  registerSpec(m, "linspace.out", metaOf(&at::meta::linspace_outf), factory("linspace", 3));
  registerSpec(m, "logspace.out", metaOf(&at::meta::logspace_outf), factory("logspace", 4));
  registerSpec(m, "eye.out", metaOf(static_cast<at::Tensor& (*)(int64_t, at::Tensor&)>(&at::meta::eye_outf)),
               factory("eye", 1));
  registerSpec(m, "eye.m_out", metaOf(static_cast<at::Tensor& (*)(int64_t, int64_t, at::Tensor&)>(&at::meta::eye_outf)),
               factory("eye", 2));

  for (const auto& [op, kernel] :
       std::initializer_list<std::pair<const char*, const char*>>{{"var.correction_out", "reduce_var"},
                                                                  {"var.correction", "reduce_var"},
                                                                  {"std.correction_out", "reduce_std"},
                                                                  {"std.correction", "reduce_std"},
                                                                  {"var_mean.correction", "reduce_var_mean"},
                                                                  {"std_mean.correction", "reduce_std_mean"},
                                                                  {"max", "reduce_max"},
                                                                  {"min", "reduce_min"},
                                                                  {"dot", "dot"},
                                                                  {"vdot", "vdot"}}) {
    recordOpPath(std::string("aten::") + op, OpPath::Device, kernel);
  }
}

}  // namespace openreg::backend
