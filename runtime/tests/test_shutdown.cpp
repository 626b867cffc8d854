// What process exit does to work still queued (runtime.h, "At exit"): the
// runtime drains for OPENREG_EXIT_DRAIN_TIMEOUT_MS, then drops the rest, and
// no wait may hang on what it dropped.
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "test_support.h"

using namespace openreg::testing;

namespace {

// The child's state, leaked on purpose: the check runs during exit.
struct ExitScenario {
  Gate kernelStarted;
  Gate release;  // opened only after the exit check, so the kernel outlives the drain
  std::atomic<int> destroyed{0};
  std::atomic<int> eventSync{-1};
  std::atomic<int> streamSync{-1};
  std::string eventSyncMessage;
  std::string streamSyncMessage;
  std::atomic<int> waitersDone{0};
  orStream_t stream = nullptr;
  orEvent_t event = nullptr;
};
ExitScenario* gScenario = nullptr;

void countDestroy(void* scenario) { static_cast<ExitScenario*>(scenario)->destroyed++; }
int noop(void*, char*, size_t) { return 0; }

int blockUntilReleased(void* scenario, char*, size_t) {
  auto* s = static_cast<ExitScenario*>(scenario);
  s->kernelStarted.open();
  s->release.waitOpen(std::chrono::seconds(60));
  return 0;
}

orError_t launchWithDestroy(orStream_t stream, ExitScenario* scenario) {
  orLaunchConfig config{};
  config.structSize = sizeof(config);
  config.name = "dropped_at_exit";
  config.func = noop;
  config.userData = scenario;
  config.userDataDestroy = countDestroy;
  config.grid = {1, 1, 1};
  config.block = {1, 1, 1};
  return orLaunchKernelEx(&config, stream);
}

int failExitCheck(const char* what, long long got, long long expected) {
  std::fprintf(stderr, "exit check failed: %s: got %lld, expected %lld\n", what, got, expected);
  return 1;
}

// Registered before the runtime exists, so it runs after the runtime's own
// exit handler. Reports through the exit status (the parent checks it).
void checkAfterRuntimeExit() {
  ExitScenario& s = *gScenario;
  int failures = 0;
  // Bounded: a waiter that stays blocked fails the check instead of hanging it.
  for (int i = 0; i < 1000 && s.waitersDone.load() < 2; ++i) usleep(10000);
  if (s.waitersDone.load() != 2) failures += failExitCheck("waiters that returned", s.waitersDone.load(), 2);
  if (s.eventSync.load() != orErrorShuttingDown) {
    failures += failExitCheck("orEventSynchronize result", s.eventSync.load(), orErrorShuttingDown);
  } else if (s.eventSyncMessage.find("shutting down") == std::string::npos) {
    failures += failExitCheck(("orEventSynchronize message: " + s.eventSyncMessage).c_str(), 0, 1);
  }
  if (s.streamSync.load() != orErrorShuttingDown) {
    failures += failExitCheck("orStreamSynchronize result", s.streamSync.load(), orErrorShuttingDown);
  } else if (s.streamSyncMessage.find("orStreamSynchronize: openreg is shutting down") == std::string::npos) {
    failures += failExitCheck(("orStreamSynchronize message: " + s.streamSyncMessage).c_str(), 0, 1);
  }
  // The kernel queued behind the blocked one was dropped: its user data is
  // destroyed all the same, exactly once.
  if (s.destroyed.load() != 1) failures += failExitCheck("userDataDestroy calls of the dropped kernel", s.destroyed, 1);
  // The dropped record never completes its event.
  if (orEventQuery(s.event) != orErrorNotReady) failures += failExitCheck("orEventQuery", orEventQuery(s.event), 8);
  // Work queued after exit is dropped at once, and waiting on it returns.
  if (launchWithDestroy(s.stream, &s) != orSuccess) failures += failExitCheck("launch after exit", 1, 0);
  if (s.destroyed.load() != 2) failures += failExitCheck("userDataDestroy after a launch at exit", s.destroyed, 2);
  const orError_t late = orStreamSynchronize(s.stream);
  if (late != orErrorShuttingDown) failures += failExitCheck("orStreamSynchronize after exit", late, 15);
  s.release.open();
  std::fflush(stderr);
  _exit(failures == 0 ? 0 : 3);
}

}  // namespace

TEST(Shutdown, ExitDropsQueuedWorkDestroysItsUserDataAndEndsEveryWait) {
  if (!isChild()) {
    EXPECT_EQ(rerunWithEnvironment("Shutdown.ExitDropsQueuedWorkDestroysItsUserDataAndEndsEveryWait",
                                   {"OPENREG_EXIT_DRAIN_TIMEOUT_MS=100"}),
              0);
    return;
  }
  gScenario = new ExitScenario();
  ExitScenario& s = *gScenario;
  ASSERT_EQ(std::atexit(checkAfterRuntimeExit), 0);  // before the runtime registers its handler
  ASSERT_OR(orStreamCreate(&s.stream));
  ASSERT_OR(orEventCreate(&s.event));
  ASSERT_OR(orLaunchKernel(s.stream, "blocks_past_exit", blockUntilReleased, &s));
  ASSERT_TRUE(s.kernelStarted.waitOpen());
  // Queued behind the running kernel: dropped at exit.
  ASSERT_OR(orEventRecord(s.event, s.stream));
  ASSERT_OR(launchWithDestroy(s.stream, &s));
  std::thread([&s] {
    s.eventSync = orEventSynchronize(s.event);
    s.eventSyncMessage = orGetLastErrorMessage();
    s.waitersDone++;
  }).detach();
  std::thread([&s] {
    s.streamSync = orStreamSynchronize(s.stream);
    s.streamSyncMessage = orGetLastErrorMessage();
    s.waitersDone++;
  }).detach();
  // Nothing can finish before exit: the kernel holds the stream.
  EXPECT_EQ(orStreamQuery(s.stream), orErrorNotReady);
  EXPECT_EQ(s.waitersDone.load(), 0);
  EXPECT_EQ(s.destroyed.load(), 0);
}
