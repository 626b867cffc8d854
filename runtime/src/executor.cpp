#include "executor.h"

#include <cstdio>
#include <cstring>
#include <exception>

#include "activity/device_records.h"
#include "collective.h"
#include "event.h"
#include "runtime_state.h"
#include "stream.h"
#include "task.h"
#include "thread_context.h"

namespace openreg {
namespace {

// Tasks taken from a stream per lock, and batches served before letting
// other streams in.
constexpr int kBatch = 16;
constexpr int kRounds = 4;

// How long an idle worker spins before sleeping.
constexpr uint64_t kSpinNs = 20000;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// A kernel's userDataDestroy runs once, whether the kernel ran or was dropped.
inline void destroyUserData(Task& task) {
  if (task.kernel.userDataDestroy == nullptr) return;
  try {
    task.kernel.userDataDestroy(task.kernel.userData);
  } catch (...) {}
}

// Out of line: the failure path's buffers stay off the per-task frame.
[[gnu::noinline]] void reportKernelFailure(Stream& stream, const Task& task, char* message, size_t size) {
  message[size - 1] = '\0';
  char text[768];
  std::snprintf(text, sizeof(text), "kernel '%s' failed on device %d stream %llu: %s", task.kernel.name,
                stream.device(), static_cast<unsigned long long>(stream.id()),
                message[0] != '\0' ? message : "(no reason given)");
  stream.setError(orErrorLaunchFailure, text);
}

template <class T>
void fill(void* dst, T value, size_t count) {
  T* out = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) out[i] = value;
}

}  // namespace

bool onExecutorThread() { return threadContext().onExecutor; }

void dropTask(Task& task) {
  switch (task.kind) {
    case TaskKind::Kernel:
      destroyUserData(task);
      break;
    case TaskKind::EventRecord:
      task.event->abandon();
      break;
    case TaskKind::Collective:
      dropCollective(task);
      break;
    default:
      break;
  }
}

void Executor::schedule(std::shared_ptr<Stream> stream) {
  std::call_once(started_, [this] { startThreads(); });
  const int queue = stream->priority() < 0 ? 0 : 1;
  bool wake;
  {
    std::lock_guard lock(mutex_);
    ready_[queue].push_back(std::move(stream));
    readyCount_.fetch_add(1, std::memory_order_release);
    // A spinning worker will see it; sleepers re-check under mutex_ before
    // waiting, so skipping the notify here cannot lose the stream.
    wake = sleeping_ > 0 && !spinning_.load(std::memory_order_acquire);
  }
  if (wake) wake_.notify_one();
}

std::shared_ptr<Stream> Executor::popReadyLocked() {
  auto& queue = !ready_[0].empty() ? ready_[0] : ready_[1];
  if (queue.empty()) return nullptr;
  std::shared_ptr<Stream> stream = std::move(queue.front());
  queue.pop_front();
  readyCount_.fetch_sub(1, std::memory_order_relaxed);
  return stream;
}

void Executor::startThreads() {
  noteRuntimeThreadsStarting();
  threads_.reserve(threadCount_);
  for (int i = 0; i < threadCount_; ++i) {
    threads_.emplace_back([this] { workerLoop(); });
    threads_.back().detach();  // the runtime is never destroyed; see runtime_state.h
  }
}

void Executor::workerLoop() {
  ThreadContext& context = threadContext();
  context.onExecutor = true;
  context.currentDevice = device_;
  for (;;) {
    std::shared_ptr<Stream> stream;
    if (readyCount_.load(std::memory_order_acquire) == 0) {
      bool expected = false;
      if (spinning_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
        const uint64_t deadline = steadyNowNs() + kSpinNs;
        while (readyCount_.load(std::memory_order_acquire) == 0 && steadyNowNs() < deadline) {
          for (int i = 0; i < 32; ++i) cpuRelax();
        }
        spinning_.store(false, std::memory_order_release);
      }
    }
    bool wakeAnother;
    {
      std::unique_lock lock(mutex_);
      if (readyCount_.load(std::memory_order_relaxed) == 0) {
        ++sleeping_;
        wake_.wait(lock, [this] { return readyCount_.load(std::memory_order_relaxed) > 0; });
        --sleeping_;
      }
      stream = popReadyLocked();
      // More ready streams than awake workers: pass the wake along.
      wakeAnother = readyCount_.load(std::memory_order_relaxed) > 0 && sleeping_ > 0;
    }
    if (wakeAnother) wake_.notify_one();
    if (stream) serve(stream);
  }
}

