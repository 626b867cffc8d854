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
// op twice, nested in itself. The kernels are unboxed and take the caller's
// tensors by reference, as CUDA's do: a boxed kernel's argument copies make
// a Python-owned tensor's C++ reference count go from 1 to 2 and back, and
// since torch 2.13 each such transition takes the GIL.
// Non-structured ops compute their output shapes explicitly and reuse
// launchCpuOp for step 3.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

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
// A new openreg tensor on the current device with these sizes and strides.
at::Tensor emptyDeviceStrided(c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype);

// How a kernel's name and launch shape derive from its arguments.
enum class KernelStyle {
  Elementwise,  // <base>_<dtype>; grid over the output elements
  Reduction,    // <base>_<dtype>; one block per output element
  Rowwise,      // <base>_<dtype>; one block per row along `dimArg`
  Gemm,         // <base>_<dtype>_<nn|nt|tn|tt> from operands lhs/rhs
};

struct KernelSpec {
  std::string base;
  KernelStyle style = KernelStyle::Elementwise;
  int dtypeArg = -1;  // argument whose dtype names the kernel (-1: first tensor)
  int lhs = -1;       // Gemm operands
  int rhs = -1;
  int dimArg = -1;  // Rowwise: the reduced dimension
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

// Registers the out= overload `schema` (e.g. "arange.start_out") alone, as a
// boxed kernel; `meta` is its meta function. For ops whose functional
// overloads are composite.
void registerMetaKernel(torch::Library& m, const char* schema, c10::KernelFunction meta, KernelSpec spec);

// One argument of a kernel call: a tensor or a tensor list by reference, so
// that device checks and packing read them without taking new references
// (see the GIL note above), or any other value (tensor lists as IValue
// lists; never a tensor). A default ArgRef is None.
using ArgRef = std::variant<c10::IValue, std::reference_wrapper<const at::Tensor>,
                            std::reference_wrapper<const at::ITensorListRef>>;

inline ArgRef argRef(const at::Tensor& t) { return std::cref(t); }
inline ArgRef argRef(const std::optional<at::Tensor>& t) { return t.has_value() ? argRef(*t) : ArgRef{}; }
inline ArgRef argRef(const at::ITensorListRef& list) { return std::cref(list); }
inline ArgRef argRef(const c10::IValue& value) { return value.isTensor() ? argRef(value.toTensor()) : ArgRef{value}; }
template <class T>
ArgRef argRef(const T& value) {
  return ArgRef{c10::IValue(value)};
}

// refArgs(self, dim, index, out): a kernel's arguments for commonDevice and
// launchCpuOp. Tensors must outlive the call: they are referenced.
template <class... T>
std::array<ArgRef, sizeof...(T)> refArgs(T&&... args) {
  static_assert(((std::is_lvalue_reference_v<T> ||
                  !(std::is_same_v<std::decay_t<T>, at::Tensor> || std::is_same_v<std::decay_t<T>, c10::IValue> ||
                    std::is_same_v<std::decay_t<T>, std::optional<at::Tensor>>)) &&
                 ...),
                "a temporary tensor would dangle: name it first");
  return {argRef(args)...};
}

c10::Device commonDevice(c10::ArrayRef<ArgRef> args, const c10::OperatorHandle& op);

// A kernel's arguments as launchCpuOp takes them: references (refArgs, or
// an ArrayRef<ArgRef>) or boxed values (a stack slice, a vector), which are
// referenced in turn. For the duration of the call only.
class KernelArgs {
 public:
  KernelArgs(c10::ArrayRef<ArgRef> refs) : refs_(refs) {}
  template <size_t kN>
  KernelArgs(const std::array<ArgRef, kN>& refs) : refs_(refs) {}
  KernelArgs(c10::ArrayRef<c10::IValue> values);
  KernelArgs(const std::vector<c10::IValue>& values) : KernelArgs(c10::ArrayRef<c10::IValue>(values)) {}
  KernelArgs(const KernelArgs&) = delete;  // refs_ may point into owned_
  KernelArgs& operator=(const KernelArgs&) = delete;

  c10::ArrayRef<ArgRef> refs() const { return refs_; }

 private:
  c10::SmallVector<ArgRef, 8> owned_;
  c10::ArrayRef<ArgRef> refs_;
};

// A kernel's name, borrowed for the call: a C string or a std::string.
class KernelNameRef {
 public:
  KernelNameRef(const char* name) : name_(name) {}
  KernelNameRef(const std::string& name) : name_(name.c_str()) {}
  const char* c_str() const { return name_; }

