#include "backend/aten/DeviceKernel.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include <ATen/EmptyTensor.h>
#include <ATen/Functions.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <c10/util/SmallVector.h>

#include "backend/CachingAllocator.h"
#include "backend/OpRegistry.h"
#include "backend/Stream.h"
#include "backend/aten/ArgumentChecks.h"
#include "backend/aten/KernelProbe.h"

namespace openreg::backend {

namespace {

constexpr c10::DispatchKeySet kOpenRegKeys{c10::DispatchKey::PrivateUse1};

// A Tensor?[] holding at least one tensor (a list without tensors needs no
// descriptors and passes to the kernel as it is). Avoids IValue::type(), which
// allocates.
bool isOptionalTensorListWithTensors(const c10::IValue& value) {
  if (!value.isList() || value.isTensorList()) return false;
  const auto elements = value.toListRef();
  return std::any_of(elements.begin(), elements.end(), [](const c10::IValue& e) { return e.isTensor(); });
}

using TensorRef = std::reference_wrapper<const at::Tensor>;
using TensorListRef = std::reference_wrapper<const at::ITensorListRef>;

// std::visit with one lambda per alternative.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// Calls f(tensor) for every defined tensor in `args`, list elements included.
template <class F>
void forEachTensor(c10::ArrayRef<ArgRef> args, F&& f) {
  for (const ArgRef& arg : args) {
    std::visit(Overloaded{
                   [&](TensorRef ref) {
                     if (ref.get().defined()) f(ref.get());
                   },
                   [&](TensorListRef list) {
                     for (const at::Tensor& t : list.get()) {
                       if (t.defined()) f(t);
                     }
                   },
                   [&](const c10::IValue& value) {
                     if (!value.isList()) return;
                     for (const c10::IValue& element : value.toListRef()) {
                       if (element.isTensor() && element.toTensor().defined()) f(element.toTensor());
                     }
                   },
               },
               arg);
  }
}

// Boxed arguments as references: tensors are not copied.
c10::SmallVector<ArgRef, 8> argRefs(c10::ArrayRef<c10::IValue> args) {
  c10::SmallVector<ArgRef, 8> refs;
  for (const c10::IValue& value : args) refs.push_back(argRef(value));
  return refs;
}

// The arguments as a kernel body needs them: device tensors become
// descriptors (never owning references, see Launch.h), 0-dim CPU tensors
// become scalars, everything else is kept as is.
struct PackedArg {
  enum class Kind : uint8_t { Value, Tensor, ScalarTensor, TensorList, OptionalTensorList };
  Kind kind = Kind::Value;
  bool wrappedNumber = false;
  c10::ScalarType scalarType = c10::ScalarType::Undefined;
  uint32_t first = 0;  // Tensor and lists: index into PackedCall::tensors
  uint32_t count = 0;  // lists: number of elements
  c10::IValue value;   // Value; ScalarTensor: the scalar
};

struct PackedCall {
  c10::SmallVector<PackedArg, 5> args;
  c10::SmallVector<std::optional<TensorDesc>, 3> tensors;

  explicit PackedCall(c10::ArrayRef<ArgRef> refs) {
    for (const ArgRef& ref : refs) {
      std::visit(Overloaded{
                     [&](TensorRef t) { addTensor(t.get()); },
                     [&](TensorListRef list) {
                       PackedArg& arg = startList(PackedArg::Kind::TensorList);
                       for (const at::Tensor& t : list.get()) addListElement(t);
                       arg.count = static_cast<uint32_t>(tensors.size()) - arg.first;
                     },
                     [&](const c10::IValue& value) { addValue(value); },
                 },
                 ref);
    }
  }

  void addValue(const c10::IValue& value) {
    if (value.isTensorList() || isOptionalTensorListWithTensors(value)) {
      PackedArg& arg =
          startList(value.isTensorList() ? PackedArg::Kind::TensorList : PackedArg::Kind::OptionalTensorList);
      for (const c10::IValue& element : value.toListRef()) {
        addListElement(element.isTensor() ? element.toTensor() : at::Tensor());
      }
      arg.count = static_cast<uint32_t>(tensors.size()) - arg.first;
    } else {
      PackedArg arg;
      arg.value = value;
      args.push_back(std::move(arg));
    }
  }

