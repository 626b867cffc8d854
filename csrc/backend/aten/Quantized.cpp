// Quantized tensors on openreg (dispatch key QuantizedPrivateUse1):
// quantize_per_tensor and quantize_per_channel, dequantize, int_repr, the
// quantizer's parameters, views, copies (to and from the CPU too) and the
// factories ATen's quantized paths call.
//
// A quantized openreg tensor is ATen's own QTensorImpl on openreg memory
// (at::new_qtensor allocates from the device's allocator): the storage holds
// the integer representation, the quantizer holds scale and zero point (per
// channel: tensors, on openreg or on the CPU as the caller gave them).
// Kernels work as every openreg kernel does: CPU's checks on the host, from a
// dry run of CPU's operator on one-element stand-ins (errors raise at the
// call with CPU's messages); one device kernel whose body runs the CPU
// quantization functions that CPU's quantize_per_tensor calls too, on views
// of device memory, so the integers are CPU's exactly.
// ATen's generic quantize and dequantize paths are not used: for a device
// other than CUDA they read per-channel zero points on the host, which
// device memory does not allow.
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/EmptyTensor.h>
#include <ATen/native/quantized/AffineQuantizer.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <torch/library.h>

#include "backend/OpRegistry.h"
#include "backend/aten/DeviceKernel.h"
#include "backend/aten/KernelProbe.h"

namespace openreg::backend {

namespace {

// A per-channel parameter (scales or zero points) for a kernel body: device
// memory as a descriptor, a CPU tensor's values copied (bodies hold no
// at::Tensor, see Launch.h).
struct ChannelParams {
  std::optional<TensorDesc> device;
  std::vector<uint8_t> host;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  int64_t numel = 0;

  static ChannelParams of(const at::Tensor& values) {
    ChannelParams p;
    p.dtype = values.scalar_type();
    p.numel = values.numel();
    if (values.is_privateuseone()) {
      p.device = describeTensor(values);
    } else {
      const at::Tensor contiguous = values.contiguous();
      p.host.resize(contiguous.nbytes());
      if (!p.host.empty()) std::memcpy(p.host.data(), contiguous.const_data_ptr(), p.host.size());
    }
    return p;
  }

  // Inside a kernel body.
  at::Tensor view() const {
    if (device.has_value()) return device->view();
    return at::from_blob(const_cast<uint8_t*>(host.data()), {numel}, at::TensorOptions().dtype(dtype));
  }
};

// What a body needs of a quantized tensor's quantizer.
struct QParams {
  c10::QScheme scheme = c10::kPerTensorAffine;
  double scale = 0;
  int64_t zeroPoint = 0;
  ChannelParams scales;
  ChannelParams zeroPoints;
  int64_t axis = 0;

  static QParams of(const at::Tensor& q) {
    QParams p;
    p.scheme = q.qscheme();
    if (p.scheme == c10::kPerTensorAffine) {
      p.scale = q.q_scale();
      p.zeroPoint = q.q_zero_point();
    } else {
      p.scales = ChannelParams::of(q.q_per_channel_scales());
      p.zeroPoints = ChannelParams::of(q.q_per_channel_zero_points());
      p.axis = q.q_per_channel_axis();
    }
    return p;
  }
};

// A CPU quantized tensor over device memory `d` with the quantizer of `p`
// (inside a kernel body): CPU's quantization functions take it as they take
// a CPU tensor.
at::Tensor quantizedCpuView(const TensorDesc& d, const QParams& p) {
  at::QuantizerPtr quantizer =
      p.scheme == c10::kPerTensorAffine
          ? at::make_per_tensor_affine_quantizer(p.scale, p.zeroPoint, d.dtype)
          : at::make_per_channel_affine_quantizer(p.scales.view(), p.zeroPoints.view(), p.axis, d.dtype);
  const size_t bytes = at::detail::computeStorageNbytes(d.sizes, d.strides, c10::elementSize(d.dtype));
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, at::DataPtr(d.data, c10::Device(c10::kCPU)),
                       /*allocator=*/nullptr, /*resizable=*/false);
  at::Tensor view =
      at::detail::make_tensor<at::QTensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::QuantizedCPU),
                                               caffe2::TypeMeta::fromScalarType(d.dtype), std::move(quantizer));
  view.unsafeGetTensorImpl()->set_sizes_and_strides(d.sizes, d.strides);
  return view;
}

