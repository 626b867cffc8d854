#include "backend/aten/DeviceKernel.h"

#include <algorithm>
#include <optional>
#include <vector>

#include <ATen/Functions.h>

#include "backend/OpRegistry.h"
#include "backend/Stream.h"

namespace openreg::backend {

namespace {

std::string deviceName(const c10::Device& device) {
  return device.str();
}

// One argument as the kernel body needs it.
struct PackedArg {
  enum class Kind : uint8_t { kValue, kTensor, kScalarTensor, kTensorList, kOptionalTensorList };
  Kind kind = Kind::kValue;
  c10::IValue value;                              // kValue
  std::vector<std::optional<TensorDesc>> tensors;  // kTensor (one), lists
  c10::Scalar scalar;                              // kScalarTensor
  c10::ScalarType scalarType = c10::ScalarType::Undefined;
  bool wrappedNumber = false;
};

bool isOptionalTensorList(const c10::IValue& value) {
  if (!value.isList()) return false;
  const auto elementType = value.type()->containedType(0);
  return elementType->kind() == c10::TypeKind::OptionalType &&
         elementType->containedType(0)->kind() == c10::TypeKind::TensorType;
}

PackedArg packTensor(const at::Tensor& tensor) {
  PackedArg arg;
  if (!tensor.defined()) {
    arg.value = c10::IValue(tensor);
    return arg;
  }
  if (tensor.device().is_privateuseone()) {
    arg.kind = PackedArg::Kind::kTensor;
    arg.tensors.emplace_back(describeTensor(tensor));
    return arg;
  }
  // commonDevice() admitted only 0-dim CPU tensors.
  arg.kind = PackedArg::Kind::kScalarTensor;
  arg.scalar = tensor.item();
  arg.scalarType = tensor.scalar_type();
  arg.wrappedNumber = tensor.unsafeGetTensorImpl()->is_wrapped_number();
  return arg;
}

std::vector<PackedArg> packArgs(c10::ArrayRef<c10::IValue> args) {
  std::vector<PackedArg> packed;
  packed.reserve(args.size());
  for (const c10::IValue& value : args) {
    if (value.isTensor()) {
      packed.push_back(packTensor(value.toTensor()));
    } else if (value.isTensorList()) {
      PackedArg arg;
      arg.kind = PackedArg::Kind::kTensorList;
      for (const at::Tensor& t : value.toTensorList().vec()) arg.tensors.emplace_back(describeTensor(t));
      packed.push_back(std::move(arg));
    } else if (isOptionalTensorList(value)) {
      PackedArg arg;
      arg.kind = PackedArg::Kind::kOptionalTensorList;
      for (const c10::IValue& element : value.toListRef()) {
        if (element.isTensor() && element.toTensor().defined()) {
          arg.tensors.emplace_back(describeTensor(element.toTensor()));
        } else {
          arg.tensors.emplace_back(std::nullopt);
        }
      }
      packed.push_back(std::move(arg));
    } else {
      PackedArg arg;
      arg.value = value;
      packed.push_back(std::move(arg));
    }
  }
  return packed;
}

// Runs inside the kernel body.
torch::jit::Stack unpackArgs(const std::vector<PackedArg>& packed) {
  torch::jit::Stack stack;
  stack.reserve(packed.size());
  for (const PackedArg& arg : packed) {
    switch (arg.kind) {
      case PackedArg::Kind::kValue:
        stack.push_back(arg.value);
        break;
      case PackedArg::Kind::kTensor:
        stack.emplace_back(arg.tensors[0]->view());
        break;
      case PackedArg::Kind::kScalarTensor: {
        at::Tensor scalar = at::scalar_tensor(arg.scalar, at::TensorOptions().dtype(arg.scalarType));
        if (arg.wrappedNumber) scalar.unsafeGetTensorImpl()->set_wrapped_number(true);
        stack.emplace_back(std::move(scalar));
        break;
      }
      case PackedArg::Kind::kTensorList: {
        c10::List<at::Tensor> list;
        list.reserve(arg.tensors.size());
        for (const auto& desc : arg.tensors) list.push_back(desc->view());
        stack.emplace_back(std::move(list));
        break;
      }
      case PackedArg::Kind::kOptionalTensorList: {
        c10::List<std::optional<at::Tensor>> list;
        list.reserve(arg.tensors.size());
        for (const auto& desc : arg.tensors) {
          list.push_back(desc ? std::optional<at::Tensor>(desc->view()) : std::nullopt);
        }
        stack.emplace_back(std::move(list));
        break;
      }
    }
  }
  return stack;
}

void collectTensors(const c10::IValue& value, std::vector<at::Tensor>& out) {
  if (value.isTensor()) {
    if (value.toTensor().defined()) out.push_back(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorList().vec()) out.push_back(t);
  } else if (value.isList()) {
    for (const c10::IValue& element : value.toListRef()) collectTensors(element, out);
  }
}

}  // namespace

c10::Device commonDevice(c10::ArrayRef<c10::IValue> args, const c10::OperatorHandle& op) {
  std::optional<c10::Device> device;
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& value : args) collectTensors(value, tensors);
  for (const at::Tensor& t : tensors) {
    const c10::Device d = t.device();
    if (d.is_privateuseone()) {
      if (!device) {
        device = d;
      } else {
        TORCH_CHECK(*device == d, "Expected all tensors to be on the same device, but found at least two devices, ",
                    deviceName(*device), " and ", deviceName(d), "! (when checking arguments for ",
                    op.schema().operator_name(), ")");
      }
    }
  }
  TORCH_CHECK(device.has_value(), "openreg: ", op.schema().operator_name(), " was dispatched to openreg without ",
              "an openreg tensor argument");
  for (const at::Tensor& t : tensors) {
    // A 0-dim CPU tensor is a scalar operand, as on CUDA.
    TORCH_CHECK(t.device().is_privateuseone() || (t.device().is_cpu() && t.dim() == 0),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                deviceName(*device), " and ", deviceName(t.device()), "! (when checking arguments for ",
                op.schema().operator_name(), ")");
  }
  return *device;
}

