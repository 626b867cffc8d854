// A small test-and-set lock for per-thread structures that are almost never
// contended (a thread's record buffer vs. an occasional flush): one atomic
// exchange to lock and a plain release store to unlock, half the cost of a
// pthread mutex on the launch path.
#pragma once

#include <atomic>
#include <thread>

namespace openreg {

class SpinLock {
 public:
  void lock() {
    int spins = 0;
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) {
        // The holder may be descheduled (more threads than cores): yield.
        if (++spins > 64) {
          std::this_thread::yield();
        } else {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        }
      }
    }
  }
  bool try_lock() { return !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace openreg
