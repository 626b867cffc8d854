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

namespace {

// What a staging collective was given and what its copies returned.
struct StagedCopies {
  void* device = nullptr;
  void* pinned = nullptr;
  size_t bytes = 0;
  orStream_t copyStream = nullptr;
  orStream_t ownStream = nullptr;
  std::vector<orError_t> results;
};

// Stages device -> pinned, doubles there, stages back, then tries the misuses.
int stageTwice(void* data, char*, size_t) {
  auto& s = *static_cast<StagedCopies*>(data);
  s.results.push_back(orCollectiveCopy(s.pinned, s.device, s.bytes, orMemcpyDeviceToHost, s.copyStream));
  for (size_t i = 0; i < s.bytes; ++i) static_cast<uint8_t*>(s.pinned)[i] *= 2;
  s.results.push_back(orCollectiveCopy(s.device, s.pinned, s.bytes, orMemcpyHostToDevice, s.copyStream));
  s.results.push_back(orCollectiveCopy(s.device, s.pinned, s.bytes, orMemcpyHostToDevice, s.ownStream));
  s.results.push_back(orCollectiveCopy(s.device, s.pinned, s.bytes, orMemcpyDeviceToDevice, s.copyStream));
  s.results.push_back(orCollectiveCopy(s.pinned, s.device, s.bytes + 1, orMemcpyDeviceToHost, s.copyStream));
  s.results.push_back(orCollectiveCopy(s.device, s.pinned, s.bytes, orMemcpyDeviceToHost, s.copyStream));
  s.results.push_back(orCollectiveCopy(s.pinned, s.device, s.bytes, orMemcpyDeviceToHost, nullptr));
  return 0;
}

}  // namespace

TEST(CollectiveCopy, RefusedOutsideACollective) {
  void* device = nullptr;
  void* pinned = nullptr;
  ASSERT_OR(orMalloc(&device, 64));
  ASSERT_OR(orMallocHost(&pinned, 64));
  orStream_t stream;
  ASSERT_OR(orStreamCreate(&stream));
  EXPECT_EQ(orCollectiveCopy(pinned, device, 64, orMemcpyDeviceToHost, stream), orErrorInvalidValue);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("outside a collective's function"), std::string::npos);
  ASSERT_OR(orStreamDestroy(stream));
  ASSERT_OR(orFreeHost(pinned));
  ASSERT_OR(orFree(device));
}

