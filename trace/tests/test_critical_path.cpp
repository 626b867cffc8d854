// The critical path on constructed traces whose path is known by hand:
// device-bound and host-bound steps, a kernel waiting on another stream, a
// sync blocking the host, a rank arriving late at an all_reduce (two rank
// traces), MTIA's categories, what-if and the errors. Times in the comments
// are microseconds.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "critical_path.h"
#include "trace_builder.h"

namespace openreg::trace {
namespace {

using testing::kHostPid;
using testing::kHostTid;
using testing::TraceBuilder;

constexpr int64_t kUs = 1'000;

// The path as "name@s" / "name@e" points (prefixed by the rank over several traces).
std::vector<std::string> points(const CpGraph& g, const CpPath& p) {
  std::vector<std::string> out;
  auto name = [&](uint32_t n) {
    const CpEvent& e = g.events[g.nodes[n].event];
    std::string s = std::string(g.traces[e.rank]->str(g.slice(e).name)) + (g.nodes[n].isStart ? "@s" : "@e");
    return g.traces.size() > 1 ? std::to_string(e.rank) + ":" + s : s;
  };
  for (uint32_t i : p.edges) {
    if (out.empty()) out.push_back(name(g.edges[i].from));
    out.push_back(name(g.edges[i].to));
  }
  return out;
}

std::vector<CpEdgeType> types(const CpGraph& g, const CpPath& p) {
  std::vector<CpEdgeType> out;
  for (uint32_t i : p.edges) out.push_back(g.edges[i].type);
  return out;
}

TraceBuilder& runtimeCat(TraceBuilder& b, const std::string& cat, const std::string& name, int64_t ts, int64_t dur,
                         int64_t correlation, int64_t externalId) {
  return b.raw(R"({"ph":"X","cat":")" + cat + R"(","name":")" + name + R"(","pid":)" + std::to_string(kHostPid) +
               R"(,"tid":)" + std::to_string(kHostTid) + R"(,"ts":)" + TraceBuilder::us(ts) + R"(,"dur":)" +
               TraceBuilder::us(dur) + R"(,"args":{"External id":)" + std::to_string(externalId) +
               R"(,"correlation":)" + std::to_string(correlation) + "}}");
}

// Device-bound: two 40 us kernels queued back to back, then the host waits
// for the stream. Categories are openreg's unless MTIA's are asked for
// (mtia_runtime calls, mtia_ccp_events work: inferred device work).
TraceBuilder deviceBound(bool mtia = false) {
  const std::string rt = mtia ? "mtia_runtime" : "privateuse1_runtime";
  const std::string dev = mtia ? "mtia_ccp_events" : "kernel";
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 100 * kUs);
  b.op("ProfilerStep#1", 0, 100 * kUs, 1, "user_annotation");
  b.op("aten::mm", 1 * kUs, 10 * kUs, 2);
  runtimeCat(b, rt, "launch", 2 * kUs, 3 * kUs, 101, 2);
  b.kernel("gemm", 6 * kUs, 40 * kUs, 0, 7, 101, 2, dev);
  b.op("aten::mm", 12 * kUs, 10 * kUs, 3);
  runtimeCat(b, rt, "launch", 13 * kUs, 3 * kUs, 102, 3);
  b.kernel("gemm2", 46 * kUs, 40 * kUs, 0, 7, 102, 3, dev);
  b.op("aten::item", 23 * kUs, 67 * kUs, 4);
  runtimeCat(b, rt, "streamSynchronize", 24 * kUs, 65 * kUs, 103, 4);
  b.sync("Stream Sync", 24 * kUs, 65 * kUs, 0, 7, 103);
  return b;
}

CpOptions step1() {
  CpOptions o;
  o.step = 1;
  return o;
}

TEST(CriticalPath, DeviceBoundStepRunsThroughTheKernelsAndTheSync) {
  for (bool mtia : {false, true}) {
    SCOPED_TRACE(mtia ? "mtia" : "openreg");
    auto t = deviceBound(mtia).load();
    const CpGraph g = buildCriticalPathGraph({t.get()}, step1());
    const CpPath p = longestPath(g);
    EXPECT_EQ(p.length, 86 * kUs);
    EXPECT_EQ(points(g, p), (std::vector<std::string>{"aten::mm@s", "launch@s", "gemm@s", "gemm@e", "gemm2@s",
                                                      "gemm2@e", "streamSynchronize@e", "aten::item@e"}));
    EXPECT_EQ(types(g, p), (std::vector<CpEdgeType>{CpEdgeType::Operator, CpEdgeType::LaunchDelay, CpEdgeType::Operator,
                                                    CpEdgeType::KernelKernel, CpEdgeType::Operator, CpEdgeType::Sync,
                                                    CpEdgeType::Operator}));
  }
}

TEST(CriticalPath, HostBoundStepStaysOnTheHost) {
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 100 * kUs);
  b.op("ProfilerStep#1", 0, 100 * kUs, 1, "user_annotation");
  b.op("A", 0, 40 * kUs, 2).runtime("orLaunchKernel", 1 * kUs, 2 * kUs, 1, 2);
  b.kernel("k1", 4 * kUs, 2 * kUs, 0, 7, 1, 2);
  b.op("B", 40 * kUs, 50 * kUs, 3).runtime("orLaunchKernel", 85 * kUs, 2 * kUs, 2, 3);
  b.kernel("k2", 88 * kUs, 1 * kUs, 0, 7, 2, 3);
  auto t = b.load();
  const CpGraph g = buildCriticalPathGraph({t.get()}, step1());
  const CpPath p = longestPath(g);
  EXPECT_EQ(p.length, 90 * kUs);
  EXPECT_EQ(points(g, p), (std::vector<std::string>{"A@s", "orLaunchKernel@s", "orLaunchKernel@e", "A@e", "B@s",
                                                    "orLaunchKernel@s", "orLaunchKernel@e", "B@e"}));
}

