// Kernel launch: arguments, ownership of user data, failures.
#include "test_support.h"

using openreg::testing::Gate;

namespace {

int failingKernel(void*, char* message, size_t capacity) {
  std::snprintf(message, capacity, "index 12 out of bounds for size 10");
  return 1;
}

int countingKernel(void* data, char*, size_t) {
  ++*static_cast<std::atomic<int>*>(data);
  return 0;
}

}  // namespace

TEST(Launch, RejectsMissingNameAndFunction) {
  EXPECT_EQ(orLaunchKernel(nullptr, nullptr, countingKernel, nullptr), orErrorInvalidValue);
  EXPECT_EQ(orLaunchKernel(nullptr, "no_function", nullptr, nullptr), orErrorInvalidValue);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("no_function"), std::string::npos);
  EXPECT_EQ(orLaunchKernelEx(nullptr, nullptr), orErrorInvalidValue);
  orLaunchConfig config{};
  config.structSize = 4;
  EXPECT_EQ(orLaunchKernelEx(&config, nullptr), orErrorInvalidValue);
}

TEST(Launch, CFunctionRunsOnTheStream) {
  std::atomic<int> count{0};
  for (int i = 0; i < 10; ++i) ASSERT_OR(orLaunchKernel(nullptr, "count", countingKernel, &count));
  ASSERT_OR(orDeviceSynchronize());
  EXPECT_EQ(count.load(), 10);
}

TEST(Launch, UserDataIsDestroyedExactlyOnce) {
  static std::atomic<int> destroyed{0};
  destroyed = 0;
  orLaunchConfig config{};
  config.structSize = sizeof(config);
  config.name = "owns_data";
  config.func = [](void*, char*, size_t) { return 0; };
  config.userData = new int(5);
  config.userDataDestroy = [](void* p) {
    delete static_cast<int*>(p);
    ++destroyed;
  };
  ASSERT_OR(orLaunchKernelEx(&config, nullptr));
  ASSERT_OR(orDeviceSynchronize());
  EXPECT_EQ(destroyed.load(), 1);
  // A rejected launch leaves ownership with the caller.
  auto forged = reinterpret_cast<orStream_t>(uintptr_t{0x5000000100000099});
  int local = 0;
  config.userData = &local;
  EXPECT_EQ(orLaunchKernelEx(&config, forged), orErrorInvalidResourceHandle);
  ASSERT_OR(orDeviceSynchronize());
  EXPECT_EQ(destroyed.load(), 1);
}

TEST(Launch, FailureSticksToItsStreamAndNamesTheKernel) {
  orStream_t failing, healthy;
  ASSERT_OR(orStreamCreate(&failing));
  ASSERT_OR(orStreamCreate(&healthy));
  ASSERT_OR(orLaunchKernel(failing, "gather_f32", failingKernel, nullptr));
  ASSERT_OR(openreg::launch(healthy, "fine", [] {}));
  EXPECT_OR(orStreamSynchronize(healthy)) << "other streams are unaffected";
  EXPECT_EQ(orStreamSynchronize(failing), orErrorLaunchFailure);
  const std::string message = orGetLastErrorMessage();
  EXPECT_NE(message.find("gather_f32"), std::string::npos) << message;
  EXPECT_NE(message.find("index 12 out of bounds"), std::string::npos) << message;
  // Reported once: the stream keeps working.
  EXPECT_OR(orStreamSynchronize(failing));
  std::atomic<int> count{0};
  ASSERT_OR(orLaunchKernel(failing, "count", countingKernel, &count));
  ASSERT_OR(orStreamSynchronize(failing));
  EXPECT_EQ(count.load(), 1);
  ASSERT_OR(orStreamDestroy(failing));
  ASSERT_OR(orStreamDestroy(healthy));
}

