// orLaunchCollective: a launch like a kernel's, recorded as COMMUNICATION.
#include "test_support.h"

using openreg::testing::ActivityCollector;

namespace {

int addOne(void* data, char*, size_t) {
  ++*static_cast<std::atomic<int>*>(data);
  return 0;
}

int peerGone(void*, char* message, size_t capacity) {
  std::snprintf(message, capacity, "connection closed by peer rank 1");
  return 1;
}

orCollectiveConfig allReduceConfig(orKernelFunc func, void* userData) {
  orCollectiveConfig config{};
  config.structSize = sizeof(config);
  config.name = "openregComm_AllReduce_Sum_f32";
  config.collective = "allreduce";
  config.dataType = "f32";
  config.groupName = "0";
  config.count = 1024;
  config.bytes = 4096;
  config.sequence = 7;
  config.groupSize = 2;
  config.rank = 1;
  config.peer = -1;
  config.func = func;
  config.userData = userData;
  return config;
}

}  // namespace

TEST(Collective, RejectsBadConfigs) {
  EXPECT_EQ(orLaunchCollective(nullptr, nullptr), orErrorInvalidValue);
  orCollectiveConfig config = allReduceConfig(addOne, nullptr);
  config.structSize = 8;
  EXPECT_EQ(orLaunchCollective(&config, nullptr), orErrorInvalidValue);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("structSize"), std::string::npos);
  config = allReduceConfig(nullptr, nullptr);
  EXPECT_EQ(orLaunchCollective(&config, nullptr), orErrorInvalidValue);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("openregComm_AllReduce_Sum_f32"), std::string::npos);
  config = allReduceConfig(addOne, nullptr);
  config.name = nullptr;
  EXPECT_EQ(orLaunchCollective(&config, nullptr), orErrorInvalidValue);
}

TEST(Collective, RunsInStreamOrderAndOwnsItsUserData) {
  static std::atomic<int> destroyed{0};
  destroyed = 0;
  std::atomic<int> count{0};
  orCollectiveConfig config = allReduceConfig(addOne, &count);
  config.userDataDestroy = [](void*) { ++destroyed; };
  for (int i = 0; i < 5; ++i) ASSERT_OR(orLaunchCollective(&config, nullptr));
  ASSERT_OR(orDeviceSynchronize());
  EXPECT_EQ(count.load(), 5);
  EXPECT_EQ(destroyed.load(), 5);
}

TEST(Collective, FailureSticksToTheStreamWithTheEventName) {
  orStream_t stream;
  ASSERT_OR(orStreamCreate(&stream));
  orCollectiveConfig config = allReduceConfig(peerGone, nullptr);
  ASSERT_OR(orLaunchCollective(&config, stream));
  EXPECT_EQ(orStreamSynchronize(stream), orErrorLaunchFailure);
  const std::string message = orGetLastErrorMessage();
  EXPECT_NE(message.find("collective 'openregComm_AllReduce_Sum_f32' failed"), std::string::npos) << message;
  EXPECT_NE(message.find("connection closed by peer rank 1"), std::string::npos) << message;
  ASSERT_OR(orStreamDestroy(stream));
}

TEST(Collective, WritesOneCommunicationRecordLinkedToItsLaunch) {
  ActivityCollector collector;
  collector.enableAll();
  ASSERT_OR(orActivityEnableTracing());
  std::atomic<int> count{0};
  orStream_t stream;
  ASSERT_OR(orStreamCreate(&stream));
  uint64_t streamId = 0;
  ASSERT_OR(orStreamGetId(stream, &streamId));
  ASSERT_OR(orActivityPushExternalCorrelationId(OR_EXTERNAL_CORRELATION_KIND_OPERATOR, 4242));
  orCollectiveConfig config = allReduceConfig(addOne, &count);
  ASSERT_OR(orLaunchCollective(&config, stream));
  ASSERT_OR(orActivityPopExternalCorrelationId(OR_EXTERNAL_CORRELATION_KIND_OPERATOR, nullptr));
  ASSERT_OR(orStreamSynchronize(stream));
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();

  const auto comms = collector.records<orActivityCommunication>(OR_ACTIVITY_KIND_COMMUNICATION);
  ASSERT_EQ(comms.size(), 1u);
  const orActivityCommunication& c = comms[0];
  EXPECT_EQ(c.header.size, sizeof(orActivityCommunication));
  EXPECT_STREQ(c.name, "openregComm_AllReduce_Sum_f32");
  EXPECT_STREQ(c.collective, "allreduce");
  EXPECT_STREQ(c.dataType, "f32");
  EXPECT_STREQ(c.groupName, "0");
  EXPECT_EQ(c.count, 1024u);
  EXPECT_EQ(c.bytes, 4096u);
  EXPECT_EQ(c.sequence, 7u);
  EXPECT_EQ(c.groupSize, 2u);
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.peer, -1);
  EXPECT_EQ(c.device, 0);
  EXPECT_EQ(c.streamId, streamId);
  EXPECT_EQ(c.status, orSuccess);
  EXPECT_LE(c.start, c.end);
  EXPECT_TRUE(collector.records<orActivityKernel>(OR_ACTIVITY_KIND_KERNEL).empty()) << "not also a kernel";

  const auto runtime = collector.records<orActivityRuntime>(OR_ACTIVITY_KIND_RUNTIME);
  int launches = 0;
  for (const auto& r : runtime) {
    if (r.apiId != OR_API_LAUNCH_COLLECTIVE) continue;
    ++launches;
    EXPECT_EQ(r.correlationId, c.correlationId);
    EXPECT_STREQ(r.name, "orLaunchCollective");
  }
  EXPECT_EQ(launches, 1);
  int linked = 0;
  for (const auto& e : collector.records<orActivityExternalCorrelation>(OR_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
    linked += e.correlationId == c.correlationId && e.externalId == 4242;
  }
  EXPECT_EQ(linked, 1);
  ASSERT_OR(orStreamDestroy(stream));
}
