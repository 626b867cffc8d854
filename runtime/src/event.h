// An event: a marker recorded into a stream, for ordering and timing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "openreg/runtime.h"
#include "task.h"

namespace openreg {

class Stream;

class Event {
 public:
  Event(int device, uint64_t id, bool timing) : device_(device), id_(id), timing_(timing) {}

  int device() const { return device_; }
  uint64_t id() const { return id_; }
  bool timing() const { return timing_; }

  // Host side: a new capture made by `origin`. Returns the sequence the
  // record task carries.
  uint64_t beginRecord(RecordOrigin origin = {});
  // Executor side: the record task for `sequence` ran at deviceTimeNs.
  void complete(uint64_t sequence, uint64_t deviceTimeNs);

  // The sequence a wait issued now must reach (0 = never recorded: no wait).
  uint64_t currentTarget();
  // The same, with the orEventRecord call that made that capture.
  uint64_t currentTarget(RecordOrigin* origin);
  bool reached(uint64_t target);
  // If `target` is not reached yet, parks `stream` to be rescheduled when it
  // is, and returns false. Returns true if it is already reached.
  bool parkUnlessReached(uint64_t target, const std::shared_ptr<Stream>& stream);
  // Blocks until target is reached (orSuccess), the deadline passes
  // (orErrorTimeout; 0 = none) or the event is abandoned at exit
  // (orErrorShuttingDown). No message is set.
  orError_t waitFor(uint64_t target, uint64_t deadlineSteadyNs = 0);

  // At exit (a record task of the event was dropped, or a host thread is
  // blocked on it): pending captures never complete; waits on the event end
  // with orErrorShuttingDown and streams parked on it are rescheduled, for
  // the executor to drop their wait.
  void abandon();
  // At exit, once queued work is dropped: every host thread blocked in
  // waitFor on any event, and any that starts waiting later, gets
  // orErrorShuttingDown.
  static void abandonBlockedWaits();

  // Timestamp of the completed latest capture; false if there is none yet
  // (never recorded, or the latest capture is still pending).
  bool completedTimestamp(uint64_t* deviceTimeNs, bool* everRecorded);

 private:
  struct Parked {
    std::shared_ptr<Stream> stream;
    uint64_t target;
  };

  const int device_;
  const uint64_t id_;
  const bool timing_;

  std::mutex mutex_;
  std::condition_variable completedCv_;
  // Captures may complete out of order (an event re-recorded on another
  // stream), so a wait tracks its own capture, not the highest completed one.
  bool doneLocked(uint64_t target) const;

  uint64_t recorded_ = 0;          // sequence of the latest capture
  RecordOrigin recordedOrigin_;    // who made capture `recorded_`
  uint64_t completed_ = 0;         // highest completed sequence
  std::vector<uint64_t> pending_;  // captures begun and not completed (few)
  uint64_t timestampNs_ = 0;       // of capture `completed_`
  std::vector<Parked> parked_;
  bool abandoned_ = false;  // at exit: pending captures never complete
};

}  // namespace openreg
