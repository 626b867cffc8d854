#include "backend/CompiledKernel.h"

#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <ATen/record_function.h>

#include "backend/Check.h"
#include "backend/Device.h"
#include "backend/Launch.h"
#include "backend/Stream.h"

namespace openreg::backend {

namespace {

// What the runtime owns while the kernel is queued: the entry and the
// arguments by value, nothing that refers back to Python or to tensors.
struct QueuedLaunch {
  CompiledEntry entry;
  c10::SmallVector<CompiledArg, 12> slots;
  c10::SmallVector<CompiledLaunchArgs::CpuScalar, 2> cpuScalars;

  // Points the slots of captured CPU scalars at this object's own copies;
  // called once the object sits where it stays (on the heap).
  void pointSlotsAtScalars() {
    for (CompiledLaunchArgs::CpuScalar& scalar : cpuScalars) slots[scalar.slot].pointer = scalar.bytes;
  }
};

int runQueuedLaunch(void* userData, char* message, size_t capacity) {
  auto* launch = static_cast<QueuedLaunch*>(userData);
  // The entry catches what the kernel throws; this guards a bad entry only.
  try {
    return launch->entry(launch->slots.data(), message, capacity);
  } catch (...) {
    std::strncpy(message, "the compiled kernel's entry point threw", capacity - 1);
    message[capacity - 1] = '\0';
    return 1;
  }
}

void destroyQueuedLaunch(void* userData) { delete static_cast<QueuedLaunch*>(userData); }

// The args Inductor's Triton launcher gives the host op around a CUDA launch,
// with "cpp" as the backend, as profilers and the execution trace read them.
std::unordered_map<std::string, c10::IValue> launchOpArgs(const std::string& name, const std::string& file,
                                                          const std::string& hash, orStream_t stream) {
  uint64_t streamId = 0;
  if (orStreamGetId(stream, &streamId) != orSuccess) streamId = 0;
  return {{"kernel_backend", c10::IValue(std::string("cpp"))},
          {"kernel_file", c10::IValue(file)},
          {"kernel_hash", c10::IValue(hash)},
          {"kernel_name", c10::IValue(name)},
          {"stream", c10::IValue(static_cast<int64_t>(streamId))}};
}

}  // namespace

CompiledKernel::CompiledKernel(std::string name, uintptr_t entry, std::vector<CompiledArgKind> kinds,
                               std::string annotation, std::string file, std::string hash)
    : name_(std::move(name)),
      entry_(reinterpret_cast<CompiledEntry>(entry)),
      kinds_(std::move(kinds)),
      annotation_(std::move(annotation)),
      file_(std::move(file)),
      hash_(std::move(hash)) {
  TORCH_CHECK(entry_ != nullptr, "openreg: compiled kernel '", name_, "' has no entry point");
  TORCH_CHECK(!name_.empty(), "openreg: a compiled kernel needs a name");
}

bool CompiledKernel::mayBeRecorded() { return at::hasCallbacks(); }

void CompiledKernel::captureCpuScalar(const at::Tensor& tensor, size_t slot, CompiledLaunchArgs& args) {
  TORCH_CHECK(tensor.dim() == 0, "openreg: a compiled kernel got a CPU tensor of shape ", tensor.sizes(),
              " for argument ", slot, "; only 0-dim CPU tensors (scalars) may be passed to a device kernel");
  TORCH_CHECK(tensor.element_size() <= sizeof(CompiledLaunchArgs::CpuScalar::bytes),
              "openreg: a compiled kernel got a CPU scalar of ", tensor.element_size(), "-byte elements");
  CompiledLaunchArgs::CpuScalar& scalar = args.cpuScalars.emplace_back();
  scalar.slot = slot;
  std::memcpy(scalar.bytes, tensor.const_data_ptr(), tensor.element_size());
}

void CompiledKernel::launch(c10::DeviceIndex device, CompiledLaunchArgs&& args) const {
  TORCH_CHECK(args.slots.size() == kinds_.size(), "openreg: compiled kernel '", name_, "' takes ", kinds_.size(),
              " arguments, got ", args.slots.size());
  checkDeviceIndex(device);
  if (C10_LIKELY(!at::hasCallbacks())) {
    queue(device, std::move(args));
    return;
  }
  // As Triton's launcher on CUDA: a host op named as the kernel around its
  // launch, so the kernel's device event links to an op of its own name.
  at::RecordFunction op(at::RecordScope::FUNCTION);
  if (op.isActive()) {
    if (op.needsInputs()) {
      const auto kwargs = launchOpArgs(name_, file_, hash_, currentNativeStream(device));
      op.before(std::string_view(name_), &args.recordedInputs, &kwargs);
    } else {
      op.before(std::string_view(name_));
    }
  }
  queue(device, std::move(args));
}

void CompiledKernel::queue(c10::DeviceIndex device, CompiledLaunchArgs&& args) const {
  auto launch = std::make_unique<QueuedLaunch>();
  launch->entry = entry_;
  launch->slots = std::move(args.slots);
  launch->cpuScalars = std::move(args.cpuScalars);
  launch->pointSlotsAtScalars();

  orLaunchConfig config{};
  config.structSize = sizeof(config);
  config.name = name_.c_str();
  config.func = &runQueuedLaunch;
  config.userData = launch.get();
  config.userDataDestroy = &destroyQueuedLaunch;
  config.grid = {1, 1, 1};
  config.block = {1, 1, 1};
  config.annotation = annotation_.empty() ? nullptr : annotation_.c_str();
  OPENREG_CHECK(orLaunchKernelEx(&config, currentNativeStream(device)));
  launch.release();  // the runtime owns it now
}

}  // namespace openreg::backend
