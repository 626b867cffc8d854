// Pointwise operators: structured .out kernels through the generic mechanism
// (their functional and in-place forms reach these via ATen's default
// structured kernels), plus the few non-structured ones.
#include <ATen/ExpandUtils.h>
#include <ATen/MetaFunctions.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

using Unary = at::Tensor& (*)(const at::Tensor&, at::Tensor&);
using BinaryTT = at::Tensor& (*)(const at::Tensor&, const at::Tensor&, at::Tensor&);
using BinaryTS = at::Tensor& (*)(const at::Tensor&, const at::Scalar&, at::Tensor&);
using BinaryST = at::Tensor& (*)(const at::Scalar&, const at::Tensor&, at::Tensor&);

// Non-structured ops whose out= has a shape known from the inputs: resize
// out, then launch the CPU kernel.
void launchShapedOut(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::IntArrayRef shape,
                     const char* base, c10::ScalarType nameType) {
  const size_t numArgs = op.schema().arguments().size();
  c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, numArgs);
  const c10::Device device = commonDevice(args, op);
  c10::DeviceGuard guard(device);
  at::Tensor out = args.back().toTensor();
  at::native::resize_output(out, shape);
  launchCpuOp(op, args, device.index(), kernelName(base, nameType), elementwiseShape(out.numel()));
  torch::jit::drop(*stack, numArgs);
  stack->emplace_back(std::move(out));
}

template <const char* Base>
void unaryOut(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::Tensor self = torch::jit::peek(*stack, 0, op.schema().arguments().size()).toTensor();
  launchShapedOut(op, stack, self.sizes(), Base, self.scalar_type());
}

template <const char* Base>
void binaryOut(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t numArgs = op.schema().arguments().size();
  const at::Tensor self = torch::jit::peek(*stack, 0, numArgs).toTensor();
  const at::Tensor other = torch::jit::peek(*stack, 1, numArgs).toTensor();
  const auto shape = at::infer_size_dimvector(self.sizes(), other.sizes());
  launchShapedOut(op, stack, shape, Base, self.scalar_type());
}

constexpr char kAbs[] = "elementwise_abs";
constexpr char kLogicalNot[] = "elementwise_logical_not";
constexpr char kLogicalAnd[] = "elementwise_logical_and";
constexpr char kLogicalOr[] = "elementwise_logical_or";
constexpr char kLogicalXor[] = "elementwise_logical_xor";

// where(condition, self, other): broadcast of all three, type promotion of
// self and other.
void whereSelfOut(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t numArgs = op.schema().arguments().size();
  const at::Tensor condition = torch::jit::peek(*stack, 0, numArgs).toTensor();
  const at::Tensor self = torch::jit::peek(*stack, 1, numArgs).toTensor();
  const at::Tensor other = torch::jit::peek(*stack, 2, numArgs).toTensor();
  TORCH_CHECK(condition.scalar_type() == at::kBool || condition.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              condition.scalar_type());
  auto shape = at::infer_size_dimvector(condition.sizes(), self.sizes());
  shape = at::infer_size_dimvector(shape, other.sizes());
  launchShapedOut(op, stack, shape, "where", at::result_type(self, other));
}

at::Tensor whereSelf(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const auto resultType = at::result_type(self, other);
  const at::Tensor& anchor = self.is_privateuseone() ? self : (other.is_privateuseone() ? other : condition);
  at::Tensor out = at::empty({0}, anchor.options().dtype(resultType));
  return at::where_outf(condition, self, other, out);
}

// relu is not structured; it is clamp_min(0), computed in one kernel.
at::Tensor& reluOut(const at::Tensor& self, at::Tensor& out) {
  static const c10::OperatorHandle clampMin = findOp("aten::clamp_min", "out");
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  c10::DeviceGuard guard(self.device());
  std::vector<c10::IValue> args{self, c10::Scalar(0), out};
  launchCpuOp(clampMin, args, self.device().index(), kernelName("elementwise_relu", self.scalar_type()),
              elementwiseShape(self.numel()));
  return out;
}

at::Tensor relu(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self);
  return reluOut(self, out);
}

at::Tensor& reluInplace(at::Tensor& self) {
  return reluOut(self, self);
}

