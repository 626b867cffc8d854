// Each check repeats one that ATen's CPU kernel makes in its body (see
// ArgumentChecks.h), with the same message, for op_db's error inputs and the
// mistakes users make most: dimensions out of range, out= tensors that
// overlap the inputs, shapes that disagree.
#include "backend/aten/ArgumentChecks.h"

#include <string>
#include <unordered_map>

#include <ATen/AccumulateType.h>
#include <ATen/MemoryOverlap.h>
#include <c10/core/ScalarType.h>
#include <c10/core/WrapDimMinimal.h>

namespace openreg::backend {

namespace {

// A call's arguments by their schema names.
class NamedArgs {
 public:
  NamedArgs(const c10::FunctionSchema& schema, c10::ArrayRef<ArgRef> args) : schema_(schema), args_(args) {}

  // The tensor argument `name`, or nullptr when it is absent, None or undefined.
  const at::Tensor* tensor(const char* name) const {
    const ArgRef* arg = find(name);
    if (arg == nullptr) return nullptr;
    const auto* ref = std::get_if<std::reference_wrapper<const at::Tensor>>(arg);
    return ref != nullptr && ref->get().defined() ? &ref->get() : nullptr;
  }

  // Any other argument `name`, or nullptr when it is absent or None.
  const c10::IValue* value(const char* name) const {
    const ArgRef* arg = find(name);
    if (arg == nullptr) return nullptr;
    const auto* value = std::get_if<c10::IValue>(arg);
    return value != nullptr && !value->isNone() ? value : nullptr;
  }

 private:
  const ArgRef* find(const char* name) const {
    const auto& arguments = schema_.arguments();
    for (size_t i = 0; i < arguments.size() && i < args_.size(); ++i) {
      if (arguments[i].name() == name) return &args_[i];
    }
    return nullptr;
  }

