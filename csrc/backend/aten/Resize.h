// Storage growth for openreg tensors (resize_, set_, UntypedStorage.resize_).
#pragma once

#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

namespace openreg::backend {

// Grows (or shrinks) `storage` to `newBytes`. The old contents are copied on
// the device, in stream order, and the old block is freed afterwards.
void resizeStorageBytes(c10::StorageImpl* storage, size_t newBytes);

// Makes sure `self`'s storage holds its current sizes/strides/offset.
void ensureStorageFits(c10::TensorImpl* self);

}  // namespace openreg::backend
