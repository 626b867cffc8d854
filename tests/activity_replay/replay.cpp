// A second, minimal implementation of openreg/activity.h, for tests only.
//
// It has no device: it writes the records a test asks for, so the Kineto
// plugin can be driven, unchanged, through OPENREG_ACTIVITY_LIBRARY with
// situations the real runtime rarely produces on demand (skewed and drifting
// clocks, refused buffers, runtime-side drops, unknown record kinds, records
// from newer runtimes, several devices and streams).
//
// Two ways to feed it:
//   - a scenario file (OPENREG_REPLAY_SCENARIO, format in README.md) replayed
//     into every tracing window, with times relative to the window's opening;
//   - live submissions through orReplaySubmit() (see replay.h), stamped with
//     the calling thread's external correlation ids like a real launch.
//
// Built with OPENREG_REPLAY_PARTIAL it omits two required functions, to test
// how the plugin handles a library that lacks symbols; with
// OPENREG_REPLAY_MINIMAL it omits every optional one (orActivityGetStats,
// orGetErrorName, the three marker functions), which must not matter.
// orActivityRegisterTimestampCallback, also optional, is never implemented:
// host records are CLOCK_REALTIME in every variant.
#include "replay.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "openreg/activity.h"

#define REPLAY_API extern "C" __attribute__((visibility("default")))

namespace {

uint64_t hostNow() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

uint32_t currentThreadId() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

// Correlation ids far above int32: the plugin must remap, never truncate.
constexpr uint64_t kFirstCorrelationId = (1ull << 40) + 1;
constexpr uint64_t kClockSyncPeriodNs = 10'000'000;
constexpr uint64_t kLaunchLatencyNs = 5'000;

struct Clock {
  long double offsetNs = 1e12L;
  long double skewPpm = 0;
  long double driftPpmPerS = 0;
};

struct StreamInfo {
  int32_t priority = 0;
  bool isDefault = false;
};

struct Device {
  std::string name;
  Clock clock;
  std::map<uint64_t, StreamInfo> streams;
};

// One line of a scenario file.
struct ScenarioItem {
  std::string type;
  std::map<std::string, std::string> args;

  std::string str(const std::string& key, const std::string& fallback = "") const {
    auto it = args.find(key);
    return it != args.end() ? it->second : fallback;
  }
  long double num(const std::string& key, long double fallback = 0) const {
    auto it = args.find(key);
    return it != args.end() ? std::strtold(it->second.c_str(), nullptr) : fallback;
  }
  bool has(const std::string& key) const { return args.count(key) != 0; }
};

// counter= names of COUNTER items, as the plugin's metric names.
uint32_t counterKind(const std::string& name) {
  if (name == "memory_allocated") return OR_COUNTER_MEMORY_ALLOCATED;
  if (name == "memory_reserved") return OR_COUNTER_MEMORY_RESERVED;
  if (name == "queued_tasks") return OR_COUNTER_QUEUED_TASKS;
  if (name == "copy_bytes") return OR_COUNTER_COPY_BYTES;
  return static_cast<uint32_t>(std::strtoul(name.c_str(), nullptr, 10));  // a number: any kind, also unknown ones
}

struct Buffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t used = 0;
};

thread_local bool tInCallback = false;
thread_local std::vector<uint64_t> tExternalStacks[OR_EXTERNAL_CORRELATION_KIND_COUNT];

class Replay {
 public:
  static Replay& get() {
    static Replay* replay = new Replay();  // leaked: used until process exit
    return *replay;
  }

  std::mutex mutex;
  std::atomic<bool> tracing{false};
  bool enabledKinds[OR_ACTIVITY_KIND_COUNT] = {};
  orActivityBufferRequestedFn requested = nullptr;
  orActivityBufferCompletedFn completed = nullptr;
  void* userData = nullptr;
  Buffer current;
  std::vector<Buffer> full;
  std::map<int32_t, uint64_t> dropped;  // by device; -1 for host-only records
  uint64_t droppedTotal = 0;
  orActivityStats stats{};
  std::vector<Device> devices;
  std::vector<ScenarioItem> scenario;
  std::string scenarioError;
  uint64_t t0 = hostNow();
  uint64_t windowOpenedAt = 0;
  uint64_t windowClosedAt = 0;
  uint64_t lastSampleAt = 0;
  bool scenarioPending = false;
  uint64_t nextCorrelation = kFirstCorrelationId;
  std::map<std::pair<int32_t, uint64_t>, uint64_t> streamBusyUntil;  // host ns
  std::unordered_set<std::string> names;                             // interned: records point into it
  uint32_t version = OR_ACTIVITY_API_VERSION;
  uint32_t statsSize = sizeof(orActivityStats);  // what orActivityGetStats fills: less for an older runtime
  uint64_t sampleUncertaintyNs = 0;

