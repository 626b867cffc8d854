// Memory: capacity, out of memory, double free, pinned memory, attributes,
// copies and memsets.
#include "test_support.h"

using openreg::testing::isChild;
using openreg::testing::rerunWithEnvironment;

TEST(Memory, AllocateUseAndFree) {
  void* p = nullptr;
  ASSERT_OR(orMalloc(&p, 1000));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  std::vector<int> host(250, 7), back(250, 0);
  ASSERT_OR(orMemcpy(p, host.data(), 1000, orMemcpyHostToDevice));
  ASSERT_OR(orMemcpy(back.data(), p, 1000, orMemcpyDeviceToHost));
  EXPECT_EQ(back, host);
  ASSERT_OR(orFree(p));
}

TEST(Memory, ZeroBytesGivesNull) {
  void* p = reinterpret_cast<void*>(1);
  ASSERT_OR(orMalloc(&p, 0));
  EXPECT_EQ(p, nullptr);
  EXPECT_OR(orFree(nullptr));
}

TEST(Memory, DoubleFreeAndForeignPointersAreErrors) {
  void* p = nullptr;
  ASSERT_OR(orMalloc(&p, 4096));
  EXPECT_EQ(orFree(static_cast<char*>(p) + 16), orErrorInvalidDevicePointer);
  ASSERT_OR(orFree(p));
  EXPECT_EQ(orFree(p), orErrorInvalidDevicePointer);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("already freed"), std::string::npos);
  int onStack = 0;
  EXPECT_EQ(orFree(&onStack), orErrorInvalidDevicePointer);
  EXPECT_EQ(orFreeHost(&onStack), orErrorInvalidHostPointer);
  void* pinned = nullptr;
  ASSERT_OR(orMallocHost(&pinned, 100));
  EXPECT_EQ(orFree(pinned), orErrorInvalidDevicePointer) << "pinned memory is not device memory";
  ASSERT_OR(orFreeHost(pinned));
  EXPECT_EQ(orFreeHost(pinned), orErrorInvalidHostPointer);
}

TEST(Memory, CapacityIsEnforcedPerDevice) {
  if (isChild()) GTEST_SKIP();
  EXPECT_EQ(rerunWithEnvironment("Memory.ChildRunsOutOfMemory", {"OPENREG_DEVICE_MEMORY=1M"}), 0);
}