 private:
  const char* name_;
};

// Launches, on the current stream of `device`, a kernel that runs `op`'s CPU
// implementation on `args`. With `outputs` empty the op writes its results
// into out= arguments; otherwise its returned tensors are copied into
// `outputs` in order (undefined entries are skipped).
void launchCpuOp(const c10::OperatorHandle& op, const KernelArgs& args, c10::DeviceIndex device, KernelNameRef kernel,
                 const LaunchShape& shape, c10::ArrayRef<at::Tensor> outputs = {});

// Who validates the cut stand-ins of a dry run (KernelProbe.h)
// before the CPU kernel computes on them: a structured CPU kernel runs its
// own C++ meta function first; other CPU kernels trust the operator's meta
// function, which the dry run then runs first.
enum class StandInCheck { ByMeta, ByCpuKernel };

// Runs `op` through the CPU fallback (counted, see OpRegistry.h): for
// kernels that find they cannot run a call on the device.
void runCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

namespace detail {

at::Tensor metaTwin(const at::Tensor& t);

// What a family's kernels share: the kernel's naming and shape rules and the
// operator its body runs on the CPU.
class StructuredLauncher {
 public:
  StructuredLauncher(const c10::OperatorHandle& outOp, KernelSpec spec,
                     StandInCheck standInCheck = StandInCheck::ByMeta);
  ~StructuredLauncher();
  StructuredLauncher(const StructuredLauncher&) = delete;
  StructuredLauncher& operator=(const StructuredLauncher&) = delete;

  const KernelSpec& spec() const;
  // After meta: launches the kernel for `args` on `device`, with `outputs`
  // appended as the .out overload's out= arguments (none for the .out
  // overload itself, whose arguments include them). `result`, the op's first
  // result, sizes the launch (default: the first output).
  void launch(c10::Device device, c10::ArrayRef<ArgRef> args, c10::ArrayRef<at::Tensor> outputs,
              const at::Tensor* result = nullptr) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct StructuredFamily {
  c10::OperatorHandle out;
  std::optional<c10::OperatorHandle> functional;
  std::optional<c10::OperatorHandle> inplace;
};
// The out= overload `outSchema` and its functional and in-place overloads,
// found by schema among the operators that use ATen's default structured
// kernels. Warns when what is found disagrees with `expectInplace`.
StructuredFamily findStructuredFamily(const char* outSchema, bool expectInplace);
// "add.out" -> aten::add.out
c10::OperatorHandle findSchema(const char* schema);

// Registers `kernel` for `op` and lists it in the operator path table.
void registerFamilyKernel(torch::Library& m, const c10::OperatorHandle& op, torch::CppFunction kernel,
                          const KernelSpec& spec);

template <class R>
struct OutputList;
template <>
struct OutputList<at::Tensor> {
  static std::array<at::Tensor, 1> of(const at::Tensor& t) { return {t}; }
  static void allocateLikeMeta(at::Tensor& t) { t = emptyDeviceLike(t); }
};
template <class... T>
struct OutputList<std::tuple<T...>> {
  static std::array<at::Tensor, sizeof...(T)> of(const std::tuple<T...>& t) {
    return std::apply([](const auto&... o) { return std::array<at::Tensor, sizeof...(T)>{o...}; }, t);
  }
  static void allocateLikeMeta(std::tuple<T...>& t) {
    std::apply([](auto&... o) { ((o = emptyDeviceLike(o)), ...); }, t);
  }
};

// Meta-device stand-ins for device tensors (KernelSpec::functionalMetaOnTwins).
template <class T>
struct TwinOf {
  const T& operator()(const T& value) { return value; }
};
template <>
struct TwinOf<at::Tensor> {
  at::Tensor twin;
  const at::Tensor& operator()(const at::Tensor& value) {
    if (!value.defined() || !value.is_privateuseone()) return value;
    twin = metaTwin(value);
    return twin;
  }
};

template <class Fn>
class FunctionalKernel;
template <class R, class... A>
class FunctionalKernel<R (*)(A...)> {
 public:
  FunctionalKernel(R (*meta)(A...), std::shared_ptr<const StructuredLauncher> launcher, c10::OperatorHandle op)
      : meta_(meta), launcher_(std::move(launcher)), op_(std::move(op)) {}

