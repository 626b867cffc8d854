// Writes small traces in Kineto's chrome-trace layout for the unit tests.
// Times are integer nanoseconds; they are written as microseconds with three
// decimals, as Kineto does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace_model.h"

namespace openreg::trace::testing {

inline constexpr int64_t kHostPid = 1000;
inline constexpr int64_t kHostTid = 1001;
inline constexpr int64_t kDeviceSortBase = 5000000;

class TraceBuilder {
 public:
  TraceBuilder& raw(const std::string& event) {
    events_.push_back(event);
    return *this;
  }

  TraceBuilder& op(const std::string& name, int64_t ts, int64_t dur, int64_t externalId,
                   const std::string& cat = "cpu_op", int64_t pid = kHostPid, int64_t tid = kHostTid) {
    return raw(R"({"ph":"X","cat":")" + cat + R"(","name":")" + name + R"(","pid":)" + std::to_string(pid) +
               R"(,"tid":)" + std::to_string(tid) + R"(,"ts":)" + us(ts) + R"(,"dur":)" + us(dur) +
               R"(,"args":{"External id":)" + std::to_string(externalId) + "}}");
  }

  TraceBuilder& python(const std::string& name, int64_t ts, int64_t dur, int64_t pid = kHostPid,
                       int64_t tid = kHostTid) {
    return raw(R"({"ph":"X","cat":"python_function","name":")" + name + R"(","pid":)" + std::to_string(pid) +
               R"(,"tid":)" + std::to_string(tid) + R"(,"ts":)" + us(ts) + R"(,"dur":)" + us(dur) + "}");
  }

  TraceBuilder& runtime(const std::string& name, int64_t ts, int64_t dur, int64_t correlation, int64_t externalId,
                        int64_t pid = kHostPid, int64_t tid = kHostTid) {
    return raw(R"({"ph":"X","cat":"privateuse1_runtime","name":")" + name + R"(","pid":)" + std::to_string(pid) +
               R"(,"tid":)" + std::to_string(tid) + R"(,"ts":)" + us(ts) + R"(,"dur":)" + us(dur) +
               R"(,"args":{"External id":)" + std::to_string(externalId) + R"(,"correlation":)" +
               std::to_string(correlation) + "}}");
  }

  // A device event with the args Kineto's CUDA path writes. `args` replaces
  // the default args when given (to plant missing or bad ones).
  TraceBuilder& kernel(const std::string& name, int64_t ts, int64_t dur, int64_t device, int64_t stream,
                       int64_t correlation, int64_t externalId, const std::string& cat = "kernel",
                       const std::string& args = "") {
    std::string a = args.empty() ? R"("External id":)" + std::to_string(externalId) + R"(,"device":)" +
                                       std::to_string(device) + R"(,"stream":)" + std::to_string(stream) +
                                       R"(,"correlation":)" + std::to_string(correlation)
                                 : args;
    return raw(R"({"ph":"X","cat":")" + cat + R"(","name":")" + name + R"(","pid":)" + std::to_string(device) +
               R"(,"tid":)" + std::to_string(stream) + R"(,"ts":)" + us(ts) + R"(,"dur":)" + us(dur) + R"(,"args":{)" +
               a + "}}");
  }

  // A sync row as Kineto writes CUPTI's (cuda_sync): on the device's pid, at
  // tid = `stream` (-1 for event and device syncs); `extra` appends args (see
  // waitArgs), `args` replaces them all (to plant missing ones).
  TraceBuilder& sync(const std::string& kind, int64_t ts, int64_t dur, int64_t device, int64_t stream,
                     int64_t correlation, const std::string& extra = "", const std::string& args = "") {
    std::string a = args.empty()
                        ? R"("cuda_sync_kind":")" + kind + R"(","device":)" + std::to_string(device) + R"(,"stream":)" +
                              std::to_string(stream) + R"(,"correlation":)" + std::to_string(correlation) + extra
                        : args;
    return raw(R"({"ph":"X","cat":"cuda_sync","name":")" + kind + R"(","pid":)" + std::to_string(device) +
               R"(,"tid":)" + std::to_string(stream) + R"(,"ts":)" + us(ts) + R"(,"dur":)" + us(dur) + R"(,"args":{)" +
               a + "}}");
  }

