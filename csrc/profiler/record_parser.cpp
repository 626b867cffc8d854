#include "record_parser.h"

#include <cstddef>
#include <cstring>

namespace openreg::profiler {
namespace {

// Copies the version-1 prefix of a record; false if the record is shorter.
template <typename T>
bool readPrefix(const orActivityRecord& record, T& out) {
  if (record.size < sizeof(T)) {
    return false;
  }
  std::memcpy(&out, &record, sizeof(T));
  return true;
}

// The same for a record whose later fields were appended: at least
// `firstLayout` bytes, fields past the record's size read as zero.
template <typename T>
bool readGrown(const orActivityRecord& record, T& out, size_t firstLayout) {
  if (record.size < firstLayout) return false;
  out = T{};
  std::memcpy(&out, &record, record.size < sizeof(T) ? record.size : sizeof(T));
  return true;
}

void copyDim(const orDim3& dim, uint32_t (&out)[3]) {
  out[0] = dim.x;
  out[1] = dim.y;
  out[2] = dim.z;
}

size_t launchShapeHash(const LaunchShape& s) {
  uint64_t h = 0;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 0x9e3779b97f4a7c15ULL; };
  mix(s.grid[0] + (uint64_t{s.grid[1]} << 32));
  mix(s.grid[2] + (uint64_t{s.block[0]} << 32));
  mix(s.block[1] + (uint64_t{s.block[2]} << 32));
  mix(s.sharedMemBytes + (uint64_t{static_cast<uint32_t>(s.streamPriority)} << 32));
  mix(reinterpret_cast<uintptr_t>(s.annotation));
  return static_cast<size_t>(h ^ (h >> 29));
}

constexpr size_t kLaunchShapeCacheSlots = 1024;

}  // namespace

uint32_t RecordSet::internLaunchShape(const LaunchShape& shape) {
  // Kernels in a row mostly share their shape: try the last one before hashing.
  if (!launchShapes.empty() && lastLaunchShape != 0 && launchShapes[lastLaunchShape - 1] == shape) {
    return lastLaunchShape;
  }
  lastLaunchShape = findOrAddLaunchShape(shape);
  return lastLaunchShape;
}

uint32_t RecordSet::findOrAddLaunchShape(const LaunchShape& shape) {
  if (launchShapeCache.empty()) launchShapeCache.assign(kLaunchShapeCacheSlots, 0);
  uint32_t& slot = launchShapeCache[launchShapeHash(shape) % kLaunchShapeCacheSlots];
  if (slot != 0 && launchShapes[slot - 1] == shape) return slot;
  launchShapes.push_back(shape);
  slot = static_cast<uint32_t>(launchShapes.size());
  return slot;
}

void RecordSet::append(RecordSet&& other) {
  const uint64_t communicationBase = communications.size();
  const uint64_t eventWaitBase = eventWaits.size();
  communications.append(other.communications);
  eventWaits.append(other.eventWaits);
  for (const DeviceOp& op : other.deviceOps) {
    deviceOps.push_back(op);
    DeviceOp& mine = deviceOps.back();
    if (op.kind == DeviceOpKind::Communication) mine.eventId += communicationBase;
    if (op.kind == DeviceOpKind::StreamWait) mine.eventId += eventWaitBase;
    if (const LaunchShape* shape = other.launchShapeOf(op)) mine.launchShape = internLaunchShape(*shape);
  }
  runtimeCalls.append(other.runtimeCalls);
  hostSyncs.append(other.hostSyncs);
  external.append(other.external);
  kernelMetrics.append(other.kernelMetrics);
  counterSamples.append(other.counterSamples);
  for (auto& [device, points] : other.clock) {
    auto& mine = clock[device];
    mine.insert(mine.end(), points.begin(), points.end());
  }
  recordsParsed += other.recordsParsed;
  unknownKinds += other.unknownKinds;
  truncatedRecords += other.truncatedRecords;
  malformedBuffers += other.malformedBuffers;
  overheadNs += other.overheadNs;
  memoryRecords += other.memoryRecords;
  markerRecords += other.markerRecords;
}

void RecordSet::releaseRecords() {
  deviceOps.clear();
  runtimeCalls.clear();
  hostSyncs.clear();
  external.clear();
  communications.clear();  // collective activities keep their own copy
  eventWaits.clear();
  launchShapes.clear();
  kernelMetrics.clear();
  counterSamples.clear();
  launchShapeCache = {};
  lastLaunchShape = 0;
  clock = {};
}

