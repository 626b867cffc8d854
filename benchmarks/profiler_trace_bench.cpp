// What ending a trace costs in the Kineto plugin, on the real runtime.
//
// For 10 k, 100 k and 1 M kernels (each launched inside its own "op", as
// torch pushes one correlation id per operator), a plugin session runs as
// Kineto drives it: start, launches, device synchronize (profile.__exit__
// does that first), stop, getMetadata, processTrace into a logger that keeps
// what it is handed the way Kineto's MemoryTraceLogger does. Prints per size
// the median over rounds of (from the session's timings):
//   stop      closing the window, the forced flush and unregistering
//   tail      getMetadata's wait for the buffers still queued for parsing
//             when the window closed: the session's parsing thread does them
//             after stop (stop itself parsed them before)
//   prepare   joins by correlation id and clock mapping (getMetadata)
//   emit      window/type filter, flows, row clean-up, and the Kineto
//             activities built from them and handed to the logger
// and the conversion rate (device records per second through prepare and
// emit; and with the tail) against the goals: stop under 5 ms, 3 M device
// records/s or more.
// On stderr, per round: the launches' and the synchronize's time, the tail
// (how many buffers, how long their parse took, how long getMetadata waited),
// the parsing of all buffers (wall time and time on a core), and the
// converting thread's wall time, time on a core and page faults.
//
// --rss N: peak RSS of a child launching N kernels unprofiled and of one
// profiling them (kept until the logger is destroyed), against the goal of
// 400 bytes per kernel or less above the unprofiled run; bytes per record in
// the activity buffers; on stderr, the child's peak and current RSS after
// each stage (launched, stopped, prepared, processed) and the heap in use.
// Both children synchronize every 65,536 launches (--sync-every K; 0: only
// at the end), so that the launch queue's depth, which varies run to run,
// is not in the baseline.
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <libkineto.h>
#include <output_base.h>

#include "openreg/runtime.h"
#include "session.h"

using namespace openreg::profiler;
using libkineto::ActivityType;

namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int emptyKernel(void*, char*, size_t) { return 0; }

// Keeps activities as Kineto 2.13's MemoryTraceLogger does: a copy of each
// GenericTraceActivity handed to handleGenericActivity, a pointer to what
// handleActivity gets (its owner keeps it alive).
class MemoryLikeLogger : public libkineto::ActivityLogger {
 public:
  std::vector<const libkineto::ITraceActivity*> activities;
  std::vector<std::unique_ptr<const libkineto::ITraceActivity>> copies;

  void handleDeviceInfo(const libkineto::DeviceInfo&, int64_t) override {}
  void handleResourceInfo(const libkineto::ResourceInfo&, int64_t) override {}
  void handleOverheadInfo(const OverheadInfo&, int64_t) override {}
  void handleTraceSpan(const libkineto::TraceSpan&) override {}
  void handleActivity(const libkineto::ITraceActivity& a) override { activities.push_back(&a); }
  void handleGenericActivity(const libkineto::GenericTraceActivity& a) override {
    copies.push_back(std::make_unique<libkineto::GenericTraceActivity>(a));
    activities.push_back(copies.back().get());
  }
  void handleTraceStart(const std::unordered_map<std::string, std::string>&, const std::string&) override {}
  void finalizeMemoryTrace(const std::string&, const libkineto::Config&) override {}
  void finalizeTrace(const libkineto::Config&, std::unique_ptr<libkineto::ActivityBuffers> buffers, int64_t,
                     std::unordered_map<std::string, std::vector<std::string>>&) override {
    (void)buffers.release();  // never called here; the type is incomplete
  }
};

SessionRequest everything() {
  return SessionRequest::fromActivityTypes({ActivityType::CPU_OP, ActivityType::CONCURRENT_KERNEL,
                                            ActivityType::GPU_MEMCPY, ActivityType::GPU_MEMSET,
                                            ActivityType::GPU_USER_ANNOTATION, ActivityType::PRIVATEUSE1_RUNTIME});
}

void check(orError_t rc, const char* what) {
  if (rc != orSuccess) {
    std::fprintf(stderr, "%s failed: %s\n", what, orGetLastErrorMessage());
    std::exit(1);
  }
}

