#include "backend/aten/DeviceKernel.h"

#include <algorithm>
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

namespace openreg::backend {

namespace {

constexpr c10::DispatchKeySet kOpenRegKeys{c10::DispatchKey::PrivateUse1};

// Calls f(tensor) for every defined tensor in `args`, list elements included.
template <class F>
void forEachTensor(c10::ArrayRef<c10::IValue> args, F&& f) {
  for (const c10::IValue& value : args) {
    if (value.isTensor()) {
      const at::Tensor& t = value.toTensor();
      if (t.defined()) f(t);
    } else if (value.isList()) {
      for (const c10::IValue& element : value.toListRef()) {
        if (element.isTensor() && element.toTensor().defined()) f(element.toTensor());
      }
    }
  }
}

bool isOptionalTensorList(const c10::IValue& value) {
  if (!value.isList()) return false;
  const auto elementType = value.type()->containedType(0);
  return elementType->kind() == c10::TypeKind::OptionalType &&
         elementType->containedType(0)->kind() == c10::TypeKind::TensorType;
}

// The arguments as a kernel body needs them: device tensors become
// descriptors (never owning references, see Launch.h), 0-dim CPU tensors
// become scalars, everything else is kept as is.
struct PackedArg {
  enum class Kind : uint8_t { kValue, kTensor, kScalarTensor, kTensorList, kOptionalTensorList };
  Kind kind = Kind::kValue;
  bool wrappedNumber = false;
  c10::ScalarType scalarType = c10::ScalarType::Undefined;
  uint32_t first = 0;  // kTensor and lists: index into PackedCall::tensors
  uint32_t count = 0;  // lists: number of elements
  c10::IValue value;   // kValue; kScalarTensor: the scalar
};

struct PackedCall {
  c10::SmallVector<PackedArg, 6> args;
  c10::SmallVector<std::optional<TensorDesc>, 4> tensors;

  void addTensor(const at::Tensor& tensor) {
    PackedArg arg;
    if (!tensor.defined()) {
      arg.value = c10::IValue(tensor);
    } else if (tensor.device().is_privateuseone()) {
      arg.kind = PackedArg::Kind::kTensor;
      arg.first = static_cast<uint32_t>(tensors.size());
      tensors.emplace_back(describeTensor(tensor));
    } else {
      // commonDevice() admitted only 0-dim CPU tensors. Read directly: a
      // dispatched item() would add aten::item to every profile.
      arg.kind = PackedArg::Kind::kScalarTensor;
      arg.value = at::native::_local_scalar_dense_cpu(tensor);
      arg.scalarType = tensor.scalar_type();
      arg.wrappedNumber = tensor.unsafeGetTensorImpl()->is_wrapped_number();
    }
    args.push_back(std::move(arg));
  }

  void addList(const c10::IValue& list, PackedArg::Kind kind) {
    PackedArg arg;
    arg.kind = kind;
    arg.first = static_cast<uint32_t>(tensors.size());
    for (const c10::IValue& element : list.toListRef()) {
      if (element.isTensor() && element.toTensor().defined()) {
        tensors.emplace_back(describeTensor(element.toTensor()));
      } else {
        tensors.emplace_back(std::nullopt);
      }
    }
    arg.count = static_cast<uint32_t>(tensors.size()) - arg.first;
    args.push_back(std::move(arg));
  }

  explicit PackedCall(c10::ArrayRef<c10::IValue> values) {
    for (const c10::IValue& value : values) {
      if (value.isTensor()) {
        addTensor(value.toTensor());
      } else if (value.isTensorList()) {
        addList(value, PackedArg::Kind::kTensorList);
      } else if (isOptionalTensorList(value)) {
        addList(value, PackedArg::Kind::kOptionalTensorList);
      } else {
        PackedArg arg;
        arg.value = value;
        args.push_back(std::move(arg));
      }
    }
  }

