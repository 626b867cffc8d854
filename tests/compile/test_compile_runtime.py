"""How compiled code runs on openreg: asynchronously on the current stream, with errors that say why.

Also: what is refused (CUDA graphs, the C++ wrapper), Inductor's caches across
processes and across a change of openreg's code generation, and that
``import torch`` does not import Inductor.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch
import torch._inductor.config as inductor_config
from compile_support import DEVICE

import torch_openreg

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    full_env["PYTHONPATH"] = os.pathsep.join([str(REPO), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True, text=True, timeout=timeout
    )


def test_a_compiled_call_returns_before_its_kernels_run():
    # Two fused kernels around a matmul: the wrapper frees intermediate buffers
    # while the launches that read them are still queued.
    def fn(x, w, scale):
        return (torch.relu(x * 2) @ w).sigmoid() * scale + 1

    compiled = torch.compile(fn)
    x, w = torch.randn(64, 32, device=DEVICE), torch.randn(32, 16, device=DEVICE)
    scale = torch.tensor(3.0)  # a CPU scalar: its value is taken at the call
    expected = fn(x, w, scale)
    compiled(x, w, scale)  # compile first, outside the gated part
    torch.openreg.synchronize()

    gate = 4242
    torch.ops.openreg._wait_gate(x, gate)  # the stream is held until the gate opens
    outcome = {}

    def call():
        outcome["result"] = compiled(x, w, scale)

    caller = threading.Thread(target=call)
    caller.start()
    caller.join(timeout=60)
    returned = not caller.is_alive()
    still_held = torch_openreg._C._gate_waiting(gate)
    scale.fill_(100.0)  # after the call, before its kernels run
    torch_openreg._C._open_gate(gate)
    caller.join(timeout=60)
    assert returned, "the compiled call waited for the device"
    assert still_held, "the gate kernel was no longer blocking when the call returned"
    torch.testing.assert_close(outcome["result"], expected)


def test_a_compiled_call_launches_on_the_current_stream():
    compiled = torch.compile(lambda x: x * 2 + 1)
    x = torch.randn(100, device=DEVICE)
    compiled(x)
    # The warm-up call's kernels run on the default stream; let them finish so
    # that stream is idle for the reason this test asserts, not by timing.
    torch.openreg.synchronize()
    side = torch.openreg.Stream()
    gate = 4343
    try:
        with torch.openreg.stream(side):
            torch.ops.openreg._wait_gate(x, gate)
            y = compiled(x)
            # Queued behind the gate on the side stream; the default stream is idle.
            assert not side.query()
            assert torch.openreg.default_stream().query()
    finally:
        torch_openreg._C._open_gate(gate)
    side.synchronize()
    torch.testing.assert_close(y, x * 2 + 1)


def test_a_failing_kernel_is_reported_naming_it():
    table = torch.randn(10, 4, device=DEVICE)

    def fn(ids):
        return table[ids] * 2

    compiled = torch.compile(fn)
    compiled(torch.tensor([1, 2], device=DEVICE))
    torch.openreg.synchronize()
    compiled(torch.tensor([1, 12], device=DEVICE))  # out of bounds: the kernel's own check fails
    with pytest.raises(RuntimeError, match=r"kernel 'cpp_fused_\w+' failed on device 0.*index out of bounds"):
        torch.openreg.synchronize()
    # The failure was reported once; the device works again.
    torch.testing.assert_close(compiled(torch.tensor([3], device=DEVICE)), table[3:4] * 2)


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_modes_that_need_cuda_graphs_say_what_to_use(mode):
    compiled = torch.compile(lambda x: x.sin() + 1, mode=mode)
    with pytest.raises(Exception, match=r"CUDA graphs.*openreg.*max-autotune-no-cudagraphs") as error:
        compiled(torch.randn(8, device=DEVICE))
    assert "RuntimeError" in str(error.value) or isinstance(error.value, RuntimeError)


def test_max_autotune_without_cuda_graphs_works():
    def fn(a, b):
        return torch.relu(a @ b)

    a, b = torch.randn(32, 16, device=DEVICE), torch.randn(16, 8, device=DEVICE)
    torch.testing.assert_close(torch.compile(fn, mode="max-autotune-no-cudagraphs")(a, b), fn(a, b))


def test_the_cpp_wrapper_is_refused_with_what_to_use():
    with inductor_config.patch(cpp_wrapper=True):
        compiled = torch.compile(lambda x: x.cos() * 2)
        with pytest.raises(Exception, match=r"C\+\+ wrapper.*cpp_wrapper=False"):
            compiled(torch.randn(8, device=DEVICE))


def test_import_torch_does_not_import_inductor():
    result = run_python(
        """
        import sys, torch
        assert torch.openreg.device_count() >= 1
        x = torch.ones(3, device="openreg") + 1
        print(sorted(m for m in sys.modules if m.startswith(("torch._inductor", "torch._dynamo"))))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


_CACHED_COMPILE = """
import json, torch, torch._inductor.config as config
from torch._dynamo.utils import counters
config.fx_graph_cache = True
x = torch.arange(12.0, device="openreg")
y = torch.compile(lambda t: torch.sin(t) * 2 + t.sum())(x)
print(json.dumps({{"hit": counters["inductor"]["fxgraph_cache_hit"], "miss": counters["inductor"]["fxgraph_cache_miss"],
                  "ok": bool(torch.allclose(y.cpu(), torch.sin(torch.arange(12.0)) * 2 + 66))}}))
"""


def _cached_run(cache_dir: Path, extra: str = "") -> dict:
    result = run_python(extra + _CACHED_COMPILE.format(), env={"TORCHINDUCTOR_CACHE_DIR": str(cache_dir)})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_second_process_reuses_the_compiled_graph(tmp_path):
    assert _cached_run(tmp_path) == {"hit": 0, "miss": 1, "ok": True}
    assert _cached_run(tmp_path) == {"hit": 1, "miss": 0, "ok": True}


def test_a_change_to_openregs_code_generation_misses_the_cache(tmp_path):
    assert _cached_run(tmp_path) == {"hit": 0, "miss": 1, "ok": True}
    changed = "import torch_openreg._inductor.cache_config as c; c.codegen_version = 'changed'\n"
    assert _cached_run(tmp_path, changed) == {"hit": 0, "miss": 1, "ok": True}
    assert _cached_run(tmp_path, changed) == {"hit": 1, "miss": 0, "ok": True}
