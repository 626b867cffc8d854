// Client-owned buffers: one per recording thread, a queue of completed
// buffers, and their delivery through the client's completed callback.
#pragma once

#include <cstddef>
#include <cstdint>

#include "openreg/activity.h"

namespace openreg::activity {

// Registers (or, with two NULLs, unregisters after handing everything back).
orError_t registerClient(orActivityBufferRequestedFn requested, orActivityBufferCompletedFn completed,
                         void* userData);
bool clientRegistered();

// Appends `size` bytes to the calling thread's buffer under its lock.
// Several records can be appended under one lock with a BufferWriter.
class BufferWriter {
 public:
  BufferWriter();
  ~BufferWriter();
  BufferWriter(const BufferWriter&) = delete;
  BufferWriter& operator=(const BufferWriter&) = delete;
  // False if dropped (no buffer available); `device` is charged the drop.
  bool append(const void* record, size_t size, int device);

 private:
  struct ThreadBuffer* buffer_;
};

// Hands back every partially filled buffer of every thread (when forced) and
// delivers the queue on the calling thread.
void collectThreadBuffers();
void deliverQueued();

// True on a thread currently inside a client callback.
bool insideClientCallback();

// Drop accounting: index kMaxDevices is for host-only records.
void countDrop(int device);
uint64_t droppedRecords(int device);  // -1: all

void fillStats(orActivityStats* stats, size_t bytes);
void addFlushTime(uint64_t ns);

// Wakes the delivery thread (it also writes periodic clock samples).
void notifyTracingChanged();
void stopDeliveryThread();

}  // namespace openreg::activity
