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

KernelSpec reduction(const char* base) {
  return KernelSpec{base, KernelStyle::kReduction};
}
KernelSpec rowwise(const char* base, int dimArg) {
  return KernelSpec{base, KernelStyle::kRowwise, -1, -1, -1, dimArg};
}
KernelSpec gemm(const char* base, int lhs, int rhs) {
  return KernelSpec{base, KernelStyle::kGemm, -1, lhs, rhs};
}
KernelSpec elementwise(const char* base, int dtypeArg = -1) {
  return KernelSpec{base, KernelStyle::kElementwise, dtypeArg};
}
KernelSpec viaFunctional(KernelSpec spec) {
  spec.functionalOverload = "";
  return spec;
}
// Range factories and eye: their Meta kernel is the CPU kernel (see KernelSpec).
KernelSpec factory(const char* base, int outArg) {
  KernelSpec spec{base, KernelStyle::kElementwise, outArg};
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

// var / std / var_mean / std_mean: reduced shape from dims and keepdim.
c10::DimVector reducedShape(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  const auto mask = at::native::make_dim_mask(dim, self.dim());
  return at::native::shape_from_dim_mask(self, mask, keepdim);
}

c10::ScalarType realType(c10::ScalarType type) {
  return c10::toRealValueType(type);
}

void launchReduction(const char* schemaName, const char* overload, std::vector<c10::IValue> args,
                     const at::Tensor& self, c10::ArrayRef<at::Tensor> outputs, const char* base, bool functional) {
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
  launchReduction("aten::var", "correction_out",
                  {self, dim.has_value() ? c10::IValue(dim->vec()) : c10::IValue(), correction, keepdim, out}, self,
                  {out}, "reduce_var", false);
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
  launchReduction("aten::std", "correction_out",
                  {self, dim.has_value() ? c10::IValue(dim->vec()) : c10::IValue(), correction, keepdim, out}, self,
                  {out}, "reduce_std", false);
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
  launchReduction("aten::var_mean", "correction",
                  {self, dim.has_value() ? c10::IValue(dim->vec()) : c10::IValue(), correction, keepdim}, self,
                  {var, mean}, "reduce_var_mean", true);
  return {var, mean};
}

std::tuple<at::Tensor, at::Tensor> stdMeanCorrection(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                                     const std::optional<c10::Scalar>& correction, bool keepdim) {
  c10::DeviceGuard guard(self.device());
  const auto shape = reducedShape(self, dim, keepdim);
  at::Tensor std = at::empty(shape, self.options().dtype(realType(self.scalar_type())));
  at::Tensor mean = at::empty(shape, self.options());
  launchReduction("aten::std_mean", "correction",
                  {self, dim.has_value() ? c10::IValue(dim->vec()) : c10::IValue(), correction, keepdim}, self,
                  {std, mean}, "reduce_std_mean", true);
  return {std, mean};
}

// max() / min() over all elements.
at::Tensor reduceAll(const at::Tensor& self, const char* name, const char* base) {
  TORCH_CHECK(self.numel() > 0, name, "(): Expected reduction dim to be specified for input.numel() == 0. ",
              "Specify the reduction dim with the 'dim' argument.");
  c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({}, self.options());
  launchReduction((std::string("aten::") + name).c_str(), "", {self}, self, {out}, base, true);
  return out;
}

at::Tensor maxAll(const at::Tensor& self) {
  return reduceAll(self, "max", "reduce_max");
}
at::Tensor minAll(const at::Tensor& self) {
  return reduceAll(self, "min", "reduce_min");
}

// dot / vdot: 1-D x 1-D -> 0-dim.
at::Tensor dotLike(const at::Tensor& self, const at::Tensor& other, const char* name) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ",
              other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [", self.numel(),
              "] and src [", other.numel(), "] to have the same number of elements, but got ", self.numel(), " and ",
              other.numel(), " elements respectively");
  TORCH_CHECK(self.device() == other.device(), "Expected all tensors to be on the same device, but found at least ",
              "two devices, ", self.device(), " and ", other.device(), "!");
  c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({}, self.options());
  launchReduction((std::string("aten::") + name).c_str(), "", {self, other}, self, {out}, name, true);
  return out;
}

