// Indexing: index / index_put (CPU indices are uploaded first, as CUDA
// accepts them), index_select, gather/scatter family, masked_fill,
// index_fill, and embedding's backward.
#include <ATen/ExpandUtils.h>
#include <ATen/MetaFunctions.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/ArgumentChecks.h"
#include "backend/aten/DeviceKernel.h"
#include "backend/aten/KernelProbe.h"

namespace openreg::backend {

namespace {

c10::List<std::optional<at::Tensor>> indicesOnDevice(const c10::List<std::optional<at::Tensor>>& indices,
                                                     const c10::Device& device) {
  c10::List<std::optional<at::Tensor>> moved;
  moved.reserve(indices.size());
  for (const std::optional<at::Tensor>& index : indices) {
    if (index.has_value() && index->defined() && index->device() != device) {
      TORCH_CHECK(index->device().is_cpu(), "indices should be either on cpu or on the same device as the indexed ",
                  "tensor (", device, ")");
      moved.push_back(index->to(device));
    } else {
      moved.push_back(index);
    }
  }
  return moved;
}

// `indices` already on the device; `out` sized by index's meta function.
void launchIndex(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, const at::Tensor& out) {
  static const c10::OperatorHandle kOp = findOp("aten::index", "Tensor_out");
  const auto args = refArgs(self, indices, out);
  commonDevice(args, kOp);
  launchCpuOp(kOp, args, self.device().index(), kernelName("index_gather", self.scalar_type()),
              elementwiseShape(out.numel()));
}

at::Tensor& indexOut(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  c10::DeviceGuard guard(self.device());
  const auto moved = indicesOnDevice(indices, self.device());
  // Validates and sizes out; a boolean mask makes this synchronize (nonzero).
  at::meta::index_outf(self, moved, out);
  launchIndex(self, moved, out);
  return out;
}

// The functional overload gets its own kernel: ATen's default one would call
// index.Tensor_out through the dispatcher, a second aten::index in profiles.
at::Tensor index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  c10::DeviceGuard guard(self.device());
  const auto moved = indicesOnDevice(indices, self.device());
  at::Tensor out = emptyDeviceLike(at::meta::index(self, moved));
  launchIndex(self, moved, out);
  return out;
}

at::Tensor& indexPutImpl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                         const at::Tensor& values, bool accumulate, bool unsafe) {
  static const c10::OperatorHandle kOp = findOp("aten::_index_put_impl_", "");
  c10::DeviceGuard guard(self.device());
  const auto moved = indicesOnDevice(indices, self.device());
  TORCH_CHECK(self.scalar_type() == values.scalar_type(), "Index put requires the source and destination dtypes ",
              "match, got ", self.scalar_type(), " for the destination and ", values.scalar_type(), " for the source.");
  const auto args = refArgs(self, moved, values, accumulate, unsafe);
  commonDevice(args, kOp);
  launchCpuOp(kOp, args, self.device().index(),
              kernelName(accumulate ? "index_put_accumulate" : "index_put", self.scalar_type()),
              elementwiseShape(values.numel()));
  return self;
}

c10::DimVector indexSelectShape(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  c10::DimVector shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) {
    dim = c10::maybe_wrap_dim(dim, self.dim());
    shape[dim] = index.numel();
  }
  return shape;
}

at::Tensor& indexSelectOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  static const c10::OperatorHandle kOp = findOp("aten::index_select", "out");
  const auto args = refArgs(self, dim, index, out);
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  checkOutDoesNotOverlap(out, {self, index});  // before the resize
  at::native::resize_output(out, indexSelectShape(self, dim, index));
  launchCpuOp(kOp, args, device.index(), kernelName("index_select", self.scalar_type()), elementwiseShape(out.numel()));
  return out;
}

at::Tensor indexSelect(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({0}, self.options());
  return indexSelectOut(self, dim, index, out);
}

void checkMask(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(at::infer_size(self.sizes(), mask.sizes()) == self.sizes(), "masked_fill_: the mask of shape ",
              mask.sizes(), " cannot be broadcast to the destination of shape ", self.sizes());
}