  uint64_t deviceTime(int device, uint64_t host) const {
    const Clock& c = devices.at(static_cast<size_t>(device)).clock;
    long double tau = static_cast<long double>(host) - static_cast<long double>(t0);
    long double value = c.offsetNs + tau + c.skewPpm * 1e-6L * tau + 0.5L * c.driftPpmPerS * 1e-6L * tau * tau / 1e9L;
    return static_cast<uint64_t>(std::llround(value));
  }

  const char* intern(const std::string& s) { return names.insert(s).first->c_str(); }

  void ensureStream(int device, uint64_t stream) {
    if (device < 0 || static_cast<size_t>(device) >= devices.size()) return;
    auto& streams = devices[static_cast<size_t>(device)].streams;
    if (!streams.count(stream)) streams[stream] = StreamInfo{0, stream == 1};
  }

  static size_t statsSlot(uint32_t kind) { return kind < OR_ACTIVITY_STATS_KINDS ? kind : 0; }

  // Caller holds the mutex.
  void write(const void* record, size_t size, int32_t device) {
    if (current.data == nullptr || current.size - current.used < size) {
      if (current.data != nullptr) {
        full.push_back(current);
      }
      current = Buffer{};
      uint8_t* data = nullptr;
      size_t bytes = 0;
      ++stats.buffersRequested;
      if (requested != nullptr) {
        requested(userData, &data, &bytes);
      }
      if (data == nullptr || bytes < size) {
        ++stats.buffersRefused;
        ++dropped[device];
        ++droppedTotal;
        ++stats.recordsDropped;
        ++stats.recordsDroppedByKind[statsSlot(static_cast<const orActivityRecord*>(record)->kind)];
        return;
      }
      current = Buffer{data, bytes, 0};
    }
    std::memcpy(current.data + current.used, record, size);
    current.used += size;
    ++stats.recordsWritten;
  }

  template <typename T>
  void writeRecord(T& record, orActivityKind kind, int32_t device, size_t padding = 0) {
    if (!enabledKinds[kind]) return;
    record.header.kind = kind;
    record.header.size = static_cast<uint32_t>(sizeof(T) + padding);
    if (padding == 0) {
      write(&record, sizeof(T), device);
    } else {
      // A record from a "newer runtime": known fields, then appended ones.
      std::vector<uint8_t> bytes(sizeof(T) + padding, 0xAB);
      std::memcpy(bytes.data(), &record, sizeof(T));
      write(bytes.data(), bytes.size(), device);
    }
  }

  void writeClockSample(int device, uint64_t host) {
    orActivityClockSync sync{};
    sync.device = device;
    sync.hostTimestamp = host;
    sync.deviceTimestamp = deviceTime(device, host);
    sync.uncertainty = sampleUncertaintyNs;
    writeRecord(sync, OR_ACTIVITY_KIND_CLOCK_SYNC, device);
  }

  // The periodic samples a real runtime writes while the window is open.
  void writeClockSamplesUntil(uint64_t until) {
    while (lastSampleAt + kClockSyncPeriodNs < until) {
      lastSampleAt += kClockSyncPeriodNs;
      for (size_t d = 0; d < devices.size(); ++d) writeClockSample(static_cast<int>(d), lastSampleAt);
    }
    if (until > lastSampleAt) {
      lastSampleAt = until;
      for (size_t d = 0; d < devices.size(); ++d) writeClockSample(static_cast<int>(d), until);
    }
  }

  void writeExternal(uint64_t correlationId, uint64_t opId, uint64_t userId) {
    const uint64_t ids[] = {0, opId, userId};
    for (uint32_t kind = OR_EXTERNAL_CORRELATION_KIND_OPERATOR; kind < OR_EXTERNAL_CORRELATION_KIND_COUNT; ++kind) {
      if (ids[kind] == 0) continue;
      orActivityExternalCorrelation e{};
      e.externalKind = kind;
      e.externalId = ids[kind];
      e.correlationId = correlationId;
      writeRecord(e, OR_ACTIVITY_KIND_EXTERNAL_CORRELATION, -1);
    }
  }

  void writeRuntime(uint32_t apiId, const char* name, int32_t device, uint64_t corr, uint64_t start, uint64_t end,
                    uint32_t threadId) {
    orActivityRuntime r{};
    r.apiId = apiId;
    r.processId = static_cast<uint32_t>(getpid());
    r.threadId = threadId;
    r.device = device;
    r.correlationId = corr;
    r.start = start;
    r.end = end;
    r.name = name;
    writeRecord(r, OR_ACTIVITY_KIND_RUNTIME, device);
  }

