// One fuzz case for the plugin's whole torch-free path: arbitrary bytes as
// an activity buffer → parseBuffer → prepareTrace → emitTrace → args.
//
// Everything in a record is taken from the input except its name pointers,
// which the activity API guarantees (they point at the runtime's strings);
// the harness points them at a few fixed names, hostile ones included.
// Besides "no crash, no UB, no hang" (the sanitizers' part), it checks what
// the trace must satisfy whatever the input: events end after they start,
// a stream row never holds overlapping work, correlation ids are unique,
// every flow end has its start. Returns what broke, or an empty string.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "record_parser.h"
#include "trace_builder.h"

namespace openreg::profiler::fuzz {

// The reader's contract (orActivityGetNextRecord): records of at least 8
// bytes, multiples of 8, inside validSize.
inline orError_t nextRecord(const uint8_t* buffer, size_t validSize, const orActivityRecord** record) {
  size_t offset = 0;
  if (*record != nullptr) {
    offset = static_cast<size_t>(reinterpret_cast<const uint8_t*>(*record) - buffer) + (*record)->size;
  }
  if (offset >= validSize) return orErrorMaxLimitReached;
  if (validSize - offset < sizeof(orActivityRecord)) return orErrorInvalidValue;
  auto* next = reinterpret_cast<const orActivityRecord*>(buffer + offset);
  if (next->size < 8 || next->size % 8 != 0 || next->size > validSize - offset) return orErrorInvalidValue;
  *record = next;
  return orSuccess;
}

inline const char* fuzzName(uint8_t pick) {
  static const char* const kNames[] = {
      nullptr, "", "gemm", "a \"quoted\" \\ name\t\n", "\xff\xfe utf-8 \xc3\xa9", "orLaunchKernel"};
  return kNames[pick % (sizeof(kNames) / sizeof(kNames[0]))];
}

inline const char* fuzzAnnotation(uint8_t pick) {
  static const char* const kAnnotations[] = {nullptr, "", "\"source_lines\": [\"m.py:1\"]",
                                             "\"fused_aten_ops\": [\"aten::add\", \"aten::mul\"]"};
  return kAnnotations[pick % (sizeof(kAnnotations) / sizeof(kAnnotations[0]))];
}

// Replaces the pointer at `offset` of a record by pick(the byte that was there).
inline void fixPointer(uint8_t* record, size_t offset, const char* (*pick)(uint8_t)) {
  const char* text = pick(record[offset]);
  std::memcpy(record + offset, &text, sizeof(text));
}

// Points the string fields of RUNTIME and KERNEL records that the parser
// reads (complete records; a kernel's annotation only when its record has
// one) at fixed strings.
inline void fixNames(uint8_t* buffer, size_t validSize) {
  const orActivityRecord* record = nullptr;
  while (nextRecord(buffer, validSize, &record) == orSuccess) {
    auto* bytes = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(record));
    if (record->kind == OR_ACTIVITY_KIND_RUNTIME && record->size >= sizeof(orActivityRuntime)) {
      fixPointer(bytes, offsetof(orActivityRuntime, name), fuzzName);
    } else if (record->kind == OR_ACTIVITY_KIND_KERNEL && record->size >= offsetof(orActivityKernel, annotation)) {
      fixPointer(bytes, offsetof(orActivityKernel, name), fuzzName);
      if (record->size >= sizeof(orActivityKernel)) {
        fixPointer(bytes, offsetof(orActivityKernel, annotation), fuzzAnnotation);
      }
    }
  }
}

inline int64_t readInt64(const uint8_t* data, size_t size, size_t at) {
  uint64_t value = 0;
  for (size_t i = 0; i < 8 && at + i < size; ++i) value |= static_cast<uint64_t>(data[at + i]) << (8 * i);
  return static_cast<int64_t>(value);
}

// Input: 1 byte of options, 8 + 8 + 8 bytes of window start, end and
// deferred start, 1 byte splitting the rest into two buffers, the buffers.
inline std::string runCase(const uint8_t* data, size_t size) {
  constexpr size_t kHeader = 26;
  if (size < kHeader) return {};
  const uint8_t flags = data[0];
  EmitOptions options;
  options.kernels = flags & 1;
  options.memcpy = flags & 2;
  options.memset = flags & 4;
  options.syncs = flags & 8;
  options.userAnnotations = flags & 16;
  options.runtime = flags & 32;
  options.windowStart = readInt64(data, size, 1);
  options.windowEnd = readInt64(data, size, 9);
  if (flags & 64) {  // the window most traces have: everything
    options.windowStart = INT64_MIN;
    options.windowEnd = INT64_MAX;
  }
  options.notBefore = (flags & 128) ? readInt64(data, size, 17) : 0;

  const size_t bodySize = size - kHeader;
  std::vector<uint64_t> storage(bodySize / 8 + 2);  // 8-byte aligned, like a client buffer
  auto* body = reinterpret_cast<uint8_t*>(storage.data());
  std::memcpy(body, data + kHeader, bodySize);
  const size_t split = (bodySize * data[25] / 255) / 8 * 8;

  RecordSet records;
  for (auto [begin, length] : {std::pair<size_t, size_t>{0, split}, {split, bodySize - split}}) {
    fixNames(body + begin, length);
    parseBuffer(&nextRecord, body + begin, length, records);
  }
  const PreparedTrace prepared = prepareTrace(records);

  std::string problem;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> rows;
  std::set<int32_t> deviceIds;
  std::set<uint32_t> flowStarts, flowEnds;
  EmitResult result;
  emitTrace(
      prepared, options, [](uint64_t id) { return std::optional<std::string>("range " + std::to_string(id)); }, result,
      [&](const TraceEvent& e) {
        if (e.end < e.start) problem = "an event ends before it starts";
        (void)eventArgs(e);  // formats every arg
        if (e.device != nullptr) {
          rows[{e.pid, e.tid}].push_back({e.start, e.end});
          if (e.id != 0 && !deviceIds.insert(e.id).second) problem = "a correlation id twice";
        }
        if (e.flowId != 0) (e.flowStart ? flowStarts : flowEnds).insert(e.flowId);
      });
  for (auto& [row, spans] : rows) {
    std::sort(spans.begin(), spans.end());  // emission puts longer events first at equal starts
    for (size_t i = 1; i < spans.size(); ++i) {
      if (spans[i].first < spans[i - 1].second) problem = "overlapping work on a stream row";
    }
  }
  if (flowStarts != flowEnds) problem = "a flow without both ends";
  if (result.stats.emitted < deviceIds.size()) problem = "emitted fewer events than it handed over";
  return problem;
}

}  // namespace openreg::profiler::fuzz
