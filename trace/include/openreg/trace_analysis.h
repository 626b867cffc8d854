/*
 * libopenreg_trace: analysis of torch.profiler / Kineto chrome traces.
 *
 * A pure C ABI so that any language (the Python command line uses ctypes)
 * can load the library without a C++ runtime contract. Results travel as
 * UTF-8 JSON documents; their schema is described in trace/README.md.
 *
 * Contract common to every function:
 *   - Ownership. Every `char**` out-parameter receives a NUL-terminated string
 *     allocated by this library, or NULL. The caller owns it and releases it
 *     with ortrace_free_string(). A trace handle is released with
 *     ortrace_close().
 *   - Errors. Functions return an ortrace_status. On failure the string
 *     out-parameter (when the caller passed one) holds a JSON object
 *     {"status": "<name>", "message": "<text>"}. No function throws, aborts,
 *     or prints.
 *   - Threading. The library has no global mutable state. A handle is
 *     immutable after ortrace_open_*: any number of threads may run analyses
 *     on the same handle at once. ortrace_close() must not race with them.
 *   - Options. Each function takes an optional JSON object of options
 *     (NULL or "" means defaults). An unknown key is an error, so typos do
 *     not pass silently.
 */
#ifndef OPENREG_TRACE_ANALYSIS_H_
#define OPENREG_TRACE_ANALYSIS_H_

#include <stddef.h>

#if defined(__GNUC__)
#define ORTRACE_API __attribute__((visibility("default")))
#else
#define ORTRACE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ortrace_status {
  ORTRACE_OK = 0,
  ORTRACE_ERROR_INVALID_ARGUMENT = 1, /* NULL handle/path, bad options JSON, unknown option */
  ORTRACE_ERROR_IO = 2,               /* file missing, unreadable, corrupt gzip stream */
  ORTRACE_ERROR_PARSE = 3,            /* the trace is not valid JSON or has no traceEvents */
  ORTRACE_ERROR_OUT_OF_MEMORY = 4,
  ORTRACE_ERROR_INTERNAL = 5
} ortrace_status;

/* Opaque, immutable parsed trace. */
typedef struct ortrace_trace ortrace_trace;

/* Library version, e.g. "0.1.0". Static storage: do not free. */
ORTRACE_API const char* ortrace_version(void);

/* Human-readable name of a status ("ok", "invalid_argument", ...). Static. */
ORTRACE_API const char* ortrace_status_name(ortrace_status status);

/*
 * Reads and indexes a trace file; gzip-compressed files are detected by
 * their magic bytes. The file is streamed: memory grows with the number of
 * events, not with the file size.
 *
 * optionsJson keys (all optional):
 *   "device_categories":     [str]  categories of device work
 *                                   (default ["kernel","gpu_memcpy","gpu_memset"])
 *   "infer_device_categories": bool also treat as device work any other
 *                                   category whose complete events carry
 *                                   integer "stream" and "correlation" args
 *                                   (default true)
 *   "runtime_categories":    [str]  host-side launch calls (default: every
 *                                   category ending in "_runtime" or "_driver")
 *   "annotation_categories": [str]  events on device rows that are not device
 *                                   work: annotations and synchronisations
 *                                   (default ["gpu_user_annotation","cuda_sync"])
 *   "op_categories":         [str]  host operators (default ["cpu_op","user_annotation"])
 *   "flow_categories":       [str]  host-to-device arrows (default ["ac2g"])
 *
 * Returns ORTRACE_OK with *outTrace set when the file could be read, even
 * if its JSON is malformed: the parse error is kept in the handle, so that
 * ortrace_check() can report it; ortrace_summary() and ortrace_timeline()
 * then return ORTRACE_ERROR_PARSE. On failure *outTrace is NULL.
 * outError may be NULL.
 */
ORTRACE_API ortrace_status ortrace_open_file(const char* path, const char* optionsJson, ortrace_trace** outTrace,
                                             char** outError);

/* Same as ortrace_open_file() on an in-memory document (plain JSON or gzip).
 * The bytes are not retained after the call returns. */
ORTRACE_API ortrace_status ortrace_open_buffer(const void* data, size_t size, const char* optionsJson,
                                               ortrace_trace** outTrace, char** outError);