  // Writes one piece of device work (and its launch) at the given host times.
  void writeWork(const std::string& type, int device, uint64_t stream, uint64_t launchHost, uint64_t launchEnd,
                 uint64_t startHost, uint64_t endHost, const std::string& name, uint64_t bytes, int copyKind,
                 uint64_t opId, uint64_t userId, uint32_t threadId, size_t padding) {
    ensureStream(device, stream);
    const uint64_t corr = nextCorrelation++;
    writeExternal(corr, opId, userId);
    const uint64_t devStart = deviceTime(device, startHost);
    const uint64_t devEnd = deviceTime(device, endHost);
    if (type == "kernel") {
      writeRuntime(OR_API_LAUNCH_KERNEL, "orLaunchKernel", device, corr, launchHost, launchEnd, threadId);
      orActivityKernel k{};
      k.device = device;
      k.streamId = stream;
      k.correlationId = corr;
      k.start = devStart;
      k.end = devEnd;
      k.name = intern(name.empty() ? "replay_kernel" : name);
      k.grid = orDim3{4, 1, 1};
      k.block = orDim3{128, 1, 1};
      k.sharedMemBytes = 256;
      writeRecord(k, OR_ACTIVITY_KIND_KERNEL, device, padding);
    } else if (type == "memcpy") {
      writeRuntime(OR_API_MEMCPY_ASYNC, "orMemcpyAsync", device, corr, launchHost, launchEnd, threadId);
      orActivityMemcpy m{};
      m.copyKind = static_cast<uint8_t>(copyKind);
      m.srcKind =
          copyKind == OR_ACTIVITY_MEMCPY_HTOD ? OR_ACTIVITY_MEMORY_KIND_PAGEABLE : OR_ACTIVITY_MEMORY_KIND_DEVICE;
      m.dstKind =
          copyKind == OR_ACTIVITY_MEMCPY_DTOH ? OR_ACTIVITY_MEMORY_KIND_PAGEABLE : OR_ACTIVITY_MEMORY_KIND_DEVICE;
      m.isAsync = 1;
      m.device = device;
      m.srcDevice = copyKind == OR_ACTIVITY_MEMCPY_HTOD ? -1 : device;
      m.dstDevice = copyKind == OR_ACTIVITY_MEMCPY_DTOH ? -1 : device;
      m.streamId = stream;
      m.correlationId = corr;
      m.bytes = bytes;
      m.start = devStart;
      m.end = devEnd;
      writeRecord(m, OR_ACTIVITY_KIND_MEMCPY, device, padding);
    } else if (type == "memset") {
      writeRuntime(OR_API_MEMSET_ASYNC, "orMemsetAsync", device, corr, launchHost, launchEnd, threadId);
      orActivityMemset m{};
      m.device = device;
      m.streamId = stream;
      m.correlationId = corr;
      m.bytes = bytes;
      m.start = devStart;
      m.end = devEnd;
      m.elementSize = 1;
      m.isAsync = 1;
      writeRecord(m, OR_ACTIVITY_KIND_MEMSET, device, padding);
    } else if (type == "wait") {
      writeRuntime(OR_API_STREAM_WAIT_EVENT, "orStreamWaitEvent", device, corr, launchHost, launchEnd, threadId);
      orActivitySynchronization s{};
      s.syncType = OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT;
      s.clockDomain = OR_ACTIVITY_CLOCK_DEVICE;
      s.device = device;
      s.streamId = stream;
      s.eventId = 7;
      s.correlationId = corr;
      s.start = devStart;
      s.end = devEnd;
      writeRecord(s, OR_ACTIVITY_KIND_SYNCHRONIZATION, device, padding);
    } else if (type == "hostsync") {
      writeRuntime(OR_API_STREAM_SYNCHRONIZE, "orStreamSynchronize", device, corr, startHost, endHost, threadId);
      orActivitySynchronization s{};
      s.syncType = OR_ACTIVITY_SYNC_STREAM;
      s.clockDomain = OR_ACTIVITY_CLOCK_HOST;
      s.device = device;
      s.threadId = threadId;
      s.streamId = stream;
      s.correlationId = corr;
      s.start = startHost;
      s.end = endHost;
      writeRecord(s, OR_ACTIVITY_KIND_SYNCHRONIZATION, device, padding);
    }
  }

  // The KERNEL_METRICS record of the kernel just written, when the item
  // gives any of flops=, bytes_read=, bytes_written=, busy_ns=.
  void writeKernelMetrics(const ScenarioItem& item, int device, uint64_t stream) {
    if (!item.has("flops") && !item.has("bytes_read") && !item.has("bytes_written") && !item.has("busy_ns")) return;
    orActivityKernelMetrics m{};
    m.device = device;
    m.streamId = stream;
    m.correlationId = nextCorrelation - 1;
    if (item.has("flops")) {
      m.known |= OR_KERNEL_WORK_FLOPS;
      m.flops = static_cast<uint64_t>(item.num("flops"));
    }
    if (item.has("bytes_read") || item.has("bytes_written")) {
      m.known |= OR_KERNEL_WORK_BYTES;
      m.bytesRead = static_cast<uint64_t>(item.num("bytes_read"));
      m.bytesWritten = static_cast<uint64_t>(item.num("bytes_written"));
    }
    m.busyNs = static_cast<uint64_t>(item.num("busy_ns"));
    writeRecord(m, OR_ACTIVITY_KIND_KERNEL_METRICS, device);
  }

