// The RUNTIME record of every traced call, whichever way the call leaves:
// failures past argument checking reach the trace with their status.
#include <string>
#include <vector>

#include "test_support.h"

using namespace openreg::testing;

namespace {

void hostNoop(void*) {}

// A stream handle that was live once: the runtime must refuse it.
orStream_t destroyedStream() {
  orStream_t stream = nullptr;
  EXPECT_OR(orStreamCreate(&stream));
  EXPECT_OR(orStreamDestroy(stream));
  return stream;
}

std::vector<orActivityRuntime> runtimeRecordsNamed(ActivityCollector& collector, const std::string& name) {
  std::vector<orActivityRuntime> found;
  for (const auto& record : collector.records<orActivityRuntime>(OR_ACTIVITY_KIND_RUNTIME)) {
    if (record.name == name) found.push_back(record);
  }
  return found;
}

}  // namespace

TEST(Recorder, FailingHostFuncLaunchLeavesARuntimeRecordWithItsStatus) {
  const orStream_t stale = destroyedStream();
  ActivityCollector collector;
  ASSERT_OR(orActivityEnable(OR_ACTIVITY_KIND_RUNTIME));
  ASSERT_OR(orActivityEnableTracing());
  EXPECT_EQ(orLaunchHostFunc(stale, hostNoop, nullptr), orErrorInvalidResourceHandle);
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();
  const auto records = runtimeRecordsNamed(collector, "orLaunchHostFunc");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].apiId, OR_API_LAUNCH_HOST_FUNC);
  EXPECT_EQ(records[0].status, orErrorInvalidResourceHandle);
  EXPECT_EQ(records[0].device, 0);  // the current device: the stream could not say
  EXPECT_NE(records[0].correlationId, 0u);
  EXPECT_LE(records[0].start, records[0].end);
}

TEST(Recorder, EveryHandleFailureOfATracedCallIsRecorded) {
  const orStream_t stale = destroyedStream();
  orEvent_t staleEvent = nullptr;
  ASSERT_OR(orEventCreate(&staleEvent));
  ASSERT_OR(orEventDestroy(staleEvent));
  int notDevice = 0;
  ActivityCollector collector;
  ASSERT_OR(orActivityEnable(OR_ACTIVITY_KIND_RUNTIME));
  ASSERT_OR(orActivityEnableTracing());
  EXPECT_EQ(orLaunchKernel(
                stale, "never_queued", [](void*, char*, size_t) { return 0; }, nullptr),
            orErrorInvalidResourceHandle);
  EXPECT_EQ(orStreamSynchronize(stale), orErrorInvalidResourceHandle);
  EXPECT_EQ(orStreamWaitEvent(nullptr, staleEvent, 0), orErrorInvalidResourceHandle);
  EXPECT_EQ(orEventRecord(staleEvent, nullptr), orErrorInvalidResourceHandle);
  EXPECT_EQ(orEventSynchronize(staleEvent), orErrorInvalidResourceHandle);
  EXPECT_EQ(orFree(&notDevice), orErrorInvalidDevicePointer);
  EXPECT_EQ(orFreeHost(&notDevice), orErrorInvalidHostPointer);
  EXPECT_EQ(orMemsetAsync(&notDevice, 0, sizeof(notDevice), nullptr), orErrorInvalidValue);
  EXPECT_EQ(orDeviceSynchronizeIndex(99), orErrorInvalidDevice);
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();
  const std::vector<std::pair<std::string, orError_t>> expected = {
      {"orLaunchKernel", orErrorInvalidResourceHandle},
      {"orStreamSynchronize", orErrorInvalidResourceHandle},
      {"orStreamWaitEvent", orErrorInvalidResourceHandle},
      {"orEventRecord", orErrorInvalidResourceHandle},
      {"orEventSynchronize", orErrorInvalidResourceHandle},
      {"orFree", orErrorInvalidDevicePointer},
      {"orFreeHost", orErrorInvalidHostPointer},
      {"orMemsetAsync", orErrorInvalidValue},
      {"orDeviceSynchronize", orErrorInvalidDevice}};
  const auto records = collector.records<orActivityRuntime>(OR_ACTIVITY_KIND_RUNTIME);
  ASSERT_EQ(records.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(records[i].name, expected[i].first) << "record " << i;
    EXPECT_EQ(records[i].status, expected[i].second) << expected[i].first;
  }
}

TEST(Recorder, ArgumentErrorsBeforeTheRuntimeIsReachedLeaveNoRecord) {
  ActivityCollector collector;
  ASSERT_OR(orActivityEnable(OR_ACTIVITY_KIND_RUNTIME));
  ASSERT_OR(orActivityEnableTracing());
  EXPECT_EQ(orLaunchHostFunc(nullptr, nullptr, nullptr), orErrorInvalidValue);
  EXPECT_EQ(orLaunchKernel(nullptr, nullptr, nullptr, nullptr), orErrorInvalidValue);
  EXPECT_EQ(orMalloc(nullptr, 16), orErrorInvalidValue);
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();
  EXPECT_EQ(collector.count(OR_ACTIVITY_KIND_RUNTIME), 0u);
}