  R operator()(A... args) const {
    const std::array<ArgRef, sizeof...(A)> refs{argRef(args)...};
    const c10::Device device = commonDevice(refs, op_);
    c10::DeviceGuard guard(device);
    R result = launcher_->spec().functionalMetaOnTwins ? metaOnTwins(args...) : meta_(args...);
    OutputList<R>::allocateLikeMeta(result);  // meta tensors -> device memory
    launcher_->launch(device, refs, OutputList<R>::of(result));
    return result;
  }

 private:
  R metaOnTwins(A... args) const {
    std::tuple<TwinOf<std::decay_t<A>>...> twins;
    return std::apply([&](auto&... twin) { return meta_(twin(args)...); }, twins);
  }

  R (*meta_)(A...);
  std::shared_ptr<const StructuredLauncher> launcher_;
  c10::OperatorHandle op_;
};

template <class Fn>
class InplaceKernel;
template <class... A>
class InplaceKernel<at::Tensor& (*)(at::Tensor&, A...)> {
 public:
  InplaceKernel(at::Tensor& (*meta)(at::Tensor&, A...), std::shared_ptr<const StructuredLauncher> launcher,
                c10::OperatorHandle op)
      : meta_(meta), launcher_(std::move(launcher)), op_(std::move(op)) {}

  at::Tensor& operator()(at::Tensor& self, A... args) const {
    const std::array<ArgRef, sizeof...(A) + 1> refs{argRef(self), argRef(args)...};
    const c10::Device device = commonDevice(refs, op_);
    c10::DeviceGuard guard(device);
    meta_(self, args...);                                              // checks that self can hold the result
    launcher_->launch(device, refs, c10::ArrayRef<at::Tensor>(self));  // no copy of self
    return self;
  }

 private:
  at::Tensor& (*meta_)(at::Tensor&, A...);
  std::shared_ptr<const StructuredLauncher> launcher_;
  c10::OperatorHandle op_;
};

inline const at::Tensor& firstOf(const at::Tensor& t) { return t; }
template <class... T>
const at::Tensor& firstOf(const std::tuple<T...>& t) {
  return std::get<0>(t);
}

template <class Fn>
class OutKernel;
template <class R, class... A>
class OutKernel<R (*)(A...)> {
 public:
  OutKernel(R (*meta)(A...), std::shared_ptr<const StructuredLauncher> launcher, c10::OperatorHandle op)
      : meta_(meta), launcher_(std::move(launcher)), op_(std::move(op)) {}

  R operator()(A... args) const {
    const std::array<ArgRef, sizeof...(A)> refs{argRef(args)...};
    const c10::Device device = commonDevice(refs, op_);
    c10::DeviceGuard guard(device);
    R result = meta_(args...);  // resizes the out= tensors, which are arguments too
    launcher_->launch(device, refs, {}, &firstOf(result));
    return result;
  }

