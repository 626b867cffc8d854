/*
 * openreg runtime API: a simulated, asynchronous accelerator.
 *
 * Conventions that hold for every function in this header:
 *   - Every call returns an orError_t and never aborts the process.
 *   - On failure, orGetLastErrorMessage() on the same thread gives a
 *     sentence naming the cause (bad index, which pointer, which kernel).
 *   - Every call is safe from any thread, concurrently.
 *   - Handles (orStream_t, orEvent_t) are opaque values, not pointers. A
 *     destroyed or never-created handle is detected and reported as
 *     orErrorInvalidResourceHandle; it never crashes.
 *   - The NULL stream means "the default stream of the current device".
 *   - Calls that block (synchronize, orFree, orFreeHost, synchronous copies
 *     and memsets) return orErrorNotSupported when made from inside a kernel
 *     or host function: they would wait on the thread that must run the work.
 *   - Pointers passed in stay owned by the caller; nothing keeps them after
 *     the call returns, except the memory an asynchronous copy or memset
 *     reads or writes, which must live until that work completes.
 *   - Environment variables are read once, at the first call:
 *       OPENREG_DEVICE_COUNT          devices (default 2, 1..16)
 *       OPENREG_DEVICE_MEMORY         bytes per device; K/M/G suffixes (default 8G)
 *       OPENREG_WORKERS_PER_DEVICE    executor threads per device (default 4)
 *       OPENREG_CLOCK_OFFSET_NS       device clock value at start-up (default 1e12)
 *       OPENREG_CLOCK_SKEW_PPM        device clock rate error (default 0)
 *       OPENREG_CLOCK_DRIFT_PPM_PER_S change of that rate per second, for the first
 *                                     1000 s of run time, then the rate holds (default 0;
 *                                     up to 1e4, and above -(1e6 + skew) / 1000 so the
 *                                     rate stays positive)
 *       OPENREG_FLUSH_TIMEOUT_MS      longest wait of orActivityFlushAll for device work (default 30000)
 *       OPENREG_EXIT_DRAIN_TIMEOUT_MS longest wait at exit for queued work (default 10000)
 *     A malformed value makes every call return orErrorInitializationError
 *     with a message naming the variable.
 *   - fork(): a child of a process whose runtime had started threads (its
 *     first launch, copy, memset or event record on a stream, or a registered
 *     activity client) has none of them. Every call there returns
 *     orErrorInitializationError naming the cause, never waits on them; the
 *     child's exit does not wait for work queued before the fork. A child
 *     forked before the runtime started threads uses its own copy normally.
 *   - At process exit (atexit) the runtime waits up to
 *     OPENREG_EXIT_DRAIN_TIMEOUT_MS for queued work, then drops what is left:
 *     a dropped kernel does not run but its userDataDestroy does, a dropped
 *     event record never completes the event, and work queued after that is
 *     dropped at once. Every wait that has not finished by then (synchronize,
 *     a synchronous copy or memset, orFree, orFreeHost), including one
 *     already blocked, returns orErrorShuttingDown instead of hanging; orFree
 *     and orFreeHost then keep the memory (a kernel may still use it).
 */
#ifndef OPENREG_RUNTIME_H
#define OPENREG_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define OR_API __attribute__((visibility("default")))
#else
#define OR_API
#endif

#define OPENREG_RUNTIME_VERSION 1

typedef enum orError_t {
  orSuccess = 0,
  orErrorInvalidValue = 1,          /* an argument is out of range or NULL */
  orErrorMemoryAllocation = 2,      /* device memory exhausted */
  orErrorInitializationError = 3,   /* bad configuration (environment), or a forked child (above) */
  orErrorInvalidDevice = 4,         /* device index out of range */
  orErrorInvalidDevicePointer = 5,  /* not a live device allocation (or double free) */
  orErrorInvalidHostPointer = 6,    /* not a live pinned allocation (or double free) */
  orErrorInvalidResourceHandle = 7, /* bad, destroyed or mismatched stream/event */
  orErrorNotReady = 8,              /* query: work still pending (not a failure) */
  orErrorLaunchFailure = 9,         /* a kernel reported failure */
  orErrorNotSupported = 10,         /* valid request this runtime cannot do */
  orErrorTimeout = 11,              /* a bounded wait expired */
  orErrorMaxLimitReached = 12,      /* iteration finished (activity records) */
  orErrorHostMemoryAllocation = 13, /* pinned host memory exhausted */
  orErrorNotInitialized = 14,       /* prerequisite call missing */
  orErrorShuttingDown = 15,         /* process exit dropped the work a wait was for */
  orErrorUnknown = 999,
  orErrorForceInt32 = 0x7fffffff /* keeps any int a valid value of the type */
} orError_t;

