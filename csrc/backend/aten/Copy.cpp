// Copies (host<->device, device<->device, across devices) and fills.
//
// Bytes move with runtime memcpys on the current stream. Conversions of
// dtype, layout or broadcast happen as device copy kernels when the data is
// on the device, and on the host before an upload. A copy to or from the host
// synchronizes the stream (like CUDA), except a non_blocking copy with pinned
// host memory, which records the pinned block's use on the stream instead.
// Fills of dense tensors are runtime memsets when the element's bit pattern
// repeats at 8, 16 or 32 bits, and fill kernels otherwise.
#include <cstring>

#include <ATen/Dispatch_v2.h>
#include <torch/library.h>

#include "backend/CachingAllocator.h"
#include "backend/Device.h"
#include "backend/HostAllocator.h"
#include "backend/Launch.h"
#include "backend/OpRegistry.h"
#include "backend/Stream.h"

namespace openreg::backend {

namespace {

bool isDense(const at::Tensor& t) { return t.is_non_overlapping_and_dense(); }

bool sameLayout(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.strides() == b.strides();
}

// A conjugate or negative view: its memory holds the values before the
// conjugation or negation, so its bytes cannot be moved as they are.
bool hasViewBits(const at::Tensor& t) { return t.is_conj() || t.is_neg(); }

// Bytes of `src` can be moved into `dst` as they are: same dtype, sizes,
// strides and view bits, and dense.
bool bytesCopyable(const at::Tensor& dst, const at::Tensor& src) {
  return src.scalar_type() == dst.scalar_type() && sameLayout(src, dst) && isDense(src) && !hasViewBits(src) &&
         !hasViewBits(dst);
}

// A dense tensor's elements occupy [data_ptr, data_ptr + nbytes).
size_t denseBytes(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.itemsize(); }

// dst = src (with broadcast, dtype conversion and view bits) as a kernel on
// dst's device: the body's CPU copy_ reads and writes through the bits.
void launchCopyKernel(const at::Tensor& dst, const at::Tensor& src) {
  const std::string name =
      src.scalar_type() == dst.scalar_type()
          ? kernelName("copy_strided", dst.scalar_type())
          : std::string("copy_") + dtypeSuffix(src.scalar_type()) + "_to_" + dtypeSuffix(dst.scalar_type());
  LaunchShape shape = elementwiseShape(dst.numel());
  if (kernelWorkWanted()) shape.withBytes(distinctBytes(src), distinctBytes(dst));
  launchKernel(streamFor(dst), name, shape,
               [d = describeTensor(dst), s = describeTensor(src)]() { d.view().copy_(s.view()); });
}

// An uninitialized tensor shaped like `like`, with its strides when it is
// dense (so that bytes can move in one memcpy), contiguous otherwise.
at::Tensor emptyLike(const at::Tensor& like, const at::TensorOptions& options) {
  if (isDense(like)) return at::empty_strided(like.sizes(), like.strides(), options);
  return at::empty(like.sizes(), options);
}

void copyWithinDevice(const at::Tensor& dst, const at::Tensor& src) {
  c10::DeviceGuard guard(dst.device());
  if (bytesCopyable(dst, src)) {
    OPENREG_CHECK(
        orMemcpyAsync(dst.data_ptr(), src.const_data_ptr(), denseBytes(dst), orMemcpyDeviceToDevice, streamFor(dst)));
    return;
  }
  launchCopyKernel(dst, src);
}

// Orders `waiter` after the work queued on `signaller` so far.
void streamWaitStream(const c10::Stream& waiter, const c10::Stream& signaller) {
  DeviceScope scope(signaller.device_index());
  orEvent_t event = nullptr;
  OPENREG_CHECK(orEventCreateWithFlags(&event, orEventDisableTiming));
  const orError_t recorded = orEventRecord(event, nativeStream(signaller));
  const orError_t waited = recorded == orSuccess ? orStreamWaitEvent(nativeStream(waiter), event, 0) : recorded;
  orEventDestroy(event);
  OPENREG_CHECK(waited);
}

void copyAcrossDevices(const at::Tensor& dst, const at::Tensor& src) {
  // Stage on the source device: dst's dtype and shape, dense.
  at::Tensor staged = src;
  if (!bytesCopyable(dst, src)) {
    c10::DeviceGuard guard(src.device());
    staged = emptyLike(dst, src.options().dtype(dst.scalar_type()));
    launchCopyKernel(staged, src);
  }
  at::Tensor target = dst;
  if (!(isDense(dst) && sameLayout(staged, dst) && !hasViewBits(dst))) {
    c10::DeviceGuard guard(dst.device());
    target = at::empty_strided(staged.sizes(), staged.strides(), dst.options());
  }
  const c10::Stream srcStream = currentStream(src.device().index());
  const c10::Stream dstStream = currentStream(dst.device().index());
  streamWaitStream(dstStream, srcStream);
  {
    c10::DeviceGuard guard(dst.device());
    OPENREG_CHECK(orMemcpyAsync(target.data_ptr(), staged.const_data_ptr(), denseBytes(staged), orMemcpyDeviceToDevice,
                                nativeStream(dstStream)));
    if (!target.is_same(dst)) launchCopyKernel(dst, target);
  }
  // The source side may free (and reuse) its memory once the copy is done.
  streamWaitStream(srcStream, dstStream);
}

void copyHostToDevice(const at::Tensor& dst, const at::Tensor& src, bool nonBlocking) {
  c10::DeviceGuard guard(dst.device());
  const c10::Stream stream = currentStream(dst.device().index());
  at::Tensor target = dst;
  if (!isDense(dst) || hasViewBits(dst)) target = at::empty(dst.sizes(), dst.options());
  // Resolved on the host: the upload moves the values, not a view's bits.
  at::Tensor host = src.resolve_conj().resolve_neg();
  if (host.scalar_type() != dst.scalar_type()) host = host.to(dst.scalar_type());
  if (host.sizes() != dst.sizes()) host = host.expand(dst.sizes());
  if (!(isDense(host) && sameLayout(host, target))) {
    host = at::empty_strided(target.sizes(), target.strides(), host.options()).copy_(host);
  }
  OPENREG_CHECK(orMemcpyAsync(target.data_ptr(), host.const_data_ptr(), denseBytes(target), orMemcpyHostToDevice,
                              nativeStream(stream)));
  const bool fromPinnedSource = host.is_same(src) && isPinnedPointer(src.storage().data());
  if (fromPinnedSource) recordPinnedUse(src.storage().data_ptr(), stream);
  if (!target.is_same(dst)) launchCopyKernel(dst, target);
  // A blocking copy returns with the data on the device, as on CUDA.
  if (!nonBlocking) OPENREG_CHECK(orStreamSynchronize(nativeStream(stream)));
}

void copyDeviceToHost(const at::Tensor& dst, const at::Tensor& src, bool nonBlocking) {
  c10::DeviceGuard guard(src.device());
  const c10::Stream stream = currentStream(src.device().index());
  at::Tensor staged = src;
  const bool directlyCopyable = src.scalar_type() == dst.scalar_type() && src.sizes() == dst.sizes() && isDense(src) &&
                                !hasViewBits(src) && (!isDense(dst) || sameLayout(src, dst));
  if (!directlyCopyable) {
    staged = emptyLike(dst, src.options().dtype(dst.scalar_type()));
    launchCopyKernel(staged, src);
  }
  at::Tensor hostTarget = dst;
  if (!(isDense(dst) && sameLayout(staged, dst) && !hasViewBits(dst))) {
    hostTarget = at::empty_strided(staged.sizes(), staged.strides(), dst.options().pinned_memory(false));
  }
  OPENREG_CHECK(orMemcpyAsync(hostTarget.data_ptr(), staged.const_data_ptr(), denseBytes(staged), orMemcpyDeviceToHost,
                              nativeStream(stream)));
  if (nonBlocking && hostTarget.is_same(dst) && isPinnedPointer(dst.storage().data())) {
    recordPinnedUse(dst.storage().data_ptr(), stream);
    return;
  }
  // Also reports kernel failures queued before the copy.
  OPENREG_CHECK(orStreamSynchronize(nativeStream(stream)));
  if (!hostTarget.is_same(dst)) dst.copy_(hostTarget);
}

at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool nonBlocking) {
  const at::Tensor& src = self;
  if (dst.numel() == 0) return dst;
  const bool srcDevice = src.device().is_privateuseone();
  const bool dstDevice = dst.device().is_privateuseone();
  if (srcDevice && dstDevice) {
    if (src.device() == dst.device()) {
      copyWithinDevice(dst, src);
    } else {
      copyAcrossDevices(dst, src);
    }
  } else if (dstDevice && src.device().is_cpu()) {
    copyHostToDevice(dst, src, nonBlocking);
  } else if (srcDevice && dst.device().is_cpu()) {
    copyDeviceToHost(dst, src, nonBlocking);
  } else {
    TORCH_CHECK(false, "openreg: copy from ", src.device(), " to ", dst.device(), " is not supported");
  }
  return dst;
}

at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copyFrom(self, dst, false);
}

