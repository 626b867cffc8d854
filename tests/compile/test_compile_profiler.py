"""A compiled model in torch.profiler on openreg: as Triton kernels on CUDA, and where each came from.

Each compiled kernel has a host op of its exact name around its launch, with
the args CUDA's carry; the kernel sits on its stream's row with the same name,
linked to that op (External id, one ac2g arrow), and its event names the model
lines and ATen ops it fused. The compiled region's ranges are there as on CUDA,
``check --strict`` passes, and HolisticTraceAnalysis reads the trace.
"""

from __future__ import annotations

import inspect
import json
from collections import Counter

import pytest
import torch
import torch._inductor.config as inductor_config
import torch.nn.functional as F
from compile_support import DEVICE
from torch.profiler import ProfilerActivity, profile

from openreg_trace import open_trace

THIS_FILE = __file__


class TinyBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = self.linear(x)
        h = F.gelu(h) * 2  # LINE_GELU
        return torch.softmax(h, dim=-1).sum()  # LINE_SOFTMAX


def _line_of(marker: str) -> int:
    source, first = inspect.getsourcelines(TinyBlock.forward)
    return next(first + i for i, text in enumerate(source) if marker in text)


def _profile_compiled_training(path, record_shapes=True):
    model = TinyBlock().to(DEVICE)
    compiled = torch.compile(model)
    x = torch.randn(8, 16, device=DEVICE)
    for _ in range(2):  # compile and warm up outside the window
        compiled(x).backward()
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], record_shapes=record_shapes) as prof:
        compiled(x).backward()
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())["traceEvents"], prof


@pytest.fixture(scope="module")
def compiled_trace(tmp_path_factory):
    """(events, profiler, trace folder) of one profiled compiled training step, shared by the tests."""
    torch._dynamo.reset()
    folder = tmp_path_factory.mktemp("compiled_trace")
    with inductor_config.patch(force_disable_caches=True):
        events, prof = _profile_compiled_training(folder / "rank0.pt.trace.json")
    torch._dynamo.reset()
    return events, prof, folder


def _by_cat(events, cat):
    return [e for e in events if e.get("cat") == cat]


def test_each_compiled_kernel_is_linked_to_a_host_op_of_its_name(compiled_trace):
    events, _, _ = compiled_trace
    kernels = [e for e in _by_cat(events, "kernel") if e["name"].startswith("cpp_fused_")]
    assert len(kernels) >= 3, [e["name"] for e in _by_cat(events, "kernel")]  # forward, backward, and more
    ops = {e["args"]["External id"]: e for e in _by_cat(events, "cpu_op") if "External id" in e.get("args", {})}
    flows = Counter((e["ph"], e["id"]) for e in events if e.get("cat") == "ac2g")
    launches = {e["args"]["correlation"]: e for e in _by_cat(events, "privateuse1_runtime")}
    for kernel in kernels:
        op = ops[kernel["args"]["External id"]]
        assert op["name"] == kernel["name"]
        assert op["args"]["kernel_backend"] == "cpp"
        assert op["args"]["kernel_name"] == kernel["name"]
        assert op["args"]["kernel_file"].endswith(".cpp")
        assert len(op["args"]["kernel_hash"]) > 8
        assert op["args"]["stream"] == kernel["args"]["stream"] == kernel["tid"]
        assert kernel["pid"] == 0 + kernel["args"]["device"] or kernel["args"]["device"] == 0
        launch = launches[kernel["args"]["correlation"]]
        # The launch sits inside its host op, and the arrow goes from launch to kernel.
        assert op["ts"] <= launch["ts"] and launch["ts"] + launch["dur"] <= op["ts"] + op["dur"]
        assert flows[("s", kernel["args"]["correlation"])] == 1
        assert flows[("f", kernel["args"]["correlation"])] == 1


def test_kernel_events_name_the_model_lines_and_fused_ops(compiled_trace):
    events, _, _ = compiled_trace
    kernels = [e for e in _by_cat(events, "kernel") if e["name"].startswith("cpp_fused_")]
    gelu_line = f"{THIS_FILE}:{_line_of('LINE_GELU')}"
    softmax_line = f"{THIS_FILE}:{_line_of('LINE_SOFTMAX')}"
    lines = Counter(line for k in kernels for line in k["args"]["source_lines"])
    ops = Counter(op for k in kernels for op in k["args"]["fused_aten_ops"])
    assert lines[gelu_line] >= 2, lines  # in the forward kernel and in the backward one
    assert lines[softmax_line] >= 1, lines
    assert ops["aten::gelu"] >= 1 and ops["aten::_softmax"] + ops["aten::softmax"] >= 1, ops
    for k in kernels:
        assert all(line.startswith(THIS_FILE) for line in k["args"]["source_lines"]), k["args"]["source_lines"]


def test_compiled_region_ranges_are_there_as_on_cuda(compiled_trace):
    events, _, _ = compiled_trace
    names = [e["name"] for e in events if e.get("ph") == "X"]
    assert any(n.startswith("Torch-Compiled Region: ") for n in names)
    assert "CompiledFunction" in names
    assert any(n == "CompiledFunctionBackward" for n in names)
    assert sum(n.startswith("## Call CompiledFxGraph ") for n in names) >= 2  # forward and backward


def test_key_averages_credit_each_compiled_kernel_to_its_op(compiled_trace):
    events, prof, _ = compiled_trace
    averages = {e.key: e for e in prof.key_averages()}
    kernels = {e["name"] for e in _by_cat(events, "kernel") if e["name"].startswith("cpp_fused_")}
    for name in kernels:
        assert averages[name].count >= 1
        assert averages[name].self_device_time_total > 0, name


def test_check_strict_passes_and_hta_reads_the_trace(compiled_trace):
    _, _, folder = compiled_trace
    with open_trace(folder / "rank0.pt.trace.json") as trace:
        verdict = trace.check(strict=True)
    assert verdict["ok"], verdict

    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=str(folder))
    breakdown = analysis.get_gpu_kernel_breakdown(visualize=False)[0]
    assert breakdown["kernel_type"].tolist()  # HTA found the device kernels
