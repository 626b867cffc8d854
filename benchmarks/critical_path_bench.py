#!/usr/bin/env python3
"""The critical path of a step: `python -m torch_openreg critical-path` against HolisticTraceAnalysis's
critical_path_analysis, side by side in one run, each in a fresh process.

    python benchmarks/critical_path_bench.py [--events 600000] [--ops-per-step 2000] [--step 3]
        [--ranks 8] [--rank-events 330000] [--no-hta] [--repeat 1] [--trace PATH]

1. One openreg trace (trace/python/openreg_trace/synthetic.py's training-like workload: --events events,
   about 120 MB of JSON by default, steps of --ops-per-step ops): the critical path of ProfilerStep#<step>
   by `critical-path --json` and by HTA (TraceAnalysis + critical_path_analysis(annotation="ProfilerStep",
   instance_id=step-1); HTA learns openreg's runtime rows from openreg_trace.hta.teach()). Wall time,
   CPU time and peak RSS of each process, and both path lengths. --trace PATH measures a trace you made
   instead (a long `demo` run, for one), alone in a folder of its own as HTA wants.
2. --ranks rank traces of --rank-events events each (about 50 MB each by default): each step an
   all_reduce matched across ranks by process group and Seq, rank r arriving r x 20 us late. The cross-rank
   path by `critical-path DIR` (HTA has no cross-rank critical path), then every step's by `--each-step`.

Nothing is asserted; the figures go to benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WORKLOAD_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from openreg_trace.synthetic import write_workload
print(write_workload(sys.argv[2], int(sys.argv[3]), ops_per_step=int(sys.argv[4])))
"""

HTA_SCRIPT = """
import logging, sys, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
sys.path.insert(0, sys.argv[1])
from openreg_trace import hta as openreg_hta
openreg_hta.teach()
from hta.trace_analysis import TraceAnalysis
t = TraceAnalysis(trace_dir=sys.argv[2])
graph, ok = t.critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=int(sys.argv[3]))
assert ok
print(int(round(sum(e.weight for e in graph.critical_path_edges_set) * 1000)), len(graph.critical_path_events_set))
"""

RANKS_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from openreg_trace.synthetic import KinetoTraceWriter

