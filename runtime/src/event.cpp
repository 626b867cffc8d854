#include "event.h"

#include <algorithm>
#include <chrono>

#include "clock.h"
#include "executor.h"
#include "stream.h"

namespace openreg {

uint64_t Event::beginRecord(RecordOrigin origin) {
  std::lock_guard lock(mutex_);
  pending_.push_back(++recorded_);
  recordedOrigin_ = origin;
  return recorded_;
}

bool Event::doneLocked(uint64_t target) const {
  return std::find(pending_.begin(), pending_.end(), target) == pending_.end();
}

void Event::complete(uint64_t sequence, uint64_t deviceTimeNs) {
  std::vector<Parked> released;
  {
    std::lock_guard lock(mutex_);
    pending_.erase(std::remove(pending_.begin(), pending_.end(), sequence), pending_.end());
    if (sequence > completed_) {
      completed_ = sequence;
      timestampNs_ = deviceTimeNs;
    }
    auto stillWaiting = [&](const Parked& p) { return !doneLocked(p.target); };
    auto split = std::partition(parked_.begin(), parked_.end(), stillWaiting);
    released.assign(std::make_move_iterator(split), std::make_move_iterator(parked_.end()));
    parked_.erase(split, parked_.end());
  }
  completedCv_.notify_all();
  for (auto& parked : released) parked.stream->executor().schedule(std::move(parked.stream));
}

uint64_t Event::currentTarget() {
  std::lock_guard lock(mutex_);
  return recorded_;
}

uint64_t Event::currentTarget(RecordOrigin* origin) {
  std::lock_guard lock(mutex_);
  *origin = recordedOrigin_;
  return recorded_;
}

bool Event::reached(uint64_t target) {
  std::lock_guard lock(mutex_);
  return doneLocked(target);
}

bool Event::parkUnlessReached(uint64_t target, const std::shared_ptr<Stream>& stream) {
  std::lock_guard lock(mutex_);
  if (doneLocked(target) || abandoned_) return true;  // abandoned: the executor drops the wait
  parked_.push_back({stream, target});
  return false;
}

namespace {

// The events host threads are blocked on, so exit can wake them all (an event
// may be out of the handle table, destroyed while a thread waits on it).
struct BlockedWaits {
  std::mutex mutex;
  std::vector<Event*> events;  // one entry per blocked thread
  bool abandoned = false;
};

BlockedWaits& blockedWaits() {
  static BlockedWaits* waits = new BlockedWaits();  // outlives exit
  return *waits;
}

}  // namespace

orError_t Event::waitFor(uint64_t target, uint64_t deadlineSteadyNs) {
  BlockedWaits& waits = blockedWaits();
  bool abandonedAlready;
  {
    std::lock_guard lock(waits.mutex);
    waits.events.push_back(this);
    abandonedAlready = waits.abandoned;
  }
  orError_t result = orSuccess;
  {
    std::unique_lock lock(mutex_);
    if (abandonedAlready) abandoned_ = true;
    auto settled = [&] { return doneLocked(target) || abandoned_; };
    if (deadlineSteadyNs == 0) {
      completedCv_.wait(lock, settled);
    } else {
      while (!settled()) {
        const uint64_t now = steadyNowNs();
        if (now >= deadlineSteadyNs) break;
        completedCv_.wait_for(lock, std::chrono::nanoseconds(deadlineSteadyNs - now));
      }
    }
    if (!doneLocked(target)) result = abandoned_ ? orErrorShuttingDown : orErrorTimeout;
  }
  std::lock_guard lock(waits.mutex);
  waits.events.erase(std::find(waits.events.begin(), waits.events.end(), this));
  return result;
}

void Event::abandon() {
  std::vector<Parked> released;
  {
    std::lock_guard lock(mutex_);
    abandoned_ = true;
    released = std::move(parked_);
    parked_.clear();
  }
  completedCv_.notify_all();
  for (auto& parked : released) parked.stream->executor().schedule(std::move(parked.stream));
}

void Event::abandonBlockedWaits() {
  BlockedWaits& waits = blockedWaits();
  std::lock_guard lock(waits.mutex);
  waits.abandoned = true;
  for (Event* event : waits.events) event->abandon();
}

bool Event::completedTimestamp(uint64_t* deviceTimeNs, bool* everRecorded) {
  std::lock_guard lock(mutex_);
  *everRecorded = recorded_ > 0;
  if (recorded_ == 0 || completed_ != recorded_) return false;
  *deviceTimeNs = timestampNs_;
  return true;
}

}  // namespace openreg