  // The args of a wait on an event ("Stream Wait Event", "Event Sync").
  static std::string waitArgs(int64_t recordStream, int64_t recordCorrelation, int64_t eventId) {
    return R"(,"wait_on_stream":)" + std::to_string(recordStream) + R"(,"wait_on_cuda_event_record_corr_id":)" +
           std::to_string(recordCorrelation) + R"(,"wait_on_cuda_event_id":)" + std::to_string(eventId);
  }

  TraceBuilder& flow(char ph, int64_t id, int64_t ts, int64_t pid, int64_t tid) {
    std::string bp = ph == 'f' ? R"(,"bp":"e")" : "";
    return raw(std::string(R"({"ph":")") + ph + R"(","id":)" + std::to_string(id) + R"(,"pid":)" + std::to_string(pid) +
               R"(,"tid":)" + std::to_string(tid) + R"(,"ts":)" + us(ts) + R"(,"cat":"ac2g","name":"ac2g")" + bp + "}");
  }

  // One op launching one kernel, linked both ways, with its arrow.
  TraceBuilder& launch(const std::string& opName, const std::string& kernelName, int64_t opTs, int64_t kernelTs,
                       int64_t kernelDur, int64_t device, int64_t stream, int64_t correlation, int64_t externalId) {
    op(opName, opTs, 10'000, externalId);
    runtime("orLaunchKernel", opTs + 2'000, 5'000, correlation, externalId);
    kernel(kernelName, kernelTs, kernelDur, device, stream, correlation, externalId);
    flow('s', correlation, opTs + 2'000, kHostPid, kHostTid);
    return flow('f', correlation, kernelTs, device, stream);
  }

  TraceBuilder& memory(int64_t ts, int64_t deviceType, int64_t deviceId, int64_t total, int64_t bytes,
                       int64_t pid = kHostPid, int64_t tid = kHostTid) {
    return raw(R"({"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":)" + std::to_string(pid) +
               R"(,"tid":)" + std::to_string(tid) + R"(,"ts":)" + us(ts) +
               R"(,"args":{"Total Reserved":0,"Total Allocated":)" + std::to_string(total) + R"(,"Bytes":)" +
               std::to_string(bytes) + R"(,"Device Id":)" + std::to_string(deviceId) + R"(,"Device Type":)" +
               std::to_string(deviceType) + R"(,"Addr":94717755884672}})");
  }

  TraceBuilder& process(int64_t pid, const std::string& name, int64_t sortIndex) {
    raw(R"({"name":"process_name","ph":"M","ts":0,"pid":)" + std::to_string(pid) + R"(,"tid":0,"args":{"name":")" +
        name + R"("}})");
    return raw(R"({"name":"process_sort_index","ph":"M","ts":0,"pid":)" + std::to_string(pid) +
               R"(,"tid":0,"args":{"sort_index":)" + std::to_string(sortIndex) + "}}");
  }

  TraceBuilder& thread(int64_t pid, int64_t tid, const std::string& name) {
    return raw(R"({"name":"thread_name","ph":"M","ts":0,"pid":)" + std::to_string(pid) + R"(,"tid":)" +
               std::to_string(tid) + R"(,"args":{"name":")" + name + R"("}})");
  }

  // Host process and thread rows, a device with the given streams.
  TraceBuilder& lanes(int64_t device, const std::vector<int64_t>& streams) {
    process(kHostPid, "python", kHostPid);
    thread(kHostPid, kHostTid, "thread 1001 (python)");
    process(device, "openreg " + std::to_string(device), kDeviceSortBase + device);
    for (int64_t s : streams) thread(device, s, "stream " + std::to_string(s));
    return *this;
  }

  TraceBuilder& span(int64_t ts, int64_t dur) {
    return raw(
        R"({"ph":"X","cat":"Trace","ts":)" + us(ts) + R"(,"dur":)" + us(dur) +
        R"json(,"pid":"Spans","tid":"PyTorch Profiler","name":"PyTorch Profiler (0)","args":{"Op count":0}})json");
  }

