// Collectives queued with orLaunchCollective: the task's state and how an
// executor runs it.
#pragma once

#include <cstdint>

#include "clock.h"
#include "openreg/activity.h"
#include "openreg/runtime.h"

namespace openreg {

class Stream;
struct Task;

// Owned by the task (through its kernel.userData); freed after it ran.
struct CollectiveCall {
  const char* name;  // interned, as every string here
  const char* collective;
  const char* dataType;
  const char* groupName;
  uint64_t count;
  uint64_t bytes;
  uint64_t sequence;
  uint32_t groupSize;
  int32_t rank;
  int32_t peer;
  orKernelFunc func;
  void* userData;
  void (*userDataDestroy)(void*);
  bool recordCopies;  // queued inside the window with MEMCPY activity enabled
  // The launching thread's external ids by kind (0: none), for the copies'
  // EXTERNAL_CORRELATION records: the copies run on an executor thread.
  uint64_t externalIds[OR_EXTERNAL_CORRELATION_KIND_COUNT];
};

// The collective an executor thread is running, for orCollectiveCopy; set in
// the thread's context while its func runs.
struct RunningCollective {
  const Stream* stream;
  int device;
  const CollectiveCall* call;  // recordCopies and externalIds
  const DeviceClockModel* clock;
};

// Runs the transfer on the calling executor thread, records a failure on the
// stream, and writes the COMMUNICATION record when the task asked for one.
void runCollective(Stream& stream, Task& task, int device, const DeviceClockModel& clock);
// Frees a collective that will not run (work discarded at exit).
void dropCollective(Task& task);

}  // namespace openreg
