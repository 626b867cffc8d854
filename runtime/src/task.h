// One unit of device work, queued on a stream and executed in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "openreg/activity.h"
#include "openreg/runtime.h"

namespace openreg {

class Event;

// Which orEventRecord call made an event capture: its correlation id (0 if
// the call was not traced) and the stream it recorded into.
struct RecordOrigin {
  uint64_t correlationId = 0;
  uint64_t streamId = 0;
};

// Collective: `kernel` holds the transfer, its userData a CollectiveCall
// (collective.h) that owns the caller's userData.
enum class TaskKind : uint8_t { Kernel, Memcpy, Memset, EventRecord, WaitEvent, HostFunc, Collective };

// Kind-specific payloads share storage: a task is moved twice per launch
// (into the queue and out of it), so its size is on the launch path.
struct KernelWork {
  const char* name;  // interned
  orKernelFunc func;
  void* userData;
  void (*userDataDestroy)(void*);
  orDim3 grid;
  orDim3 block;
  uint32_t sharedMemBytes;
  const char* annotation;  // interned, or nullptr
};

// What a kernel's launcher said it does (orLaunchConfig's work fields).
struct KernelWorkload {
  uint32_t known = 0;  // OR_KERNEL_WORK_* bits
  uint64_t flops = 0;
  uint64_t bytesRead = 0;
  uint64_t bytesWritten = 0;
};

struct CopyWork {
  void* dst;
  const void* src;  // ignored when the task holds a staging copy
  size_t bytes;
  int32_t srcDevice;  // -1 for host
  int32_t dstDevice;
  uint8_t copyKind;  // orActivityMemcpyKind
  uint8_t srcKind;   // orActivityMemoryKind
  uint8_t dstKind;
};

struct MemsetWork {
  void* dst;
  size_t bytes;
  uint32_t pattern;
  uint32_t elementSize;  // 1, 2 or 4
};

struct EventWork {
  uint64_t sequence;         // the capture recorded, or waited for
  uint64_t waitStartDevice;  // device time the stream reached the wait
  RecordOrigin origin;       // waits: the orEventRecord call of `sequence`
};

struct HostFuncWork {
  orHostFunc func;
  void* userData;
};

struct Task {
  TaskKind kind = TaskKind::Kernel;
  // Set when the work was queued inside the tracing window with its device
  // record kind enabled: the executor then writes exactly one device record.
  bool recordDevice = false;
  bool isAsync = true;
  // Kernels: also a KERNEL_METRICS record (set only with recordDevice).
  bool recordMetrics = false;
  uint64_t correlationId = 0;
  KernelWorkload workload;             // Kernel, when recordMetrics
  std::shared_ptr<Event> event;        // EventRecord, WaitEvent
  std::unique_ptr<uint8_t[]> staging;  // Memcpy: a pageable source copied at enqueue
  union {
    KernelWork kernel;
    CopyWork copy;
    MemsetWork memset;
    EventWork wait;
    HostFuncWork hostFunc;
  };

  Task() : kernel{} {}
  Task(Task&&) noexcept = default;
  Task& operator=(Task&&) noexcept = default;
};

static_assert(std::is_trivially_copyable_v<KernelWork> && std::is_trivially_copyable_v<CopyWork>,
              "payloads are moved bytewise with the union");

// A FIFO of tasks in one growable ring: no allocation per task once warm
// (a std::deque of ~200-byte tasks would allocate every other push).
class TaskQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  const Task& front() const { return slots_[head_]; }

  void push(Task&& task) {
    if (size_ == slots_.size()) grow();
    slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(task);
    ++size_;
  }

  Task pop() {
    Task task = std::move(slots_[head_]);
    slots_[head_] = Task{};  // drop what the moved-from task may still share
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
    return task;
  }

 private:
  void grow() {
    std::vector<Task> larger(slots_.empty() ? 16 : slots_.size() * 2);
    for (size_t i = 0; i < size_; ++i) larger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    slots_ = std::move(larger);
    head_ = 0;
  }

  std::vector<Task> slots_;  // capacity is a power of two
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace openreg
