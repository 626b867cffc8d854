// Faults the runtime must survive: an out-of-memory host on the record path
// of an executor, a double free racing a reuse of the address, and clock
// settings that cannot be modelled.
#include <thread>

#include "../src/clock.h"
#include "../src/testing.h"
#include "test_support.h"

using namespace openreg::testing;

namespace {

int countRun(void* counter, char*, size_t) {
  ++*static_cast<std::atomic<int>*>(counter);
  return 0;
}

}  // namespace

TEST(Faults, AnExecutorOutOfMemoryForItsRecordBufferCountsADrop) {
  if (!isChild()) {
    EXPECT_EQ(rerunWithEnvironment("Faults.AnExecutorOutOfMemoryForItsRecordBufferCountsADrop",
                                   {"OPENREG_TEST_FAIL_RECORD_BUFFER_ALLOCS=1"}),
              0);
    return;
  }
  ActivityCollector collector;
  // KERNEL only: executors are the only threads that write records, so the
  // one failing allocation is an executor's.
  ASSERT_OR(orActivityEnable(OR_ACTIVITY_KIND_KERNEL));
  uint64_t droppedBefore = 0;
  ASSERT_OR(orActivityGetNumDroppedRecords(0, &droppedBefore));
  ASSERT_OR(orActivityEnableTracing());
  constexpr int kKernels = 5;
  std::atomic<int> ran{0};
  for (int i = 0; i < kKernels; ++i) ASSERT_OR(orLaunchKernel(nullptr, "recorded_or_dropped", countRun, &ran));
  ASSERT_OR(orDeviceSynchronize());
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();
  uint64_t droppedAfter = 0;
  ASSERT_OR(orActivityGetNumDroppedRecords(0, &droppedAfter));
  EXPECT_EQ(ran.load(), kKernels);
  EXPECT_EQ(droppedAfter - droppedBefore, 1u);
  EXPECT_EQ(collector.count(OR_ACTIVITY_KIND_KERNEL), static_cast<size_t>(kKernels - 1));
}

namespace {

// orFree's seam between finding the allocation and removing it: the thread
// marked here stops there until the main thread has freed and reused it.
thread_local bool tStallInFree = false;
Gate* gFoundAllocation = nullptr;
Gate* gAddressReused = nullptr;

void stallMarkedFree(void*) {
  if (!tStallInFree) return;
  gFoundAllocation->open();
  gAddressReused->waitOpen();
}

}  // namespace

TEST(Faults, ADoubleFreeRacingAReuseOfTheAddressLeavesTheNewAllocationAlone) {
  if (!isChild()) {
    // AddressSanitizer would otherwise hold freed memory back from reuse.
    EXPECT_EQ(
        rerunWithEnvironment("Faults.ADoubleFreeRacingAReuseOfTheAddressLeavesTheNewAllocationAlone",
                             {"ASAN_OPTIONS=\"$ASAN_OPTIONS:quarantine_size_mb=0:thread_local_quarantine_size_kb=0\""}),
        0);
    return;
  }
  // Past glibc's largest mmap threshold: freed with munmap, so the next
  // allocation of the size gets the address back from the kernel.
  constexpr size_t kBytes = size_t{64} << 20;
  void* first = nullptr;
  ASSERT_OR(orMalloc(&first, kBytes));
  Gate found, reused;
  gFoundAllocation = &found;
  gAddressReused = &reused;
  orTestingSetFreeHook(stallMarkedFree);
  orError_t secondFree = orSuccess;
  std::thread racer([&] {
    tStallInFree = true;
    secondFree = orFree(first);
  });
  ASSERT_TRUE(found.waitOpen());
  ASSERT_OR(orFree(first));
  // Allocate until the address comes back (the first try does here; the
  // others are kept so each try gets a new block).
  std::vector<void*> others;
  void* again = nullptr;
  for (int i = 0; i < 16 && again != first; ++i) {
    if (again != nullptr) others.push_back(again);
    ASSERT_OR(orMalloc(&again, kBytes));
  }
  reused.open();
  racer.join();
  orTestingSetFreeHook(nullptr);
  ASSERT_EQ(again, first) << "the allocator never reused the freed address: the race cannot be set up";
  EXPECT_EQ(secondFree, orErrorInvalidDevicePointer);
  orPointerAttributes attributes{};
  ASSERT_OR(orPointerGetAttributes(&attributes, again));
  EXPECT_EQ(attributes.type, orMemoryTypeDevice);
  EXPECT_EQ(attributes.basePointer, again);
  EXPECT_EQ(attributes.allocationSize, kBytes);
  ASSERT_OR(orMemset(again, 0x5a, kBytes));
  EXPECT_EQ(static_cast<unsigned char*>(again)[kBytes - 1], 0x5a);
  EXPECT_OR(orFree(again));
  for (void* other : others) EXPECT_OR(orFree(other));
}

TEST(Faults, AClockDriftThatStopsTheDeviceClockIsRejected) {
  if (!isChild()) {
    EXPECT_EQ(rerunWithEnvironment("Faults.AClockDriftThatStopsTheDeviceClockIsRejected",
                                   {"OPENREG_CLOCK_DRIFT_PPM_PER_S=-1e4"}),
              0);
    return;
  }
  int count = 0;
  EXPECT_EQ(orGetDeviceCount(&count), orErrorInitializationError);
  EXPECT_STREQ(orGetLastErrorMessage(),
               "openreg runtime configuration: OPENREG_CLOCK_DRIFT_PPM_PER_S=-10000 with OPENREG_CLOCK_SKEW_PPM=0 "
               "drives the device clock's rate to zero after 100 s, within the 1000 s the drift lasts; with this "
               "skew the drift must be in (-1000, 1e4] ppm/s");
}

TEST(Faults, TheDriftLimitDependsOnTheSkew) {
  if (!isChild()) {
    EXPECT_EQ(rerunWithEnvironment("Faults.TheDriftLimitDependsOnTheSkew",
                                   {"OPENREG_CLOCK_SKEW_PPM=-100000", "OPENREG_CLOCK_DRIFT_PPM_PER_S=-900"}),
              0);
    return;
  }
  int count = 0;
  EXPECT_EQ(orGetDeviceCount(&count), orErrorInitializationError);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("must be in (-900, 1e4] ppm/s"), std::string::npos)
      << orGetLastErrorMessage();
}

TEST(Faults, TheStrongestAcceptedDriftKeepsTheDeviceClockRunningForever) {
  openreg::DeviceClockModel clock;
  clock.offsetNs = 1000;
  clock.skewPpm = -1500;
  clock.driftPpmPerS = -800;  // the strongest the profiler tests use: rate 0.1985 at 1000 s
  constexpr uint64_t kSecond = 1000000000ull;
  uint64_t previous = clock.at(0);
  EXPECT_EQ(previous, 1000u);
  // A week of run time, in steps of 10 s: the reading only ever grows.
  for (uint64_t t = 10 * kSecond; t <= 7 * 24 * 3600 * kSecond; t += 10 * kSecond) {
    const uint64_t reading = clock.at(t);
    ASSERT_GT(reading, previous) << "at " << t / kSecond << " s";
    previous = reading;
  }
  // Past the drift, the rate holds at 1 - 0.0015 - 0.8 = 0.1985.
  const uint64_t late = 2000 * kSecond;
  EXPECT_NEAR(static_cast<double>(clock.at(late + kSecond) - clock.at(late)), 0.1985e9, 1.0);
}
