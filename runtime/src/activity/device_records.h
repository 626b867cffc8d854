// The device records the executors write, one per task kind that has one,
// each in the device's clock. Called only for tasks queued with recordDevice
// set (inside the window, their kind enabled).
#pragma once

#include <cstdint>

#include "openreg/runtime.h"

namespace openreg {
class Stream;
struct Task;
}  // namespace openreg

namespace openreg::activity {

// A KERNEL record; `status` is the kernel's outcome.
void recordKernel(const Task& task, const Stream& stream, uint64_t start, uint64_t end, orError_t status);
// The KERNEL_METRICS record that follows a kernel's KERNEL record.
void recordKernelMetrics(const Task& task, const Stream& stream, uint64_t busyNs);
// A MEMCPY record.
void recordMemcpy(const Task& task, const Stream& stream, uint64_t start, uint64_t end);
// A MEMSET record.
void recordMemset(const Task& task, const Stream& stream, uint64_t start, uint64_t end);
// A device-side SYNCHRONIZATION record of a stream wait, from the moment the
// stream reached the wait (task.wait.waitStartDevice) to `end`.
void recordStreamWait(const Task& task, const Stream& stream, uint64_t end);

}  // namespace openreg::activity
