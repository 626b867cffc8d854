#include "backend/Launch.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>

#include <openreg/activity.h>

#include "backend/Device.h"
#include "backend/Stream.h"

namespace openreg::backend {

at::Tensor TensorDesc::view() const {
  at::Tensor t = at::from_blob(data, sizes, strides, at::TensorOptions().dtype(dtype).device(c10::kCPU));
  if (conj) t._set_conj(true);
  if (neg) t._set_neg(true);
  return t;
}

int64_t TensorDesc::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

void describeTensorInto(const at::Tensor& tensor, TensorDesc& desc) {
  TORCH_INTERNAL_ASSERT(tensor.defined());
  desc.data = tensor.data_ptr();
  desc.dtype = tensor.scalar_type();
  desc.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  desc.strides.assign(tensor.strides().begin(), tensor.strides().end());
  desc.conj = tensor.is_conj();
  desc.neg = tensor.is_neg();
}

TensorDesc describeTensor(const at::Tensor& tensor) {
  TensorDesc desc;
  describeTensorInto(tensor, desc);
  return desc;
}

const char* dtypeSuffix(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float:
      return "f32";
    case c10::ScalarType::Double:
      return "f64";
    case c10::ScalarType::Half:
      return "f16";
    case c10::ScalarType::BFloat16:
      return "bf16";
    case c10::ScalarType::Long:
      return "i64";
    case c10::ScalarType::Int:
      return "i32";
    case c10::ScalarType::Short:
      return "i16";
    case c10::ScalarType::Char:
      return "i8";
    case c10::ScalarType::Byte:
      return "u8";
    case c10::ScalarType::UInt16:
      return "u16";
    case c10::ScalarType::UInt32:
      return "u32";
    case c10::ScalarType::UInt64:
      return "u64";
    case c10::ScalarType::Bool:
      return "b8";
    case c10::ScalarType::ComplexFloat:
      return "c64";
    case c10::ScalarType::ComplexDouble:
      return "c128";
    case c10::ScalarType::ComplexHalf:
      return "c32";
    case c10::ScalarType::Float8_e4m3fn:
      return "f8e4m3";
    case c10::ScalarType::Float8_e5m2:
      return "f8e5m2";
    case c10::ScalarType::QUInt8:
      return "qu8";
    case c10::ScalarType::QInt8:
      return "qi8";
    case c10::ScalarType::QInt32:
      return "qi32";
    default:
      return "any";
  }
}

std::string kernelName(std::string_view base, c10::ScalarType dtype) {
  std::string name(base);
  name += '_';
  name += dtypeSuffix(dtype);
  return name;
}

namespace {
uint32_t clampDim(int64_t value) {
  if (value < 1) return 1;
  if (value > INT32_MAX) return INT32_MAX;
  return static_cast<uint32_t>(value);
}
}  // namespace

LaunchShape elementwiseShape(int64_t numel) {
  LaunchShape shape;
  shape.block = {256, 1, 1};
  shape.grid = {clampDim((numel + 255) / 256), 1, 1};
  return shape;
}

LaunchShape rowwiseShape(int64_t rows, int64_t rowLength) {
  LaunchShape shape;
  const int64_t threads = std::min<int64_t>(1024, std::max<int64_t>(32, (rowLength + 31) / 32 * 32));
  shape.block = {clampDim(threads), 1, 1};
  shape.grid = {clampDim(rows), 1, 1};
  shape.sharedMemBytes = static_cast<uint32_t>(threads / 32 * sizeof(float) * 2);
  return shape;
}

LaunchShape reductionShape(int64_t outputs, int64_t inputsPerOutput) {
  LaunchShape shape;
  const int64_t threads = std::min<int64_t>(512, std::max<int64_t>(32, (inputsPerOutput + 31) / 32 * 32));
  shape.block = {clampDim(threads), 1, 1};
  shape.grid = {clampDim(outputs), 1, 1};
  shape.sharedMemBytes = static_cast<uint32_t>(threads / 32 * sizeof(double));
  return shape;
}

bool kernelWorkWanted() {
  int active = 0;
  return orActivityIsActive(OR_ACTIVITY_KIND_KERNEL_METRICS, &active) == orSuccess && active != 0;
}

uint64_t distinctBytes(const at::Tensor& tensor) {
  uint64_t elements = 1;
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    if (tensor.size(d) == 0) return 0;
    if (tensor.stride(d) != 0) elements *= static_cast<uint64_t>(tensor.size(d));
  }
  return elements * tensor.itemsize();
}

