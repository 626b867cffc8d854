// Plugin-side copies of activity records.
//
// Buffers go back to the runtime as soon as they are parsed, so everything a
// trace needs is copied out here. These types know nothing of Kineto or torch,
// which keeps the conversion logic testable on its own.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace openreg::profiler {

enum class DeviceOpKind : uint8_t { Kernel, Memcpy, Memset, StreamWait };

// Work that ran on a device stream. start/end are in the device's clock.
struct DeviceOp {
  DeviceOpKind kind = DeviceOpKind::Kernel;
  int32_t device = 0;
  uint64_t stream = 0;
  uint64_t correlationId = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  const char* name = nullptr;  // kernels; owned by the runtime
  int32_t status = 0;
  // Kernels.
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t sharedMemBytes = 0;
  int32_t streamPriority = 0;
  // Copies and memsets.
  uint64_t bytes = 0;
  uint8_t copyKind = 0;
  uint8_t srcKind = 0;
  uint8_t dstKind = 0;
  int32_t srcDevice = -1;
  int32_t dstDevice = -1;
  uint32_t memsetValue = 0;
  uint32_t memsetElementSize = 0;
  bool isAsync = false;
  // Stream waits.
  uint64_t eventId = 0;
};

// A runtime API call on a host thread, in host epoch ns.
struct RuntimeCall {
  uint32_t apiId = 0;
  uint32_t processId = 0;
  uint32_t threadId = 0;
  int32_t device = -1;
  uint64_t correlationId = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  const char* name = nullptr;
  int32_t status = 0;
};

// A host-side synchronisation (host clock), merged into its runtime row.
struct HostSync {
  uint32_t syncType = 0;
  int32_t device = -1;
  uint64_t stream = 0;
  uint64_t eventId = 0;
  uint64_t correlationId = 0;
};

struct ClockPoint {
  uint64_t host = 0;
  uint64_t device = 0;
  uint64_t uncertainty = 0;
};

// External ids (framework op, user range) attached to one correlation id.
struct ExternalIds {
  uint64_t op = 0;
  uint64_t user = 0;
};

// Everything one tracing session received, plus what went wrong on the way.
struct RecordSet {
  std::vector<DeviceOp> deviceOps;
  std::vector<RuntimeCall> runtimeCalls;
  std::vector<HostSync> hostSyncs;
  std::unordered_map<uint64_t, ExternalIds> external;  // by correlation id
  std::unordered_map<int32_t, std::vector<ClockPoint>> clock;  // by device
  uint64_t recordsParsed = 0;
  uint64_t unknownKinds = 0;      // skipped by size, as the header allows
  uint64_t truncatedRecords = 0;  // shorter than the version-1 layout
  uint64_t malformedBuffers = 0;  // iteration stopped early
  uint64_t overheadNs = 0;        // time the tracing machinery cost threads
  uint64_t memoryRecords = 0;
  uint64_t markerRecords = 0;

  void append(RecordSet&& other);
};

} // namespace openreg::profiler