void Executor::serve(const std::shared_ptr<Stream>& stream) {
  // Tasks are taken in batches so the stream's lock (shared with launching
  // threads) is taken twice per batch, not twice per task.
  Task batch[kBatch];
  for (int round = 0; round < kRounds; ++round) {
    const int taken = stream->takeTasks(batch, kBatch);
    int done = 0;
    int counted = 0;  // tasks of the batch the stream already counted (through an event record)
    bool parked = false;
    for (; done < taken; ++done) {
      if (batch[done].kind == TaskKind::EventRecord && !discarding_.load(std::memory_order_acquire)) {
        Task& record = batch[done];
        stream->completeRecord(done + 1 - counted, [&] {
          runEventRecord(record);
          record = Task{};
        });
        counted = done + 1;
        continue;
      }
      if (!run(stream, batch[done])) {  // a wait that parked: it was the only task taken
        parked = true;
        break;
      }
      batch[done] = Task{};  // release what it holds before the stream counts it done
    }
    bool more = false;
    if (done > 0 || !parked) more = stream->finishTasks(done - counted, parked);
    if (parked || !more) return;  // a parked stream is rescheduled by its event
  }
  schedule(stream);  // yield to other streams
}

bool Executor::run(const std::shared_ptr<Stream>& stream, Task& task) {
  if (discarding_.load(std::memory_order_acquire)) {
    dropTask(task);
    return true;
  }
  switch (task.kind) {
    case TaskKind::Kernel:
      runKernel(*stream, task);
      return true;
    case TaskKind::Memcpy:
      runMemcpy(*stream, task);
      return true;
    case TaskKind::Memset:
      runMemset(*stream, task);
      return true;
    case TaskKind::EventRecord:
      runEventRecord(task);
      return true;
    case TaskKind::WaitEvent:
      return runWait(stream, task);
    case TaskKind::HostFunc:
      runHostFunc(*stream, task);
      return true;
    case TaskKind::Collective:
      runCollective(*stream, task, device_, *clock_);
      return true;
  }
  return true;
}

void Executor::runKernel(Stream& stream, Task& task) {
  const uint64_t start = task.recordDevice ? clock_->now() : 0;
  const uint64_t cpuStart = task.recordMetrics ? threadCpuNs() : 0;  // inside the span: busy <= duration
  char message[512];
  message[0] = '\0';
  int result;
  try {
    result = task.kernel.func(task.kernel.userData, message, sizeof(message));
  } catch (const std::exception& e) {
    result = -1;
    std::snprintf(message, sizeof(message), "kernel threw: %s", e.what());
  } catch (...) {
    result = -1;
    std::snprintf(message, sizeof(message), "kernel threw an unknown exception");
  }
  const uint64_t busyNs = task.recordMetrics ? threadCpuNs() - cpuStart : 0;
  const uint64_t end = task.recordDevice ? clock_->now() : 0;
  destroyUserData(task);
  if (result != 0) reportKernelFailure(stream, task, message, sizeof(message));
  if (task.recordDevice) {
    activity::recordKernel(task, stream, start, end, result == 0 ? orSuccess : orErrorLaunchFailure);
    if (task.recordMetrics) activity::recordKernelMetrics(task, stream, busyNs);
  }
}

void Executor::runMemcpy(Stream& stream, Task& task) {
  const uint64_t start = task.recordDevice ? clock_->now() : 0;
  std::memmove(task.copy.dst, task.staging ? task.staging.get() : task.copy.src, task.copy.bytes);
  copiedBytes_.fetch_add(task.copy.bytes, std::memory_order_relaxed);
  if (task.recordDevice) activity::recordMemcpy(task, stream, start, clock_->now());
}

void Executor::runMemset(Stream& stream, Task& task) {
  const uint64_t start = task.recordDevice ? clock_->now() : 0;
  const size_t count = task.memset.bytes / task.memset.elementSize;
  switch (task.memset.elementSize) {
    case 1:
      std::memset(task.memset.dst, static_cast<int>(task.memset.pattern & 0xff), task.memset.bytes);
      break;
    case 2:
      fill<uint16_t>(task.memset.dst, static_cast<uint16_t>(task.memset.pattern), count);
      break;
    default:
      fill<uint32_t>(task.memset.dst, task.memset.pattern, count);
      break;
  }
  if (task.recordDevice) activity::recordMemset(task, stream, start, clock_->now());
}

void Executor::runEventRecord(Task& task) { task.event->complete(task.wait.sequence, clock_->now()); }

bool Executor::runWait(const std::shared_ptr<Stream>& stream, Task& task) {
  if (task.recordDevice && task.wait.waitStartDevice == 0) task.wait.waitStartDevice = clock_->now();
  if (!task.event->reached(task.wait.sequence)) {
    std::shared_ptr<Event> event = task.event;
    const uint64_t target = task.wait.sequence;
    stream->park(std::move(task));
    if (!event->parkUnlessReached(target, stream)) return false;
    task = stream->unpark();  // completed meanwhile: take it back
  }
  if (task.recordDevice) activity::recordStreamWait(task, *stream, clock_->now());
  return true;
}

void Executor::runHostFunc(Stream& stream, Task& task) {
  try {
    task.hostFunc.func(task.hostFunc.userData);
  } catch (...) {
    stream.setError(orErrorLaunchFailure, "a host function queued with orLaunchHostFunc threw");
  }
}

}  // namespace openreg
