"""HolisticTraceAnalysis (HTA) on openreg's own traces, taught by ``openreg_trace.hta``.

Three traces are made once per module: one rank (a small model, a side stream that waits on an event, each kind
of synchronize, copies and a memset), two ranks (an all_reduce per step computed over, the last rank late to
it) and a compiled model. Every HTA analysis runs on them with the teaching on, and each result is checked
against what the trace says (sums of durations, counts of launches, the step bounding the critical path, the
sync edges the trace's sync rows call for) and against openreg's own ``summary``, to the nanosecond where HTA
keeps nanoseconds (teach() turns its microsecond rounding off; float sums are compared within 50 ns).

``OPENREG_HTA_UNTAUGHT=1`` runs the same tests without teach(), to see each of them fail.
``OPENREG_HTA_TRACES=DIR`` reuses (or leaves) the traces in DIR: the test that runs the other HTA version in a
second virtual environment passes the traces it made to the run there.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import venv
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import pandas
import pytest
from hta.trace_analysis import TraceAnalysis  # a test dependency: requirements-test.txt, scripts/bootstrap.sh

from openreg_trace import hta as openreg_hta
from openreg_trace import open_trace
from torch_openreg._local_ranks import LocalRanks, free_port, rank_environment

REPO = Path(__file__).resolve().parents[1]
UNTAUGHT = os.environ.get("OPENREG_HTA_UNTAUGHT") == "1"
TRACES_ENV = "OPENREG_HTA_TRACES"
NESTED_ENV = "OPENREG_HTA_NESTED"
HTA_VERSION = openreg_hta.hta_version()
# The version the second virtual environment gets: the one the main environment does not have.
OTHER_HTA = {"0.6.1": "HolisticTraceAnalysis==0.5.0", "0.5.0": "traceinsight==0.6.1"}
ALL = 10**9
# HTA 0.5.0 predates pandas 3: its critical path (DataFrame.drop with both axis and columns) and its call graph
# (numpy.unique with axis on object columns) raise there, on CUDA's traces as on ours (checked below).
PANDAS3_BREAKS_050 = HTA_VERSION == "0.5.0" and int(pandas.__version__.split(".")[0]) >= 3
PANDAS3_ERRORS = {
    "critical_path": (ValueError, "Cannot specify both 'axis' and 'index'/'columns'"),
    "call_graph": (TypeError, "axis argument to unique is not supported"),
}
NS_TOLERANCE = 50  # float sums of microsecond timestamps near 5e12 lose a few ns each
COMM_PREFIX = openreg_hta.COMM_KERNEL_PREFIX
SYNC_KINDS = ("Stream Wait Event", "Event Sync", "Stream Sync", "Context Sync")

ONE_RANK = r"""
import json, sys, torch, torch_openreg
from torch.profiler import ProfilerActivity, profile, schedule
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to("openreg")
host_batch = torch.randn(32, 64)
scratch = torch.empty(1024, device="openreg")
side = torch.openreg.Stream()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
             schedule=schedule(wait=0, warmup=1, active=3),
             on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as prof:
    for _ in range(4):
        x = host_batch.to("openreg")                # orMemcpyAsync HtoD
        scratch.zero_()                             # orMemsetAsync
        y = model(x)
        ready = torch.openreg.Event()
        ready.record()                              # orEventRecord on the default stream
        with torch.openreg.stream(side):
            side.wait_event(ready)                  # orStreamWaitEvent: Stream Wait Event
            z = (y * 2).sum()
        torch.openreg.current_stream().wait_stream(side)
        side.synchronize()                          # Stream Sync
        ready.synchronize()                         # Event Sync
        z.cpu()                                     # orMemcpyAsync DtoH, then Stream Sync
        torch.openreg.synchronize()                 # Context Sync
        prof.step()
json.dump({"side_stream": side.stream_id}, open(sys.argv[2], "w"))
"""

TWO_RANKS = r"""
import json, os, sys, time
import torch, torch.distributed as dist
import torch_openreg  # noqa: F401
from torch.profiler import ProfilerActivity, profile, schedule

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
folder = sys.argv[1]
late = world - 1  # arrives 30 ms late at every all_reduce: the straggler
dev = torch.device("openreg", rank % torch.openreg.device_count())
torch.openreg.set_device(dev)
dist.init_process_group(backend="cpu:gloo,openreg:orccl", device_id=dev)
torch.manual_seed(rank)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64)).to(dev)
x = torch.randn(32, 64, device=dev)
square = torch.randn(256, 256, device=dev)
grads = torch.ones(1 << 18, device=dev)
with profile(
    activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
    schedule=schedule(wait=0, warmup=1, active=4),
    on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(folder, f"rank{rank}.json")),
) as prof:
    for step in range(5):
        model(x).sum()
        if rank == late:
            time.sleep(0.03)
        work = dist.all_reduce(grads, async_op=True)
        square @ square  # computes while the all_reduce is in flight
        work.wait()
        torch.openreg.synchronize()
        prof.step()