at::Tensor& maskedFillScalar(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& value) {
  static const c10::OperatorHandle kOp = findOp("aten::masked_fill_", "Scalar");
  checkMask(self, mask);
  const auto args = refArgs(self, mask, value);
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  launchCpuOp(kOp, args, device.index(), kernelName("masked_fill", self.scalar_type()), elementwiseShape(self.numel()));
  return self;
}

// The value is read on the host, as CUDA's masked_fill_ does (item(), which
// synchronizes when it lives on the device): a value the dtype cannot hold
// then raises at the call, as on CPU, not later from the kernel.
at::Tensor& maskedFillTensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  static const c10::OperatorHandle kOp = findOp("aten::masked_fill_", "Tensor");
  checkMask(self, mask);
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  (void)commonDevice(refArgs(self, mask, value), kOp);
  return maskedFillScalar(self, mask, value.item());
}

template <const char* kOverload>
at::Tensor& indexFill(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::IValue& value) {
  static const c10::OperatorHandle kOp = findOp("aten::index_fill_", kOverload);
  const auto args = refArgs(self, dim, index, value);
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  launchCpuOp(kOp, args, device.index(), kernelName("index_fill", self.scalar_type()), elementwiseShape(index.numel()));
  return self;
}

constexpr char kIntScalar[] = "int_Scalar";
constexpr char kIntTensor[] = "int_Tensor";

at::Tensor& indexFillScalar(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value) {
  return indexFill<kIntScalar>(self, dim, index, value);
}

at::Tensor& indexFillTensor(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  return indexFill<kIntTensor>(self, dim, index, value);
}

at::Tensor embeddingDenseBackward(const at::Tensor& gradOutput, const at::Tensor& indices, int64_t numWeights,
                                  int64_t paddingIdx, bool scaleGradByFreq) {
  static const c10::OperatorHandle kOp = findOp("aten::embedding_dense_backward", "");
  const auto args = refArgs(gradOutput, indices, numWeights, paddingIdx, scaleGradByFreq);
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  at::Tensor out = at::empty({numWeights, gradOutput.size(-1)}, gradOutput.options());
  launchCpuOp(kOp, args, device.index(), kernelName("embedding_bwd", gradOutput.scalar_type()),
              elementwiseShape(gradOutput.numel()), {out});
  return out;
}

// nonzero has a data-dependent shape: count on the device, read the count on
// the host (a synchronization), then fill the sized output on the device.
at::Tensor& nonzeroOut(const at::Tensor& self, at::Tensor& out) {
  static const c10::OperatorHandle kOp = findOp("aten::nonzero", "out");
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: expected out to have dtype Long, got ", out.scalar_type());
  const auto args = refArgs(self, out);
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  at::Tensor count = at::empty({}, self.options().dtype(at::kLong));
  launchKernel(
      streamFor(self), kernelName("count_nonzero", self.scalar_type()), reductionShape(1, self.numel()),
      [s = describeTensor(self), c = describeTensor(count)]() { c.view().fill_(at::count_nonzero(s.view())); });
  const int64_t found = count.item<int64_t>();
  at::native::resize_output(out, {found, self.dim()});
  launchCpuOp(kOp, args, device.index(), kernelName("nonzero", self.scalar_type()), elementwiseShape(self.numel()));
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzeroOut(self, out);
}

// equal() returns a host bool: compare on the device, then read the flag.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Expected all tensors to be on the same device, but found at least ",
              "two devices, ", self.device(), " and ", other.device(), "!");
  if (self.sizes() != other.sizes()) return false;
  probeOnOneElement("equal", self.scalar_type(), [](at::Tensor& one) { (void)at::equal(one, one.clone()); });
  c10::DeviceGuard guard(self.device());
  at::Tensor flag = at::empty({}, self.options().dtype(at::kBool));
  launchKernel(streamFor(self), kernelName("equal", self.scalar_type()), reductionShape(1, self.numel()),
               [a = describeTensor(self), b = describeTensor(other), f = describeTensor(flag)]() {
                 f.view().fill_(at::equal(a.view(), b.view()));
               });
  return flag.item<bool>();
}