c10::OperatorHandle findOp(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

void launchCpuOp(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, c10::DeviceIndex device,
                 const std::string& kernel, const LaunchShape& shape, c10::ArrayRef<at::Tensor> outputs) {
  std::vector<PackedArg> packed = packArgs(args);
  std::vector<std::optional<TensorDesc>> outputDescs;
  outputDescs.reserve(outputs.size());
  for (const at::Tensor& out : outputs) {
    outputDescs.emplace_back(out.defined() ? std::optional<TensorDesc>(describeTensor(out)) : std::nullopt);
  }
  const bool functional = !outputs.empty();
  launchKernel(currentNativeStream(device), kernel, shape,
               [op, packed = std::move(packed), outputDescs = std::move(outputDescs), functional]() {
                 torch::jit::Stack stack = unpackArgs(packed);
                 op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
                 if (!functional) return;
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

class MetaThenLaunch final : public c10::OperatorKernel {
 public:
  MetaThenLaunch(c10::KernelFunction meta, KernelSpec spec) : meta_(std::move(meta)), spec_(std::move(spec)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    const size_t numArgs = op.schema().arguments().size();
    c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, numArgs);
    const c10::Device device = commonDevice(args, op);
    c10::DeviceGuard guard(device);

    torch::jit::Stack results(args.begin(), args.end());
    if (spec_.metaOnTwins) {
      runMetaOnTwins(op, keys, args, results);
    } else {
      meta_.callBoxed(op, keys, &results);  // validates, resizes out=, leaves the returns
    }

    std::vector<at::Tensor> inputs, outputs;
    for (const c10::IValue& v : args) collectTensors(v, inputs);
    for (const c10::IValue& v : results) collectTensors(v, outputs);
    // Name kernels after device operands, not after CPU scalars.
    std::stable_partition(inputs.begin(), inputs.end(), [](const at::Tensor& t) { return t.is_privateuseone(); });
    TORCH_INTERNAL_ASSERT(!inputs.empty());
    const at::Tensor& named = spec_.dtypeArg >= 0 ? args[spec_.dtypeArg].toTensor() : inputs.front();
    const at::Tensor& out = outputs.empty() ? inputs.front() : outputs.front();

    std::string name;
    LaunchShape shape;
    switch (spec_.style) {
      case KernelStyle::kElementwise:
        name = kernelName(spec_.base, named.scalar_type());
        shape = elementwiseShape(out.numel());
        break;
      case KernelStyle::kReduction: {
        name = kernelName(spec_.base, named.scalar_type());
        const int64_t outputsCount = std::max<int64_t>(1, out.numel());
        shape = reductionShape(outputsCount, std::max<int64_t>(1, named.numel() / outputsCount));
        break;
      }
      case KernelStyle::kRowwise: {
        name = kernelName(spec_.base, named.scalar_type());
        const int64_t dim = spec_.dimArg >= 0 ? c10::maybe_wrap_dim(args[spec_.dimArg].toInt(), named.dim()) : -1;
        const int64_t rowLength = named.dim() == 0 ? 1 : named.size(dim < 0 ? named.dim() - 1 : dim);
        shape = rowwiseShape(rowLength == 0 ? 0 : named.numel() / rowLength, rowLength);
        break;
      }
      case KernelStyle::kGemm: {
        const at::Tensor& lhs = args[spec_.lhs].toTensor();
        const at::Tensor& rhs = args[spec_.rhs].toTensor();
        name = kernelName(spec_.base, lhs.scalar_type()) + "_" + operandLayout(lhs) + operandLayout(rhs);
        const int64_t batch = lhs.dim() == 3 ? lhs.size(0) : 1;
        shape = gemmShape(lhs.size(-2), rhs.size(-1), batch);
        break;
      }
    }

    if (spec_.functionalOverload != nullptr) {
      // out= arguments are the trailing ones, one per return.
      const c10::OperatorHandle functional = findOp(op.schema().name().c_str(), spec_.functionalOverload);
      const size_t numInputs = functional.schema().arguments().size();
      launchCpuOp(functional, args.slice(0, numInputs), device.index(), name, shape, outputs);
    } else {
      launchCpuOp(op, args, device.index(), name, shape);
    }
    torch::jit::drop(*stack, numArgs);
    for (c10::IValue& r : results) stack->push_back(std::move(r));
  }

 private:
  void runMetaOnTwins(const c10::OperatorHandle& op, c10::DispatchKeySet keys, c10::ArrayRef<c10::IValue> args,
                      torch::jit::Stack& results) {
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

  c10::KernelFunction meta_;
  KernelSpec spec_;
};

}  // namespace

void registerMetaKernel(torch::Library& m, const char* schema, c10::KernelFunction meta, KernelSpec spec) {
  recordOpPath(std::string("aten::") + schema, OpPath::kDevice, spec.base);
  m.impl(schema, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<MetaThenLaunch>(std::move(meta), std::move(spec))));
}

}  // namespace openreg::backend
