#include "executor.h"

#include <cstdio>
#include <cstring>
#include <exception>

#include "activity/recorder.h"
#include "event.h"
#include "runtime_state.h"
#include "stream.h"
#include "task.h"

namespace openreg {
namespace {

thread_local bool tlsOnExecutor = false;

// Tasks served from one stream before letting other streams in.
constexpr int kBatch = 16;

template <class T>
void fill(void* dst, T value, size_t count) {
  T* out = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) out[i] = value;
}

}  // namespace

bool onExecutorThread() { return tlsOnExecutor; }

void Executor::schedule(std::shared_ptr<Stream> stream) {
  std::call_once(started_, [this] { startThreads(); });
  const int queue = stream->priority() < 0 ? 0 : 1;
  {
    std::lock_guard lock(mutex_);
    ready_[queue].push_back(std::move(stream));
  }
  wake_.notify_one();
}

void Executor::startThreads() {
  threads_.reserve(threadCount_);
  for (int i = 0; i < threadCount_; ++i) {
    threads_.emplace_back([this] { workerLoop(); });
    threads_.back().detach();  // the runtime is never destroyed; see runtime_state.h
  }
}

void Executor::workerLoop() {
  tlsOnExecutor = true;
  setCurrentDevice(device_);
  for (;;) {
    std::shared_ptr<Stream> stream;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return !ready_[0].empty() || !ready_[1].empty(); });
      auto& queue = !ready_[0].empty() ? ready_[0] : ready_[1];
      stream = std::move(queue.front());
      queue.pop_front();
    }
    serve(stream);
  }
}

void Executor::serve(const std::shared_ptr<Stream>& stream) {
  for (int served = 0; served < kBatch; ++served) {
    Task* task;
    {
      std::lock_guard lock(stream->mutex_);
      task = &stream->queue_.front();  // deque push_back keeps references valid
    }
    if (!run(stream, *task)) return;  // parked: the event reschedules the stream
    bool more;
    {
      std::lock_guard lock(stream->mutex_);
      stream->queue_.pop_front();
      stream->completed_.fetch_add(1, std::memory_order_release);
      if (stream->waiters_ > 0) stream->progress_.notify_all();
      more = !stream->queue_.empty();
      if (!more) stream->scheduled_ = false;
    }
    if (!more) return;
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
        result = task.func(task.userData, message, sizeof(message));
      } catch (const std::exception& e) {
        result = -1;
        std::snprintf(message, sizeof(message), "kernel threw: %s", e.what());
      } catch (...) {
        result = -1;
        std::snprintf(message, sizeof(message), "kernel threw an unknown exception");
      }
      const uint64_t end = task.recordDevice ? clock_->now() : 0;
      if (task.userDataDestroy != nullptr) {
        try {
          task.userDataDestroy(task.userData);
        } catch (...) {
        }
      }
      if (result != 0) {
        message[sizeof(message) - 1] = '\0';
        char text[768];
        std::snprintf(text, sizeof(text), "kernel '%s' failed on device %d stream %llu: %s", task.name,
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
        record.name = task.name;
        record.grid = task.grid;
        record.block = task.block;
        record.sharedMemBytes = task.sharedMemBytes;
        record.streamPriority = stream->priority();
        writeRecord(record, OR_ACTIVITY_KIND_KERNEL, device_);
      }
      return true;
    }
    case TaskKind::Memcpy: {
      const uint64_t start = task.recordDevice ? clock_->now() : 0;
      std::memmove(task.dst, task.staging ? task.staging.get() : task.src, task.bytes);
      if (task.recordDevice) {
        orActivityMemcpy record{};
        record.copyKind = task.copyKind;
        record.srcKind = task.srcKind;
        record.dstKind = task.dstKind;
        record.isAsync = task.isAsync ? 1 : 0;
        record.device = device_;
        record.srcDevice = task.srcDevice;
        record.dstDevice = task.dstDevice;
        record.streamId = stream->id();
        record.correlationId = task.correlationId;
        record.bytes = task.bytes;
        record.start = start;
        record.end = clock_->now();
        writeRecord(record, OR_ACTIVITY_KIND_MEMCPY, device_);
      }
      return true;
    }
    case TaskKind::Memset: {
      const uint64_t start = task.recordDevice ? clock_->now() : 0;
      const size_t count = task.bytes / task.elementSize;
      switch (task.elementSize) {
        case 1: std::memset(task.dst, static_cast<int>(task.pattern & 0xff), task.bytes); break;
        case 2: fill<uint16_t>(task.dst, static_cast<uint16_t>(task.pattern), count); break;
        default: fill<uint32_t>(task.dst, task.pattern, count); break;
      }
      if (task.recordDevice) {
        orActivityMemset record{};
        record.device = device_;
        record.value = task.pattern;
        record.streamId = stream->id();
        record.correlationId = task.correlationId;
        record.bytes = task.bytes;
        record.start = start;
        record.end = clock_->now();
        record.elementSize = task.elementSize;
        record.isAsync = task.isAsync ? 1 : 0;
        writeRecord(record, OR_ACTIVITY_KIND_MEMSET, device_);
      }
      return true;
    }
    case TaskKind::EventRecord:
      task.event->complete(task.eventSequence, clock_->now());
      return true;
    case TaskKind::WaitEvent: {
      if (task.recordDevice && task.waitStartDevice == 0) task.waitStartDevice = clock_->now();
      if (!task.event->parkUnlessReached(task.eventSequence, stream)) return false;
      if (task.recordDevice) {
        orActivitySynchronization record{};
        record.syncType = OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT;
        record.clockDomain = OR_ACTIVITY_CLOCK_DEVICE;
        record.device = device_;
        record.streamId = stream->id();
        record.eventId = task.event->id();
        record.correlationId = task.correlationId;
        record.start = task.waitStartDevice;
        record.end = clock_->now();
        writeRecord(record, OR_ACTIVITY_KIND_SYNCHRONIZATION, device_);
      }
      return true;
    }
    case TaskKind::HostFunc:
      try {
        task.hostFunc(task.userData);
      } catch (...) {
        stream->setError(orErrorLaunchFailure, "a host function queued with orLaunchHostFunc threw");
      }
      return true;
  }
  return true;
}

}  // namespace openreg
