"""summary's HTA-style sections with exact numbers on synthetic traces
(communication per rank and across ranks, launches, idle time), diff,
check --explain, and that the trace commands never import torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from test_trace_tools import HOST, device_trace, run_cli  # noqa: E402

from openreg_trace import open_trace  # noqa: E402
from openreg_trace.synthetic import KinetoTraceWriter, write_rank_traces  # noqa: E402

MIB4 = 4 << 20  # 1 Mi f32 elements


def summary(path: Path) -> dict:
    with open_trace(path) as t:
        return t.summary(top=100)


# ---------------------------------------------------------------- communication


def test_nccl_rank_communication(tmp_path):
    r0, r1 = write_rank_traces(tmp_path, world_size=2, steps=3)
    s0, s1 = summary(r0), summary(r1)
    c0, c1 = s0["communication"], s1["communication"]
    assert (c0["rank"], c0["world_size"], c1["rank"]) == (0, 2, 1)
    # rank 0 arrives at 60 us, rank 1 at 80 us; both end at 130 us; compute runs [10, 110] us.
    assert (c0["comm_ns"], c0["overlap_ns"], c0["exposed_ns"]) == (3 * 70_000, 3 * 50_000, 3 * 20_000)
    assert (c1["comm_ns"], c1["overlap_ns"], c1["exposed_ns"]) == (3 * 50_000, 3 * 30_000, 3 * 20_000)
    assert c0["overlap_share"] == pytest.approx(5 / 7) and c1["overlap_share"] == pytest.approx(0.6)
    (ar,) = c0["collectives"]
    assert (ar["collective"], ar["calls"], ar["bytes"], ar["device_ns"], ar["group_size"]) == (
        "AllReduce",
        3,
        3 * MIB4,
        210_000,
        2,
    )
    assert ar["algbw_gbps"] == pytest.approx(3 * MIB4 / 210_000)
    assert ar["busbw_gbps"] == pytest.approx(ar["algbw_gbps"] * 2 * (2 - 1) / 2)
    assert [i["seq"] for i in c0["instances"]] == [0, 1, 2]
    classes = s0["kernel_classes"]["total"]
    assert (classes["communication"]["count"], classes["compute"]["count"]) == (3, 3)


def test_bus_bandwidth_factor_grows_with_the_group(tmp_path):
    (r0, *_) = write_rank_traces(tmp_path, world_size=4, steps=1)
    (ar,) = summary(r0)["communication"]["collectives"]
    assert ar["group_size"] == 4
    assert ar["busbw_gbps"] == pytest.approx(ar["algbw_gbps"] * 2 * 3 / 4)


def test_openreg_collectives_are_communication(tmp_path):
    """openregComm_<Collective>_<Op>_<dtype> kernels without record_param_comms args."""
    r0, _ = write_rank_traces(tmp_path, style="openreg", comm_args=False)
    s = summary(r0)
    (ar,) = s["communication"]["collectives"]
    assert (ar["collective"], ar["calls"], ar["device_ns"]) == ("AllReduce", 3, 210_000)
    assert ar["bytes"] == 0 and ar["algbw_gbps"] is None  # no event said how much was sent
    assert s["communication"]["overlap_ns"] == 3 * 50_000
    assert s["kernel_classes"]["total"]["communication"]["count"] == 3
    assert [i["seq"] for i in s["communication"]["instances"]] == [None, None, None]


def test_a_collective_name_arg_makes_any_kernel_communication(tmp_path):
    from openreg_trace.synthetic import KinetoTraceWriter

    w = KinetoTraceWriter(host_pid=10, host_tid=10)
    w.host_rows().device_rows(0, [7]).span(0, 100_000)
    w.op("c10d::allgather_", 1_000, 5_000, 1).runtime("orLaunchKernel", 2_000, 1_000, 1, 1)
    w.device_event(
        "gloo_copy",
        10_000,
        20_000,
        0,
        7,
        1,
        1,
        args={
            "External id": 1,
            "device": 0,
            "stream": 7,
            "correlation": 1,
            "Collective name": "_allgather_base",
            "In msg nelems": 256,
            "Out msg nelems": 1024,
            "Group size": 4,
            "dtype": "BFloat16",
        },
    )
    (ag,) = summary(w.write(tmp_path / "t.json"))["communication"]["collectives"]
    # nccl-tests' size for AllGather is the gathered output: 1024 x 2 bytes.
    assert (ag["collective"], ag["bytes"], ag["group_size"]) == ("AllGather", 2048, 4)
    assert ag["busbw_gbps"] == pytest.approx(2048 / 20_000 * 3 / 4)


def test_folder_of_ranks_says_who_arrived_last(tmp_path):
    write_rank_traces(tmp_path, world_size=2, steps=3)
    r = run_cli("summary", "--json", tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [t["summary"]["communication"]["rank"] for t in doc["traces"]] == [0, 1]
    ranks = doc["ranks"]
    assert (ranks["matched_instances"], ranks["unmatched_instances"]) == (3, 0)
    assert [(x["rank"], x["last_arrivals"], x["waited_ns"]) for x in ranks["ranks"]] == [(0, 0, 60_000), (1, 3, 0)]
    (ar,) = ranks["collectives"]
    assert ar == {"collective": "AllReduce", "instances": 3, "wait_ns": 60_000, "last_arrivals": {"0": 0, "1": 3}}
    assert ranks["longest_waits"][0]["waits_ns"] == {"0": 20_000, "1": 0}
    text = run_cli("summary", tmp_path).stdout
    assert "Across 2 ranks: 3 collectives matched" in text
    assert "AllReduce seq 0: rank 1 arrived last; others waited up to 20.000 us" in text


def test_ranks_without_seq_match_by_order(tmp_path):
    write_rank_traces(tmp_path, world_size=3, steps=2, style="openreg", comm_args=False, skew_ns=10_000)
    ranks = json.loads(run_cli("summary", "--json", tmp_path).stdout)["ranks"]
    assert ranks["matched_instances"] == 2
    # Rank 2 arrives 20 us after rank 0 and 10 us after rank 1, in both steps.
    assert [(x["rank"], x["last_arrivals"], x["waited_ns"]) for x in ranks["ranks"]] == [
        (0, 0, 40_000),
        (1, 0, 20_000),
        (2, 2, 0),
    ]


def test_several_cycles_of_one_rank_stay_one_rank(tmp_path):
    """tensorboard_trace_handler writes one file per profiling cycle: `demo --ranks 2` with two cycles leaves
    four files of two ranks. They are two ranks, each cycle's collectives matched with the same cycle's."""
    folder = tmp_path / "run"
    folder.mkdir()
    for cycle in ("a", "b"):
        for path in write_rank_traces(tmp_path / cycle, world_size=2, steps=2, style="openreg", comm_args=False):
            path.rename(folder / f"{path.stem}.{cycle}.json")
    ranks = json.loads(run_cli("summary", "--json", folder).stdout)["ranks"]
    assert (ranks["matched_instances"], ranks["unmatched_instances"]) == (4, 0)
    # Rank 1 arrives 20 us after rank 0 in each of the 2 x 2 all-reduces.
    assert [(x["rank"], x["last_arrivals"], x["waited_ns"]) for x in ranks["ranks"]] == [(0, 0, 80_000), (1, 4, 0)]
    assert [x["path"].count(".json") for x in ranks["ranks"]] == [2, 2]


# ---------------------------------------------------------------- launches, idle


def test_launch_statistics_of_the_device_trace(tmp_path):
    s = summary(device_trace().write(tmp_path / "d.json"))
    la = s["launches"]
    # Four launches of 1.5 us each; kernels start 4.5, 3.5, 24.5 and 187.5 us after their launch ends.
    assert (la["launches"], la["host_ns"], la["delay_ns"]) == (4, 6_000, 4_500 + 3_500 + 24_500 + 187_500)
    assert la["max_delay_ns"] == 187_500 and la["slow_starts"] == 1
    assert la["short_kernels"] == 0
    assert [(o["name"], o["launches"]) for o in la["by_op"]][0] == ("aten::item", 1)
    assert [a["name"] for a in la["by_api"]] == ["orLaunchKernel", "orMemcpyAsync"]


def test_idle_breakdown_of_the_device_trace(tmp_path):
    s = summary(device_trace().write(tmp_path / "d.json"))
    streams = {b["stream"]: b for b in s["idle_breakdown"]["streams"]}
    # Stream 7: gemm [10, 50] us, gemm [50, 90] us, copy [230, 232] us, the copy launched at 41 us:
    # 140 us the stream waited for something other than its host (aten::item's sync, in fact).
    assert (streams[7]["host_wait_ns"], streams[7]["kernel_wait_ns"], streams[7]["other_ns"]) == (0, 0, 140_000)
    assert streams[8]["idle_ns"] == 0


# ---------------------------------------------------------------- device time per source line


def compiled_trace() -> KinetoTraceWriter:
    """Inductor's kernels on stream 7, each launched from a host op named as the kernel: one fusing
    model.py lines 10-12 (1 us), one line 12 (10 us); an extern gemm without lines or stack (5 us)."""
    w = KinetoTraceWriter(host_pid=HOST, host_tid=HOST)
    w.host_rows().device_rows(0, [7])
    w.span(0, 100_000)
    lines = ["/m/model.py:10", "/m/model.py:11", "/m/model.py:12"]
    ops = ["aten::add", "aten::relu", "aten::mul"]
    w.op("cpp_fused_add_mul_relu_0", 1_000, 3_000, 1)
    w.launch(
        "cpp_fused_add_mul_relu_0",
        2_000,
        10_000,
        1_000,
        0,
        7,
        201,
        1,
        api="orLaunchKernelEx",
        extra_args={"source_lines": lines, "fused_aten_ops": ops},
    )
    w.op("cpp_fused_sum_1", 5_000, 3_000, 2)
    w.launch(
        "cpp_fused_sum_1",
        6_000,
        20_000,
        10_000,
        0,
        7,
        202,
        2,
        api="orLaunchKernelEx",
        extra_args={"source_lines": lines[2:], "fused_aten_ops": ["aten::sum"]},
    )
    w.op("aten::mm", 9_000, 3_000, 3).launch("gemm", 10_000, 40_000, 5_000, 0, 7, 203, 3)
    w.window_end(100_000)
    return w


def test_compiled_kernels_split_their_time_among_their_source_lines(tmp_path):
    s = summary(compiled_trace().write(tmp_path / "c.json"))
    src = s["source_lines"]
    assert s["device_total_ns"] == 16_000
    # 1000 ns over three lines: 334 + 333 + 333.
    assert [(x["source"], x["function"], x["device_ns"], x["kernels"]) for x in src["lines"]] == [
        ("/m/model.py:12", None, 333 + 10_000, 2),
        ("/m/model.py:10", None, 334, 1),
        ("/m/model.py:11", None, 333, 1),
    ]
    assert src["lines"][0]["share"] == pytest.approx(10_333 / 16_000)
    assert src["compiled"] == {"device_events": 2, "device_ns": 11_000, "share": pytest.approx(11 / 16)}
    assert src["python_stack"] == {"device_events": 0, "device_ns": 0, "share": 0.0}
    assert src["unattributed"] == {"device_events": 1, "device_ns": 5_000, "share": pytest.approx(5 / 16)}


def test_kernels_with_source_lines_pass_the_strict_check(tmp_path):
    path = compiled_trace().write(tmp_path / "c.json")
    with open_trace(path) as t:
        result = t.check(strict=True)
    assert result["ok"], [c for c in result["checks"] if c["status"] != "pass"]


def eager_stack_trace() -> KinetoTraceWriter:
    """An eager step recorded with_stack: ops under user frames, torch frames and a builtin."""
    w = KinetoTraceWriter(host_pid=HOST, host_tid=HOST)
    w.host_rows().device_rows(0, [7])
    w.span(0, 100_000)
    w.python("/home/u/train.py(20): train_step", 1_000, 90_000)
    w.python("/v/lib/python3.11/site-packages/torch/nn/modules/module.py(1751): _call_impl", 2_000, 50_000)
    w.python("/home/u/model.py(49): forward", 3_000, 40_000)
    w.python("<built-in method matmul of type object at 0x7f00>", 4_000, 5_000)
    w.op("aten::mm", 4_500, 3_000, 2).launch("gemm", 5_000, 10_000, 7_000, 0, 7, 301, 2)
    w.python("/v/lib/python3.11/site-packages/torch/_tensor.py(41): wrapped", 12_000, 6_000)
    w.op("aten::add", 13_000, 3_000, 3).launch("add", 14_000, 20_000, 2_000, 0, 7, 302, 3)
    w.op("aten::item", 60_000, 10_000, 4)
    w.launch("Memcpy DtoH (Device -> Host)", 61_000, 62_000, 1_000, 0, 7, 303, 4, cat="gpu_memcpy")
    w.op("aten::zero_", 95_000, 2_000, 5).launch("fill", 95_500, 97_000, 500, 0, 7, 304, 5)
    # An extern kernel that a compiled graph's generated wrapper launched: the model's call into it counts.
    w.python("/home/u/train.py(31): train_step", 70_000, 20_000)
    w.python("/tmp/torchinductor_u/ab/cabc.py(120): call", 71_000, 10_000)
    w.op("aten::mm", 72_000, 3_000, 6).launch("gemm", 72_500, 80_000, 4_000, 0, 7, 305, 6)
    w.window_end(100_000)
    return w


def test_eager_device_time_goes_to_the_innermost_user_frame(tmp_path):
    s = summary(eager_stack_trace().write(tmp_path / "e.json"))
    src = s["source_lines"]
    # gemm and add ran under model.py(49) (the add through a torch frame); the copy under
    # train.py(20) only; the fill's op ran outside any Python frame.
    # The gemm under Inductor's generated wrapper goes to the line that called the compiled graph.
    assert [(x["source"], x["function"], x["device_ns"], x["kernels"]) for x in src["lines"]] == [
        ("/home/u/model.py:49", "forward", 9_000, 2),
        ("/home/u/train.py:31", "train_step", 4_000, 1),
        ("/home/u/train.py:20", "train_step", 1_000, 1),
    ]
    assert src["python_stack"]["device_events"] == 4 and src["python_stack"]["device_ns"] == 14_000
    assert src["unattributed"] == {"device_events": 1, "device_ns": 500, "share": pytest.approx(500 / 14_500)}
    text = run_cli("summary", "--top", "1", str(tmp_path / "e.json")).stdout
    assert "Device time per model source line (3 lines; 0 compiled kernels" in text
    assert "/home/u/model.py:49  (forward)" in text and "train.py:20" not in text  # --top 1


def test_source_lines_of_the_device_trace(tmp_path):
    """Every device event of device_trace() ran under train.py(20), aten::item's copy too."""
    src = summary(device_trace().write(tmp_path / "d.json"))["source_lines"]
    assert [(x["source"], x["device_ns"], x["kernels"]) for x in src["lines"]] == [("train.py:20", 87_000, 4)]
    assert src["unattributed"]["device_events"] == 0