TEST(Memory, ChildRunsOutOfMemory) {
  if (!isChild()) GTEST_SKIP() << "runs in a child process";
  void* a = nullptr;
  ASSERT_OR(orMalloc(&a, 600 * 1024));
  void* b = nullptr;
  EXPECT_EQ(orMalloc(&b, 600 * 1024), orErrorMemoryAllocation);
  EXPECT_EQ(b, nullptr);
  const std::string message = orGetLastErrorMessage();
  EXPECT_NE(message.find("device 0"), std::string::npos) << message;
  EXPECT_NE(message.find("requested 614400 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("bytes free"), std::string::npos) << message;
  size_t freeBytes = 0, total = 0;
  ASSERT_OR(orMemGetInfo(&freeBytes, &total));
  EXPECT_EQ(total, size_t{1} << 20);
  EXPECT_EQ(freeBytes, total - 600 * 1024);
  // The other device has its own capacity.
  ASSERT_OR(orSetDevice(1));
  ASSERT_OR(orMalloc(&b, 600 * 1024));
  ASSERT_OR(orFree(b));
  ASSERT_OR(orSetDevice(0));
  // Freeing gives the capacity back.
  ASSERT_OR(orFree(a));
  ASSERT_OR(orMalloc(&b, 600 * 1024));
  ASSERT_OR(orFree(b));
  EXPECT_EQ(orMalloc(&b, size_t{1} << 40), orErrorMemoryAllocation);
}

TEST(Memory, PointerAttributes) {
  void* device = nullptr;
  void* pinned = nullptr;
  ASSERT_OR(orSetDevice(1));
  ASSERT_OR(orMalloc(&device, 1024));
  ASSERT_OR(orSetDevice(0));
  ASSERT_OR(orMallocHost(&pinned, 64));
  orPointerAttributes attributes;
  ASSERT_OR(orPointerGetAttributes(&attributes, static_cast<char*>(device) + 100));
  EXPECT_EQ(attributes.type, orMemoryTypeDevice);
  EXPECT_EQ(attributes.device, 1);
  EXPECT_EQ(attributes.basePointer, device);
  EXPECT_EQ(attributes.allocationSize, 1024u);
  ASSERT_OR(orPointerGetAttributes(&attributes, pinned));
  EXPECT_EQ(attributes.type, orMemoryTypeHost);
  EXPECT_EQ(attributes.device, -1);
  int local = 0;
  ASSERT_OR(orPointerGetAttributes(&attributes, &local));
  EXPECT_EQ(attributes.type, orMemoryTypeUnregistered);
  ASSERT_OR(orFree(device));
  ASSERT_OR(orPointerGetAttributes(&attributes, device));
  EXPECT_EQ(attributes.type, orMemoryTypeUnregistered) << "a freed pointer is no longer device memory";
  ASSERT_OR(orFreeHost(pinned));
}

TEST(Memory, CopiesCheckKindsAndBounds) {
  void* d = nullptr;
  ASSERT_OR(orMalloc(&d, 256));
  std::vector<char> host(512);
  EXPECT_EQ(orMemcpy(d, host.data(), 512, orMemcpyHostToDevice), orErrorInvalidValue);
  EXPECT_NE(std::string(orGetLastErrorMessage()).find("runs past its allocation"), std::string::npos);
  EXPECT_EQ(orMemcpy(host.data(), d, 16, orMemcpyHostToDevice), orErrorInvalidValue);
  EXPECT_EQ(orMemcpy(d, host.data(), 16, orMemcpyDeviceToHost), orErrorInvalidValue);
  EXPECT_EQ(orMemcpy(d, host.data(), 16, static_cast<orMemcpyKind>(42)), orErrorInvalidValue);
  EXPECT_EQ(orMemcpy(nullptr, host.data(), 16, orMemcpyHostToDevice), orErrorInvalidValue);
  ASSERT_OR(orMemcpy(d, host.data(), 16, orMemcpyDefault));
  ASSERT_OR(orFree(d));
}

TEST(Memory, DeviceToDeviceWithinAndAcrossDevices) {
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  ASSERT_OR(orMalloc(&a, 4096));
  ASSERT_OR(orMalloc(&b, 4096));
  ASSERT_OR(orSetDevice(1));
  ASSERT_OR(orMalloc(&c, 4096));
  orStream_t stream;
  ASSERT_OR(orStreamCreate(&stream));
  std::vector<uint8_t> host(4096);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 7);
  ASSERT_OR(orMemcpy(a, host.data(), 4096, orMemcpyHostToDevice));
  // Both on one stream: in order, so the second copy reads what the first wrote.
  ASSERT_OR(orMemcpyAsync(b, a, 4096, orMemcpyDeviceToDevice, stream));
  ASSERT_OR(orMemcpyAsync(c, b, 4096, orMemcpyDeviceToDevice, stream));
  std::vector<uint8_t> back(4096);
  ASSERT_OR(orMemcpyAsync(back.data(), c, 4096, orMemcpyDeviceToHost, stream));
  EXPECT_EQ(back, host);
  ASSERT_OR(orStreamDestroy(stream));
  ASSERT_OR(orFree(c));
  ASSERT_OR(orSetDevice(0));
  ASSERT_OR(orFree(a));
  ASSERT_OR(orFree(b));
}

TEST(Memory, AsyncCopyFromPageableMemoryMayReuseTheSourceAtOnce) {
  void* d = nullptr;
  ASSERT_OR(orMalloc(&d, 64));
  openreg::testing::Gate gate;
  ASSERT_OR(openreg::launch(nullptr, "hold_stream", [&] { gate.waitOpen(); }));
  std::vector<int> source(16, 1);
  ASSERT_OR(orMemcpyAsync(d, source.data(), 64, orMemcpyHostToDevice, nullptr));
  std::fill(source.begin(), source.end(), 2);  // the copy has not run yet
  gate.open();
  std::vector<int> back(16);
  ASSERT_OR(orMemcpy(back.data(), d, 64, orMemcpyDeviceToHost));
  EXPECT_EQ(back, std::vector<int>(16, 1));
  ASSERT_OR(orFree(d));
}

TEST(Memory, MemsetsFillBytesAndPatterns) {
  void* d = nullptr;
  ASSERT_OR(orMalloc(&d, 64));
  ASSERT_OR(orMemset(d, 0xAB, 64));
  std::vector<uint8_t> bytes(64);
  ASSERT_OR(orMemcpy(bytes.data(), d, 64, orMemcpyDeviceToHost));
  EXPECT_EQ(bytes, std::vector<uint8_t>(64, 0xAB));
  const float one = 1.0f;
  uint32_t bits;
  std::memcpy(&bits, &one, 4);
  ASSERT_OR(orMemsetD32Async(d, bits, 16, nullptr));
  std::vector<float> floats(16);
  ASSERT_OR(orMemcpy(floats.data(), d, 64, orMemcpyDeviceToHost));
  EXPECT_EQ(floats, std::vector<float>(16, 1.0f));
  ASSERT_OR(orMemsetD16Async(d, 0x1234, 32, nullptr));
  std::vector<uint16_t> halves(32);
  ASSERT_OR(orMemcpy(halves.data(), d, 64, orMemcpyDeviceToHost));
  EXPECT_EQ(halves, std::vector<uint16_t>(32, 0x1234));
  EXPECT_EQ(orMemsetD32Async(static_cast<char*>(d) + 2, 0, 4, nullptr), orErrorInvalidValue);
  EXPECT_EQ(orMemsetAsync(d, 0, 65, nullptr), orErrorInvalidValue);
  int host = 0;
  EXPECT_EQ(orMemset(&host, 0, 4), orErrorInvalidValue);
  ASSERT_OR(orFree(d));
}

TEST(Memory, FreeWaitsForAPeerCopyQueuedOnAnotherDevice) {
  void* source = nullptr;
  ASSERT_OR(orSetDevice(0));
  ASSERT_OR(orMalloc(&source, 4096));
  std::vector<uint8_t> host(4096, 0x5a);
  ASSERT_OR(orMemcpy(source, host.data(), host.size(), orMemcpyHostToDevice));
  ASSERT_OR(orSetDevice(1));
  void* target = nullptr;
  ASSERT_OR(orMalloc(&target, 4096));
  orStream_t peerStream;
  ASSERT_OR(orStreamCreate(&peerStream));
  openreg::testing::Gate gate;
  ASSERT_OR(openreg::launch(peerStream, "held", [&] { gate.waitOpen(); }));
  // Device 1's stream reads device 0's memory once the gate opens.
  ASSERT_OR(orMemcpyAsync(target, source, 4096, orMemcpyDeviceToDevice, peerStream));
  std::atomic<bool> freed{false};
  std::thread freer([&] {
    EXPECT_OR(orFree(source));
    freed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(freed.load()) << "orFree returned while a peer copy still had to read the memory";
  gate.open();
  freer.join();
  std::vector<uint8_t> back(4096);
  ASSERT_OR(orMemcpy(back.data(), target, back.size(), orMemcpyDeviceToHost));
  EXPECT_EQ(back, host);
  ASSERT_OR(orStreamDestroy(peerStream));
  ASSERT_OR(orFree(target));
  ASSERT_OR(orSetDevice(0));
}
