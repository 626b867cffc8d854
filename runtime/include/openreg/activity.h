/*
 * openreg activity tracing API: the CUPTI-style boundary between a device
 * runtime and a profiler.
 *
 * A vendor puts its own hardware behind these functions; the openreg Kineto
 * plugin resolves them with dlsym and uses nothing else of the runtime.
 *
 * Model
 *   - Recording happens only inside the tracing window
 *     (orActivityEnableTracing .. orActivityDisableTracing) and only for the
 *     record kinds enabled with orActivityEnable.
 *   - A call that puts work on the device gets a fresh correlation id. Its
 *     RUNTIME record (host thread) and its device record (KERNEL, MEMCPY,
 *     MEMSET or SYNCHRONIZATION) carry the same id. Whether device work is
 *     traced is decided when it is queued: work queued inside the window is
 *     recorded even if it executes after the window closed.
 *   - Before the RUNTIME record of such a call, one EXTERNAL_CORRELATION
 *     record is written per non-empty external-correlation stack of the
 *     calling thread, pairing the top of that stack with the correlation id.
 *   - Records go to per-thread buffers supplied by the client. Full buffers
 *     are handed back through the completed callback. If no buffer is
 *     available (the client refused one, or the host had no memory for the
 *     runtime's bookkeeping of it) the record is dropped and counted; the
 *     recording thread never blocks on the client and never fails.
 *   - Host timestamps are nanoseconds since the Unix epoch (CLOCK_REALTIME),
 *     unless the client registered its own host clock
 *     (orActivityRegisterTimestampCallback). Device timestamps are in the device's own clock (its own offset, rate
 *     and drift); map them with clock samples (orActivityGetClockSample and
 *     CLOCK_SYNC records).
 *
 * Record layout and versioning
 *   Every record starts with orActivityRecord {kind, size}. size is the
 *   record's byte length (a multiple of 8) and grows when fields are appended
 *   in later versions; readers use the fields they know and skip by size.
 *   Kinds a reader does not know are skipped the same way. Strings in records
 *   (names) are owned by the runtime and valid until it is unloaded.
 *
 * Errors: every function returns orError_t (see runtime.h) and never aborts;
 * a NULL out-pointer or an unknown kind or device gives orErrorInvalidValue or
 * orErrorInvalidDevice, with the cause in orGetLastErrorMessage().
 *
 * Threads: every function may be called from any thread, concurrently, except
 * where a comment says otherwise (the callbacks' rules below). Window and
 * per-kind switches are process-wide.
 */
#ifndef OPENREG_ACTIVITY_H
#define OPENREG_ACTIVITY_H

#include <stddef.h>
#include <stdint.h>

#include "openreg/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a function is added; orActivityGetVersion reports it. */
/* 2: COMMUNICATION records (orLaunchCollective). 3: KERNEL_METRICS and
 * COUNTER records, orActivityPublishCounter, orActivitySetCounterPeriod,
 * the peaks of orActivityDeviceInfo. */
#define OR_ACTIVITY_API_VERSION 3

typedef enum orActivityKind {
  OR_ACTIVITY_KIND_INVALID = 0,
  OR_ACTIVITY_KIND_RUNTIME = 1,              /* orActivityRuntime */
  OR_ACTIVITY_KIND_KERNEL = 2,               /* orActivityKernel */
  OR_ACTIVITY_KIND_MEMCPY = 3,               /* orActivityMemcpy */
  OR_ACTIVITY_KIND_MEMSET = 4,               /* orActivityMemset */
  OR_ACTIVITY_KIND_MEMORY = 5,               /* orActivityMemory */
  OR_ACTIVITY_KIND_SYNCHRONIZATION = 6,      /* orActivitySynchronization */
  OR_ACTIVITY_KIND_EXTERNAL_CORRELATION = 7, /* orActivityExternalCorrelation */
  OR_ACTIVITY_KIND_MARKER = 8,               /* orActivityMarker */
  OR_ACTIVITY_KIND_OVERHEAD = 9,             /* orActivityOverhead */
  OR_ACTIVITY_KIND_CLOCK_SYNC = 10,          /* orActivityClockSync */
  OR_ACTIVITY_KIND_COMMUNICATION = 11,       /* orActivityCommunication (version 2) */
  OR_ACTIVITY_KIND_KERNEL_METRICS = 12,      /* orActivityKernelMetrics (version 3) */
  OR_ACTIVITY_KIND_COUNTER = 13,             /* orActivityCounter (version 3) */
  OR_ACTIVITY_KIND_COUNT,
  OR_ACTIVITY_KIND_FORCE_INT32 = 0x7fffffff /* any int is a valid value of the type */
} orActivityKind;