  // Replays the scenario into the window that opened at windowOpenedAt.
  void playScenario() {
    const uint64_t base = windowOpenedAt;
    const uint32_t tid = currentThreadId();
    auto at = [&](const ScenarioItem& item, const char* key, long double fallbackUs) {
      long double us = item.num(key, fallbackUs);
      return static_cast<uint64_t>(static_cast<long double>(base) + us * 1000.0L);
    };
    for (const auto& item : scenario) {
      if (item.type == "late_clock_syncs") {
        stats.lateClockSyncs += static_cast<uint64_t>(item.num("count", 1));
      } else if (item.type == "drop") {
        const auto device = static_cast<int32_t>(item.num("device", -1));
        const auto count = static_cast<uint64_t>(item.num("count", 1));
        dropped[device] += count;
        droppedTotal += count;
        stats.recordsDropped += count;
        stats.recordsDroppedByKind[statsSlot(static_cast<uint32_t>(item.num("kind", OR_ACTIVITY_KIND_KERNEL)))] +=
            count;
      } else if (item.type == "unknown") {
        // A record kind from the future: readers must skip it by size.
        const auto size = static_cast<size_t>(item.num("size", 24));
        std::vector<uint8_t> bytes(size, 0);
        orActivityRecord header{static_cast<uint32_t>(item.num("kind", 77)), static_cast<uint32_t>(size)};
        std::memcpy(bytes.data(), &header, sizeof(header));
        write(bytes.data(), bytes.size(), -1);
      } else if (item.type == "kernel" || item.type == "memcpy" || item.type == "memset" || item.type == "wait" ||
                 item.type == "hostsync") {
        const int device = static_cast<int>(item.num("device", 0));
        if (device < 0 || static_cast<size_t>(device) >= devices.size()) continue;
        const uint64_t start = at(item, "start_us", 0);
        const uint64_t end = start + static_cast<uint64_t>(item.num("dur_us", 10) * 1000.0L);
        const uint64_t launch = at(item, "launch_us", item.num("start_us", 0) - 5);
        const uint64_t launchEnd = launch + static_cast<uint64_t>(item.num("launch_dur_us", 2) * 1000.0L);
        int copyKind = OR_ACTIVITY_MEMCPY_HTOD;
        const std::string copy = item.str("copy", "HtoD");
        if (copy == "DtoH") copyKind = OR_ACTIVITY_MEMCPY_DTOH;
        if (copy == "DtoD") copyKind = OR_ACTIVITY_MEMCPY_DTOD;
        if (copy == "HtoH") copyKind = OR_ACTIVITY_MEMCPY_HTOH;
        if (copy == "PtoP") copyKind = OR_ACTIVITY_MEMCPY_PTOP;
        const int repeat = static_cast<int>(item.num("repeat", 1));
        const uint64_t period = static_cast<uint64_t>(item.num("period_us", 0) * 1000.0L);
        for (int i = 0; i < repeat; ++i) {
          const uint64_t shift = period * static_cast<uint64_t>(i);
          writeWork(item.type, device, static_cast<uint64_t>(item.num("stream", 1)), launch + shift, launchEnd + shift,
                    start + shift, end + shift, item.str("name"), static_cast<uint64_t>(item.num("bytes", 4096)),
                    copyKind, static_cast<uint64_t>(item.num("op", 0)), static_cast<uint64_t>(item.num("user", 0)),
                    static_cast<uint32_t>(item.num("tid", tid)), static_cast<size_t>(item.num("pad", 0)));
          if (item.type == "kernel") writeKernelMetrics(item, device, static_cast<uint64_t>(item.num("stream", 1)));
        }
      } else if (item.type == "counter") {
        const int device = static_cast<int>(item.num("device", 0));
        orActivityCounter c{};
        c.device = device;
        c.counter = counterKind(item.str("counter", "memory_allocated"));
        c.streamId = static_cast<uint64_t>(item.num("stream", 0));
        c.timestamp = at(item, "at_us", 0);
        c.value = static_cast<uint64_t>(item.num("value", 0));
        writeRecord(c, OR_ACTIVITY_KIND_COUNTER, device);
      }
    }
  }

