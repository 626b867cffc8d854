// See KernelProbe.h. A small call's stand-ins have its own sizes: the dry
// run is the body, early, on zeros. A larger call's are cut to two elements
// per dimension so that a dry run costs what a tiny op costs; a meta function
// (the operator's, or the one a structured CPU kernel runs first) and the
// host argument checks must accept them before the CPU kernel computes on
// them, since a CPU kernel trusts the shapes they validated.
#include "backend/aten/KernelProbe.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <c10/util/hash.h>

#include "backend/aten/ArgumentChecks.h"

namespace openreg::backend {

namespace {

using TensorRef = std::reference_wrapper<const at::Tensor>;
using TensorListRef = std::reference_wrapper<const at::ITensorListRef>;

// The kinds of signature parts, in the low byte of each part.
enum class Part : int64_t { Undefined = 1, Tensor, List, None, Bool, String, Enum, Number, Generator, Other };

constexpr int64_t code(Part part, int64_t payload = 0) { return static_cast<int64_t>(part) | (payload << 8); }

int64_t tensorCode(const at::Tensor& t) {
  if (!t.defined()) return code(Part::Undefined);
  const int64_t flags = static_cast<int64_t>(t.scalar_type()) | (std::min<int64_t>(t.dim(), 63) << 8) |
                        (static_cast<int64_t>(t.numel() == 0) << 14) |
                        (static_cast<int64_t>(!t.is_privateuseone()) << 15) |
                        (static_cast<int64_t>(t.is_conj()) << 16) | (static_cast<int64_t>(t.is_neg()) << 17);
  return code(Part::Tensor, flags);
}

// Enum-like arguments (ScalarType, Layout, MemoryFormat) travel as ints; their
// values choose kernels, unlike sizes and dimensions.
bool isEnumArgument(const c10::Argument* argument) {
  if (argument == nullptr) return false;
  c10::TypePtr type = argument->real_type();
  if (const auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  const c10::TypeKind kind = type->kind();
  return kind == c10::TypeKind::ScalarTypeType || kind == c10::TypeKind::LayoutType ||
         kind == c10::TypeKind::MemoryFormatType;
}

// What a probe remembers of a call.
struct Signature {
  const void* op = nullptr;
  c10::SmallVector<int64_t, 12> parts;
  int64_t elements = 0;  // of all its tensors: decides between exact and cut stand-ins

  bool operator==(const Signature& other) const { return op == other.op && parts == other.parts; }

  void clear(const c10::OperatorHandle& handle) {
    op = &handle.schema();
    parts.clear();
    elements = 0;
  }

  void addTensor(const at::Tensor& t) {
    parts.push_back(tensorCode(t));
    if (t.defined() && t.is_privateuseone()) elements += t.numel();
  }

  void addValue(const c10::IValue& value, const c10::Argument* argument) {
    if (value.isTensor()) {
      addTensor(value.toTensor());
    } else if (value.isNone()) {
      parts.push_back(code(Part::None));
    } else if (value.isBool()) {
      parts.push_back(code(Part::Bool, value.toBool()));
    } else if (value.isString()) {
      parts.push_back(code(Part::String, static_cast<int64_t>(std::hash<std::string>{}(value.toStringRef()) >> 8)));
    } else if (value.isInt()) {
      parts.push_back(isEnumArgument(argument) ? code(Part::Enum, value.toInt()) : code(Part::Number, 0));
    } else if (value.isDouble() || value.isComplexDouble()) {
      parts.push_back(code(Part::Number, value.isDouble() ? 1 : 2));
    } else if (value.isGenerator()) {
      parts.push_back(code(Part::Generator));
    } else if (value.isList()) {
      const auto elements = value.toListRef();
      parts.push_back(code(Part::List, static_cast<int64_t>(elements.size())));
      for (const c10::IValue& element : elements) {
        if (element.isTensor() || element.isNone()) addValue(element, nullptr);
      }
    } else {
      parts.push_back(code(Part::Other));
    }
  }

  void add(const ArgRef& arg, const c10::Argument* argument) {
    if (const auto* tensor = std::get_if<TensorRef>(&arg)) {
      addTensor(tensor->get());
    } else if (const auto* list = std::get_if<TensorListRef>(&arg)) {
      parts.push_back(code(Part::List, static_cast<int64_t>(list->get().size())));
      for (const at::Tensor& t : list->get()) addTensor(t);
    } else {
      addValue(std::get<c10::IValue>(arg), argument);
    }
  }

  // Small calls are probed with their own sizes, larger ones with cut
  // sizes: a part of the signature, since the two may differ.
  void finish() { parts.push_back(code(Part::Other, elements <= kExactElements)); }

  // A dry run on zeros of this many elements costs little next to a launch.
  static constexpr int64_t kExactElements = int64_t{1} << 16;
};

struct SignatureHash {
  size_t operator()(const Signature& s) const {
    size_t hash = std::hash<const void*>{}(s.op);
    for (int64_t part : s.parts) hash = c10::hash_combine(hash, std::hash<int64_t>{}(part));
    return hash;
  }
};

// A thread's verdicts (a signature's refusal to raise again, or none) and
// the signature being looked up, reused so that a lookup allocates nothing.
struct Probes {
  std::unordered_map<Signature, std::exception_ptr, SignatureHash> verdicts;
  Signature scratch;
};

// Out of line: inlined, GCC recomputes a thread_local's address (a call to
// __tls_get_addr in a shared library) at each use, a dozen times a lookup.
[[gnu::noinline]] Probes& threadProbes() {
  thread_local Probes probes;
  return probes;
}

// Drops the warnings of a dry run: the kernel itself gives them.
class SilentWarnings final : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

// What a kernel body runs under (Launch.cpp), and no Python mode: a dry run
// is none of a TorchDispatchMode's business.
struct DryRunScope {
  SilentWarnings silent;
  c10::WarningUtils::WarningHandlerGuard warnings{&silent};
  at::DisableRecordFunctionGuard noRecordFunction;
  at::AutoDispatchBelowADInplaceOrView belowAutograd;
  c10::AutoGradMode noGrad{false};
  c10::impl::ExcludeDispatchKeyGuard noPython{c10::python_ks |
                                              c10::DispatchKeySet(c10::DispatchKey::PythonTLSSnapshot)};
};

// Stand-ins with the call's own sizes, or every dimension cut to two.
enum class Sizes { Exact, Cut };

// A contiguous stand-in for device tensor `t` on `device` (zeros on the
// CPU); other tensors (0-dim CPU scalars) pass as they are.
at::Tensor standIn(const at::Tensor& t, c10::DeviceType device, Sizes cut) {
  if (!t.defined() || !t.is_privateuseone()) return t;
  c10::SmallVector<int64_t, 5> sizes;
  for (int64_t size : t.sizes()) sizes.push_back(cut == Sizes::Cut ? std::min<int64_t>(size, 2) : size);
  at::Tensor s = device == c10::DeviceType::Meta ? at::Tensor(at::detail::empty_meta(sizes, t.scalar_type()))
                                                 : at::Tensor(at::detail::empty_cpu(sizes, t.scalar_type()));
  if (device == c10::DeviceType::CPU && s.nbytes() > 0) std::memset(s.mutable_data_ptr(), 0, s.nbytes());
  if (t.is_conj()) s._set_conj(true);
  if (t.is_neg()) s._set_neg(true);
  return s;
}

c10::IValue standInValue(const c10::IValue& value, c10::DeviceType device, Sizes cut) {
  if (value.isTensor()) return standIn(value.toTensor(), device, cut);
  // The device's generator cannot seed a CPU kernel; a private one leaves CPU's default alone.
  if (value.isGenerator()) return at::make_generator<at::CPUGeneratorImpl>(0);
  if (value.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor& t : value.toTensorList().vec()) list.push_back(standIn(t, device, cut));
    return list;
  }
  if (value.isList()) {
    const auto elements = value.toListRef();
    if (std::none_of(elements.begin(), elements.end(), [](const c10::IValue& e) { return e.isTensor(); })) {
      return value;
    }
    c10::List<std::optional<at::Tensor>> list;
    for (const c10::IValue& e : elements) {
      list.push_back(e.isTensor() ? std::optional<at::Tensor>(standIn(e.toTensor(), device, cut)) : std::nullopt);
    }
    return list;
  }
  return value;
}

// A call's arguments with stand-ins for its device tensors.
class StandIns {
 public:
  StandIns(c10::ArrayRef<ArgRef> args, c10::ArrayRef<at::Tensor> outputs, Sizes cut)
      : args_(args), outputs_(outputs), cut_(cut) {}

