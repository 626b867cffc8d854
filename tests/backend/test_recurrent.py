"""Recurrent layers on openreg agree with CPU and train like it.

On a PrivateUse1 device ATen's LSTM/GRU layers and cells call the fused cells
(_thnn_fused_lstm_cell, _thnn_fused_gru_cell) and their backwards, which CPU
does not have (it uses the unfused cell): the comparison is therefore between
two different implementations of the same math.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

F64, F32, BF16, F16 = torch.float64, torch.float32, torch.bfloat16, torch.float16
DEVICE = torch.autograd.DeviceType.PrivateUse1


@dataclass(frozen=True)
class Recurrent:
    name: str
    make: Callable[[], nn.Module]
    input: tuple[int, ...]
    dtypes: tuple[torch.dtype, ...] = (F32, F64)
    state: Callable[[torch.Generator], object] | None = None  # initial state, or None for zeros


def _hidden(*shape):
    return lambda g: torch.randn(shape, generator=g)


RECURRENT = [
    Recurrent(
        "lstm_cell",
        lambda: nn.LSTMCell(5, 7),
        (3, 5),
        dtypes=(F32, F64, BF16, F16),
        state=lambda g: (torch.randn(3, 7, generator=g), torch.randn(3, 7, generator=g)),
    ),
    Recurrent("lstm_cell_no_bias_no_state", lambda: nn.LSTMCell(5, 7, bias=False), (3, 5)),
    Recurrent("gru_cell", lambda: nn.GRUCell(5, 7), (3, 5), dtypes=(F32, F64, BF16, F16), state=_hidden(3, 7)),
    Recurrent("gru_cell_no_bias", lambda: nn.GRUCell(5, 7, bias=False), (3, 5), state=_hidden(3, 7)),
    Recurrent(
        "lstm_2_layers_bidirectional",
        lambda: nn.LSTM(5, 6, num_layers=2, bidirectional=True),
        (4, 3, 5),
        dtypes=(F32, F64, BF16),
    ),
    Recurrent(
        "lstm_batch_first_proj",
        lambda: nn.LSTM(4, 6, batch_first=True, proj_size=3),
        (2, 5, 4),
        state=lambda g: (torch.randn(1, 2, 3, generator=g), torch.randn(1, 2, 6, generator=g)),
    ),
    Recurrent(
        "gru_2_layers_bidirectional",
        lambda: nn.GRU(5, 6, num_layers=2, bidirectional=True),
        (4, 3, 5),
        dtypes=(F32, F64, BF16),
    ),
    Recurrent(
        "gru_no_bias_batch_first", lambda: nn.GRU(4, 5, bias=False, batch_first=True), (2, 6, 4), state=_hidden(1, 2, 5)
    ),
]
CASES = [pytest.param(r, d, id=f"{r.name}-{str(d).removeprefix('torch.')}") for r in RECURRENT for d in r.dtypes]


def tolerance(dtype):
    return {BF16: dict(rtol=2e-2, atol=2e-2), F16: dict(rtol=2e-3, atol=2e-3)}.get(dtype, {})


def flatten(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in flatten(v)]


def run(module: nn.Module, x: torch.Tensor, state, upstream: list[torch.Tensor] | None):
    x = x.detach().clone().requires_grad_()
    state_leaves = [t.detach().clone().requires_grad_() for t in flatten(state)] if state is not None else []
    if state is None:
        outputs = flatten(module(x))
    elif isinstance(state, tuple):
        outputs = flatten(module(x, tuple(state_leaves)))
    else:
        outputs = flatten(module(x, state_leaves[0]))
    if upstream is None:
        return outputs, None
    torch.autograd.backward(outputs, [u.to(x.device) for u in upstream])
    grads = {
        "input": x.grad,
        **{f"state{i}": t.grad for i, t in enumerate(state_leaves)},
        **{name: p.grad for name, p in module.named_parameters()},
    }
    return outputs, grads


@pytest.mark.parametrize("case, dtype", CASES)
def test_outputs_and_every_gradient_match_cpu(case: Recurrent, dtype: torch.dtype, fallback_counts):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    cpu_module = case.make().to(dtype)
    device_module = copy.deepcopy(cpu_module).to("openreg")
    x = torch.randn(case.input, generator=g).to(dtype)
    state = case.state(g) if case.state else None
    if state is not None:
        state = tuple(s.to(dtype) for s in state) if isinstance(state, tuple) else state.to(dtype)
    reference, _ = run(cpu_module, x, state, None)
    upstream = [torch.randn(r.shape, generator=g).to(dtype) for r in reference]
    expected, expected_grads = run(cpu_module, x, state, upstream)
    moved = (
        None
        if state is None
        else (tuple(s.to("openreg") for s in state) if isinstance(state, tuple) else state.to("openreg"))
    )
    actual, actual_grads = run(device_module, x.to("openreg"), moved, upstream)

    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.device.type == "openreg" and a.dtype == dtype
        torch.testing.assert_close(a.cpu(), e, **tolerance(dtype))
    assert actual_grads.keys() == expected_grads.keys()
    for name, grad in expected_grads.items():
        zero_state = case.state is None and name.startswith("weight_hh")  # multiplies a zero hidden state
        assert grad is not None and (zero_state or grad.abs().sum() > 0), name
        torch.testing.assert_close(actual_grads[name].cpu(), grad, **tolerance(dtype), msg=lambda m: f"{name}: {m}")
    assert fallback_counts() == {}


class SequenceModel(nn.Module):
    """A 2-layer LSTM regressor: the shape of a small sequence model people profile."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 16, num_layers=2, batch_first=True, dropout=0.0)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def test_a_two_layer_lstm_trains_with_cpus_losses():
    torch.manual_seed(0)
    cpu_model = SequenceModel()
    device_model = copy.deepcopy(cpu_model).to("openreg")
    g = torch.Generator().manual_seed(2)
    x = torch.randn(8, 10, 6, generator=g)
    y = x.sum((1, 2)).unsqueeze(1) * 0.1

    def train(model, device):
        optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
        xs, ys = x.to(device), y.to(device)
        losses = []
        for _ in range(8):
            loss = nn.functional.mse_loss(model(xs), ys)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses

    expected = train(cpu_model, "cpu")
    actual = train(device_model, "openreg")
    assert expected[-1] < expected[0] * 0.5  # it learns, so equal losses mean equal training
    assert actual == pytest.approx(expected, rel=1e-4, abs=1e-6)
    for p_cpu, p_dev in zip(cpu_model.parameters(), device_model.parameters()):
        torch.testing.assert_close(p_dev.detach().cpu(), p_cpu.detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "cell, op, forward, backward",
    [
        (
            lambda: nn.LSTMCell(4, 8),
            "aten::_thnn_fused_lstm_cell",
            "lstm_cell_fwd_fused_f32",
            "lstm_cell_bwd_fused_f32",
        ),
        (lambda: nn.GRUCell(4, 8), "aten::_thnn_fused_gru_cell", "gru_cell_fwd_fused_f32", "gru_cell_bwd_fused_f32"),
    ],
    ids=["lstm", "gru"],
)
def test_each_cell_pass_is_one_fused_kernel_linked_to_its_op(cell, op, forward, backward):
    module = cell().to("openreg")
    x = torch.randn(3, 4, device="openreg", requires_grad=True)

    def step():
        hidden = module(x)
        (hidden[0] if isinstance(hidden, tuple) else hidden).sum().backward()

    step()  # first-call work stays out of the profile
    torch.openreg.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        step()
        torch.openreg.synchronize()
    events = prof.events()
    kernels = [e.name for e in events if e.device_type == DEVICE and e.name in (forward, backward)]
    assert sorted(kernels) == sorted([forward, backward])
    backward_op = "aten::_thnn_fused_lstm_cell_backward_impl" if "lstm" in op else "aten::_thnn_fused_gru_cell_backward"
    linked = {e.name: [k.name for k in e.kernels] for e in events if e.name in (op, backward_op)}
    assert linked == {op: [forward], backward_op: [backward]}
    averages = {a.key: a for a in prof.key_averages()}
    assert averages[op].device_time_total > 0 and averages[backward_op].device_time_total > 0


def test_bad_cell_arguments_raise():
    gates = torch.randn(3, 8, device="openreg")
    with pytest.raises(RuntimeError, match=r"expected gates of size \[3, 12\]"):
        torch.ops.aten._thnn_fused_lstm_cell(gates, gates, torch.randn(3, 3, device="openreg"))
    with pytest.raises(RuntimeError, match="same device|Expected all tensors"):
        torch.ops.aten._thnn_fused_gru_cell(
            torch.randn(3, 6, device="openreg"), torch.randn(3, 6), torch.randn(3, 2, device="openreg")
        )
    with pytest.raises(RuntimeError, match="workspace"):
        torch.ops.aten._thnn_fused_gru_cell_backward(
            torch.randn(3, 2, device="openreg"), torch.randn(3, 9, device="openreg"), True
        )