// CPU's quantization of float `r` into `q` (bodies only).
void quantizeOnCpu(const at::Tensor& r, at::Tensor& q, const QParams& p) {
  switch (p.scheme) {
    case c10::kPerTensorAffine:
      at::native::quantize_tensor_per_tensor_affine(r, q, p.scale, p.zeroPoint);
      return;
    case c10::kPerChannelAffine:
      at::native::quantize_tensor_per_channel_affine(r, q, p.scales.view(), p.zeroPoints.view(), p.axis);
      return;
    case c10::kPerChannelAffineFloatQParams:
      at::native::quantize_tensor_per_channel_float_qparams(r, q, p.scales.view(), p.zeroPoints.view(), p.axis);
      return;
    default:
      TORCH_CHECK(false, "openreg: unsupported qscheme ", c10::toString(p.scheme));
  }
}

void dequantizeOnCpu(const at::Tensor& q, at::Tensor& r, const QParams& p) {
  switch (p.scheme) {
    case c10::kPerTensorAffine:
      at::native::dequantize_tensor_per_tensor_affine(q, r, p.scale, p.zeroPoint);
      return;
    case c10::kPerChannelAffine:
      at::native::dequantize_tensor_per_channel_affine(q, r, p.scales.view(), p.zeroPoints.view(), p.axis);
      return;
    case c10::kPerChannelAffineFloatQParams:
      at::native::dequantize_tensor_per_channel_float_qparams(q, r, p.scales.view(), p.zeroPoints.view(), p.axis);
      return;
    default:
      TORCH_CHECK(false, "openreg: unsupported qscheme ", c10::toString(p.scheme));
  }
}

// quint8, qint8 and qint32; the packed sub-byte dtypes are not supported.
void checkSupportedDtype(c10::ScalarType dtype) {
  TORCH_CHECK_NOT_IMPLEMENTED(dtype == at::kQUInt8 || dtype == at::kQInt8 || dtype == at::kQInt32,
                              "openreg: quantized dtype ", dtype,
                              " is not supported (quint8, qint8 and qint32 are; keep ", dtype, " tensors on the CPU)");
}

// Per-channel float zero points with qint32: CPU's quantize and dequantize
// for them die of an illegal instruction (torch 2.13), a dry run included,
// so they are refused before anything runs them.
void checkFloatZeroPoints(c10::ScalarType zeroPoints, c10::ScalarType dtype) {
  TORCH_CHECK(!(at::isFloatingType(zeroPoints) && dtype == at::kQInt32),
              "openreg: per-channel float zero points with torch.qint32 are not supported: CPU's kernel for them "
              "(torch 2.13) dies of an illegal instruction; use integer zero points, or quint8 or qint8");
}

void checkQuantizer(const at::Tensor& q) {
  if (q.qscheme() == c10::kPerChannelAffineFloatQParams) {
    checkFloatZeroPoints(q.q_per_channel_zero_points().scalar_type(), q.scalar_type());
  }
}

// The quantized tensor `quantizer` gives `like` (contiguous in `like`'s
// suggested memory format, as CPU's quantize allocates it).
at::Tensor newQuantized(const at::Tensor& like, c10::ScalarType dtype, at::QuantizerPtr quantizer) {
  return at::new_qtensor(like.sizes(), like.options().dtype(dtype).memory_format(like.suggest_memory_format()),
                         std::move(quantizer));
}

// Quantizes float `input` into `q` (same sizes, on openreg): one kernel.
void launchQuantize(const at::Tensor& input, const at::Tensor& q) {
  checkQuantizer(q);
  c10::DeviceGuard guard(q.device());
  if (q.numel() == 0) return;
  const at::Tensor contiguous = input.contiguous(input.suggest_memory_format());
  const QParams params = QParams::of(q);
  const char* stem = params.scheme == c10::kPerTensorAffine ? "quantize_per_tensor" : "quantize_per_channel";
  launchKernel(streamFor(q), kernelName(stem, q.scalar_type()), elementwiseShape(q.numel()),
               [r = describeTensor(contiguous), qd = describeTensor(q), params]() {
                 at::Tensor qv = quantizedCpuView(qd, params);
                 quantizeOnCpu(r.view(), qv, params);
               });
}

at::Tensor quantizePerTensor(const at::Tensor& self, double scale, int64_t zeroPoint, c10::ScalarType dtype) {
  // CPU's checks and errors: a dry run on one element.
  probeOnOneElement(
      "quantize_per_tensor", self.scalar_type(),
      [&](at::Tensor& one) { (void)at::quantize_per_tensor(one, scale, zeroPoint, dtype); }, /*remember=*/false);
  checkSupportedDtype(dtype);
  at::Tensor q = newQuantized(self, dtype, at::make_per_tensor_affine_quantizer(scale, zeroPoint, dtype));
  launchQuantize(self, q);
  return q;
}