/* Header of every record. */
typedef struct orActivityRecord {
  uint32_t kind; /* orActivityKind */
  uint32_t size; /* bytes, including this header */
} orActivityRecord;

/* Which runtime call a RUNTIME record describes. */
typedef enum orActivityApiId {
  OR_API_INVALID = 0,
  OR_API_LAUNCH_KERNEL = 1,
  OR_API_MEMCPY = 2,
  OR_API_MEMCPY_ASYNC = 3,
  OR_API_MEMSET = 4,
  OR_API_MEMSET_ASYNC = 5,
  OR_API_MALLOC = 6,
  OR_API_FREE = 7,
  OR_API_MALLOC_HOST = 8,
  OR_API_FREE_HOST = 9,
  OR_API_STREAM_SYNCHRONIZE = 10,
  OR_API_EVENT_SYNCHRONIZE = 11,
  OR_API_DEVICE_SYNCHRONIZE = 12,
  OR_API_EVENT_RECORD = 13,
  OR_API_STREAM_WAIT_EVENT = 14,
  OR_API_LAUNCH_HOST_FUNC = 15,
  OR_API_LAUNCH_COLLECTIVE = 16, /* version 2 */
  OR_API_COUNT
} orActivityApiId;

/* An API call on a host thread. Host clock. */
typedef struct orActivityRuntime {
  orActivityRecord header;
  uint32_t apiId; /* orActivityApiId */
  uint32_t processId;
  uint32_t threadId;      /* system thread id (gettid) */
  int32_t device;         /* device the call addressed, -1 if none */
  uint64_t correlationId; /* shared with the device record, if any */
  uint64_t start;         /* host epoch ns */
  uint64_t end;
  const char* name; /* e.g. "orLaunchKernel" */
  int32_t status;   /* orError_t the call returned */
  uint32_t reserved;
} orActivityRuntime;

/* A kernel's execution. Device clock. */
typedef struct orActivityKernel {
  orActivityRecord header;
  int32_t device;
  int32_t status;    /* orSuccess, or orErrorLaunchFailure */
  uint64_t streamId; /* orStreamGetId */
  uint64_t correlationId;
  uint64_t start; /* device clock ns */
  uint64_t end;
  const char* name;
  orDim3 grid;
  orDim3 block;
  uint32_t sharedMemBytes;
  int32_t streamPriority;
  /* orLaunchConfig.annotation (JSON object members), or NULL. Appended after
   * the first layout: read it only when header.size covers it. */
  const char* annotation;
} orActivityKernel;

typedef enum orActivityMemcpyKind {
  OR_ACTIVITY_MEMCPY_UNKNOWN = 0,
  OR_ACTIVITY_MEMCPY_HTOD = 1,
  OR_ACTIVITY_MEMCPY_DTOH = 2,
  OR_ACTIVITY_MEMCPY_DTOD = 3,
  OR_ACTIVITY_MEMCPY_HTOH = 4,
  OR_ACTIVITY_MEMCPY_PTOP = 5 /* device to device across devices */
} orActivityMemcpyKind;

typedef enum orActivityMemoryKind {
  OR_ACTIVITY_MEMORY_KIND_UNKNOWN = 0,
  OR_ACTIVITY_MEMORY_KIND_PAGEABLE = 1,
  OR_ACTIVITY_MEMORY_KIND_PINNED = 2,
  OR_ACTIVITY_MEMORY_KIND_DEVICE = 3
} orActivityMemoryKind;

/* A copy's execution. Device clock. */
typedef struct orActivityMemcpy {
  orActivityRecord header;
  uint8_t copyKind;  /* orActivityMemcpyKind */
  uint8_t srcKind;   /* orActivityMemoryKind */
  uint8_t dstKind;   /* orActivityMemoryKind */
  uint8_t isAsync;   /* 1 if queued by an ...Async call */
  int32_t device;    /* device whose stream executed it */
  int32_t srcDevice; /* -1 for host */
  int32_t dstDevice; /* -1 for host */
  uint64_t streamId;
  uint64_t correlationId;
  uint64_t bytes;
  uint64_t start; /* device clock ns */
  uint64_t end;
} orActivityMemcpy;

