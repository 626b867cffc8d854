// Kernels that torch.compile generates for openreg (torch_openreg/_inductor).
//
// Inductor writes each kernel as C++ and compiles it into its own library,
// which exports one entry point with the uniform signature CompiledEntry.
// A CompiledKernel launches that entry on the calling thread's current stream
// of its device, with every argument captured by value, and returns before
// the kernel runs, as a CUDA launch does. Device memory is passed as raw
// pointers: the buffers' frees are stream-ordered by the caching allocator,
// so the wrapper may drop a buffer right after its last launch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

namespace openreg::backend {

// One argument of a compiled kernel, as its entry point receives it.
union CompiledArg {
  void* pointer;    // tensors: the first element
  int64_t integer;  // sizes and other index values
  double real;      // floating-point scalars (the entry narrows them)
};

// The entry point every generated kernel library exports. Runs on an
// executor thread; returns 0, or non-zero with a reason in `message`.
using CompiledEntry = int (*)(const CompiledArg* args, char* message, size_t capacity);

// What the wrapper passes for one argument slot, in the entry's order.
enum class CompiledArgKind : uint8_t { Pointer, Integer, Real };

// The arguments of one launch, converted by the caller (the Python bindings).
struct CompiledLaunchArgs {
  c10::SmallVector<CompiledArg, 12> slots;
  // 0-dim CPU tensors passed by pointer: their value, copied at launch (the
  // tensor may change or die before the kernel runs). Slots point here once
  // the launch owns these bytes.
  struct CpuScalar {
    size_t slot;
    alignas(16) unsigned char bytes[16];
  };
  c10::SmallVector<CpuScalar, 2> cpuScalars;
  // Only when a profiler records the launch's inputs (record_shapes).
  std::vector<c10::IValue> recordedInputs;
};

class CompiledKernel {
 public:
  // `entry` is the address of the library's entry point; the library stays
  // loaded for the life of the process (Inductor never unloads it).
  // `annotation` (may be empty): JSON object members for the kernel's trace
  // event; `file` and `hash` identify the generated source, as the args of
  // the host op that profilers show around each launch.
  CompiledKernel(std::string name, uintptr_t entry, std::vector<CompiledArgKind> kinds, std::string annotation,
                 std::string file, std::string hash);

  const std::string& name() const { return name_; }
  const std::vector<CompiledArgKind>& kinds() const { return kinds_; }

  // Queues the kernel on the current stream of `device` and returns. Throws
  // (c10::Error) for a wrong argument count, a device the runtime does not
  // have, or a launch the runtime refuses; a failure inside the kernel is
  // reported, naming it, at the stream's next synchronization.
  void launch(c10::DeviceIndex device, CompiledLaunchArgs&& args) const;

  // Copies a 0-dim CPU tensor's value into `args` for slot `slot` (throws for
  // any other CPU tensor: the kernel runs later, on the device).
  static void captureCpuScalar(const at::Tensor& tensor, size_t slot, CompiledLaunchArgs& args);

  // False when no RecordFunction callback (no profiler) is registered: the
  // caller then skips building CompiledLaunchArgs::recordedInputs.
  static bool mayBeRecorded();

 private:
  void queue(c10::DeviceIndex device, CompiledLaunchArgs&& args) const;

  std::string name_;
  CompiledEntry entry_;
  std::vector<CompiledArgKind> kinds_;
  std::string annotation_;
  std::string file_;
  std::string hash_;
};

}  // namespace openreg::backend
