// The generic device-kernel mechanism.
//
// Most ATen operators already have a correct CPU implementation and, for
// structured operators, a meta function that validates inputs and sizes the
// outputs. An openreg kernel for such an operator therefore:
//   1. checks that all tensors live on one openreg device (0-dim CPU tensors
//      are accepted as scalars, as CUDA does);
//   2. runs the meta function on the host: errors are raised at the call,
//      out= tensors are resized, functional outputs are allocated;
//   3. launches one device kernel whose body rebuilds the arguments as CPU
//      views of device memory and redispatches the .out operator to the CPU
//      key.
// A structured operator family (add.out, add.Tensor, add_.Tensor) is covered
// by one registration line (OPENREG_STRUCTURED). Every overload gets its own
// PrivateUse1 kernel, as CUDA's do: ATen's default functional kernel would
// call the .out overload through the dispatcher, so profilers would see the
// op twice, nested in itself. Non-structured ops compute their output shapes
// explicitly and reuse launchCpuOp for step 3.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "backend/Launch.h"

namespace openreg::backend {

// The one device all tensor arguments live on; raises the usual
// "Expected all tensors to be on the same device" error otherwise.
c10::Device commonDevice(c10::ArrayRef<c10::IValue> args, const c10::OperatorHandle& op);

// Looks up an operator once; the handle stays valid for the process.
c10::OperatorHandle findOp(const char* name, const char* overload);

// A new openreg tensor on the current device with `like`'s sizes, strides
// and dtype (typically a meta tensor). Allocates directly from the caching
// allocator: no dispatcher call, so no aten::empty_strided in profiles.
at::Tensor emptyDeviceLike(const at::Tensor& like);
// A new contiguous openreg tensor on the current device.
at::Tensor emptyDevice(c10::IntArrayRef sizes, c10::ScalarType dtype);

// Launches, on the current stream of `device`, a kernel that runs `op`'s CPU
// implementation on `args`. With `outputs` empty the op writes its results
// into out= arguments; otherwise its returned tensors are copied into
// `outputs` in order (undefined entries are skipped).
void launchCpuOp(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, c10::DeviceIndex device,
                 const std::string& kernel, const LaunchShape& shape, c10::ArrayRef<at::Tensor> outputs = {});

// How a kernel's name and launch shape derive from its arguments.
enum class KernelStyle {
  kElementwise,  // <base>_<dtype>; grid over the output elements
  kReduction,    // <base>_<dtype>; one block per output element
  kRowwise,      // <base>_<dtype>; one block per row along `dimArg`
  kGemm,         // <base>_<dtype>_<nn|nt|tn|tt> from operands lhs/rhs
};

struct KernelSpec {
  std::string base;
  KernelStyle style = KernelStyle::kElementwise;
  int dtypeArg = -1;  // argument whose dtype names the kernel (-1: first tensor)
  int lhs = -1;       // kGemm operands
  int rhs = -1;
  int dimArg = -1;    // kRowwise: the reduced dimension
  // Run `meta` on meta-device twins of the tensor arguments and resize the
  // device tensors afterwards. For the few ops (range factories, eye) whose
  // Meta kernel is their CPU kernel and computes unless given meta tensors.
  bool metaOnTwins = false;
  // Run the functional overload of the op in the kernel and copy its results
  // into the out= tensors: for CPU kernels that temporarily resize their out=
  // argument (mse_loss.out does), which device memory cannot allow.
  const char* functionalOverload = nullptr;
  // Run the functional overload's meta on meta-device twins of the tensor
  // arguments: for metas that check their (meta) output against the inputs'
  // device (index_add, index_reduce).
  bool functionalMetaOnTwins = false;
};

// Registers the out= overload `schema` (e.g. "arange.start_out") alone;
// `meta` is its meta function. For ops without functional siblings of their
// own (their functional overloads are composite).
void registerMetaKernel(torch::Library& m, const char* schema, c10::KernelFunction meta, KernelSpec spec);

// The C++ meta functions (ATen/MetaFunctions.h) of one structured family,
// callable boxed.
struct StructuredMeta {
  c10::KernelFunction out;                      // at::meta::<op>_outf
  c10::KernelFunction functional;               // at::meta::<op>
  std::optional<c10::KernelFunction> inplace;   // at::meta::<op>_
};

// Registers a structured family: `outSchema` (e.g. "add.out") and its
// functional and in-place overloads ("add.Tensor", "add_.Tensor"), found by
// schema among the operators that use ATen's default structured kernels.
void registerStructured(torch::Library& m, const char* outSchema, StructuredMeta meta, KernelSpec spec);

// Registers `functionalSchema` as the functional overload of the family of
// `outSchema` (which must be registered too), for the few families whose
// functional overload the schema search above skips.
void registerStructuredFunctional(torch::Library& m, const char* functionalSchema, const char* outSchema,
                                  c10::KernelFunction meta, KernelSpec spec);

// The functional and in-place meta signatures that belong to an out= meta
// signature: outputs dropped from the end; in-place, `self` is mutable.
template <class OutFn>
struct StructuredSignatures;

namespace detail {
template <class R>
struct OutReturn;
template <>
struct OutReturn<at::Tensor&> {
  static constexpr size_t count = 1;
  using Functional = at::Tensor;
};
template <class... T>
struct OutReturn<std::tuple<T...>> {
  static constexpr size_t count = sizeof...(T);
  using Functional = std::tuple<std::decay_t<T>...>;
};
template <class R, class Args, class Indices>
struct FunctionOf;
template <class R, class Args, size_t... I>
struct FunctionOf<R, Args, std::index_sequence<I...>> {
  using type = R (*)(std::tuple_element_t<I, Args>...);
};
template <class Args, class Indices>
struct InplaceOf;
template <class Args, size_t... I>
struct InplaceOf<Args, std::index_sequence<I...>> {
  using type = at::Tensor& (*)(at::Tensor&, std::tuple_element_t<I + 1, Args>...);
};
}  // namespace detail

template <class R, class... A>
struct StructuredSignatures<R (*)(A...)> {
  static constexpr size_t inputs = sizeof...(A) - detail::OutReturn<R>::count;
  static_assert(inputs > 0, "a structured family with a functional overload takes inputs");
  using Functional = typename detail::FunctionOf<typename detail::OutReturn<R>::Functional, std::tuple<A...>,
                                                 std::make_index_sequence<inputs>>::type;
  using Inplace = typename detail::InplaceOf<std::tuple<A...>, std::make_index_sequence<inputs - 1>>::type;
};

// The parameter types pick the right overload of an overloaded at::meta name.
template <class OutFn>
StructuredMeta structuredMeta(OutFn out, typename StructuredSignatures<OutFn>::Functional functional) {
  return {c10::KernelFunction::makeFromUnboxedRuntimeFunction(out),
          c10::KernelFunction::makeFromUnboxedRuntimeFunction(functional), std::nullopt};
}

template <class OutFn>
StructuredMeta structuredMeta(OutFn out, typename StructuredSignatures<OutFn>::Functional functional,
                              typename StructuredSignatures<OutFn>::Inplace inplace) {
  return {c10::KernelFunction::makeFromUnboxedRuntimeFunction(out),
          c10::KernelFunction::makeFromUnboxedRuntimeFunction(functional),
          c10::KernelFunction::makeFromUnboxedRuntimeFunction(inplace)};
}

}  // namespace openreg::backend

