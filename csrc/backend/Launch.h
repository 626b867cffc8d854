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

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <openreg/runtime.hpp>

#include "backend/Check.h"

namespace openreg::backend {

struct TensorDesc {
  void* data = nullptr;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  // The conjugate and negative view bits: the ops that receive such views
  // (copy_, the matrix products) read the memory through them as on CPU.
  bool conj = false;
  bool neg = false;
  // Four dimensions inline keep a typical kernel's state in one small heap
  // block (see CpuOpKernel); more spill to the heap.
  c10::SmallVector<int64_t, 4> sizes;
  c10::SmallVector<int64_t, 4> strides;

  // Non-owning CPU tensor over the same memory, with the view bits. Only
  // inside a kernel body.
  at::Tensor view() const;
  int64_t numel() const;
};

// Describes a defined device tensor for a kernel body.
TensorDesc describeTensor(const at::Tensor& tensor);
// The same, in place (kernel state is built where it stays).
void describeTensorInto(const at::Tensor& tensor, TensorDesc& desc);

// "f32", "bf16", "i64", "b8", ...
const char* dtypeSuffix(c10::ScalarType dtype);
// base + "_" + dtypeSuffix(dtype), e.g. "elementwise_add_f32".
std::string kernelName(std::string_view base, c10::ScalarType dtype);

// Launch shapes as a GPU kernel of that kind would use them; profilers show them.
LaunchShape elementwiseShape(int64_t numel);
LaunchShape rowwiseShape(int64_t rows, int64_t rowLength);
LaunchShape reductionShape(int64_t outputs, int64_t inputsPerOutput);
LaunchShape gemmShape(int64_t m, int64_t n, int64_t batch);

// Bytes of the distinct elements a tensor's view covers: broadcast (stride 0)
// dimensions count once. What a kernel must at least read or write of it.
uint64_t distinctBytes(const at::Tensor& tensor);
// Whether a launch should define its work (LaunchShape::withFlops/withBytes)
// now: only while the profiler records kernel metrics (one atomic load).
bool kernelWorkWanted();

namespace detail {
// Runs `run(body)` on an executor thread in the state kernel bodies expect:
// no profiler records (RecordFunction off), no autograd, no Python. An
// exception becomes the kernel's failure message (without the C++ backtrace,
// which is noise there); returns nonzero then.
int runKernelBody(void (*run)(void*), void* body, char* message, size_t capacity) noexcept;

template <class Body>
int invokeKernelBody(void* body, char* message, size_t capacity) {
  return runKernelBody([](void* b) { (*static_cast<Body*>(b))(); }, body, message, capacity);
}

template <class Body>
void destroyKernelBody(void* body) {
  delete static_cast<Body*>(body);
}

// Queues the kernel; the runtime owns `body` from here on (destroyed here if
// the launch fails, before the error is thrown).
void launchOwnedBody(orStream_t stream, const char* name, const LaunchShape& shape, orKernelFunc invoke, void* body,
                     void (*destroy)(void*));
}  // namespace detail

// Queues `body` (a callable taking no arguments, built on the heap by the
// caller so that its state is never moved or copied again) on `stream` as
// kernel `name` and returns at once. An exception thrown by the body becomes
// the kernel's failure, reported (with the kernel's name) at the next
// synchronization.
template <class Body>
void launchKernelObject(orStream_t stream, const char* name, const LaunchShape& shape, std::unique_ptr<Body> body) {
  detail::launchOwnedBody(stream, name, shape, &detail::invokeKernelBody<Body>, body.release(),
                          &detail::destroyKernelBody<Body>);
}

// The same for a lambda or other callable, moved to the heap once.
template <class F>
void launchKernel(orStream_t stream, const std::string& name, const LaunchShape& shape, F&& body) {
  launchKernelObject(stream, name.c_str(), shape, std::make_unique<std::decay_t<F>>(std::forward<F>(body)));
}

// The calling thread's current stream on the device of `tensor`.
orStream_t streamFor(const at::Tensor& tensor);

}  // namespace openreg::backend