  // Hands buffers back; the caller must not hold the mutex.
  orError_t deliver(bool forced) {
    std::vector<Buffer> ready;
    orActivityBufferCompletedFn done;
    void* data;
    {
      std::lock_guard<std::mutex> guard(mutex);
      if (completed == nullptr) return orErrorNotInitialized;
      if (scenarioPending && !tracing.load()) {
        scenarioPending = false;
        playScenario();
      }
      if (tracing.load()) writeClockSamplesUntil(hostNow());
      ready.swap(full);
      if (forced && current.data != nullptr) {
        ready.push_back(current);
        current = Buffer{};
      }
      done = completed;
      data = userData;
    }
    tInCallback = true;
    for (const auto& b : ready) {
      done(data, b.data, b.size, b.used);
      std::lock_guard<std::mutex> guard(mutex);
      ++stats.buffersCompleted;
    }
    tInCallback = false;
    return orSuccess;
  }

 private:
  Replay() {
    const char* env;
    int count = 1;
    if ((env = std::getenv("OPENREG_REPLAY_DEVICES")) != nullptr) count = std::max(1, std::atoi(env));
    Clock clock;
    if ((env = std::getenv("OPENREG_REPLAY_CLOCK_OFFSET_NS")) != nullptr) clock.offsetNs = std::strtold(env, nullptr);
    if ((env = std::getenv("OPENREG_REPLAY_CLOCK_SKEW_PPM")) != nullptr) clock.skewPpm = std::strtold(env, nullptr);
    if ((env = std::getenv("OPENREG_REPLAY_CLOCK_DRIFT_PPM_PER_S")) != nullptr)
      clock.driftPpmPerS = std::strtold(env, nullptr);
    if ((env = std::getenv("OPENREG_REPLAY_VERSION")) != nullptr) version = static_cast<uint32_t>(std::atoi(env));
    if ((env = std::getenv("OPENREG_REPLAY_STATS_SIZE")) != nullptr) {
      statsSize = std::min<uint32_t>(statsSize, static_cast<uint32_t>(std::atoi(env)));
    }
    if ((env = std::getenv("OPENREG_REPLAY_SAMPLE_UNCERTAINTY_NS")) != nullptr)
      sampleUncertaintyNs = std::strtoull(env, nullptr, 10);
    for (int i = 0; i < count; ++i) addDevice(i, clock);
    if ((env = std::getenv("OPENREG_REPLAY_SCENARIO")) != nullptr) loadScenario(env, clock);
  }

  void addDevice(int index, const Clock& clock) {
    Device d;
    d.name = "openreg replay device";
    d.clock = clock;
    d.streams[1] = StreamInfo{0, true};
    if (static_cast<size_t>(index) >= devices.size()) devices.resize(static_cast<size_t>(index) + 1);
    devices[static_cast<size_t>(index)] = d;
  }

  void loadScenario(const char* path, const Clock& defaults) {
    std::ifstream in(path);
    if (!in) {
      scenarioError = std::string("cannot read scenario ") + path;
      return;
    }
    std::string line;
    while (std::getline(in, line)) {
      auto hash = line.find('#');
      if (hash != std::string::npos) line.resize(hash);
      std::istringstream words(line);
      ScenarioItem item;
      if (!(words >> item.type)) continue;
      std::string word;
      while (words >> word) {
        auto eq = word.find('=');
        if (eq != std::string::npos) item.args[word.substr(0, eq)] = word.substr(eq + 1);
      }
      if (item.type == "device") {
        const int index = static_cast<int>(item.num("index", 0));
        Clock c = defaults;
        c.offsetNs = item.num("offset_ns", c.offsetNs);
        c.skewPpm = item.num("skew_ppm", c.skewPpm);
        c.driftPpmPerS = item.num("drift_ppm_per_s", c.driftPpmPerS);
        addDevice(index, c);
        if (item.args.count("name")) devices[static_cast<size_t>(index)].name = item.str("name");
      } else if (item.type == "stream") {
        const int device = static_cast<int>(item.num("device", 0));
        if (device >= 0 && static_cast<size_t>(device) < devices.size()) {
          devices[static_cast<size_t>(device)].streams[static_cast<uint64_t>(item.num("id", 1))] =
              StreamInfo{static_cast<int32_t>(item.num("priority", 0)), item.num("default", 0) != 0};
        }
      } else {
        scenario.push_back(item);
      }
    }
  }
};

orError_t invalid() { return orErrorInvalidValue; }

}  // namespace

// ------------------------------------------------------------ activity.h

REPLAY_API orError_t orActivityEnableTracing(void) {
  auto& r = Replay::get();
  std::lock_guard<std::mutex> guard(r.mutex);
  if (r.tracing.load()) return orSuccess;
  r.windowOpenedAt = hostNow();
  r.lastSampleAt = r.windowOpenedAt;
  r.tracing.store(true);
  for (size_t d = 0; d < r.devices.size(); ++d) r.writeClockSample(static_cast<int>(d), r.windowOpenedAt);
  return orSuccess;
}

