#include "backend/Stream.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "backend/Check.h"
#include "backend/Device.h"

namespace openreg::backend {

namespace {

constexpr int kStreamsPerPool = 32;
constexpr int kMaxPriorityLevels = 8;

struct Pool {
  std::once_flag created;
  std::vector<c10::StreamId> ids;
  std::atomic<uint32_t> next{0};
};

struct DeviceStreams {
  std::once_flag defaultCreated;
  orStream_t defaultHandle = nullptr;
  // defaultHandle once created: read without call_once on the launch path.
  std::atomic<orStream_t> defaultReady{nullptr};
  c10::StreamId defaultId = 1;
  std::shared_mutex mutex;
  std::unordered_map<c10::StreamId, orStream_t> byId;
  std::array<Pool, kMaxPriorityLevels> pools;
};

std::array<DeviceStreams, kMaxDevices>& allDevices() {
  // Leaked: streams outlive static destruction (tensors freed at exit).
  static auto* devices = new std::array<DeviceStreams, kMaxDevices>();
  return *devices;
}

c10::StreamId runtimeStreamId(orStream_t handle) {
  uint64_t id = 0;
  OPENREG_CHECK(orStreamGetId(handle, &id));
  return static_cast<c10::StreamId>(id);
}

DeviceStreams& initializedDevice(c10::DeviceIndex device) {
  checkNotForkedChild();
  checkDeviceIndex(device);
  DeviceStreams& d = allDevices()[device];
  std::call_once(d.defaultCreated, [&] {
    OPENREG_CHECK(orDeviceGetDefaultStream(device, &d.defaultHandle));
    d.defaultId = runtimeStreamId(d.defaultHandle);
    std::unique_lock lock(d.mutex);
    d.byId[d.defaultId] = d.defaultHandle;
    d.defaultReady.store(d.defaultHandle, std::memory_order_release);
  });
  return d;
}

c10::DeviceIndex resolve(c10::DeviceIndex device) { return device < 0 ? currentDevice() : device; }

// Per thread and device; id 0 means "not set", i.e. the default stream.
struct CurrentStream {
  c10::StreamId id = 0;
  orStream_t handle = nullptr;
};
thread_local std::array<CurrentStream, kMaxDevices> tlsCurrent;

}  // namespace

std::pair<int, int> streamPriorityRange() {
  static const std::pair<int, int> kRange = [] {
    int least = 0, greatest = 0;
    OPENREG_CHECK(orDeviceGetStreamPriorityRange(&least, &greatest));
    return std::make_pair(least, greatest);
  }();
  return kRange;
}

orStream_t nativeStream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "openreg: expected an openreg stream, got a stream on ", stream.device());
  DeviceStreams& d = initializedDevice(stream.device_index());
  if (stream.id() == 0 || stream.id() == d.defaultId) return d.defaultHandle;
  std::shared_lock lock(d.mutex);
  auto it = d.byId.find(stream.id());
  TORCH_CHECK(it != d.byId.end(), "openreg: unknown stream id ", stream.id(), " on device ", stream.device());
  return it->second;
}

c10::Stream defaultStream(c10::DeviceIndex device) {
  device = resolve(device);
  DeviceStreams& d = initializedDevice(device);
  return c10::Stream(c10::Stream::UNSAFE, makeDevice(device), d.defaultId);
}

c10::Stream streamFromPool(c10::DeviceIndex device, int priority) {
  device = resolve(device);
  DeviceStreams& d = initializedDevice(device);
  const auto [least, greatest] = streamPriorityRange();
  priority = std::min(least, std::max(greatest, priority));
  const int level = std::min(least - priority, kMaxPriorityLevels - 1);
  Pool& pool = d.pools[level];
  std::call_once(pool.created, [&] {
    DeviceScope scope(device);
    std::vector<std::pair<c10::StreamId, orStream_t>> created;
    for (int i = 0; i < kStreamsPerPool; ++i) {
      orStream_t handle = nullptr;
      OPENREG_CHECK(orStreamCreateWithPriority(&handle, 0, priority));
      created.emplace_back(runtimeStreamId(handle), handle);
    }
    std::unique_lock lock(d.mutex);
    for (auto& [id, handle] : created) {
      d.byId[id] = handle;
      pool.ids.push_back(id);
    }
  });
  const uint32_t slot = pool.next.fetch_add(1, std::memory_order_relaxed) % kStreamsPerPool;
  return c10::Stream(c10::Stream::UNSAFE, makeDevice(device), pool.ids[slot]);
}

c10::Stream currentStream(c10::DeviceIndex device) {
  device = resolve(device);
  checkDeviceIndex(device);
  const CurrentStream& current = tlsCurrent[device];
  if (current.id == 0) return defaultStream(device);
  return c10::Stream(c10::Stream::UNSAFE, makeDevice(device), current.id);
}

orStream_t currentNativeStream(c10::DeviceIndex device) {
  checkNotForkedChild();
  device = resolve(device);
  // Every launch and allocation comes here: a device that already has its
  // default stream was validated then.
  if (C10_LIKELY(device >= 0 && device < kMaxDevices)) {
    const CurrentStream& current = tlsCurrent[device];
    if (current.id != 0) return current.handle;
    if (orStream_t ready = allDevices()[device].defaultReady.load(std::memory_order_acquire)) return ready;
  }
  checkDeviceIndex(device);
  return initializedDevice(device).defaultHandle;
}

c10::Stream exchangeCurrentStream(const c10::Stream& stream) {
  const auto device = stream.device_index();
  c10::Stream previous = currentStream(device);
  orStream_t handle = nativeStream(stream);
  tlsCurrent[device] = CurrentStream{stream.id() == 0 ? initializedDevice(device).defaultId : stream.id(), handle};
  return previous;
}

void synchronizeStream(const c10::Stream& stream) { OPENREG_CHECK(orStreamSynchronize(nativeStream(stream))); }

}  // namespace openreg::backend
