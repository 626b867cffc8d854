#include "record_parser.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

using namespace openreg::profiler;

namespace {

// A minimal reader with the contract of orActivityGetNextRecord.
orError_t nextRecord(const uint8_t* buffer, size_t validSize, const orActivityRecord** record) {
  size_t offset = 0;
  if (*record != nullptr) {
    offset = static_cast<size_t>(reinterpret_cast<const uint8_t*>(*record) - buffer) + (*record)->size;
  }
  if (offset >= validSize) return orErrorMaxLimitReached;
  auto* next = reinterpret_cast<const orActivityRecord*>(buffer + offset);
  if (next->size < 8 || next->size % 8 != 0 || next->size > validSize - offset) return orErrorInvalidValue;
  *record = next;
  return orSuccess;
}

struct Writer {
  alignas(8) uint8_t bytes[4096] = {};
  size_t used = 0;

  template <typename T>
  void put(T record, orActivityKind kind, size_t extra = 0) {
    record.header.kind = kind;
    record.header.size = static_cast<uint32_t>(sizeof(T) + extra);
    std::memcpy(bytes + used, &record, sizeof(T));
    std::memset(bytes + used + sizeof(T), 0xCD, extra);
    used += sizeof(T) + extra;
  }
  // The first layout of a record whose later fields were appended.
  template <typename T>
  void putPrefix(T record, orActivityKind kind, size_t size) {
    record.header.kind = kind;
    record.header.size = static_cast<uint32_t>(size);
    std::memcpy(bytes + used, &record, size);
    used += size;
  }
  void raw(uint32_t kind, uint32_t size) {
    orActivityRecord h{kind, size};
    std::memcpy(bytes + used, &h, sizeof(h));
    used += size;
  }
};

}  // namespace

// Kernels share their launch shape: one entry per distinct shape, and a
// merged set points each kernel at its own shape.
TEST(RecordParser, KeepsEachLaunchShapeOnce) {
  Writer w;
  orActivityKernel k{};
  k.name = "gemm";
  k.grid = {8, 1, 1};
  k.block = {128, 1, 1};
  k.sharedMemBytes = 64;
  k.streamPriority = -1;
  for (uint64_t i = 1; i <= 3; ++i) {
    k.correlationId = i;
    w.put(k, OR_ACTIVITY_KIND_KERNEL);
  }
  k.grid = {9, 1, 1};
  k.correlationId = 4;
  w.put(k, OR_ACTIVITY_KIND_KERNEL);
  RecordSet out;
  parseBuffer(&nextRecord, w.bytes, w.used, out);
  ASSERT_EQ(out.deviceOps.size(), 4u);
  EXPECT_EQ(out.launchShapes.size(), 2u);
  EXPECT_EQ(out.launchShapeOf(out.deviceOps[0]), out.launchShapeOf(out.deviceOps[2]));
  const LaunchShape* last = out.launchShapeOf(out.deviceOps[3]);
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->grid[0], 9u);
  EXPECT_EQ(last->block[0], 128u);
  EXPECT_EQ(last->sharedMemBytes, 64u);
  EXPECT_EQ(last->streamPriority, -1);

  RecordSet other;
  Writer v;
  k.grid = {7, 2, 1};
  k.correlationId = 5;
  v.put(k, OR_ACTIVITY_KIND_KERNEL);
  parseBuffer(&nextRecord, v.bytes, v.used, other);
  out.append(std::move(other));
  ASSERT_EQ(out.deviceOps.size(), 5u);
  EXPECT_EQ(out.launchShapes.size(), 3u);
  ASSERT_NE(out.launchShapeOf(out.deviceOps[4]), nullptr);
  EXPECT_EQ(out.launchShapeOf(out.deviceOps[4])->grid[1], 2u);
  // Other kinds have none, whatever their storage holds.
  DeviceOp copy;
  copy.kind = DeviceOpKind::Memcpy;
  copy.bytes = 1;
  EXPECT_EQ(out.launchShapeOf(copy), nullptr);
}