TEST(Launch, FailureSurfacesAtQueryDeviceSyncAndCopies) {
  ASSERT_OR(orLaunchKernel(nullptr, "bad_query", failingKernel, nullptr));
  orError_t result;
  while ((result = orStreamQuery(nullptr)) == orErrorNotReady) std::this_thread::yield();
  EXPECT_EQ(result, orErrorLaunchFailure);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("bad_query"), std::string::npos);

  ASSERT_OR(orLaunchKernel(nullptr, "bad_device_sync", failingKernel, nullptr));
  EXPECT_EQ(orDeviceSynchronize(), orErrorLaunchFailure);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("bad_device_sync"), std::string::npos);

  void* d = nullptr;
  ASSERT_OR(orMalloc(&d, 16));
  ASSERT_OR(orLaunchKernel(nullptr, "bad_before_copy", failingKernel, nullptr));
  char host[16];
  EXPECT_EQ(orMemcpyAsync(host, d, 16, orMemcpyDeviceToHost, nullptr), orErrorLaunchFailure);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("bad_before_copy"), std::string::npos);
  ASSERT_OR(orFree(d));
}

TEST(Launch, CppExceptionsBecomeFailures) {
  ASSERT_OR(openreg::launch(nullptr, "throws", [] { throw std::runtime_error("shape mismatch [3] vs [4]"); }));
  EXPECT_EQ(orDeviceSynchronize(), orErrorLaunchFailure);
  const std::string message = orGetLastErrorMessage();
  EXPECT_NE(message.find("throws"), std::string::npos);
  EXPECT_NE(message.find("shape mismatch [3] vs [4]"), std::string::npos);
}

TEST(Launch, BlockingCallsInsideAKernelAreRefused) {
  std::atomic<int> syncResult{-1}, freeResult{-1};
  ASSERT_OR(openreg::launch(nullptr, "reentrant", [&] {
    syncResult = orDeviceSynchronize();
    freeResult = orFree(reinterpret_cast<void*>(0x1));
  }));
  ASSERT_OR(orDeviceSynchronize());
  EXPECT_EQ(syncResult.load(), orErrorNotSupported);
  EXPECT_EQ(freeResult.load(), orErrorNotSupported);
}

TEST(Launch, KernelsSeeTheirDeviceAsCurrent) {
  int seen = -1;
  ASSERT_OR(orSetDevice(1));
  ASSERT_OR(openreg::launch(nullptr, "which_device", [&] { orGetDevice(&seen); }));
  ASSERT_OR(orDeviceSynchronize());
  ASSERT_OR(orSetDevice(0));
  EXPECT_EQ(seen, 1);
}

TEST(Launch, HostFunctionsRunInStreamOrder) {
  std::vector<int> order;
  ASSERT_OR(openreg::launch(nullptr, "first", [&] { order.push_back(1); }));
  ASSERT_OR(orLaunchHostFunc(
      nullptr, [](void* p) { static_cast<std::vector<int>*>(p)->push_back(2); }, &order));
  ASSERT_OR(openreg::launch(nullptr, "third", [&] { order.push_back(3); }));
  ASSERT_OR(orDeviceSynchronize());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(orLaunchHostFunc(nullptr, nullptr, nullptr), orErrorInvalidValue);
}

TEST(Launch, BoundedDeviceSynchronizeGivesUpAndKeepsTheFailure) {
  orStream_t failing, blocked;
  ASSERT_OR(orStreamCreate(&failing));
  ASSERT_OR(orStreamCreate(&blocked));
  // The failing stream comes first: a timeout on the blocked one must not
  // swallow the failure it already saw.
  ASSERT_OR(orLaunchKernel(failing, "gather_f32", failingKernel, nullptr));
  Gate gate;
  ASSERT_OR(openreg::launch(blocked, "stuck", [&] { gate.waitOpen(); }));
  int device = 0;
  ASSERT_OR(orGetDevice(&device));
  EXPECT_EQ(orDeviceSynchronizeWithTimeout(device, 20), orErrorTimeout);
  const std::string message = orGetLastErrorMessage();
  EXPECT_NE(message.find("still busy after 20 ms"), std::string::npos) << message;
  EXPECT_EQ(orStreamQuery(blocked), orErrorNotReady) << "the work stays queued";
  gate.open();
  EXPECT_EQ(orDeviceSynchronizeWithTimeout(device, 60000), orErrorLaunchFailure);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("gather_f32"), std::string::npos);
  EXPECT_OR(orDeviceSynchronizeWithTimeout(device, 60000));
  EXPECT_EQ(orDeviceSynchronizeWithTimeout(99, 1), orErrorInvalidDevice);
  ASSERT_OR(orStreamDestroy(failing));
  ASSERT_OR(orStreamDestroy(blocked));
}