/* Static strings; never NULL, never freed. */
OR_API const char* orGetErrorName(orError_t error);
OR_API const char* orGetErrorString(orError_t error);

/* The detailed message of the last failing call made by this thread, or ""
 * if none. The pointer stays valid until this thread's next runtime call.
 * Successful calls do not clear it; orClearLastError() does. */
OR_API const char* orGetLastErrorMessage(void);
OR_API void orClearLastError(void);

OR_API orError_t orRuntimeGetVersion(int* version);

/* ---------------------------------------------------------------- devices */

typedef struct orDeviceProp {
  char name[64];
  size_t totalGlobalMem;      /* bytes: the capacity orMalloc enforces */
  int multiProcessorCount;    /* simulated compute units */
  int clockRate;              /* kHz, nominal */
  int executorThreads;        /* host threads serving this device's streams */
  int streamPriorityLeast;    /* numerically largest (lowest) priority */
  int streamPriorityGreatest; /* numerically smallest (highest) priority */
} orDeviceProp;

OR_API orError_t orGetDeviceCount(int* count);
/* The current device is per thread and starts at 0. orSetDevice returns
 * orErrorInvalidDevice (and keeps the current one) for an index outside
 * [0, count). */
OR_API orError_t orSetDevice(int device);
OR_API orError_t orGetDevice(int* device);
/* Fills *prop (caller-owned); orErrorInvalidDevice for a bad index. */
OR_API orError_t orGetDeviceProperties(orDeviceProp* prop, int device);
/* Blocks until all work on all streams of the current device is done. Returns
 * (and clears) the first kernel failure recorded on any of its streams. */
OR_API orError_t orDeviceSynchronize(void);
/* Same for an explicit device, without changing the current one. */
OR_API orError_t orDeviceSynchronizeIndex(int device);
/* orDeviceSynchronizeIndex that gives up after timeoutMs with orErrorTimeout,
 * leaving the work queued and any kernel failure for a later sync (for exit
 * paths, where a stuck kernel must not hold the process). */
OR_API orError_t orDeviceSynchronizeWithTimeout(int device, uint32_t timeoutMs);
/* Either pointer may be NULL. */
OR_API orError_t orDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);

/* ----------------------------------------------------------------- memory */

/* Allocates on the current device. size 0 gives *ptr = NULL and success.
 * Fails with orErrorMemoryAllocation when the device capacity would be
 * exceeded; the message gives requested and free bytes. Alignment: 256. */
OR_API orError_t orMalloc(void** ptr, size_t size);
/* Waits for the work queued on every device (a peer copy on another device
 * may read this memory), then releases. NULL is a no-op.
 * A pointer that is not a live allocation base gives
 * orErrorInvalidDevicePointer (this is how a double free is reported).
 * A call frees the allocation that was live at ptr when it started, or
 * nothing: of two orFree calls of one pointer racing each other, exactly one
 * frees it and the other returns orErrorInvalidDevicePointer, also when an
 * orMalloc on another thread reused the address meanwhile (that new
 * allocation stays live). A pointer carries no generation, so a free that
 * starts after the address was reused frees the new allocation, as with any
 * allocator. The same holds for orFreeHost. */
OR_API orError_t orFree(void* ptr);
/* Page-locked host memory: fully asynchronous copies to and from it. */
OR_API orError_t orMallocHost(void** ptr, size_t size);
/* Waits for the work queued on every device (any may copy from this memory),
 * then releases. NULL is a no-op; a pointer that is not a live orMallocHost
 * base gives orErrorInvalidHostPointer. */
OR_API orError_t orFreeHost(void* ptr);
/* Free and total bytes of the current device (of `device` for the Index
 * variant): the capacity less what live allocations hold. */
OR_API orError_t orMemGetInfo(size_t* freeBytes, size_t* totalBytes);
OR_API orError_t orMemGetInfoIndex(int device, size_t* freeBytes, size_t* totalBytes);

