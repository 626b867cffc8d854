#include "event.h"

#include <algorithm>
#include <chrono>

#include "clock.h"
#include "executor.h"
#include "stream.h"

namespace openreg {

uint64_t Event::beginRecord() {
  std::lock_guard lock(mutex_);
  pending_.push_back(++recorded_);
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

bool Event::reached(uint64_t target) {
  std::lock_guard lock(mutex_);
  return doneLocked(target);
}

bool Event::parkUnlessReached(uint64_t target, const std::shared_ptr<Stream>& stream) {
  std::lock_guard lock(mutex_);
  if (doneLocked(target)) return true;
  parked_.push_back({stream, target});
  return false;
}

bool Event::waitFor(uint64_t target, uint64_t deadlineSteadyNs) {
  std::unique_lock lock(mutex_);
  auto done = [&] { return doneLocked(target); };
  if (deadlineSteadyNs == 0) {
    completedCv_.wait(lock, done);
    return true;
  }
  while (!done()) {
    const uint64_t now = steadyNowNs();
    if (now >= deadlineSteadyNs) return false;
    completedCv_.wait_for(lock, std::chrono::nanoseconds(deadlineSteadyNs - now));
  }
  return true;
}

bool Event::completedTimestamp(uint64_t* deviceTimeNs, bool* everRecorded) {
  std::lock_guard lock(mutex_);
  *everRecorded = recorded_ > 0;
  if (recorded_ == 0 || completed_ != recorded_) return false;
  *deviceTimeNs = timestampNs_;
  return true;
}

}  // namespace openreg
