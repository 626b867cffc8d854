// Device kernels for operators that have a meta function (C++, Python or a
// composite one) but no structured out= family to register through
// OPENREG_STRUCTURED: linear algebra, FFTs, sorting and searching, special
// functions, and the backward of many of them. One table line per operator.
//
// The kernel runs the operator on meta-device twins of its device tensors:
// that validates the arguments, sizes new results and resizes out= tensors
// on the host. It then allocates the new results from the caching allocator
// and launches one device kernel whose body runs ATen's CPU implementation on
// views of device memory (launchCpuOp), as every openreg kernel does.
//
// When the meta function cannot size the results (a data-dependent size) or
// rejects the arguments, the call goes to the CPU fallback instead: that
// gives CPU's results or CPU's error message, and the fallback counts it.
#include <string>
#include <utility>
#include <vector>

#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"

namespace openreg::backend {

namespace {

// Meta twins of a call's device tensors (list elements included), and the way
// back from a twin to its device tensor.
class Twins {
 public:
  c10::IValue of(const c10::IValue& value) {
    if (value.isTensor()) return twinOf(value.toTensor());
    if (value.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : value.toTensorList().vec()) list.push_back(twinOf(t));
      return list;
    }
    if (value.isList()) {  // Tensor?[]: a generic list holding tensors or None
      bool tensors = false;
      for (const c10::IValue& element : value.toListRef()) tensors = tensors || element.isTensor();
      if (!tensors) return value;
      c10::List<std::optional<at::Tensor>> list;
      for (const c10::IValue& element : value.toListRef()) {
        list.push_back(element.isTensor() ? std::optional<at::Tensor>(twinOf(element.toTensor())) : std::nullopt);
      }
      return list;
    }
    return value;
  }

  // The device tensor `meta` stands for, or undefined for a new result.
  at::Tensor deviceOf(const at::Tensor& meta) const {
    for (const auto& [device, twin] : pairs_) {
      if (twin.is_same(meta)) return device;
    }
    return {};
  }

  // out= tensors the meta function resized: the device tensors follow.
  void resizeDeviceTensors() const {
    for (const auto& [device, twin] : pairs_) {
      if (device.sizes() != twin.sizes()) device.resize_(twin.sizes());
      if (device.strides() != twin.strides()) device.as_strided_(twin.sizes(), twin.strides());
    }
  }

 private:
  at::Tensor twinOf(const at::Tensor& t) {
    if (!t.defined() || !t.is_privateuseone()) return t;
    at::Tensor twin = detail::metaTwin(t);
    pairs_.emplace_back(t, twin);
    return twin;
  }

  std::vector<std::pair<at::Tensor, at::Tensor>> pairs_;  // (device, meta)
};

// The results of the meta call as device results: aliases of arguments map
// back to the device tensors, new tensors are allocated (and listed in
// `fresh`, positionally, as launchCpuOp copies results; aliases leave an
// undefined slot).
c10::IValue deviceResult(const c10::IValue& meta, const Twins& twins, std::vector<at::Tensor>& fresh) {
  auto map = [&](const at::Tensor& t) {
    if (!t.defined() || !t.is_meta()) {
      fresh.emplace_back();
      return t;
    }
    at::Tensor aliased = twins.deviceOf(t);
    if (aliased.defined()) {
      fresh.emplace_back();
      return aliased;
    }
    at::Tensor out = emptyDeviceLike(t);
    fresh.push_back(out);
    return out;
  };
  if (meta.isTensor()) return map(meta.toTensor());
  if (meta.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor& t : meta.toTensorList().vec()) list.push_back(map(t));
    return list;
  }
  if (meta.isNone()) fresh.emplace_back();
  return meta;
}

// How a kernel learns its results' sizes.
enum class Sizing {
  Meta,          // the operator's meta function
  LikeFirst,     // one result shaped like the first argument (ops without a meta function)
  Preallocated,  // the results are mutable arguments the caller sized (ops without a meta function)
};

