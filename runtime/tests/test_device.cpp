// Devices: count, current device, properties, configuration.
#include "test_support.h"

using openreg::testing::isChild;
using openreg::testing::rerunWithEnvironment;

TEST(Device, DefaultCountIsTwo) {
  if (isChild()) GTEST_SKIP();
  int count = 0;
  ASSERT_OR(orGetDeviceCount(&count));
  EXPECT_EQ(count, 2);
}

TEST(Device, CurrentDeviceIsPerThread) {
  ASSERT_OR(orSetDevice(1));
  int seenByOtherThread = -1;
  std::thread([&] { orGetDevice(&seenByOtherThread); }).join();
  EXPECT_EQ(seenByOtherThread, 0);
  int mine = -1;
  ASSERT_OR(orGetDevice(&mine));
  EXPECT_EQ(mine, 1);
  ASSERT_OR(orSetDevice(0));
}

TEST(Device, InvalidIndexIsReportedWithTheRange) {
  EXPECT_EQ(orSetDevice(7), orErrorInvalidDevice);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("device 7 is out of range"), std::string::npos)
      << orGetLastErrorMessage();
  EXPECT_EQ(orSetDevice(-1), orErrorInvalidDevice);
  orDeviceProp prop;
  EXPECT_EQ(orGetDeviceProperties(&prop, 2), orErrorInvalidDevice);
  EXPECT_EQ(orGetDeviceProperties(nullptr, 0), orErrorInvalidValue);
  int device = -1;
  ASSERT_OR(orGetDevice(&device));
  EXPECT_EQ(device, 0) << "a failed orSetDevice must not change the current device";
}

TEST(Device, PropertiesDescribeTheDevice) {
  orDeviceProp prop;
  ASSERT_OR(orGetDeviceProperties(&prop, 0));
  EXPECT_GT(std::strlen(prop.name), 0u);
  EXPECT_EQ(prop.totalGlobalMem, size_t{8} << 30);
  EXPECT_GT(prop.multiProcessorCount, 0);
  EXPECT_GT(prop.clockRate, 0);
  EXPECT_EQ(prop.streamPriorityGreatest, -1);
  EXPECT_EQ(prop.streamPriorityLeast, 0);
}

TEST(Device, ErrorNamesAndStrings) {
  for (orError_t e : {orSuccess, orErrorInvalidValue, orErrorMemoryAllocation, orErrorLaunchFailure, orErrorTimeout}) {
    EXPECT_NE(std::string(orGetErrorName(e)), "orErrorUnrecognized");
    EXPECT_GT(std::strlen(orGetErrorString(e)), 0u);
  }
  EXPECT_EQ(std::string(orGetErrorName(static_cast<orError_t>(12345))), "orErrorUnrecognized");
  int version = 0;
  ASSERT_OR(orRuntimeGetVersion(&version));
  EXPECT_EQ(version, OPENREG_RUNTIME_VERSION);
}

TEST(Device, CountAndMemoryComeFromTheEnvironment) {
  if (isChild()) GTEST_SKIP();
  EXPECT_EQ(
      rerunWithEnvironment("Device.ChildSeesFourDevicesOf1G", {"OPENREG_DEVICE_COUNT=4", "OPENREG_DEVICE_MEMORY=1G"}),
      0);
}

TEST(Device, ChildSeesFourDevicesOf1G) {
  if (!isChild()) GTEST_SKIP() << "runs in a child process";
  int count = 0;
  ASSERT_OR(orGetDeviceCount(&count));
  EXPECT_EQ(count, 4);
  orDeviceProp prop;
  ASSERT_OR(orGetDeviceProperties(&prop, 3));
  EXPECT_EQ(prop.totalGlobalMem, size_t{1} << 30);
}

TEST(Device, MalformedConfigurationFailsEveryCallWithTheVariableName) {
  if (isChild()) GTEST_SKIP();
  EXPECT_EQ(rerunWithEnvironment("Device.ChildRejectsBadCount", {"OPENREG_DEVICE_COUNT=banana"}), 0);
}

TEST(Device, ChildRejectsBadCount) {
  if (!isChild()) GTEST_SKIP() << "runs in a child process";
  int count = 0;
  EXPECT_EQ(orGetDeviceCount(&count), orErrorInitializationError);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("OPENREG_DEVICE_COUNT"), std::string::npos);
  void* p = nullptr;
  EXPECT_EQ(orMalloc(&p, 16), orErrorInitializationError);
}