typedef enum orMemoryType {
  orMemoryTypeUnregistered = 0, /* ordinary (pageable) host memory */
  orMemoryTypeHost = 1,         /* pinned host memory from orMallocHost */
  orMemoryTypeDevice = 2,
  orMemoryTypeForceInt32 = 0x7fffffff
} orMemoryType;

typedef struct orPointerAttributes {
  orMemoryType type;
  int device;        /* owning device, -1 for host memory */
  void* basePointer; /* start of the containing allocation, NULL if unregistered */
  size_t allocationSize;
} orPointerAttributes;

/* Never fails for a non-NULL attributes argument: unknown pointers are
 * reported as orMemoryTypeUnregistered. Interior pointers are resolved. */
OR_API orError_t orPointerGetAttributes(orPointerAttributes* attributes, const void* ptr);

/* ----------------------------------------------------------------- streams */

typedef struct orStream_st* orStream_t;
typedef struct orEvent_st* orEvent_t;

/* Streams execute in order; different streams run concurrently on a bounded
 * pool of executor threads per device. Creating a stream costs no thread.
 * Streams do not implicitly synchronise with each other (there is no legacy
 * default-stream barrier): order them with events. */
OR_API orError_t orStreamCreate(orStream_t* stream);
/* priority is clamped to [greatest, least] as CUDA does; lower runs first. */
OR_API orError_t orStreamCreateWithPriority(orStream_t* stream, unsigned int flags, int priority);
/* The stream's handle becomes invalid at once; work already queued still
 * completes. Default streams cannot be destroyed (orErrorInvalidResourceHandle). */
OR_API orError_t orStreamDestroy(orStream_t stream);
/* The default stream of a device (a valid handle, never destroyed). */
OR_API orError_t orDeviceGetDefaultStream(int device, orStream_t* stream);
/* orSuccess if all queued work is done, orErrorNotReady if not. A kernel
 * failure recorded on the stream is returned (and cleared) first. */
OR_API orError_t orStreamQuery(orStream_t stream);
/* Blocks until the work queued on stream so far is done; returns (and
 * clears) a kernel failure recorded on it, naming the kernel. */
OR_API orError_t orStreamSynchronize(orStream_t stream);
/* Work queued on stream after this call waits until the work captured by
 * the most recent orEventRecord(event) has completed. Works across streams
 * and devices. An event never recorded makes this a no-op. flags must be 0. */
OR_API orError_t orStreamWaitEvent(orStream_t stream, orEvent_t event, unsigned int flags);
/* A batch: the calling thread is about to queue several tasks on stream (a
 * collective's wait, copies, transfer and end event) and wants the executor
 * woken once, when the batch ends, instead of once per task, as a driver
 * writes several commands before ringing the doorbell. Work queued in a batch
 * keeps its order and its place in syncs and events; it only waits to be
 * handed to the executor (unless the stream is already being served, when it
 * runs as usual).
 *  - Batches nest and may be open on several streams; the stream is handed
 *    over when the last open batch on it ends. Begin and end on the same
 *    thread: ending a batch this thread did not begin is orErrorInvalidValue.
 *  - A blocking call on the thread (a synchronize, a synchronous copy or
 *    memset, orFree, orFreeHost) first hands over the work of its open
 *    batches, and a stream or device synchronize, or a synchronous copy or
 *    memset, from any thread hands over the held work of the streams it waits
 *    on, so no wait lasts until a batch ends, except an event synchronize from
 *    another thread for an event recorded in an open batch: keep batches short.
 *  - A thread that exits with batches open ends them.
 * Thread-safe; refused on executor threads (orErrorNotSupported). */
OR_API orError_t orStreamBeginBatch(orStream_t stream);
OR_API orError_t orStreamEndBatch(orStream_t stream);
/* A per-device stream number (default stream = 1, others from 2), never
 * reused: profilers use it as the row id. */
OR_API orError_t orStreamGetId(orStream_t stream, uint64_t* streamId);
/* The device a stream belongs to, and its (clamped) priority. */
OR_API orError_t orStreamGetDevice(orStream_t stream, int* device);
OR_API orError_t orStreamGetPriority(orStream_t stream, int* priority);

/* ------------------------------------------------------------------ events */

enum { orEventDefault = 0, orEventDisableTiming = 1 };

/* The event belongs to the current device; it may be recorded only on that
 * device's streams but may be waited on from any device. */