TEST(RecordParser, CopiesEveryKnownKind) {
  Writer w;
  orActivityKernel k{};
  k.device = 1;
  k.streamId = 3;
  k.correlationId = 1ull << 40;
  k.start = 10;
  k.end = 20;
  k.name = "gemm";
  k.grid = {2, 3, 4};
  w.put(k, OR_ACTIVITY_KIND_KERNEL);
  orActivityMemcpy m{};
  m.copyKind = OR_ACTIVITY_MEMCPY_DTOH;
  m.bytes = 4096;
  m.correlationId = 7;
  w.put(m, OR_ACTIVITY_KIND_MEMCPY);
  orActivityRuntime r{};
  r.correlationId = 7;
  r.name = "orMemcpyAsync";
  w.put(r, OR_ACTIVITY_KIND_RUNTIME);
  orActivityExternalCorrelation e{};
  e.externalKind = OR_EXTERNAL_CORRELATION_KIND_OPERATOR;
  e.externalId = 99;
  e.correlationId = 7;
  w.put(e, OR_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  e.externalKind = OR_EXTERNAL_CORRELATION_KIND_USER;
  e.externalId = 5;
  w.put(e, OR_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  orActivityClockSync c{};
  c.device = 1;
  c.hostTimestamp = 100;
  c.deviceTimestamp = 200;
  w.put(c, OR_ACTIVITY_KIND_CLOCK_SYNC);
  orActivitySynchronization s{};
  s.clockDomain = OR_ACTIVITY_CLOCK_DEVICE;
  s.syncType = OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT;
  w.put(s, OR_ACTIVITY_KIND_SYNCHRONIZATION);
  s.clockDomain = OR_ACTIVITY_CLOCK_HOST;
  s.syncType = OR_ACTIVITY_SYNC_STREAM;
  w.put(s, OR_ACTIVITY_KIND_SYNCHRONIZATION);

  RecordSet out;
  parseBuffer(&nextRecord, w.bytes, w.used, out);
  EXPECT_EQ(out.recordsParsed, 8u);
  ASSERT_EQ(out.deviceOps.size(), 3u);
  EXPECT_EQ(out.deviceOps[0].kind, DeviceOpKind::Kernel);
  EXPECT_EQ(out.deviceOps[0].correlationId, 1ull << 40);
  EXPECT_STREQ(out.deviceOps[0].name, "gemm");
  ASSERT_NE(out.launchShapeOf(out.deviceOps[0]), nullptr);
  EXPECT_EQ(out.launchShapeOf(out.deviceOps[0])->grid[2], 4u);
  EXPECT_EQ(out.deviceOps[1].kind, DeviceOpKind::Memcpy);
  EXPECT_EQ(out.deviceOps[1].bytes, 4096u);
  EXPECT_EQ(out.deviceOps[2].kind, DeviceOpKind::StreamWait);
  ASSERT_EQ(out.hostSyncs.size(), 1u);
  ASSERT_EQ(out.runtimeCalls.size(), 1u);
  ASSERT_EQ(out.external.size(), 2u);
  EXPECT_EQ(out.external[0].correlationId, 7u);
  EXPECT_EQ(out.external[0].externalId, 99u);
  EXPECT_EQ(out.external[0].kind, static_cast<uint32_t>(OR_EXTERNAL_CORRELATION_KIND_OPERATOR));
  EXPECT_EQ(out.external[1].externalId, 5u);
  EXPECT_EQ(out.external[1].kind, static_cast<uint32_t>(OR_EXTERNAL_CORRELATION_KIND_USER));
  EXPECT_EQ(out.clock.at(1).front().device, 200u);
}

// A newer runtime appends fields and kinds; both are read or skipped by size.
TEST(RecordParser, SkipsUnknownKindsAndReadsLongerRecords) {
  Writer w;
  w.raw(77, 40);
  orActivityKernel k{};
  k.correlationId = 3;
  k.name = "k";
  w.put(k, OR_ACTIVITY_KIND_KERNEL, 16);
  RecordSet out;
  parseBuffer(&nextRecord, w.bytes, w.used, out);
  EXPECT_EQ(out.unknownKinds, 1u);
  ASSERT_EQ(out.deviceOps.size(), 1u);
  EXPECT_EQ(out.deviceOps[0].correlationId, 3u);
}

// A kernel's annotation belongs to its launch shape; a record from a library
// that predates the field (its first layout) reads as having none.
TEST(RecordParser, KernelAnnotationsAreReadWhenTheRecordHasThem) {
  Writer w;
  orActivityKernel k{};
  k.name = "cpp_fused_add_0";
  k.annotation = "\"source_lines\": [\"m.py:1\"]";
  k.correlationId = 1;
  w.put(k, OR_ACTIVITY_KIND_KERNEL);
  k.correlationId = 2;
  w.putPrefix(k, OR_ACTIVITY_KIND_KERNEL, offsetof(orActivityKernel, annotation));
  RecordSet out;
  parseBuffer(&nextRecord, w.bytes, w.used, out);
  EXPECT_EQ(out.truncatedRecords, 0u);
  ASSERT_EQ(out.deviceOps.size(), 2u);
  ASSERT_NE(out.launchShapeOf(out.deviceOps[0]), nullptr);
  EXPECT_STREQ(out.launchShapeOf(out.deviceOps[0])->annotation, k.annotation);
  ASSERT_NE(out.launchShapeOf(out.deviceOps[1]), nullptr);
  EXPECT_EQ(out.launchShapeOf(out.deviceOps[1])->annotation, nullptr);
  EXPECT_EQ(out.launchShapes.size(), 2u);
}

TEST(RecordParser, CountsTruncatedRecordsAndMalformedBuffers) {
  Writer w;
  w.raw(OR_ACTIVITY_KIND_KERNEL, 16);   // far shorter than a kernel record
  w.raw(OR_ACTIVITY_KIND_RUNTIME, 12);  // size not a multiple of 8: stops iteration
  RecordSet out;
  parseBuffer(&nextRecord, w.bytes, w.used, out);
  EXPECT_EQ(out.truncatedRecords, 1u);
  EXPECT_EQ(out.malformedBuffers, 1u);
  EXPECT_TRUE(out.deviceOps.empty());
}

TEST(RecordParser, AppendKeepsExternalRecordsInOrder) {
  RecordSet a, b;
  a.external.push_back({1, 10, OR_EXTERNAL_CORRELATION_KIND_OPERATOR});
  b.external.push_back({1, 20, OR_EXTERNAL_CORRELATION_KIND_USER});
  b.deviceOps.push_back(DeviceOp{});
  b.recordsParsed = 3;
  a.append(std::move(b));
  ASSERT_EQ(a.external.size(), 2u);
  EXPECT_EQ(a.external[0].externalId, 10u);
  EXPECT_EQ(a.external[1].externalId, 20u);
  EXPECT_EQ(a.deviceOps.size(), 1u);
  EXPECT_EQ(a.recordsParsed, 3u);
}

TEST(RecordParser, CommunicationKeepsItsPayloadInTheSideTable) {
  Writer w;
  orActivityCommunication c{};
  c.device = 1;
  c.streamId = 5;
  c.correlationId = 99;
  c.start = 100;
  c.end = 200;
  c.name = "openregComm_SendRecv_bf16";
  c.collective = "send";
  c.dataType = "bf16";
  c.groupName = "3";
  c.count = 10;
  c.bytes = 20;
  c.sequence = 4;
  c.groupSize = 2;
  c.rank = 0;
  c.peer = 1;
  w.put(c, OR_ACTIVITY_KIND_COMMUNICATION);
  w.put(c, OR_ACTIVITY_KIND_COMMUNICATION, 16);  // a later version, longer
  RecordSet out;
  parseBuffer(nextRecord, w.bytes, w.used, out);
  ASSERT_EQ(out.deviceOps.size(), 2u);
  ASSERT_EQ(out.communications.size(), 2u);
  const DeviceOp& op = out.deviceOps[1];
  EXPECT_EQ(op.kind, DeviceOpKind::Communication);
  EXPECT_EQ(op.device, 1);
  EXPECT_EQ(op.stream, 5u);
  EXPECT_EQ(op.correlationId, 99u);
  EXPECT_EQ(op.bytes, 20u);
  EXPECT_STREQ(op.name, "openregComm_SendRecv_bf16");
  const CommunicationInfo* info = out.communicationOf(op);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info, &out.communications[1]);
  EXPECT_STREQ(info->collective, "send");
  EXPECT_STREQ(info->dataType, "bf16");
  EXPECT_STREQ(info->groupName, "3");
  EXPECT_EQ(info->count, 10u);
  EXPECT_EQ(info->sequence, 4u);
  EXPECT_EQ(info->peer, 1);
  // Appending another set rebases its ops onto the merged side table.
  RecordSet merged;
  RecordSet first;
  parseBuffer(nextRecord, w.bytes, w.used, first);
  merged.append(std::move(first));
  merged.append(std::move(out));
  ASSERT_EQ(merged.communications.size(), 4u);
  EXPECT_EQ(merged.communicationOf(merged.deviceOps[3]), &merged.communications[3]);
  orActivityRecord shortRecord{OR_ACTIVITY_KIND_COMMUNICATION, 16};
  Writer t;
  std::memcpy(t.bytes, &shortRecord, sizeof(shortRecord));
  t.used = 16;
  RecordSet truncated;
  parseBuffer(nextRecord, t.bytes, t.used, truncated);
  EXPECT_EQ(truncated.truncatedRecords, 1u);
  EXPECT_TRUE(truncated.deviceOps.empty());
}

TEST(RecordParser, SyncRecordsCarryTheRecordTheyWaitedOnAndOlderOnesReadAsUnknown) {
  Writer w;
  orActivitySynchronization s{};
  s.clockDomain = OR_ACTIVITY_CLOCK_DEVICE;
  s.syncType = OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT;
  s.eventId = 6;
  s.recordCorrelationId = 41;
  s.recordStreamId = 2;
  w.put(s, OR_ACTIVITY_KIND_SYNCHRONIZATION);
  s.clockDomain = OR_ACTIVITY_CLOCK_HOST;
  s.syncType = OR_ACTIVITY_SYNC_EVENT;
  s.threadId = 77;
  s.start = 100;
  s.end = 200;
  w.put(s, OR_ACTIVITY_KIND_SYNCHRONIZATION);
  // A runtime from before the record grew: its layout ends at `end`.
  w.putPrefix(s, OR_ACTIVITY_KIND_SYNCHRONIZATION, offsetof(orActivitySynchronization, recordCorrelationId));

  RecordSet out;
  parseBuffer(&nextRecord, w.bytes, w.used, out);
  EXPECT_EQ(out.truncatedRecords, 0u);
  ASSERT_EQ(out.deviceOps.size(), 1u);
  const EventWait* wait = out.eventWaitOf(out.deviceOps[0]);
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->eventId, 6u);
  EXPECT_EQ(wait->recordCorrelationId, 41u);
  EXPECT_EQ(wait->recordStreamId, 2u);
  ASSERT_EQ(out.hostSyncs.size(), 2u);
  EXPECT_EQ(out.hostSyncs[0].threadId, 77u);
  EXPECT_EQ(out.hostSyncs[0].start, 100u);
  EXPECT_EQ(out.hostSyncs[0].end, 200u);
  EXPECT_EQ(out.hostSyncs[0].recordCorrelationId, 41u);
  EXPECT_EQ(out.hostSyncs[1].recordCorrelationId, 0u) << "absent from the older layout";
  EXPECT_EQ(out.hostSyncs[1].recordStreamId, 0u);
}
