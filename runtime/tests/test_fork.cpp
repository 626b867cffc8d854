// fork() and the runtime (runtime.h, "fork()"): a child of a process whose
// runtime had started threads refuses every call at once, and its exit does
// not wait for work queued before the fork; a child forked before any thread
// started uses its own runtime. Each test runs in a fresh process, so which
// threads exist at the fork is known.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "test_support.h"

using namespace openreg::testing;

namespace {

int noop(void*, char*, size_t) { return 0; }

// The forked child's exit status, once it has one. LeakSanitizer's exit-time
// check hangs in a fork()ed child of a multithreaded process (its thread
// registry lists threads the child does not have), so the child leaves through
// this handler: registered before the runtime exists, it runs after the
// runtime's own exit handler and before LeakSanitizer's.
int gForkedChildStatus = -1;

void leaveForkedChild() {
  if (gForkedChildStatus >= 0) _exit(gForkedChildStatus);
}

void registerChildExit() { ASSERT_EQ(std::atexit(leaveForkedChild), 0); }

int waitForGate(void* gate, char*, size_t) {
  static_cast<Gate*>(gate)->waitOpen(std::chrono::seconds(60));
  return 0;
}

// The child's exit status and everything it wrote to stderr. Bounded: a child
// still running after 60 s is killed and reported as status -1.
struct ChildResult {
  int status = -1;
  std::string errors;
};

template <typename Body>
ChildResult runInForkedChild(Body body) {
  int pipeFds[2];
  if (pipe(pipeFds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipeFds[1], STDERR_FILENO);
    close(pipeFds[0]);
    gForkedChildStatus = body();
    std::exit(gForkedChildStatus);  // exit(), not _exit(): the runtime's exit handler runs
  }
  close(pipeFds[1]);
  fcntl(pipeFds[0], F_SETFL, O_NONBLOCK);
  ChildResult result;
  char chunk[4096];
  int status = 0;
  for (int i = 0; i < 6000; ++i) {
    while (true) {
      const ssize_t got = read(pipeFds[0], chunk, sizeof(chunk));
      if (got <= 0) break;
      result.errors.append(chunk, static_cast<size_t>(got));
    }
    if (waitpid(pid, &status, WNOHANG) == pid) {
      result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    usleep(10000);
  }
  if (result.status == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  close(pipeFds[0]);
  return result;
}

// 0 if `error` is the forked-child refusal, else a distinct failure code.
int refusedAsForkedChild(orError_t error, int code) {
  if (error != orErrorInitializationError) {
    std::fprintf(stderr, "check %d: got %s\n", code, orGetErrorName(error));
    return code;
  }
  const std::string message = orGetLastErrorMessage();
  if (message.find("forked subprocess") == std::string::npos || message.find("'spawn'") == std::string::npos) {
    std::fprintf(stderr, "check %d: message '%s'\n", code, message.c_str());
    return code;
  }
  return 0;
}

int useRuntimeInChild(orStream_t stream, orEvent_t event) {
  int count = 0;
  void* memory = nullptr;
  if (int failed = refusedAsForkedChild(orDeviceSynchronize(), 10)) return failed;
  if (int failed = refusedAsForkedChild(orStreamSynchronize(stream), 11)) return failed;
  if (int failed = refusedAsForkedChild(orEventSynchronize(event), 12)) return failed;
  if (int failed = refusedAsForkedChild(orLaunchKernel(stream, "in_child", noop, nullptr), 13)) return failed;
  if (int failed = refusedAsForkedChild(orMalloc(&memory, 64), 14)) return failed;
  if (int failed = refusedAsForkedChild(orGetDeviceCount(&count), 15)) return failed;
  return 0;
}

}  // namespace

TEST(Fork, ChildOfAStartedRuntimeRefusesEveryCallAndExitsWithoutWaiting) {
  if (!isChild()) {
    EXPECT_EQ(rerunWithEnvironment("Fork.ChildOfAStartedRuntimeRefusesEveryCallAndExitsWithoutWaiting", {}), 0);
    return;
  }
  registerChildExit();
  Gate gate;
  orStream_t stream = nullptr;
  orEvent_t event = nullptr;
  ASSERT_OR(orStreamCreate(&stream));
  ASSERT_OR(orEventCreate(&event));
  // Work still queued at the fork: a kernel held by the gate, an event behind it.
  ASSERT_OR(orLaunchKernel(stream, "held", waitForGate, &gate));
  ASSERT_OR(orEventRecord(event, stream));
  const ChildResult child = runInForkedChild([&] { return useRuntimeInChild(stream, event); });
  EXPECT_EQ(child.status, 0) << child.errors;
  // The exit handler did not wait for the queued work (it would say so after
  // OPENREG_EXIT_DRAIN_TIMEOUT_MS).
  EXPECT_EQ(child.errors.find("still busy at exit"), std::string::npos) << child.errors;
  // The parent's runtime is untouched.
  gate.open();
  EXPECT_OR(orStreamSynchronize(stream));
  EXPECT_OR(orEventSynchronize(event));
  EXPECT_OR(orStreamDestroy(stream));
  EXPECT_OR(orEventDestroy(event));
}

TEST(Fork, ChildForkedBeforeAnyRuntimeThreadUsesItsOwnRuntime) {
  if (!isChild()) {
    EXPECT_EQ(rerunWithEnvironment("Fork.ChildForkedBeforeAnyRuntimeThreadUsesItsOwnRuntime", {}), 0);
    return;
  }
  registerChildExit();
  // The runtime exists (devices counted, memory allocated) but has no thread yet.
  int count = 0;
  void* memory = nullptr;
  ASSERT_OR(orGetDeviceCount(&count));
  ASSERT_OR(orMalloc(&memory, 256));
  const ChildResult child = runInForkedChild([&] {
    if (orMemsetAsync(memory, 7, 256, nullptr) != orSuccess) return 20;
    unsigned char host[256] = {};
    if (orMemcpy(host, memory, sizeof(host), orMemcpyDeviceToHost) != orSuccess) return 21;
    if (host[0] != 7 || host[255] != 7) return 22;
    return orDeviceSynchronize() == orSuccess ? 0 : 23;
  });
  EXPECT_EQ(child.status, 0) << child.errors;
  EXPECT_OR(orFree(memory));
}
