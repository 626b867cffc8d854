// Helpers shared by the runtime tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "openreg/activity.h"
#include "openreg/runtime.h"
#include "openreg/runtime.hpp"

// Streamable like gtest's own macros: ASSERT_OR(call) << "context".
#define ASSERT_OR(expr)                    \
  if (orError_t _or_err = (expr); false) { \
  } else                                   \
    ASSERT_EQ(_or_err, orSuccess) << #expr << ": " << openreg::describe(_or_err) << " "

#define EXPECT_OR(expr)                    \
  if (orError_t _or_err = (expr); false) { \
  } else                                   \
    EXPECT_EQ(_or_err, orSuccess) << #expr << ": " << openreg::describe(_or_err) << " "

namespace openreg::testing {

// A one-shot gate a kernel can block on, with a bound so a broken runtime
// fails the test instead of hanging it.
class Gate {
 public:
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }
  bool waitOpen(std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Collects every record delivered through the activity API, copied out of
// the client buffers (which are freed on delivery).
class ActivityCollector {
 public:
  explicit ActivityCollector(size_t bufferSize = 1 << 20, int maxBuffers = -1)
      : bufferSize_(bufferSize), buffersLeft_(maxBuffers) {
    EXPECT_EQ(orActivityRegisterCallbacks(&requested, &completed, this), orSuccess);
  }
  ~ActivityCollector() {
    orActivityDisableTracing();
    orActivityFlushAll(OR_ACTIVITY_FLUSH_FORCED);
    orActivityRegisterCallbacks(nullptr, nullptr, nullptr);
    for (int kind = 1; kind < OR_ACTIVITY_KIND_COUNT; ++kind) orActivityDisable(static_cast<orActivityKind>(kind));
  }

  void enableAll() {
    for (int kind = 1; kind < OR_ACTIVITY_KIND_COUNT; ++kind) {
      EXPECT_EQ(orActivityEnable(static_cast<orActivityKind>(kind)), orSuccess);
    }
  }

  void flush() { EXPECT_EQ(orActivityFlushAll(OR_ACTIVITY_FLUSH_FORCED), orSuccess); }

  template <class Record>
  std::vector<Record> records(orActivityKind kind) {
    std::lock_guard lock(mutex_);
    std::vector<Record> result;
    for (const auto& raw : records_) {
      const auto* header = reinterpret_cast<const orActivityRecord*>(raw.data());
      if (header->kind != static_cast<uint32_t>(kind)) continue;
      Record record{};
      std::memcpy(&record, raw.data(), std::min(raw.size(), sizeof(Record)));
      result.push_back(record);
    }
    return result;
  }

  size_t count(orActivityKind kind) {
    std::lock_guard lock(mutex_);
    size_t n = 0;
    for (const auto& raw : records_) {
      if (reinterpret_cast<const orActivityRecord*>(raw.data())->kind == static_cast<uint32_t>(kind)) ++n;
    }
    return n;
  }

  // The next buffer delivered on a thread other than the caller's (the
  // runtime's delivery thread) is held for `stall` before it is read.
  void stallNextBackgroundDelivery(std::chrono::milliseconds stall) {
    stallThread_ = std::this_thread::get_id();
    stallMs_.store(stall.count());
  }
  bool stalled() const { return stalled_.load(); }

  size_t buffersDelivered() const { return delivered_.load(); }
  size_t outstandingBuffers() const { return outstanding_.load(); }

 private:
  static void requested(void* self, uint8_t** buffer, size_t* size) {
    auto* collector = static_cast<ActivityCollector*>(self);
    int left = collector->buffersLeft_.load();
    while (left != -1) {
      if (left == 0) {
        *buffer = nullptr;
        *size = 0;
        return;
      }
      if (collector->buffersLeft_.compare_exchange_weak(left, left - 1)) break;
    }
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, collector->bufferSize_));
    *size = collector->bufferSize_;
    collector->outstanding_++;
  }

  static void completed(void* self, uint8_t* buffer, size_t, size_t validSize) {
    auto* collector = static_cast<ActivityCollector*>(self);
    if (collector->stallMs_.load() > 0 && std::this_thread::get_id() != collector->stallThread_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(collector->stallMs_.exchange(0)));
      collector->stalled_.store(true);
    }
    {
      std::lock_guard lock(collector->mutex_);
      const orActivityRecord* record = nullptr;
      while (orActivityGetNextRecord(buffer, validSize, &record) == orSuccess) {
        const auto* bytes = reinterpret_cast<const uint8_t*>(record);
        collector->records_.emplace_back(bytes, bytes + record->size);
      }
    }
    std::free(buffer);
    collector->outstanding_--;
    collector->delivered_++;
  }

  const size_t bufferSize_;
  std::atomic<int> buffersLeft_;
  std::atomic<size_t> delivered_{0};
  std::thread::id stallThread_;
  std::atomic<long> stallMs_{0};
  std::atomic<bool> stalled_{false};
  std::atomic<long> outstanding_{0};
  std::mutex mutex_;
  std::vector<std::vector<uint8_t>> records_;
};

// Runs this test binary again with extra environment, restricted to one test,
// and returns 0 only if exactly that test ran and passed. Tests that need a
// fresh runtime configuration (OPENREG_* is read once per process) use it.
inline int rerunWithEnvironment(const std::string& filter, const std::vector<std::string>& environment) {
  std::string command;
  for (const auto& assignment : environment) command += assignment + " ";
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return -1;
  self[n] = '\0';
  command += "OPENREG_TEST_CHILD=1 '" + std::string(self) + "' --gtest_filter='" + filter + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  std::string output;
  char chunk[4096];
  while (size_t got = fread(chunk, 1, sizeof(chunk), pipe)) output.append(chunk, got);
  const int status = pclose(pipe);
  const bool ranOne = output.find("[  PASSED  ] 1 test.") != std::string::npos;
  if (status != 0 || !ranOne) {
    std::fprintf(stderr, "child %s failed (status %d):\n%s\n", filter.c_str(), status, output.c_str());
    return status != 0 ? status : -1;
  }
  return 0;
}

inline bool isChild() { return std::getenv("OPENREG_TEST_CHILD") != nullptr; }

}  // namespace openreg::testing