// The meta functions of family `name`; WITH_INPLACE where ATen has `name_`.
#define OPENREG_STRUCTURED_META_NO_INPLACE(name, OutSig) \
  ::openreg::backend::structuredMeta<OutSig>(&at::meta::name##_outf, &at::meta::name)
#define OPENREG_STRUCTURED_META_WITH_INPLACE(name, OutSig) \
  ::openreg::backend::structuredMeta<OutSig>(&at::meta::name##_outf, &at::meta::name, &at::meta::name##_)

// OPENREG_STRUCTURED(m, "add.out", add, WITH_INPLACE, <KernelSpec fields>):
// the family of at::meta::add_outf; the _SIG form names the out= signature
// of an overloaded family (pow, eq, ...).
#define OPENREG_STRUCTURED_SIG(m, schema, name, OutSig, inplace, ...)                               \
  ::openreg::backend::registerStructured(m, schema, OPENREG_STRUCTURED_META_##inplace(name, OutSig), \
                                         ::openreg::backend::KernelSpec{__VA_ARGS__})
#define OPENREG_STRUCTURED(m, schema, name, inplace, ...) \
  OPENREG_STRUCTURED_SIG(m, schema, name, decltype(&at::meta::name##_outf), inplace, __VA_ARGS__)

#define OPENREG_META_KERNEL(m, schema, meta_fn, ...)                                                   \
  ::openreg::backend::registerMetaKernel(m, schema, c10::KernelFunction::makeFromUnboxedRuntimeFunction(meta_fn), \
                                         ::openreg::backend::KernelSpec{__VA_ARGS__})
