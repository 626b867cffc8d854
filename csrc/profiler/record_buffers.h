// Client-owned record buffers for the activity API's requested/completed
// callbacks, in the CUPTI style.
//
// The runtime asks for a buffer on whichever thread records, so handing one
// out must be quick and must never block: buffers are recycled from a free
// list, and once the byte limit is reached requests are refused (the runtime
// then drops and counts records; the session reports that).
//
// A completed buffer is only queued: the session's ParseQueue parses it on a
// thread of its own and gives it back for reuse, so a long trace needs only
// a handful of buffers. Nothing the runtime waits for parses: not its
// delivery thread (which also writes the clock samples), not
// orActivityFlushAll, and so not the session's stop(), which may run on the
// training thread (Kineto's on-demand traces stop inside step()). What is
// still queued when the window closes is parsed after stop() returns; what
// reads the records waits for it (ParseQueue::finish), as Kineto parses
// CUPTI's buffers in processTrace.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "record_parser.h"
#include "records.h"

namespace openreg::profiler {

struct BufferStats {
  uint64_t requested = 0;
  uint64_t refused = 0;  // answered with NULL: the byte limit was reached
  uint64_t completed = 0;
  uint64_t discarded = 0;    // completed while no session was collecting
  uint64_t recordBytes = 0;  // bytes of records handed back (validSize)
  size_t peakBytes = 0;
};

class ParseQueue;

class RecordBufferPool {
 public:
  // bufferBytes: size of each buffer (at least 1 KiB, multiple of 8).
  // limitBytes: most memory the pool may hold at once, queued buffers
  // included: one budget for the process, so a session started while the
  // last one's parser still holds buffers has what is left of it.
  // (Kineto destroys a trace's sessions before it configures the next.)
  RecordBufferPool(size_t bufferBytes, size_t limitBytes);
  ~RecordBufferPool();
  RecordBufferPool(const RecordBufferPool&) = delete;
  RecordBufferPool& operator=(const RecordBufferPool&) = delete;

  // Sizes from OPENREG_PROFILER_BUFFER_KB (default 1024) and
  // OPENREG_PROFILER_BUFFER_LIMIT_MB (default 256).
  static size_t bufferBytesFromEnv();
  static size_t limitBytesFromEnv();

  // C callbacks for orActivityRegisterCallbacks; userData is the pool.
  static void onRequested(void* userData, uint8_t** buffer, size_t* size);
  static void onCompleted(void* userData, uint8_t* buffer, size_t size, size_t validSize);

  // Where completed buffers are queued from now on; nullptr discards them.
  // The queue must stay alive until it is replaced (the pool does not own it).
  void setQueue(ParseQueue* queue);
  // setQueue(nullptr) if `queue` is still the one buffers go to.
  void detachQueue(const ParseQueue* queue);
  // Stats since the last call, then reset.
  BufferStats takeStats();
  // Frees the recycled buffers (between sessions).
  void trim();
  // Takes back a buffer once parsed, for reuse. Any thread.
  void recycle(uint8_t* buffer);

  size_t bufferBytes() const { return bufferBytes_; }

 private:
  uint8_t* acquire();

  const size_t bufferBytes_;
  const size_t limitBytes_;
  std::mutex poolMutex_;
  std::vector<uint8_t*> free_;
  size_t allocatedBytes_ = 0;
  BufferStats stats_;

  std::mutex queueMutex_;  // held while handing a buffer to the queue, so setQueue waits for it
  ParseQueue* queue_ = nullptr;
};

// One session's parsing: buffers pushed here are parsed into the sink, in the
// order pushed, on a thread the queue owns; each goes back to the pool after.
// The sink must not be read until finish() has returned, and must outlive the
// queue (the destructor finishes). Parsing is bounded work that shares no lock
// with the runtime, so finish() waits at most for the buffers' parse.
class ParseQueue {
 public:
  struct Result {
    uint64_t buffers = 0;      // parsed, in all
    int64_t parseNs = 0;       // wall time parsing them
    int64_t parseCpuNs = 0;    // of which on a core
    uint64_t tailBuffers = 0;  // still queued when close() was called
    int64_t tailNs = 0;        // from close() until the last was parsed
    int64_t finishWaitNs = 0;  // how long finish() blocked its caller
    // Buffers whose records (all, or the rest after a failure) are lost:
    // parsing threw (`error` says why, a static string), or they came after
    // close() or with no memory to queue them (`error` stays null).
    uint64_t unparsedBuffers = 0;
    const char* error = nullptr;
  };

  // Starts the parsing thread; throws std::system_error if there is none to be had.
  ParseQueue(RecordBufferPool& pool, NextRecordFn next, RecordSet& sink);
  ~ParseQueue();
  ParseQueue(const ParseQueue&) = delete;
  ParseQueue& operator=(const ParseQueue&) = delete;

  // Queues one completed buffer; never waits for parsing. Any thread.
  void push(uint8_t* buffer, size_t validSize);
  // No more buffers will come: the thread parses what is queued and ends.
  // Returns at once.
  void close();
  // close(), then blocks until everything pushed is parsed; the result. Any
  // number of calls, from the thread that owns the queue.
  const Result& finish();

 private:
  struct Queued {
    uint8_t* data = nullptr;
    size_t validSize = 0;
  };
  void run();
  void parseOne(const Queued& buffer);

  RecordBufferPool& pool_;
  const NextRecordFn next_;
  RecordSet& sink_;

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Queued> queued_;
  bool closed_ = false;
  int64_t closedAtNs_ = 0;  // steady clock
  uint64_t queuedAtClose_ = 0;
  uint64_t notQueued_ = 0;  // pushed after close, or with no memory to queue them

  Result result_;  // written by the thread; read after it is joined
  std::thread thread_;
};

}  // namespace openreg::profiler