OR_API orError_t orEventCreate(orEvent_t* event);
/* flags: orEventDefault or orEventDisableTiming (orErrorInvalidValue otherwise). */
OR_API orError_t orEventCreateWithFlags(orEvent_t* event, unsigned int flags);
/* The handle becomes invalid at once; queued records and waits that already
 * refer to the event are unaffected. */
OR_API orError_t orEventDestroy(orEvent_t event);
/* Captures the work queued on stream so far. Re-recording replaces the capture. */
OR_API orError_t orEventRecord(orEvent_t event, orStream_t stream);
/* orSuccess if the captured work is done (or never recorded), else orErrorNotReady. */
OR_API orError_t orEventQuery(orEvent_t event);
/* Blocks until the captured work is done (returns at once if never recorded). */
OR_API orError_t orEventSynchronize(orEvent_t event);
/* Milliseconds between two completed, timing-enabled records, measured by
 * the device clock. orErrorNotReady if either is pending,
 * orErrorInvalidResourceHandle if either has timing disabled or was never
 * recorded. */
OR_API orError_t orEventElapsedTime(float* ms, orEvent_t start, orEvent_t end);

/* ------------------------------------------------------------ copy, memset */

typedef enum orMemcpyKind {
  orMemcpyHostToHost = 0,
  orMemcpyHostToDevice = 1,
  orMemcpyDeviceToHost = 2,
  orMemcpyDeviceToDevice = 3,
  orMemcpyDefault = 4, /* inferred from the pointers */
  orMemcpyKindForceInt32 = 0x7fffffff
} orMemcpyKind;

/* The kind is checked against the pointers; device ranges must lie inside
 * one live allocation. Synchronous variants run on the default stream of the
 * device involved and return when the copy is done. Asynchronous variants:
 *   - host->device from pageable memory copies the source before returning
 *     (the caller may reuse it at once); from pinned memory it is read when
 *     the copy executes;
 *   - device->host into pageable memory waits for completion (as CUDA does);
 *     into pinned memory it returns at once.
 * A call that waits for its copy (the synchronous variants, and device->host
 * into pageable memory) also returns, and clears, a kernel failure pending on
 * the stream it waited on, as orStreamSynchronize would.
 * Device->device between two devices is a peer copy, executed on `stream`. */
OR_API orError_t orMemcpy(void* dst, const void* src, size_t count, orMemcpyKind kind);
OR_API orError_t orMemcpyAsync(void* dst, const void* src, size_t count, orMemcpyKind kind, orStream_t stream);

/* Fill count bytes with (unsigned char)value. */
OR_API orError_t orMemset(void* devPtr, int value, size_t count);
OR_API orError_t orMemsetAsync(void* devPtr, int value, size_t count, orStream_t stream);
/* Fill `count` 16- or 32-bit elements with a pattern (e.g. float bits). */
OR_API orError_t orMemsetD16Async(void* devPtr, uint16_t value, size_t count, orStream_t stream);
OR_API orError_t orMemsetD32Async(void* devPtr, uint32_t value, size_t count, orStream_t stream);

/* ------------------------------------------------------------ kernel launch */

/* A kernel body. Runs on an executor thread of the stream's device, never on
 * the launching thread. Return 0 on success. On failure return non-zero and
 * write a NUL-terminated reason into errorMessage (capacity bytes, at least
 * 256). The failure sticks to the stream and is reported, with the kernel's
 * name and this reason, by the next query or synchronize. */
typedef int (*orKernelFunc)(void* userData, char* errorMessage, size_t capacity);

typedef struct orDim3 {
  uint32_t x, y, z;
} orDim3;

typedef struct orLaunchConfig {
  uint32_t structSize; /* sizeof(orLaunchConfig), for versioning */
  const char* name;    /* shown by profilers; copied (interned) by the runtime */
  orKernelFunc func;
  void* userData;
  /* Called exactly once with userData after the kernel ran, or if it is
   * discarded. May be NULL. Runs on an executor thread. */
  void (*userDataDestroy)(void* userData);
  orDim3 grid; /* logical launch shape, recorded for profilers */
  orDim3 block;
  uint32_t sharedMemBytes;
  /* Optional (may be NULL): where the kernel came from, as the members of a
   * JSON object (e.g. "\"source_lines\": [\"model.py:12\"]"), which profilers
   * add to the kernel's event. Copied (interned) by the runtime: pass the
   * same few strings over and over, not a new one per launch. The caller
   * guarantees it is valid JSON; the runtime does not parse it. */
  const char* annotation;
  /* Appended (read only when structSize covers them): the work the kernel's
   * arguments define, for KERNEL_METRICS records. Set a bit of workKnown for
   * each value given; a value whose bit is clear is ignored. Never estimate:
   * leave a bit clear when the kernel's work is not defined by its
   * arguments. */
  uint32_t workKnown; /* OR_KERNEL_WORK_FLOPS | OR_KERNEL_WORK_BYTES */
  uint32_t reserved;
  uint64_t flops;        /* floating-point operations; a multiply-add counts 2 */
  uint64_t bytesRead;    /* device memory bytes read */
  uint64_t bytesWritten; /* device memory bytes written */
} orLaunchConfig;