namespace {

// One reader per record kind: each copies the record's version-1 prefix and
// returns false when the record is shorter than that (truncated).

bool readRuntime(const orActivityRecord& record, RecordSet& out) {
  orActivityRuntime r;
  if (!readPrefix(record, r)) return false;
  out.runtimeCalls.push_back({.processId = r.processId,
                              .threadId = r.threadId,
                              .device = r.device,
                              .status = r.status,
                              .correlationId = r.correlationId,
                              .start = r.start,
                              .end = r.end,
                              .name = r.name});
  return true;
}

bool readKernel(const orActivityRecord& record, RecordSet& out) {
  orActivityKernel k;
  if (!readGrown(record, k, offsetof(orActivityKernel, annotation))) return false;
  DeviceOp op;
  op.kind = DeviceOpKind::Kernel;
  op.device = k.device;
  op.stream = k.streamId;
  op.correlationId = k.correlationId;
  op.start = k.start;
  op.end = k.end;
  op.name = k.name;
  op.status = k.status;
  LaunchShape shape;
  copyDim(k.grid, shape.grid);
  copyDim(k.block, shape.block);
  shape.sharedMemBytes = k.sharedMemBytes;
  shape.streamPriority = k.streamPriority;
  shape.annotation = k.annotation;
  op.launchShape = out.internLaunchShape(shape);
  out.deviceOps.push_back(op);
  return true;
}

bool readMemcpy(const orActivityRecord& record, RecordSet& out) {
  orActivityMemcpy m;
  if (!readPrefix(record, m)) return false;
  DeviceOp op;
  op.kind = DeviceOpKind::Memcpy;
  op.device = m.device;
  op.stream = m.streamId;
  op.correlationId = m.correlationId;
  op.start = m.start;
  op.end = m.end;
  op.bytes = m.bytes;
  op.copyKind = m.copyKind;
  op.srcKind = m.srcKind;
  op.dstKind = m.dstKind;
  op.srcDevice = m.srcDevice;
  op.dstDevice = m.dstDevice;
  op.isAsync = m.isAsync != 0;
  out.deviceOps.push_back(op);
  return true;
}

bool readMemset(const orActivityRecord& record, RecordSet& out) {
  orActivityMemset m;
  if (!readPrefix(record, m)) return false;
  DeviceOp op;
  op.kind = DeviceOpKind::Memset;
  op.device = m.device;
  op.stream = m.streamId;
  op.correlationId = m.correlationId;
  op.start = m.start;
  op.end = m.end;
  op.bytes = m.bytes;
  op.memsetValue = m.value;
  op.memsetElementSize = m.elementSize;
  op.isAsync = m.isAsync != 0;
  out.deviceOps.push_back(op);
  return true;
}

// The device op, and the collective's own fields beside it (its eventId).
bool readCommunication(const orActivityRecord& record, RecordSet& out) {
  orActivityCommunication c;
  if (!readPrefix(record, c)) return false;
  DeviceOp op;
  op.kind = DeviceOpKind::Communication;
  op.device = c.device;
  op.stream = c.streamId;
  op.correlationId = c.correlationId;
  op.start = c.start;
  op.end = c.end;
  op.name = c.name;
  op.status = c.status;
  op.bytes = c.bytes;
  op.eventId = out.communications.size();
  out.deviceOps.push_back(op);
  out.communications.push_back({.collective = c.collective,
                                .dataType = c.dataType,
                                .groupName = c.groupName,
                                .count = c.count,
                                .sequence = c.sequence,
                                .groupSize = c.groupSize,
                                .rank = c.rank,
                                .peer = c.peer});
  return true;
}

// A stream waiting on the device is device work (a row event); a host-side
// synchronisation is kept apart.
bool readSynchronization(const orActivityRecord& record, RecordSet& out) {
  orActivitySynchronization s;
  if (!readGrown(record, s, offsetof(orActivitySynchronization, recordCorrelationId))) return false;
  if (s.clockDomain == OR_ACTIVITY_CLOCK_DEVICE) {
    DeviceOp op;
    op.kind = DeviceOpKind::StreamWait;
    op.device = s.device;
    op.stream = s.streamId;
    op.correlationId = s.correlationId;
    op.start = s.start;
    op.end = s.end;
    op.eventId = out.eventWaits.size();
    out.eventWaits.push_back(
        {.eventId = s.eventId, .recordCorrelationId = s.recordCorrelationId, .recordStreamId = s.recordStreamId});
    out.deviceOps.push_back(op);
  } else {
    out.hostSyncs.push_back({.syncType = s.syncType,
                             .device = s.device,
                             .threadId = s.threadId,
                             .stream = s.streamId,
                             .eventId = s.eventId,
                             .correlationId = s.correlationId,
                             .start = s.start,
                             .end = s.end,
                             .recordCorrelationId = s.recordCorrelationId,
                             .recordStreamId = s.recordStreamId});
  }
  return true;
}

bool readExternalCorrelation(const orActivityRecord& record, RecordSet& out) {
  orActivityExternalCorrelation e;
  if (!readPrefix(record, e)) return false;
  out.external.push_back({.correlationId = e.correlationId, .externalId = e.externalId, .kind = e.externalKind});
  return true;
}

bool readClockSync(const orActivityRecord& record, RecordSet& out) {
  orActivityClockSync c;
  if (!readPrefix(record, c)) return false;
  out.clock[c.device].push_back({.host = c.hostTimestamp, .device = c.deviceTimestamp, .uncertainty = c.uncertainty});
  return true;
}

bool readOverhead(const orActivityRecord& record, RecordSet& out) {
  orActivityOverhead o;
  if (!readPrefix(record, o)) return false;
  if (o.end > o.start) out.overheadNs += o.end - o.start;
  return true;
}

bool readKernelMetrics(const orActivityRecord& record, RecordSet& out) {
  orActivityKernelMetrics m;
  if (!readPrefix(record, m)) return false;
  out.kernelMetrics.push_back({.device = m.device,
                               .known = m.known,
                               .correlationId = m.correlationId,
                               .flops = m.flops,
                               .bytesRead = m.bytesRead,
                               .bytesWritten = m.bytesWritten,
                               .busyNs = m.busyNs});
  return true;
}

bool readCounter(const orActivityRecord& record, RecordSet& out) {
  orActivityCounter c;
  if (!readPrefix(record, c)) return false;
  out.counterSamples.push_back(
      {.device = c.device, .counter = c.counter, .stream = c.streamId, .timestamp = c.timestamp, .value = c.value});
  return true;
}

}  // namespace