// masked_select = boolean-mask indexing of the broadcast operands.
at::Tensor maskedSelect(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  auto [expandedSelf, expandedMask] = at::expand_outplace(self, mask);
  at::Tensor source = *expandedSelf;
  at::Tensor selector = *expandedMask;
  // A mask indexes along dimensions; 0-dim operands get one, as CPU's kernel gives them.
  if (source.dim() == 0) {
    source = source.unsqueeze(0);
    selector = selector.unsqueeze(0);
  }
  return at::index(source, c10::List<std::optional<at::Tensor>>({std::optional<at::Tensor>(selector)}));
}

// The out= form: CPU's checks (PyTorch's fallback copied each argument on its
// own, so an out= tensor that overlaps an input was not caught), then the
// functional form's result moved into `out`.
at::Tensor& maskedSelectOut(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "masked_select(): self and result must have the same scalar ",
              "type");
  checkOutDoesNotOverlap(out, {self, mask});
  const at::Tensor selected = maskedSelect(self, mask);
  at::native::resize_output(out, selected.sizes());
  out.copy_(selected);
  return out;
}

at::Tensor& maskedScatter(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  static const c10::OperatorHandle kOp = findOp("aten::masked_scatter_", "");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),  // CPU's words, its missing space included
              "masked_scatter: expected self and source to have same dtypes but got", self.scalar_type(), " and ",
              source.scalar_type());
  TORCH_CHECK(at::infer_size(self.sizes(), mask.sizes()) == self.sizes(), "masked_scatter_: the mask of shape ",
              mask.sizes(), " cannot be broadcast to the destination of shape ", self.sizes());
  const auto args = refArgs(self, mask, source);
  const c10::Device device = commonDevice(args, kOp);
  c10::DeviceGuard guard(device);
  launchCpuOp(kOp, args, device.index(), kernelName("masked_scatter", self.scalar_type()),
              elementwiseShape(self.numel()));
  return self;
}

at::Tensor isnan(const at::Tensor& self) { return at::ne(self, self); }

// Gathers with the input's shape, computed by the CPU op and copied out.
at::Tensor sameShapeGather(const char* name, const char* kernel, c10::ArrayRef<ArgRef> args, const at::Tensor& self) {
  const c10::OperatorHandle op = findOp(name, "");
  const c10::Device device = commonDevice(args, op);
  c10::DeviceGuard guard(device);
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  launchCpuOp(op, args, device.index(), kernelName(kernel, self.scalar_type()), elementwiseShape(self.numel()), {out});
  return out;
}

at::Tensor flip(const at::Tensor& self, c10::IntArrayRef dims) {
  return sameShapeGather("aten::flip", "flip", refArgs(self, dims), self);
}

at::Tensor roll(const at::Tensor& self, c10::IntArrayRef shifts, c10::IntArrayRef dims) {
  return sameShapeGather("aten::roll", "roll", refArgs(self, shifts, dims), self);
}

KernelSpec indexed(const char* base, int dtypeArg = 0) { return KernelSpec{base, KernelStyle::Elementwise, dtypeArg}; }

// See KernelSpec::functionalMetaOnTwins.
KernelSpec indexedMetaOnTwins(const char* base) {
  KernelSpec spec = indexed(base);
  spec.functionalMetaOnTwins = true;
  return spec;
}

using ScatterSrc = at::Tensor& (*)(const at::Tensor&, int64_t, const at::Tensor&, const at::Tensor&, at::Tensor&);
using ScatterValue = at::Tensor& (*)(const at::Tensor&, int64_t, const at::Tensor&, const at::Scalar&, at::Tensor&);
using ScatterSrcReduce = at::Tensor& (*)(const at::Tensor&, int64_t, const at::Tensor&, const at::Tensor&,
                                         c10::string_view, at::Tensor&);