/* A memset's execution. Device clock. */
typedef struct orActivityMemset {
  orActivityRecord header;
  int32_t device;
  uint32_t value; /* the byte, 16- or 32-bit pattern */
  uint64_t streamId;
  uint64_t correlationId;
  uint64_t bytes;
  uint64_t start; /* device clock ns */
  uint64_t end;
  uint32_t elementSize; /* 1, 2 or 4 */
  uint8_t isAsync;
  uint8_t reserved[3];
} orActivityMemset;

typedef enum orActivityMemoryOp { OR_ACTIVITY_MEMORY_ALLOCATE = 1, OR_ACTIVITY_MEMORY_RELEASE = 2 } orActivityMemoryOp;

/* A device or pinned allocation or release. Host clock. */
typedef struct orActivityMemory {
  orActivityRecord header;
  uint8_t memoryOp;   /* orActivityMemoryOp */
  uint8_t memoryKind; /* orActivityMemoryKind: DEVICE or PINNED */
  uint16_t reserved;
  int32_t device; /* -1 for pinned host memory */
  uint64_t address;
  uint64_t bytes;
  uint64_t timestamp;     /* host epoch ns */
  uint64_t correlationId; /* of the orMalloc/orFree call's RUNTIME record */
  uint32_t processId;
  uint32_t threadId;
} orActivityMemory;

typedef enum orActivitySyncType {
  OR_ACTIVITY_SYNC_STREAM = 1,           /* orStreamSynchronize: host clock */
  OR_ACTIVITY_SYNC_EVENT = 2,            /* orEventSynchronize: host clock */
  OR_ACTIVITY_SYNC_DEVICE = 3,           /* orDeviceSynchronize: host clock */
  OR_ACTIVITY_SYNC_STREAM_WAIT_EVENT = 4 /* the stream blocked on an event: device clock */
} orActivitySyncType;

typedef enum orActivityClockDomain { OR_ACTIVITY_CLOCK_HOST = 1, OR_ACTIVITY_CLOCK_DEVICE = 2 } orActivityClockDomain;

/* A synchronisation. Host syncs are stamped on the calling thread in the host
 * clock; a stream waiting on an event is stamped by the device in its clock,
 * from when the stream reached the wait to when it was released. */
typedef struct orActivitySynchronization {
  orActivityRecord header;
  uint32_t syncType;    /* orActivitySyncType */
  uint32_t clockDomain; /* orActivityClockDomain of start/end */
  int32_t device;
  uint32_t threadId; /* host syncs: the waiting thread; else 0 */
  uint64_t streamId; /* 0 if not about a stream */
  uint64_t eventId;  /* 0 if not about an event */
  uint64_t correlationId;
  uint64_t start;
  uint64_t end;
  /* Appended (a reader checks header.size). Waits on an event (EVENT,
   * STREAM_WAIT_EVENT): the orEventRecord call whose capture was waited for,
   * as its RUNTIME record's correlation id (0 if that call was not traced)
   * and the stream it recorded into (0 if unknown). 0 for other syncs. */
  uint64_t recordCorrelationId;
  uint64_t recordStreamId;
} orActivitySynchronization;

typedef enum orActivityExternalCorrelationKind {
  OR_EXTERNAL_CORRELATION_KIND_UNKNOWN = 0,
  OR_EXTERNAL_CORRELATION_KIND_OPERATOR = 1, /* framework op (Kineto: CUSTOM0) */
  OR_EXTERNAL_CORRELATION_KIND_USER = 2,     /* user range (Kineto: CUSTOM1) */
  OR_EXTERNAL_CORRELATION_KIND_COUNT,
  OR_EXTERNAL_CORRELATION_KIND_FORCE_INT32 = 0x7fffffff
} orActivityExternalCorrelationKind;

typedef struct orActivityExternalCorrelation {
  orActivityRecord header;
  uint32_t externalKind; /* orActivityExternalCorrelationKind */
  uint32_t reserved;
  uint64_t externalId;
  uint64_t correlationId;
} orActivityExternalCorrelation;

