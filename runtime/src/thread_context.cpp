#include "thread_context.h"

#include <pthread.h>

#include "stream.h"

namespace openreg {

namespace activity {
// Hands the buffer of an exiting thread to delivery (buffers.cpp).
void retireThreadBuffer(std::shared_ptr<ThreadBuffer>& buffer);
}  // namespace activity

namespace detail {

thread_local ThreadContext* tlsContext = nullptr;

namespace {

// A pthread key (not a thread_local object) runs the destructor at thread
// exit and tolerates the context being re-created by a later destructor.
void destroyContext(void* context) {
  tlsContext = nullptr;
  delete static_cast<ThreadContext*>(context);
}

pthread_key_t contextKey() {
  static const pthread_key_t kKey = [] {
    pthread_key_t k;
    pthread_key_create(&k, destroyContext);
    return k;
  }();
  return kKey;
}

}  // namespace

ThreadContext* createThreadContext() {
  auto* context = new ThreadContext();
  pthread_setspecific(contextKey(), context);
  tlsContext = context;
  return context;
}

}  // namespace detail

ThreadContext::~ThreadContext() {
  if (buffer) activity::retireThreadBuffer(buffer);
  // Work held by batches the thread left open would otherwise never run.
  for (auto& stream : openBatches) stream->endBatch();
}

}  // namespace openreg