class MetaShapedKernel final : public c10::OperatorKernel {
 public:
  MetaShapedKernel(const c10::OperatorHandle& op, std::string stem, Sizing sizing)
      : numArgs_(op.schema().arguments().size()), stem_(std::move(stem)), sizing_(sizing) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) const {
    c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, numArgs_);
    const c10::Device device = commonDevice(args, op);
    c10::DeviceGuard guard(device);
    Twins twins;
    torch::jit::Stack meta;
    meta.reserve(numArgs_);
    for (const c10::IValue& arg : args) meta.push_back(twins.of(arg));
    if (!sizeResults(op, args, meta)) {
      runCpuFallback(op, stack);  // CPU's results, or CPU's error
      return;
    }
    twins.resizeDeviceTensors();
    std::vector<at::Tensor> fresh;
    torch::jit::Stack results;
    for (const c10::IValue& value : meta) results.push_back(deviceResult(value, twins, fresh));
    const at::Tensor& named = namedTensor(fresh, args);
    launchCpuOp(op, KernelArgs(args), device.index(), kernelName(stem_, named.scalar_type()),
                elementwiseShape(named.numel()), fresh);
    torch::jit::drop(*stack, numArgs_);
    for (c10::IValue& r : results) stack->push_back(std::move(r));
  }

 private:
  // The tensor the kernel is named and shaped after: its first new result,
  // else its first device argument.
  static const at::Tensor& namedTensor(const std::vector<at::Tensor>& fresh, c10::ArrayRef<c10::IValue> args) {
    for (const at::Tensor& t : fresh) {
      if (t.defined()) return t;
    }
    for (const c10::IValue& arg : args) {
      if (arg.isTensor() && arg.toTensor().is_privateuseone()) return arg.toTensor();
    }
    for (const c10::IValue& arg : args) {
      if (!arg.isTensorList()) continue;
      for (const at::Tensor& t : arg.toTensorList()) {
        if (t.is_privateuseone()) return t;
      }
    }
    TORCH_INTERNAL_ASSERT(false, "a device kernel without a device tensor");
  }

  // Leaves the results, as meta tensors or twins of arguments, in `meta`;
  // false when they cannot be sized on the host.
  bool sizeResults(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, torch::jit::Stack& meta) const {
    switch (sizing_) {
      case Sizing::Meta:
        try {
          op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
        } catch (const std::exception&) {
          return false;
        }
        return true;
      case Sizing::LikeFirst: {
        at::Tensor like = detail::metaTwin(args[0].toTensor());
        meta.clear();
        meta.emplace_back(std::move(like));
        return true;
      }
      case Sizing::Preallocated: {
        const auto& returns = op.schema().returns();
        const auto& arguments = op.schema().arguments();
        torch::jit::Stack results;
        for (const c10::Argument& r : returns) {
          for (size_t i = 0; i < arguments.size(); ++i) {
            if (r.alias_info() != nullptr && arguments[i].alias_info() != nullptr &&
                *r.alias_info() == *arguments[i].alias_info()) {
              results.push_back(meta[i]);
            }
          }
        }
        meta = std::move(results);
        return true;
      }
    }
    return false;
  }

  size_t numArgs_;
  std::string stem_;
  Sizing sizing_;
};

// Registers `schema` ("linalg_qr.default" is spelled "linalg_qr") as a
// meta-shaped device kernel named `stem`_<dtype>.
void registerMetaShaped(torch::Library& m, const char* schema, const char* stem, Sizing sizing = Sizing::Meta) {
  const c10::OperatorHandle op = detail::findSchema(schema);
  m.impl(schema, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<MetaShapedKernel>(op, stem, sizing)));
  recordOpPath(std::string("aten::") + schema, OpPath::Device, stem);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const auto& [schema, stem] : std::initializer_list<std::pair<const char*, const char*>>{
#include "backend/aten/MetaShapedOps.inc"
       }) {
    registerMetaShaped(m, schema, stem);
  }
  // Without a meta function, sized by rule.
  registerMetaShaped(m, "_logcumsumexp", "logcumsumexp", Sizing::LikeFirst);
  registerMetaShaped(m, "_masked_softmax", "masked_softmax_fwd", Sizing::LikeFirst);
  registerMetaShaped(m, "_masked_softmax_backward", "masked_softmax_bwd", Sizing::LikeFirst);
  registerMetaShaped(m, "_standard_gamma_grad", "standard_gamma_grad", Sizing::LikeFirst);
  registerMetaShaped(m, "_cummax_helper", "cummax", Sizing::Preallocated);
  registerMetaShaped(m, "_cummin_helper", "cummin", Sizing::Preallocated);
}

}  // namespace openreg::backend