typedef enum orActivityMarkerKind {
  OR_ACTIVITY_MARKER_RANGE_START = 1,
  OR_ACTIVITY_MARKER_RANGE_END = 2,
  OR_ACTIVITY_MARKER_INSTANT = 3
} orActivityMarkerKind;

/* A host-side marker. Host clock. A RANGE_END carries the id of its start. */
typedef struct orActivityMarker {
  orActivityRecord header;
  uint32_t markerKind; /* orActivityMarkerKind */
  uint32_t threadId;
  uint64_t id;
  uint64_t timestamp; /* host epoch ns */
  const char* name;   /* NULL on RANGE_END */
  uint32_t processId;
  int32_t device; /* current device of the thread */
} orActivityMarker;

typedef enum orActivityOverheadKind {
  OR_ACTIVITY_OVERHEAD_BUFFER_REQUEST = 1, /* a thread waited on the client's buffer callback */
  OR_ACTIVITY_OVERHEAD_BUFFER_FLUSH = 2    /* orActivityFlushAll */
} orActivityOverheadKind;

/* Time the tracing machinery itself cost a thread. Host clock. */
typedef struct orActivityOverhead {
  orActivityRecord header;
  uint32_t overheadKind; /* orActivityOverheadKind */
  uint32_t threadId;
  uint64_t start;
  uint64_t end;
} orActivityOverhead;

/* A host/device clock pair taken together. The device reading was taken
 * inside a host interval of width `uncertainty`; hostTimestamp is that
 * interval's midpoint, the best estimate of the host time of the reading. */
typedef struct orActivityClockSync {
  orActivityRecord header;
  int32_t device;
  uint32_t reserved;
  uint64_t hostTimestamp;   /* host epoch ns */
  uint64_t deviceTimestamp; /* device clock ns */
  uint64_t uncertainty;     /* ns */
} orActivityClockSync;

/* A collective's (or point-to-point transfer's) execution on a stream, as
 * queued by orLaunchCollective (modelled on MSPTI's
 * msptiActivityCommunication). Device clock. Strings are interned by the
 * runtime. Its staging copies, if any, are separate MEMCPY records. */
typedef struct orActivityCommunication {
  orActivityRecord header;
  int32_t device;
  int32_t status; /* orSuccess, or orErrorLaunchFailure */
  uint64_t streamId;
  uint64_t correlationId;
  uint64_t start; /* device clock ns */
  uint64_t end;
  const char* name;       /* device event name, e.g. "openregComm_AllReduce_Sum_f32" */
  const char* collective; /* e.g. "allreduce", "send" (as record_param_comms names it) */
  const char* dataType;   /* e.g. "f32"; "" when no data moves (barrier) */
  const char* groupName;  /* the process group's name */
  uint64_t count;         /* elements of the local input (sent) */
  uint64_t bytes;         /* bytes of the local input */
  uint64_t sequence;      /* the group's collective (or p2p) sequence number */
  uint32_t groupSize;
  int32_t rank; /* the caller's rank in the group */
  int32_t peer; /* point-to-point: the other rank in the group; else -1 */
  uint32_t reserved;
} orActivityCommunication;

/* What a kernel did, as its launcher defined the work (orLaunchConfig's
 * workKnown, flops, bytesRead, bytesWritten) and as the device measured it.
 * Written by the executor right after the kernel's KERNEL record, with the
 * same correlation id, for kernels queued inside the window while both
 * KERNEL and KERNEL_METRICS are enabled. The runtime never estimates a value:
 * a field whose OR_KERNEL_WORK_* bit is clear in `known` is 0 and means "not
 * defined by the launcher", not zero work. */
typedef struct orActivityKernelMetrics {
  orActivityRecord header;
  int32_t device;
  uint32_t known; /* OR_KERNEL_WORK_FLOPS | OR_KERNEL_WORK_BYTES (runtime.h) */
  uint64_t streamId;
  uint64_t correlationId; /* the KERNEL record's */
  uint64_t flops;         /* floating-point operations (a multiply-add is 2) */
  uint64_t bytesRead;     /* bytes of device memory the kernel's arguments make it read */
  uint64_t bytesWritten;  /* ... and write */
  /* CPU time the executor thread spent running the kernel
   * (CLOCK_THREAD_CPUTIME_ID): the device worker's busy time. Below the
   * KERNEL record's duration when the worker was preempted. */
  uint64_t busyNs;
} orActivityKernelMetrics;

