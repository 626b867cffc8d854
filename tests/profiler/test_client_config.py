"""What torch's `_ExperimentalConfig` reaches the openreg plugin with (issue 44: how a user asks a PrivateUse1
backend for counters). torch 2.13 writes `custom_profiler_config` into Kineto's config text as CUSTOM_CONFIG
(the plugin reads it as `Config::getCustomConfig()`), and `profiler_metrics` / `profiler_measure_per_kernel` as
CUPTI_PROFILER_METRICS / CUPTI_PROFILER_ENABLE_PER_KERNEL (in the text only: the plugin reads them off
`Config::source()`). The plugin records what it received in the trace's metadata, "openreg_profiler" ->
"client_config"; these tests hold that record to what was asked.

(A custom_profiler_config holding "=" makes Kineto reject its config line and torch 2.13 itself then dies on
SIGSEGV, openreg loaded or not: not tested here, it would kill the test process.)
"""

from __future__ import annotations

import json

import torch
from torch._C._profiler import _ExperimentalConfig
from torch.profiler import ProfilerActivity, profile


def client_config(tmp_path, config: _ExperimentalConfig | None) -> dict:
    x = torch.randn(32, 32, device="openreg")
    kwargs = {} if config is None else {"experimental_config": config}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], **kwargs) as prof:
        (x @ x).sum()
        torch.openreg.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    assert [e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel"], "no device rows"
    return trace["openreg_profiler"]["client_config"]


def test_no_experimental_config_asks_for_nothing(tmp_path):
    assert client_config(tmp_path, None) == {
        "custom_config": "",
        "profiler_metrics": None,
        "profiler_measure_per_kernel": None,
    }


def test_custom_profiler_config_reaches_the_plugin(tmp_path):
    got = client_config(tmp_path, _ExperimentalConfig(custom_profiler_config="openreg.counters:flops,bytes"))
    assert got["custom_config"] == "openreg.counters:flops,bytes"


def test_profiler_metrics_reach_the_plugin_as_config_text(tmp_path):
    config = _ExperimentalConfig(profiler_metrics=["flops", "memory_allocated"], profiler_measure_per_kernel=True)
    got = client_config(tmp_path, config)
    assert got == {
        "custom_config": "",
        "profiler_metrics": "flops,memory_allocated",
        "profiler_measure_per_kernel": "true",
    }