REPLAY_API orError_t orActivityDisableTracing(void) {
  auto& r = Replay::get();
  std::lock_guard<std::mutex> guard(r.mutex);
  if (!r.tracing.load()) return orSuccess;
  r.windowClosedAt = hostNow();
  r.writeClockSamplesUntil(r.windowClosedAt);
  r.tracing.store(false);
  r.scenarioPending = !r.scenario.empty();
  return orSuccess;
}

REPLAY_API orError_t orActivityEnable(orActivityKind kind) {
  if (kind <= OR_ACTIVITY_KIND_INVALID || kind >= OR_ACTIVITY_KIND_COUNT) return invalid();
  auto& r = Replay::get();
  std::lock_guard<std::mutex> guard(r.mutex);
  r.enabledKinds[kind] = true;
  return orSuccess;
}

REPLAY_API orError_t orActivityDisable(orActivityKind kind) {
  if (kind <= OR_ACTIVITY_KIND_INVALID || kind >= OR_ACTIVITY_KIND_COUNT) return invalid();
  auto& r = Replay::get();
  std::lock_guard<std::mutex> guard(r.mutex);
  r.enabledKinds[kind] = false;
  return orSuccess;
}

REPLAY_API orError_t orActivityRegisterCallbacks(orActivityBufferRequestedFn requested,
                                                 orActivityBufferCompletedFn completed, void* userData) {
  auto& r = Replay::get();
  if (r.tracing.load()) return orErrorNotSupported;
  if ((requested == nullptr) != (completed == nullptr)) return invalid();
  if (requested == nullptr) {
    r.deliver(true);
  }
  std::lock_guard<std::mutex> guard(r.mutex);
  r.requested = requested;
  r.completed = completed;
  r.userData = userData;
  return orSuccess;
}

#ifndef OPENREG_REPLAY_PARTIAL
REPLAY_API orError_t orActivityFlushAll(uint32_t flags) {
  if (tInCallback) return orErrorNotSupported;
  return Replay::get().deliver((flags & OR_ACTIVITY_FLUSH_FORCED) != 0);
}
#endif

REPLAY_API orError_t orActivityGetNextRecord(const uint8_t* buffer, size_t validSize, const orActivityRecord** record) {
  if (buffer == nullptr || record == nullptr || (reinterpret_cast<uintptr_t>(buffer) % 8) != 0) return invalid();
  size_t offset = 0;
  if (*record != nullptr) {
    auto* prev = reinterpret_cast<const uint8_t*>(*record);
    if (prev < buffer || prev >= buffer + validSize) return invalid();
    offset = static_cast<size_t>(prev - buffer) + (*record)->size;
  }
  if (offset >= validSize) return orErrorMaxLimitReached;
  if (validSize - offset < sizeof(orActivityRecord)) return invalid();
  auto* next = reinterpret_cast<const orActivityRecord*>(buffer + offset);
  if (next->size < 8 || next->size % 8 != 0 || next->size > validSize - offset) return invalid();
  *record = next;
  return orSuccess;
}

REPLAY_API orError_t orActivityGetNumDroppedRecords(int device, uint64_t* dropped) {
  if (dropped == nullptr) return invalid();
  auto& r = Replay::get();
  std::lock_guard<std::mutex> guard(r.mutex);
  if (device < -1 || device >= static_cast<int>(r.devices.size())) return orErrorInvalidDevice;
  *dropped = device == -1 ? r.droppedTotal : r.dropped[device];
  return orSuccess;
}

#ifndef OPENREG_REPLAY_MINIMAL
REPLAY_API orError_t orActivityGetStats(orActivityStats* stats) {
  if (stats == nullptr) return invalid();
  auto& r = Replay::get();
  std::lock_guard<std::mutex> guard(r.mutex);
  orActivityStats copy = r.stats;
  copy.structSize = r.statsSize;  // the runtime's own size, as the header asks
  std::memcpy(stats, &copy, std::min<size_t>({stats->structSize, r.statsSize, sizeof(copy)}));
  return orSuccess;
}
#endif

REPLAY_API orError_t orActivityPushExternalCorrelationId(orActivityExternalCorrelationKind kind, uint64_t id) {
  if (kind <= OR_EXTERNAL_CORRELATION_KIND_UNKNOWN || kind >= OR_EXTERNAL_CORRELATION_KIND_COUNT) return invalid();
  tExternalStacks[kind].push_back(id);
  return orSuccess;
}

REPLAY_API orError_t orActivityPopExternalCorrelationId(orActivityExternalCorrelationKind kind, uint64_t* lastId) {
  if (kind <= OR_EXTERNAL_CORRELATION_KIND_UNKNOWN || kind >= OR_EXTERNAL_CORRELATION_KIND_COUNT) return invalid();
  auto& stack = tExternalStacks[kind];
  if (stack.empty()) return invalid();
  if (lastId != nullptr) *lastId = stack.back();
  stack.pop_back();
  return orSuccess;
}