  torch::jit::Stack stack(c10::DeviceType device) const {
    torch::jit::Stack stack;
    stack.reserve(args_.size() + outputs_.size());
    for (const ArgRef& arg : args_) {
      if (const auto* tensor = std::get_if<TensorRef>(&arg)) {
        stack.emplace_back(standIn(tensor->get(), device, cut_));
      } else if (const auto* list = std::get_if<TensorListRef>(&arg)) {
        c10::List<at::Tensor> standInList;
        for (const at::Tensor& t : list->get()) standInList.push_back(standIn(t, device, cut_));
        stack.emplace_back(std::move(standInList));
      } else {
        stack.push_back(standInValue(std::get<c10::IValue>(arg), device, cut_));
      }
    }
    for (const at::Tensor& out : outputs_) stack.emplace_back(standIn(out, device, cut_));
    return stack;
  }

 private:
  c10::ArrayRef<ArgRef> args_;
  c10::ArrayRef<at::Tensor> outputs_;
  Sizes cut_;
};

// Whether the stand-ins pass `check` and the host argument checks.
bool standInsAreValid(const c10::OperatorHandle& op, const StandIns& standIns, StandInCheck check) {
  try {
    DryRunScope scope;
    if (check == StandInCheck::ByMeta) {
      torch::jit::Stack meta = standIns.stack(c10::DeviceType::Meta);
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
    }
    torch::jit::Stack cpu = standIns.stack(c10::DeviceType::CPU);
    c10::SmallVector<ArgRef, 8> refs;
    for (const c10::IValue& value : cpu) refs.push_back(argRef(value));
    checkArgumentsOnHost(op, refs);
    return true;
  } catch (const std::exception&) {
    return false;  // no meta function, or the call's sizes matter: not probed
  }
}

// The CPU kernel's refusal of the stand-ins, or null (see KernelProbe.h).
// Stand-ins of the call's own sizes need no validation: the body runs the
// same kernel on the same sizes.
std::exception_ptr refusal(const c10::OperatorHandle& op, c10::ArrayRef<ArgRef> args, c10::ArrayRef<at::Tensor> outputs,
                           Sizes cut, StandInCheck check) {
  const StandIns standIns(args, outputs, cut);
  if (cut == Sizes::Cut && !standInsAreValid(op, standIns, check)) return nullptr;
  try {
    DryRunScope scope;
    torch::jit::Stack cpu = standIns.stack(c10::DeviceType::CPU);
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
  } catch (const c10::NotImplementedError&) {
    return std::current_exception();
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): see KernelProbe.h
  }
  return nullptr;
}

}  // namespace