  // Runs inside the kernel body.
  torch::jit::Stack unpack() const {
    torch::jit::Stack stack;
    stack.reserve(args.size());
    for (const PackedArg& arg : args) {
      switch (arg.kind) {
        case PackedArg::Kind::kValue:
          stack.push_back(arg.value);
          break;
        case PackedArg::Kind::kTensor:
          stack.emplace_back(tensors[arg.first]->view());
          break;
        case PackedArg::Kind::kScalarTensor: {
          at::Tensor scalar = at::scalar_tensor(arg.value.toScalar(), at::TensorOptions().dtype(arg.scalarType));
          if (arg.wrappedNumber) scalar.unsafeGetTensorImpl()->set_wrapped_number(true);
          stack.emplace_back(std::move(scalar));
          break;
        }
        case PackedArg::Kind::kTensorList: {
          c10::List<at::Tensor> list;
          list.reserve(arg.count);
          for (uint32_t i = 0; i < arg.count; ++i) list.push_back(tensors[arg.first + i]->view());
          stack.emplace_back(std::move(list));
          break;
        }
        case PackedArg::Kind::kOptionalTensorList: {
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

[[noreturn]] void failDifferentDevices(const c10::Device& a, const c10::Device& b, const c10::OperatorHandle& op) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", a.str(),
              " and ", b.str(), "! (when checking arguments for ", op.schema().operator_name(), ")");
}

}  // namespace

c10::Device commonDevice(c10::ArrayRef<c10::IValue> args, const c10::OperatorHandle& op) {
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

void launchCpuOp(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, c10::DeviceIndex device,
                 const std::string& kernel, const LaunchShape& shape, c10::ArrayRef<at::Tensor> outputs) {
  PackedCall packed(args);
  c10::SmallVector<std::optional<TensorDesc>, 3> outputDescs;
  for (const at::Tensor& out : outputs) {
    outputDescs.emplace_back(out.defined() ? std::optional<TensorDesc>(describeTensor(out)) : std::nullopt);
  }
  launchKernel(currentNativeStream(device), kernel, shape,
               [op, packed = std::move(packed), outputDescs = std::move(outputDescs)]() {
                 torch::jit::Stack stack = packed.unpack();
                 op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
                 if (outputDescs.empty()) return;
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
                 TORCH_CHECK(results.size() >= outputDescs.size(), "kernel produced ", results.size(),
                             " results, expected ", outputDescs.size());
                 for (size_t i = 0; i < outputDescs.size(); ++i) {
                   if (outputDescs[i] && results[i].defined()) outputDescs[i]->view().copy_(results[i]);
                 }
               });
}

namespace {

char operandLayout(const at::Tensor& t) {
  if (t.dim() < 2) return 'n';
  if (t.stride(-1) == 1) return 'n';
  if (t.stride(-2) == 1) return 't';
  return 'n';
}

// The tensor a kernel is named after: the first device operand, not a CPU
// scalar (or, for factories, the out= tensor, which is an argument too).
const at::Tensor& namingTensor(c10::ArrayRef<c10::IValue> args) {
  const at::Tensor* first = nullptr;
  const at::Tensor* firstDevice = nullptr;
  forEachTensor(args, [&](const at::Tensor& t) {
    if (first == nullptr) first = &t;
    if (firstDevice == nullptr && t.is_privateuseone()) firstDevice = &t;
  });
  TORCH_INTERNAL_ASSERT(first != nullptr);
  return firstDevice != nullptr ? *firstDevice : *first;
}

struct LaunchPlan {
  std::string name;
  LaunchShape shape;
};

// `output` is the op's first output (or its first input if it has none).
LaunchPlan planLaunch(const KernelSpec& spec, c10::ArrayRef<c10::IValue> args, const at::Tensor& output) {
  const at::Tensor& named = spec.dtypeArg >= 0 ? args[spec.dtypeArg].toTensor() : namingTensor(args);
  LaunchPlan plan;
  switch (spec.style) {
    case KernelStyle::kElementwise:
      plan.name = kernelName(spec.base, named.scalar_type());
      plan.shape = elementwiseShape(output.numel());
      break;
    case KernelStyle::kReduction: {
      plan.name = kernelName(spec.base, named.scalar_type());
      const int64_t outputsCount = std::max<int64_t>(1, output.numel());
      plan.shape = reductionShape(outputsCount, std::max<int64_t>(1, named.numel() / outputsCount));
      break;
    }
    case KernelStyle::kRowwise: {
      plan.name = kernelName(spec.base, named.scalar_type());
      const int64_t dim = spec.dimArg >= 0 ? c10::maybe_wrap_dim(args[spec.dimArg].toInt(), named.dim()) : -1;
      const int64_t rowLength = named.dim() == 0 ? 1 : named.size(dim < 0 ? named.dim() - 1 : dim);
      plan.shape = rowwiseShape(rowLength == 0 ? 0 : named.numel() / rowLength, rowLength);
      break;
    }
    case KernelStyle::kGemm: {
      const at::Tensor& lhs = args[spec.lhs].toTensor();
      const at::Tensor& rhs = args[spec.rhs].toTensor();
      plan.name = kernelName(spec.base, lhs.scalar_type());
      plan.name += '_';
      plan.name += operandLayout(lhs);
      plan.name += operandLayout(rhs);
      const int64_t batch = lhs.dim() == 3 ? lhs.size(0) : 1;
      plan.shape = gemmShape(lhs.size(-2), rhs.size(-1), batch);
      break;
    }
  }
  return plan;
}

const at::Tensor* firstTensor(c10::ArrayRef<c10::IValue> values) {
  const at::Tensor* found = nullptr;
  forEachTensor(values, [&](const at::Tensor& t) {
    if (found == nullptr) found = &t;
  });
  return found;
}

// Which overload of a structured family a kernel serves.
enum class StructuredForm {
  kOut,         // add.out: meta resizes the given out= tensors
  kFunctional,  // add.Tensor: meta sizes the outputs, which are allocated here
  kInplace,     // add_.Tensor: meta checks self, which is the output
};

class StructuredKernel final : public c10::OperatorKernel {
 public:
  // `outOp` is the family's .out overload, the one the kernel body runs on
  // the CPU (or its functional overload, with spec.functionalOverload).
  StructuredKernel(StructuredForm form, const c10::OperatorHandle& servedOp, const c10::OperatorHandle& outOp,
                   c10::KernelFunction meta, KernelSpec spec)
      : form_(form),
        numArgs_(servedOp.schema().arguments().size()),
        meta_(std::move(meta)),
        spec_(std::move(spec)),
        bodyOp_(spec_.functionalOverload != nullptr ? findOp(outOp.schema().name().c_str(), spec_.functionalOverload)
                                                   : outOp),
        bodyInputs_(bodyOp_.schema().arguments().size()) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, numArgs_);
    const c10::Device device = commonDevice(args, op);
    c10::DeviceGuard guard(device);

    torch::jit::Stack results(args.begin(), args.end());
    if (form_ == StructuredForm::kFunctional && spec_.functionalMetaOnTwins) {
      for (c10::IValue& value : results) {
        if (value.isTensor() && value.toTensor().is_privateuseone()) {
          const at::Tensor& t = value.toTensor();
          value = at::Tensor(at::detail::empty_strided_meta(t.sizes(), t.strides(), t.scalar_type()));
        }
      }
    }
    if (spec_.metaOnTwins) {
      runMetaOnTwins(op, keys, results);
    } else {
      meta_.callBoxed(op, keys, &results);  // validates; leaves the returns
    }
    if (form_ == StructuredForm::kFunctional) {
      for (c10::IValue& result : results) {
        if (result.isTensor()) result = emptyDeviceLike(result.toTensor());  // meta tensor -> device memory
      }
    }

    const at::Tensor* output = firstTensor(results);
    const LaunchPlan plan = planLaunch(spec_, args, output != nullptr ? *output : namingTensor(args));

    if (spec_.functionalOverload != nullptr) {
      // The body computes functionally and copies into the outputs.
      c10::SmallVector<at::Tensor, 2> outputs;
      for (const c10::IValue& r : results) outputs.push_back(r.toTensor());
      launchCpuOp(bodyOp_, args.slice(0, bodyInputs_), device.index(), plan.name, plan.shape, outputs);
    } else if (form_ == StructuredForm::kOut) {
      launchCpuOp(bodyOp_, args, device.index(), plan.name, plan.shape);
    } else {
      // The .out overload's arguments: the inputs, then the outputs.
      c10::SmallVector<c10::IValue, 8> outArgs(args.begin(), args.end());
      if (form_ == StructuredForm::kInplace) {
        outArgs.push_back(args[0]);
      } else {
        outArgs.append(results.begin(), results.end());
      }
      launchCpuOp(bodyOp_, outArgs, device.index(), plan.name, plan.shape);
    }
    torch::jit::drop(*stack, numArgs_);
    for (c10::IValue& r : results) stack->push_back(std::move(r));
  }

 private:
  void runMetaOnTwins(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack& results) {
    std::vector<std::pair<at::Tensor, at::Tensor>> twins;  // (device, meta)
    for (c10::IValue& value : results) {
      if (value.isTensor() && value.toTensor().is_privateuseone()) {
        const at::Tensor& device = value.toTensor();
        at::Tensor twin = at::empty_strided(device.sizes(), device.strides(), device.options().device(c10::kMeta));
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

  const StructuredForm form_;
  const size_t numArgs_;
  const c10::KernelFunction meta_;
  const KernelSpec spec_;
  const c10::OperatorHandle bodyOp_;
  const size_t bodyInputs_;
};

void registerForm(torch::Library& m, StructuredForm form, const c10::OperatorHandle& servedOp,
                  const c10::OperatorHandle& outOp, c10::KernelFunction meta, const KernelSpec& spec) {
  const c10::OperatorName& name = servedOp.operator_name();
  const std::string schema = name.overload_name.empty() ? name.name.substr(name.name.find("::") + 2)
                                                        : name.name.substr(name.name.find("::") + 2) + "." +
                                                              name.overload_name;
  recordOpPath("aten::" + schema, OpPath::kDevice, spec.base);
  m.impl(schema.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                             std::make_unique<StructuredKernel>(form, servedOp, outOp, std::move(meta), spec)));
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

struct StructuredOverloads {
  std::optional<c10::OperatorHandle> functional;
  std::optional<c10::OperatorHandle> inplace;
};

// The functional and in-place siblings of an out= overload, as torchgen
// groups them: the same arguments without the outputs, the same name (plus
// "_" in place).
StructuredOverloads findStructuredOverloads(const c10::OperatorHandle& outOp) {
  const c10::FunctionSchema& out = outOp.schema();
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
  StructuredOverloads found;
  const auto& candidates = defaultStructuredKernels();
  if (auto it = candidates.find(out.name()); it != candidates.end()) {
    for (const c10::OperatorHandle& handle : it->second) {
      const c10::FunctionSchema& s = handle.schema();
      if (!s.is_mutable() && s.returns().size() == outputs && sameInputs(s)) found.functional = handle;
    }
  }
  if (auto it = candidates.find(out.name() + "_"); it != candidates.end()) {
    for (const c10::OperatorHandle& handle : it->second) {
      const c10::FunctionSchema& s = handle.schema();
      const c10::AliasInfo* selfAlias = s.arguments().empty() ? nullptr : s.arguments()[0].alias_info();
      if (selfAlias != nullptr && selfAlias->isWrite() && s.returns().size() == 1 && sameInputs(s)) {
        found.inplace = handle;
      }
    }
  }
  return found;
}

c10::OperatorHandle findSchema(const char* schema) {
  const std::string text(schema);
  const size_t dot = text.find('.');
  const std::string name = "aten::" + text.substr(0, dot);
  return findOp(name.c_str(), dot == std::string::npos ? "" : text.c_str() + dot + 1);
}

}  // namespace

void registerMetaKernel(torch::Library& m, const char* schema, c10::KernelFunction meta, KernelSpec spec) {
  const c10::OperatorHandle op = findSchema(schema);
  registerForm(m, StructuredForm::kOut, op, op, std::move(meta), spec);
}

void registerStructured(torch::Library& m, const char* outSchema, StructuredMeta meta, KernelSpec spec) {
  const c10::OperatorHandle outOp = findSchema(outSchema);
  registerForm(m, StructuredForm::kOut, outOp, outOp, std::move(meta.out), spec);
  // A mismatch below means the schema matching no longer fits this torch
  // version; the overload keeps ATen's default kernel (correct, but seen
  // twice by profilers), and tests/backend/test_profiled_ops.py fails.
  const StructuredOverloads overloads = findStructuredOverloads(outOp);
  if (overloads.functional.has_value()) {
    registerForm(m, StructuredForm::kFunctional, *overloads.functional, outOp, std::move(meta.functional), spec);
  } else {
    TORCH_WARN("openreg: no functional overload found for aten::", outSchema);
  }
  if (overloads.inplace.has_value() != meta.inplace.has_value()) {
    TORCH_WARN("openreg: aten::", outSchema, overloads.inplace ? " has" : " has no", " in-place overload, ",
               "but its registration says otherwise");
  } else if (overloads.inplace.has_value()) {
    registerForm(m, StructuredForm::kInplace, *overloads.inplace, outOp, std::move(*meta.inplace), spec);
  }
}

void registerStructuredFunctional(torch::Library& m, const char* functionalSchema, const char* outSchema,
                                  c10::KernelFunction meta, KernelSpec spec) {
  registerForm(m, StructuredForm::kFunctional, findSchema(functionalSchema), findSchema(outSchema), std::move(meta),
               spec);
}

}  // namespace openreg::backend
