// Plugin-side copies of activity records.
//
// Buffers go back to the runtime as soon as they are parsed, so everything a
// trace needs is copied out here. These types know nothing of Kineto or torch,
// which keeps the conversion logic testable on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <string>
#include <unordered_map>
#include <vector>

namespace openreg::profiler {

// A growing list that never moves what it holds: fixed-size chunks instead
// of one array. Records are appended on the runtime's delivery thread while
// the device runs; a vector's occasional grow-and-copy of hundreds of MB
// there made the drain at stop wait behind it. Elements keep their address.
template <typename T, size_t kChunk = 4096>
class ChunkedVector {
 public:
  template <bool kConst>
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = std::conditional_t<kConst, const T*, T*>;
    using reference = std::conditional_t<kConst, const T&, T&>;
    using Owner = std::conditional_t<kConst, const ChunkedVector*, ChunkedVector*>;

    Iterator(Owner owner, size_t index) : owner_(owner), index_(index) {}
    reference operator*() const { return (*owner_)[index_]; }
    pointer operator->() const { return &(*owner_)[index_]; }
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    bool operator==(const Iterator& other) const { return index_ == other.index_; }
    bool operator!=(const Iterator& other) const { return index_ != other.index_; }

   private:
    Owner owner_;
    size_t index_;
  };

  void push_back(const T& value) {
    if (chunks_.empty() || chunks_.back().size() == kChunk) {
      chunks_.emplace_back();
      chunks_.back().reserve(kChunk);
    }
    chunks_.back().push_back(value);
    ++size_;
  }
  void append(const ChunkedVector& other) {
    for (const T& value : other) push_back(value);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Empties the list and gives its memory back.
  void clear() {
    chunks_ = {};
    size_ = 0;
  }
  T& operator[](size_t i) { return chunks_[i / kChunk][i % kChunk]; }
  const T& operator[](size_t i) const { return chunks_[i / kChunk][i % kChunk]; }
  T& back() { return chunks_.back().back(); }
  const T& back() const { return chunks_.back().back(); }

  Iterator<false> begin() { return {this, 0}; }
  Iterator<false> end() { return {this, size_}; }
  Iterator<true> begin() const { return {this, 0}; }
  Iterator<true> end() const { return {this, size_}; }

 private:
  std::vector<std::vector<T>> chunks_;  // each holds kChunk, the last up to kChunk
  size_t size_ = 0;
};

enum class DeviceOpKind : uint8_t { Kernel, Memcpy, Memset, StreamWait, Communication };

// How a kernel was launched. A trace repeats a few of these for millions of
// kernels, so the RecordSet keeps each once (launchShapes) and a kernel's
// DeviceOp holds its index.
struct LaunchShape {
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t sharedMemBytes = 0;
  int32_t streamPriority = 0;
  // Where the kernel came from (JSON object members, owned by the runtime),
  // or nullptr. Kept here, not per kernel: a kernel's code launches with the
  // same one every time.
  const char* annotation = nullptr;

  bool operator==(const LaunchShape&) const = default;
};

// Work that ran on a device stream. start/end are in the device's clock.
// A trace holds one per kernel, so what only some kinds have shares storage:
// read a kind's fields only for that kind. 72 bytes.
struct DeviceOp {
  DeviceOp() : bytes(0), eventId(0) {}

