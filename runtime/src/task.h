// One unit of device work, queued on a stream and executed in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "openreg/activity.h"
#include "openreg/runtime.h"

namespace openreg {

class Event;

enum class TaskKind : uint8_t { Kernel, Memcpy, Memset, EventRecord, WaitEvent, HostFunc };

struct Task {
  TaskKind kind = TaskKind::Kernel;
  // Set when the work was queued inside the tracing window with its device
  // record kind enabled: the executor then writes exactly one device record.
  bool recordDevice = false;
  uint64_t correlationId = 0;

  // Kernel
  const char* name = nullptr;  // interned
  orKernelFunc func = nullptr;
  void* userData = nullptr;
  void (*userDataDestroy)(void*) = nullptr;
  orDim3 grid{1, 1, 1};
  orDim3 block{1, 1, 1};
  uint32_t sharedMemBytes = 0;

  // Memcpy / memset
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  std::unique_ptr<uint8_t[]> staging;  // a pageable source copied at enqueue
  uint8_t copyKind = 0;                // orActivityMemcpyKind
  uint8_t srcKind = 0;                 // orActivityMemoryKind
  uint8_t dstKind = 0;
  bool isAsync = true;
  int32_t srcDevice = -1;
  int32_t dstDevice = -1;
  uint32_t pattern = 0;
  uint32_t elementSize = 1;

  // Event record / wait
  std::shared_ptr<Event> event;
  uint64_t eventSequence = 0;
  uint64_t waitStartDevice = 0;  // device time the stream reached the wait

  // Host function
  orHostFunc hostFunc = nullptr;
};

}  // namespace openreg
