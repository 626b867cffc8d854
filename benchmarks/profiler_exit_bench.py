"""Where the time goes when torch.profiler stops, for 10 k to 1 M device records.

Each case runs in a child process (so peak RSS is its own), under
torch.profiler.profile(activities=[CPU, PrivateUse1]), and times, in order:

    exit          profile.__exit__: device synchronize, then torch's
                  _disable_profiler (Kineto stops the plugin's session, which
                  flushes and drains; the plugin's processTrace; torch's own
                  C++ post-processing of every event)
      of which    plugin stop (flush + drain), plugin prepare (joins, clock
                  mapping) and plugin emit (filters, flows, Kineto
                  activities), from the plugin's OPENREG_PROFILER_DEBUG line;
                  the rest of _disable_profiler is torch and Kineto
    events        torch's Python post-processing: _parse_kineto_results into
                  FunctionEvents and _build_tree (what prof.events() costs)
    key_averages  prof.key_averages() on those events
    export        prof.export_chrome_trace() (Kineto's JSON writer)

Workloads:
    ops     N in-place adds on the real openreg backend: N aten ops, N
            launches, N kernels (real runtime, real clocks)
    replay  N kernels and their launches from the replay activity library's
            scenario (tests/activity_replay): the plugin and Kineto see N
            device records, torch sees almost no host ops, so the plugin's
            share is what is left

    python benchmarks/profiler_exit_bench.py [--ops 10000,100000] [--replay 10000,100000,1000000]

Prints one row per case; the plugin's conversion rate is device records per
second through prepare + emit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, resource, sys, time
workload, n = sys.argv[1], int(sys.argv[2])
out = {}
if workload == "replay":
    sys.path.insert(0, os.path.join(os.environ["OPENREG_REPO"], "tests", "profiler"))
    from replay_harness import torch
else:
    import torch, torch_openreg
from torch.profiler import profile, ProfilerActivity

if workload == "ops":
    x = torch.zeros(16, device="openreg")
    torch.openreg.synchronize()
prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
prof.__enter__()
t0 = time.perf_counter()
if workload == "ops":
    for _ in range(n):
        x.add_(1.0)
else:
    # The scenario's records lie in the first n * 2 us of the window.
    time.sleep(n * 2e-6 + 0.05)
out["run_s"] = time.perf_counter() - t0
t0 = time.perf_counter()
prof.__exit__(None, None, None)
out["exit_s"] = time.perf_counter() - t0
out["disable_s"] = prof.profiler._stats.profiler_disable_call_duration_us / 1e6
t0 = time.perf_counter()
events = prof.events()
out["events_s"] = time.perf_counter() - t0
out["device_events"] = sum(1 for e in events if e.device_type != torch.autograd.DeviceType.CPU)
out["events"] = len(events)
t0 = time.perf_counter()
prof.key_averages()
out["key_averages_s"] = time.perf_counter() - t0
t0 = time.perf_counter()
prof.export_chrome_trace(os.environ["BENCH_TRACE"])
out["export_s"] = time.perf_counter() - t0
out["trace_mb"] = os.path.getsize(os.environ["BENCH_TRACE"]) / 1e6
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("BENCH " + json.dumps(out))
"""


def replay_library() -> Path:
    candidates = sorted(
        REPO.glob("build/*/tests/activity_replay/libopenreg_activity_replay.so"),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for path in candidates:
        cache = path.parents[2] / "CMakeCache.txt"
        if cache.exists() and re.search(r"OPENREG_SANITIZER:\w+=(address|thread)", cache.read_text()):
            continue
        return path
    sys.exit("the replay activity library is not built (pip install -e . builds it into build/py)")


def run_case(workload: str, n: int, folder: Path) -> dict:
    env = dict(
        os.environ,
        OPENREG_PROFILER_DEBUG="1",
        OPENREG_REPO=str(REPO),
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        BENCH_TRACE=str(folder / f"{workload}_{n}.json"),
        PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    )
    if workload == "replay":
        library = str(replay_library())
        scenario = folder / f"scenario_{n}.txt"
        scenario.write_text(
            f"kernel device=0 stream=1 start_us=100 dur_us=1 name=replay_kernel repeat={n} period_us=2\n"
        )
        env.update(
            OPENREG_ACTIVITY_LIBRARY=library,
            OPENREG_REPLAY_CONTROL=library,
            OPENREG_REPLAY_SCENARIO=str(scenario),
            OPENREG_PROFILER_LIB_DIR=str(REPO / "torch_openreg" / "lib"),
        )
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, workload, str(n)], env=env, capture_output=True, text=True, timeout=3600
    )
    bench = re.search(r"^BENCH (\{.*\})$", proc.stdout, re.M)
    plugin = re.search(r"openreg profiler emit stats: (\{.*\})", proc.stderr)
    if proc.returncode != 0 or bench is None or plugin is None:
        sys.exit(f"{workload} {n} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    result = json.loads(bench.group(1))
    result["plugin"] = json.loads(plugin.group(1))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="10000,100000")
    parser.add_argument("--replay", default="10000,100000,1000000")
    args = parser.parse_args()
    cases = [("ops", int(n)) for n in args.ops.split(",") if n] + [
        ("replay", int(n)) for n in args.replay.split(",") if n
    ]

    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
    header = (
        f"{'case':<16} {'dev ev':>8} {'exit s':>7} {'stop ms':>8} {'prep ms':>8} {'emit ms':>8} "
        f"{'torch s':>8} {'events s':>9} {'k_avg s':>8} {'export s':>9} {'MB':>6} {'RSS MB':>7} "
        f"{'plugin M dev rec/s':>19}"
    )
    print(header)
    with tempfile.TemporaryDirectory() as folder:
        for workload, n in cases:
            r = run_case(workload, n, Path(folder))
            p = r["plugin"]
            plugin_s = (p["stop_ms"] + p["prepare_ms"] + p["emit_ms"]) / 1e3
            torch_s = r["disable_s"] - plugin_s  # the rest of _disable_profiler
            rate = r["device_events"] / ((p["prepare_ms"] + p["emit_ms"]) / 1e3) / 1e6
            print(
                f"{workload + ' ' + str(n):<16} {r['device_events']:>8} {r['exit_s']:>7.2f} {p['stop_ms']:>8.1f} "
                f"{p['prepare_ms']:>8.1f} {p['emit_ms']:>8.1f} {torch_s:>8.2f} {r['events_s']:>9.2f} "
                f"{r['key_averages_s']:>8.2f} {r['export_s']:>9.2f} {r['trace_mb']:>6.0f} "
                f"{r['peak_rss_mb']:>7.0f} {rate:>19.2f}",
                flush=True,
            )
    print(
        "torch s: _disable_profiler minus the plugin's stop, prepare and emit (Kineto and torch's C++ "
        "post-processing); events s: torch's Python post-processing (prof.events())"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
