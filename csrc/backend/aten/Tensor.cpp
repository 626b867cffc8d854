// Tensor creation, metadata and views, storage resizing, record_stream and
// _local_scalar_dense: the kernels every PrivateUse1 backend must provide.
#include <array>

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "backend/CachingAllocator.h"
#include "backend/Device.h"
#include "backend/Launch.h"
#include "backend/OpRegistry.h"
#include "backend/Stream.h"
#include "backend/aten/Resize.h"

namespace openreg::backend {

void resizeStorageBytes(c10::StorageImpl* storage, size_t newBytes) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  c10::Allocator* allocator = storage->allocator();
  TORCH_CHECK(allocator != nullptr, "openreg: cannot resize a storage without an allocator");
  const c10::Device device = storage->device();
  c10::DeviceGuard guard(device);
  c10::DataPtr fresh = allocator->allocate(newBytes);
  const size_t keep = std::min(storage->nbytes(), newBytes);
  if (keep > 0 && storage->data() != nullptr) {
    const c10::Stream stream = currentStream(device.index());
    OPENREG_CHECK(orMemcpyAsync(fresh.get(), storage->data(), keep, orMemcpyDeviceToDevice, nativeStream(stream)));
    // The old block is read by this copy: keep it from reuse until then.
    deviceAllocator()->recordStream(storage->data_ptr(), stream);
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(newBytes);
}

void ensureStorageFits(c10::TensorImpl* self) {
  if (self->numel() == 0) return;
  const size_t needed =
      at::detail::computeStorageNbytes(self->sizes(), self->strides(), self->itemsize(), self->storage_offset());
  const c10::Storage& storage = self->unsafe_storage();
  if (needed > storage.nbytes()) resizeStorageBytes(storage.unsafeGetStorageImpl(), needed);
}

namespace {

constexpr c10::DispatchKeySet kOpenRegKeys{c10::DispatchKey::PrivateUse1};

at::Tensor emptyMemoryFormat(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                             std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                             std::optional<bool> pinMemory, std::optional<c10::MemoryFormat> memoryFormat) {
  TORCH_CHECK(!pinMemory.value_or(false), "openreg: only CPU tensors can be pinned");
  TORCH_CHECK(layout.value_or(c10::kStrided) == c10::kStrided, "openreg supports strided tensors only, got ", *layout);
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_generic(size, deviceAllocator(), kOpenRegKeys, c10::dtype_or_default(dtype), memoryFormat);
}

at::Tensor emptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                        std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                        std::optional<bool> pinMemory) {
  TORCH_CHECK(!pinMemory.value_or(false), "openreg: only CPU tensors can be pinned");
  TORCH_CHECK(layout.value_or(c10::kStrided) == c10::kStrided, "openreg supports strided tensors only, got ", *layout);
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_strided_generic(size, stride, deviceAllocator(), kOpenRegKeys, c10::dtype_or_default(dtype));
}

const at::Tensor& resize(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> memoryFormat) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (impl->sizes() != size || memoryFormat.has_value()) {
    impl->set_sizes_contiguous(size);
    if (memoryFormat.has_value()) {
      TORCH_CHECK(*memoryFormat != c10::MemoryFormat::Preserve, "Unsupported memory format ", *memoryFormat);
      impl->empty_tensor_restride(*memoryFormat);
    }
  }
  c10::DeviceGuard guard(self.device());
  ensureStorageFits(impl);
  return self;
}

at::Tensor& setStorageOffset(at::Tensor& self, c10::Storage source, int64_t storageOffset, c10::IntArrayRef size,
                             c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, storageOffset, size, stride);
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(storageOffset);
  if (stride.data() != nullptr) {
    impl->set_sizes_and_strides(size, stride);
  } else {
    impl->set_sizes_contiguous(size);
  }
  c10::DeviceGuard guard(self.device());
  ensureStorageFits(impl);
  return self;
}

at::Tensor& setEmpty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, deviceAllocator(), /*resizable=*/true);
  return setStorageOffset(self, std::move(storage), 0, {0}, {});
}

void recordStream(at::Tensor& self, c10::Stream stream) {
  deviceAllocator()->recordStream(self.storage().data_ptr(), stream);
}

// Reading a value on the host: stream order, then a synchronization that also
// reports any kernel failure queued before it.
c10::Scalar localScalarDense(const at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  orStream_t stream = streamFor(self);
  alignas(16) std::array<char, 16> buffer{};
  TORCH_INTERNAL_ASSERT(self.itemsize() <= buffer.size());
  OPENREG_CHECK(orMemcpyAsync(buffer.data(), self.const_data_ptr(), self.itemsize(), orMemcpyDeviceToHost, stream));
  OPENREG_CHECK(orStreamSynchronize(stream));
  const at::Tensor host = at::from_blob(buffer.data(), {}, at::TensorOptions().dtype(self.scalar_type()));
  return at::_local_scalar_dense(host);
}

// Lets `param.data = tensor` move a parameter between CPU and openreg in
// place, as between CPU and CUDA. Module.to() relies on it: otherwise it
// re-creates parameters, which silently unties shared (tied) weights.
bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  auto denseHostOrDevice = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided && (t.is_cpu() || t.is_privateuseone());
  };
  if (denseHostOrDevice(self) && denseHostOrDevice(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(hasCompatibleShallowCopyType));
  m.impl("empty.memory_format", TORCH_FN(emptyMemoryFormat));
  m.impl("empty_strided", TORCH_FN(emptyStrided));
  m.impl("resize_", TORCH_FN(resize));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(setStorageOffset));
  m.impl("set_.source_Storage", TORCH_FN(at::native::set_));
  m.impl("set_.source_Tensor", TORCH_FN(at::native::set_tensor_));
  m.impl("set_", TORCH_FN(setEmpty));
  m.impl("record_stream", TORCH_FN(recordStream));
  m.impl("_local_scalar_dense", TORCH_FN(localScalarDense));

  m.impl("view", TORCH_FN(at::native::view));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));

  for (const char* op : {"empty.memory_format", "empty_strided", "resize_", "set_.source_Storage_storage_offset",
                         "set_.source_Storage", "set_.source_Tensor", "set_"}) {
    recordOpPath(std::string("aten::") + op, OpPath::Factory);
  }
  recordOpPath("aten::record_stream", OpPath::View);
  recordOpPath("aten::_has_compatible_shallow_copy_type", OpPath::View);
  recordOpPath("aten::_local_scalar_dense", OpPath::Sync, "memcpy DtoH");
  for (const char* op : {"view", "as_strided", "_reshape_alias", "unfold", "view_as_real", "view_as_complex"}) {
    recordOpPath(std::string("aten::") + op, OpPath::View);
  }
}

}  // namespace openreg::backend