folder, ranks, events = Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ops = 200  # per step: an op launching a kernel (4 events), then the step's all_reduce and a sync
steps = max(1, events // (4 * ops + 10))
for rank in range(ranks):
    w = KinetoTraceWriter(host_pid=1000 + rank, host_tid=1000 + rank)
    w.distributed = {"backend": "nccl", "rank": rank, "world_size": ranks}
    w.host_rows().device_rows(rank, [7, 20])
    out = open(folder / f"rank{rank}.json", "w")
    out.write(w.text().rsplit("\\n  ],", 1)[0])
    ext = corr = 0
    for k in range(steps):
        w.events.clear()
        base = k * 4_000_000
        ext += 1
        step_ext = ext
        t = base + 10_000
        for i in range(ops):
            ext += 1
            corr += 1
            w.op("aten::mm", t, 8_000, ext)
            w.runtime("orLaunchKernel", t + 2_000, 3_000, corr, ext)
            w.device_event("gemm", t + 6_000 + rank * 100, 9_000, rank, 7, corr, ext)
            t += 10_000
        ext += 1
        corr += 1
        arrive = t + 20_000 * rank
        w.op("record_param_comms", arrive - 10_000, 8_000, ext)
        w.runtime("orLaunchKernel", arrive - 8_000, 2_000, corr, ext)
        args = {"External id": ext, "device": rank, "stream": 20, "correlation": corr, "Collective name": "allreduce",
                "Process Group Name": "0", "Seq": k, "Group size": ranks, "dtype": "Float", "In msg nelems": 1 << 20}
        end = t + 20_000 * (ranks - 1) + 1_000_000
        w.device_event("ncclDevKernel_AllReduce_Sum_f32", arrive, end - arrive, rank, 20, corr, ext, args=args)
        # The host waits for the all_reduce; rank 0 then works 50 us more (the path crosses to it).
        ext += 1
        corr += 1
        w.op("aten::item", arrive + 1_000, end + 3_000 - arrive - 1_000, ext)
        w.runtime("orStreamSynchronize", arrive + 1_500, end + 2_000 - arrive - 1_500, corr, ext)
        sync = {"cuda_sync_kind": "Stream Sync", "device": rank, "stream": 20, "correlation": corr}
        w.complete("cuda_sync", "Stream Sync", arrive + 1_500, end + 2_000 - arrive - 1_500, rank, 20, sync)
        if rank == 0:
            ext += 1
            w.op("aten::_foreach_add_", end + 4_000, 50_000, ext)
        w.op(f"ProfilerStep#{k + 1}", base + 5_000, end + 60_000 - base - 5_000, step_ext, cat="user_annotation")
        out.write(",\\n  " + ",\\n  ".join(w.events))
    w.events.clear()
    w.span(0, steps * 4_000_000)
    out.write(",\\n  " + ",\\n  ".join(w.events))
    out.write('\\n  ],\\n  "distributedInfo": ' + __import__("json").dumps(w.distributed) + '\\n}')
    out.close()
print(steps)
"""


def measure(cmd: list[str]) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak RSS (MB) and stdout of one child."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err[-3000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def best(repeat: int, cmd: list[str]) -> tuple[float, float, float, str]:
    runs = [measure(cmd) for _ in range(repeat)]
    return (min(r[0] for r in runs), min(r[1] for r in runs), min(r[2] for r in runs), runs[0][3])


def row(label: str, m: tuple[float, float, float, str]) -> str:
    return f"  {label:<52}{m[0]:>9.2f}{m[1]:>9.2f}{m[2]:>9.0f}"


def one_trace(args: argparse.Namespace, tmp: Path) -> tuple[Path, int]:
    """The trace to measure, alone in its folder, and its number of events."""
    path = tmp / "one" / (args.trace.name if args.trace else "synthetic.json")
    path.parent.mkdir()
    if args.trace:
        os.symlink(args.trace.resolve(), path)
        # Counted by the trace library's reader, in a child: a trace loaded here would stay in this process's
        # memory, which every child forked from it starts with (and counts in its peak RSS).
        summary = subprocess.run(
            [sys.executable, "-m", "torch_openreg", "summary", str(path), "--json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return path, json.loads(summary)["trace"]["events"]
    n = subprocess.run(
        [sys.executable, "-c", WORKLOAD_SCRIPT, str(REPO), str(path), str(args.events), str(args.ops_per_step)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return path, int(n)


def single(args: argparse.Namespace, tmp: Path) -> None:
    path, n = one_trace(args, tmp)
    ours = best(
        args.repeat,
        [sys.executable, "-m", "torch_openreg", "critical-path", str(path), "--step", str(args.step), "--json"],
    )
    result = json.loads(ours[3])
    print(
        f"\none trace: {n:,} events, {path.stat().st_size / 1e6:.1f} MB JSON; ProfilerStep#{args.step}: "
        f"{result['graph']['events']:,} events in the graph"
    )
    print(f"  {'':<52}{'wall s':>9}{'CPU s':>9}{'peak MB':>9}")
    print(row("python -m torch_openreg critical-path --json", ours) + f"   path {result['path_ns']:,} ns")
    if args.no_hta:
        return
    hta = best(args.repeat, [sys.executable, "-c", HTA_SCRIPT, str(REPO), str(path.parent), str(args.step - 1)])
    hta_ns, hta_events = map(int, hta[3].split())
    print(row("HTA: TraceAnalysis + critical_path_analysis", hta) + f"   path {hta_ns:,} ns")
    print(
        f"  ours vs HTA: {hta[0] / ours[0]:.1f}x faster (wall), {hta[1] / ours[1]:.1f}x (CPU), "
        f"{ours[2] / hta[2]:.2f} of its peak memory; path lengths {result['path_ns'] / hta_ns:.4f}, "
        f"events on the path {len(result['events'][0])} (HTA {hta_events})"
    )


def ranks(args: argparse.Namespace, tmp: Path) -> None:
    folder = tmp / "ranks"
    folder.mkdir()
    steps = subprocess.run(
        [sys.executable, "-c", RANKS_SCRIPT, str(REPO), str(folder), str(args.ranks), str(args.rank_events)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
    m = best(
        args.repeat, [sys.executable, "-m", "torch_openreg", "critical-path", str(folder), "--step", "2", "--json"]
    )
    r = json.loads(m[3])
    print(f"\n{args.ranks} rank traces, {size / args.ranks:.1f} MB each ({size:.0f} MB), {steps} steps each")
    print(f"  {'':<52}{'wall s':>9}{'CPU s':>9}{'peak MB':>9}")
    print(row("python -m torch_openreg critical-path DIR --json", m) + f"   path {r['path_ns']:,} ns")
    last = {c["last_rank"] for c in r["collectives"]}
    print(
        f"  path from rank {r['start_rank']} to rank {r['end_rank']}; last to arrive: {sorted(last)}; "
        "HTA: no cross-rank critical path"
    )
    each = best(
        args.repeat, [sys.executable, "-m", "torch_openreg", "critical-path", str(folder), "--each-step", "--json"]
    )
    print(row(f"critical-path DIR --each-step --json ({len(json.loads(each[3])['steps'])} steps)", each))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=600_000, help="one trace's events (0: skip)")
    parser.add_argument("--ops-per-step", type=int, default=2000)
    parser.add_argument("--step", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=8, help="rank traces (0: skip)")
    parser.add_argument("--rank-events", type=int, default=330_000)
    parser.add_argument("--no-hta", action="store_true")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--trace", type=Path, help="measure this trace instead of a synthetic one")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}; {os.cpu_count()} CPUs visible")
    with tempfile.TemporaryDirectory() as tmp:
        if args.events or args.trace:
            single(args, Path(tmp))
        if args.ranks:
            ranks(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