stream = dist.group.WORLD._get_backend(dev).communication_stream_id(dev.index)
dist.destroy_process_group()
with open(os.environ["RANK_RESULT"], "w") as f:
    json.dump({"communication_stream": stream, "late": late}, f)
"""

COMPILED = r"""
import sys, torch, torch_openreg
import torch._inductor.config as inductor_config
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule
torch.manual_seed(0)
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(32, 32)
    def forward(self, x):
        return torch.softmax(F.gelu(self.linear(x)) * 2, dim=-1).sum()
compiled = torch.compile(Block().to("openreg"))
x = torch.randn(16, 32, device="openreg")
with inductor_config.patch(force_disable_caches=True):
    for _ in range(2):  # compiles outside the window
        compiled(x).backward()
    torch.openreg.synchronize()
    # record_shapes, as the demo's --compile: Inductor's launch ops then carry their launch's stream.
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=3),
                 on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as prof:
        for _ in range(4):
            compiled(x).backward()
            torch.openreg.synchronize()
            prof.step()
"""


# ---------------------------------------------------------------------------------------------------------------
# The traces, made once per module (or found in $OPENREG_HTA_TRACES).


class Run:
    """One folder of rank traces: the documents, openreg's summary of each, HTA's analysis of the folder."""

    def __init__(self, kind: str, folder: Path, meta: dict):
        self.kind = kind
        self.folder = folder
        self.meta = meta
        self.docs: dict[int, dict] = {}
        self.summaries: dict[int, dict] = {}
        self.paths: dict[int, Path] = {}
        for path in sorted(folder.glob("*.json")):
            doc = json.loads(path.read_text())
            rank = doc.get("distributedInfo", {}).get("rank", 0)
            self.docs[rank], self.paths[rank] = doc, path
            with open_trace(path) as t:
                self.summaries[rank] = t.summary(top=ALL)
        assert self.docs, f"no trace in {folder}"
        self._analysis = None

    @property
    def ranks(self) -> list[int]:
        return sorted(self.docs)

    @property
    def analysis(self) -> TraceAnalysis:
        if self._analysis is None:
            with quiet():
                self._analysis = TraceAnalysis(trace_dir=str(self.folder), include_last_profiler_step=True)
        return self._analysis


@contextlib.contextmanager
def quiet():
    """HTA logs warnings for every frame it reads; tests read its results instead."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


@pytest.fixture(scope="module", autouse=True)
def taught():
    if UNTAUGHT:
        yield None
        return
    version = openreg_hta.teach()
    yield version
    openreg_hta.forget()


@pytest.fixture(scope="module")
def traces_root(tmp_path_factory) -> Path:
    given = os.environ.get(TRACES_ENV)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        return Path(given)
    return tmp_path_factory.mktemp("hta_openreg")


def _python(script: str, *args: str, timeout: float) -> None:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _one_rank(root: Path) -> Run:
    folder = root / "one_rank"
    meta = root / "one_rank.meta.json"
    if not meta.exists():
        folder.mkdir(exist_ok=True)
        _python(ONE_RANK, str(folder / "rank0.json"), str(meta), timeout=300)
    return Run("one_rank", folder, json.loads(meta.read_text()))


def _two_ranks(root: Path) -> Run:
    folder = root / "two_ranks"
    results = [root / f"two_ranks.rank{r}.result.json" for r in range(2)]
    if not all(p.exists() for p in results):
        folder.mkdir(exist_ok=True)
        worker = root / "two_ranks_worker.py"
        worker.write_text(TWO_RANKS)
        port = free_port()
        logs = [open(root / f"two_ranks.rank{r}.log", "w+") for r in range(2)]
        try:
            with LocalRanks() as ranks:  # kills and reaps every rank on the way out
                for r in range(2):
                    env = rank_environment(r, 2, port, RANK_RESULT=str(results[r]))
                    ranks.spawn(
                        [sys.executable, str(worker), str(folder)], env, stdout=logs[r], stderr=subprocess.STDOUT
                    )
                finished = ranks.wait_all(240)
            for r, log in enumerate(logs):
                log.seek(0)
                assert finished and results[r].exists(), f"rank {r} did not finish:\n{log.read()[-4000:]}"
        finally:
            for log in logs:
                log.close()
    meta = [json.loads(p.read_text()) for p in results]
    return Run("two_ranks", folder, {"communication_stream": meta[0]["communication_stream"], "late": meta[0]["late"]})


def _compiled(root: Path) -> Run:
    folder = root / "compiled"
    if not (folder / "rank0.json").exists():
        folder.mkdir(exist_ok=True)
        _python(COMPILED, str(folder / "rank0.json"), timeout=600)
    return Run("compiled", folder, {})


MAKERS = {"one_rank": _one_rank, "two_ranks": _two_ranks, "compiled": _compiled}
_runs: dict[str, Run] = {}


@pytest.fixture(scope="module")
def runs(traces_root):
    _runs.clear()
    yield _runs
    _runs.clear()


