// Launching device kernels from ATen kernels.
//
// A kernel body runs on one of the device's executor threads, in stream
// order, never on the calling thread. It captures device memory only as raw
// pointers plus metadata (TensorDesc), never as at::Tensor: a captured tensor
// would move its free onto the worker thread, out of the allocator's
// stream-ordered bookkeeping and out of the profiler's sight. Inside the body,
// TensorDesc::view() wraps the memory as a non-owning CPU tensor so that
// ATen's CPU implementation can compute on it.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <openreg/runtime.hpp>

#include "backend/Check.h"

namespace openreg::backend {

struct TensorDesc {
  void* data = nullptr;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::SmallVector<int64_t, 6> sizes;
  c10::SmallVector<int64_t, 6> strides;

  // Non-owning CPU tensor over the same memory. Only inside a kernel body.
  at::Tensor view() const;
  int64_t numel() const;
};

// Describes a defined device tensor for a kernel body.
TensorDesc describeTensor(const at::Tensor& tensor);

// "f32", "bf16", "i64", "b8", ...
const char* dtypeSuffix(c10::ScalarType dtype);
// base + "_" + dtypeSuffix(dtype), e.g. "elementwise_add_f32".
std::string kernelName(std::string_view base, c10::ScalarType dtype);

// Launch shapes as a GPU kernel of that kind would use them; profilers show them.
LaunchShape elementwiseShape(int64_t numel);
LaunchShape rowwiseShape(int64_t rows, int64_t rowLength);
LaunchShape reductionShape(int64_t outputs, int64_t inputsPerOutput);
LaunchShape gemmShape(int64_t m, int64_t n, int64_t batch);

// Puts the executor thread in the state kernel bodies expect: no profiler
// records (RecordFunction off), no autograd, no Python.
class KernelScope {
 public:
  KernelScope();
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  struct State;
  State* state_;
};

// Queues `body` (a callable taking no arguments) on `stream` as kernel `name`
// and returns at once. An exception thrown by the body becomes the kernel's
// failure, reported (with the kernel's name) at the next synchronization.
template <class F>
void launchKernel(orStream_t stream, const std::string& name, const LaunchShape& shape, F&& body) {
  auto wrapped = [body = std::forward<F>(body)]() mutable {
    KernelScope scope;
    try {
      body();
    } catch (const c10::Error& e) {
      // The C++ backtrace is noise in a kernel failure message.
      throw std::runtime_error(e.what_without_backtrace());
    }
  };
  OPENREG_CHECK(openreg::launch(stream, name.c_str(), std::move(wrapped), shape));
}

// The calling thread's current stream on the device of `tensor`.
orStream_t streamFor(const at::Tensor& tensor);

}  // namespace openreg::backend
