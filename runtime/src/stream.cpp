#include "stream.h"

#include <chrono>

#include "clock.h"
#include "error.h"
#include "executor.h"

namespace openreg {

uint64_t Stream::enqueue(Task&& task) {
  bool needsScheduling;
  uint64_t sequence;
  {
    std::unique_lock lock(mutex_);
    if (abandoned_) {
      sequence = ++enqueued_;
      lock.unlock();
      dropTask(task);
      return sequence;
    }
    queue_.push(std::move(task));
    sequence = ++enqueued_;
    // In a batch, an idle stream keeps its work (unscheduled, queue not
    // empty) until handOver().
    needsScheduling = !scheduled_ && openBatches_ == 0;
    if (needsScheduling) scheduled_ = true;
  }
  if (needsScheduling) executor_->schedule(shared_from_this());
  return sequence;
}

void Stream::beginBatch() {
  std::lock_guard lock(mutex_);
  ++openBatches_;
}

void Stream::endBatch() {
  {
    std::lock_guard lock(mutex_);
    if (--openBatches_ > 0) return;
  }
  handOver();
}

void Stream::handOver() {
  {
    std::lock_guard lock(mutex_);
    // Only held work leaves a stream unscheduled with tasks queued.
    if (scheduled_ || queue_.empty()) return;
    scheduled_ = true;
  }
  executor_->schedule(shared_from_this());
}

int Stream::takeTasks(Task* batch, int max) {
  std::lock_guard lock(mutex_);
  if (hasParked_) {
    batch[0] = std::move(parked_);
    parked_ = Task{};
    hasParked_ = false;
    return 1;
  }
  int taken = 0;
  while (taken < max && !queue_.empty()) {
    const bool isWait = queue_.front().kind == TaskKind::WaitEvent;
    if (isWait && taken > 0) break;
    batch[taken++] = queue_.pop();
    if (isWait) break;
  }
  return taken;
}

bool Stream::finishTasks(int done, bool parked) {
  std::lock_guard lock(mutex_);
  completed_.fetch_add(done, std::memory_order_release);
  if (waiters_ > 0) progress_.notify_all();
  if (parked) return false;
  const bool more = !queue_.empty();
  if (!more) scheduled_ = false;
  return more;
}

void Stream::park(Task&& wait) {
  std::lock_guard lock(mutex_);
  parked_ = std::move(wait);
  hasParked_ = true;
}

Task Stream::unpark() {
  std::lock_guard lock(mutex_);
  Task wait = std::move(parked_);
  parked_ = Task{};
  hasParked_ = false;
  return wait;
}

uint64_t Stream::enqueuedCount() {
  std::lock_guard lock(mutex_);
  return enqueued_;
}

orError_t Stream::waitFor(uint64_t target, uint64_t deadlineSteadyNs) {
  handOver();  // a wait for held work would otherwise last until its batch ends
  std::unique_lock lock(mutex_);
  auto done = [&] { return completed_.load(std::memory_order_acquire) >= target; };
  if (done()) return orSuccess;
  auto settled = [&] { return done() || abandoned_; };
  ++waiters_;
  if (deadlineSteadyNs == 0) {
    progress_.wait(lock, settled);
  } else {
    while (!settled()) {
      const uint64_t now = steadyNowNs();
      if (now >= deadlineSteadyNs) break;
      progress_.wait_for(lock, std::chrono::nanoseconds(deadlineSteadyNs - now));
    }
  }
  --waiters_;
  if (done()) return orSuccess;
  return abandoned_ ? orErrorShuttingDown : orErrorTimeout;
}

void Stream::abandon() {
  TaskQueue dropped;
  Task parked;
  {
    std::lock_guard lock(mutex_);
    abandoned_ = true;
    std::swap(dropped, queue_);
    if (hasParked_) {
      parked = std::move(parked_);
      parked_ = Task{};
      hasParked_ = false;
    }
    progress_.notify_all();
  }
  if (parked.event) dropTask(parked);
  while (!dropped.empty()) {
    Task task = dropped.pop();
    dropTask(task);
  }
}

void Stream::setError(orError_t code, std::string message) {
  std::lock_guard lock(errorMutex_);
  if (error_ != orSuccess) return;  // the first failure is the one reported
  error_ = code;
  errorMessage_ = std::move(message);
}

orError_t Stream::takeError() {
  std::lock_guard lock(errorMutex_);
  if (error_ == orSuccess) return orSuccess;
  const orError_t code = error_;
  error_ = orSuccess;
  return failWithMessage(code, std::move(errorMessage_));
}

}  // namespace openreg