// stream 7: kA [5, 105]; stream 8: kB [105, 125] waits (Stream Wait Event) for
// the record after kA; kC [30, 40] on stream 9 is off the path; a device
// synchronize [32, 129] inside op S [31, 130] waits for everything.
TraceBuilder crossStream() {
  TraceBuilder b;
  b.lanes(0, {7, 8, 9}).span(0, 200 * kUs);
  b.op("ProfilerStep#1", 0, 200 * kUs, 1, "user_annotation");
  b.op("A", 1 * kUs, 10 * kUs, 2).runtime("orLaunchKernel", 2 * kUs, 2 * kUs, 1, 2);
  b.kernel("kA", 5 * kUs, 100 * kUs, 0, 7, 1, 2);
  b.op("R", 12 * kUs, 4 * kUs, 3).runtime("orEventRecord", 13 * kUs, 1 * kUs, 2, 3);
  b.op("W", 17 * kUs, 4 * kUs, 4).runtime("orStreamWaitEvent", 18 * kUs, 1 * kUs, 3, 4);
  b.sync("Stream Wait Event", 18 * kUs, 1 * kUs, 0, 8, 3, TraceBuilder::waitArgs(7, 2, 77));
  b.op("B", 22 * kUs, 8 * kUs, 5).runtime("orLaunchKernel", 23 * kUs, 2 * kUs, 4, 5);
  b.kernel("kB", 105 * kUs, 20 * kUs, 0, 8, 4, 5);
  b.runtime("orLaunchKernel", 26 * kUs, 2 * kUs, 6, 5);
  b.kernel("kC", 30 * kUs, 10 * kUs, 0, 9, 6, 5);
  b.op("S", 31 * kUs, 99 * kUs, 6).runtime("orDeviceSynchronize", 32 * kUs, 97 * kUs, 5, 6);
  b.sync("Context Sync", 32 * kUs, 97 * kUs, 0, -1, 5);
  return b;
}

TEST(CriticalPath, KernelWaitingOnAnotherStreamAndASyncBlockingTheHost) {
  auto t = crossStream().load();
  const CpGraph g = buildCriticalPathGraph({t.get()}, step1());
  const CpPath p = longestPath(g);
  EXPECT_EQ(p.length, 125 * kUs);
  EXPECT_EQ(points(g, p), (std::vector<std::string>{"A@s", "orLaunchKernel@s", "kA@s", "kA@e", "kB@s", "kB@e",
                                                    "orDeviceSynchronize@e", "S@e"}));
  EXPECT_EQ(types(g, p),
            (std::vector<CpEdgeType>{CpEdgeType::Operator, CpEdgeType::LaunchDelay, CpEdgeType::Operator,
                                     CpEdgeType::Sync, CpEdgeType::Operator, CpEdgeType::Sync, CpEdgeType::Operator}));
  // The blocking call's own 97 us are not path time: the device's are.
  for (const CpEdge& e : g.edges)
    if (e.event >= 0 && g.traces[0]->str(g.slice(g.events[e.event]).name) == "orDeviceSynchronize")
      EXPECT_EQ(e.weight, 0);
}