  DeviceOpKind kind = DeviceOpKind::Kernel;
  // Copies.
  uint8_t copyKind = 0;
  uint8_t srcKind = 0;
  uint8_t dstKind = 0;
  int32_t device = 0;
  int32_t status = 0;
  bool isAsync = false;  // copies and memsets
  uint64_t stream = 0;
  uint64_t correlationId = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  const char* name = nullptr;  // kernels and communications; owned by the runtime
  union {
    uint32_t launchShape;  // kernels: 1 + index in RecordSet::launchShapes, 0 if none
    uint64_t bytes;        // copies, memsets, communications
  };
  union {
    struct {  // copies
      int32_t srcDevice;
      int32_t dstDevice;
    };
    struct {  // memsets
      uint32_t memsetValue;
      uint32_t memsetElementSize;
    };
    uint64_t eventId;  // stream waits: index in RecordSet::eventWaits; communications: in ::communications
  };
};
static_assert(sizeof(DeviceOp) == 72, "one per kernel: keep it small");

// What a COMMUNICATION record adds to its DeviceOp (name, bytes, times).
struct CommunicationInfo {
  const char* collective = nullptr;  // owned by the runtime, as names are
  const char* dataType = nullptr;
  const char* groupName = nullptr;
  uint64_t count = 0;
  uint64_t sequence = 0;
  uint32_t groupSize = 0;
  int32_t rank = -1;
  int32_t peer = -1;
};

// A runtime API call on a host thread, in host epoch ns. 48 bytes (one per
// launch): the record's apiId is not kept, as the name says what was called.
struct RuntimeCall {
  uint32_t processId = 0;
  uint32_t threadId = 0;
  int32_t device = -1;
  int32_t status = 0;
  uint64_t correlationId = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  const char* name = nullptr;
};

// A host-side synchronisation (host clock): its own sync row, and args on
// its runtime row.
struct HostSync {
  uint32_t syncType = 0;
  int32_t device = -1;
  uint32_t threadId = 0;
  uint64_t stream = 0;
  uint64_t eventId = 0;
  uint64_t correlationId = 0;
  uint64_t start = 0;  // host epoch ns: the wait
  uint64_t end = 0;
  uint64_t recordCorrelationId = 0;  // event syncs: the orEventRecord call waited on
  uint64_t recordStreamId = 0;
};

// What a stream waiting on an event waited for (see DeviceOp::eventId).
struct EventWait {
  uint64_t eventId = 0;
  uint64_t recordCorrelationId = 0;  // the orEventRecord call's, 0 if not traced
  uint64_t recordStreamId = 0;
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

// One EXTERNAL_CORRELATION record. Kept in arrival order and joined once at
// processTrace: appending is all the delivery thread does per record.
struct ExternalRecord {
  uint64_t correlationId = 0;
  uint64_t externalId = 0;
  uint32_t kind = 0;  // orActivityExternalCorrelationKind
};

// A KERNEL_METRICS record: what a kernel's launcher defined and the device
// measured, joined to its kernel by correlation id.
struct KernelMetrics {
  int32_t device = 0;
  uint32_t known = 0;  // OR_KERNEL_WORK_* bits
  uint64_t correlationId = 0;
  uint64_t flops = 0;
  uint64_t bytesRead = 0;
  uint64_t bytesWritten = 0;
  uint64_t busyNs = 0;
};

// A COUNTER record: one sample, in host time.
struct CounterSample {
  int32_t device = 0;
  uint32_t counter = 0;  // orActivityCounterKind
  uint64_t stream = 0;   // QUEUED_TASKS only
  uint64_t timestamp = 0;
  uint64_t value = 0;
};

// Everything one tracing session received, plus what went wrong on the way.
struct RecordSet {
  ChunkedVector<DeviceOp> deviceOps;
  ChunkedVector<RuntimeCall> runtimeCalls;
  ChunkedVector<HostSync> hostSyncs;
  ChunkedVector<ExternalRecord> external;           // later records win
  ChunkedVector<CommunicationInfo> communications;  // see DeviceOp::eventId
  ChunkedVector<EventWait> eventWaits;              // see DeviceOp::eventId
  ChunkedVector<LaunchShape> launchShapes;          // see DeviceOp::launchShape
  ChunkedVector<KernelMetrics> kernelMetrics;
  ChunkedVector<CounterSample> counterSamples;
  std::unordered_map<int32_t, std::vector<ClockPoint>> clock;  // by device
  uint64_t recordsParsed = 0;
  uint64_t unknownKinds = 0;      // skipped by size, as the header allows
  uint64_t truncatedRecords = 0;  // shorter than the version-1 layout
  uint64_t malformedBuffers = 0;  // iteration stopped early
  uint64_t overheadNs = 0;        // time the tracing machinery cost threads
  uint64_t memoryRecords = 0;
  uint64_t markerRecords = 0;
  std::vector<uint32_t> launchShapeCache;  // internLaunchShape's, by hash
  uint32_t lastLaunchShape = 0;            // the shape interned last

  void append(RecordSet&& other);
  // Frees the records, keeping the counts.
  void releaseRecords();
  // The shape's index + 1 for DeviceOp::launchShape, kept once (mostly: a
  // direct-mapped cache finds the shapes seen before).
  uint32_t internLaunchShape(const LaunchShape& shape);
  uint32_t findOrAddLaunchShape(const LaunchShape& shape);  // its slow path, by hash
  // A kernel's launch shape; nullptr for other kinds and kernels without one.
  const LaunchShape* launchShapeOf(const DeviceOp& op) const {
    return op.kind == DeviceOpKind::Kernel && op.launchShape >= 1 && op.launchShape <= launchShapes.size()
               ? &launchShapes[op.launchShape - 1]
               : nullptr;
  }
  // What a StreamWait op waited for; nullptr for other kinds.
  const EventWait* eventWaitOf(const DeviceOp& op) const {
    return op.kind == DeviceOpKind::StreamWait && op.eventId < eventWaits.size() ? &eventWaits[op.eventId] : nullptr;
  }
  // The payload of a Communication op; nullptr for other kinds.
  const CommunicationInfo* communicationOf(const DeviceOp& op) const {
    return op.kind == DeviceOpKind::Communication && op.eventId < communications.size() ? &communications[op.eventId]
                                                                                        : nullptr;
  }
};

}  // namespace openreg::profiler
