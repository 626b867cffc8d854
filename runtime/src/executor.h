// A device's executor: a bounded pool of threads that serves streams.
//
// A stream with work is in the ready queue (or being served) at most once, so
// its tasks run in order while different streams run concurrently. A stream
// blocked on an event does not hold a thread: it is parked on the event and
// rescheduled when the event completes, so a bounded pool cannot deadlock on
// cross-stream waits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "clock.h"

namespace openreg {

class Stream;
struct Task;

class Executor {
 public:
  Executor(int device, int threads, const DeviceClockModel* clock)
      : device_(device), threadCount_(threads), clock_(clock) {}
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Hands a stream that has queued work to the pool.
  void schedule(std::shared_ptr<Stream> stream);

  // After this, queued work is dropped without running (dropTask; used at
  // process exit, so no kernel runs against torn-down libraries).
  void discardPendingWork() { discarding_.store(true, std::memory_order_release); }

  int threadCount() const { return threadCount_; }
  // Bytes the device's copies (memcpy tasks) have moved, for COUNTER records.
  uint64_t copiedBytes() const { return copiedBytes_.load(std::memory_order_relaxed); }

 private:
  void startThreads();
  void workerLoop();
  void serve(const std::shared_ptr<Stream>& stream);
  // Runs the stream's front task; false if the stream parked on an event.
  bool run(const std::shared_ptr<Stream>& stream, Task& task);
  // One per task kind: the work, then its device record if one was asked for.
  // Inlined into run(): they are the per-task path (callgrind counts).
  [[gnu::always_inline]] inline void runKernel(Stream& stream, Task& task);
  [[gnu::always_inline]] inline void runMemcpy(Stream& stream, Task& task);
  [[gnu::always_inline]] inline void runMemset(Stream& stream, Task& task);
  [[gnu::always_inline]] inline void runEventRecord(Task& task);
  // False if the stream parked on the event.
  [[gnu::always_inline]] inline bool runWait(const std::shared_ptr<Stream>& stream, Task& task);
  [[gnu::always_inline]] inline void runHostFunc(Stream& stream, Task& task);

  const int device_;
  const int threadCount_;
  const DeviceClockModel* const clock_;
  std::atomic<uint64_t> copiedBytes_{0};

  // Takes the next ready stream (high priority first); mutex_ held.
  std::shared_ptr<Stream> popReadyLocked();

  std::once_flag started_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Stream>> ready_[2];  // [0]: high priority
  int sleeping_ = 0;                              // workers blocked on wake_
  // One idle worker polls briefly before sleeping, so a steady flow of
  // launches is picked up without a futex wake per launch.
  std::atomic<bool> spinning_{false};
  std::atomic<int> readyCount_{0};
  std::vector<std::thread> threads_;
  std::atomic<bool> discarding_{false};
};

// Disposes of a task that will never run (dropped at exit): a kernel's
// userDataDestroy runs, an event record abandons its event (its waits end).
void dropTask(Task& task);

// True on executor threads: blocking runtime calls are refused there.
bool onExecutorThread();

}  // namespace openreg
