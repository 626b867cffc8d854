/*
 * libopenreg_trace: the data of the HTML report (openreg_trace.report, python/openreg_trace/report).
 * Same contract as trace_analysis.h (ownership, errors, threading, options).
 */
#ifndef OPENREG_TRACE_REPORT_H_
#define OPENREG_TRACE_REPORT_H_

#include "openreg/trace_analysis.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Reads the trace at `path` (loadOptionsJson as ortrace_open_file takes it)
 * and returns {"summary": <as ortrace_summary>, "report": {"steps",
 * "op_table", "kernel_table", "memory", "counters", "timeline"}} (trace/README.md,
 * "The report's data"). The file is read twice: the second pass collects the
 * args of every event, which the indexed trace does not keep.
 *
 * reportOptionsJson keys: "top" (summary rows, default all), "gaps" (default
 * 10), "memory_points" (points per memory curve, default 4000),
 * "live_at_peak" (default 20), "max_table_rows" (default 20000),
 * "counter_points" (samples per counter track, default 2000), "peak_flops"
 * and "peak_bytes_per_s" (the summary's roofline peaks), "events"
 * (bool, the packed timeline events, default true), "deflate" (bool,
 * zlib-compress each packed array, default true).
 *
 * ORTRACE_ERROR_PARSE when the file is not a valid trace (not JSON, no
 * traceEvents, truncated, no event or only malformed ones); ORTRACE_ERROR_IO
 * when it cannot be read.
 */
ORTRACE_API ortrace_status ortrace_report_data(const char* path, const char* loadOptionsJson,
                                               const char* reportOptionsJson, char** outJson);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPENREG_TRACE_REPORT_H_ */