LaunchShape gemmShape(int64_t m, int64_t n, int64_t batch) {
  // 64x64 output tiles, 16x16 threads computing 4x4 each.
  LaunchShape shape;
  shape.block = {16, 16, 1};
  shape.grid = {clampDim((n + 63) / 64), clampDim((m + 63) / 64), clampDim(batch)};
  shape.sharedMemBytes = 2 * 64 * 16 * 4;
  return shape;
}

namespace detail {

namespace {
void copyMessage(const char* text, char* message, size_t capacity) {
  std::strncpy(message, text, capacity - 1);
  message[capacity - 1] = '\0';
}
}  // namespace

namespace {

// The threads one ATen kernel body may use: OPENREG_KERNEL_THREADS, else 1;
// 0 where the variable is not a positive integer.
int kernelThreads() {
  static const int kThreads = [] {
    const int setting = threadCountSetting("OPENREG_KERNEL_THREADS");
    return setting == 0 ? 1 : setting < 0 ? 0 : setting;
  }();
  return kThreads;
}

// libtorch_cpu's handle, for the OpenMP runtime and MKL it uses (a second
// OpenMP runtime must not be loaded); null if it cannot be found.
void* torchCpuHandle() {
  static void* const kHandle = []() -> void* {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&at::init_num_threads), &info) == 0 || info.dli_fname == nullptr) return nullptr;
    return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  }();
  return kHandle;
}

// A function libtorch_cpu reaches; null where torch was built without it.
template <class Fn>
Fn* torchRuntimeFunction(const char* name) {
  void* handle = torchCpuHandle();
  return handle != nullptr ? reinterpret_cast<Fn*>(dlsym(handle, name)) : nullptr;
}

// ATen's CPU kernels start an OpenMP team (and MKL its threads) on the
// calling thread. On an executor thread that team competes with the host
// thread and the other device queues for the same cores, and its spinning
// workers slow them all: a kernel body is one queue's work and runs on its
// own thread, as compiled kernels do. Once per executor thread.
void limitIntraOpThreads() {
  thread_local bool limited = false;
  if (limited) return;
  TORCH_CHECK(kernelThreads() > 0, "OPENREG_KERNEL_THREADS must be a whole number from 1 to 1024, got '",
              std::getenv("OPENREG_KERNEL_THREADS"), "'");
  limited = true;
  at::get_num_threads();  // ATen's own per-thread setup first, or it would undo this later
  static auto* const kSetOmpThreads = torchRuntimeFunction<void(int)>("omp_set_num_threads");
  static auto* const kSetMklThreads = torchRuntimeFunction<int(int)>("MKL_Set_Num_Threads_Local");  // the C entry point
  if (kSetOmpThreads != nullptr) kSetOmpThreads(kernelThreads());
  if (kSetMklThreads != nullptr) kSetMklThreads(kernelThreads());
}

}  // namespace

int runKernelBody(void (*run)(void*), void* body, char* message, size_t capacity) noexcept {
  try {
    limitIntraOpThreads();
    at::DisableRecordFunctionGuard noRecordFunction;
    at::AutoDispatchBelowADInplaceOrView belowAutograd;
    c10::AutoGradMode noGrad(false);
    run(body);
    return 0;
  } catch (const c10::Error& e) {
    copyMessage(e.what_without_backtrace(), message, capacity);
  } catch (const std::exception& e) {
    copyMessage(e.what(), message, capacity);
  } catch (...) {
    copyMessage("unknown C++ exception", message, capacity);
  }
  return 1;
}

void launchOwnedBody(orStream_t stream, const char* name, const LaunchShape& shape, orKernelFunc invoke, void* body,
                     void (*destroy)(void*)) {
  orLaunchConfig config{};
  config.structSize = sizeof(config);
  config.name = name;
  config.func = invoke;
  config.userData = body;
  config.userDataDestroy = destroy;
  config.grid = shape.grid;
  config.block = shape.block;
  config.sharedMemBytes = shape.sharedMemBytes;
  config.workKnown = shape.workKnown;
  config.flops = shape.flops;
  config.bytesRead = shape.bytesRead;
  config.bytesWritten = shape.bytesWritten;
  const orError_t err = orLaunchKernelEx(&config, stream);
  if (C10_UNLIKELY(err != orSuccess)) {
    // The runtime took no ownership. Destroyed while the exception unwinds:
    // the error's message must be read first, right after the call.
    std::unique_ptr<void, void (*)(void*)> owned(body, destroy);
    throwRuntimeError(err, "orLaunchKernelEx", __FILE__, __LINE__);
  }
}

}  // namespace detail

orStream_t streamFor(const at::Tensor& tensor) { return currentNativeStream(tensor.device().index()); }

}  // namespace openreg::backend