// An event synchronize [18, 65] waits for kA [5, 60], recorded on stream 7.
TEST(CriticalPath, EventSyncBlocksTheHostUntilTheRecordedWork) {
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 100 * kUs);
  b.op("ProfilerStep#1", 0, 100 * kUs, 1, "user_annotation");
  b.op("A", 1 * kUs, 10 * kUs, 2).runtime("orLaunchKernel", 2 * kUs, 2 * kUs, 1, 2);
  b.kernel("kA", 5 * kUs, 55 * kUs, 0, 7, 1, 2);
  b.op("R", 12 * kUs, 4 * kUs, 3).runtime("orEventRecord", 13 * kUs, 1 * kUs, 2, 3);
  b.op("E", 17 * kUs, 53 * kUs, 4).runtime("orEventSynchronize", 18 * kUs, 47 * kUs, 3, 4);
  b.sync("Event Sync", 18 * kUs, 47 * kUs, 0, -1, 3, TraceBuilder::waitArgs(7, 2, 5));
  auto t = b.load();
  const CpGraph g = buildCriticalPathGraph({t.get()}, step1());
  const CpPath p = longestPath(g);
  EXPECT_EQ(p.length, 64 * kUs);
  EXPECT_EQ(points(g, p),
            (std::vector<std::string>{"A@s", "orLaunchKernel@s", "kA@s", "kA@e", "orEventSynchronize@e", "E@e"}));
}

// A DtoH copy queued behind kA [5, 50] on the stream runs [50, 52]; its call [13, 58] returns after it: the host
// waited for the copy (and so for kA), whatever the call is named.
TEST(CriticalPath, ACopyItsCallWaitedForIsASync) {
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 100 * kUs);
  b.op("ProfilerStep#1", 0, 100 * kUs, 1, "user_annotation");
  b.op("A", 1 * kUs, 10 * kUs, 2).runtime("orLaunchKernel", 2 * kUs, 2 * kUs, 1, 2);
  b.kernel("kA", 5 * kUs, 45 * kUs, 0, 7, 1, 2);
  b.op("aten::item", 12 * kUs, 48 * kUs, 3).runtime("orMemcpyAsync", 13 * kUs, 45 * kUs, 2, 3);
  b.kernel("Memcpy DtoH (Device -> Host)", 50 * kUs, 2 * kUs, 0, 7, 2, 3, "gpu_memcpy");
  auto t = b.load();
  const CpGraph g = buildCriticalPathGraph({t.get()}, step1());
  const CpPath p = longestPath(g);
  EXPECT_EQ(p.length, 53 * kUs);
  EXPECT_EQ(points(g, p),
            (std::vector<std::string>{"A@s", "orLaunchKernel@s", "kA@s", "kA@e", "Memcpy DtoH (Device -> Host)@s",
                                      "Memcpy DtoH (Device -> Host)@e", "orMemcpyAsync@e", "aten::item@e"}));
}

TEST(CriticalPath, WhatIfOffThePathChangesNothingOnItSavesAtMostItsTime) {
  auto t = crossStream().load();
  const CpGraph g = buildCriticalPathGraph({t.get()}, step1());
  EXPECT_EQ(longestPath(g, whatIfWeights(g, {"kC", 10})).length, 125 * kUs);
  EXPECT_EQ(longestPath(g, whatIfWeights(g, {"kA", 2})).length, 75 * kUs);   // kA: 100 -> 50 us
  EXPECT_EQ(longestPath(g, whatIfWeights(g, {"kB", 4})).length, 110 * kUs);  // kB: 20 -> 5 us
  auto d = deviceBound().load();
  const CpGraph h = buildCriticalPathGraph({d.get()}, step1());
  EXPECT_EQ(longestPath(h, whatIfWeights(h, {"kind:kernel", 2})).length, 46 * kUs);
  EXPECT_THROW(whatIfWeights(h, {"kind:gpu", 2}), std::invalid_argument);
}