// Scale and zero point as tensors: read on the host, as CPU and CUDA do.
at::Tensor quantizePerTensorTensorQParams(const at::Tensor& self, const at::Tensor& scale, const at::Tensor& zeroPoint,
                                          c10::ScalarType dtype) {
  return quantizePerTensor(self, scale.item().toDouble(), zeroPoint.item().toLong(), dtype);
}

std::vector<at::Tensor> quantizePerTensorList(at::TensorList tensors, const at::Tensor& scales,
                                              const at::Tensor& zeroPoints, c10::ScalarType dtype) {
  const at::Tensor hostScales = scales.cpu();
  const at::Tensor hostZeroPoints = zeroPoints.cpu();
  std::vector<at::Tensor> results;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto index = static_cast<int64_t>(i);
    results.push_back(quantizePerTensor(tensors[i], hostScales[index].item().toDouble(),
                                        hostZeroPoints[index].item().toLong(), dtype));
  }
  return results;
}

// A CPU stand-in for a per-channel call: the input's rank, one element but
// along `axis` (whose length the parameters must match).
at::Tensor perChannelStandIn(const at::Tensor& self, int64_t axis) {
  std::vector<int64_t> sizes(self.dim(), 1);
  if (axis >= 0 && axis < self.dim()) sizes[axis] = self.size(axis);
  return at::zeros(sizes, at::TensorOptions().dtype(self.scalar_type()));
}

at::Tensor quantizePerChannel(const at::Tensor& self, const at::Tensor& scales, const at::Tensor& zeroPoints,
                              int64_t axis, c10::ScalarType dtype) {
  checkFloatZeroPoints(zeroPoints.scalar_type(), dtype);
  // CPU checks the zero points' values: they are read on the host (a
  // synchronization when they live on the device).
  const at::Tensor hostScales = scales.cpu();
  const at::Tensor hostZeroPoints = zeroPoints.cpu();
  probeOnOneElement(
      "quantize_per_channel", self.scalar_type(),
      [&](at::Tensor&) {
        (void)at::quantize_per_channel(perChannelStandIn(self, axis), hostScales, hostZeroPoints, axis, dtype);
      },
      /*remember=*/false);
  checkSupportedDtype(dtype);
  at::Tensor q = newQuantized(self, dtype, at::make_per_channel_affine_quantizer(scales, zeroPoints, axis, dtype));
  launchQuantize(self, q);
  return q;
}

// A tensor of the quantized tensor's integer dtype over the same memory.
at::Tensor integerAlias(const at::Tensor& q) {
  const c10::DispatchKeySet keys(q.is_privateuseone() ? c10::DispatchKey::PrivateUse1 : c10::DispatchKey::CPU);
  at::Tensor alias = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(q.storage()), keys, caffe2::TypeMeta::fromScalarType(c10::toUnderlying(q.scalar_type())));
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(q.sizes(), q.strides(), q.storage_offset());
  return alias;
}

at::Tensor intRepr(const at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(c10::toUnderlying(self.scalar_type())),
                             self.suggest_memory_format());
  if (out.numel() == 0) return out;
  TensorDesc source = describeTensor(self);
  source.dtype = out.scalar_type();
  launchKernel(streamFor(out), kernelName("int_repr", self.scalar_type()), elementwiseShape(out.numel()),
               [source, o = describeTensor(out)]() { o.view().copy_(source.view()); });
  return out;
}

at::Tensor dequantize(const at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  checkSupportedDtype(self.scalar_type());
  checkQuantizer(self);
  const c10::MemoryFormat format = self.suggest_memory_format();
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(at::kFloat), format);
  if (out.numel() == 0) return out;
  const at::Tensor q = self.contiguous(format);
  const QParams params = QParams::of(q);
  const char* stem = params.scheme == c10::kPerTensorAffine ? "dequantize_per_tensor" : "dequantize_per_channel";
  launchKernel(streamFor(out), kernelName(stem, self.scalar_type()), elementwiseShape(out.numel()),
               [qd = describeTensor(q), o = describeTensor(out), params]() {
                 at::Tensor ov = o.view();
                 dequantizeOnCpu(quantizedCpuView(qd, params), ov, params);
               });
  return out;
}

