// Turns delivered activity buffers into RecordSet entries.
#pragma once

#include <cstddef>
#include <cstdint>

#include "openreg/activity.h"
#include "records.h"

namespace openreg::profiler {

using NextRecordFn = orError_t (*)(const uint8_t*, size_t, const orActivityRecord**);

// Copies every record of one buffer into `out`, iterating with the library's
// own orActivityGetNextRecord. Records longer than the version-1 layout are
// read for the fields we know (newer runtimes append fields); shorter ones
// and unknown kinds are counted and skipped.
void parseBuffer(NextRecordFn next, const uint8_t* buffer, size_t validSize, RecordSet& out);

// Parses one record; exposed for tests.
void parseRecord(const orActivityRecord& record, RecordSet& out);

}  // namespace openreg::profiler