at::Tensor dot(const at::Tensor& self, const at::Tensor& other) {
  return dotLike(self, other, "dot");
}
at::Tensor vdot(const at::Tensor& self, const at::Tensor& other) {
  return dotLike(self, other, "vdot");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Reductions.
  registerSpec(m, "sum.IntList_out", metaOf(&at::meta::sum_outf), reduction("reduce_sum"));
  registerSpec(m, "mean.out", metaOf(&at::meta::mean_outf), reduction("reduce_mean"));
  registerSpec(m, "prod.int_out", metaOf(&at::meta::prod_outf), reduction("reduce_prod"));
  registerSpec(m, "amax.out", metaOf(&at::meta::amax_outf), reduction("reduce_amax"));
  registerSpec(m, "amin.out", metaOf(&at::meta::amin_outf), reduction("reduce_amin"));
  registerSpec(m, "aminmax.out", metaOf(&at::meta::aminmax_outf), reduction("reduce_aminmax"));
  registerSpec(m, "argmax.out", metaOf(&at::meta::argmax_outf), reduction("reduce_argmax"));
  registerSpec(m, "argmin.out", metaOf(&at::meta::argmin_outf), reduction("reduce_argmin"));
  registerSpec(m, "max.dim_max", metaOf(&at::meta::max_outf), reduction("reduce_max"));
  registerSpec(m, "min.dim_min", metaOf(&at::meta::min_outf), reduction("reduce_min"));
  registerSpec(m, "all.out",
               metaOf(static_cast<at::Tensor& (*)(const at::Tensor&, int64_t, bool, at::Tensor&)>(&at::meta::all_outf)),
               reduction("reduce_all"));
  registerSpec(m, "all.dims_out",
               metaOf(static_cast<at::Tensor& (*)(const at::Tensor&, at::OptionalIntArrayRef, bool, at::Tensor&)>(
                   &at::meta::all_outf)),
               reduction("reduce_all"));
  registerSpec(m, "all.all_out", metaOf(static_cast<at::Tensor& (*)(const at::Tensor&, at::Tensor&)>(&at::meta::all_outf)),
               reduction("reduce_all"));
  registerSpec(m, "any.out",
               metaOf(static_cast<at::Tensor& (*)(const at::Tensor&, int64_t, bool, at::Tensor&)>(&at::meta::any_outf)),
               reduction("reduce_any"));
  registerSpec(m, "any.dims_out",
               metaOf(static_cast<at::Tensor& (*)(const at::Tensor&, at::OptionalIntArrayRef, bool, at::Tensor&)>(
                   &at::meta::any_outf)),
               reduction("reduce_any"));
  registerSpec(m, "any.all_out", metaOf(static_cast<at::Tensor& (*)(const at::Tensor&, at::Tensor&)>(&at::meta::any_outf)),
               reduction("reduce_any"));
  registerSpec(m, "norm.out",
               metaOf(static_cast<at::Tensor& (*)(const at::Tensor&, const std::optional<at::Scalar>&, at::IntArrayRef,
                                                  bool, at::Tensor&)>(&at::meta::norm_outf)),
               reduction("reduce_norm"));
  registerSpec(m, "norm.dtype_out",
               metaOf(static_cast<at::Tensor& (*)(const at::Tensor&, const std::optional<at::Scalar>&, at::IntArrayRef,
                                                  bool, at::ScalarType, at::Tensor&)>(&at::meta::norm_outf)),
               reduction("reduce_norm"));
  registerSpec(m, "linalg_vector_norm.out", metaOf(&at::meta::linalg_vector_norm_outf), reduction("reduce_vector_norm"));
  m.impl("var.correction_out", TORCH_FN(varCorrectionOut));
  m.impl("var.correction", TORCH_FN(varCorrection));
  m.impl("std.correction_out", TORCH_FN(stdCorrectionOut));
  m.impl("std.correction", TORCH_FN(stdCorrection));
  m.impl("var_mean.correction", TORCH_FN(varMeanCorrection));
  m.impl("std_mean.correction", TORCH_FN(stdMeanCorrection));
  m.impl("max", TORCH_FN(maxAll));
  m.impl("min", TORCH_FN(minAll));

  // Scans and sorting.
  registerSpec(m, "cumsum.out", metaOf(&at::meta::cumsum_outf), rowwise("scan_cumsum", 1));
  registerSpec(m, "cumprod.out", metaOf(&at::meta::cumprod_outf), rowwise("scan_cumprod", 1));
  registerSpec(m, "sort.values_stable", metaOf(&at::meta::sort_outf), rowwise("sort", 2));
  registerSpec(m, "topk.values", metaOf(&at::meta::topk_outf), rowwise("topk", 2));

  // Matrix products.
  registerSpec(m, "mm.out", metaOf(&at::meta::mm_outf), gemm("gemm", 0, 1));
  registerSpec(m, "addmm.out", metaOf(&at::meta::addmm_outf), gemm("gemm_bias", 1, 2));
  registerSpec(m, "_addmm_activation.out", metaOf(&at::meta::_addmm_activation_outf), gemm("gemm_bias_act", 1, 2));
  registerSpec(m, "bmm.out", metaOf(&at::meta::bmm_outf), gemm("gemm_batched", 0, 1));
  registerSpec(m, "baddbmm.out", metaOf(&at::meta::baddbmm_outf), gemm("gemm_batched_bias", 1, 2));
  registerSpec(m, "addmv.out", metaOf(&at::meta::addmv_outf), reduction("gemv"));
  m.impl("dot", TORCH_FN(dot));
  m.impl("vdot", TORCH_FN(vdot));

  // Softmax and losses.
  registerSpec(m, "_softmax.out", metaOf(&at::meta::_softmax_outf), rowwise("softmax_fwd", 1));
  registerSpec(m, "_log_softmax.out", metaOf(&at::meta::_log_softmax_outf), rowwise("log_softmax_fwd", 1));
  registerSpec(m, "_softmax_backward_data.out", metaOf(&at::meta::_softmax_backward_data_outf),
               rowwise("softmax_bwd", 2));
  registerSpec(m, "_log_softmax_backward_data.out", metaOf(&at::meta::_log_softmax_backward_data_outf),
               rowwise("log_softmax_bwd", 2));
  registerSpec(m, "nll_loss_forward.output", metaOf(&at::meta::nll_loss_forward_outf), reduction("nll_loss_fwd"));
  registerSpec(m, "nll_loss_backward.grad_input", metaOf(&at::meta::nll_loss_backward_outf),
               elementwise("nll_loss_bwd", 1));
  registerSpec(m, "mse_loss.out", metaOf(&at::meta::mse_loss_outf), viaFunctional(reduction("mse_loss_fwd")));
  registerSpec(m, "smooth_l1_loss.out", metaOf(&at::meta::smooth_l1_loss_outf),
               viaFunctional(reduction("smooth_l1_loss_fwd")));

  // Shapes and factories.
  registerSpec(m, "cat.out", metaOf(&at::meta::cat_outf), elementwise("concat"));
  registerSpec(m, "tril.out", metaOf(&at::meta::tril_outf), elementwise("tril"));
  registerSpec(m, "triu.out", metaOf(&at::meta::triu_outf), elementwise("triu"));
  registerSpec(m, "arange.start_out", metaOf(&at::meta::arange_outf), factory("arange", 3));
  registerSpec(m, "range.out", metaOf(&at::meta::range_outf), factory("range", 3));
  registerSpec(m, "linspace.out", metaOf(&at::meta::linspace_outf), factory("linspace", 3));
  registerSpec(m, "logspace.out", metaOf(&at::meta::logspace_outf), factory("logspace", 4));
  registerSpec(m, "eye.out", metaOf(static_cast<at::Tensor& (*)(int64_t, at::Tensor&)>(&at::meta::eye_outf)),
               factory("eye", 1));
  registerSpec(m, "eye.m_out",
               metaOf(static_cast<at::Tensor& (*)(int64_t, int64_t, at::Tensor&)>(&at::meta::eye_outf)),
               factory("eye", 2));

  for (const auto& [op, kernel] : std::initializer_list<std::pair<const char*, const char*>>{
           {"var.correction_out", "reduce_var"},
           {"var.correction", "reduce_var"},
           {"std.correction_out", "reduce_std"},
           {"std.correction", "reduce_std"},
           {"var_mean.correction", "reduce_var_mean"},
           {"std_mean.correction", "reduce_std_mean"},
           {"max", "reduce_max"},
           {"min", "reduce_min"},
           {"dot", "dot"},
           {"vdot", "vdot"}}) {
    recordOpPath(std::string("aten::") + op, OpPath::kDevice, kernel);
  }
}

}  // namespace openreg::backend