// A dense tensor "dequantizes" to float, as on CPU.
at::Tensor dequantizeDense(const at::Tensor& self) { return self.to(at::kFloat); }

std::vector<at::Tensor> dequantizeList(at::TensorList tensors) {
  std::vector<at::Tensor> results;
  for (const at::Tensor& t : tensors) results.push_back(t.dequantize());
  return results;
}

// float -> quantized, into `self`'s quantizer (CPU's quantized copy_: float
// contiguous source of the same shape).
void quantizedCopyFromFloat(const at::Tensor& self, const at::Tensor& src) {
  TORCH_CHECK(src.scalar_type() == at::kFloat, "Quantized copy only works with kFloat as source Tensor");
  TORCH_CHECK(self.is_contiguous() && src.is_contiguous(), "Quantized copy only works with contiguous Tensors");
  TORCH_CHECK(self.sizes().equals(src.sizes()), "Quantized copy only works with Tensors with the same shape");
  launchQuantize(src.to(self.device()), self);
}

// `q`'s quantizer for a tensor on `device`: per-channel parameters follow
// the data (CPU's kernels read them), as CPU's copy_ would share them.
at::QuantizerPtr quantizerFor(const at::Tensor& q, const at::Device& device) {
  if (q.qscheme() == c10::kPerTensorAffine || q.q_per_channel_scales().device() == device) return q.quantizer();
  return at::make_per_channel_affine_quantizer(q.q_per_channel_scales().to(device),
                                               q.q_per_channel_zero_points().to(device), q.q_per_channel_axis(),
                                               q.scalar_type());
}

// _copy_from for every copy that involves a quantized openreg tensor (the
// dispatcher sends a mix of QuantizedCPU and openreg here too): CPU's
// quantized copy_ semantics, the integers moved by the dense copy paths.
at::Tensor copyFromQuantized(const at::Tensor& src, const at::Tensor& self, bool nonBlocking) {
  if (self.is_quantized() && !src.is_quantized()) {
    if (!self.is_privateuseone()) return const_cast<at::Tensor&>(self).copy_(src.cpu(), nonBlocking);
    quantizedCopyFromFloat(self, src);
    return self;
  }
  TORCH_CHECK(self.is_quantized(),
              "Copying from quantized Tensor to non-quantized Tensor is not allowed, please use dequantize to get a "
              "float Tensor from a quantized Tensor");
  TORCH_CHECK(self.qscheme() == src.qscheme(), "Quantized Copy only works with same qscheme");
  TORCH_CHECK(self.scalar_type() == src.scalar_type());
  at::set_quantizer_(self, quantizerFor(src, self.device()));
  integerAlias(self).copy_(integerAlias(src), nonBlocking);
  return self;
}

// The values and the quantizer, as CPU's equal does.
bool equalQuantized(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Expected all tensors to be on the same device, but found at least ",
              "two devices, ", self.device(), " and ", other.device(), "!");
  if (!other.is_quantized() || self.sizes() != other.sizes() || self.scalar_type() != other.scalar_type() ||
      !self.quantizer()->equalTo(other.quantizer())) {
    return false;
  }
  return at::equal(integerAlias(self), integerAlias(other));
}

// A quantized tensor made from `self`'s integers.
at::Tensor fromIntegers(const at::Tensor& self, at::Tensor q) {
  if (q.numel() > 0) integerAlias(q).copy_(self);
  return q;
}

at::Tensor makePerTensorQuantized(const at::Tensor& self, double scale, int64_t zeroPoint) {
  probeOnOneElement(
      "make_per_tensor_quantized_tensor", self.scalar_type(),
      [&](at::Tensor& one) { (void)at::_make_per_tensor_quantized_tensor(one, scale, zeroPoint); },
      /*remember=*/false);
  const c10::ScalarType dtype = c10::toQIntType(self.scalar_type());
  return fromIntegers(self, newQuantized(self, dtype, at::make_per_tensor_affine_quantizer(scale, zeroPoint, dtype)));
}

at::Tensor makePerChannelQuantized(const at::Tensor& self, const at::Tensor& scales, const at::Tensor& zeroPoints,
                                   int64_t axis) {
  checkFloatZeroPoints(zeroPoints.scalar_type(), c10::toQIntType(self.scalar_type()));
  const at::Tensor hostScales = scales.cpu();
  const at::Tensor hostZeroPoints = zeroPoints.cpu();
  probeOnOneElement(
      "make_per_channel_quantized_tensor", self.scalar_type(),
      [&](at::Tensor&) {
        (void)at::_make_per_channel_quantized_tensor(perChannelStandIn(self, axis), hostScales, hostZeroPoints, axis);
      },
      /*remember=*/false);
  const c10::ScalarType dtype = c10::toQIntType(self.scalar_type());
  return fromIntegers(
      self, newQuantized(self, dtype, at::make_per_channel_affine_quantizer(scales, zeroPoints, axis, dtype)));
}

