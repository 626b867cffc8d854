// The recording side of the activity API, used by the runtime's entry points
// and executors. Records go to per-thread buffers supplied by the client.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "../clock.h"
#include "../thread_context.h"
#include "openreg/activity.h"

namespace openreg::activity {

// Bit k is set while kind k is enabled and the window is open: the single
// load on every hot path.
extern std::atomic<uint32_t> gActiveKinds;

inline bool active(orActivityKind kind) {
  return (gActiveKinds.load(std::memory_order_relaxed) >> kind) & 1u;
}
inline bool anyActive() { return gActiveKinds.load(std::memory_order_relaxed) != 0; }

uint64_t nextCorrelationId(ThreadContext& context);
uint32_t currentThreadId();
uint32_t currentProcessId();

// The external-correlation records of this thread's stacks and, if RUNTIME is
// enabled, the call's RUNTIME record, written together.
void recordApiCall(ThreadContext& context, uint32_t kinds, orActivityApiId api, int device, uint64_t correlationId,
                   uint64_t start, uint64_t end, orError_t status);

// Appends one record (its header filled in) to this thread's buffer. Returns
// false if it was dropped for lack of a buffer; `device` (or -1) is charged.
bool write(const void* record, size_t size, int device);

template <class Record>
bool writeRecord(Record& record, orActivityKind kind, int device) {
  record.header.kind = kind;
  record.header.size = sizeof(Record);
  return write(&record, sizeof(Record), device);
}

// A CLOCK_SYNC record per device (when that kind is enabled).
void writeClockSyncRecords();

// Stable storage for a name, valid until the library is unloaded.
const char* internName(const char* name);

// Called once the runtime exists, and at exit to stop delivery.
void shutdownDelivery();

// A host API call being traced: stamps its start and owns its correlation id.
class TracedCall {
 public:
  explicit TracedCall(bool needsCorrelation) {
    // The kinds are read once: a window that closes during the call must not
    // leave its device record (decided at enqueue) without this RUNTIME record.
    kinds_ = gActiveKinds.load(std::memory_order_relaxed);
    if (kinds_ != 0) {
      context_ = &threadContext();
      start_ = hostRecordFastNs(context_->clock);
      if (needsCorrelation || ((kinds_ >> OR_ACTIVITY_KIND_RUNTIME) & 1u)) correlationId_ = nextCorrelationId(*context_);
    }
  }
  bool traced() const { return context_ != nullptr; }
  uint64_t correlationId() const { return correlationId_; }
  uint64_t start() const { return start_; }
  // Writes the RUNTIME (and external correlation) records.
  void finish(orActivityApiId api, int device, orError_t status) const {
    if (correlationId_ != 0) {
      recordApiCall(*context_, kinds_, api, device, correlationId_, start_, hostRecordFastNs(context_->clock), status);
    }
  }

 private:
  ThreadContext* context_ = nullptr;
  uint32_t kinds_ = 0;
  uint64_t start_ = 0;
  uint64_t correlationId_ = 0;
};

}  // namespace openreg::activity
