#include "device_records.h"

#include "../event.h"
#include "../stream.h"
#include "../task.h"
#include "recorder.h"

namespace openreg::activity {

void recordKernel(const Task& task, const Stream& stream, uint64_t start, uint64_t end, orError_t status) {
  orActivityKernel record{};
  record.device = stream.device();
  record.status = status;
  record.streamId = stream.id();
  record.correlationId = task.correlationId;
  record.start = start;
  record.end = end;
  record.name = task.kernel.name;
  record.grid = task.kernel.grid;
  record.block = task.kernel.block;
  record.sharedMemBytes = task.kernel.sharedMemBytes;
  record.annotation = task.kernel.annotation;
  record.streamPriority = stream.priority();
  writeRecord(record, OR_ACTIVITY_KIND_KERNEL, stream.device());
}

void recordKernelMetrics(const Task& task, const Stream& stream, uint64_t busyNs) {
  orActivityKernelMetrics record{};
  record.device = stream.device();
  record.known = task.workload.known;
  record.streamId = stream.id();
  record.correlationId = task.correlationId;
  if (task.workload.known & OR_KERNEL_WORK_FLOPS) record.flops = task.workload.flops;
  if (task.workload.known & OR_KERNEL_WORK_BYTES) {
    record.bytesRead = task.workload.bytesRead;
    record.bytesWritten = task.workload.bytesWritten;
  }
  record.busyNs = busyNs;
  writeRecord(record, OR_ACTIVITY_KIND_KERNEL_METRICS, stream.device());
}

void recordMemcpy(const Task& task, const Stream& stream, uint64_t start, uint64_t end) {
  orActivityMemcpy record{};
  record.copyKind = task.copy.copyKind;
  record.srcKind = task.copy.srcKind;
  record.dstKind = task.copy.dstKind;
  record.isAsync = task.isAsync ? 1 : 0;
  record.device = stream.device();
  record.srcDevice = task.copy.srcDevice;
  record.dstDevice = task.copy.dstDevice;
  record.streamId = stream.id();
  record.correlationId = task.correlationId;
  record.bytes = task.copy.bytes;
  record.start = start;
  record.end = end;
  writeRecord(record, OR_ACTIVITY_KIND_MEMCPY, stream.device());
}

void recordMemset(const Task& task, const Stream& stream, uint64_t start, uint64_t end) {
  orActivityMemset record{};
  record.device = stream.device();
  record.value = task.memset.pattern;
  record.streamId = stream.id();
  record.correlationId = task.correlationId;
  record.bytes = task.memset.bytes;
  record.start = start;
  record.end = end;
  record.elementSize = task.memset.elementSize;
  record.isAsync = task.isAsync ? 1 : 0;
  writeRecord(record, OR_ACTIVITY_KIND_MEMSET, stream.device());
}

void recordStreamWait(const Task& task, const Stream& stream, uint64_t end) {
  orActivitySynchronization record{};
  record.syncType = OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT;
  record.clockDomain = OR_ACTIVITY_CLOCK_DEVICE;
  record.device = stream.device();
  record.streamId = stream.id();
  record.eventId = task.event->id();
  record.correlationId = task.correlationId;
  record.recordCorrelationId = task.wait.origin.correlationId;
  record.recordStreamId = task.wait.origin.streamId;
  record.start = task.wait.waitStartDevice;
  record.end = end;
  writeRecord(record, OR_ACTIVITY_KIND_SYNCHRONIZATION, stream.device());
}

}  // namespace openreg::activity
