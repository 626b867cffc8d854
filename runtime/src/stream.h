// A stream: an in-order queue of device work served by its device's executor.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "task.h"

namespace openreg {

class Executor;

class Stream : public std::enable_shared_from_this<Stream> {
 public:
  Stream(int device, uint64_t id, int priority, bool isDefault, Executor* executor)
      : device_(device), id_(id), priority_(priority), isDefault_(isDefault), executor_(executor) {}

  int device() const { return device_; }
  uint64_t id() const { return id_; }
  int priority() const { return priority_; }
  bool isDefault() const { return isDefault_; }
  Executor& executor() const { return *executor_; }

  // Queues a task; returns its sequence number (1-based, per stream).
  uint64_t enqueue(Task&& task);
  // Batches (orStreamBeginBatch): while one is open, work queued on an idle
  // stream is held back instead of handed to the executor. handOver() gives
  // the held work to the executor now (the batch stays open); endBatch() does
  // so when the last batch closes.
  void beginBatch();
  void endBatch();
  void handOver();

  // Blocks until every task with sequence <= target completed (orSuccess),
  // until the deadline (steady ns, 0 = none: orErrorTimeout), or until the
  // stream is abandoned at exit (orErrorShuttingDown). No message is set.
  orError_t waitFor(uint64_t target, uint64_t deadlineSteadyNs = 0);
  // Waits for everything queued so far.
  orError_t waitIdle(uint64_t deadlineSteadyNs = 0) { return waitFor(enqueuedCount(), deadlineSteadyNs); }

  // At exit, after draining: drops every queued and parked task without
  // running it (dropTask), drops work queued from now on at once, and ends
  // the waits that are not reached with orErrorShuttingDown.
  void abandon();

  uint64_t enqueuedCount();
  uint64_t completedCount() const { return completed_.load(std::memory_order_acquire); }

  // Sticky kernel failure: reported (and cleared) by the next query/sync.
  void setError(orError_t code, std::string message);
  // orSuccess, or the pending failure (which is cleared) with its message
  // copied to the calling thread's last-error message.
  orError_t takeError();

  void markDestroyed() { destroyed_.store(true, std::memory_order_release); }
  bool destroyed() const { return destroyed_.load(std::memory_order_acquire); }

  // Executor side. Moves the next tasks to run into `batch` (at most `max`)
  // and returns how many: the parked wait alone if there is one, else queued
  // tasks in order, a wait always alone (it may park the stream).
  int takeTasks(Task* batch, int max);
  // Counts `done` tasks of the batch completed and wakes the stream's
  // waiters. Unless the stream parked, returns whether more work is queued;
  // if none, the stream leaves the executor until its next enqueue.
  bool finishTasks(int done, bool parked);
  // An event record's completion: counts `done` tasks of the batch (the
  // record included) completed and runs `signal` (the event's completion)
  // under the stream's lock, so that whoever sees the event done sees the
  // stream's count too (a query after Event.synchronize), and a waiter on the
  // stream woken by the count finds the event done. `signal` takes no stream lock.
  template <class Signal>
  void completeRecord(int done, Signal&& signal) {
    std::lock_guard lock(mutex_);
    completed_.fetch_add(done, std::memory_order_release);
    signal();
    if (waiters_ > 0) progress_.notify_all();
  }
  // Parks a wait whose event is pending: it is logically the queue's front and
  // is taken first once the event reschedules the stream. Park before
  // registering with the event, which may reschedule the stream at once.
  void park(Task&& wait);
  // Takes back the parked wait (its event completed before it registered).
  Task unpark();

 private:
  const int device_;
  const uint64_t id_;
  const int priority_;
  const bool isDefault_;
  Executor* const executor_;

  std::mutex mutex_;
  std::condition_variable progress_;
  TaskQueue queue_;
  // A wait that found its event pending. It is logically the queue's front:
  // it runs before anything in queue_ once the event reschedules the stream.
  Task parked_;
  bool hasParked_ = false;
  bool scheduled_ = false;  // owned by the executor (ready, running or parked)
  int openBatches_ = 0;
  bool abandoned_ = false;  // at exit: nothing more runs
  uint64_t enqueued_ = 0;
  int waiters_ = 0;
  std::atomic<uint64_t> completed_{0};
  std::atomic<bool> destroyed_{false};

  std::mutex errorMutex_;
  orError_t error_ = orSuccess;
  std::string errorMessage_;
};

}  // namespace openreg