/* Releases a handle. NULL is allowed. */
ORTRACE_API void ortrace_close(ortrace_trace* trace);

/*
 * The summary: top kernels, device time per op, linked share, per-stream
 * utilisation, largest idle gaps with the host activity during each, the
 * device memory peak with the op that reached it, and what
 * HolisticTraceAnalysis reports: kernel classes, the temporal and idle-time
 * breakdowns, launch statistics and communication; the roofline per kernel
 * (from cuda_profiler_range metric ranges) and the counter tracks
 * (trace/README.md lists the keys and where the definitions differ from HTA's).
 *
 * optionsJson keys: "top" (int, rows per table, default 10),
 * "gaps" (int, idle gaps to report, default 5), "kernel_wait_ns" (int, a
 * gap shorter than this between queued kernels is kernel wait, default
 * 30000), "slow_launch_ns" and "slow_start_ns" (int, launch outlier
 * thresholds, defaults 50000 and 100000), "peak_flops" and
 * "peak_bytes_per_s" (positive numbers, the roofline's peaks of every
 * device; default: the trace's deviceProperties, else unknown).
 */
ORTRACE_API ortrace_status ortrace_summary(const ortrace_trace* trace, const char* optionsJson, char** outJson);

/*
 * The structural invariants. Always ORTRACE_OK for a readable trace: failed
 * invariants are results ("ok": false), including malformed JSON. A check
 * fails ("status": "fail") only on findings that break a consumer; known
 * artifacts of real Kineto traces and warning-level checks give "warn".
 *
 * optionsJson keys: "examples" (int, example violations kept per check,
 * default 5), "skip" ([str] check names), "only" ([str] check names),
 * "window_slack_ns" (int, tolerance of the profiling-window check, default 0),
 * "strict" (bool, every finding fails, default false).
 */
ORTRACE_API ortrace_status ortrace_check(const ortrace_trace* trace, const char* optionsJson, char** outJson);

/* The table of checks ortrace_check() runs: names, severities, descriptions,
 * the consumer each protects, what breaks there, and which findings only warn. */
ORTRACE_API ortrace_status ortrace_list_checks(char** outJson);

/*
 * Data for drawing a timeline, already reduced to the given resolution:
 * device rows (busy intervals), host op ranges, profiler steps, and the
 * device memory curve.
 *
 * optionsJson keys: "width" (int, buckets across the time axis, default 2000).
 */
ORTRACE_API ortrace_status ortrace_timeline(const ortrace_trace* trace, const char* optionsJson, char** outJson);

/*
 * The critical path of one step: the longest chain of host ops, launches,
 * device work, stream waits, synchronisations and (over several rank traces,
 * one handle per rank) collectives matched across ranks, as HTA's critical
 * path analysis defines it. Its length against the step's time, its time by
 * kind, the ops and kernels on it, per rank and collective who was waited
 * for, what-if estimates, and the events on the path.
 *
 * optionsJson keys: "step" (int, ProfilerStep#<step>; default the first
 * ProfilerStep), "range" (str, a host range's exact name instead),
 * "instance" (int, which instance of the range, default 0), "whole_trace"
 * (bool, the whole trace instead of a step, as HTA's annotation ""), "top" (int,
 * rows of the op and kernel tables, default 10), "path_events" (bool, list
 * the path's edges, default true), "kernel_kernel_max_gap_ns" (int, default
 * 1500000), "what_if" ([{"target": name or "kind:<kind>", "factor": k}]).
 * Several traces of one rank (profiling cycles) are allowed: each rank's
 * trace holding the step is used ("traces" in the result lists them).
 * A step missing from a trace, a trace without device rows, traces of
 * different runs, or a what-if target the step lacks give
 * ORTRACE_ERROR_INVALID_ARGUMENT with a message.
 */
ORTRACE_API ortrace_status ortrace_critical_path(const ortrace_trace* const* traces, size_t count,
                                                 const char* optionsJson, char** outJson);

/* Releases a string returned by this library. NULL is allowed. */
ORTRACE_API void ortrace_free_string(char* str);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPENREG_TRACE_ANALYSIS_H_ */
