/*
 * Test controls of the replay implementation of openreg/activity.h. Not part
 * of the activity API: the plugin never calls these; tests do (ctypes).
 */
#ifndef OPENREG_ACTIVITY_REPLAY_H
#define OPENREG_ACTIVITY_REPLAY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Submits device work as a launch on the calling thread would: a RUNTIME
 * record now, EXTERNAL_CORRELATION records for the tops of this thread's
 * external-correlation stacks, and the device record, queued behind earlier
 * work on (device, stream) and stamped in the device's simulated clock.
 * kind: 1 kernel, 2 memcpy (copyKind: orActivityMemcpyKind), 3 memset,
 * 4 stream wait. Recorded only while the window is open. Returns orError_t. */
int orReplaySubmit(int kind, int device, uint64_t stream, const char* name, uint64_t bytes, uint64_t durationNs,
                   int copyKind);
/* Waits until all submitted work has "run"; records an orDeviceSynchronize
 * runtime call and a host SYNCHRONIZATION record. */
int orReplaySynchronize(void);
/* Host epoch ns at which the current (or last) window opened. */
uint64_t orReplayWindowOpenedAt(void);
/* The simulated device clock, for checking the plugin's mapping. */
uint64_t orReplayDeviceTime(int device, uint64_t hostNs);
int orReplayIsTracing(void);
int orReplayRegistered(void);
/* Depth of the calling thread's external-correlation stack of that kind. */
int orReplayExternalDepth(int kind);
/* Non-empty if OPENREG_REPLAY_SCENARIO could not be read. */
const char* orReplayScenarioError(void);

#ifdef __cplusplus
}
#endif

#endif
