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

// Whether a traced call takes a correlation id when RUNTIME records are off:
// calls that queue device work or write a host SYNCHRONIZATION record need
// one to tie those records to the call.
enum class Correlation : uint8_t { IfRuntimeTraced, Always };

// A host API call being traced, from its start to its end. Every traced entry
// point follows one order: check its plain arguments (NULL pointers, flags,
// sizes: no record), acquire the runtime, construct its TracedCall, and only
// then resolve handles, pointers and devices and do the work, so every failure
// past that point is in the trace. The destructor writes the RUNTIME (and
// external correlation) records whichever way the call leaves; result() sets
// the outcome. A call left without a result (an exception) is recorded as
// orErrorUnknown, on the device that was current when it started.
class TracedCall {
 public:
  TracedCall(orActivityApiId api, Correlation correlation) : api_(api) {
    // The kinds are read once: a window that closes during the call must not
    // leave its device record (decided at enqueue) without this RUNTIME record.
    kinds_ = gActiveKinds.load(std::memory_order_relaxed);
    if (kinds_ != 0) {
      context_ = &threadContext();
      start_ = hostRecordFastNs(context_->clock);
      device_ = context_->currentDevice;
      if (correlation == Correlation::Always || ((kinds_ >> OR_ACTIVITY_KIND_RUNTIME) & 1u)) {
        correlationId_ = nextCorrelationId(*context_);
      }
    }
  }
  ~TracedCall() {
    if (correlationId_ != 0) {
      recordApiCall(*context_, kinds_, api_, device_, correlationId_, start_, hostRecordFastNs(context_->clock),
                    status_);
    }
  }
  TracedCall(const TracedCall&) = delete;
  TracedCall& operator=(const TracedCall&) = delete;

  bool traced() const { return context_ != nullptr; }
  uint64_t correlationId() const { return correlationId_; }
  uint64_t start() const { return start_; }

  // Sets the outcome the RUNTIME record reports (and the device it is charged
  // to); returns `status`, so an exit reads `return call.result(device, e);`.
  orError_t result(int device, orError_t status) {
    device_ = device;
    status_ = status;
    return status;
  }
  // The same, on the device that was current when the call started.
  orError_t result(orError_t status) {
    status_ = status;
    return status;
  }

 private:
  const orActivityApiId api_;
  ThreadContext* context_ = nullptr;
  uint32_t kinds_ = 0;
  int device_ = -1;
  orError_t status_ = orErrorUnknown;
  uint64_t start_ = 0;
  uint64_t correlationId_ = 0;
};

// The host-side records a traced call writes beside its RUNTIME record, each
// only while its kind is enabled:
// a host SYNCHRONIZATION record from the call's start to now;
void recordHostSync(const TracedCall& call, orActivitySyncType type, int device, uint64_t streamId,
                    uint64_t eventId);
// a MEMORY record stamped now.
void recordMemory(const TracedCall& call, orActivityMemoryOp op, orActivityMemoryKind kind, int device,
                  const void* address, size_t bytes);

}  // namespace openreg::activity