 private:
  R (*meta_)(A...);
  std::shared_ptr<const StructuredLauncher> launcher_;
  c10::OperatorHandle op_;
};

}  // namespace detail

// The functional and in-place meta signatures that belong to an out= meta
// signature: outputs dropped from the end; in-place, `self` is mutable.
template <class OutFn>
struct StructuredSignatures;

namespace detail {
template <class R>
struct OutReturn;
template <>
struct OutReturn<at::Tensor&> {
  static constexpr size_t kCount = 1;
  using Functional = at::Tensor;
};
template <class... T>
struct OutReturn<std::tuple<T...>> {
  static constexpr size_t kCount = sizeof...(T);
  using Functional = std::tuple<std::decay_t<T>...>;
};
template <class R, class Args, class Indices>
struct FunctionOf;
template <class R, class Args, size_t... kI>
struct FunctionOf<R, Args, std::index_sequence<kI...>> {
  using type = R (*)(std::tuple_element_t<kI, Args>...);
};
template <class Args, class Indices>
struct InplaceOf;
template <class Args, size_t... kI>
struct InplaceOf<Args, std::index_sequence<kI...>> {
  using type = at::Tensor& (*)(at::Tensor&, std::tuple_element_t<kI + 1, Args>...);
};
}  // namespace detail

template <class R, class... A>
struct StructuredSignatures<R (*)(A...)> {
  static constexpr size_t kInputs = sizeof...(A) - detail::OutReturn<R>::kCount;
  static_assert(kInputs > 0, "a structured family with a functional overload takes inputs");
  using Out = R (*)(A...);
  using Functional = typename detail::FunctionOf<typename detail::OutReturn<R>::Functional, std::tuple<A...>,
                                                 std::make_index_sequence<kInputs>>::type;
  using Inplace = typename detail::InplaceOf<std::tuple<A...>, std::make_index_sequence<kInputs - 1>>::type;
};

// Registers a structured family: `outSchema` (e.g. "add.out") and its
// functional and in-place overloads ("add.Tensor", "add_.Tensor"), with the
// family's C++ meta functions (ATen/MetaFunctions.h). The parameter types
// pick the right overload of an overloaded at::meta name. Without `inplace`,
// an in-place overload keeps ATen's default kernel (tests flag that).
template <class OutFn>
void registerStructured(torch::Library& m, const char* outSchema, OutFn out,
                        typename StructuredSignatures<OutFn>::Functional functional,
                        typename StructuredSignatures<OutFn>::Inplace inplace, KernelSpec spec) {
  const detail::StructuredFamily family = detail::findStructuredFamily(outSchema, inplace != nullptr);
  auto launcher = std::make_shared<const detail::StructuredLauncher>(family.out, spec, StandInCheck::ByCpuKernel);
  detail::registerFamilyKernel(m, family.out, torch::CppFunction(detail::OutKernel<OutFn>(out, launcher, family.out)),
                               spec);
  if (family.functional.has_value()) {
    using Functional = typename StructuredSignatures<OutFn>::Functional;
    detail::registerFamilyKernel(
        m, *family.functional,
        torch::CppFunction(detail::FunctionalKernel<Functional>(functional, launcher, *family.functional)), spec);
  }
  if (family.inplace.has_value() && inplace != nullptr) {
    using Inplace = typename StructuredSignatures<OutFn>::Inplace;
    detail::registerFamilyKernel(m, *family.inplace,
                                 torch::CppFunction(detail::InplaceKernel<Inplace>(inplace, launcher, *family.inplace)),
                                 spec);
  }
}

// Registers `functionalSchema` as the functional overload of the family of
// `outSchema` (registered separately), for the few families whose functional
// overload the schema search skips (it also has a composite kernel).
template <class Fn>
void registerStructuredFunctional(torch::Library& m, const char* functionalSchema, const char* outSchema, Fn meta,
                                  KernelSpec spec) {
  const c10::OperatorHandle out = detail::findSchema(outSchema);
  const c10::OperatorHandle functional = detail::findSchema(functionalSchema);
  auto launcher = std::make_shared<const detail::StructuredLauncher>(out, spec, StandInCheck::ByCpuKernel);
  detail::registerFamilyKernel(m, functional,
                               torch::CppFunction(detail::FunctionalKernel<Fn>(meta, launcher, functional)), spec);
}

}  // namespace openreg::backend

// OPENREG_STRUCTURED(m, "add.out", add, WITH_INPLACE, <KernelSpec fields>):
// the family of at::meta::add_outf, at::meta::add and (WITH_INPLACE)
// at::meta::add_; the _SIG form names the out= signature of an overloaded
// family (pow, eq, ...).
#define OPENREG_STRUCTURED_INPLACE_META_WITH_INPLACE(name) &at::meta::name##_
#define OPENREG_STRUCTURED_INPLACE_META_NO_INPLACE(name) nullptr
#define OPENREG_STRUCTURED_SIG(m, schema, name, OutSig, inplace, ...)                                \
  ::openreg::backend::registerStructured<OutSig>(m, schema, &at::meta::name##_outf, &at::meta::name, \
                                                 OPENREG_STRUCTURED_INPLACE_META_##inplace(name),    \
                                                 ::openreg::backend::KernelSpec{__VA_ARGS__})
#define OPENREG_STRUCTURED(m, schema, name, inplace, ...) \
  OPENREG_STRUCTURED_SIG(m, schema, name, decltype(&at::meta::name##_outf), inplace, __VA_ARGS__)

#define OPENREG_META_KERNEL(m, schema, meta_fn, ...)                                                              \
  ::openreg::backend::registerMetaKernel(m, schema, c10::KernelFunction::makeFromUnboxedRuntimeFunction(meta_fn), \
                                         ::openreg::backend::KernelSpec{__VA_ARGS__})