#ifndef OPENREG_REPLAY_PARTIAL
REPLAY_API orError_t orActivityGetClockSample(int device, orActivityClockSample* sample) {
  auto& r = Replay::get();
  if (sample == nullptr) return invalid();
  if (device < 0 || device >= static_cast<int>(r.devices.size())) return orErrorInvalidDevice;
  const uint64_t now = hostNow();
  sample->hostTimestamp = now;
  sample->deviceTimestamp = r.deviceTime(device, now);
  sample->uncertainty = r.sampleUncertaintyNs;
  return orSuccess;
}
#endif

REPLAY_API orError_t orActivityGetTimestamp(uint64_t* timestamp) {
  if (timestamp == nullptr) return invalid();
  *timestamp = hostNow();
  return orSuccess;
}

#ifndef OPENREG_REPLAY_MINIMAL
REPLAY_API orError_t orActivityMarkerRangePush(const char* name) {
  if (name == nullptr) return invalid();
  return orSuccess;
}
REPLAY_API orError_t orActivityMarkerRangePop(void) { return orSuccess; }
REPLAY_API orError_t orActivityMarkerInstant(const char* name) { return name == nullptr ? invalid() : orSuccess; }
#endif

REPLAY_API orError_t orActivityGetVersion(uint32_t* version) {
  if (version == nullptr) return invalid();
  *version = Replay::get().version;
  return orSuccess;
}

REPLAY_API orError_t orActivityIsActive(orActivityKind kind, int* active) {
  auto& r = Replay::get();
  if (active == nullptr || kind <= OR_ACTIVITY_KIND_INVALID || kind >= OR_ACTIVITY_KIND_COUNT) return invalid();
  std::lock_guard<std::mutex> guard(r.mutex);
  *active = r.tracing && r.enabledKinds[kind] ? 1 : 0;
  return orSuccess;
}

#ifndef OPENREG_REPLAY_MINIMAL  // optional for the plugin
REPLAY_API orError_t orActivitySetCounterPeriod(uint64_t periodNs) {
  // Counters come from the scenario; the period is only checked.
  if (periodNs < OR_ACTIVITY_COUNTER_PERIOD_MIN_NS || periodNs > OR_ACTIVITY_COUNTER_PERIOD_MAX_NS) return invalid();
  return orSuccess;
}

REPLAY_API orError_t orActivityPublishCounter(int device, orActivityCounterKind counter, uint64_t /*value*/) {
  if (device < 0 || device >= static_cast<int>(Replay::get().devices.size())) return orErrorInvalidDevice;
  return counter == OR_COUNTER_MEMORY_ALLOCATED ? orSuccess : invalid();
}
#endif

REPLAY_API orError_t orActivityGetDeviceCount(int* count) {
  if (count == nullptr) return invalid();
  *count = static_cast<int>(Replay::get().devices.size());
  return orSuccess;
}

REPLAY_API orError_t orActivityGetDeviceInfo(int device, orActivityDeviceInfo* info) {
  auto& r = Replay::get();
  if (info == nullptr || info->structSize < sizeof(uint32_t) * 2) return invalid();
  if (device < 0 || device >= static_cast<int>(r.devices.size())) return orErrorInvalidDevice;
  orActivityDeviceInfo out{};
  out.structSize = info->structSize;
  out.index = device;
  std::snprintf(out.name, sizeof(out.name), "%s", r.devices[static_cast<size_t>(device)].name.c_str());
  out.totalMemory = 1ull << 30;
  out.computeUnits = 8;
  out.clockRateKHz = 1'000'000;
  out.executorThreads = 2;
  out.peakFlopsPerSecond = 1e12;
  out.peakBytesPerSecond = 1e11;
  std::memcpy(info, &out, std::min<size_t>(info->structSize, sizeof(out)));
  return orSuccess;
}

REPLAY_API orError_t orActivityGetStreamInfo(int device, uint64_t streamId, orActivityStreamInfo* info) {
  auto& r = Replay::get();
  if (info == nullptr) return invalid();
  std::lock_guard<std::mutex> guard(r.mutex);
  if (device < 0 || device >= static_cast<int>(r.devices.size())) return orErrorInvalidDevice;
  const auto& streams = r.devices[static_cast<size_t>(device)].streams;
  auto it = streams.find(streamId);
  if (it == streams.end()) return invalid();
  orActivityStreamInfo out{};
  out.structSize = info->structSize;
  out.device = device;
  out.streamId = streamId;
  out.priority = it->second.priority;
  out.isDefault = it->second.isDefault ? 1 : 0;
  std::memcpy(info, &out, std::min<size_t>(info->structSize, sizeof(out)));
  return orSuccess;
}

