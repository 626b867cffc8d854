"""The trace tools (python -m torch_openreg summary/check/timeline) on traces
the tests make themselves: a real torch.profiler CPU trace, a Kineto-layout
trace with device lanes, and the same trace with planted violations."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from openreg_trace import TraceError, library_path, list_checks, open_trace  # noqa: E402
from openreg_trace.synthetic import KinetoTraceWriter, write_workload  # noqa: E402

HOST = 100


@pytest.fixture(scope="session", autouse=True)
def native_library():
    try:
        return library_path()
    except TraceError as e:
        pytest.fail(f"libopenreg_trace.so is not built: {e}")


def run_module(*args: str) -> subprocess.CompletedProcess:
    """`python -m torch_openreg ARGS` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "torch_openreg", *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """The same command line, in this process (a fresh interpreter per call costs seconds)."""
    from torch_openreg.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
            if not isinstance(e.code, int) and e.code:
                print(e.code, file=sys.stderr)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


# ---------------------------------------------------------------- traces


def device_trace() -> KinetoTraceWriter:
    """One step on device 0: two gemms (stream 7) and an add (stream 8), then
    aten::item waits in orStreamSynchronize while the device idles 140 us
    before the copy back. Device memory peaks (3 MiB) inside aten::add."""
    w = KinetoTraceWriter(host_pid=HOST, host_tid=HOST)
    w.host_rows().device_rows(0, [7, 8])
    w.span(0, 300_000)
    w.op("ProfilerStep#1", 1_000, 290_000, 1, cat="user_annotation")
    w.python("train.py(20): train_step", 1_500, 280_000)
    w.op("aten::mm", 2_000, 10_000, 2).launch("gemm_kernel", 4_000, 10_000, 40_000, 0, 7, 101, 2)
    w.memory(3_000, 1 << 20, 1 << 20)
    w.op("aten::add", 13_000, 8_000, 3).launch("add_kernel", 15_000, 20_000, 5_000, 0, 8, 102, 3)
    w.memory(14_000, 3 << 20, 2 << 20)
    w.op("aten::mm", 22_000, 10_000, 4).launch("gemm_kernel", 24_000, 50_000, 40_000, 0, 7, 103, 4)
    w.memory(23_000, 2 << 20, -(1 << 20))
    w.op("aten::item", 40_000, 200_000, 5)
    w.launch(
        "Memcpy DtoH (Device -> Host)", 41_000, 230_000, 2_000, 0, 7, 104, 5, cat="gpu_memcpy", api="orMemcpyAsync"
    )
    w.runtime("orStreamSynchronize", 43_000, 195_000, 105, 5)
    w.window_end(300_000)
    return w


# Each planted violation: (check that must catch it, text its report must contain).
PLANTED = {
    "device_args": "planted_no_stream",
    "device_rows_disjoint": "planted_overlap",
    "device_rows_nest": "planted_annotation",
    "flow_pairs": "flow id 9001",
    "flow_forward": "flow id 150 ends 5.000 us before it starts",
    "device_after_launch": "planted_early",  # the same kernel, found by correlation
    "flow_distinct_lanes": "flow id 9002",
    "flow_start_in_host_slice": "flow id 9003",
    "device_events_in_window": "planted_late",
    "correlation_unique": "correlation 101",
    "device_lanes_below_host": "device pid 1 sorts at 3",
    "events_well_formed": "planted_no_dur",
}
# Of those, the ones no consumer is hurt by: they fail only under --strict.
PLANTED_WARNINGS = {"device_events_in_window", "device_lanes_below_host", "flow_pairs"}