  void addTensor(const at::Tensor& tensor) {
    PackedArg& arg = args.emplace_back();
    if (!tensor.defined()) {
      arg.value = c10::IValue(tensor);
    } else if (tensor.device().is_privateuseone()) {
      arg.kind = PackedArg::Kind::Tensor;
      arg.first = static_cast<uint32_t>(tensors.size());
      describeTensorInto(tensor, tensors.emplace_back().emplace());
    } else {
      // commonDevice() admitted only 0-dim CPU tensors. Read directly: a
      // dispatched item() would add aten::item to every profile.
      arg.kind = PackedArg::Kind::ScalarTensor;
      arg.value = at::native::_local_scalar_dense_cpu(tensor);
      arg.scalarType = tensor.scalar_type();
      arg.wrappedNumber = tensor.unsafeGetTensorImpl()->is_wrapped_number();
    }
  }

  PackedArg& startList(PackedArg::Kind kind) {
    PackedArg& arg = args.emplace_back();
    arg.kind = kind;
    arg.first = static_cast<uint32_t>(tensors.size());
    return arg;
  }

  void addListElement(const at::Tensor& t) {
    if (t.defined()) {
      describeTensorInto(t, tensors.emplace_back().emplace());
    } else {
      tensors.emplace_back(std::nullopt);
    }
  }

  // Runs inside the kernel body.
  torch::jit::Stack unpack() const {
    torch::jit::Stack stack;
    stack.reserve(args.size());
    for (const PackedArg& arg : args) {
      switch (arg.kind) {
        case PackedArg::Kind::Value:
          stack.push_back(arg.value);
          break;
        case PackedArg::Kind::Tensor:
          stack.emplace_back(tensors[arg.first]->view());
          break;
        case PackedArg::Kind::ScalarTensor: {
          at::Tensor scalar = at::scalar_tensor(arg.value.toScalar(), at::TensorOptions().dtype(arg.scalarType));
          if (arg.wrappedNumber) scalar.unsafeGetTensorImpl()->set_wrapped_number(true);
          stack.emplace_back(std::move(scalar));
          break;
        }
        case PackedArg::Kind::TensorList: {
          c10::List<at::Tensor> list;
          list.reserve(arg.count);
          for (uint32_t i = 0; i < arg.count; ++i) list.push_back(tensors[arg.first + i]->view());
          stack.emplace_back(std::move(list));
          break;
        }
        case PackedArg::Kind::OptionalTensorList: {
          c10::List<std::optional<at::Tensor>> list;
          list.reserve(arg.count);
          for (uint32_t i = 0; i < arg.count; ++i) {
            const auto& desc = tensors[arg.first + i];
            list.push_back(desc ? std::optional<at::Tensor>(desc->view()) : std::nullopt);
          }
          stack.emplace_back(std::move(list));
          break;
        }
      }
    }
    return stack;
  }
};

// A kernel that runs an operator's CPU implementation on device memory. Built
// on the heap once and handed to the runtime: its state is never moved. Kept
// small enough for malloc's per-thread cache in the common case.
struct CpuOpKernel {
  CpuOpKernel(const c10::OperatorHandle& op, c10::ArrayRef<ArgRef> args) : op(op), packed(args) {}

  void operator()() const {
    torch::jit::Stack stack = packed.unpack();
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
    if (outputs.empty()) return;
    // Positional: an undefined result keeps its slot.
    std::vector<at::Tensor> results;
    for (const c10::IValue& value : stack) {
      if (value.isTensor()) {
        results.push_back(value.toTensor());
      } else if (value.isTensorList()) {
        for (const at::Tensor& t : value.toTensorList().vec()) results.push_back(t);
      } else if (value.isNone()) {
        results.emplace_back();
      }
    }
    TORCH_CHECK(results.size() >= outputs.size(), "kernel produced ", results.size(), " results, expected ",
                outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i] && results[i].defined()) outputs[i]->view().copy_(results[i]);
    }
  }