// The element's bit pattern, for scalar types a memset can fill.
bool fillBits(c10::ScalarType type, const c10::Scalar& value, uint64_t* bits) {
  if (c10::isComplexType(type) || c10::isQIntType(type) || c10::isFloat8Type(type)) return false;
  bool ok = false;
  AT_DISPATCH_V2(type, "openreg_fill_bits", AT_WRAP([&] {
                   const scalar_t converted = value.to<scalar_t>();
                   uint64_t pattern = 0;
                   std::memcpy(&pattern, &converted, sizeof(scalar_t));
                   *bits = pattern;
                   ok = true;
                 }),
                 AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  return ok;
}

bool tryMemset(const at::Tensor& self, const c10::Scalar& value, orStream_t stream) {
  if (!isDense(self)) return false;
  uint64_t bits = 0;
  if (!fillBits(self.scalar_type(), value, &bits)) return false;
  void* ptr = self.data_ptr();
  const size_t n = static_cast<size_t>(self.numel());
  switch (self.itemsize()) {
    case 1:
      OPENREG_CHECK(orMemsetAsync(ptr, static_cast<int>(bits & 0xff), n, stream));
      return true;
    case 2:
      OPENREG_CHECK(orMemsetD16Async(ptr, static_cast<uint16_t>(bits), n, stream));
      return true;
    case 4:
      OPENREG_CHECK(orMemsetD32Async(ptr, static_cast<uint32_t>(bits), n, stream));
      return true;
    case 8:
      if ((bits >> 32) != (bits & 0xffffffffull)) return false;
      OPENREG_CHECK(orMemsetD32Async(ptr, static_cast<uint32_t>(bits), 2 * n, stream));
      return true;
    default:
      return false;
  }
}

at::Tensor& fillScalar(at::Tensor& self, const c10::Scalar& value) {
  if (self.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  orStream_t stream = streamFor(self);
  if (tryMemset(self, value, stream)) return self;
  launchKernel(stream, kernelName("fill", self.scalar_type()), elementwiseShape(self.numel()),
               [d = describeTensor(self), value]() { d.view().fill_(value); });
  return self;
}

at::Tensor& fillTensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  if (!value.device().is_privateuseone()) return fillScalar(self, value.item());
  TORCH_CHECK(value.device() == self.device(), "Expected all tensors to be on the same device, but found at least ",
              "two devices, ", self.device(), " and ", value.device(), "!");
  if (self.numel() == 0) return self;
  c10::DeviceGuard guard(self.device());
  launchKernel(streamFor(self), kernelName("fill", self.scalar_type()), elementwiseShape(self.numel()),
               [d = describeTensor(self), v = describeTensor(value)]() { d.view().fill_(v.view()); });
  return self;
}

at::Tensor& zero(at::Tensor& self) { return fillScalar(self, 0); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(copyFromAndResize));
  m.impl("fill_.Scalar", TORCH_FN(fillScalar));
  m.impl("fill_.Tensor", TORCH_FN(fillTensor));
  m.impl("zero_", TORCH_FN(zero));
  recordOpPath("aten::_copy_from", OpPath::Copy, "memcpy / copy_strided / copy_<from>_to_<to>");
  recordOpPath("aten::_copy_from_and_resize", OpPath::Copy, "memcpy / copy_strided");
  recordOpPath("aten::fill_.Scalar", OpPath::Copy, "memset / fill");
  recordOpPath("aten::fill_.Tensor", OpPath::Device, "fill");
  recordOpPath("aten::zero_", OpPath::Copy, "memset / fill");
}

// The conjugate and negative fallbacks would resolve the source's bits with
// a clone, which copies through _copy_from again, endlessly (a stack
// overflow). The copies above handle the bits themselves, as copy_ does for
// CPU and CUDA.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace openreg::backend
