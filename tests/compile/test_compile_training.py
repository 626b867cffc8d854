"""Training steps compiled on openreg (AOTAutograd's backward included) match eager ones.

The demo's GPT and ResNet, tiny sizes, dropout off so that eager and compiled
draw no random numbers: the same weights must come out of two steps.
"""

from __future__ import annotations

import copy

import torch
from compile_support import DEVICE

from torch_openreg.demo.model import GPT, GPTConfig
from torch_openreg.demo.resnet import ResNet, config_for


def train(model, batches, compile_model: bool):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    forward = torch.compile(model) if compile_model else model
    losses = []
    for inputs, targets in batches:
        loss = forward(inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def assert_same_training(model, batches):
    eager_model = copy.deepcopy(model)
    eager_losses = train(eager_model, batches, compile_model=False)
    compiled_losses = train(model, batches, compile_model=True)
    torch.testing.assert_close(compiled_losses, eager_losses, atol=1e-4, rtol=1e-4)
    for (name, p), q in zip(model.named_parameters(), eager_model.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-4, rtol=1e-4, msg=lambda m, name=name: f"{name}: {m}")
    assert compiled_losses[-1] < compiled_losses[0]


def test_gpt_training_steps():
    torch.manual_seed(0)
    config = GPTConfig(vocabulary=40, context=16, width=32, layers=1, heads=2, batch_size=4, dropout=0.0)
    model = GPT(config).to(DEVICE)
    batches = [
        (torch.randint(0, 40, (4, 16), device=DEVICE), torch.randint(0, 40, (4, 16), device=DEVICE)) for _ in range(3)
    ]
    assert_same_training(model, batches)


def test_resnet_training_steps():
    torch.manual_seed(0)
    config = config_for("tiny")
    model = ResNet(config).to(DEVICE)
    batches = [
        (
            torch.randn(config.batch_size, 3, config.image, config.image, device=DEVICE),
            torch.randint(0, config.classes, (config.batch_size,), device=DEVICE),
        )
        for _ in range(2)
    ]
    assert_same_training(model, batches)