def planted_trace() -> KinetoTraceWriter:
    w = device_trace()
    w.device_event(
        "planted_no_stream", 100_000, 1_000, 0, 7, 140, 2, args={"External id": 2, "device": 0, "correlation": 140}
    )
    w.device_event("planted_overlap", 45_000, 2_000, 0, 7, 141, 2)  # inside the first gemm
    w.complete("gpu_user_annotation", "planted_annotation", 85_000, 10_000, 0, 7)  # crosses gemm's end
    w.flow("s", 9001, 5_000, HOST, HOST)  # no finish
    w.op("aten::planted", 249_000, 5_000, 50).launch("planted_early", 250_000, 245_000, 1_000, 0, 8, 150, 50)
    w.flow("s", 9002, 5_000, HOST, HOST).flow("f", 9002, 6_000, HOST, HOST)  # never leaves the host row
    w.device_event("planted_unlaunched", 296_500, 500, 0, 8, 151, None)
    w.flow("s", 9003, 295_000, HOST, HOST).flow("f", 9003, 296_500, 0, 8)  # starts in no host slice
    w.device_event("planted_late", 299_000, 5_000, 0, 8, 152, 2)  # ends after the window
    w.device_event("planted_dup", 100_000, 1_000, 0, 8, 101, 2)  # reuses gemm's correlation
    w.process(1, "openreg 1", "openreg:1", 3).thread(1, 7, "stream 7", 7)  # sorts above the host
    w.device_event("planted_device1", 100_000, 1_000, 1, 7, 153, 2)
    w.raw({"ph": "X", "cat": "cpu_op", "name": "planted_no_dur", "pid": HOST, "tid": HOST, "ts": 5.0})
    return w


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("traces")
    out = {
        "device": device_trace().write(d / "device.json"),
        "device_gz": device_trace().write(d / "device.json.gz"),
        "planted": planted_trace().write(d / "planted.json"),
    }
    broken = d / "broken.json"
    text = device_trace().text()
    broken.write_text(text[: len(text) // 2])
    out["broken"] = broken
    return out


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory) -> Path:
    """A real torch.profiler trace (CPU only, with memory, shapes and stacks)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    path = tmp_path_factory.mktemp("cpu") / "cpu.pt.trace.json"
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with profile(
        activities=[ProfilerActivity.CPU],
        profile_memory=True,
        record_shapes=True,
        with_stack=True,
        schedule=schedule(wait=0, warmup=1, active=2),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(3):
            loss = model(torch.randn(32, 64)).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            loss.item()
            prof.step()
    assert path.exists()
    return path


# ---------------------------------------------------------------- summary


def test_summary_of_a_device_trace(traces):
    with open_trace(traces["device"]) as t:
        s = t.summary()
    assert [k["name"] for k in s["top_kernels"]] == ["gemm_kernel", "add_kernel", "Memcpy DtoH (Device -> Host)"]
    assert s["top_kernels"][0]["total_ns"] == 80_000 and s["top_kernels"][0]["count"] == 2
    assert s["device_total_ns"] == 87_000
    assert [(o["name"], o["device_ns"], o["op_instances"]) for o in s["ops"]] == [
        ("aten::mm", 80_000, 2),
        ("aten::add", 5_000, 1),
        ("aten::item", 2_000, 1),
    ]
    assert s["links"]["linked"] == s["links"]["device_events"] == 4
    streams = {st["stream"]: st for st in s["streams"]}
    assert streams[7]["busy_ns"] == 82_000 and streams[7]["span_ns"] == 222_000
    assert streams[8]["busy_ns"] == 5_000
    assert streams[8]["utilization"] == pytest.approx(5_000 / 222_000)  # of the device's span
    assert streams[8]["own_span_utilization"] == 1.0
    gap = s["idle_gaps"][0]
    assert (gap["start_ns"], gap["end_ns"]) == (90_000, 230_000)
    assert gap["host"]["text"] == "python: train.py(20): train_step \u2192 aten::item \u2192 orStreamSynchronize"
    (mem,) = s["memory"]
    assert mem["device_type"] == 20 and mem["device_type_name"] == "PrivateUse1"
    assert mem["peak_bytes"] == 3 << 20 and mem["op"]["name"] == "aten::add"


def test_summary_command_prints_every_section(traces):
    r = run_module("summary", traces["device"])
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for expected in (
        "Top kernels by device time",
        "gemm_kernel",
        "Device time per op",
        "aten::mm",
        "linked to an op: 4 of 4",
        "Device utilisation per stream",
        "stream 7",
        "Largest idle gaps",
        "140.000 us",
        "aten::item \u2192 orStreamSynchronize",
        "Peak of device memory",
        "3.0 MiB",
        "reached in aten::add",
    ):
        assert expected in out, f"{expected!r} missing from:\n{out}"


def test_summary_json_matches_library(traces):
    r = run_cli("summary", "--json", "--top", "2", traces["device"])
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert len(s["top_kernels"]) == 2
    assert s["idle_gaps"][0]["duration_ns"] == 140_000


def test_gzip_trace_gives_the_same_summary(traces):
    with open_trace(traces["device"]) as plain, open_trace(traces["device_gz"]) as gz:
        assert plain.summary() == gz.summary()


def test_real_cpu_trace(cpu_trace):
    r = run_cli("summary", "--json", cpu_trace)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["trace"]["parse_error"] is None
    assert s["top_kernels"] == [] and s["memory"] == []
    (host,) = s["host_memory"]
    assert host["peak_bytes"] > 0 and host["op"]["name"].startswith("aten::")
    assert s["window"]["source"].startswith("trace_span")
    r = run_cli("check", "--strict", cpu_trace)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAIL" not in r.stdout and "WARN" not in r.stdout


# ---------------------------------------------------------------- check


def test_check_passes_a_clean_device_trace(traces):
    r = run_cli("check", "--strict", traces["device"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAIL" not in r.stdout and "WARN" not in r.stdout


def planted_report_for(traces, *options: str) -> dict:
    r = run_cli("check", "--json", "--examples", "20", *options, traces["planted"])
    assert r.returncode == 1, r.stdout + r.stderr
    return {c["name"]: c for c in json.loads(r.stdout)["checks"]}


@pytest.fixture(scope="module")
def planted_report(traces) -> dict:
    return planted_report_for(traces, "--strict")


@pytest.fixture(scope="module")
def planted_default_report(traces) -> dict:
    return planted_report_for(traces)


@pytest.mark.parametrize("check_name", sorted(PLANTED))
def test_check_catches_planted_violation(planted_report, check_name):
    c = planted_report[check_name]
    assert c["status"] == "fail", c
    report = json.dumps(c["examples"])
    assert PLANTED[check_name] in report, report
    assert all(v["events"] for v in c["examples"]) or check_name == "json_valid"


def test_planted_checks_are_the_only_errors(planted_report, planted_default_report):
    # Strict: every planted defect fails, and so do the warning-level checks
    # the planted events also trip (an unlinked, unlaunched device event).
    failed = {n for n, c in planted_report.items() if c["status"] == "fail" and c["severity"] == "error"}
    assert failed == set(PLANTED) - {"device_events_in_window", "device_lanes_below_host"}
    # Default: the harmless ones only warn, each naming why.
    default = planted_default_report
    assert {n for n, c in default.items() if c["status"] == "fail"} == set(PLANTED) - PLANTED_WARNINGS
    assert {n for n in PLANTED_WARNINGS if default[n]["status"] == "warn"} == PLANTED_WARNINGS
    assert default["flow_pairs"]["artifact"].startswith("a start without finish")
    assert all(c["status"] != "fail" or c["breaks"] for c in default.values())


def test_check_text_names_the_events(traces):
    r = run_module("check", traces["planted"])
    assert r.returncode == 1
    assert "FAIL  device_rows_disjoint" in r.stdout
    assert "'planted_overlap'" in r.stdout and "[byte " in r.stdout
    assert "-> FAILED" in r.stdout


def test_check_reports_invalid_json(traces):
    r = run_cli("check", "--json", traces["broken"])
    assert r.returncode == 1
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["json_valid"]["status"] == "fail"
    assert "byte" in checks["json_valid"]["examples"][0]["message"]
    r = run_cli("summary", traces["broken"])
    assert r.returncode == 2 and "invalid trace at byte" in r.stderr


def test_check_skip_and_only(traces):
    skip = [a for n in sorted(PLANTED) for a in ("--skip", n)]
    r = run_cli("check", *skip, traces["planted"])
    assert r.returncode == 0, r.stdout
    r = run_cli("check", "--strict", *skip, traces["planted"])
    assert r.returncode == 1, r.stdout  # the unlinked, unlaunched planted events still warn
    r = run_cli("check", "--only", "flow_pairs", traces["planted"])
    assert r.returncode == 0 and "WARN  flow_pairs" in r.stdout
    r = run_cli("check", "--strict", "--only", "flow_pairs", traces["planted"])
    assert r.returncode == 1 and "FAIL  flow_pairs" in r.stdout
    r = run_cli("check", "--only", "no_such_check", traces["planted"])
    assert r.returncode == 2 and "no_such_check" in r.stderr


def test_check_a_folder_of_traces(traces, tmp_path):
    device_trace().write(tmp_path / "worker0.1.pt.trace.json")
    device_trace().write(tmp_path / "worker0.2.pt.trace.json.gz")
    r = run_cli("check", "--strict", tmp_path)
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("-> OK") == 2
    planted_trace().write(tmp_path / "worker0.3.pt.trace.json")
    assert run_cli("check", tmp_path).returncode == 1


def test_check_list():
    r = run_cli("check", "--list")
    assert r.returncode == 0
    names = {c["name"] for c in list_checks()}
    assert names >= set(PLANTED) | {"json_valid"}
    assert all(n in r.stdout for n in names)


def test_vendor_categories(tmp_path):
    """Another backend's names: categories npu_kernel/npu_api, no External id on kernels."""
    w = KinetoTraceWriter(host_pid=HOST, host_tid=HOST)
    w.host_rows().device_rows(0, [1], name="npu").span(0, 100_000)
    w.op("aten::add", 1_000, 10_000, 7)
    w.runtime("npuLaunch", 2_000, 1_000, 31, None, cat="npu_api")
    w.device_event("npu_add", 20_000, 5_000, 0, 1, 31, None, cat="npu_kernel")
    w.flow("s", 31, 2_000, HOST, HOST).flow("f", 31, 20_000, 0, 1)
    path = w.write(tmp_path / "npu.json")
    # Inferred: npu_kernel carries stream and correlation; linked through its launch.
    r = run_cli("summary", "--json", "--runtime-cat", "npu_api", path)
    s = json.loads(r.stdout)
    assert s["trace"]["device_categories"] == ["npu_kernel"]
    assert s["ops"][0]["name"] == "aten::add" and s["links"]["via_correlation"] == 1
    r = run_cli("summary", "--json", "--no-infer-device", path)
    assert json.loads(r.stdout)["top_kernels"] == []
    r = run_cli("check", "--strict", "--device-cat", "npu_kernel", "--runtime-cat", "npu_api", path)
    assert r.returncode == 0, r.stdout


# ---------------------------------------------------------------- timeline, demo, CLI


def test_timeline_writes_an_image(traces, tmp_path):
    import matplotlib  # noqa: F401  (pinned in requirements-test.txt: missing fails, never skips)

    out = tmp_path / "timeline.png"
    r = run_cli("timeline", traces["device"], "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open_trace(traces["device"]) as t:
        data = t.timeline(width=100)
    assert [row["label"] for row in data["device_rows"]] == ["openreg 0 / stream 7", "openreg 0 / stream 8"]
    assert max(p[1] for p in data["memory"][0]["points"]) == 3 << 20
    assert data["steps"][0][2] == "ProfilerStep#1"


def test_timeline_of_a_large_trace_is_reduced(tmp_path):
    path = tmp_path / "big.json"
    n = write_workload(path, 20_000)
    with open_trace(path) as t:
        data = t.timeline(width=200)
        assert t.check(strict=True)["ok"]
    assert n >= 20_000
    for row in data["device_rows"]:
        assert len(row["blocks"]) <= 201
    assert all(len(m["points"]) <= 3 * 201 for m in data["memory"])


def test_missing_file_is_a_clean_error(tmp_path):
    r = run_module("summary", tmp_path / "nope.json")
    assert r.returncode == 2
    assert "cannot open" in r.stderr and "Traceback" not in r.stderr


def test_trace_tools_do_not_need_the_backend(traces, tmp_path):
    """summary/check/report work where the openreg extension is not built: only
    openreg_trace and the command line itself may be imported."""
    code = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("torch_openreg.") and name != "torch_openreg.__main__":
            raise ImportError("blocked for this test: " + name)
sys.meta_path.insert(0, Block())
from torch_openreg.__main__ import main
assert main(["summary", {str(traces["device"])!r}]) == 0
assert main(["check", "--strict", {str(traces["device"])!r}]) == 0
assert main(["report", {str(traces["device"])!r}, "-o", {str(tmp_path / "report.html")!r}]) == 0
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_gzip_is_detected_by_content(traces, tmp_path):
    odd = tmp_path / "trace.data"
    odd.write_bytes(gzip.compress(Path(traces["device"]).read_bytes()))
    with open_trace(odd) as t:
        assert t.summary()["device_total_ns"] == 87_000