# ---------------------------------------------------------------- diff, explain


def test_diff_of_two_traces(tmp_path):
    base = device_trace().write(tmp_path / "base.json")
    new_writer = device_trace()
    new_writer.op("aten::mm", 250_000, 10_000, 60).launch("gemm_kernel", 251_000, 255_000, 40_000, 0, 8, 160, 60)
    new = new_writer.write(tmp_path / "new.json")
    r = run_cli("diff", "--json", base, new)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["device_ns_delta"] == 40_000
    top = d["kernels"][0]
    assert (top["name"], top["base_count"], top["new_count"], top["device_ns_delta"]) == ("gemm_kernel", 2, 3, 40_000)
    assert all(k["device_ns_delta"] == 0 for k in d["kernels"][1:])
    op = d["ops"][0]
    assert (op["name"], op["base_count"], op["new_count"], op["status"]) == ("aten::mm", 2, 3, "both")
    text = run_cli("diff", base, new).stdout
    assert "+40.000 us" in text and "gemm_kernel" in text


def test_diff_of_folders_reports_added_and_removed(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_rank_traces(a, style="nccl")
    write_rank_traces(b, style="openreg")
    d = json.loads(run_cli("diff", "--json", a, b).stdout)
    status = {k["name"]: k["status"] for k in d["kernels"]}
    assert status == {
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL": "removed",
        "openregComm_AllReduce_Sum_f32": "added",
        "gemm_kernel": "both",
    }


def test_check_explain_names_each_consumer():
    r = run_cli("check", "--explain")
    assert r.returncode == 0
    assert "flow_pairs (error)" in r.stdout and "protects: Perfetto, chrome://tracing" in r.stdout
    assert "only warns (unless --strict): a start without finish" in r.stdout


# ---------------------------------------------------------------- no torch


@pytest.mark.parametrize("command", ["summary", "check", "diff"])
def test_trace_commands_do_not_import_torch(tmp_path, command):
    path = device_trace().write(tmp_path / "d.json")
    args = [str(path)] * (2 if command == "diff" else 1)
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "torch_openreg", command, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "openreg_trace" in imported  # the measurement works
    assert "torch" not in imported and "numpy" not in imported


def test_demo_still_imports_the_backend():
    """The trace commands skip torch; anything else (here: --help of demo) still loads the package as before."""
    code = "import sys; sys.argv = ['-m', 'demo']; import torch_openreg; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "True"
