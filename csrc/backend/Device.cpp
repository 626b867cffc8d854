#include "backend/Device.h"

#include <ATen/Parallel.h>
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "backend/Check.h"

namespace openreg::backend {

namespace {

struct RuntimeStatus {
  int count = 0;
  orError_t error = orSuccess;
  std::string message;
};

// The runtime reads its configuration once; remember the outcome so that
// deviceCount() stays cheap and noexcept.
const RuntimeStatus& runtimeStatus() {
  static const RuntimeStatus kStatus = [] {
    RuntimeStatus s;
    s.error = orGetDeviceCount(&s.count);
    if (s.error != orSuccess) {
      s.message = openreg::describe(s.error);
      s.count = 0;
    }
    return s;
  }();
  return kStatus;
}

std::atomic<bool> gInitialized{false};
std::atomic<bool> gForkedChild{false};

void markForkedChild() {
  if (gInitialized.load(std::memory_order_relaxed)) gForkedChild.store(true, std::memory_order_relaxed);
}

const int kAtforkRegistered = pthread_atfork(nullptr, nullptr, &markForkedChild);

}  // namespace

c10::DeviceIndex deviceCount() noexcept {
  try {
    return static_cast<c10::DeviceIndex>(runtimeStatus().count);
  } catch (...) {
    return 0;
  }
}

bool inForkedChild() noexcept { return gForkedChild.load(std::memory_order_relaxed); }

void checkNotForkedChild() {
  TORCH_CHECK(!inForkedChild(),
              // CUDA's words first: PyTorch's own OpenReg test and users search for them.
              "Cannot re-initialize OpenReg in forked subprocess. To use OpenReg with multiprocessing, you must use "
              "the 'spawn' start method ('forkserver' works too). openreg: this process is a forked child of one "
              "that had started the device, whose worker threads do not survive fork()");
}

int threadCountSetting(const char* variable) noexcept {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long parsed = std::strtol(text, &end, 10);
  return *end == '\0' && parsed > 0 && parsed <= 1024 ? static_cast<int>(parsed) : -1;
}

namespace {

// The device's executor threads run on the host's cores. With the host's
// default thread count, an OpenMP team has a member sharing a core with a
// busy executor, and every parallel host op waits for it (a 7 us gather took
// 4.8 ms while the device computed). So the host gets one core fewer than its
// default, as if the device had its own, unless the user chose a count
// (OMP_NUM_THREADS, or OPENREG_HOST_THREADS) or changed it from the default.
void shareCoresWithTheDevice() {
  const int chosen = threadCountSetting("OPENREG_HOST_THREADS");
  TORCH_CHECK(chosen >= 0, "openreg: OPENREG_HOST_THREADS must be a whole number from 1 to 1024, got '",
              std::getenv("OPENREG_HOST_THREADS"), "'");
  if (chosen > 0) {
    at::set_num_threads(chosen);
    return;
  }
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
  const int threads = at::get_num_threads();
  if (threads > 1 && threads == at::intraop_default_num_threads()) at::set_num_threads(threads - 1);
}

}  // namespace

void initRuntime() {
  checkNotForkedChild();
  const RuntimeStatus& status = runtimeStatus();
  TORCH_CHECK(status.error == orSuccess, "openreg: the device runtime failed to start: ", status.message);
  static std::once_flag hostThreadsSet;
  std::call_once(hostThreadsSet, shareCoresWithTheDevice);
  gInitialized.store(true, std::memory_order_release);
}

bool runtimeInitialized() noexcept { return gInitialized.load(std::memory_order_acquire); }

void checkDeviceIndex(c10::DeviceIndex index) {
  const auto count = deviceCount();
  TORCH_CHECK(index >= 0 && index < count, "openreg: invalid device index ", static_cast<int>(index), " (there ",
              count == 1 ? "is " : "are ", static_cast<int>(count), " openreg device", count == 1 ? "" : "s", ")");
}

c10::DeviceIndex currentDevice() {
  checkNotForkedChild();  // every device guard starts here: the child learns why at its first op
  int device = 0;
  OPENREG_CHECK(orGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

void setCurrentDevice(c10::DeviceIndex index) {
  checkNotForkedChild();
  checkDeviceIndex(index);
  OPENREG_CHECK(orSetDevice(index));
}

c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) {
  const auto previous = currentDevice();
  if (index != previous) setCurrentDevice(index);
  return previous;
}

DeviceScope::~DeviceScope() {
  // Best effort: a destructor must not throw, and the index was valid before.
  orSetDevice(previous_);
}

}  // namespace openreg::backend