/* Counters sampled over the window (COUNTER records). */
typedef enum orActivityCounterKind {
  OR_COUNTER_INVALID = 0,
  /* Bytes of device memory the framework's allocator has handed to tensors,
   * as it last published (orActivityPublishCounter); the runtime cannot see
   * inside the allocator's blocks. Not sampled until published once. */
  OR_COUNTER_MEMORY_ALLOCATED = 1,
  /* Bytes of live orMalloc allocations on the device, as requested (what
   * a caching allocator reserves from the device). */
  OR_COUNTER_MEMORY_RESERVED = 2,
  /* Tasks queued on one stream and not finished (kernels, copies, memsets,
   * event records and waits, host functions), per stream (streamId). */
  OR_COUNTER_QUEUED_TASKS = 3,
  /* Bytes the device's copies (orMemcpy*) have moved since the runtime
   * started, counted when each copy finishes: cumulative, so the bandwidth of
   * an interval is the difference of two samples over their time apart. */
  OR_COUNTER_COPY_BYTES = 4,
  OR_COUNTER_KIND_COUNT,
  OR_COUNTER_FORCE_INT32 = 0x7fffffff
} orActivityCounterKind;

/* One sample of one counter, taken on the runtime's delivery thread at the
 * window's opening, every counter period (orActivitySetCounterPeriod) while
 * it is open, and at its closing. Host clock, like RUNTIME records. */
typedef struct orActivityCounter {
  orActivityRecord header;
  int32_t device;
  uint32_t counter;   /* orActivityCounterKind */
  uint64_t streamId;  /* OR_COUNTER_QUEUED_TASKS: the stream; else 0 */
  uint64_t timestamp; /* host epoch ns (or the registered host clock) */
  uint64_t value;     /* bytes, or tasks */
} orActivityCounter;

/* ----------------------------------------------------------- the window */

/* Opens and closes the tracing window. Cheap (an atomic flag); callable from
 * any thread. Enabling also writes a CLOCK_SYNC record per device if that kind
 * is enabled, and while the window is open the runtime writes one per device
 * at least every OR_ACTIVITY_CLOCK_SYNC_INTERVAL_NS (it aims at half that); a
 * sample that comes later (its thread was not scheduled in time) is counted in
 * orActivityStats.lateClockSyncs. */
OR_API orError_t orActivityEnableTracing(void);
OR_API orError_t orActivityDisableTracing(void);
/* Per-kind switches; all kinds start disabled. orErrorInvalidValue for an
 * unknown kind. */
OR_API orError_t orActivityEnable(orActivityKind kind);
OR_API orError_t orActivityDisable(orActivityKind kind);

/* ------------------------------------------------------------- delivery */

/* Called on the recording thread when it needs a buffer. Set *buffer to
 * client memory aligned to 8 bytes and *size to its length (at least 1 KiB),
 * or *buffer = NULL to refuse (the record is then dropped and counted). May
 * run concurrently on several threads. Must not call back into the runtime
 * except orActivityGetNextRecord. */
typedef void (*orActivityBufferRequestedFn)(void* userData, uint8_t** buffer, size_t* size);
/* Hands a buffer back to the client, who owns it again. validSize bytes
 * hold records. Never runs concurrently with itself; runs on the runtime's
 * delivery thread or inside orActivityFlushAll on the caller's thread. May
 * call orActivityGetNextRecord, not other runtime functions. */
typedef void (*orActivityBufferCompletedFn)(void* userData, uint8_t* buffer, size_t size, size_t validSize);

/* Registers the client. Must be called while the window is closed
 * (orErrorNotSupported otherwise). Passing NULL for both unregisters, after
 * delivering what is pending. */
OR_API orError_t orActivityRegisterCallbacks(orActivityBufferRequestedFn requested,
                                             orActivityBufferCompletedFn completed, void* userData);

enum {
  /* Also hand back partially filled buffers, after waiting until the device
   * work queued before this call has finished (and so has written its
   * records). Without it only full buffers are delivered. */
  OR_ACTIVITY_FLUSH_FORCED = 1
};

/* Delivers buffers through the completed callback before returning. Waits
 * at most OPENREG_FLUSH_TIMEOUT_MS (default 30000) for device work; on expiry
 * delivers what exists and returns orErrorTimeout. orErrorNotSupported if
 * called from a buffer callback. orErrorNotInitialized without callbacks. */
