"""Training steps compiled on openreg (AOTAutograd's backward included) against eager ones.

The demo's GPT and ResNet, tiny sizes, dropout off so that eager and compiled
draw no random numbers. Gradients of one step are held to a float64 CPU
reference: the compiled ones must be as accurate as eager's (fused kernels sum
in another order, so bitwise equality is not the bar). Then a few optimizer
steps on one batch: the same losses as eager, and falling.
"""

from __future__ import annotations

import copy

import torch
from compile_support import DEVICE

from torch_openreg.demo.model import GPT, GPTConfig
from torch_openreg.demo.resnet import ResNet, config_for


def _reference(value: torch.Tensor) -> torch.Tensor:
    return value.cpu().double() if value.is_floating_point() else value.cpu()


def _gradients(model, forward, inputs, targets) -> dict[str, torch.Tensor]:
    forward(inputs, targets).backward()
    return {name: p.grad.detach().cpu().double() for name, p in model.named_parameters()}


def assert_gradients_as_accurate_as_eager(model, inputs, targets):
    reference = copy.deepcopy(model).cpu().double()
    eager = copy.deepcopy(model)
    exact = _gradients(reference, reference, _reference(inputs), _reference(targets))
    eager_grads = _gradients(eager, eager, inputs, targets)
    compiled_grads = _gradients(model, torch.compile(model), inputs, targets)
    for name, truth in exact.items():
        eager_error = (eager_grads[name] - truth).abs().max().item()
        compiled_error = (compiled_grads[name] - truth).abs().max().item()
        scale = truth.abs().max().item()
        assert compiled_error <= 4 * eager_error + 1e-6 * scale, (name, compiled_error, eager_error, scale)


def assert_same_training(model, inputs, targets, steps=3):
    def train(m, compiled):
        optimizer = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        forward = torch.compile(m) if compiled else m
        losses = []
        for _ in range(steps):
            loss = forward(inputs, targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses

    eager_losses = train(copy.deepcopy(model), compiled=False)
    compiled_losses = train(model, compiled=True)
    torch.testing.assert_close(compiled_losses, eager_losses, atol=1e-3, rtol=1e-3)
    assert compiled_losses[-1] < compiled_losses[0], compiled_losses


def _gpt():
    torch.manual_seed(0)
    config = GPTConfig(vocabulary=40, context=16, width=32, layers=1, heads=2, batch_size=4, dropout=0.0)
    inputs = torch.randint(0, 40, (4, 16), device=DEVICE)
    return GPT(config).to(DEVICE), inputs, torch.roll(inputs, -1, dims=1)


def _resnet():
    torch.manual_seed(0)
    config = config_for("tiny")
    images = torch.randn(config.batch_size, 3, config.image, config.image, device=DEVICE)
    labels = torch.randint(0, config.classes, (config.batch_size,), device=DEVICE)
    return ResNet(config).to(DEVICE), images, labels


def test_gpt_gradients():
    assert_gradients_as_accurate_as_eager(*_gpt())


def test_gpt_training_steps():
    assert_same_training(*_gpt())


def test_resnet_gradients():
    assert_gradients_as_accurate_as_eager(*_resnet())


def test_resnet_training_steps():
    assert_same_training(*_resnet())
