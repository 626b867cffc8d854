#include "executor.h"

#include <cstdio>
#include <cstring>
#include <exception>

#include "activity/recorder.h"
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

template <class T>
void fill(void* dst, T value, size_t count) {
  T* out = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) out[i] = value;
}

}  // namespace

bool onExecutorThread() { return threadContext().onExecutor; }

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
  // threads) is taken twice per batch, not twice per task. A wait, which may
  // park the stream, always travels alone.
  Task batch[kBatch];
  for (int round = 0; round < kRounds; ++round) {
    int taken = 0;
    {
      std::lock_guard lock(stream->mutex_);
      if (stream->hasParked_) {
        batch[taken++] = std::move(stream->parked_);
        stream->parked_ = Task{};
        stream->hasParked_ = false;
      } else {
        do {
          const bool isWait = stream->queue_.front().kind == TaskKind::WaitEvent;
          if (isWait && taken > 0) break;
          batch[taken++] = stream->queue_.pop();
          if (isWait) break;
        } while (taken < kBatch && !stream->queue_.empty());
      }
    }
    int done = 0;
    bool parked = false;
    for (; done < taken; ++done) {
      if (!run(stream, batch[done])) {  // a wait that parked: it was the only task taken
        parked = true;
        break;
      }
      batch[done] = Task{};  // release what it holds before the stream counts it done
    }
    bool more = false;
    if (done > 0 || !parked) {
      std::lock_guard lock(stream->mutex_);
      stream->completed_.fetch_add(done, std::memory_order_release);
      if (stream->waiters_ > 0) stream->progress_.notify_all();
      if (!parked) {
        more = !stream->queue_.empty();
        if (!more) stream->scheduled_ = false;
      }
    }
    if (parked || !more) return;  // a parked stream is rescheduled by its event
  }
  schedule(stream);  // yield to other streams
}

bool Executor::run(const std::shared_ptr<Stream>& stream, Task& task) {
  if (discarding_.load(std::memory_order_acquire)) return true;
  using namespace activity;
  switch (task.kind) {
    case TaskKind::Kernel: {
      const uint64_t start = task.recordDevice ? clock_->now() : 0;
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
      const uint64_t end = task.recordDevice ? clock_->now() : 0;
      if (task.kernel.userDataDestroy != nullptr) {
        try {
          task.kernel.userDataDestroy(task.kernel.userData);
        } catch (...) {
        }
      }
      if (result != 0) {
        message[sizeof(message) - 1] = '\0';
        char text[768];
        std::snprintf(text, sizeof(text), "kernel '%s' failed on device %d stream %llu: %s", task.kernel.name,
                      device_, static_cast<unsigned long long>(stream->id()),
                      message[0] != '\0' ? message : "(no reason given)");
        stream->setError(orErrorLaunchFailure, text);
      }
      if (task.recordDevice) {
        orActivityKernel record{};
        record.device = device_;
        record.status = result == 0 ? orSuccess : orErrorLaunchFailure;
        record.streamId = stream->id();
        record.correlationId = task.correlationId;
        record.start = start;
        record.end = end;
        record.name = task.kernel.name;
        record.grid = task.kernel.grid;
        record.block = task.kernel.block;
        record.sharedMemBytes = task.kernel.sharedMemBytes;
        record.streamPriority = stream->priority();
        writeRecord(record, OR_ACTIVITY_KIND_KERNEL, device_);
      }
      return true;
    }
    case TaskKind::Memcpy: {
      const uint64_t start = task.recordDevice ? clock_->now() : 0;
      std::memmove(task.copy.dst, task.staging ? task.staging.get() : task.copy.src, task.copy.bytes);
      if (task.recordDevice) {
        orActivityMemcpy record{};
        record.copyKind = task.copy.copyKind;
        record.srcKind = task.copy.srcKind;
        record.dstKind = task.copy.dstKind;
        record.isAsync = task.isAsync ? 1 : 0;
        record.device = device_;
        record.srcDevice = task.copy.srcDevice;
        record.dstDevice = task.copy.dstDevice;
        record.streamId = stream->id();
        record.correlationId = task.correlationId;
        record.bytes = task.copy.bytes;
        record.start = start;
        record.end = clock_->now();
        writeRecord(record, OR_ACTIVITY_KIND_MEMCPY, device_);
      }
      return true;
    }
    case TaskKind::Memset: {
      const uint64_t start = task.recordDevice ? clock_->now() : 0;
      const size_t count = task.memset.bytes / task.memset.elementSize;
      switch (task.memset.elementSize) {
        case 1: std::memset(task.memset.dst, static_cast<int>(task.memset.pattern & 0xff), task.memset.bytes); break;
        case 2: fill<uint16_t>(task.memset.dst, static_cast<uint16_t>(task.memset.pattern), count); break;
        default: fill<uint32_t>(task.memset.dst, task.memset.pattern, count); break;
      }
      if (task.recordDevice) {
        orActivityMemset record{};
        record.device = device_;
        record.value = task.memset.pattern;
        record.streamId = stream->id();
        record.correlationId = task.correlationId;
        record.bytes = task.memset.bytes;
        record.start = start;
        record.end = clock_->now();
        record.elementSize = task.memset.elementSize;
        record.isAsync = task.isAsync ? 1 : 0;
        writeRecord(record, OR_ACTIVITY_KIND_MEMSET, device_);
      }
      return true;
    }
    case TaskKind::EventRecord:
      task.event->complete(task.wait.sequence, clock_->now());
      return true;
    case TaskKind::WaitEvent: {
      if (task.recordDevice && task.wait.waitStartDevice == 0) task.wait.waitStartDevice = clock_->now();
      if (!task.event->reached(task.wait.sequence)) {
        // Stash the wait before registering with the event: once registered,
        // another worker may resume the stream at once.
        std::shared_ptr<Event> event = task.event;
        const uint64_t target = task.wait.sequence;
        {
          std::lock_guard lock(stream->mutex_);
          stream->parked_ = std::move(task);
          stream->hasParked_ = true;
        }
        if (!event->parkUnlessReached(target, stream)) return false;
        std::lock_guard lock(stream->mutex_);  // completed meanwhile: take it back
        task = std::move(stream->parked_);
        stream->parked_ = Task{};
        stream->hasParked_ = false;
      }
      if (task.recordDevice) {
        orActivitySynchronization record{};
        record.syncType = OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT;
        record.clockDomain = OR_ACTIVITY_CLOCK_DEVICE;
        record.device = device_;
        record.streamId = stream->id();
        record.eventId = task.event->id();
        record.correlationId = task.correlationId;
        record.start = task.wait.waitStartDevice;
        record.end = clock_->now();
        writeRecord(record, OR_ACTIVITY_KIND_SYNCHRONIZATION, device_);
      }
      return true;
    }
    case TaskKind::HostFunc:
      try {
        task.hostFunc.func(task.hostFunc.userData);
      } catch (...) {
        stream->setError(orErrorLaunchFailure, "a host function queued with orLaunchHostFunc threw");
      }
      return true;
    case TaskKind::Collective:
      runCollective(*stream, task, device_, *clock_);
      return true;
  }
  return true;
}

}  // namespace openreg