OR_API orError_t orActivityFlushAll(uint32_t flags);

/* Iterates records in a buffer. Pass *record = NULL to get the first one;
 * pass the previous record to get the next. Returns orErrorMaxLimitReached
 * after the last record, and orErrorInvalidValue (leaving *record unchanged)
 * if the buffer is malformed: a size below 8 or not a multiple of 8, a record
 * running past validSize, a misaligned buffer or a record pointer outside it.
 * Pure function: any thread, no state. */
OR_API orError_t orActivityGetNextRecord(const uint8_t* buffer, size_t validSize, const orActivityRecord** record);

/* Records dropped for lack of a buffer (or of host memory) since the runtime started, for one
 * device (device >= 0) or for all devices and host-only records
 * (device = -1). Never reset: take differences. */
OR_API orError_t orActivityGetNumDroppedRecords(int device, uint64_t* dropped);

/* Slots of orActivityStats.recordsDroppedByKind (fixed: the layout must not
 * change when kinds are added). */
#define OR_ACTIVITY_STATS_KINDS 32
/* The contract's longest gap between two CLOCK_SYNC records of a device while
 * the window is open (real time, whatever clock the host records use); a
 * longer one is counted in lateClockSyncs. */
#define OR_ACTIVITY_CLOCK_SYNC_INTERVAL_NS 10000000ull

typedef struct orActivityStats {
  uint32_t structSize; /* set by the caller to sizeof(orActivityStats) */
  uint32_t reserved;
  uint64_t recordsWritten;
  uint64_t recordsDropped;
  uint64_t buffersRequested;
  uint64_t buffersRefused; /* requests answered with NULL */
  uint64_t buffersCompleted;
  uint64_t bufferRequestNs;   /* time spent in the requested callback */
  uint64_t bufferCompletedNs; /* time spent in the completed callback */
  uint64_t flushNs;           /* time spent in orActivityFlushAll */
  /* CLOCK_SYNC samples taken more than OR_ACTIVITY_CLOCK_SYNC_INTERVAL_NS
   * (real time, also under a client's host clock) after the previous one of
   * their device in the same window:
   * the runtime's sampling thread was not scheduled in time. */
  uint64_t lateClockSyncs;
  /* recordsDropped by the kind of the dropped record (index: orActivityKind;
   * kinds from OR_ACTIVITY_STATS_KINDS on are counted at index 0). */
  uint64_t recordsDroppedByKind[OR_ACTIVITY_STATS_KINDS];
} orActivityStats;

/* Cumulative counters, never reset: take differences. Fills
 * min(structSize, sizeof) bytes; the structSize it writes back is the
 * runtime's own, so a caller built against a newer header can tell which
 * fields an older runtime left unfilled (lateClockSyncs and
 * recordsDroppedByKind came with this header). Any thread. */
OR_API orError_t orActivityGetStats(orActivityStats* stats);

/* ---------------------------------------------------------- correlation */

/* Per calling thread, one stack per kind. The tops are read when device
 * work is queued, on the queuing thread. */
OR_API orError_t orActivityPushExternalCorrelationId(orActivityExternalCorrelationKind kind, uint64_t id);
/* orErrorInvalidValue if that stack is empty. lastId may be NULL. */
OR_API orError_t orActivityPopExternalCorrelationId(orActivityExternalCorrelationKind kind, uint64_t* lastId);

/* ---------------------------------------------------------------- clock */

typedef struct orActivityClockSample {
  uint64_t hostTimestamp;   /* host clock (see orActivityGetTimestamp): midpoint of the bracketing interval */
  uint64_t deviceTimestamp; /* device clock ns */
  uint64_t uncertainty;     /* ns */
} orActivityClockSample;

/* Takes a host/device clock pair for one device (several tries, the
 * tightest kept). */
OR_API orError_t orActivityGetClockSample(int device, orActivityClockSample* sample);
/* The clock used for host records: host epoch ns, or the registered
 * callback's value. */
OR_API orError_t orActivityGetTimestamp(uint64_t* timestamp);

/* A client's host clock. Called on any thread that writes a host record
 * (launching threads, the caller of orActivityGetClockSample), so it must be
 * thread-safe, cheap, non-decreasing per thread, and must not call back into
 * the runtime. */