TEST(CollectiveCopy, CopiesAndRecordsOnTheCopyStreamJoinedToTheCollectivesOp) {
  ActivityCollector collector;
  collector.enableAll();
  ASSERT_OR(orActivityEnableTracing());
  StagedCopies staged;
  staged.bytes = 256;
  ASSERT_OR(orMalloc(&staged.device, staged.bytes));
  ASSERT_OR(orMallocHost(&staged.pinned, staged.bytes));
  std::vector<uint8_t> values(staged.bytes);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint8_t>(i % 100);
  ASSERT_OR(orMemcpy(staged.device, values.data(), staged.bytes, orMemcpyHostToDevice));
  ASSERT_OR(orStreamCreate(&staged.ownStream));
  ASSERT_OR(orStreamCreate(&staged.copyStream));
  uint64_t copyStreamId = 0;
  ASSERT_OR(orStreamGetId(staged.copyStream, &copyStreamId));
  orCollectiveConfig config = allReduceConfig(stageTwice, &staged);
  constexpr uint64_t kOpId = 4242;
  ASSERT_OR(orActivityPushExternalCorrelationId(OR_EXTERNAL_CORRELATION_KIND_OPERATOR, kOpId));
  ASSERT_OR(orLaunchCollective(&config, staged.ownStream));
  uint64_t popped = 0;
  ASSERT_OR(orActivityPopExternalCorrelationId(OR_EXTERNAL_CORRELATION_KIND_OPERATOR, &popped));
  ASSERT_OR(orStreamSynchronize(staged.ownStream));
  ASSERT_OR(orActivityDisableTracing());
  collector.flush();

  const std::vector<orError_t> expected{orSuccess,           orSuccess,           orErrorInvalidValue,
                                        orErrorInvalidValue, orErrorInvalidValue, orErrorInvalidValue,
                                        orErrorInvalidValue};
  EXPECT_EQ(staged.results, expected);
  std::vector<uint8_t> back(staged.bytes);
  ASSERT_OR(orMemcpy(back.data(), staged.device, staged.bytes, orMemcpyDeviceToHost));
  for (size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], values[i] * 2) << i;

  const auto comms = collector.records<orActivityCommunication>(OR_ACTIVITY_KIND_COMMUNICATION);
  ASSERT_EQ(comms.size(), 1u);
  std::vector<orActivityMemcpy> copies;
  for (const auto& m : collector.records<orActivityMemcpy>(OR_ACTIVITY_KIND_MEMCPY)) {
    if (m.streamId == copyStreamId) copies.push_back(m);
  }
  ASSERT_EQ(copies.size(), 2u) << "one record per successful copy, none for refused ones";
  // Each copy has its own correlation id, joined to the op that queued the
  // collective (and to nothing else) by external correlation.
  std::map<uint64_t, std::vector<uint64_t>> opsByCorrelation;
  for (const auto& e : collector.records<orActivityExternalCorrelation>(OR_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
    opsByCorrelation[e.correlationId].push_back(e.externalId);
  }
  EXPECT_EQ(opsByCorrelation[comms[0].correlationId], std::vector<uint64_t>{kOpId});
  EXPECT_NE(copies[0].correlationId, copies[1].correlationId);
  for (const auto& m : copies) {
    EXPECT_NE(m.correlationId, comms[0].correlationId);
    EXPECT_NE(m.correlationId, 0u);
    EXPECT_EQ(opsByCorrelation[m.correlationId], std::vector<uint64_t>{kOpId});
  }
  EXPECT_EQ(copies[0].copyKind, OR_ACTIVITY_MEMCPY_DTOH);
  EXPECT_EQ(copies[1].copyKind, OR_ACTIVITY_MEMCPY_HTOD);
  for (const auto& m : copies) {
    EXPECT_EQ(m.streamId, copyStreamId);
    EXPECT_EQ(m.bytes, staged.bytes);
    EXPECT_EQ(m.device, 0);
    EXPECT_EQ(m.isAsync, 1);
    // Inside the collective's span: they ran while its func did.
    EXPECT_GE(m.start, comms[0].start);
    EXPECT_LE(m.end, comms[0].end);
  }
  EXPECT_LE(copies[0].end, copies[1].start);
  ASSERT_OR(orStreamDestroy(staged.copyStream));
  ASSERT_OR(orStreamDestroy(staged.ownStream));
  ASSERT_OR(orFreeHost(staged.pinned));
  ASSERT_OR(orFree(staged.device));
}

TEST(CollectiveCopy, CopiesWithoutRecordsOutsideTheWindow) {
  StagedCopies staged;
  staged.bytes = 32;
  ASSERT_OR(orMalloc(&staged.device, staged.bytes));
  ASSERT_OR(orMallocHost(&staged.pinned, staged.bytes));
  ASSERT_OR(orMemset(staged.device, 3, staged.bytes));
  ASSERT_OR(orStreamCreate(&staged.ownStream));
  ASSERT_OR(orStreamCreate(&staged.copyStream));
  orCollectiveConfig config = allReduceConfig(stageTwice, &staged);
  ASSERT_OR(orLaunchCollective(&config, staged.ownStream));
  ASSERT_OR(orStreamSynchronize(staged.ownStream));
  ASSERT_EQ(staged.results.size(), 7u);
  EXPECT_EQ(staged.results[0], orSuccess);
  EXPECT_EQ(staged.results[1], orSuccess);
  uint8_t back[32];
  ASSERT_OR(orMemcpy(back, staged.device, sizeof(back), orMemcpyDeviceToHost));
  for (uint8_t b : back) ASSERT_EQ(b, 6);
  ASSERT_OR(orStreamDestroy(staged.copyStream));
  ASSERT_OR(orStreamDestroy(staged.ownStream));
  ASSERT_OR(orFreeHost(staged.pinned));
  ASSERT_OR(orFree(staged.device));
}
