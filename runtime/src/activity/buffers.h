// Client-owned buffers: one per recording thread, a queue of completed
// buffers, and their delivery through the client's completed callback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>

#include "../spin_lock.h"
#include "../thread_context.h"
#include "openreg/activity.h"

namespace openreg::activity {

// The buffer a thread is filling. Its owner appends under `mutex`; a forced
// flush takes it from any thread under the same mutex.
struct ThreadBuffer {
  SpinLock mutex;
  uint8_t* data = nullptr;
  size_t capacity = 0;
  size_t used = 0;
  uint32_t threadId = 0;
  uint64_t recordsWritten = 0;  // under mutex; a shared counter would bounce between cores
};

// Registers (or, with two NULLs, unregisters after handing everything back).
orError_t registerClient(orActivityBufferRequestedFn requested, orActivityBufferCompletedFn completed, void* userData);
bool clientRegistered();

// Writes records into the calling thread's buffer, holding its lock for the
// writer's lifetime so related records (external correlation + RUNTIME) are
// written together.
class BufferWriter {
 public:
  explicit BufferWriter(ThreadContext& context);
  ~BufferWriter() { buffer_->mutex.unlock(); }
  BufferWriter(const BufferWriter&) = delete;
  BufferWriter& operator=(const BufferWriter&) = delete;

  // A zeroed record with its header set, written in place; nullptr if it was
  // dropped for lack of a buffer (then `device` is charged the drop).
  template <class Record>
  Record* emplace(orActivityKind kind, int device) {
    void* at = reserve(sizeof(Record), kind, device);
    if (at == nullptr) return nullptr;
    auto* record = new (at) Record{};
    record->header.kind = kind;
    record->header.size = sizeof(Record);
    return record;
  }

  bool append(const void* record, size_t size, int device);

  // Raw space for a record of `kind` the caller fills completely (every byte,
  // padding included); nullptr if dropped.
  void* reserveRecord(size_t size, orActivityKind kind, int device) { return reserve(size, kind, device); }

 private:
  void* reserve(size_t size, orActivityKind kind, int device) {
    ThreadBuffer& b = *buffer_;
    if (b.data != nullptr && b.used + size <= b.capacity) {
      void* at = b.data + b.used;
      b.used += size;
      ++b.recordsWritten;
      return at;
    }
    return reserveSlow(size, kind, device);
  }
  void* reserveSlow(size_t size, orActivityKind kind, int device);

  ThreadContext& context_;
  ThreadBuffer* buffer_;
};

// Hands back every partially filled buffer of every thread (when forced) and
// delivers the queue on the calling thread.
void collectThreadBuffers();
void deliverQueued();

// True on a thread currently inside a client callback.
inline bool insideClientCallback() { return threadContext().insideCallback; }

// Drop accounting: index kMaxDevices is for host-only records; by kind, as
// orActivityStats.recordsDroppedByKind.
constexpr size_t kStatsKinds = OR_ACTIVITY_STATS_KINDS;
void countDrop(orActivityKind kind, int device);
uint64_t droppedRecords(int device);  // -1: all

void fillStats(orActivityStats* stats, size_t bytes);
void addFlushTime(uint64_t ns);

// Wakes the delivery thread (it also writes periodic clock samples).
void notifyTracingChanged();
void stopDeliveryThread();

}  // namespace openreg::activity