void parseRecord(const orActivityRecord& record, RecordSet& out) {
  bool complete = true;
  switch (record.kind) {
    case OR_ACTIVITY_KIND_RUNTIME:
      complete = readRuntime(record, out);
      break;
    case OR_ACTIVITY_KIND_KERNEL:
      complete = readKernel(record, out);
      break;
    case OR_ACTIVITY_KIND_MEMCPY:
      complete = readMemcpy(record, out);
      break;
    case OR_ACTIVITY_KIND_MEMSET:
      complete = readMemset(record, out);
      break;
    case OR_ACTIVITY_KIND_COMMUNICATION:
      complete = readCommunication(record, out);
      break;
    case OR_ACTIVITY_KIND_SYNCHRONIZATION:
      complete = readSynchronization(record, out);
      break;
    case OR_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      complete = readExternalCorrelation(record, out);
      break;
    case OR_ACTIVITY_KIND_CLOCK_SYNC:
      complete = readClockSync(record, out);
      break;
    case OR_ACTIVITY_KIND_OVERHEAD:
      complete = readOverhead(record, out);
      break;
    case OR_ACTIVITY_KIND_KERNEL_METRICS:
      complete = readKernelMetrics(record, out);
      break;
    case OR_ACTIVITY_KIND_COUNTER:
      complete = readCounter(record, out);
      break;
    case OR_ACTIVITY_KIND_MEMORY:
      ++out.memoryRecords;
      break;
    case OR_ACTIVITY_KIND_MARKER:
      ++out.markerRecords;
      break;
    default:
      ++out.unknownKinds;
      return;
  }
  if (complete) {
    ++out.recordsParsed;
  } else {
    ++out.truncatedRecords;
  }
}

void parseBuffer(NextRecordFn next, const uint8_t* buffer, size_t validSize, RecordSet& out) {
  if (buffer == nullptr || validSize == 0) {
    return;
  }
  const orActivityRecord* record = nullptr;
  while (true) {
    orError_t status = next(buffer, validSize, &record);
    if (status == orErrorMaxLimitReached) {
      return;
    }
    if (status != orSuccess || record == nullptr) {
      ++out.malformedBuffers;
      return;
    }
    parseRecord(*record, out);
  }
}

}  // namespace openreg::profiler