// Rank 1 computes 80 us before its all_reduce, so rank 0 (which arrived at
// 15 us) waits until 90 us; the path runs on rank 1 to the collective, then on
// rank 0 (whose sync and op end last).
std::string rankTrace(int rank, int64_t o = 0, int step = 1, bool broadcastFirst = false) {
  TraceBuilder b;
  b.lanes(0, {7, 9}).span(o, 200 * kUs);
  b.op("ProfilerStep#" + std::to_string(step), o, 200 * kUs, 1, "user_annotation");
  if (broadcastFirst) {  // 0.5 us of work, rank 1 arrives 1 us after rank 0
    const std::string bcast = R"("Collective name":"broadcast","Process Group Name":"0","Seq":2,"dtype":"Float",)"
                              R"("In msg nelems":16,"Out msg nelems":16,"Group size":2,"device":0,"stream":9,)"
                              R"("correlation":9,"External id":8)";
    b.op("c10d::broadcast_", o + 200, 500, 8).runtime("orLaunchCollective", o + 300, 200, 9, 8);
    b.kernel("ncclDevKernel_Broadcast", o + (rank == 0 ? 600 : 1600), 500, 0, 9, 9, 8, "kernel", bcast);
  }
  const std::string comm = R"("Collective name":"allreduce","Process Group Name":"0","Seq":3,"dtype":"Float",)"
                           R"("In msg nelems":1024,"Out msg nelems":1024,"Group size":2,"device":0,"stream":9,)"
                           R"("correlation":1,"External id":3)";
  if (rank == 0) {
    b.op("c10d::allreduce_", o + 10 * kUs, 4 * kUs, 3).runtime("orLaunchCollective", o + 11 * kUs, 2 * kUs, 1, 3);
    b.kernel("ncclDevKernel_AllReduce_Sum_f32", o + 15 * kUs, 100 * kUs, 0, 9, 1, 3, "kernel", comm);
    b.op("sync", o + 120 * kUs, 50 * kUs, 4).runtime("orStreamSynchronize", o + 121 * kUs, 38 * kUs, 2, 4);
    b.sync("Stream Sync", o + 121 * kUs, 38 * kUs, 0, 9, 2);
  } else {
    b.op("compute", o + 1 * kUs, 80 * kUs, 2);
    b.op("c10d::allreduce_", o + 82 * kUs, 4 * kUs, 3).runtime("orLaunchCollective", o + 83 * kUs, 2 * kUs, 1, 3);
    b.kernel("ncclDevKernel_AllReduce_Sum_f32", o + 90 * kUs, 25 * kUs, 0, 9, 1, 3, "kernel", comm);
    b.op("sync", o + 120 * kUs, 30 * kUs, 4).runtime("orStreamSynchronize", o + 121 * kUs, 28 * kUs, 2, 4);
    b.sync("Stream Sync", o + 121 * kUs, 28 * kUs, 0, 9, 2);
  }
  std::string text = b.json();
  return text.insert(
      1, "\"distributedInfo\": {\"backend\": \"orccl\", \"rank\": " + std::to_string(rank) + ", \"world_size\": 2},\n");
}

std::unique_ptr<Trace> load(const std::string& text) { return loadTraceBuffer(text.data(), text.size(), {}); }

TEST(CriticalPath, LateRankAtAnAllReduceCarriesThePathAcrossRanks) {
  auto r0 = load(rankTrace(0)), r1 = load(rankTrace(1));
  const CpGraph g = buildCriticalPathGraph({r0.get(), r1.get()}, step1());
  const CpPath p = longestPath(g);
  EXPECT_EQ(p.length, 124 * kUs);  // rank 1: 80 + 1 + 7 (launch) ; 25 (the transfer after the last arrival) ; 11
  EXPECT_EQ(points(g, p),
            (std::vector<std::string>{"1:compute@s", "1:compute@e", "1:c10d::allreduce_@s", "1:orLaunchCollective@s",
                                      "1:ncclDevKernel_AllReduce_Sum_f32@s", "0:ncclDevKernel_AllReduce_Sum_f32@e",
                                      "0:orStreamSynchronize@e", "0:sync@e"}));
  ASSERT_EQ(g.collectives.size(), 1u);
  EXPECT_EQ(g.collectives[0].lastRank, 1u);
  EXPECT_EQ(g.collectives[0].seq, 3);
  EXPECT_EQ(g.collectives[0].lastArrival - g.nodes[g.events[g.collectives[0].events[0]].startNode].ts, 75 * kUs);
  // One trace alone: rank 0's 100 us collective is its own path.
  const CpGraph one = buildCriticalPathGraph({r0.get()}, step1());
  EXPECT_EQ(longestPath(one).length, 1 * kUs + 4 * kUs + 100 * kUs + 11 * kUs);
}