typedef uint64_t (*orActivityTimestampFn)(void);
/* Stamps every host timestamp from now on with fn instead of CLOCK_REALTIME:
 * RUNTIME, MEMORY, MARKER and host SYNCHRONIZATION records, the host side of
 * clock samples and CLOCK_SYNC records, and orActivityGetTimestamp. A client
 * whose own events use another clock (torch.profiler stamps ops with the TSC
 * and maps them to epoch ns when the trace ends) then compares records with
 * its events exactly, as with cuptiActivityRegisterTimestampCallback. NULL
 * restores CLOCK_REALTIME. Must be called while the window is closed
 * (orErrorNotSupported otherwise), so no trace mixes two clocks. Optional for
 * a vendor library: the plugin works without it. */
OR_API orError_t orActivityRegisterTimestampCallback(orActivityTimestampFn fn);

/* ---------------------------------------------------------------- markers */

/* Write MARKER records on the calling thread (when the kind is enabled).
 * name is copied. RangePop returns orErrorInvalidValue on an empty stack. */
OR_API orError_t orActivityMarkerRangePush(const char* name);
OR_API orError_t orActivityMarkerRangePop(void);
OR_API orError_t orActivityMarkerInstant(const char* name);

/* -------------------------------------------------------------- counters */

/* Whether records of `kind` are being written now (the window is open and
 * the kind enabled): *active = 1 or 0. One relaxed atomic load, for a
 * launcher that only works out what orLaunchConfig's work fields need
 * (FLOPs, bytes) while KERNEL_METRICS records are wanted, so that tracing
 * nothing costs nothing. A window that opens right after the answer only
 * leaves that launch's work undefined. orErrorInvalidValue for an unknown
 * kind or a NULL active. */
OR_API orError_t orActivityIsActive(orActivityKind kind, int* active);

/* Default and bounds of the counter period. */
#define OR_ACTIVITY_COUNTER_PERIOD_DEFAULT_NS 1000000ull /* 1 ms */
#define OR_ACTIVITY_COUNTER_PERIOD_MIN_NS 100000ull      /* 100 us */
#define OR_ACTIVITY_COUNTER_PERIOD_MAX_NS 10000000000ull /* 10 s */

/* How often COUNTER records are sampled while the window is open and the
 * kind is enabled. orErrorInvalidValue outside [MIN, MAX];
 * orErrorNotSupported while the window is open. Process-wide. */
OR_API orError_t orActivitySetCounterPeriod(uint64_t periodNs);

/* A value the runtime cannot measure itself, published by the layer that
 * knows it: OR_COUNTER_MEMORY_ALLOCATED, by the framework's caching
 * allocator, after each change. One relaxed atomic store (also with tracing
 * off, so the first sample of a window is right); samples read the latest
 * value. orErrorInvalidDevice for a bad device; orErrorInvalidValue for a
 * counter the runtime measures itself. Any thread. */
OR_API orError_t orActivityPublishCounter(int device, orActivityCounterKind counter, uint64_t value);

/* -------------------------------------------------------- introspection */

OR_API orError_t orActivityGetVersion(uint32_t* version);

typedef struct orActivityDeviceInfo {
  uint32_t structSize; /* set by the caller */
  int32_t index;
  char name[64];
  uint64_t totalMemory;
  int32_t computeUnits;
  int32_t clockRateKHz;
  int32_t executorThreads;
  int32_t reserved;
  /* Version 3 (a reader checks the structSize written back): the device's
   * declared nominal peaks, for rooflines, as a datasheet states them (0:
   * not declared). */
  double peakFlopsPerSecond;
  double peakBytesPerSecond;
} orActivityDeviceInfo;

OR_API orError_t orActivityGetDeviceCount(int* count);
OR_API orError_t orActivityGetDeviceInfo(int device, orActivityDeviceInfo* info);

typedef struct orActivityStreamInfo {
  uint32_t structSize; /* set by the caller */
  int32_t device;
  uint64_t streamId;
  int32_t priority;
  uint8_t isDefault;
  uint8_t reserved[3];
} orActivityStreamInfo;

/* Describes a stream by (device, id), also after it was destroyed.
 * orErrorInvalidValue for an id never handed out. */
OR_API orError_t orActivityGetStreamInfo(int device, uint64_t streamId, orActivityStreamInfo* info);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPENREG_ACTIVITY_H */