def get_run(runs, root: Path, kind: str) -> Run:
    if kind not in runs:
        runs[kind] = MAKERS[kind](root)
    return runs[kind]


@pytest.fixture(scope="module", params=["one_rank", "two_ranks", "compiled"])
def run(request, runs, traces_root) -> Run:
    return get_run(runs, traces_root, request.param)


@pytest.fixture(scope="module")
def one_rank(runs, traces_root) -> Run:
    return get_run(runs, traces_root, "one_rank")


@pytest.fixture(scope="module")
def two_ranks(runs, traces_root) -> Run:
    return get_run(runs, traces_root, "two_ranks")


# ---------------------------------------------------------------------------------------------------------------
# What the trace says.


def complete(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def ns(us: float) -> int:
    return round(us * 1000)


def stream_of(e: dict) -> int:
    s = e.get("args", {}).get("stream")
    return s if isinstance(s, int) else -1


def hta_device_rows(doc: dict) -> list[dict]:
    """HTA's device rows: every event with a stream (its rule; the trace's cuda_sync rows on streams included), but
    host ops (teach(): Inductor's launch ops carry their launch's stream)."""
    return [e for e in complete(doc) if stream_of(e) != -1 and e.get("cat") != "cpu_op"]


def device_work(doc: dict) -> list[dict]:
    return [e for e in complete(doc) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]


def kernel_class(name: str) -> str:
    if name.startswith(COMM_PREFIX):
        return "communication"
    if name.startswith(("Memcpy", "Memset")):
        return "memory"
    if name == "Stream Wait Event" or name.endswith("Sync"):
        return "other"
    return "compute"


def union_ns(rows: list[dict]) -> int:
    total, end = 0, None
    for start, stop in sorted((ns(e["ts"]), ns(e["ts"] + e["dur"])) for e in rows):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def runtime_rows(doc: dict) -> list[dict]:
    return [e for e in complete(doc) if e.get("cat") == "privateuse1_runtime"]


def launches(doc: dict) -> list[tuple[dict, dict]]:
    """(runtime call, its device row) for the calls HTA is taught as launches, in call order."""
    device = {e["args"]["correlation"]: e for e in device_work(doc)}
    calls = [e for e in runtime_rows(doc) if e["name"] in openreg_hta.LAUNCH_CALLS]
    return [
        (c, device[c["args"]["correlation"]])
        for c in sorted(calls, key=lambda e: e["ts"])
        if c["args"]["correlation"] in device
    ]


def step(doc: dict, name: str) -> dict:
    (row,) = [e for e in complete(doc) if e.get("cat") == "user_annotation" and e["name"] == name]
    return row


def close(actual_us: float, expected_ns: int, tolerance: int = NS_TOLERANCE) -> bool:
    return abs(actual_us * 1000 - expected_ns) <= tolerance


# ---------------------------------------------------------------------------------------------------------------
# The teaching itself.


def test_openreg_traces_keep_openreg_names(run):
    """What HTA is taught is what openreg writes: no CUDA runtime names, no NCCL kernels."""
    for doc in run.docs.values():
        runtime = {e["name"] for e in runtime_rows(doc)}
        assert runtime and all(n.startswith("or") for n in runtime), runtime
        names = {e["name"] for e in complete(doc)}
        assert not [n for n in names if n.startswith(("cuda", "cu", "nccl", "hip"))]
    if run.kind == "two_ranks":
        assert any(n.startswith(COMM_PREFIX) for d in run.docs.values() for n in {e["name"] for e in device_work(d)})


def test_teach_is_idempotent_undoable_and_checks_the_version(monkeypatch):
    import hta.analyzers.critical_path_analysis as cpa
    import hta.version

    if UNTAUGHT:
        pytest.fail("the teaching is what this test checks")
    assert openreg_hta.is_taught()
    blocking = list(cpa.CPGraph.BLOCKING_SYNC_CALLS)
    assert openreg_hta.teach() == HTA_VERSION  # a second call changes nothing
    assert cpa.CPGraph.BLOCKING_SYNC_CALLS == blocking
    openreg_hta.forget()
    try:
        assert not set(openreg_hta.BLOCKING_CALLS) & set(cpa.CPGraph.BLOCKING_SYNC_CALLS)
        monkeypatch.setattr(hta.version, "__version_tuple__", (0, 7, 0))
        with pytest.raises(RuntimeError, match=r"0\.7\.0"):
            openreg_hta.teach()
        assert not openreg_hta.is_taught()
    finally:
        monkeypatch.undo()
        openreg_hta.teach()
    assert cpa.CPGraph.BLOCKING_SYNC_CALLS == blocking


def test_teach_after_hta_parsed_a_trace_warns(one_rank):
    """Parsing decides rounding and which rows are device rows: a trace parsed before teach() stays untaught."""
    code = (
        "import logging, warnings; logging.disable(logging.WARNING)\n"
        "from hta.trace_analysis import TraceAnalysis\n"
        "from openreg_trace import hta\n"
        f"analysis = TraceAnalysis(trace_dir={str(one_rank.folder)!r})  # alive: its trace stays parsed\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    hta.teach()\n"
        "print([f'{w.category.__name__}: {w.message}' for w in caught if 'teach()' in str(w.message)])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "['RuntimeWarning: openreg_trace.hta.teach() ran after HTA parsed 1 trace(s): those keep microsecond "
        "rounding and untaught rows, and give wrong results; create TraceAnalysis after teach()']"
    )


def test_the_module_imports_neither_torch_nor_hta():
    """Loaded on its own (the package's __init__ may load the device), it imports neither until teach()."""
    code = (
        "import importlib.util, sys; "
        f"spec = importlib.util.spec_from_file_location('openreg_hta', {str(Path(openreg_hta.__file__))!r}); "
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); "
        "print(sorted(n for n in sys.modules if n.split('.')[0] in ('torch', 'hta', 'torch_openreg')))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------------------------
# The analyses, on every trace.


def test_temporal_breakdown(run):
    with quiet():
        df = run.analysis.get_temporal_breakdown(visualize=False)
    assert sorted(df["rank"]) == run.ranks
    for row in df.to_dict("records"):
        doc, summary = run.docs[row["rank"]], run.summaries[row["rank"]]
        rows = hta_device_rows(doc)
        span = max(ns(e["ts"] + e["dur"]) for e in rows) - min(ns(e["ts"]) for e in rows)
        busy = union_ns(rows)
        compute = union_ns([e for e in rows if kernel_class(e["name"]) == "compute"])
        assert close(row["kernel_time(us)"], span)
        assert close(row["idle_time(us)"], span - busy)
        assert close(row["compute_time(us)"], compute)
        assert close(row["non_compute_time(us)"], busy - compute)
        # openreg's summary counts device work only; its compute time is HTA's.
        assert close(row["compute_time(us)"], summary["temporal"]["compute_ns"])
    if run.kind == "compiled":  # the host ops HTA would take for kernels untaught are there
        assert [e for d in run.docs.values() for e in complete(d) if e.get("cat") == "cpu_op" and stream_of(e) >= 0]


def test_idle_time_breakdown(run):
    with quiet():
        df, _ = run.analysis.get_idle_time_breakdown(ranks=run.ranks, visualize=False)
    theirs: dict = defaultdict(dict)
    for row in df.to_dict("records"):
        theirs[(row["rank"], row["stream"])][row["idle_category"]] = row["idle_time"]
    ours = {
        (rank, b["stream"]): {
            "host_wait": b["host_wait_ns"],
            "kernel_wait": b["kernel_wait_ns"],
            "other": b["other_ns"],
        }
        for rank, s in run.summaries.items()
        for b in s["idle_breakdown"]["streams"]
    }
    assert set(theirs) == set(ours)
    for key, cats in ours.items():
        for category, value in cats.items():
            # HTA rounds idle time to 0.01 us.
            assert close(theirs[key].get(category, 0.0), value, tolerance=10), (key, category)
    assert sum(v for cats in ours.values() for v in cats.values()) > 0


def test_kernel_breakdown_counts_collectives_as_communication(run):
    with quiet():
        by_type, per_kernel = run.analysis.get_gpu_kernel_breakdown(
            visualize=False, duration_ratio=1.0, num_kernels=ALL, include_memory_kernels=True
        )
    classes = {"COMPUTATION": "compute", "COMMUNICATION": "communication", "MEMORY": "memory"}
    theirs = {(r["rank"], r["name"]): (classes[r["kernel_type"]], r["sum (us)"]) for r in per_kernel.to_dict("records")}
    for rank, s in run.summaries.items():
        for k in s["top_kernels"]:
            kind, total = theirs[(rank, k["name"])]
            assert kind == k["class"], k["name"]
            assert close(total, k["total_ns"]), k["name"]
    assert {(rank, name) for rank, name in theirs} == {
        (rank, k["name"]) for rank, s in run.summaries.items() for k in s["top_kernels"]
    }
    comm = [e for doc in run.docs.values() for e in device_work(doc) if e["name"].startswith(COMM_PREFIX)]
    comm_total = sum(total for kind, total in theirs.values() if kind == "communication")
    assert close(comm_total, sum(ns(e["dur"]) for e in comm), tolerance=NS_TOLERANCE * max(1, len(comm)))
    if run.kind == "two_ranks":
        assert len(comm) == 2 * 4  # one all_reduce per step on each rank
        # By type: the collectives' time, alone or under other kernels, in pieces between the ranks' kernel
        # boundaries, each truncated to whole microseconds.
        pieces = [r["sum"] for r in by_type.to_dict("records") if "COMMUNICATION" in r["kernel_type"]]
        boundaries = sum(len(hta_device_rows(doc)) for doc in run.docs.values())
        assert 0 <= comm_total - sum(pieces) <= 2 * boundaries
        for rank, s in run.summaries.items():
            assert s["kernel_classes"]["total"]["communication"]["count"] == 4
            assert close(
                sum(t for (r, _), (kind, t) in theirs.items() if r == rank and kind == "communication"),
                s["kernel_classes"]["total"]["communication"]["total_ns"],
            )


def test_comm_comp_overlap(two_ranks):
    with quiet():
        df = two_ranks.analysis.get_comm_comp_overlap(visualize=False)
    theirs = dict(zip(df["rank"], df["comp_comm_overlap_pctg"]))
    assert sorted(theirs) == [0, 1]
    for rank, s in two_ranks.summaries.items():
        comm = s["communication"]
        assert comm["collectives"], "the trace holds collectives"
        assert theirs[rank] == round(100 * comm["overlap_share"], 2)
    # The matmul runs while the all_reduce is in flight (how much depends on the machine).
    assert any(theirs[rank] > 0 for rank in theirs)


def test_memory_bandwidth_counters(run):
    with quiet():
        series = run.analysis.get_memory_bw_time_series(ranks=run.ranks)
        summary = run.analysis.get_memory_bw_summary(ranks=run.ranks)
    assert sorted(series) == run.ranks
    for rank, df in series.items():
        rows = [e for e in device_work(run.docs[rank]) if e["name"].startswith(("Memcpy", "Memset"))]
        assert rows
        # Each copy and memset raises the counter where it starts and lowers it where it ends.
        # (HTA's times start at the earliest event of all ranks: min_ts.)
        expected = sorted([ns(e["ts"]) for e in rows] + [ns(e["ts"] + e["dur"]) for e in rows])
        points = sorted(ns(t + run.analysis.t.min_ts) for t in df["ts"])
        assert len(points) == len(expected)
        assert all(abs(a - b) <= 2 for a, b in zip(points, expected)), (points, expected)
        kinds = {e["name"][:11] if e["name"].startswith("Memcpy") else "Memset" for e in rows}
        assert set(summary.loc[rank].index) == kinds
        for kind in kinds:
            peak = max(e["args"]["memory bandwidth (GB/s)"] for e in rows if e["name"].startswith(kind))
            assert summary.loc[(rank, kind), ("memory_bw_gbps", "max")] >= peak - 1e-9


def test_queue_length_counters(run):
    with quiet():
        series = run.analysis.get_queue_length_time_series(ranks=run.ranks)
    assert sorted(series) == run.ranks
    for rank, df in series.items():
        pairs = launches(run.docs[rank])
        per_stream = Counter(stream_of(kernel) for _, kernel in pairs)
        assert dict(Counter(df["stream"])) == {s: 2 * n for s, n in per_stream.items()}
        for stream, points in df.groupby("stream"):
            lengths = points.sort_values("ts", kind="stable")["queue_length"].tolist()
            assert min(lengths) >= 0 and lengths[-1] == 0 and max(lengths) >= 1, stream


def test_kernel_launch_statistics(run):
    with quiet():
        stats = run.analysis.get_cuda_kernel_launch_stats(ranks=run.ranks, visualize=False)
    assert sorted(stats) == run.ranks
    for rank, df in stats.items():
        pairs = launches(run.docs[rank])
        assert len(df) == len(pairs) > 0
        assert sorted(df["correlation"]) == sorted(c["args"]["correlation"] for c, _ in pairs)
        rows = [r for r in run.summaries[rank]["launches"]["by_api"] if r["name"] in openreg_hta.LAUNCH_CALLS]
        assert sum(r["launches"] for r in rows) == len(df)
        assert close(df.cpu_duration.sum(), sum(r["host_ns"] for r in rows), tolerance=NS_TOLERANCE)
        assert close(df.launch_delay.sum(), sum(r["delay_ns"] for r in rows), tolerance=NS_TOLERANCE * len(df))
        assert sum(r["short_kernels"] for r in rows) == int((df.gpu_duration < df.cpu_duration).sum())


def test_aten_op_kernels_and_launch_delay(run):
    for rank in run.ranks:
        # One rank per call: HTA 0.6.1 carries one rank's launches over into the next rank's result.
        with quiet():
            result = run.analysis.get_aten_op_kernels_and_delay(ranks=[rank])
        doc = run.docs[rank]
        ops = [e for e in complete(doc) if e["name"].startswith("aten::")]
        kernels = {e["args"]["correlation"]: e for e in device_work(doc)}
        groups: dict = defaultdict(list)
        for call in sorted(runtime_rows(doc), key=lambda e: e["ts"]):
            if call["name"] not in openreg_hta.KERNEL_LAUNCHES:
                continue
            # The innermost aten op around the launch (HTA's rule).
            around = [o for o in ops if o["ts"] <= call["ts"] and o["ts"] + o["dur"] >= call["ts"] + call["dur"]]
            if around:
                op = max(around, key=lambda o: o["ts"])
                groups[(op["tid"], op["name"], op["ts"])].append((call, kernels[call["args"]["correlation"]]))
        expected: dict = defaultdict(list)
        for (_, name, _), pairs in groups.items():
            call, kernel = pairs[0]
            expected[(name, " -> ".join(k["name"] for _, k in pairs))].append(kernel["ts"] - call["ts"])
        theirs = {(r["aten_op_name"], r["kernel_sequence"]): r for r in result[rank].to_dict("records")}
        assert set(theirs) == set(expected)
        for key, delays in expected.items():
            assert theirs[key]["occurrence_count"] == len(delays)
            assert abs(theirs[key]["avg_runtime_delay"] - sum(delays) / len(delays)) < 1e-3 + 1e-9, key
        assert any(name == "aten::addmm" for name, _ in expected)


def expect_050_pandas3_failure(what: str, call) -> None:
    """HTA 0.5.0 under pandas 3: the call raises on our trace and, alike, on a real CUDA trace."""
    from test_trace_verdicts import shared_trace

    error, message = PANDAS3_ERRORS[what]
    with quiet(), pytest.raises(error, match=re.escape(message)):
        call()
    with tempfile.TemporaryDirectory() as cuda:
        Path(cuda, "trace.json").write_bytes(gzip.open(shared_trace("cuda_event_sync_multi_stream")).read())
        with quiet():
            analysis = TraceAnalysis(trace_dir=cuda)
        with quiet(), pytest.raises(error, match=re.escape(message)):
            if what == "critical_path":
                analysis.critical_path_analysis(rank=0, annotation="", instance_id=0)
            else:
                analysis.get_frequent_cuda_kernel_sequences(operator_name="aten::", output_dir=cuda, min_pattern_len=1)


def test_frequent_kernel_sequences(one_rank, tmp_path):
    if PANDAS3_BREAKS_050:
        return expect_050_pandas3_failure(
            "call_graph",
            lambda: one_rank.analysis.get_frequent_cuda_kernel_sequences(
                operator_name="aten::linear", output_dir=str(tmp_path), min_pattern_len=1
            ),
        )
    with quiet():
        df = one_rank.analysis.get_frequent_cuda_kernel_sequences(
            operator_name="aten::linear", output_dir=str(tmp_path), min_pattern_len=1, top_k=5
        )
    doc = one_rank.docs[0]
    linears = [e for e in complete(doc) if e["name"] == "aten::linear"]
    addmm = [e for e in complete(doc) if e["name"] == "aten::addmm"]
    kernels = [
        k for k in device_work(doc) if any(k["args"].get("External id") == a["args"]["External id"] for a in addmm)
    ]
    (row,) = df.to_dict("records")
    assert row["pattern"] == "aten::linear|gemm_bias_f32_nt"
    assert row["count"] == len(linears) == len(kernels) == 2 * 3  # two layers, three steps
    assert close(row["GPU kernel duration (us)"], sum(ns(k["dur"]) for k in kernels))
    assert close(row["CPU op duration (us)"], sum(ns(o["dur"]) for o in linears))
    assert list(tmp_path.glob("overlaid_*"))


def test_annotation_breakdown(run):
    with quiet():
        df = run.analysis.get_gpu_user_annotation_breakdown(visualize=False, duration_ratio=1.0, num_kernels=ALL)
    theirs = {(r["rank"], r["name"]): r["sum (us)"] for r in df.to_dict("records")}
    expected: Counter = Counter()
    for rank, doc in run.docs.items():
        for e in complete(doc):
            if e.get("cat") == "gpu_user_annotation":
                expected[(rank, e["name"])] += ns(e["dur"])
    assert expected and set(theirs) == set(expected)
    for key, total in expected.items():
        assert close(theirs[key], total), key


def test_stragglers(two_ranks):
    with quiet():
        stragglers = two_ranks.analysis.get_potential_stragglers(num_candidates=1)
    assert list(stragglers) == [two_ranks.meta["late"]]


def test_trace_diff_between_the_ranks(two_ranks):
    from hta.trace_diff import DeviceType, TraceDiff

    with quiet():
        diff = TraceDiff.compare_traces(
            str(two_ranks.folder),
            str(two_ranks.folder),
            control_rank=0,
            test_rank=1,
            control_iteration=[1, 2, 3, 4],
            test_iteration=[1, 2, 3, 4],
            device_type=DeviceType.GPU,
        )
    theirs = {r["name"]: r for r in diff.reset_index().to_dict("records")}
    control, test = ({k["name"]: k for k in two_ranks.summaries[r]["top_kernels"]} for r in (0, 1))
    assert set(control) == set(test) and set(control) <= set(theirs)
    for name in control:
        assert theirs[name]["Control_counts"] == control[name]["count"], name
        assert theirs[name]["Test_counts"] == test[name]["count"], name
        assert close(theirs[name]["diff_duration"], test[name]["total_ns"] - control[name]["total_ns"]), name
    ours = json.loads(
        subprocess.run(
            [sys.executable, "-m", "torch_openreg", "diff", "--json", *map(str, two_ranks.paths.values())],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    )["kernels"]
    for k in ours:
        assert (k["base_count"], k["new_count"]) == (
            theirs[k["name"]]["Control_counts"],
            theirs[k["name"]]["Test_counts"],
        )
        assert close(theirs[k["name"]]["diff_duration"], k["device_ns_delta"]), k["name"]


# ---------------------------------------------------------------------------------------------------------------
# Critical path.


def expected_sync_edges(doc: dict, window: dict) -> set[tuple]:
    """The sync edges HTA's critical path should have for the step `window`, read off the trace's cuda_sync rows
    (Kineto's schema) as HTA reads them: each as (source kind, source correlation, destination kind, its
    correlation). A stream wait: the last kernel launched on the waited-on stream before the event's record,
    to the first kernel launched on the waiting stream after the wait; an event sync: that kernel to the end of
    the synchronize call; a stream sync or context sync: the last kernel started on the stream (every stream)
    to the end of the call. Only kernels launched inside the step, and calls inside it, have nodes."""
    rows = complete(doc)
    ws, we = window["ts"], window["ts"] + window["dur"]

    def is_device(e):
        a = e.get("args", {})
        return (stream_of(e) >= 0 and a.get("correlation", -1) >= 0) or (
            e.get("cat") == "cuda_sync" and e["name"] in ("Event Sync", "Context Sync")
        )

    calls = {
        e["args"]["correlation"]: e for e in rows if not is_device(e) and e.get("args", {}).get("correlation", -1) >= 0
    }
    kernels = {e["args"]["correlation"]: e for e in rows if is_device(e) and e.get("cat") != "cuda_sync"}
    launched = sorted(
        ((c, kernels[k]) for k, c in calls.items() if c["name"] in openreg_hta.LAUNCH_CALLS and k in kernels),
        key=lambda p: p[0]["ts"],
    )

    def in_window(call):
        return call is not None and ws <= call["ts"] <= we and call["dur"] > 0

    def recorded(sync):
        record = calls.get(sync["args"].get("wait_on_cuda_event_record_corr_id"))
        if record is None:
            return None
        before = [
            k
            for c, k in launched
            if c["ts"] < record["ts"] and k["pid"] == sync["pid"] and stream_of(k) == sync["args"]["wait_on_stream"]
        ]
        return before[-1] if before else None

    graph_kernels = [k for k in kernels.values() if in_window(calls.get(k["args"]["correlation"]))]
    syncs = [e for e in rows if e.get("cat") == "cuda_sync" and e.get("args", {}).get("correlation", -1) in calls]
    syncs = [
        s
        for s in syncs
        if s["name"] == "Stream Wait Event"
        or in_window(calls[s["args"]["correlation"]])
        or (stream_of(s) == -1 and ws <= s["ts"] <= we and s["dur"] > 0)
    ]
    order = sorted(
        [(k["ts"], 0, k) for k in graph_kernels] + [(s["ts"] + s["dur"], 1, s) for s in syncs],
        key=lambda t: (t[0], t[1]),
    )
    in_graph = {id(k) for k in graph_kernels}
    last: dict[int, dict] = {}
    pending: dict[int, dict] = {}
    edges = set()
    for _, is_sync, e in order:
        if not is_sync:
            source = pending.pop(id(e), None)
            if source is not None and id(source) in in_graph:
                edges.add(("kernel_end", source["args"]["correlation"], "kernel_start", e["args"]["correlation"]))
            last[stream_of(e)] = e
            continue
        call = calls[e["args"]["correlation"]]
        if e["name"] == "Stream Wait Event":
            source = recorded(e)
            after = [
                k
                for c, k in launched
                if c["ts"] >= call["ts"] and c["tid"] == call["tid"] and stream_of(k) == stream_of(e)
            ]
            if source is not None and after:
                pending[id(after[0])] = source
            continue
        if not in_window(call):
            continue
        if e["name"] == "Event Sync":
            sources = [recorded(e)]
        elif e["name"] == "Stream Sync":
            sources = [last.get(stream_of(e))]
        else:
            sources = list(last.values())
        for source in sources:
            if source is not None and id(source) in in_graph:
                edges.add(("kernel_end", source["args"]["correlation"], "call_end", call["args"]["correlation"]))
    return edges


def hta_sync_edges(graph, df) -> set[tuple]:
    edges = set()
    for u, v in graph.edges:
        edge = graph.edges[u, v]["object"]
        if edge.type.name != "SYNC_DEPENDENCY":
            continue
        ends = []
        for node in (graph.node_list[u], graph.node_list[v]):
            on_device = df.loc[node.ev_idx, "stream"] != -1
            where = ("kernel_" if on_device else "call_") + ("start" if node.is_start else "end")
            ends += [where, int(df.loc[node.ev_idx, "correlation"])]
        edges.add(tuple(ends))
    return edges


CRITICAL_STEP = "ProfilerStep#2"  # a middle step: the first may miss events


def critical_path(run: Run, rank: int):
    # The step by name, as instance 0: HTA counts the device rows' ProfilerStep annotations as instances too.
    with quiet():
        graph, ok = run.analysis.critical_path_analysis(rank=rank, annotation=CRITICAL_STEP, instance_id=0)
    return graph, ok


def test_critical_path(run):
    if PANDAS3_BREAKS_050:
        return expect_050_pandas3_failure("critical_path", lambda: critical_path(run, 0))
    for rank in run.ranks:
        doc = run.docs[rank]
        graph, ok = critical_path(run, rank)
        assert ok
        window = step(doc, CRITICAL_STEP)
        df = run.analysis.t.get_trace(rank)
        first, last = (graph.node_list[n] for n in (graph.critical_path_nodes[0], graph.critical_path_nodes[-1]))
        # The step bounds the critical path: it runs inside the step (which ends with a synchronize, so its
        # kernels are done by then) and is no longer than the step; it is no shorter than the longest kernel
        # launched in it (a kernel's edge weighs its duration).
        start, end = ns(window["ts"] - run.analysis.t.min_ts), ns(window["ts"] + window["dur"] - run.analysis.t.min_ts)
        assert start - 2 <= ns(first.ts) < ns(last.ts) <= end + 2
        weight = ns(sum(graph.edges[e.begin, e.end]["weight"] for e in graph.critical_path_edges_set))
        sym = run.analysis.t.symbol_table.get_sym_table()
        kernels = [graph.node_list[n] for n in graph.nodes if df.loc[graph.node_list[n].ev_idx, "stream"] != -1]
        longest = max(ns(df.loc[k.ev_idx, "dur"]) for k in kernels if sym[df.loc[k.ev_idx, "cat"]] == "kernel")
        assert longest - 2 <= weight <= ns(last.ts - first.ts) + 2 <= ns(window["dur"]) + 4
        # openreg's runtime calls are nodes of the graph: the step's launches and synchronizes.
        calls = {sym[df.loc[graph.node_list[n].ev_idx, "name"]] for n in graph.nodes}
        assert {"orLaunchKernel", "orDeviceSynchronize"} <= calls
        # Kernels hang off their launches.
        types = Counter(graph.edges[e]["object"].type.name for e in graph.edges)
        assert types["KERNEL_LAUNCH_DELAY"] + types["KERNEL_KERNEL_DELAY"] >= 1


def test_critical_path_has_the_trace_s_sync_edges(run):
    """GPU->CPU edges for each synchronize and kernel->kernel edges for each stream wait, as the trace's sync
    rows say. (Needs the plugin's sync rows: Kineto's cuda_sync schema.)"""
    if PANDAS3_BREAKS_050:
        return expect_050_pandas3_failure("critical_path", lambda: critical_path(run, 0))
    for rank in run.ranks:
        doc = run.docs[rank]
        graph, ok = critical_path(run, rank)
        assert ok
        expected = expected_sync_edges(doc, step(doc, CRITICAL_STEP))
        assert hta_sync_edges(graph, run.analysis.t.get_trace(rank)) == expected
        calls = {e["args"]["correlation"]: e["name"] for e in runtime_rows(doc)}
        reached = Counter("kernel" if kind == "kernel_start" else calls[dst] for _, _, kind, dst in expected)
        must = {
            "one_rank": ("kernel", "orEventSynchronize", "orStreamSynchronize", "orDeviceSynchronize"),
            "two_ranks": ("kernel", "orDeviceSynchronize"),
            "compiled": ("orDeviceSynchronize",),
        }[run.kind]
        for what in must:
            assert reached[what] >= 1, (what, reached)


# ---------------------------------------------------------------------------------------------------------------
# The other HTA version, in a second virtual environment.


def test_the_other_hta_version_in_a_second_virtual_environment(request, runs, traces_root):
    """The same tests under the HTA version the main environment does not have (both install `hta`)."""
    if os.environ.get(NESTED_ENV) == "1":
        pytest.fail("runs only in the main environment")
    for kind in MAKERS:  # made once, here, and read there
        get_run(runs, traces_root, kind)
    requirement = OTHER_HTA[HTA_VERSION]
    name = "hta-" + re.sub(r"\W", "-", requirement)
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    folder = Path(cache.mkdir(name)) if cache else Path(tempfile.gettempdir(), "openreg-test-venvs", name)
    python = folder / "bin" / "python"
    marker = folder / "installed"
    if not marker.exists():
        venv.EnvBuilder(system_site_packages=True, clear=True, with_pip=True).create(folder)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", requirement],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        marker.write_text(requirement)
    done = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(Path(__file__)),
            "-k",
            "not second_virtual_environment",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, TRACES_ENV: str(traces_root), NESTED_ENV: "1"},
    )
    tail = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, tail
    assert f"\nhta {requirement.split('==')[1]}\n" in done.stdout, tail  # that version ran them


def test_hta_version_reported(capsys):
    """Which HTA ran these tests (the nested run's output names it)."""
    with capsys.disabled():
        print(f"\nhta {HTA_VERSION}")
    assert HTA_VERSION in openreg_hta.SUPPORTED