  // The op's returned tensors are copied into these (none: it writes into
  // its out= arguments).
  void copyResultsInto(c10::ArrayRef<at::Tensor> tensors) {
    for (const at::Tensor& out : tensors) {
      outputs.emplace_back(out.defined() ? std::optional<TensorDesc>(describeTensor(out)) : std::nullopt);
    }
  }

  const c10::OperatorHandle op;
  PackedCall packed;
  // Only for ops that compute functionally (rare): no inline storage.
  c10::SmallVector<std::optional<TensorDesc>, 0> outputs;
};

static_assert(sizeof(CpuOpKernel) <= 1024, "CpuOpKernel outgrew malloc's per-thread cache");

[[noreturn]] void failDifferentDevices(const c10::Device& a, const c10::Device& b, const c10::OperatorHandle& op) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", a.str(),
              " and ", b.str(), "! (when checking arguments for ", op.schema().operator_name(), ")");
}

char operandLayout(const at::Tensor& t) {
  if (t.dim() < 2) return 'n';
  if (t.stride(-1) == 1) return 'n';
  if (t.stride(-2) == 1) return 't';
  return 'n';
}

// The tensor a kernel is named after: the first device operand, not a CPU
// scalar (or, for factories, the out= tensor, which is an argument too).
const at::Tensor& namingTensor(c10::ArrayRef<ArgRef> args) {
  const at::Tensor* first = nullptr;
  const at::Tensor* firstDevice = nullptr;
  forEachTensor(args, [&](const at::Tensor& t) {
    if (first == nullptr) first = &t;
    if (firstDevice == nullptr && t.is_privateuseone()) firstDevice = &t;
  });
  TORCH_INTERNAL_ASSERT(first != nullptr);
  return firstDevice != nullptr ? *firstDevice : *first;
}

const at::Tensor& tensorArg(c10::ArrayRef<ArgRef> args, int index) {
  const auto* tensor = std::get_if<TensorRef>(&args[index]);
  TORCH_INTERNAL_ASSERT(tensor != nullptr);
  return tensor->get();
}

// Kernel names by dtype (and gemm operand layouts), built once per kernel
// and dtype: launches then pass a stable string without building one.
class KernelNames {
 public:
  KernelNames(std::string base, bool withLayouts)
      : base_(std::move(base)), names_(kDtypes * (withLayouts ? kLayouts : 1)) {}
  KernelNames(const KernelNames&) = delete;
  KernelNames& operator=(const KernelNames&) = delete;

  // layout: 0-3 for nn, nt, tn, tt (gemm kernels only).
  const char* get(c10::ScalarType dtype, int layout = 0) const {
    const size_t slot = static_cast<size_t>(dtype) + kDtypes * static_cast<size_t>(layout);
    TORCH_INTERNAL_ASSERT(slot < names_.size());
    if (const std::string* name = names_[slot].load(std::memory_order_acquire)) return name->c_str();
    std::string text = kernelName(base_, dtype);
    if (names_.size() > kDtypes) {
      text += '_';
      text += (layout & 2) ? 't' : 'n';
      text += (layout & 1) ? 't' : 'n';
    }
    auto* fresh = new std::string(std::move(text));
    const std::string* expected = nullptr;
    if (!names_[slot].compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
      delete fresh;  // another thread named it first
      return expected->c_str();
    }
    return fresh->c_str();
  }

 private:
  static constexpr size_t kDtypes = static_cast<size_t>(c10::ScalarType::NumOptions);
  static constexpr size_t kLayouts = 4;
  const std::string base_;
  // Never freed: kernels are registered for the life of the process.
  mutable std::vector<std::atomic<const std::string*>> names_;
};

struct LaunchPlan {
  const char* name;
  LaunchShape shape;
};

int layoutIndex(const at::Tensor& lhs, const at::Tensor& rhs) {
  return (operandLayout(lhs) == 't' ? 2 : 0) + (operandLayout(rhs) == 't' ? 1 : 0);
}