// silu_backward also has a CompositeImplicitAutograd kernel, which would win
// over the structured default on openreg and decompose into five kernels (and
// a host read); route it to the single device kernel, as CPU does.
at::Tensor siluBackward(const at::Tensor& grad_output, const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::result_type(grad_output, self)));
  return at::silu_backward_outf(grad_output, self, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Unary math.
  OPENREG_META_KERNEL(m, "neg.out", &at::meta::neg_outf, "elementwise_neg");
  OPENREG_META_KERNEL(m, "exp.out", &at::meta::exp_outf, "elementwise_exp");
  OPENREG_META_KERNEL(m, "exp2.out", &at::meta::exp2_outf, "elementwise_exp2");
  OPENREG_META_KERNEL(m, "expm1.out", &at::meta::expm1_outf, "elementwise_expm1");
  OPENREG_META_KERNEL(m, "log.out", &at::meta::log_outf, "elementwise_log");
  OPENREG_META_KERNEL(m, "log2.out", &at::meta::log2_outf, "elementwise_log2");
  OPENREG_META_KERNEL(m, "log10.out", &at::meta::log10_outf, "elementwise_log10");
  OPENREG_META_KERNEL(m, "log1p.out", &at::meta::log1p_outf, "elementwise_log1p");
  OPENREG_META_KERNEL(m, "sqrt.out", &at::meta::sqrt_outf, "elementwise_sqrt");
  OPENREG_META_KERNEL(m, "rsqrt.out", &at::meta::rsqrt_outf, "elementwise_rsqrt");
  OPENREG_META_KERNEL(m, "reciprocal.out", &at::meta::reciprocal_outf, "elementwise_reciprocal");
  OPENREG_META_KERNEL(m, "sin.out", &at::meta::sin_outf, "elementwise_sin");
  OPENREG_META_KERNEL(m, "cos.out", &at::meta::cos_outf, "elementwise_cos");
  OPENREG_META_KERNEL(m, "tan.out", &at::meta::tan_outf, "elementwise_tan");
  OPENREG_META_KERNEL(m, "sinh.out", &at::meta::sinh_outf, "elementwise_sinh");
  OPENREG_META_KERNEL(m, "cosh.out", &at::meta::cosh_outf, "elementwise_cosh");
  OPENREG_META_KERNEL(m, "tanh.out", &at::meta::tanh_outf, "elementwise_tanh");
  OPENREG_META_KERNEL(m, "asin.out", &at::meta::asin_outf, "elementwise_asin");
  OPENREG_META_KERNEL(m, "acos.out", &at::meta::acos_outf, "elementwise_acos");
  OPENREG_META_KERNEL(m, "atan.out", &at::meta::atan_outf, "elementwise_atan");
  OPENREG_META_KERNEL(m, "asinh.out", &at::meta::asinh_outf, "elementwise_asinh");
  OPENREG_META_KERNEL(m, "acosh.out", &at::meta::acosh_outf, "elementwise_acosh");
  OPENREG_META_KERNEL(m, "atanh.out", &at::meta::atanh_outf, "elementwise_atanh");
  OPENREG_META_KERNEL(m, "erf.out", &at::meta::erf_outf, "elementwise_erf");
  OPENREG_META_KERNEL(m, "erfc.out", &at::meta::erfc_outf, "elementwise_erfc");
  OPENREG_META_KERNEL(m, "erfinv.out", &at::meta::erfinv_outf, "elementwise_erfinv");
  OPENREG_META_KERNEL(m, "sigmoid.out", &at::meta::sigmoid_outf, "elementwise_sigmoid");
  OPENREG_META_KERNEL(m, "sign.out", &at::meta::sign_outf, "elementwise_sign");
  OPENREG_META_KERNEL(m, "sgn.out", &at::meta::sgn_outf, "elementwise_sgn");
  OPENREG_META_KERNEL(m, "signbit.out", &at::meta::signbit_outf, "elementwise_signbit");
  OPENREG_META_KERNEL(m, "floor.out", &at::meta::floor_outf, "elementwise_floor");
  OPENREG_META_KERNEL(m, "ceil.out", &at::meta::ceil_outf, "elementwise_ceil");
  OPENREG_META_KERNEL(m, "trunc.out", &at::meta::trunc_outf, "elementwise_trunc");
  OPENREG_META_KERNEL(m, "frac.out", &at::meta::frac_outf, "elementwise_frac");
  OPENREG_META_KERNEL(m, "round.out", static_cast<Unary>(&at::meta::round_outf), "elementwise_round");
  OPENREG_META_KERNEL(m, "round.decimals_out",
                      static_cast<at::Tensor& (*)(const at::Tensor&, int64_t, at::Tensor&)>(&at::meta::round_outf),
                      "elementwise_round");
  OPENREG_META_KERNEL(m, "lgamma.out", &at::meta::lgamma_outf, "elementwise_lgamma");
  OPENREG_META_KERNEL(m, "digamma.out", &at::meta::digamma_outf, "elementwise_digamma");
  OPENREG_META_KERNEL(m, "bitwise_not.out", &at::meta::bitwise_not_outf, "elementwise_bitwise_not");
  OPENREG_META_KERNEL(m, "isposinf.out", &at::meta::isposinf_outf, "elementwise_isposinf");
  OPENREG_META_KERNEL(m, "isneginf.out", &at::meta::isneginf_outf, "elementwise_isneginf");

  // Activations and their backward.
  OPENREG_META_KERNEL(m, "gelu.out", &at::meta::gelu_outf, "gelu_fwd");
  OPENREG_META_KERNEL(m, "gelu_backward.grad_input", &at::meta::gelu_backward_outf, "gelu_bwd");
  OPENREG_META_KERNEL(m, "silu.out", &at::meta::silu_outf, "silu_fwd");
  OPENREG_META_KERNEL(m, "silu_backward.grad_input", &at::meta::silu_backward_outf, "silu_bwd");
  OPENREG_META_KERNEL(m, "mish.out", &at::meta::mish_outf, "mish_fwd");
  OPENREG_META_KERNEL(m, "softplus.out", &at::meta::softplus_outf, "softplus_fwd");
  OPENREG_META_KERNEL(m, "softplus_backward.grad_input", &at::meta::softplus_backward_outf, "softplus_bwd");
  OPENREG_META_KERNEL(m, "leaky_relu.out", &at::meta::leaky_relu_outf, "leaky_relu_fwd");
  OPENREG_META_KERNEL(m, "leaky_relu_backward.grad_input", &at::meta::leaky_relu_backward_outf, "leaky_relu_bwd");
  OPENREG_META_KERNEL(m, "elu.out", &at::meta::elu_outf, "elu_fwd");
  OPENREG_META_KERNEL(m, "elu_backward.grad_input", &at::meta::elu_backward_outf, "elu_bwd");
  OPENREG_META_KERNEL(m, "hardsigmoid.out", &at::meta::hardsigmoid_outf, "hardsigmoid_fwd");
  OPENREG_META_KERNEL(m, "hardsigmoid_backward.grad_input", &at::meta::hardsigmoid_backward_outf, "hardsigmoid_bwd");
  OPENREG_META_KERNEL(m, "threshold.out", &at::meta::threshold_outf, "threshold_fwd");
  OPENREG_META_KERNEL(m, "threshold_backward.grad_input", &at::meta::threshold_backward_outf, "threshold_bwd");
  OPENREG_META_KERNEL(m, "sigmoid_backward.grad_input", &at::meta::sigmoid_backward_outf, "sigmoid_bwd");
  OPENREG_META_KERNEL(m, "tanh_backward.grad_input", &at::meta::tanh_backward_outf, "tanh_bwd");
  OPENREG_META_KERNEL(m, "glu.out", &at::meta::glu_outf, "glu_fwd");

  // Binary arithmetic.
  OPENREG_META_KERNEL(m, "add.out", &at::meta::add_outf, "elementwise_add");
  OPENREG_META_KERNEL(m, "sub.out", &at::meta::sub_outf, "elementwise_sub");
  OPENREG_META_KERNEL(m, "mul.out", &at::meta::mul_outf, "elementwise_mul");
  OPENREG_META_KERNEL(m, "div.out", static_cast<BinaryTT>(&at::meta::div_outf), "elementwise_div");
  OPENREG_META_KERNEL(m, "div.out_mode",
                      static_cast<at::Tensor& (*)(const at::Tensor&, const at::Tensor&, std::optional<c10::string_view>,
                                                  at::Tensor&)>(&at::meta::div_outf),
                      "elementwise_div");
  OPENREG_META_KERNEL(m, "remainder.Tensor_out", &at::meta::remainder_outf, "elementwise_remainder");
  OPENREG_META_KERNEL(m, "fmod.Tensor_out", &at::meta::fmod_outf, "elementwise_fmod");
  OPENREG_META_KERNEL(m, "pow.Tensor_Tensor_out", static_cast<BinaryTT>(&at::meta::pow_outf), "elementwise_pow");
  OPENREG_META_KERNEL(m, "pow.Tensor_Scalar_out", static_cast<BinaryTS>(&at::meta::pow_outf), "elementwise_pow");
  OPENREG_META_KERNEL(m, "pow.Scalar_out", static_cast<BinaryST>(&at::meta::pow_outf), "elementwise_pow");
  OPENREG_META_KERNEL(m, "maximum.out", &at::meta::maximum_outf, "elementwise_maximum");
  OPENREG_META_KERNEL(m, "minimum.out", &at::meta::minimum_outf, "elementwise_minimum");
  OPENREG_META_KERNEL(m, "fmax.out", &at::meta::fmax_outf, "elementwise_fmax");
  OPENREG_META_KERNEL(m, "fmin.out", &at::meta::fmin_outf, "elementwise_fmin");
  OPENREG_META_KERNEL(m, "atan2.out", &at::meta::atan2_outf, "elementwise_atan2");
  OPENREG_META_KERNEL(m, "hypot.out", &at::meta::hypot_outf, "elementwise_hypot");
  OPENREG_META_KERNEL(m, "copysign.out", &at::meta::copysign_outf, "elementwise_copysign");
  OPENREG_META_KERNEL(m, "logaddexp.out", &at::meta::logaddexp_outf, "elementwise_logaddexp");
  OPENREG_META_KERNEL(m, "xlogy.OutTensor", &at::meta::xlogy_outf, "elementwise_xlogy");
  OPENREG_META_KERNEL(m, "lerp.Scalar_out",
                      static_cast<at::Tensor& (*)(const at::Tensor&, const at::Tensor&, const at::Scalar&,
                                                  at::Tensor&)>(&at::meta::lerp_outf),
                      "elementwise_lerp");
  OPENREG_META_KERNEL(m, "lerp.Tensor_out",
                      static_cast<at::Tensor& (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                  at::Tensor&)>(&at::meta::lerp_outf),
                      "elementwise_lerp");
  OPENREG_META_KERNEL(m, "addcmul.out", &at::meta::addcmul_outf, "elementwise_addcmul");
  OPENREG_META_KERNEL(m, "addcdiv.out", &at::meta::addcdiv_outf, "elementwise_addcdiv");
  OPENREG_META_KERNEL(m, "bitwise_and.Tensor_out", &at::meta::bitwise_and_outf, "elementwise_bitwise_and");
  OPENREG_META_KERNEL(m, "bitwise_or.Tensor_out", &at::meta::bitwise_or_outf, "elementwise_bitwise_or");
  OPENREG_META_KERNEL(m, "bitwise_xor.Tensor_out", &at::meta::bitwise_xor_outf, "elementwise_bitwise_xor");

  // Clamps.
  OPENREG_META_KERNEL(m, "clamp.out",
                      static_cast<at::Tensor& (*)(const at::Tensor&, const std::optional<at::Scalar>&,
                                                  const std::optional<at::Scalar>&, at::Tensor&)>(&at::meta::clamp_outf),
                      "elementwise_clamp");
  OPENREG_META_KERNEL(m, "clamp.Tensor_out",
                      static_cast<at::Tensor& (*)(const at::Tensor&, const std::optional<at::Tensor>&,
                                                  const std::optional<at::Tensor>&, at::Tensor&)>(&at::meta::clamp_outf),
                      "elementwise_clamp");
  OPENREG_META_KERNEL(m, "clamp_min.out", static_cast<BinaryTS>(&at::meta::clamp_min_outf), "elementwise_clamp_min");
  OPENREG_META_KERNEL(m, "clamp_min.Tensor_out", static_cast<BinaryTT>(&at::meta::clamp_min_outf),
                      "elementwise_clamp_min");
  OPENREG_META_KERNEL(m, "clamp_max.out", static_cast<BinaryTS>(&at::meta::clamp_max_outf), "elementwise_clamp_max");
  OPENREG_META_KERNEL(m, "clamp_max.Tensor_out", static_cast<BinaryTT>(&at::meta::clamp_max_outf),
                      "elementwise_clamp_max");

  // Comparisons: named after the compared dtype, not the bool result.
  OPENREG_META_KERNEL(m, "eq.Scalar_out", static_cast<BinaryTS>(&at::meta::eq_outf), "elementwise_eq");
  OPENREG_META_KERNEL(m, "eq.Tensor_out", static_cast<BinaryTT>(&at::meta::eq_outf), "elementwise_eq");
  OPENREG_META_KERNEL(m, "ne.Scalar_out", static_cast<BinaryTS>(&at::meta::ne_outf), "elementwise_ne");
  OPENREG_META_KERNEL(m, "ne.Tensor_out", static_cast<BinaryTT>(&at::meta::ne_outf), "elementwise_ne");
  OPENREG_META_KERNEL(m, "lt.Scalar_out", static_cast<BinaryTS>(&at::meta::lt_outf), "elementwise_lt");
  OPENREG_META_KERNEL(m, "lt.Tensor_out", static_cast<BinaryTT>(&at::meta::lt_outf), "elementwise_lt");
  OPENREG_META_KERNEL(m, "le.Scalar_out", static_cast<BinaryTS>(&at::meta::le_outf), "elementwise_le");
  OPENREG_META_KERNEL(m, "le.Tensor_out", static_cast<BinaryTT>(&at::meta::le_outf), "elementwise_le");
  OPENREG_META_KERNEL(m, "gt.Scalar_out", static_cast<BinaryTS>(&at::meta::gt_outf), "elementwise_gt");
  OPENREG_META_KERNEL(m, "gt.Tensor_out", static_cast<BinaryTT>(&at::meta::gt_outf), "elementwise_gt");
  OPENREG_META_KERNEL(m, "ge.Scalar_out", static_cast<BinaryTS>(&at::meta::ge_outf), "elementwise_ge");
  OPENREG_META_KERNEL(m, "ge.Tensor_out", static_cast<BinaryTT>(&at::meta::ge_outf), "elementwise_ge");

  // Non-structured pointwise ops with explicit output shapes.
  m.impl("abs.out", torch::CppFunction::makeFromBoxedFunction<&unaryOut<kAbs>>());
  m.impl("logical_not.out", torch::CppFunction::makeFromBoxedFunction<&unaryOut<kLogicalNot>>());
  m.impl("logical_and.out", torch::CppFunction::makeFromBoxedFunction<&binaryOut<kLogicalAnd>>());
  m.impl("logical_or.out", torch::CppFunction::makeFromBoxedFunction<&binaryOut<kLogicalOr>>());
  m.impl("logical_xor.out", torch::CppFunction::makeFromBoxedFunction<&binaryOut<kLogicalXor>>());
  m.impl("where.self_out", torch::CppFunction::makeFromBoxedFunction<&whereSelfOut>());
  m.impl("where.self", TORCH_FN(whereSelf));
  m.impl("relu", TORCH_FN(relu));
  m.impl("relu_", TORCH_FN(reluInplace));
  m.impl("silu_backward", TORCH_FN(siluBackward));
  for (const auto& [op, kernel] : std::initializer_list<std::pair<const char*, const char*>>{
           {"abs.out", kAbs},
           {"logical_not.out", kLogicalNot},
           {"logical_and.out", kLogicalAnd},
           {"logical_or.out", kLogicalOr},
           {"logical_xor.out", kLogicalXor},
           {"where.self_out", "where"},
           {"where.self", "where"},
           {"relu", "elementwise_relu"},
           {"relu_", "elementwise_relu"},
           {"silu_backward", "silu_bwd"}}) {
    recordOpPath(std::string("aten::") + op, OpPath::kDevice, kernel);
  }
}

}  // namespace openreg::backend