void probeCpuKernel(const c10::OperatorHandle& op, c10::ArrayRef<ArgRef> args, c10::ArrayRef<at::Tensor> outputs,
                    StandInCheck check) {
  Probes& mine = threadProbes();
  Signature& signature = mine.scratch;
  signature.clear(op);
  const auto& arguments = op.schema().arguments();
  for (size_t i = 0; i < args.size(); ++i) signature.add(args[i], i < arguments.size() ? &arguments[i] : nullptr);
  for (const at::Tensor& out : outputs) signature.addTensor(out);
  signature.finish();
  auto found = mine.verdicts.find(signature);
  if (found == mine.verdicts.end()) {
    Signature key = signature;  // a dry run may look up signatures of its own
    const Sizes cut = key.elements <= Signature::kExactElements ? Sizes::Exact : Sizes::Cut;
    std::exception_ptr verdict = refusal(op, args, outputs, cut, check);
    found = mine.verdicts.emplace(std::move(key), std::move(verdict)).first;
  }
  if (found->second) std::rethrow_exception(found->second);
}

void probeOnOneElement(const char* kernel, c10::ScalarType dtype, const std::function<void(at::Tensor&)>& body,
                       bool remember) {
  thread_local std::unordered_map<std::string, std::exception_ptr> table;
  std::string key = std::string(kernel) + '/' + c10::toString(dtype);
  if (remember) {
    if (auto found = table.find(key); found != table.end()) {
      if (found->second) std::rethrow_exception(found->second);
      return;
    }
  }
  std::exception_ptr refusal;
  try {
    DryRunScope scope;
    at::Tensor one = at::detail::empty_cpu({1}, dtype);
    std::memset(one.mutable_data_ptr(), 0, one.nbytes());
    body(one);
  } catch (const std::exception&) {
    refusal = std::current_exception();
  }
  if (remember) table.emplace(std::move(key), refusal);
  if (refusal) std::rethrow_exception(refusal);
}

}  // namespace openreg::backend