// A broadcast (Seq 2) before the all_reduce (Seq 3), rank 1 last at both:
// listed in the order they ran, though "AllReduce" sorts first by name.
TEST(CriticalPath, CollectivesAreListedInTheOrderTheyRan) {
  auto r0 = load(rankTrace(0, 0, 1, true)), r1 = load(rankTrace(1, 0, 1, true));
  const CpGraph g = buildCriticalPathGraph({r0.get(), r1.get()}, step1());
  ASSERT_EQ(g.collectives.size(), 2u);
  EXPECT_EQ(g.collectives[0].seq, 2);
  EXPECT_EQ(g.collectives[0].lastRank, 1u);
  EXPECT_EQ(g.collectives[1].seq, 3);
  const std::string j = criticalPathJson({r0.get(), r1.get()}, step1());
  EXPECT_LT(j.find(R"("collective":"Broadcast")"), j.find(R"("collective":"AllReduce")")) << j;
}

TEST(CriticalPath, ReportJsonNamesTheBoundingRankAndTheWaits) {
  auto r0 = load(rankTrace(0)), r1 = load(rankTrace(1));
  CpOptions o = step1();
  o.whatIf.push_back({"compute", 2});
  const std::string j = criticalPathJson({r0.get(), r1.get()}, o);
  EXPECT_NE(j.find(R"("step":"ProfilerStep#1","step_ns":200000,"path_ns":124000)"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("bounding_rank":1,"start_rank":1,"end_rank":0)"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("last_rank":1,"waits_ns":[{"rank":0,"wait_ns":75000},{"rank":1,"wait_ns":0}],)"
                   R"("max_wait_ns":75000,"on_path":true,"crosses_ranks":true)"),
            std::string::npos)
      << j;
  // compute 80 -> 40 us: rank 1 arrives 40 us sooner; rank 0's own path (1 + 4 + 25 + 11 us) is shorter still.
  EXPECT_NE(j.find(R"("target":"compute","factor":2,"changed_edges":1,"path_ns":84000,"saved_ns":40000)"),
            std::string::npos)
      << j;
}

TEST(CriticalPath, EachStepInShort) {
  auto r0 = load(rankTrace(0)), r1 = load(rankTrace(1));
  CpOptions o;
  o.eachStep = true;
  o.top = 1;
  const std::string j = criticalPathJson({r0.get(), r1.get()}, o);
  EXPECT_EQ(j.rfind(R"({"steps":[{"step":"ProfilerStep#1","step_ns":200000,"path_ns":124000,"path_share":0.62,)"
                    R"("host_step_ns":200000,"lag_ns":0,"bounding_rank":1,"start_rank":1,"end_rank":0,)",
                    0),
            0u)
      << j;
  EXPECT_NE(j.find(R"("last_ranks":[1]}],"skipped":[]})"), std::string::npos) << j;
  TraceBuilder cpu;
  cpu.lanes(0, {7}).op("aten::add", 1 * kUs, 2 * kUs, 2).kernel("k", 2 * kUs, 1 * kUs, 0, 7, 1, 2);
  auto c = cpu.load();
  EXPECT_THROW(criticalPathJson({c.get()}, o), std::invalid_argument);  // no ProfilerStep at all
}

