// Cost of activity tracing per kernel launch, on the runtime alone.
//
// Empty kernels are launched with tracing off and on, interleaved in rounds
// so both modes see the same machine state; only the launch loop is timed
// (streams drain between batches, untimed). Prints ns per launch for each
// mode, the added ns and the ratio, for 1 and several launching threads.
// Then launches 1 M traced kernels with 4 MiB client buffers and reports
// drops and buffer bytes per record.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "openreg/activity.h"
#include "openreg/runtime.h"

namespace {

constexpr size_t kBufferBytes = 4u << 20;

struct Client {
  std::mutex mutex;
  std::vector<uint8_t*> pool;  // recycled buffers, as a real profiler would
  std::atomic<uint64_t> records{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> buffers{0};

  static void requested(void* self, uint8_t** buffer, size_t* size) {
    auto* client = static_cast<Client*>(self);
    {
      std::lock_guard lock(client->mutex);
      if (!client->pool.empty()) {
        *buffer = client->pool.back();
        client->pool.pop_back();
        *size = kBufferBytes;
        return;
      }
    }
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = kBufferBytes;
    client->buffers++;
  }

  static void completed(void* self, uint8_t* buffer, size_t, size_t validSize) {
    auto* client = static_cast<Client*>(self);
    uint64_t count = 0;
    const orActivityRecord* record = nullptr;
    while (orActivityGetNextRecord(buffer, validSize, &record) == orSuccess) ++count;
    client->records += count;
    client->bytes += validSize;
    std::lock_guard lock(client->mutex);
    client->pool.push_back(buffer);
  }
};

int emptyKernel(void*, char*, size_t) { return 0; }

void check(orError_t error, const char* what) {
  if (error != orSuccess) {
    std::fprintf(stderr, "%s failed: %s (%s)\n", what, orGetErrorName(error), orGetLastErrorMessage());
    std::exit(1);
  }
}

std::atomic<bool> gHoldDevice{false};

int holdKernel(void* flag, char*, size_t) {
  auto* released = static_cast<std::atomic<bool>*>(flag);
  while (!released->load()) std::this_thread::yield();
  return 0;
}

// Launch-loop time in ns per launch, summed over threads' own loops. With
// gHoldDevice the stream is blocked behind a kernel during the loop, so only
// the launching thread's own cost is timed (no executor running beside it).
double launchNsPerKernel(int threads, int batches, int perBatch, bool traced) {
  std::atomic<uint64_t> totalNs{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      check(orSetDevice(t % 2), "orSetDevice");
      orStream_t stream;
      check(orStreamCreate(&stream), "orStreamCreate");
      uint64_t ns = 0;
      for (int b = 0; b < batches; ++b) {
        if (traced) orActivityPushExternalCorrelationId(OR_EXTERNAL_CORRELATION_KIND_OPERATOR, 1000 + b);
        std::atomic<bool> released{false};
        if (gHoldDevice) orLaunchKernel(stream, "hold", holdKernel, &released);
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < perBatch; ++i) orLaunchKernel(stream, "empty_kernel", emptyKernel, nullptr);
        ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
        if (traced) orActivityPopExternalCorrelationId(OR_EXTERNAL_CORRELATION_KIND_OPERATOR, nullptr);
        released = true;
        check(orStreamSynchronize(stream), "orStreamSynchronize");
      }
      check(orStreamDestroy(stream), "orStreamDestroy");
      totalNs += ns;
    });
  }
  for (auto& w : workers) w.join();
  return double(totalNs.load()) / (double(threads) * batches * perBatch);
}

void setTracing(bool on) {
  if (on) {
    check(orActivityEnableTracing(), "orActivityEnableTracing");
  } else {
    check(orActivityDisableTracing(), "orActivityDisableTracing");
    check(orActivityFlushAll(OR_ACTIVITY_FLUSH_FORCED), "orActivityFlushAll");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const int manyThreads = argc > 2 ? std::atoi(argv[2]) : 8;
  Client client;
  check(orActivityRegisterCallbacks(&Client::requested, &Client::completed, &client), "register");
  for (auto kind : {OR_ACTIVITY_KIND_RUNTIME, OR_ACTIVITY_KIND_KERNEL, OR_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                    OR_ACTIVITY_KIND_CLOCK_SYNC}) {
    check(orActivityEnable(kind), "orActivityEnable");
  }
  launchNsPerKernel(1, 2, 10000, false);  // warm up executors and allocator

  std::printf("Tracing cost per launch (empty kernels, %d interleaved rounds; median, and best round in brackets)\n",
              rounds);
  std::printf("%-24s %-8s %20s %20s %20s %8s\n", "device", "threads", "off ns/launch", "on ns/launch", "added ns",
              "ratio");
  for (bool hold : {false, true})
    for (int threads : {1, manyThreads}) {
      gHoldDevice = hold;
      std::vector<double> off, on;
      for (int r = 0; r < rounds; ++r) {
        off.push_back(launchNsPerKernel(threads, 10, 20000 / threads * 2, false));
        setTracing(true);
        on.push_back(launchNsPerKernel(threads, 10, 20000 / threads * 2, true));
        setTracing(false);
      }
      std::sort(off.begin(), off.end());
      std::sort(on.begin(), on.end());
      const double offMedian = off[off.size() / 2], onMedian = on[on.size() / 2];
      std::printf("%-24s %-8d %11.1f [%6.1f] %11.1f [%6.1f] %11.1f [%6.1f] %8.2f\n",
                  hold ? "held (launch path only)" : "running beside", threads, offMedian, off.front(), onMedian,
                  on.front(), onMedian - offMedian, on.front() - off.front(), onMedian / offMedian);
    }

  gHoldDevice = false;
  // 1 M traced launches: nothing may be dropped with 4 MiB buffers.
  uint64_t droppedBefore = 0, droppedAfter = 0;
  check(orActivityGetNumDroppedRecords(-1, &droppedBefore), "dropped");
  const uint64_t recordsBefore = client.records.load(), bytesBefore = client.bytes.load();
  setTracing(true);
  launchNsPerKernel(1, 50, 20000, true);
  setTracing(false);
  check(orActivityGetNumDroppedRecords(-1, &droppedAfter), "dropped");
  const uint64_t records = client.records.load() - recordsBefore;
  const uint64_t bytes = client.bytes.load() - bytesBefore;
  std::printf(
      "\n1M traced launches: %llu records delivered, %llu dropped, %.1f bytes/record, %llu buffers of 4 MiB "
      "allocated\n",
      static_cast<unsigned long long>(records), static_cast<unsigned long long>(droppedAfter - droppedBefore),
      records ? double(bytes) / double(records) : 0.0, static_cast<unsigned long long>(client.buffers.load()));
  check(orActivityRegisterCallbacks(nullptr, nullptr, nullptr), "unregister");
  return droppedAfter == droppedBefore ? 0 : 2;
}