using ScatterValueReduce = at::Tensor& (*)(const at::Tensor&, int64_t, const at::Tensor&, const at::Scalar&,
                                           c10::string_view, at::Tensor&);

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index.Tensor_out", TORCH_FN(indexOut));
  m.impl("index.Tensor", TORCH_FN(index));
  m.impl("_index_put_impl_", TORCH_FN(indexPutImpl));
  m.impl("index_select.out", TORCH_FN(indexSelectOut));
  m.impl("index_select", TORCH_FN(indexSelect));
  m.impl("masked_fill_.Scalar", TORCH_FN(maskedFillScalar));
  m.impl("masked_fill_.Tensor", TORCH_FN(maskedFillTensor));
  m.impl("index_fill_.int_Scalar", TORCH_FN(indexFillScalar));
  m.impl("index_fill_.int_Tensor", TORCH_FN(indexFillTensor));
  m.impl("embedding_dense_backward", TORCH_FN(embeddingDenseBackward));
  m.impl("nonzero", TORCH_FN(nonzero));
  m.impl("nonzero.out", TORCH_FN(nonzeroOut));
  m.impl("masked_select", TORCH_FN(maskedSelect));
  m.impl("masked_select.out", TORCH_FN(maskedSelectOut));
  m.impl("equal", TORCH_FN(equal));
  recordOpPath("aten::equal", OpPath::Sync, "equal");
  m.impl("isnan", TORCH_FN(isnan));
  m.impl("masked_scatter_", TORCH_FN(maskedScatter));
  recordOpPath("aten::masked_scatter_", OpPath::Device, "masked_scatter");
  m.impl("flip", TORCH_FN(flip));
  m.impl("roll", TORCH_FN(roll));
  recordOpPath("aten::nonzero", OpPath::Sync, "count_nonzero + nonzero");
  recordOpPath("aten::nonzero.out", OpPath::Sync, "count_nonzero + nonzero");
  recordOpPath("aten::masked_select", OpPath::Sync, "count_nonzero + nonzero + index_gather");
  recordOpPath("aten::masked_select.out", OpPath::Sync, "count_nonzero + nonzero + index_gather + copy");
  recordOpPath("aten::isnan", OpPath::Device, "elementwise_ne");
  recordOpPath("aten::flip", OpPath::Device, "flip");
  recordOpPath("aten::roll", OpPath::Device, "roll");
  for (const auto& [op, kernel] : std::initializer_list<std::pair<const char*, const char*>>{
           {"index.Tensor_out", "index_gather"},
           {"index.Tensor", "index_gather"},
           {"_index_put_impl_", "index_put / index_put_accumulate"},
           {"index_select.out", "index_select"},
           {"index_select", "index_select"},
           {"masked_fill_.Scalar", "masked_fill"},
           {"masked_fill_.Tensor", "masked_fill"},
           {"index_fill_.int_Scalar", "index_fill"},
           {"index_fill_.int_Tensor", "index_fill"},
           {"embedding_dense_backward", "embedding_bwd"}}) {
    recordOpPath(std::string("aten::") + op, OpPath::Device, kernel);
  }

  OPENREG_STRUCTURED(m, "gather.out", gather, NO_INPLACE, indexed("gather"));
  OPENREG_STRUCTURED_SIG(m, "scatter.src_out", scatter, ScatterSrc, WITH_INPLACE, indexed("scatter"));
  OPENREG_STRUCTURED_SIG(m, "scatter.value_out", scatter, ScatterValue, WITH_INPLACE, indexed("scatter"));
  OPENREG_STRUCTURED_SIG(m, "scatter.reduce_out", scatter, ScatterSrcReduce, WITH_INPLACE, indexed("scatter_reduce"));
  OPENREG_STRUCTURED_SIG(m, "scatter.value_reduce_out", scatter, ScatterValueReduce, WITH_INPLACE,
                         indexed("scatter_reduce"));
  OPENREG_STRUCTURED(m, "scatter_add.out", scatter_add, WITH_INPLACE, indexed("scatter_add"));
  OPENREG_STRUCTURED(m, "scatter_reduce.two_out", scatter_reduce, WITH_INPLACE, indexed("scatter_reduce"));
  OPENREG_STRUCTURED(m, "index_add.out", index_add, WITH_INPLACE, indexedMetaOnTwins("index_add"));
  OPENREG_STRUCTURED(m, "index_copy.out", index_copy, WITH_INPLACE, indexed("index_copy"));
  OPENREG_STRUCTURED(m, "index_reduce.out", index_reduce, WITH_INPLACE, indexedMetaOnTwins("index_reduce"));
}

}  // namespace openreg::backend