/* orLaunchConfig.workKnown bits. */
enum { OR_KERNEL_WORK_FLOPS = 1, OR_KERNEL_WORK_BYTES = 2 };

/* Queues the kernel and returns before it runs. name and func must not be
 * NULL. On success the runtime owns userData (it calls userDataDestroy once);
 * on failure it does not touch userData and never calls userDataDestroy. */
OR_API orError_t orLaunchKernel(orStream_t stream, const char* name, orKernelFunc func, void* userData);
OR_API orError_t orLaunchKernelEx(const orLaunchConfig* config, orStream_t stream);

/* Queues a host function on the stream (like cudaLaunchHostFunc): it runs in
 * stream order on an executor thread and produces no kernel record. */
typedef void (*orHostFunc)(void* userData);
OR_API orError_t orLaunchHostFunc(orStream_t stream, orHostFunc func, void* userData);

/* ------------------------------------------------------- collectives */

/* What a collective launch describes to profilers (see
 * orActivityCommunication in activity.h, which copies these fields). */
typedef struct orCollectiveConfig {
  uint32_t structSize;    /* sizeof(orCollectiveConfig), for versioning */
  const char* name;       /* device event name; copied (interned). Not NULL */
  const char* collective; /* collective's name; copied. NULL reads as "" */
  const char* dataType;   /* copied. NULL reads as "" */
  const char* groupName;  /* copied. NULL reads as "" */
  uint64_t count;
  uint64_t bytes;
  uint64_t sequence;
  uint32_t groupSize;
  int32_t rank;
  int32_t peer;      /* -1 unless point-to-point */
  orKernelFunc func; /* the transfer itself; not NULL */
  void* userData;
  void (*userDataDestroy)(void* userData); /* as in orLaunchConfig */
} orCollectiveConfig;

/* Queues a collective on the stream and returns before it runs, exactly as
 * orLaunchKernelEx does (same ownership of userData, same failure rules: a
 * non-zero return from func sticks to the stream with the event name and the
 * reason). It differs only in what is recorded: a RUNTIME record with
 * OR_API_LAUNCH_COLLECTIVE on the calling thread and, when it runs, one
 * COMMUNICATION record. func may block (it waits for peers), so it occupies
 * one executor thread of the device while it runs. */
OR_API orError_t orLaunchCollective(const orCollectiveConfig* config, orStream_t stream);

/* For a collective's func only, on the executor thread running it: copies
 * count bytes between device and host memory as part of the collective, so a
 * transfer can stage its data in chunks beside the transfer itself (as NCCL
 * pipelines) instead of in copies queued before and after it. The copy runs
 * on the calling thread before this returns. When the collective was queued
 * with MEMCPY activity enabled it writes one MEMCPY record with a correlation
 * id of its own (no RUNTIME record: nothing was called on a host thread) and
 * EXTERNAL_CORRELATION records with the external ids the launching thread had
 * pushed when it queued the collective, on copyStream's row: a stream of the same
 * device that the caller keeps for these copies (nothing else runs on it
 * meanwhile, so the row shows the copies beside the collective, not nested
 * in it). kind is orMemcpyDeviceToHost or orMemcpyHostToDevice; the device
 * side must be memory of the collective's device, and both ranges must lie
 * inside their allocations. Errors: orErrorInvalidValue outside a
 * collective's func, for another kind, for pointers that do not match the
 * kind or run past an allocation, or for copyStream being the collective's
 * own stream; orErrorInvalidResourceHandle for a bad copyStream or one of
 * another device. Nothing is copied on error. */
OR_API orError_t orCollectiveCopy(void* dst, const void* src, size_t count, orMemcpyKind kind, orStream_t copyStream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPENREG_RUNTIME_H */
