// Everything the runtime keeps per host thread, behind one TLS pointer so an
// entry point pays for a single thread-local lookup.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "clock.h"
#include "openreg/activity.h"

namespace openreg {

class Stream;
struct RunningCollective;

namespace activity {
struct ThreadBuffer;
}

struct ThreadContext {
  int currentDevice = 0;
  bool onExecutor = false;
  bool insideCallback = false;                    // inside a client buffer callback
  const RunningCollective* collective = nullptr;  // executor: the collective whose func runs here
  uint32_t threadId = 0;
  HostClockAnchor clock;

  // Correlation ids are taken from the global counter in blocks.
  uint64_t nextCorrelation = 0;
  uint64_t correlationEnd = 0;

  // External-correlation stacks, tops cached for the launch path.
  uint32_t externalDepth[OR_EXTERNAL_CORRELATION_KIND_COUNT] = {};
  uint64_t externalTop[OR_EXTERNAL_CORRELATION_KIND_COUNT] = {};
  std::vector<uint64_t> externalBelow[OR_EXTERNAL_CORRELATION_KIND_COUNT];

  std::vector<uint64_t> markerStack;

  // Kernel names by the caller's pointer, checked by content.
  struct NameCacheEntry {
    const char* key = nullptr;
    const char* interned = nullptr;
  };
  static constexpr size_t kNameCacheSize = 64;
  NameCacheEntry nameCache[kNameCacheSize];

  std::shared_ptr<activity::ThreadBuffer> buffer;
  std::string lastError;

  // The stream this thread used last, so repeated launches skip the handle
  // table's lock. Checked against the stream's destroyed flag on use.
  uint64_t cachedStreamHandle = 0;
  std::shared_ptr<Stream> cachedStream;

  // One entry per batch this thread has open (orStreamBeginBatch), innermost last.
  std::vector<std::shared_ptr<Stream>> openBatches;

  ~ThreadContext();
};

namespace detail {
extern thread_local ThreadContext* tlsContext;
ThreadContext* createThreadContext();
}  // namespace detail

inline ThreadContext& threadContext() {
  ThreadContext* context = detail::tlsContext;
  return context != nullptr ? *context : *detail::createThreadContext();
}

}  // namespace openreg