TEST(CriticalPath, KindsAddUpToTheStep) {
  auto t = deviceBound().load();
  const std::string j = criticalPathJson({t.get()}, step1());
  // host: aten::mm's 1 us before its launch + aten::item's 1 us after the sync; 4 us launch delay; 80 us of
  // kernels; the host returns 3 us after the work ends; 11 us outside the path.
  EXPECT_NE(j.find(R"("kinds":{"host_op":{"ns":2000,)"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("launch_overhead":{"ns":4000,)"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("kernel":{"ns":80000,"share":0.8})"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("sync_wait":{"ns":3000,)"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("idle":{"ns":11000,)"), std::string::npos) << j;
}

TEST(CriticalPath, ErrorsAreClearMessages) {
  auto t = deviceBound().load();
  CpOptions missing;
  missing.step = 7;
  try {
    buildCriticalPathGraph({t.get()}, missing);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "\"ProfilerStep#7\" is not in the trace: no host range of that name");
  }
  TraceBuilder cpu;
  cpu.op("ProfilerStep#1", 0, 10 * kUs, 1, "user_annotation").op("aten::add", 1 * kUs, 2 * kUs, 2);
  auto c = cpu.load();
  EXPECT_THROW(buildCriticalPathGraph({c.get()}, step1()), std::invalid_argument);
  // Rank 1 a second later: another run.
  auto r0 = load(rankTrace(0)), r1 = load(rankTrace(1, 1'000'000'000));
  try {
    buildCriticalPathGraph({r0.get(), r1.get()}, step1());
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "rank traces from different runs: rank 0 and rank 1 were not recorded at the same time (they start "
                 "at 0.000 us and 1000000.000 us)");
  }
  auto again = load(rankTrace(0));
  EXPECT_THROW(buildCriticalPathGraph({r0.get(), again.get()}, step1()), std::invalid_argument);
}

// Corrupted traces (random byte edits of the cross-stream trace and of a rank trace): the path is computed or a
// clear error is raised, never a crash (the sanitizer build runs this too).
TEST(CriticalPath, CorruptedTracesGiveAPathOrAnError) {
  std::mt19937 rng(20261205);
  const std::string alphabet = "{}[]\",:-.0123456789eE truefalsnl\\";
  for (const std::string& base : {crossStream().json(), rankTrace(1)}) {
    for (int round = 0; round < 300; ++round) {
      std::string text = base;
      for (int k = 0; k < 3; ++k) {
        const size_t at = std::uniform_int_distribution<size_t>(0, text.size() - 1)(rng);
        text[at] = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      }
      auto t = load(text);
      if (t->parseError) continue;
      CpOptions o = step1();
      o.whatIf.push_back({"kind:kernel", 2});
      try {
        EXPECT_FALSE(criticalPathJson({t.get()}, o).empty());
      } catch (const std::invalid_argument&) {
      } catch (const std::runtime_error&) {}
    }
  }
}

// Ranks out of step run a range at different times: still one run, the path is computed and a note says why the
// step spans both.
TEST(CriticalPath, ARangeTheRanksRanAtDifferentTimesIsOneRun) {
  auto r0 = load(rankTrace(0)), r1 = load(rankTrace(1));
  CpOptions o;
  o.range = "c10d::allreduce_";  // rank 0 at 10-14 us, rank 1 at 82-86 us
  const std::string j = criticalPathJson({r0.get(), r1.get()}, o);
  EXPECT_NE(j.find(R"(","the ranks' c10d::allreduce_ ranges do not all overlap in time)"), std::string::npos) << j;
  // 10 us to 86 us on the host; rank 1's all-reduce, launched at 83 us, runs until 115 us.
  EXPECT_NE(j.find(R"("step_ns":105000,"path_ns":33000,"traces":[0,1],"notes":["the step's work ends 0.029 ms after )"
                   R"(its host range (0.076 ms) does: the device runs behind the host)"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find(R"("path_share":0.3142857142857143,"host_step_ns":76000,"lag_ns":29000,)"), std::string::npos) << j;
}

// tensorboard_trace_handler writes a trace per rank and profiling cycle: the step is taken from the cycle that
// holds it, on every rank.
TEST(CriticalPath, ProfilingCyclesOfEachRankGiveTheStepsOwnTraces) {
  constexpr int64_t kSecond = 1'000'000'000;
  auto a0 = load(rankTrace(0, 0, 1)), b0 = load(rankTrace(0, kSecond, 2));
  auto a1 = load(rankTrace(1, 0, 1)), b1 = load(rankTrace(1, kSecond, 2));
  const std::vector<const Trace*> all{b0.get(), a1.get(), a0.get(), b1.get()};
  CpOptions o;
  o.step = 2;
  std::string j = criticalPathJson(all, o);
  EXPECT_NE(j.find(R"("step":"ProfilerStep#2","step_ns":200000,"path_ns":124000,"traces":[0,3],)"), std::string::npos)
      << j;
  j = criticalPathJson(all, CpOptions{});  // the first step of the first trace's rank, in time
  EXPECT_NE(j.find(R"("step":"ProfilerStep#1","step_ns":200000,"path_ns":124000,"traces":[2,1],)"), std::string::npos)
      << j;
  o = CpOptions{};
  o.range = "compute";  // once per cycle, on rank 1 only
  o.instance = 1;
  try {
    criticalPathJson(all, o);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "\"compute\" (instance 1) is not in rank 0's 2 traces: no host range of that name");
  }
  o = CpOptions{};
  o.eachStep = true;
  j = criticalPathJson(all, o);
  EXPECT_NE(j.find(R"({"steps":[{"step":"ProfilerStep#1",)"), std::string::npos) << j;
  EXPECT_NE(j.find(R"({"step":"ProfilerStep#2",)"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("skipped":[]})"), std::string::npos) << j;
  // Two runs' traces of rank 0 both hold ProfilerStep#1.
  auto again = load(rankTrace(0, 5 * kSecond, 1));
  try {
    criticalPathJson({a0.get(), a1.get(), again.get()}, step1());
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "rank traces from different runs: 2 of rank 0's 2 traces hold ProfilerStep#1 (give the traces of one "
                 "run)");
  }
  o = CpOptions{};
  o.wholeTrace = true;
  EXPECT_THROW(criticalPathJson(all, o), std::invalid_argument);
}

TEST(CriticalPath, NotesSayWhatTheNumbersCannotShow) {
  auto r0 = load(rankTrace(0));
  std::string j = criticalPathJson({r0.get()}, step1());
  EXPECT_NE(j.find(R"("notes":["1 of 2 ranks given (rank 0): at a collective the missing ranks' arrival is unknown)"),
            std::string::npos)
      << j;
  // A kernel launched in a 20 us step runs 80 us: the path follows it past the host range's end, and the step is
  // measured to the end of its work, so the path is never longer than the step.
  TraceBuilder b;
  b.lanes(0, {7}).span(0, 100 * kUs);
  b.op("ProfilerStep#1", 0, 20 * kUs, 1, "user_annotation").op("aten::mm", 1 * kUs, 10 * kUs, 2);
  runtimeCat(b, "privateuse1_runtime", "launch", 2 * kUs, 3 * kUs, 101, 2);
  b.kernel("gemm", 6 * kUs, 80 * kUs, 0, 7, 101, 2);
  auto t = b.load();
  j = criticalPathJson({t.get()}, step1());
  EXPECT_NE(j.find(R"("step_ns":86000,"path_ns":85000,"traces":[0],"notes":["the step's work ends 0.066 ms after )"
                   R"(its host range (0.020 ms) does: the device runs behind the host.)"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find(R"("path_share":0.9883720930232558,"host_step_ns":20000,"lag_ns":66000,)"), std::string::npos) << j;
}

TEST(CriticalPath, WhatIfNamesWhatTheStepHolds) {
  auto d = deviceBound().load();
  const CpGraph h = buildCriticalPathGraph({d.get()}, step1());
  try {
    whatIfWeights(h, {"gemm3", 2});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "what-if: no op or kernel named \"gemm3\" in ProfilerStep#1 (names are exact, as the tables of ops "
                 "and kernels print them)");
  }
  EXPECT_THROW(whatIfWeights(h, {"kind:idle", 2}), std::invalid_argument);
  EXPECT_THROW(whatIfWeights(h, {"kind:sync_wait", 2}), std::invalid_argument);
  EXPECT_NO_THROW(whatIfWeights(h, {"kind:copy", 2}));  // a kind the step lacks saves nothing
}

TEST(CriticalPath, OptionsAreChecked) {
  EXPECT_THROW(parseCpOptions(R"({"instance":2})"), std::invalid_argument);
  EXPECT_EQ(parseCpOptions(R"({"range":"fwd","instance":2})").instance, 2);
  EXPECT_EQ(parseCpOptions(R"({"what_if":[{"target":"gemm","factor":2.5}]})").whatIf[0].factor, 2.5);
  EXPECT_THROW(parseCpOptions(R"({"step":1,"range":"x"})"), std::invalid_argument);
  EXPECT_THROW(parseCpOptions(R"({"what_if":[{"target":"gemm","factor":0}]})"), std::invalid_argument);
  EXPECT_THROW(parseCpOptions(R"({"stpe":1})"), std::invalid_argument);
}

}  // namespace
}  // namespace openreg::trace