  // Metrics of a kernel as openreg writes them (cat cuda_profiler_range, on the
  // kernel's row with its ts and dur); `args` is the args object's inside.
  TraceBuilder& metrics(const std::string& name, int64_t ts, int64_t dur, int64_t device, int64_t tid,
                        const std::string& args) {
    return raw(R"({"ph":"X","cat":"cuda_profiler_range","name":")" + name + R"(","pid":)" + std::to_string(device) +
               R"(,"tid":)" + std::to_string(tid) + R"(,"ts":)" + us(ts) + R"(,"dur":)" + us(dur) + R"(,"args":{)" +
               args + "}}");
  }

  // One sample of a counter track; `args` is the args object's inside ({series: value}).
  TraceBuilder& counter(const std::string& name, int64_t ts, int64_t device, const std::string& args,
                        const std::string& cat = "mtia_counters") {
    return raw(R"({"ph":"C","cat":")" + cat + R"(","name":")" + name + R"(","pid":)" + std::to_string(device) +
               R"(,"tid":0,"ts":)" + us(ts) + R"(,"args":{)" + args + "}}");
  }

  // The document's deviceProperties, as JSON text (default: an empty list).
  TraceBuilder& deviceProperties(const std::string& json) {
    deviceProperties_ = json;
    return *this;
  }

  // A top-level key of the document (metadata such as distributedInfo), its value as JSON text.
  TraceBuilder& metadata(const std::string& key, const std::string& json) {
    metadata_ += "  \"" + key + "\": " + json + ",\n";
    return *this;
  }

  std::string json() const {
    std::string out = "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": " + deviceProperties_ +
                      ",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": 1700000000000000000,\n" +
                      metadata_ + "  \"traceEvents\": [";
    for (size_t i = 0; i < events_.size(); ++i) {
      out += i ? ",\n  " : "\n  ";
      out += events_[i];
    }
    out += "\n  ],\n  \"traceName\": \"test.json\"\n}";
    return out;
  }

  std::unique_ptr<Trace> load(const LoadOptions& options = {}) const {
    std::string text = json();
    return loadTraceBuffer(text.data(), text.size(), options);
  }

  static std::string us(int64_t ns) { return formatUs(ns); }

 private:
  std::vector<std::string> events_;
  std::string metadata_;
  std::string deviceProperties_ = "[]";
};

// A host that launches faster than the device runs (times in us): steps 1-3 are
// 10 us host ranges at 0, 10 and 20, each launching (at +1) a 25 us kernel that
// runs, on one stream, at 2-27, 27-52 and 52-77. Step 4 (30-100) launches a
// 10 us kernel at 31 (run at 77-87) and synchronises: the lag runs out.
inline TraceBuilder laggingLoop() {
  constexpr int64_t kUs = 1000;
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 100 * kUs);
  const int64_t hostStart[] = {0, 10, 20, 30}, hostDur[] = {10, 10, 10, 70};
  const int64_t kernelStart[] = {2, 27, 52, 77}, kernelDur[] = {25, 25, 25, 10};
  for (int k = 0; k < 4; ++k) {
    const int64_t id = 10 + k, correlation = 100 + k;
    b.op("ProfilerStep#" + std::to_string(k + 1), hostStart[k] * kUs, hostDur[k] * kUs, id * 10, "user_annotation");
    b.op("aten::mm", (hostStart[k] + 1) * kUs, 2 * kUs, id);
    b.runtime("orLaunchKernel", (hostStart[k] + 1) * kUs, 1 * kUs, correlation, id);
    b.kernel("gemm", kernelStart[k] * kUs, kernelDur[k] * kUs, 0, 7, correlation, id);
  }
  b.op("aten::synchronize", 32 * kUs, 56 * kUs, 20).runtime("orDeviceSynchronize", 32 * kUs, 56 * kUs, 200, 20);
  return b;
}

}  // namespace openreg::trace::testing