// `output` is the op's first output (or its first input if it has none).
LaunchPlan planLaunch(const KernelSpec& spec, const KernelNames& names, c10::ArrayRef<ArgRef> args,
                      const at::Tensor& output) {
  const at::Tensor& named = spec.dtypeArg >= 0 ? tensorArg(args, spec.dtypeArg) : namingTensor(args);
  switch (spec.style) {
    case KernelStyle::Elementwise:
      return {names.get(named.scalar_type()), elementwiseShape(output.numel())};
    case KernelStyle::Reduction: {
      const int64_t outputsCount = std::max<int64_t>(1, output.numel());
      return {names.get(named.scalar_type()),
              reductionShape(outputsCount, std::max<int64_t>(1, named.numel() / outputsCount))};
    }
    case KernelStyle::Rowwise: {
      const int64_t dim =
          spec.dimArg >= 0 ? c10::maybe_wrap_dim(std::get<c10::IValue>(args[spec.dimArg]).toInt(), named.dim()) : -1;
      const int64_t rowLength = named.dim() == 0 ? 1 : named.size(dim < 0 ? named.dim() - 1 : dim);
      return {names.get(named.scalar_type()), rowwiseShape(rowLength == 0 ? 0 : named.numel() / rowLength, rowLength)};
    }
    case KernelStyle::Gemm: {
      const at::Tensor& lhs = tensorArg(args, spec.lhs);
      const at::Tensor& rhs = tensorArg(args, spec.rhs);
      const int64_t batch = lhs.dim() == 3 ? lhs.size(0) : 1;
      return {names.get(lhs.scalar_type(), layoutIndex(lhs, rhs)), gemmShape(lhs.size(-2), rhs.size(-1), batch)};
    }
  }
  TORCH_INTERNAL_ASSERT(false, "unknown kernel style");
}

// Device tensors' distinct bytes (Launch.h), each tensor once.
uint64_t tensorBytes(c10::ArrayRef<ArgRef> args) {
  uint64_t bytes = 0;
  forEachTensor(args, [&](const at::Tensor& t) {
    if (t.device().is_privateuseone()) bytes += distinctBytes(t);
  });
  return bytes;
}

// A product's floating-point operations: a multiply-add per term, 2 real
// operations (8 for complex); integer products have none.
std::optional<uint64_t> gemmFlops(const at::Tensor& lhs, const at::Tensor& rhs) {
  const bool complex = c10::isComplexType(lhs.scalar_type());
  if (!complex && !c10::isFloatingType(lhs.scalar_type())) return std::nullopt;
  const uint64_t batch = lhs.dim() == 3 ? static_cast<uint64_t>(lhs.size(0)) : 1;
  const auto terms = batch * static_cast<uint64_t>(lhs.size(-2)) * static_cast<uint64_t>(lhs.size(-1)) *
                     static_cast<uint64_t>(rhs.size(-1));
  return terms * (complex ? 8 : 2);
}

// What the kernel's arguments define it to do (orLaunchConfig's work):
// bytes read are the inputs' (an in-place self is an input too), bytes
// written the outputs'; products also count their operations. `inputs`
// holds no out= argument.
void addWork(LaunchShape& shape, const KernelSpec& spec, c10::ArrayRef<ArgRef> inputs,
             c10::ArrayRef<at::Tensor> outputs, const at::Tensor& firstResult) {
  uint64_t written = 0;
  for (const at::Tensor& out : outputs) written += distinctBytes(out);
  if (outputs.empty() && firstResult.defined()) written = distinctBytes(firstResult);
  shape.withBytes(tensorBytes(inputs), written);
  if (spec.style == KernelStyle::Gemm) {
    if (auto flops = gemmFlops(tensorArg(inputs, spec.lhs), tensorArg(inputs, spec.rhs))) shape.withFlops(*flops);
  }
}

// The arguments that are not out= tensors: the functional overload's, or
// those the out= schema does not mark as outputs.
c10::SmallVector<ArgRef, 8> inputArgs(const c10::FunctionSchema& schema, c10::ArrayRef<ArgRef> args) {
  c10::SmallVector<ArgRef, 8> inputs;
  const auto& declared = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    inputs.push_back(i < declared.size() && declared[i].is_out() ? ArgRef{} : args[i]);
  }
  return inputs;
}

}  // namespace