// The host ops the kernels are linked to, looked up by id as Kineto does.
struct HostOps {
  libkineto::TraceSpan span{0, 0, "bench"};
  std::vector<libkineto::GenericTraceActivity> ops;
  std::unordered_map<int32_t, const libkineto::ITraceActivity*> byId;

  explicit HostOps(size_t count) {
    ops.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      ops.emplace_back(span, ActivityType::CPU_OP, "aten::bench_op");
      ops.back().id = static_cast<int32_t>(i + 1);
    }
    for (auto& op : ops) byId.emplace(op.id, &op);
  }
};

// Peak RSS so far and RSS now, at each stage of one traced round (--rss).
struct StageRss {
  const char* stage;
  long peakKb;
  long nowKb;
  long heapKb;  // malloc'ed and not freed (the activities' slabs are not in it)
};
std::vector<StageRss>* gStages = nullptr;

long peakRssKb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

long currentRssKb() {
  long pages = 0, resident = 0;
  FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm != nullptr) {
    if (std::fscanf(statm, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(statm);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

void stage(const char* name) {
  if (gStages != nullptr) {
    const struct mallinfo2 heap = mallinfo2();
    gStages->push_back({name, peakRssKb(), currentRssKb(), static_cast<long>((heap.uordblks + heap.hblkhd) / 1024)});
  }
}

struct Round {
  SessionTimings timings;
  int64_t launchNs = 0;    // launches and the device synchronize
  int64_t launchedNs = 0;  // the launches alone
  uint64_t deviceActivities = 0;
  uint64_t dropped = 0;
  long conversionFaults = 0;    // page faults of the converting thread (tail wait, prepare, emit)
  int64_t conversionCpuNs = 0;  // its time on a core meanwhile
};

int64_t threadCpuNs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

long threadPageFaults() {
  struct rusage usage {};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt + usage.ru_majflt;
}

// One trace of `kernels` launches; the logger (and the session's activities)
// stay alive in `keep` when given, as they do in torch until the trace is gone.
// syncEvery: synchronize the device after every that many launches (0:
// only at the end), so the launch queue stays short.
Round traceOnce(const ActivityApi& api, size_t kernels, const HostOps& ops, bool profiled, size_t syncEvery = 0,
                std::unique_ptr<MemoryLikeLogger>* keep = nullptr,
                std::unique_ptr<OpenregSession>* keepSession = nullptr) {
  Round round;
  stage("start");
  auto session = std::make_unique<OpenregSession>(api, everything());
  const int64_t windowStart = nowNs();
  if (profiled) session->start();
  const int64_t launchStart = nowNs();
  for (size_t i = 0; i < kernels; ++i) {
    const uint64_t op = i % ops.ops.size() + 1;
    if (profiled) session->pushCorrelationId(op);
    check(orLaunchKernel(nullptr, "bench_kernel", emptyKernel, nullptr), "orLaunchKernel");
    if (profiled) session->popCorrelationId();
    if (syncEvery != 0 && (i + 1) % syncEvery == 0) check(orDeviceSynchronize(), "orDeviceSynchronize");
  }
  round.launchedNs = nowNs() - launchStart;
  check(orDeviceSynchronize(), "orDeviceSynchronize");
  round.launchNs = nowNs() - launchStart;
  stage("launched");
  if (!profiled) return round;
  session->stop();
  stage("stopped");
  const int64_t windowEnd = nowNs();
  const long faultsBefore = threadPageFaults();
  const int64_t cpuBefore = threadCpuNs();
  auto metadata = session->getMetadata();
  stage("prepared");
  round.dropped = std::strtoull(metadata["openreg_dropped_records"].c_str(), nullptr, 10);
  auto logger = std::make_unique<MemoryLikeLogger>();
  session->processTrace(
      *logger,
      [&](int32_t id) -> const libkineto::ITraceActivity* {
        auto it = ops.byId.find(id);
        return it != ops.byId.end() ? it->second : nullptr;
      },
      windowStart, windowEnd);
  round.conversionFaults = threadPageFaults() - faultsBefore;
  round.conversionCpuNs = threadCpuNs() - cpuBefore;
  stage("processed");
  round.timings = session->timings();
  for (const auto* a : logger->activities) {
    if (a->type() == ActivityType::CONCURRENT_KERNEL) ++round.deviceActivities;
  }
  if (keep != nullptr) *keep = std::move(logger);
  if (keepSession != nullptr) *keepSession = std::move(session);
  return round;
}

int64_t median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr size_t kRssSyncEvery = 65536;

int rssChild(const ActivityApi& api, size_t kernels, bool profiled, size_t syncEvery) {
  HostOps ops(1000);
  std::unique_ptr<MemoryLikeLogger> logger;
  std::unique_ptr<OpenregSession> session;
  const long before = peakRssKb();
  std::vector<StageRss> stages;
  gStages = &stages;
  // How deep the runtime's launch queue gets (tens of MB at a million
  // launches) depends on how far the device falls behind, run to run; in the
  // unprofiled child it was the peak, so it moved the baseline by 20 to 40 MB.
  // Bounded in both children, the difference is what profiling holds.
  Round round = traceOnce(api, kernels, ops, profiled, syncEvery, &logger, &session);
  gStages = nullptr;
  for (const auto& s : stages) {
    std::fprintf(stderr, "  %-10s peak %7.1f MB, now %7.1f MB, heap in use %7.1f MB\n", s.stage, s.peakKb / 1024.0,
                 s.nowKb / 1024.0, s.heapKb / 1024.0);
  }
  std::printf("%ld %ld %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", before, peakRssKb(), round.timings.records,
              round.timings.recordBytes, round.deviceActivities);
  return 0;
}

struct ChildRss {
  long startKb = 0, peakKb = 0;
  uint64_t records = 0, recordBytes = 0, deviceActivities = 0;
};

ChildRss runRssChild(const char* self, size_t kernels, bool profiled, size_t syncEvery) {
  std::string command = std::string(self) + " --rss-child " + std::to_string(kernels) + " " +
                        (profiled ? "profiled" : "unprofiled") + " " + std::to_string(syncEvery);
  ChildRss out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr || std::fscanf(pipe, "%ld %ld %" SCNu64 " %" SCNu64 " %" SCNu64, &out.startKb, &out.peakKb,
                                     &out.records, &out.recordBytes, &out.deviceActivities) != 5) {
    std::fprintf(stderr, "child failed: %s\n", command.c_str());
    std::exit(1);
  }
  pclose(pipe);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const ActivityApi api(OPENREG_RUNTIME_SONAME);
  if (!api.available()) {
    std::fprintf(stderr, "activity API unavailable: %s\n", api.error().c_str());
    return 1;
  }
  if ((argc == 4 || argc == 5) && std::strcmp(argv[1], "--rss-child") == 0) {
    const size_t syncEvery = argc == 5 ? std::strtoull(argv[4], nullptr, 10) : kRssSyncEvery;
    return rssChild(api, std::strtoull(argv[2], nullptr, 10), std::strcmp(argv[3], "profiled") == 0, syncEvery);
  }
  if ((argc == 3 || (argc == 5 && std::strcmp(argv[3], "--sync-every") == 0)) && std::strcmp(argv[1], "--rss") == 0) {
    const size_t kernels = std::strtoull(argv[2], nullptr, 10);
    const size_t syncEvery = argc == 5 ? std::strtoull(argv[4], nullptr, 10) : kRssSyncEvery;
    const ChildRss plain = runRssChild(argv[0], kernels, false, syncEvery);
    const ChildRss traced = runRssChild(argv[0], kernels, true, syncEvery);
    std::printf("peak RSS for %zu kernels: unprofiled %.1f MB, profiled %.1f MB (x%.2f, +%.0f bytes per kernel)\n",
                kernels, plain.peakKb / 1024.0, traced.peakKb / 1024.0,
                static_cast<double>(traced.peakKb) / static_cast<double>(plain.peakKb),
                (traced.peakKb - plain.peakKb) * 1024.0 / static_cast<double>(kernels));
    std::printf("activity buffers: %" PRIu64 " records in %" PRIu64 " bytes: %.1f bytes per record, %.1f per kernel\n",
                traced.records, traced.recordBytes,
                static_cast<double>(traced.recordBytes) / static_cast<double>(traced.records),
                static_cast<double>(traced.recordBytes) / static_cast<double>(kernels));
    std::printf("device activities in the trace: %" PRIu64 " of %zu kernels\n", traced.deviceActivities, kernels);
    std::printf("goal: <= 400 bytes per kernel above unprofiled\n");
    return traced.deviceActivities == kernels ? 0 : 1;
  }

  std::vector<size_t> sizes = {10'000, 100'000, 1'000'000};
  int rounds = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
      sizes.clear();
      for (char* item = std::strtok(argv[++i], ","); item != nullptr; item = std::strtok(nullptr, ",")) {
        sizes.push_back(std::strtoull(item, nullptr, 10));
      }
    } else {
      std::fprintf(stderr, "usage: %s [--rounds R] [--sizes N,N,...] | --rss N [--sync-every K]\n", argv[0]);
      return 2;
    }
  }

  HostOps ops(1000);
  traceOnce(api, 1000, ops, true);  // warm-up: threads, buffers, first-touch
  // Two rates: through prepare and emit (the goal's, as before), and with the
  // tail too, which stop() used to parse and now leaves to getMetadata.
  std::printf("%9s %6s %9s %9s %9s %11s %9s %11s %12s %9s\n", "kernels", "rounds", "stop ms", "flush ms", "tail ms",
              "prepare ms", "emit ms", "M dev rec/s", "(with tail)", "records");
  bool ok = true;
  for (size_t kernels : sizes) {
    std::vector<int64_t> stop, flush, tail, prepare, emit, converted, withTail;
    uint64_t records = 0;
    for (int r = 0; r < rounds; ++r) {
      Round round = traceOnce(api, kernels, ops, true);
      const SessionTimings& t = round.timings;
      if (round.deviceActivities != kernels || round.dropped != 0) {
        std::fprintf(stderr, "%zu kernels: %" PRIu64 " in the trace, %" PRIu64 " dropped\n", kernels,
                     round.deviceActivities, round.dropped);
        ok = false;
      }
      // The tail: buffers still queued when the window closed, parsed after stop.
      std::fprintf(
          stderr,
          "  %zu kernels, round %d: launches %.1f ms, synchronize %.1f ms; stop %.3f ms (flush %.3f); "
          "%" PRIu64
          " buffers parsed after stop in %.3f ms, getMetadata waited %.3f ms for them; "
          "parsing in all %.1f ms (%.1f on a core); converting: %.1f ms wall, %.1f ms on a core, %ld page faults\n",
          kernels, r + 1, round.launchedNs / 1e6, (round.launchNs - round.launchedNs) / 1e6, t.stopNs / 1e6,
          t.flushNs / 1e6, t.tailBuffers, t.tailParseNs / 1e6, t.tailWaitNs / 1e6, t.parseNs / 1e6, t.parseCpuNs / 1e6,
          (t.tailWaitNs + t.prepareNs + t.emitNs) / 1e6, round.conversionCpuNs / 1e6, round.conversionFaults);
      stop.push_back(t.stopNs);
      flush.push_back(t.flushNs);
      tail.push_back(t.tailWaitNs);
      prepare.push_back(t.prepareNs);
      emit.push_back(t.emitNs);
      converted.push_back(t.prepareNs + t.emitNs);
      withTail.push_back(t.tailWaitNs + t.prepareNs + t.emitNs);
      records = t.records;
    }
    auto rate = [&](std::vector<int64_t>& ns) { return static_cast<double>(kernels) / (median(ns) / 1e9) / 1e6; };
    std::printf("%9zu %6d %9.3f %9.3f %9.3f %11.3f %9.3f %11.2f %12.2f %9" PRIu64 "\n", kernels, rounds,
                median(stop) / 1e6, median(flush) / 1e6, median(tail) / 1e6, median(prepare) / 1e6, median(emit) / 1e6,
                rate(converted), rate(withTail), records);
  }
  std::printf("goals: stop < 5 ms; conversion (prepare + emit) >= 3 M device records/s\n");
  return ok ? 0 : 1;
}
