// Client-owned record buffers for the activity API's requested/completed
// callbacks, in the CUPTI style.
//
// The runtime asks for a buffer on whichever thread records, so handing one
// out must be quick and must never block: buffers are recycled from a free
// list, and once the byte limit is reached requests are refused (the runtime
// then drops and counts records; the session reports that). Completed
// buffers are parsed at once into the active session's RecordSet and
// recycled, so a long trace needs only a handful of buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
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
  uint64_t parseNs = 0;      // time spent parsing them into the sink
  uint64_t parseCpuNs = 0;   // of which the parsing thread was on a core
  size_t peakBytes = 0;
};

class RecordBufferPool {
 public:
  // bufferBytes: size of each buffer (at least 1 KiB, multiple of 8).
  // limitBytes: most memory the pool may hold at once.
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

  // Where completed buffers are parsed to; nullptr discards them. The sink
  // must stay alive until it is replaced.
  void setSink(RecordSet* sink, NextRecordFn next);
  // Stats since the last call, then reset.
  BufferStats takeStats();
  // The same, without resetting them.
  BufferStats peekStats();
  // Frees the recycled buffers (between sessions).
  void trim();

  size_t bufferBytes() const { return bufferBytes_; }

 private:
  uint8_t* acquire();
  void release(uint8_t* buffer);

  const size_t bufferBytes_;
  const size_t limitBytes_;
  std::mutex poolMutex_;
  std::vector<uint8_t*> free_;
  size_t allocatedBytes_ = 0;
  BufferStats stats_;

  std::mutex sinkMutex_;  // held while parsing, so setSink waits for it
  RecordSet* sink_ = nullptr;
  NextRecordFn next_ = nullptr;
};

}  // namespace openreg::profiler
