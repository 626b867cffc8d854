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
using UnaryInt = at::Tensor& (*)(const at::Tensor&, int64_t, at::Tensor&);
using BinaryTTMode = at::Tensor& (*)(const at::Tensor&, const at::Tensor&, std::optional<c10::string_view>,
                                     at::Tensor&);
using TernaryTTS = at::Tensor& (*)(const at::Tensor&, const at::Tensor&, const at::Scalar&, at::Tensor&);
using TernaryTTT = at::Tensor& (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::Tensor&);
using ClampScalars = at::Tensor& (*)(const at::Tensor&, const std::optional<at::Scalar>&,
                                     const std::optional<at::Scalar>&, at::Tensor&);
using ClampTensors = at::Tensor& (*)(const at::Tensor&, const std::optional<at::Tensor>&,
                                     const std::optional<at::Tensor>&, at::Tensor&);

// Non-structured ops whose out= has a shape known from the inputs: resize
// out, then launch the CPU kernel.
void launchShapedOut(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::IntArrayRef shape, const char* base,
                     c10::ScalarType nameType) {
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

template <const char* kBase>
void unaryOut(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::Tensor self = torch::jit::peek(*stack, 0, op.schema().arguments().size()).toTensor();
  launchShapedOut(op, stack, self.sizes(), kBase, self.scalar_type());
}

template <const char* kBase>
void binaryOut(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t numArgs = op.schema().arguments().size();
  const at::Tensor self = torch::jit::peek(*stack, 0, numArgs).toTensor();
  const at::Tensor other = torch::jit::peek(*stack, 1, numArgs).toTensor();
  const auto shape = at::infer_size_dimvector(self.sizes(), other.sizes());
  launchShapedOut(op, stack, shape, kBase, self.scalar_type());
}

constexpr char kAbs[] = "elementwise_abs";
constexpr char kLogicalNot[] = "elementwise_logical_not";
constexpr char kLogicalAnd[] = "elementwise_logical_and";
constexpr char kLogicalOr[] = "elementwise_logical_or";
constexpr char kLogicalXor[] = "elementwise_logical_xor";

// where(condition, self, other): broadcast of all three, type promotion of
// self and other.
c10::DimVector whereShape(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(condition.scalar_type() == at::kBool || condition.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", condition.scalar_type());
  auto shape = at::infer_size_dimvector(condition.sizes(), self.sizes());
  return at::infer_size_dimvector(shape, other.sizes());
}

void whereSelfOut(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t numArgs = op.schema().arguments().size();
  const at::Tensor condition = torch::jit::peek(*stack, 0, numArgs).toTensor();
  const at::Tensor self = torch::jit::peek(*stack, 1, numArgs).toTensor();
  const at::Tensor other = torch::jit::peek(*stack, 2, numArgs).toTensor();
  launchShapedOut(op, stack, whereShape(condition, self, other), "where", at::result_type(self, other));
}

// Launches where.self_out itself: calling it through the dispatcher would
// nest a second aten::where in profiles.
at::Tensor whereSelf(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  static const c10::OperatorHandle kWhereOut = findOp("aten::where", "self_out");
  const auto resultType = at::result_type(self, other);
  const auto shape = whereShape(condition, self, other);
  const c10::Device device = commonDevice(refArgs(condition, self, other), kWhereOut);
  c10::DeviceGuard guard(device);
  at::Tensor out = emptyDevice(shape, resultType);
  launchCpuOp(kWhereOut, refArgs(condition, self, other, out), device.index(), kernelName("where", resultType),
              elementwiseShape(out.numel()));
  return out;
}

// relu is not structured; it is clamp_min(0), computed in one kernel.
at::Tensor& reluOut(const at::Tensor& self, at::Tensor& out) {
  static const c10::OperatorHandle kClampMin = findOp("aten::clamp_min", "out");
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  c10::DeviceGuard guard(self.device());
  launchCpuOp(kClampMin, refArgs(self, c10::Scalar(0), out), self.device().index(),
              kernelName("elementwise_relu", self.scalar_type()), elementwiseShape(self.numel()));
  return out;
}

at::Tensor relu(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self);
  return reluOut(self, out);
}

at::Tensor& reluInplace(at::Tensor& self) { return reluOut(self, self); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Unary math.
  OPENREG_STRUCTURED(m, "neg.out", neg, WITH_INPLACE, "elementwise_neg");
  OPENREG_STRUCTURED(m, "exp.out", exp, WITH_INPLACE, "elementwise_exp");
  OPENREG_STRUCTURED(m, "exp2.out", exp2, WITH_INPLACE, "elementwise_exp2");
  OPENREG_STRUCTURED(m, "expm1.out", expm1, WITH_INPLACE, "elementwise_expm1");
  OPENREG_STRUCTURED(m, "log.out", log, WITH_INPLACE, "elementwise_log");
  OPENREG_STRUCTURED(m, "log2.out", log2, WITH_INPLACE, "elementwise_log2");
  OPENREG_STRUCTURED(m, "log10.out", log10, WITH_INPLACE, "elementwise_log10");
  OPENREG_STRUCTURED(m, "log1p.out", log1p, WITH_INPLACE, "elementwise_log1p");
  OPENREG_STRUCTURED(m, "sqrt.out", sqrt, WITH_INPLACE, "elementwise_sqrt");
  OPENREG_STRUCTURED(m, "rsqrt.out", rsqrt, WITH_INPLACE, "elementwise_rsqrt");
  OPENREG_STRUCTURED(m, "reciprocal.out", reciprocal, WITH_INPLACE, "elementwise_reciprocal");
  OPENREG_STRUCTURED(m, "sin.out", sin, WITH_INPLACE, "elementwise_sin");
  OPENREG_STRUCTURED(m, "cos.out", cos, WITH_INPLACE, "elementwise_cos");
  OPENREG_STRUCTURED(m, "tan.out", tan, WITH_INPLACE, "elementwise_tan");
  OPENREG_STRUCTURED(m, "sinh.out", sinh, WITH_INPLACE, "elementwise_sinh");
  OPENREG_STRUCTURED(m, "cosh.out", cosh, WITH_INPLACE, "elementwise_cosh");
  OPENREG_STRUCTURED(m, "tanh.out", tanh, WITH_INPLACE, "elementwise_tanh");
  OPENREG_STRUCTURED(m, "asin.out", asin, WITH_INPLACE, "elementwise_asin");
  OPENREG_STRUCTURED(m, "acos.out", acos, WITH_INPLACE, "elementwise_acos");
  OPENREG_STRUCTURED(m, "atan.out", atan, WITH_INPLACE, "elementwise_atan");
  OPENREG_STRUCTURED(m, "asinh.out", asinh, WITH_INPLACE, "elementwise_asinh");
  OPENREG_STRUCTURED(m, "acosh.out", acosh, WITH_INPLACE, "elementwise_acosh");
  OPENREG_STRUCTURED(m, "atanh.out", atanh, WITH_INPLACE, "elementwise_atanh");
  OPENREG_STRUCTURED(m, "erf.out", erf, WITH_INPLACE, "elementwise_erf");
  OPENREG_STRUCTURED(m, "erfc.out", erfc, WITH_INPLACE, "elementwise_erfc");
  OPENREG_STRUCTURED(m, "erfinv.out", erfinv, WITH_INPLACE, "elementwise_erfinv");
  OPENREG_STRUCTURED(m, "sigmoid.out", sigmoid, WITH_INPLACE, "elementwise_sigmoid");
  OPENREG_STRUCTURED(m, "sign.out", sign, WITH_INPLACE, "elementwise_sign");
  OPENREG_STRUCTURED(m, "sgn.out", sgn, WITH_INPLACE, "elementwise_sgn");
  OPENREG_STRUCTURED(m, "signbit.out", signbit, NO_INPLACE, "elementwise_signbit");
  OPENREG_STRUCTURED(m, "floor.out", floor, WITH_INPLACE, "elementwise_floor");
  OPENREG_STRUCTURED(m, "ceil.out", ceil, WITH_INPLACE, "elementwise_ceil");
  OPENREG_STRUCTURED(m, "trunc.out", trunc, WITH_INPLACE, "elementwise_trunc");
  OPENREG_STRUCTURED(m, "frac.out", frac, WITH_INPLACE, "elementwise_frac");
  OPENREG_STRUCTURED_SIG(m, "round.out", round, Unary, WITH_INPLACE, "elementwise_round");
  OPENREG_STRUCTURED_SIG(m, "round.decimals_out", round, UnaryInt, WITH_INPLACE, "elementwise_round");
  OPENREG_STRUCTURED(m, "lgamma.out", lgamma, WITH_INPLACE, "elementwise_lgamma");
  OPENREG_STRUCTURED(m, "digamma.out", digamma, WITH_INPLACE, "elementwise_digamma");
  OPENREG_STRUCTURED(m, "bitwise_not.out", bitwise_not, WITH_INPLACE, "elementwise_bitwise_not");
  OPENREG_STRUCTURED(m, "isposinf.out", isposinf, NO_INPLACE, "elementwise_isposinf");
  OPENREG_STRUCTURED(m, "isneginf.out", isneginf, NO_INPLACE, "elementwise_isneginf");

  // Activations and their backward.
  OPENREG_STRUCTURED(m, "gelu.out", gelu, WITH_INPLACE, "gelu_fwd");
  OPENREG_STRUCTURED(m, "gelu_backward.grad_input", gelu_backward, NO_INPLACE, "gelu_bwd");
  OPENREG_STRUCTURED(m, "silu.out", silu, WITH_INPLACE, "silu_fwd");
  // silu_backward also has a CompositeImplicitAutograd kernel, which would
  // win over the structured default on openreg and decompose into five
  // kernels (and a host read); it gets the single device kernel, as on CPU.
  OPENREG_META_KERNEL(m, "silu_backward.grad_input", &at::meta::silu_backward_outf, "silu_bwd");
  registerStructuredFunctional(m, "silu_backward", "silu_backward.grad_input", &at::meta::silu_backward,
                               KernelSpec{"silu_bwd"});
  OPENREG_STRUCTURED(m, "mish.out", mish, WITH_INPLACE, "mish_fwd");
  OPENREG_STRUCTURED(m, "softplus.out", softplus, NO_INPLACE, "softplus_fwd");
  OPENREG_STRUCTURED(m, "softplus_backward.grad_input", softplus_backward, NO_INPLACE, "softplus_bwd");
  OPENREG_STRUCTURED(m, "leaky_relu.out", leaky_relu, WITH_INPLACE, "leaky_relu_fwd");
  OPENREG_STRUCTURED(m, "leaky_relu_backward.grad_input", leaky_relu_backward, NO_INPLACE, "leaky_relu_bwd");
  OPENREG_STRUCTURED(m, "elu.out", elu, WITH_INPLACE, "elu_fwd");
  OPENREG_STRUCTURED(m, "elu_backward.grad_input", elu_backward, NO_INPLACE, "elu_bwd");
  OPENREG_STRUCTURED(m, "hardsigmoid.out", hardsigmoid, WITH_INPLACE, "hardsigmoid_fwd");
  OPENREG_STRUCTURED(m, "hardsigmoid_backward.grad_input", hardsigmoid_backward, NO_INPLACE, "hardsigmoid_bwd");
  OPENREG_STRUCTURED(m, "threshold.out", threshold, WITH_INPLACE, "threshold_fwd");
  OPENREG_STRUCTURED(m, "threshold_backward.grad_input", threshold_backward, NO_INPLACE, "threshold_bwd");
  OPENREG_STRUCTURED(m, "sigmoid_backward.grad_input", sigmoid_backward, NO_INPLACE, "sigmoid_bwd");
  OPENREG_STRUCTURED(m, "tanh_backward.grad_input", tanh_backward, NO_INPLACE, "tanh_bwd");
  OPENREG_STRUCTURED(m, "glu.out", glu, NO_INPLACE, "glu_fwd");

  // Binary arithmetic.
  OPENREG_STRUCTURED(m, "add.out", add, WITH_INPLACE, "elementwise_add");
  OPENREG_STRUCTURED(m, "sub.out", sub, WITH_INPLACE, "elementwise_sub");
  OPENREG_STRUCTURED(m, "mul.out", mul, WITH_INPLACE, "elementwise_mul");
  OPENREG_STRUCTURED_SIG(m, "div.out", div, BinaryTT, WITH_INPLACE, "elementwise_div");
  OPENREG_STRUCTURED_SIG(m, "div.out_mode", div, BinaryTTMode, WITH_INPLACE, "elementwise_div");
  OPENREG_STRUCTURED(m, "remainder.Tensor_out", remainder, WITH_INPLACE, "elementwise_remainder");
  OPENREG_STRUCTURED(m, "fmod.Tensor_out", fmod, WITH_INPLACE, "elementwise_fmod");
  OPENREG_STRUCTURED_SIG(m, "pow.Tensor_Tensor_out", pow, BinaryTT, WITH_INPLACE, "elementwise_pow");
  OPENREG_STRUCTURED_SIG(m, "pow.Tensor_Scalar_out", pow, BinaryTS, WITH_INPLACE, "elementwise_pow");
  OPENREG_STRUCTURED_SIG(m, "pow.Scalar_out", pow, BinaryST, NO_INPLACE, "elementwise_pow");
  OPENREG_STRUCTURED(m, "maximum.out", maximum, NO_INPLACE, "elementwise_maximum");
  OPENREG_STRUCTURED(m, "minimum.out", minimum, NO_INPLACE, "elementwise_minimum");
  OPENREG_STRUCTURED(m, "fmax.out", fmax, NO_INPLACE, "elementwise_fmax");
  OPENREG_STRUCTURED(m, "fmin.out", fmin, NO_INPLACE, "elementwise_fmin");
  OPENREG_STRUCTURED(m, "atan2.out", atan2, WITH_INPLACE, "elementwise_atan2");
  OPENREG_STRUCTURED(m, "hypot.out", hypot, WITH_INPLACE, "elementwise_hypot");
  OPENREG_STRUCTURED(m, "copysign.out", copysign, WITH_INPLACE, "elementwise_copysign");
  OPENREG_STRUCTURED(m, "logaddexp.out", logaddexp, NO_INPLACE, "elementwise_logaddexp");
  OPENREG_STRUCTURED(m, "xlogy.OutTensor", xlogy, WITH_INPLACE, "elementwise_xlogy");
  OPENREG_STRUCTURED_SIG(m, "lerp.Scalar_out", lerp, TernaryTTS, WITH_INPLACE, "elementwise_lerp");
  OPENREG_STRUCTURED_SIG(m, "lerp.Tensor_out", lerp, TernaryTTT, WITH_INPLACE, "elementwise_lerp");
  OPENREG_STRUCTURED(m, "addcmul.out", addcmul, WITH_INPLACE, "elementwise_addcmul");
  OPENREG_STRUCTURED(m, "addcdiv.out", addcdiv, WITH_INPLACE, "elementwise_addcdiv");
  OPENREG_STRUCTURED(m, "bitwise_and.Tensor_out", bitwise_and, WITH_INPLACE, "elementwise_bitwise_and");
  OPENREG_STRUCTURED(m, "bitwise_or.Tensor_out", bitwise_or, WITH_INPLACE, "elementwise_bitwise_or");
  OPENREG_STRUCTURED(m, "bitwise_xor.Tensor_out", bitwise_xor, WITH_INPLACE, "elementwise_bitwise_xor");

  // Clamps.
  OPENREG_STRUCTURED_SIG(m, "clamp.out", clamp, ClampScalars, WITH_INPLACE, "elementwise_clamp");
  OPENREG_STRUCTURED_SIG(m, "clamp.Tensor_out", clamp, ClampTensors, WITH_INPLACE, "elementwise_clamp");
  OPENREG_STRUCTURED_SIG(m, "clamp_min.out", clamp_min, BinaryTS, WITH_INPLACE, "elementwise_clamp_min");
  OPENREG_STRUCTURED_SIG(m, "clamp_min.Tensor_out", clamp_min, BinaryTT, WITH_INPLACE, "elementwise_clamp_min");
  OPENREG_STRUCTURED_SIG(m, "clamp_max.out", clamp_max, BinaryTS, WITH_INPLACE, "elementwise_clamp_max");
  OPENREG_STRUCTURED_SIG(m, "clamp_max.Tensor_out", clamp_max, BinaryTT, WITH_INPLACE, "elementwise_clamp_max");

  // Comparisons: named after the compared dtype, not the bool result.
  OPENREG_STRUCTURED_SIG(m, "eq.Scalar_out", eq, BinaryTS, WITH_INPLACE, "elementwise_eq");
  OPENREG_STRUCTURED_SIG(m, "eq.Tensor_out", eq, BinaryTT, WITH_INPLACE, "elementwise_eq");
  OPENREG_STRUCTURED_SIG(m, "ne.Scalar_out", ne, BinaryTS, WITH_INPLACE, "elementwise_ne");
  OPENREG_STRUCTURED_SIG(m, "ne.Tensor_out", ne, BinaryTT, WITH_INPLACE, "elementwise_ne");
  OPENREG_STRUCTURED_SIG(m, "lt.Scalar_out", lt, BinaryTS, WITH_INPLACE, "elementwise_lt");
  OPENREG_STRUCTURED_SIG(m, "lt.Tensor_out", lt, BinaryTT, WITH_INPLACE, "elementwise_lt");
  OPENREG_STRUCTURED_SIG(m, "le.Scalar_out", le, BinaryTS, WITH_INPLACE, "elementwise_le");
  OPENREG_STRUCTURED_SIG(m, "le.Tensor_out", le, BinaryTT, WITH_INPLACE, "elementwise_le");
  OPENREG_STRUCTURED_SIG(m, "gt.Scalar_out", gt, BinaryTS, WITH_INPLACE, "elementwise_gt");
  OPENREG_STRUCTURED_SIG(m, "gt.Tensor_out", gt, BinaryTT, WITH_INPLACE, "elementwise_gt");
  OPENREG_STRUCTURED_SIG(m, "ge.Scalar_out", ge, BinaryTS, WITH_INPLACE, "elementwise_ge");
  OPENREG_STRUCTURED_SIG(m, "ge.Tensor_out", ge, BinaryTT, WITH_INPLACE, "elementwise_ge");

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
  for (const auto& [op, kernel] :
       std::initializer_list<std::pair<const char*, const char*>>{{"abs.out", kAbs},
                                                                  {"logical_not.out", kLogicalNot},
                                                                  {"logical_and.out", kLogicalAnd},
                                                                  {"logical_or.out", kLogicalOr},
                                                                  {"logical_xor.out", kLogicalXor},
                                                                  {"where.self_out", "where"},
                                                                  {"where.self", "where"},
                                                                  {"relu", "elementwise_relu"},
                                                                  {"relu_", "elementwise_relu"}}) {
    recordOpPath(std::string("aten::") + op, OpPath::Device, kernel);
  }
}

}  // namespace openreg::backend