c10::Device commonDevice(c10::ArrayRef<ArgRef> args, const c10::OperatorHandle& op) {
  std::optional<c10::Device> device;
  forEachTensor(args, [&](const at::Tensor& t) {
    const c10::Device d = t.device();
    if (!d.is_privateuseone()) return;
    if (!device) {
      device = d;
    } else if (*device != d) {
      failDifferentDevices(*device, d, op);
    }
  });
  TORCH_CHECK(device.has_value(), "openreg: ", op.schema().operator_name(), " was dispatched to openreg without ",
              "an openreg tensor argument");
  forEachTensor(args, [&](const at::Tensor& t) {
    // A 0-dim CPU tensor is a scalar operand, as on CUDA.
    if (!t.device().is_privateuseone() && !(t.device().is_cpu() && t.dim() == 0)) {
      failDifferentDevices(*device, t.device(), op);
    }
  });
  return *device;
}

c10::Device commonDevice(c10::ArrayRef<c10::IValue> args, const c10::OperatorHandle& op) {
  return commonDevice(argRefs(args), op);
}

at::Tensor detail::metaTwin(const at::Tensor& t) {
  return at::detail::empty_strided_meta(t.sizes(), t.strides(), t.scalar_type());
}

c10::OperatorHandle findOp(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

at::Tensor emptyDeviceLike(const at::Tensor& like) {
  return at::detail::empty_strided_generic(like.sizes(), like.strides(), deviceAllocator(), kOpenRegKeys,
                                           like.scalar_type());
}

at::Tensor emptyDevice(c10::IntArrayRef sizes, c10::ScalarType dtype) {
  return at::detail::empty_generic(sizes, deviceAllocator(), kOpenRegKeys, dtype, std::nullopt);
}

at::Tensor emptyDeviceStrided(c10::IntArrayRef sizes, c10::IntArrayRef strides, c10::ScalarType dtype) {
  return at::detail::empty_strided_generic(sizes, strides, deviceAllocator(), kOpenRegKeys, dtype);
}

KernelArgs::KernelArgs(c10::ArrayRef<c10::IValue> values) : owned_(argRefs(values)), refs_(owned_) {}

void launchCpuOp(const c10::OperatorHandle& op, const KernelArgs& args, c10::DeviceIndex device, KernelNameRef kernel,
                 const LaunchShape& shape, c10::ArrayRef<at::Tensor> outputs) {
  checkArgumentsOnHost(op, args.refs());
  probeCpuKernel(op, args.refs());
  auto call = std::make_unique<CpuOpKernel>(op, args.refs());
  call->copyResultsInto(outputs);
  launchKernelObject(currentNativeStream(device), kernel.c_str(), shape, std::move(call));
}

struct detail::StructuredLauncher::State {
  State(const c10::OperatorHandle& outOp, KernelSpec kernelSpec, StandInCheck check)
      : spec(std::move(kernelSpec)),
        standInCheck(check),
        bodyOp(spec.functionalOverload != nullptr ? findOp(outOp.schema().name().c_str(), spec.functionalOverload)
                                                  : outOp),
        bodyInputs(bodyOp.schema().arguments().size()),
        names(spec.base, spec.style == KernelStyle::Gemm) {}

  const KernelSpec spec;
  const StandInCheck standInCheck;
  // The .out overload, or the functional one (spec.functionalOverload).
  const c10::OperatorHandle bodyOp;
  const size_t bodyInputs;
  const KernelNames names;
};

detail::StructuredLauncher::StructuredLauncher(const c10::OperatorHandle& outOp, KernelSpec spec,
                                               StandInCheck standInCheck)
    : state_(std::make_unique<State>(outOp, std::move(spec), standInCheck)) {}

detail::StructuredLauncher::~StructuredLauncher() = default;

const KernelSpec& detail::StructuredLauncher::spec() const { return state_->spec; }

void detail::StructuredLauncher::launch(c10::Device device, c10::ArrayRef<ArgRef> args,
                                        c10::ArrayRef<at::Tensor> outputs, const at::Tensor* result) const {
  const State& s = *state_;
  if (s.spec.functionalOverload != nullptr) {
    checkArgumentsOnHost(s.bodyOp, args.slice(0, s.bodyInputs));
    probeCpuKernel(s.bodyOp, args.slice(0, s.bodyInputs), {}, s.standInCheck);
  } else {
    checkArgumentsOnHost(s.bodyOp, args);
    probeCpuKernel(s.bodyOp, args, outputs, s.standInCheck);
  }
  const at::Tensor& firstResult = result != nullptr ? *result : outputs.empty() ? namingTensor(args) : outputs.front();
  LaunchPlan plan = planLaunch(s.spec, s.names, args, firstResult);
  if (kernelWorkWanted()) {
    const bool functional = s.spec.functionalOverload != nullptr;
    addWork(plan.shape, s.spec, functional ? args.slice(0, s.bodyInputs) : inputArgs(s.bodyOp.schema(), args), outputs,
            firstResult);
  }
  std::unique_ptr<CpuOpKernel> call;
  if (s.spec.functionalOverload != nullptr) {
    // The body computes functionally and copies into the outputs.
    call = std::make_unique<CpuOpKernel>(s.bodyOp, args.slice(0, s.bodyInputs));
    call->copyResultsInto(outputs);
  } else {
    // The .out overload's arguments: the inputs, then the outputs.
    call = std::make_unique<CpuOpKernel>(s.bodyOp, args);
    for (const at::Tensor& out : outputs) call->packed.addTensor(out);
  }
  launchKernelObject(currentNativeStream(device.index()), plan.name, plan.shape, std::move(call));
}

namespace {

// The boxed kernel of registerMetaKernel: an out= overload alone.
class OutOnlyKernel final : public c10::OperatorKernel {
 public:
  OutOnlyKernel(const c10::OperatorHandle& op, c10::KernelFunction meta, KernelSpec spec)
      : numArgs_(op.schema().arguments().size()), meta_(std::move(meta)), launcher_(op, std::move(spec)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, numArgs_);
    const auto refs = argRefs(args);
    const c10::Device device = commonDevice(refs, op);
    c10::DeviceGuard guard(device);
    torch::jit::Stack results(args.begin(), args.end());
    if (launcher_.spec().metaOnTwins) {
      runMetaOnTwins(op, keys, results);
    } else {
      meta_.callBoxed(op, keys, &results);  // validates, resizes out=, leaves the returns
    }
    // Resizing may have moved out='s data: described after meta.
    const at::Tensor* result = nullptr;
    for (const c10::IValue& r : results) {
      if (r.isTensor()) {
        result = &r.toTensor();
        break;
      }
    }
    launcher_.launch(device, refs, {}, result);
    torch::jit::drop(*stack, numArgs_);
    for (c10::IValue& r : results) stack->push_back(std::move(r));
  }

 private:
  void runMetaOnTwins(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack& results) {
    std::vector<std::pair<at::Tensor, at::Tensor>> twins;  // (device, meta)
    for (c10::IValue& value : results) {
      if (value.isTensor() && value.toTensor().is_privateuseone()) {
        const at::Tensor& device = value.toTensor();
        at::Tensor twin = detail::metaTwin(device);
        twins.emplace_back(device, twin);
        value = twin;
      }
    }
    meta_.callBoxed(op, keys, &results);
    for (auto& [device, twin] : twins) {
      if (device.sizes() != twin.sizes()) device.resize_(twin.sizes());
      if (device.strides() != twin.strides()) device.as_strided_(twin.sizes(), twin.strides());
    }
    for (c10::IValue& value : results) {
      if (!value.isTensor()) continue;
      for (auto& [device, twin] : twins) {
        if (value.toTensor().is_same(twin)) value = device;
      }
    }
  }

  const size_t numArgs_;
  const c10::KernelFunction meta_;
  const detail::StructuredLauncher launcher_;
};

std::string schemaName(const c10::OperatorName& name) {
  std::string schema = name.name.substr(name.name.find("::") + 2);
  if (!name.overload_name.empty()) schema += "." + name.overload_name;
  return schema;
}

// Operators whose PrivateUse1 kernel is, unless registered, ATen's default
// structured kernel (meta, allocate, call .out through the dispatcher), by
// name. Composite-implicit ones are left out: a backend kernel there would
// bypass their autograd decomposition.
const std::unordered_map<std::string, std::vector<c10::OperatorHandle>>& defaultStructuredKernels() {
  static const auto* byName = [] {
    auto* map = new std::unordered_map<std::string, std::vector<c10::OperatorHandle>>();
    c10::Dispatcher& dispatcher = c10::Dispatcher::singleton();
    for (const c10::OperatorName& name :
         dispatcher.getAllOpNamesForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional)) {
      std::optional<c10::OperatorHandle> handle = dispatcher.findOp(name);
      if (!handle || !handle->hasSchema() ||
          handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
        continue;
      }
      (*map)[name.name].push_back(*handle);
    }
    return map;
  }();
  return *byName;
}

}  // namespace