// ATen's per-channel factory keeps its parameters where they are; a tensor
// made for another device gets them there (the CPU's kernels read them).
at::Tensor emptyPerChannel(at::IntArrayRef size, const at::Tensor& scales, const at::Tensor& zeroPoints, int64_t axis,
                           std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                           std::optional<at::Device> device, std::optional<bool> pinMemory,
                           std::optional<at::MemoryFormat> format) {
  const at::Device target = device.value_or(scales.device());
  return at::native::empty_per_channel_affine_quantized(size, scales.to(target), zeroPoints.to(target), axis, dtype,
                                                        layout, target, pinMemory, format);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("quantize_per_tensor", TORCH_FN(quantizePerTensor));
  m.impl("quantize_per_tensor.tensor_qparams", TORCH_FN(quantizePerTensorTensorQParams));
  m.impl("quantize_per_tensor.tensors", TORCH_FN(quantizePerTensorList));
  m.impl("quantize_per_channel", TORCH_FN(quantizePerChannel));
  m.impl("dequantize.self", TORCH_FN(dequantizeDense));
  m.impl("_make_per_tensor_quantized_tensor", TORCH_FN(makePerTensorQuantized));
  m.impl("_make_per_channel_quantized_tensor", TORCH_FN(makePerChannelQuantized));
  m.impl("_empty_per_channel_affine_quantized", TORCH_FN(emptyPerChannel));
  for (const char* op : {"aten::quantize_per_tensor", "aten::quantize_per_tensor.tensor_qparams",
                         "aten::quantize_per_tensor.tensors", "aten::quantize_per_channel"}) {
    recordOpPath(op, OpPath::Device, "quantize_per_tensor / quantize_per_channel");
  }
  recordOpPath("aten::dequantize.self", OpPath::Device, "dequantize_per_tensor / dequantize_per_channel");
  recordOpPath("aten::_make_per_tensor_quantized_tensor", OpPath::Copy);
  recordOpPath("aten::_make_per_channel_quantized_tensor", OpPath::Copy);
  recordOpPath("aten::_empty_per_channel_affine_quantized", OpPath::Factory);
}

// Kernels of quantized openreg tensors. The factories, views and parameter
// queries are ATen's device-generic ones (those QuantizedCPU registers).
TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("int_repr", TORCH_FN(intRepr));
  m.impl("dequantize.self", TORCH_FN(dequantize));
  m.impl("dequantize.tensors", TORCH_FN(dequantizeList));
  m.impl("_copy_from", TORCH_FN(copyFromQuantized));
  m.impl("equal", TORCH_FN(equalQuantized));
  m.impl("clone", TORCH_FN(at::native::quantized_clone));
  m.impl("q_scale", TORCH_FN(at::native::q_scale_quant));
  m.impl("q_zero_point", TORCH_FN(at::native::q_zero_point_quant));
  m.impl("qscheme", TORCH_FN(at::native::qscheme_quant));
  m.impl("q_per_channel_scales", TORCH_FN(at::native::q_per_channel_scales));
  m.impl("q_per_channel_zero_points", TORCH_FN(at::native::q_per_channel_zero_points));
  m.impl("q_per_channel_axis", TORCH_FN(at::native::q_per_channel_axis));
  m.impl("_empty_affine_quantized", TORCH_FN(at::native::empty_affine_quantized));
  m.impl("_empty_per_channel_affine_quantized", TORCH_FN(emptyPerChannel));  // BackendSelect: by the dtype
  m.impl("empty_quantized", TORCH_FN(at::native::empty_quantized));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_unknown_quantized));
  m.impl("empty_strided", TORCH_FN(at::native::empty_strided_unknown_quantized));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_quantized));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_qtensorimpl));
  m.impl("view", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, at::IntArrayRef)>(at::native::view)));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_quantized));
  m.impl("squeeze", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&)>(at::native::squeeze_quantized)));
  m.impl("squeeze.dim",
         TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(at::native::squeeze_quantized)));
  m.impl("squeeze.dims",
         TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, at::IntArrayRef)>(at::native::squeeze_quantized)));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(at::native::set_storage_quantized_));
}

}  // namespace openreg::backend