#ifndef OPENREG_REPLAY_MINIMAL
REPLAY_API const char* orGetErrorName(orError_t error) {
  switch (error) {
    case orSuccess:
      return "orSuccess";
    case orErrorInvalidValue:
      return "orErrorInvalidValue";
    case orErrorNotSupported:
      return "orErrorNotSupported";
    case orErrorTimeout:
      return "orErrorTimeout";
    case orErrorMaxLimitReached:
      return "orErrorMaxLimitReached";
    case orErrorNotInitialized:
      return "orErrorNotInitialized";
    default:
      return "orErrorUnknown";
  }
}
#endif

// ------------------------------------------------------- test controls

REPLAY_API int orReplaySubmit(int kind, int device, uint64_t stream, const char* name, uint64_t bytes,
                              uint64_t durationNs, int copyKind) {
  auto& r = Replay::get();
  const uint64_t t0 = hostNow();
  std::lock_guard<std::mutex> guard(r.mutex);
  if (device < 0 || device >= static_cast<int>(r.devices.size())) return orErrorInvalidDevice;
  const char* types[] = {"", "kernel", "memcpy", "memset", "wait"};
  if (kind < 1 || kind > 4) return orErrorInvalidValue;
  auto& busy = r.streamBusyUntil[{device, stream}];
  const uint64_t start = std::max(busy, t0 + kLaunchLatencyNs);
  const uint64_t end = start + std::max<uint64_t>(durationNs, 1);
  busy = end;
  if (!r.tracing.load()) {
    r.ensureStream(device, stream);
    return orSuccess;
  }
  const auto& ops = tExternalStacks[OR_EXTERNAL_CORRELATION_KIND_OPERATOR];
  const auto& users = tExternalStacks[OR_EXTERNAL_CORRELATION_KIND_USER];
  const uint64_t t1 = std::max(hostNow(), t0 + 1);
  r.writeWork(types[kind], device, stream, t0, t1, start, end, name != nullptr ? name : "", bytes, copyKind,
              ops.empty() ? 0 : ops.back(), users.empty() ? 0 : users.back(), currentThreadId(), 0);
  return orSuccess;
}

REPLAY_API int orReplaySynchronize(void) {
  auto& r = Replay::get();
  const uint64_t t0 = hostNow();
  uint64_t until = 0;
  {
    std::lock_guard<std::mutex> guard(r.mutex);
    for (const auto& [key, busy] : r.streamBusyUntil) until = std::max(until, busy);
  }
  while (hostNow() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  const uint64_t t1 = std::max(hostNow(), t0 + 1);
  std::lock_guard<std::mutex> guard(r.mutex);
  if (r.tracing.load()) {
    const uint64_t corr = r.nextCorrelation++;
    const auto& ops = tExternalStacks[OR_EXTERNAL_CORRELATION_KIND_OPERATOR];
    r.writeExternal(corr, ops.empty() ? 0 : ops.back(), 0);
    r.writeRuntime(OR_API_DEVICE_SYNCHRONIZE, "orDeviceSynchronize", 0, corr, t0, t1, currentThreadId());
    orActivitySynchronization s{};
    s.syncType = OR_ACTIVITY_SYNC_DEVICE;
    s.clockDomain = OR_ACTIVITY_CLOCK_HOST;
    s.device = 0;
    s.threadId = currentThreadId();
    s.correlationId = corr;
    s.start = t0;
    s.end = t1;
    r.writeRecord(s, OR_ACTIVITY_KIND_SYNCHRONIZATION, 0);
  }
  return orSuccess;
}

REPLAY_API uint64_t orReplayWindowOpenedAt(void) {
  auto& r = Replay::get();
  std::lock_guard<std::mutex> guard(r.mutex);
  return r.windowOpenedAt;
}

REPLAY_API uint64_t orReplayDeviceTime(int device, uint64_t hostNs) {
  auto& r = Replay::get();
  if (device < 0 || device >= static_cast<int>(r.devices.size())) return 0;
  return r.deviceTime(device, hostNs);
}

REPLAY_API int orReplayIsTracing(void) { return Replay::get().tracing.load() ? 1 : 0; }

REPLAY_API int orReplayRegistered(void) {
  auto& r = Replay::get();
  std::lock_guard<std::mutex> guard(r.mutex);
  return r.completed != nullptr ? 1 : 0;
}

REPLAY_API int orReplayExternalDepth(int kind) {
  if (kind <= OR_EXTERNAL_CORRELATION_KIND_UNKNOWN || kind >= OR_EXTERNAL_CORRELATION_KIND_COUNT) return -1;
  return static_cast<int>(tExternalStacks[kind].size());
}

REPLAY_API const char* orReplayScenarioError(void) { return Replay::get().scenarioError.c_str(); }