c10::OperatorHandle detail::findSchema(const char* schema) {
  const std::string text(schema);
  const size_t dot = text.find('.');
  const std::string name = "aten::" + text.substr(0, dot);
  return findOp(name.c_str(), dot == std::string::npos ? "" : text.c_str() + dot + 1);
}

// The functional and in-place siblings of an out= overload, as torchgen
// groups them: the same arguments without the outputs, the same name (plus
// "_" in place).
detail::StructuredFamily detail::findStructuredFamily(const char* outSchema, bool expectInplace) {
  StructuredFamily family{findSchema(outSchema), std::nullopt, std::nullopt};
  const c10::FunctionSchema& out = family.out.schema();
  const auto& outArgs = out.arguments();
  const size_t outputs =
      std::count_if(outArgs.begin(), outArgs.end(), [](const c10::Argument& a) { return a.is_out(); });
  const size_t inputs = outArgs.size() - outputs;
  auto sameInputs = [&](const c10::FunctionSchema& candidate) {
    const auto& args = candidate.arguments();
    if (args.size() != inputs) return false;
    for (size_t i = 0; i < inputs; ++i) {
      if (args[i].name() != outArgs[i].name() || *args[i].type() != *outArgs[i].type()) return false;
    }
    return true;
  };
  const auto& candidates = defaultStructuredKernels();
  if (auto it = candidates.find(out.name()); it != candidates.end()) {
    for (const c10::OperatorHandle& handle : it->second) {
      const c10::FunctionSchema& s = handle.schema();
      if (!s.is_mutable() && s.returns().size() == outputs && sameInputs(s)) family.functional = handle;
    }
  }
  if (auto it = candidates.find(out.name() + "_"); it != candidates.end()) {
    for (const c10::OperatorHandle& handle : it->second) {
      const c10::FunctionSchema& s = handle.schema();
      const c10::AliasInfo* selfAlias = s.arguments().empty() ? nullptr : s.arguments()[0].alias_info();
      if (selfAlias != nullptr && selfAlias->isWrite() && s.returns().size() == 1 && sameInputs(s)) {
        family.inplace = handle;
      }
    }
  }
  // A mismatch means the schema matching no longer fits this torch version:
  // the overload keeps ATen's default kernel (correct, but seen twice by
  // profilers), and tests/backend/test_profiled_ops.py fails.
  if (!family.functional.has_value()) TORCH_WARN("openreg: no functional overload found for aten::", outSchema);
  if (family.inplace.has_value() != expectInplace) {
    TORCH_WARN("openreg: aten::", outSchema, family.inplace ? " has" : " has no", " in-place overload, ",
               "but its registration says otherwise");
  }
  return family;
}

void detail::registerFamilyKernel(torch::Library& m, const c10::OperatorHandle& op, torch::CppFunction kernel,
                                  const KernelSpec& spec) {
  const std::string schema = schemaName(op.operator_name());
  recordOpPath("aten::" + schema, OpPath::Device, spec.base);
  m.impl(schema.c_str(), std::move(kernel));
}

void registerMetaKernel(torch::Library& m, const char* schema, c10::KernelFunction meta, KernelSpec spec) {
  const c10::OperatorHandle op = detail::findSchema(schema);
  detail::registerFamilyKernel(
      m, op, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<OutOnlyKernel>(op, std::move(meta), spec)),
      spec);
}

}  // namespace openreg::backend
