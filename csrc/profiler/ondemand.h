// On-demand traces: Kineto's daemon mode (KINETO_USE_DAEMON=1), where a
// daemon (Dynolog: `dyno gputrace`) asks a running process for a trace and
// Kineto writes it, with no torch.profiler.profile in the program.
//
// torch hands a PrivateUse1 plugin to Kineto only when a profile() with
// ProfilerActivity.PrivateUse1 starts (PrivateUse1ProfilerRegistry::
// onKinetoInit), so without the hand-over here the daemon's traces have no
// device rows. The one-line fix in torch would make global_kineto_init(),
// which starts Kineto in daemon mode, call onKinetoInit() as well.
#pragma once

#include <cstdint>

#include <Config.h>

#include "session.h"

namespace openreg::profiler {

// In daemon mode (Kineto's own test: KINETO_USE_DAEMON set), hands this
// plugin to Kineto now, through torch's registry, so that a later profile()
// finds it handed over and adds nothing. Call once the plugin is registered
// with REGISTER_PRIVATEUSE1_PROFILER. Never throws; a no-op outside daemon
// mode.
void handPluginToKinetoInDaemonMode();

// Fills the on-demand fields of `request` from Kineto's config of the trace.
// A request that names no ACTIVITY_TYPES (as `dyno gputrace` sends) also gets
// the runtime rows and launch arrows: Kineto's default set has CUDA's runtime
// type, not PRIVATEUSE1_RUNTIME. One that names types gets those.
void describeOnDemandRequest(const libkineto::Config& config, SessionRequest& request);
// Fills the request's client fields (customConfig, profilerMetrics, perKernel)
// from what torch's _ExperimentalConfig put in Kineto's config. Never throws
// past a std::bad_alloc.
void describeClientConfig(const libkineto::Config& config, SessionRequest& request);

// What endOnDemandTraceAtExit did.
enum OnDemandExit : int {
  kOnDemandNone = 0,        // no on-demand trace in progress
  kOnDemandWritten = 1,     // the trace in progress ended and Kineto wrote it
  kOnDemandNotStarted = 2,  // requested but not started yet: nothing traced
  kOnDemandNotWritten = 3,  // Kineto had not written it by the deadline
};

// At process exit: ends the on-demand trace in progress so that Kineto writes
// it before the exit handlers run (torch crashes at exit while its on-demand
// collection is on, CPU-only too). A duration-based trace runs to its end; an
// iteration-based one is ended now, with Kineto's step count (its remaining
// iterations hold no work, which its metadata says). Waits for the file at
// most graceMs past the trace's end. Says on stderr what it did. Main
// thread, without the GIL (a Kineto thread stops torch's collection).
OnDemandExit endOnDemandTraceAtExit(int64_t graceMs);

}  // namespace openreg::profiler
