// The recording side of the activity API, used by the runtime's entry points
// and executors. Records go to per-thread buffers supplied by the client.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "../clock.h"
#include "../task.h"
#include "../thread_context.h"
#include "openreg/activity.h"

namespace openreg::activity {

// Bit k is set while kind k is enabled and the window is open: the single
// load on every hot path.
extern std::atomic<uint32_t> gActiveKinds;

inline bool active(orActivityKind kind) { return (gActiveKinds.load(std::memory_order_relaxed) >> kind) & 1u; }
inline bool anyActive() { return gActiveKinds.load(std::memory_order_relaxed) != 0; }

uint64_t nextCorrelationId(ThreadContext& context);
uint32_t currentThreadId();
uint32_t currentProcessId();

// Appends one record (its header filled in) to this thread's buffer. Returns
// false if it was dropped for lack of a buffer; `device` (or -1) is charged.
bool write(const void* record, size_t size, int device);

template <class Record>
bool writeRecord(Record& record, orActivityKind kind, int device) {
  record.header.kind = kind;
  record.header.size = sizeof(Record);
  return write(&record, sizeof(Record), device);
}

// The external-correlation records of this thread's stacks and, if RUNTIME is
// enabled, the call's RUNTIME record, written together (for TracedCall).
// device kCurrentDeviceOfCaller: the thread's current device.
constexpr int kCurrentDeviceOfCaller = -2;
void recordApiCall(ThreadContext& context, uint32_t kinds, orActivityApiId api, int device, uint64_t correlationId,
                   uint64_t start, orError_t status);

// The calling thread's external ids by kind (0 where its stack is empty).
void currentExternalIds(uint64_t (&ids)[OR_EXTERNAL_CORRELATION_KIND_COUNT]);
// One EXTERNAL_CORRELATION record per non-zero id, for work whose ids were
// taken on another thread (when that kind is enabled).
void recordExternalIds(const uint64_t (&ids)[OR_EXTERNAL_CORRELATION_KIND_COUNT], uint64_t correlationId, int device);

// A CLOCK_SYNC record per device (when that kind is enabled); a sample more
// than OR_ACTIVITY_CLOCK_SYNC_INTERVAL_NS after its device's previous one is
// counted late.
void writeClockSyncRecords();
// Forgets the previous samples: called when CLOCK_SYNC becomes active, so a
// new window's first samples are not measured against the last window's.
void restartClockSyncGaps();
uint64_t lateClockSyncs();

// One COUNTER record per counter of each device (and per stream for
// QUEUED_TASKS), stamped now in the host clock, when that kind is active.
void writeCounterRecords();
// The sampling period of COUNTER records (orActivitySetCounterPeriod).
uint64_t counterPeriodNs();
void setCounterPeriodNs(uint64_t periodNs);

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
// orErrorUnknown, on the calling thread's current device.
class TracedCall {
 public:
  TracedCall(orActivityApiId api, Correlation correlation)
      // The kinds are read once: a window that closes during the call must not
      // leave its device record (decided at enqueue) without this RUNTIME record.
      : kinds_(gActiveKinds.load(std::memory_order_relaxed)) {
    // Untraced, only kinds_ and correlationId_ are set: the destructor's
    // cleanup keeps every member in memory, and this is the launch path.
    if (kinds_ != 0) {
      api_ = api;
      context_ = &threadContext();
      start_ = hostRecordFastNs(context_->clock);
      if (correlation == Correlation::Always || ((kinds_ >> OR_ACTIVITY_KIND_RUNTIME) & 1u)) {
        correlationId_ = nextCorrelationId(*context_);
      }
    }
  }
  ~TracedCall() {
    if (correlationId_ != 0) recordApiCall(*context_, kinds_, api_, device_, correlationId_, start_, status_);
  }
  TracedCall(const TracedCall&) = delete;
  TracedCall& operator=(const TracedCall&) = delete;

  bool traced() const { return kinds_ != 0; }
  uint64_t correlationId() const { return correlationId_; }
  uint64_t start() const { return start_; }  // when traced()

  // Sets the outcome the RUNTIME record reports (and the device it is charged
  // to); returns `status`, so an exit reads `return call.result(device, e);`.
  orError_t result(int device, orError_t status) {
    device_ = device;
    status_ = status;
    return status;
  }
  // The same, charged to the calling thread's current device.
  orError_t result(orError_t status) {
    status_ = status;
    return status;
  }

 private:
  const uint32_t kinds_;
  uint64_t correlationId_ = 0;
  // Set only when traced:
  orActivityApiId api_;
  ThreadContext* context_;
  uint64_t start_;
  // Set by result(); a call left without one reports these:
  int device_ = kCurrentDeviceOfCaller;
  orError_t status_ = orErrorUnknown;
};

// The host-side records a traced call writes beside its RUNTIME record, each
// only while its kind is enabled:
// a host SYNCHRONIZATION record from the call's start to now;
struct SyncTarget {
  uint64_t streamId = 0;  // a stream synchronised
  uint64_t eventId = 0;   // an event synchronised
  RecordOrigin origin;    // the event's capture waited for
};
void recordHostSync(const TracedCall& call, orActivitySyncType type, int device, const SyncTarget& target);
// a MEMORY record stamped now.
void recordMemory(const TracedCall& call, orActivityMemoryOp op, orActivityMemoryKind kind, int device,
                  const void* address, size_t bytes);

}  // namespace openreg::activity