  const c10::FunctionSchema& schema_;
  c10::ArrayRef<ArgRef> args_;
};

// Normalizations take float parameters with a half or bfloat16 input, or
// parameters of the input's dtype (ATen's check_mixed_data_type).
void checkNormParameters(const NamedArgs& args) {
  const at::Tensor* input = args.tensor("input");
  if (input == nullptr) return;
  c10::SmallVector<const at::Tensor*, 4> parameters;
  for (const char* name : {"weight", "bias", "running_mean", "running_var"}) {
    if (const at::Tensor* t = args.tensor(name)) parameters.push_back(t);
  }
  if (parameters.empty() || parameters.front()->scalar_type() == input->scalar_type()) return;
  for (const at::Tensor* parameter : parameters) {
    TORCH_CHECK(parameter->scalar_type() == at::kFloat,
                "mixed dtype (CPU): expect parameter to have scalar type of Float");
  }
  TORCH_CHECK(at::isReducedFloatingType(input->scalar_type()),
              "mixed dtype (CPU): all inputs must share same datatype.");
}

// ATen's CPU batch norm reads the running statistics unchecked in evaluation
// mode: without them the process died on the device's thread (CPU's own dies too).
void checkBatchNorm(const NamedArgs& args) {
  checkNormParameters(args);
  const c10::IValue* training = args.value("training");
  if (training == nullptr || training->toBool()) return;
  TORCH_CHECK(args.tensor("running_mean") != nullptr && args.tensor("running_var") != nullptr,
              "batch_norm: running_mean and running_var are required in evaluation mode (training=False)");
}

void checkBucketize(const NamedArgs& args) {
  const at::Tensor* boundaries = args.tensor("boundaries");
  TORCH_CHECK(boundaries == nullptr || boundaries->dim() == 1, "boundaries tensor must be 1 dimension, but got dim(",
              boundaries->dim(), ")");
}

void checkComplex(const NamedArgs& args) {
  const at::Tensor* real = args.tensor("real");
  const at::Tensor* imag = args.tensor("imag");
  if (real == nullptr || imag == nullptr) return;
  TORCH_CHECK(real->scalar_type() == imag->scalar_type(), "Expected object of scalar type ", real->scalar_type(),
              " but got scalar type ", imag->scalar_type(), " for second argument");
  const at::Tensor* out = args.tensor("out");
  const c10::ScalarType expected = c10::toComplexType(real->scalar_type());
  TORCH_CHECK(out == nullptr || out->scalar_type() == expected, "Expected object of scalar type ", expected,
              " but got scalar type ", out->scalar_type(), " for argument 'out'");
}

void checkKthvalue(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  const c10::IValue* k = args.value("k");
  const c10::IValue* dim = args.value("dim");
  if (self == nullptr || k == nullptr || dim == nullptr) return;
  if (const at::Tensor* values = args.tensor("values")) at::assert_no_overlap(*self, *values);
  const int64_t wrapped = c10::maybe_wrap_dim(dim->toInt(), self->dim());
  const int64_t slice = self->dim() == 0 ? 1 : self->size(wrapped);
  TORCH_CHECK(k->toInt() >= 1 && k->toInt() <= slice, "kthvalue(): selected number k out of range for dimension ",
              wrapped);
}

// For the ops whose kernels take `dim` unchecked (those sized like their input).
void checkDim(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  const c10::IValue* dim = args.value("dim");
  if (self != nullptr && dim != nullptr && dim->isInt()) c10::maybe_wrap_dim(dim->toInt(), self->dim());
}

void checkMaskedFill(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  const c10::IValue* value = args.value("value");
  if (self == nullptr || value == nullptr || !value->isScalar()) return;
  const c10::Scalar scalar = value->toScalar();
  // Scalar::to<T> refuses a value that overflows T, as the CPU kernel's fill
  // does. Other dtypes (complex32, ...) are left to the kernel, which knows
  // whether it supports them.
  switch (self->scalar_type()) {
#define OPENREG_CHECK_FILL(type, name) \
  case at::ScalarType::name:           \
    (void)scalar.to<type>();           \
    break;
    AT_FORALL_SCALAR_TYPES_AND3(Bool, Half, BFloat16, OPENREG_CHECK_FILL)
    OPENREG_CHECK_FILL(c10::complex<float>, ComplexFloat)
    OPENREG_CHECK_FILL(c10::complex<double>, ComplexDouble)
#undef OPENREG_CHECK_FILL
    default:
      break;
  }
}

void checkGelu(const NamedArgs& args) {
  const c10::IValue* approximate = args.value("approximate");
  if (approximate == nullptr) return;
  const std::string& name = approximate->toStringRef();
  TORCH_CHECK(name == "none" || name == "tanh", "approximate argument must be either none or tanh.");
}

void checkHuberLoss(const NamedArgs& args) {
  const c10::IValue* delta = args.value("delta");
  TORCH_CHECK(delta == nullptr || delta->toDouble() > 0, "huber_loss does not support non-positive values for delta.");
}

void checkMaxUnpool(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  const at::Tensor* indices = args.tensor("indices");
  if (self == nullptr || indices == nullptr) return;
  TORCH_CHECK(self->sizes() == indices->sizes(), "Expected shape of indices to be same as that of the input tensor (",
              self->sizes(), ") but got indices tensor with shape: ", indices->sizes());
}

void checkMarginInput(const at::Tensor& self) {
  const int64_t dims = self.dim();
  TORCH_CHECK((dims == 2 && self.size(1) != 0) || (dims == 1 && self.size(0) != 0) || dims == 0,
              "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ", self.sizes());
}

void checkMultiMarginLoss(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  const at::Tensor* target = args.tensor("target");
  if (self == nullptr || target == nullptr) return;
  checkMarginInput(*self);
  const int64_t frames = self->dim() <= 1 ? 1 : self->size(0);
  const int64_t classes = self->dim() == 0 ? 1 : self->size(-1);
  TORCH_CHECK(target->dim() <= 1 && target->numel() == frames,
              "multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples (batch "
              "size). Expected target size [",
              frames, "], but got ", target->sizes(), ".");
  const at::Tensor* weight = args.tensor("weight");
  TORCH_CHECK(weight == nullptr || (weight->dim() <= 1 && weight->numel() == classes),
              "inconsistent weight size, expected ", classes, " but got ", weight->sizes());
  TORCH_CHECK(target->scalar_type() == at::kLong, "expected scalar type Long but found ", target->scalar_type());
}

void checkMultilabelMarginLoss(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  const at::Tensor* target = args.tensor("target");
  if (self == nullptr || target == nullptr) return;
  checkMarginInput(*self);
  const bool consistent =
      self->dim() <= 1 ? target->dim() <= 1 && target->numel() == (self->dim() == 0 ? 1 : self->size(0))
                       : target->dim() == 2 && target->size(0) == self->size(0) && target->size(1) == self->size(1);
  TORCH_CHECK(consistent, "inconsistent target size: ", target->sizes(), " for input of size: ", self->sizes());
}

void checkRoll(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  const c10::IValue* shifts = args.value("shifts");
  const c10::IValue* dims = args.value("dims");
  if (self == nullptr || shifts == nullptr || dims == nullptr) return;
  const auto shiftList = shifts->toDimVector();
  const auto dimList = dims->toDimVector();
  TORCH_CHECK(!shiftList.empty(), "`shifts` required");
  if (dimList.empty() && shiftList.size() == 1) return;  // rolls the flattened tensor
  TORCH_CHECK(shiftList.size() == dimList.size(), "shifts and dimensions must align. shifts: ", shiftList.size(),
              ", dims:", dimList.size());
  for (int64_t dim : dimList) c10::maybe_wrap_dim(dim, self->dim(), /*wrap_scalar=*/false);
}

// CPU's kernel reads the weight as the input's dtype, unchecked until then.
void checkNllLoss(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  const at::Tensor* weight = args.tensor("weight");
  if (self == nullptr || weight == nullptr) return;
  TORCH_CHECK(weight->scalar_type() == self->scalar_type(), "expected scalar type ", self->scalar_type(), " but found ",
              weight->scalar_type());
}

void checkTake(const NamedArgs& args) {
  const at::Tensor* out = args.tensor("out");
  const at::Tensor* self = args.tensor("self");
  const at::Tensor* index = args.tensor("index");
  if (out != nullptr && self != nullptr && index != nullptr) checkOutDoesNotOverlap(*out, {*self, *index});
}

// Refusals of a dtype that CPU kernels raise as RuntimeErrors inside their
// bodies. (Their NotImplementedErrors, AT_DISPATCH's, reach the host through
// a dry run: KernelProbe.h. A RuntimeError of a dry run could as well come
// from the data, so these are checked here.)

// CPU's matrix products take no mixed dtypes (autocast casts before them).
void checkMatrixProductDtypes(const NamedArgs& args) {
  const at::Tensor* mat1 = args.tensor("mat1") != nullptr ? args.tensor("mat1") : args.tensor("self");
  const at::Tensor* mat2 = args.tensor("mat2");
  if (mat1 == nullptr || mat2 == nullptr) return;
  TORCH_CHECK(mat1->dtype() == mat2->dtype(), "expected m1 and m2 to have the same dtype, but got: ", mat1->dtype(),
              " != ", mat2->dtype());
}

void checkBatchedProductDtypes(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  const at::Tensor* mat2 = args.tensor("mat2");
  if (self == nullptr || mat2 == nullptr) return;
  TORCH_CHECK(self->scalar_type() == mat2->scalar_type(), "expected scalar type ", self->scalar_type(), " but found ",
              mat2->scalar_type());
}

void checkHardtanh(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  TORCH_CHECK(self == nullptr || self->scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
}

void checkStdVar(const NamedArgs& args, const char* what) {
  const at::Tensor* self = args.tensor("self");
  if (self == nullptr) return;
  TORCH_CHECK(at::isFloatingType(self->scalar_type()) || at::isComplexType(self->scalar_type()), what,
              " only support floating point and complex dtypes");
}
void checkStdOrVar(const NamedArgs& args) { checkStdVar(args, "std and var"); }
void checkStdMean(const NamedArgs& args) { checkStdVar(args, "std_mean"); }
void checkVarMean(const NamedArgs& args) { checkStdVar(args, "var_mean"); }

void checkNansum(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  TORCH_CHECK(self == nullptr || !self->is_complex(), "nansum on CPU does not support complex inputs");
}

void checkHeaviside(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  const at::Tensor* values = args.tensor("values");
  TORCH_CHECK((self == nullptr || !self->is_complex()) && (values == nullptr || !values->is_complex()),
              "heaviside is not yet implemented for complex tensors.");
}

// CPU's FFTs (MKL's) compute in float and double only.
void checkFft(const NamedArgs& args) {
  const at::Tensor* self = args.tensor("self");
  if (self == nullptr) return;
  const c10::ScalarType real = c10::toRealValueType(self->scalar_type());
  TORCH_CHECK(real == at::kFloat || real == at::kDouble, "MKL FFT doesn't support tensors of type: ", real);
}

// CPU's renorm accumulates in the dtype's accumulate type, which ComplexHalf
// lacks: ATen's own lookup raises CPU's (internal) error.
void checkRenorm(const NamedArgs& args) {
  if (const at::Tensor* self = args.tensor("self")) (void)at::toAccumulateType(self->scalar_type(), /*is_cuda=*/false);
}

// The data dtypes of CPU's segment reductions; it checks the lengths (data)
// before it dispatches on the dtype, so a dry run on zeros stops short.
void checkSegmentReduce(const NamedArgs& args) {
  const at::Tensor* data = args.tensor("data");
  if (data == nullptr) return;
  const c10::ScalarType dtype = data->scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(
      dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf || dtype == at::kBFloat16,
      "\"_segment_reduce_cpu\" not implemented for '", dtype, "'");
}

using Check = void (*)(const NamedArgs&);

const std::unordered_map<std::string, Check>& checks() {
  static const std::unordered_map<std::string, Check> kChecks = {
      {"aten::native_batch_norm", &checkBatchNorm},
      {"aten::_native_batch_norm_legit", &checkBatchNorm},
      {"aten::bucketize", &checkBucketize},
      {"aten::complex", &checkComplex},
      {"aten::kthvalue", &checkKthvalue},
      {"aten::_logcumsumexp", &checkDim},
      {"aten::masked_fill", &checkMaskedFill},
      {"aten::masked_fill_", &checkMaskedFill},
      {"aten::gelu", &checkGelu},
      {"aten::gelu_", &checkGelu},
      {"aten::gelu_backward", &checkGelu},
      {"aten::huber_loss", &checkHuberLoss},
      {"aten::huber_loss_backward", &checkHuberLoss},
      {"aten::max_unpool2d", &checkMaxUnpool},
      {"aten::max_unpool3d", &checkMaxUnpool},
      {"aten::multi_margin_loss", &checkMultiMarginLoss},
      {"aten::multilabel_margin_loss_forward", &checkMultilabelMarginLoss},
      {"aten::nll_loss_forward", &checkNllLoss},
      {"aten::nll_loss2d_forward", &checkNllLoss},
      {"aten::roll", &checkRoll},
      {"aten::take", &checkTake},
      {"aten::mm", &checkMatrixProductDtypes},
      {"aten::addmm", &checkMatrixProductDtypes},
      {"aten::_addmm_activation", &checkMatrixProductDtypes},
      {"aten::bmm", &checkBatchedProductDtypes},
      {"aten::native_layer_norm", &checkNormParameters},
      {"aten::_native_batch_norm_legit_no_training", &checkNormParameters},
      {"aten::native_group_norm", &checkNormParameters},
      {"aten::hardtanh", &checkHardtanh},
      {"aten::hardtanh_", &checkHardtanh},
      {"aten::std", &checkStdOrVar},
      {"aten::var", &checkStdOrVar},
      {"aten::std_mean", &checkStdMean},
      {"aten::var_mean", &checkVarMean},
      {"aten::nansum", &checkNansum},
      {"aten::heaviside", &checkHeaviside},
      {"aten::heaviside_", &checkHeaviside},
      {"aten::_fft_c2c", &checkFft},
      {"aten::_fft_r2c", &checkFft},
      {"aten::_fft_c2r", &checkFft},
      {"aten::renorm", &checkRenorm},
      {"aten::renorm_", &checkRenorm},
      {"aten::segment_reduce", &checkSegmentReduce},
  };
  return kChecks;
}

}  // namespace

void checkArgumentsOnHost(const c10::OperatorHandle& op, c10::ArrayRef<ArgRef> args) {
  const auto& table = checks();
  const auto found = table.find(op.operator_name().name);
  if (found != table.end()) found->second(NamedArgs(op.schema(), args));
}

void checkOutDoesNotOverlap(const at::Tensor& out,
                            std::initializer_list<std::reference_wrapper<const at::Tensor>> inputs) {
  at::assert_no_internal_overlap(out);
  for (const at::Tensor& input : inputs) at::assert_no_overlap(out, input);
}

}  // namespace openreg::backend
