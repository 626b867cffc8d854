// A fixed workload for instruction counts (callgrind), which are repeatable
// where times on a shared machine are not: 1,000 untraced warm-up launches,
// then 10,000 launches (traced with "on") queued behind a kernel that holds
// the stream, so the launch path and the executor's per-task path each run a
// fixed amount of work. See benchmarks/README.md for the commands.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "openreg/activity.h"
#include "openreg/runtime.h"

namespace {

std::atomic<bool> gRelease{false};

int noop(void*, char*, size_t) { return 0; }
// Kept out of the executor's count with a second --toggle-collect.
int hold(void*, char*, size_t) {
  while (!gRelease.load()) {}
  return 0;
}

void requested(void*, uint8_t** buffer, size_t* size) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, 4 << 20));
  *size = 4 << 20;
}
void completed(void*, uint8_t* buffer, size_t, size_t) { std::free(buffer); }

}  // namespace

int main(int argc, char** argv) {
  const bool traced = argc > 1 && std::strcmp(argv[1], "on") == 0;
  orStream_t stream;
  if (orStreamCreate(&stream) != orSuccess) return 1;
  for (int i = 0; i < 1000; ++i) orLaunchKernel(stream, "warm", noop, nullptr);
  orStreamSynchronize(stream);
  if (traced) {
    orActivityRegisterCallbacks(requested, completed, nullptr);
    orActivityEnable(OR_ACTIVITY_KIND_RUNTIME);
    orActivityEnable(OR_ACTIVITY_KIND_KERNEL);
    orActivityEnable(OR_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    orActivityPushExternalCorrelationId(OR_EXTERNAL_CORRELATION_KIND_OPERATOR, 42);
    orActivityEnableTracing();
  }
  orLaunchKernel(stream, "hold", hold, nullptr);
  for (int i = 0; i < 10000; ++i) orLaunchKernel(stream, "k", noop, nullptr);
  gRelease = true;
  const orError_t result = orStreamSynchronize(stream);
  if (traced) {
    orActivityDisableTracing();
    orActivityFlushAll(OR_ACTIVITY_FLUSH_FORCED);
  }
  return result == orSuccess ? 0 : 1;
}
