"""Every torch.nn module runs forward and backward on openreg with CPU's results.

Each public nn.Module class has a representative configuration below (or is
listed as not applicable: containers, abstract bases, CUDA-only wrappers).
The test builds it on CPU, copies it to openreg, runs the same inputs and the
same upstream gradients on both, and compares outputs, input gradients,
parameter gradients and buffers (running statistics). Modules whose forward
draws random numbers run in eval mode (or with fixed samples), since
openreg's generator is not CPU's.

A module that cannot run on openreg is listed, with the reason, in the
"nn modules that cannot run on openreg" section of csrc/backend/README.md;
this test expects exactly those to fail, so the list has to shrink when one is
fixed. The same README lists the modules that still reach the CPU fallback
(correct, but each call synchronizes and copies), with the operators; the test
checks that list exactly too.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_openreg

README = Path(__file__).resolve().parents[2] / "csrc" / "backend" / "README.md"

Inputs = Callable[[torch.Generator], tuple]


def r(*shape):
    return lambda g: torch.randn(shape, generator=g)


def pos(*shape):
    return lambda g: torch.rand(shape, generator=g) * 0.8 + 0.1


def idx(high, *shape, low=0):
    return lambda g: torch.randint(low, high, shape, generator=g)


def sign(*shape):
    return lambda g: torch.randint(0, 2, shape, generator=g).float() * 2 - 1


def log_probs(*shape, dim=-1):
    return lambda g: torch.randn(shape, generator=g).log_softmax(dim)


def const(value):
    return lambda g: value


@dataclass
class Spec:
    make: Callable[[], nn.Module]
    inputs: list[Inputs]
    grad: tuple[int, ...] | None = None  # inputs that get a gradient (default: every floating one)
    eval: bool = False  # forward draws random numbers in training mode
    tol: dict = field(default_factory=dict)


def maxpool_indices(fn, *shape, **kwargs):
    return lambda g: fn(torch.randn(shape, generator=g), return_indices=True, **kwargs)


def fractional_samples(*shape):
    return torch.rand(shape, generator=torch.Generator().manual_seed(3))


def encoder_layer():
    return nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)


def decoder_layer():
    return nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)


def _pooled(shape, fn, **kwargs):
    """Inputs of a MaxUnpool: pooled values and their indices."""

    def values(g):
        return fn(torch.randn(shape, generator=torch.Generator().manual_seed(5)), return_indices=True, **kwargs)[0]

    def indices(g):
        return fn(torch.randn(shape, generator=torch.Generator().manual_seed(5)), return_indices=True, **kwargs)[1]

    return [values, indices]


SPECS: dict[str, Spec] = {
    "AdaptiveAvgPool1d": Spec(lambda: nn.AdaptiveAvgPool1d(3), [r(2, 3, 8)]),
    "AdaptiveAvgPool2d": Spec(lambda: nn.AdaptiveAvgPool2d((3, 2)), [r(2, 3, 7, 6)]),
    "AdaptiveAvgPool3d": Spec(lambda: nn.AdaptiveAvgPool3d(2), [r(1, 2, 5, 4, 4)]),
    "AdaptiveLogSoftmaxWithLoss": Spec(lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 8]), [r(5, 8), idx(10, 5)]),
    "AdaptiveMaxPool1d": Spec(lambda: nn.AdaptiveMaxPool1d(3), [r(2, 3, 8)]),
    "AdaptiveMaxPool2d": Spec(lambda: nn.AdaptiveMaxPool2d((3, 2)), [r(2, 3, 7, 6)]),
    "AdaptiveMaxPool3d": Spec(lambda: nn.AdaptiveMaxPool3d(2), [r(1, 2, 5, 4, 4)]),
    "AlphaDropout": Spec(lambda: nn.AlphaDropout(0.5), [r(3, 4)], eval=True),
    "AvgPool1d": Spec(lambda: nn.AvgPool1d(3, stride=2), [r(2, 3, 9)]),
    "AvgPool2d": Spec(lambda: nn.AvgPool2d(3, stride=2, padding=1), [r(2, 3, 7, 6)]),
    "AvgPool3d": Spec(lambda: nn.AvgPool3d(2), [r(1, 2, 4, 4, 4)]),
    "BCELoss": Spec(lambda: nn.BCELoss(), [pos(4, 5), pos(4, 5)], grad=(0,)),
    "BCEWithLogitsLoss": Spec(
        lambda: nn.BCEWithLogitsLoss(pos_weight=torch.full((5,), 2.0)), [r(4, 5), pos(4, 5)], grad=(0,)
    ),
    "BatchNorm1d": Spec(lambda: nn.BatchNorm1d(4), [r(3, 4, 5)]),
    "BatchNorm2d": Spec(lambda: nn.BatchNorm2d(4), [r(3, 4, 5, 5)]),
    "BatchNorm3d": Spec(lambda: nn.BatchNorm3d(3), [r(2, 3, 3, 4, 4)]),
    "Bilinear": Spec(lambda: nn.Bilinear(3, 4, 5), [r(2, 3), r(2, 4)]),
    "CELU": Spec(lambda: nn.CELU(0.5), [r(3, 4)]),
    "CTCLoss": Spec(
        lambda: nn.CTCLoss(),
        [log_probs(6, 2, 5), idx(5, 2, 3, low=1), const(torch.tensor([6, 5])), const(torch.tensor([3, 2]))],
        grad=(0,),
    ),
    "ChannelShuffle": Spec(lambda: nn.ChannelShuffle(2), [r(2, 4, 3, 3)]),
    "CircularPad1d": Spec(lambda: nn.CircularPad1d(2), [r(2, 3, 5)]),
    "CircularPad2d": Spec(lambda: nn.CircularPad2d((1, 2, 1, 0)), [r(2, 3, 4, 4)]),
    "CircularPad3d": Spec(lambda: nn.CircularPad3d(1), [r(1, 2, 3, 3, 3)]),
    "ConstantPad1d": Spec(lambda: nn.ConstantPad1d(2, 0.5), [r(2, 3, 5)]),
    "ConstantPad2d": Spec(lambda: nn.ConstantPad2d((1, 0, 2, 1), -1.0), [r(2, 3, 4, 4)]),
    "ConstantPad3d": Spec(lambda: nn.ConstantPad3d(1, 0.0), [r(1, 2, 3, 3, 3)]),
    "Conv1d": Spec(lambda: nn.Conv1d(3, 4, 3, padding=1), [r(2, 3, 8)]),
    "Conv2d": Spec(lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), [r(2, 3, 7, 7)]),
    "Conv3d": Spec(lambda: nn.Conv3d(2, 3, 2), [r(1, 2, 4, 4, 4)]),
    "ConvTranspose1d": Spec(lambda: nn.ConvTranspose1d(3, 2, 3, stride=2), [r(2, 3, 5)]),
    "ConvTranspose2d": Spec(
        lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1), [r(2, 3, 4, 4)]
    ),
    "ConvTranspose3d": Spec(lambda: nn.ConvTranspose3d(2, 2, 2, stride=2), [r(1, 2, 2, 3, 2)]),
    "CosineEmbeddingLoss": Spec(lambda: nn.CosineEmbeddingLoss(0.1), [r(4, 5), r(4, 5), sign(4)], grad=(0, 1)),
    "CosineSimilarity": Spec(lambda: nn.CosineSimilarity(dim=1), [r(3, 5), r(3, 5)]),
    "CrossEntropyLoss": Spec(lambda: nn.CrossEntropyLoss(label_smoothing=0.1), [r(4, 6), idx(6, 4)]),
    "CrossMapLRN2d": Spec(lambda: nn.CrossMapLRN2d(3), [r(2, 4, 5, 5)]),
    "Dropout": Spec(lambda: nn.Dropout(0.5), [r(3, 4)], eval=True),
    "Dropout1d": Spec(lambda: nn.Dropout1d(0.5), [r(2, 3, 4)], eval=True),
    "Dropout2d": Spec(lambda: nn.Dropout2d(0.5), [r(2, 3, 4, 4)], eval=True),
    "Dropout3d": Spec(lambda: nn.Dropout3d(0.5), [r(2, 3, 2, 2, 2)], eval=True),
    "ELU": Spec(lambda: nn.ELU(), [r(3, 4)]),
    "Embedding": Spec(lambda: nn.Embedding(10, 4, padding_idx=0), [idx(10, 3, 5)]),
    "EmbeddingBag": Spec(lambda: nn.EmbeddingBag(10, 4, mode="mean"), [idx(10, 3, 4)]),
    "FeatureAlphaDropout": Spec(lambda: nn.FeatureAlphaDropout(0.5), [r(2, 3, 4)], eval=True),
    "Flatten": Spec(lambda: nn.Flatten(), [r(2, 3, 4)]),
    "Fold": Spec(lambda: nn.Fold(output_size=(4, 5), kernel_size=2), [r(2, 12, 12)]),
    "FractionalMaxPool2d": Spec(
        lambda: nn.FractionalMaxPool2d(2, output_size=3, _random_samples=fractional_samples(2, 3, 2)), [r(2, 3, 7, 7)]
    ),
    "FractionalMaxPool3d": Spec(
        lambda: nn.FractionalMaxPool3d(2, output_size=2, _random_samples=fractional_samples(1, 2, 3)),
        [r(1, 2, 5, 5, 5)],
    ),
    "GELU": Spec(lambda: nn.GELU(approximate="tanh"), [r(3, 4)]),
    "GLU": Spec(lambda: nn.GLU(), [r(2, 6)]),
    "GRU": Spec(lambda: nn.GRU(4, 5, num_layers=2, bidirectional=True), [r(3, 2, 4)]),
    "GRUCell": Spec(lambda: nn.GRUCell(4, 5), [r(3, 4), r(3, 5)]),
    "GaussianNLLLoss": Spec(lambda: nn.GaussianNLLLoss(), [r(4, 3), r(4, 3), pos(4, 3)], grad=(0, 2)),
    "GroupNorm": Spec(lambda: nn.GroupNorm(2, 4), [r(2, 4, 3, 3)]),
    "Hardshrink": Spec(lambda: nn.Hardshrink(0.3), [r(3, 4)]),
    "Hardsigmoid": Spec(lambda: nn.Hardsigmoid(), [r(3, 4)]),
    "Hardswish": Spec(lambda: nn.Hardswish(), [r(3, 4)]),
    "Hardtanh": Spec(lambda: nn.Hardtanh(-0.5, 0.5), [r(3, 4)]),
    "HingeEmbeddingLoss": Spec(lambda: nn.HingeEmbeddingLoss(), [r(4, 5), sign(4, 5)], grad=(0,)),
    "HuberLoss": Spec(lambda: nn.HuberLoss(delta=0.5), [r(4, 5), r(4, 5)], grad=(0,)),
    "Identity": Spec(lambda: nn.Identity(), [r(3, 4)]),
    "InstanceNorm1d": Spec(lambda: nn.InstanceNorm1d(3, affine=True), [r(2, 3, 6)]),
    "InstanceNorm2d": Spec(lambda: nn.InstanceNorm2d(3, track_running_stats=True), [r(2, 3, 4, 4)]),
    "InstanceNorm3d": Spec(lambda: nn.InstanceNorm3d(2, affine=True), [r(2, 2, 3, 3, 3)]),
    "KLDivLoss": Spec(lambda: nn.KLDivLoss(reduction="batchmean"), [log_probs(3, 5), pos(3, 5)], grad=(0,)),
    "L1Loss": Spec(lambda: nn.L1Loss(), [r(4, 5), r(4, 5)], grad=(0,)),
    "LPPool1d": Spec(lambda: nn.LPPool1d(2, 3), [pos(2, 3, 9)]),
    "LPPool2d": Spec(lambda: nn.LPPool2d(2, 2), [pos(2, 3, 4, 4)]),
    "LPPool3d": Spec(lambda: nn.LPPool3d(2, 2), [pos(1, 2, 4, 4, 4)]),
    "LSTM": Spec(lambda: nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True), [r(2, 3, 4)]),
    "LSTMCell": Spec(lambda: nn.LSTMCell(4, 5), [r(3, 4)]),
    "LayerNorm": Spec(lambda: nn.LayerNorm(5), [r(3, 5)]),
    "LazyBatchNorm1d": Spec(lambda: nn.LazyBatchNorm1d(), [r(3, 4)]),
    "LazyBatchNorm2d": Spec(lambda: nn.LazyBatchNorm2d(), [r(2, 3, 4, 4)]),
    "LazyBatchNorm3d": Spec(lambda: nn.LazyBatchNorm3d(), [r(2, 2, 3, 3, 3)]),
    "LazyConv1d": Spec(lambda: nn.LazyConv1d(4, 3), [r(2, 3, 8)]),
    "LazyConv2d": Spec(lambda: nn.LazyConv2d(4, 3, groups=1), [r(2, 3, 6, 6)]),
    "LazyConv3d": Spec(lambda: nn.LazyConv3d(2, 2), [r(1, 2, 3, 3, 3)]),
    "LazyConvTranspose1d": Spec(lambda: nn.LazyConvTranspose1d(2, 3), [r(2, 3, 5)]),
    "LazyConvTranspose2d": Spec(lambda: nn.LazyConvTranspose2d(2, 3, stride=2), [r(2, 3, 3, 3)]),
    "LazyConvTranspose3d": Spec(lambda: nn.LazyConvTranspose3d(2, 2), [r(1, 2, 2, 2, 2)]),
    "LazyInstanceNorm1d": Spec(lambda: nn.LazyInstanceNorm1d(affine=True), [r(2, 3, 6)]),
    "LazyInstanceNorm2d": Spec(lambda: nn.LazyInstanceNorm2d(affine=True), [r(2, 3, 4, 4)]),
    "LazyInstanceNorm3d": Spec(lambda: nn.LazyInstanceNorm3d(affine=True), [r(2, 2, 3, 3, 3)]),
    "LazyLinear": Spec(lambda: nn.LazyLinear(3), [r(4, 5)]),
    "LeakyReLU": Spec(lambda: nn.LeakyReLU(0.2), [r(3, 4)]),
    "Linear": Spec(lambda: nn.Linear(5, 3), [r(4, 5)]),
    "LinearCrossEntropyLoss": Spec(lambda: nn.LinearCrossEntropyLoss(5, 7, bias=True), [r(4, 5), idx(7, 4)]),
    "LocalResponseNorm": Spec(lambda: nn.LocalResponseNorm(3), [r(2, 4, 5, 5)]),
    "LogSigmoid": Spec(lambda: nn.LogSigmoid(), [r(3, 4)]),
    "LogSoftmax": Spec(lambda: nn.LogSoftmax(dim=1), [r(3, 4)]),
    "MSELoss": Spec(lambda: nn.MSELoss(), [r(4, 5), r(4, 5)], grad=(0,)),
    "MarginRankingLoss": Spec(lambda: nn.MarginRankingLoss(0.1), [r(4), r(4), sign(4)], grad=(0, 1)),
    "MaxPool1d": Spec(lambda: nn.MaxPool1d(3, stride=2), [r(2, 3, 9)]),
    "MaxPool2d": Spec(lambda: nn.MaxPool2d(3, stride=2, padding=1), [r(2, 3, 7, 6)]),
    "MaxPool3d": Spec(lambda: nn.MaxPool3d(2), [r(1, 2, 4, 4, 4)]),
    "MaxUnpool1d": Spec(lambda: nn.MaxUnpool1d(2), _pooled((2, 3, 8), F.max_pool1d, kernel_size=2), grad=(0,)),
    "MaxUnpool2d": Spec(lambda: nn.MaxUnpool2d(2), _pooled((2, 3, 4, 4), F.max_pool2d, kernel_size=2), grad=(0,)),
    "MaxUnpool3d": Spec(lambda: nn.MaxUnpool3d(2), _pooled((1, 2, 4, 4, 4), F.max_pool3d, kernel_size=2), grad=(0,)),
    "Mish": Spec(lambda: nn.Mish(), [r(3, 4)]),
    "MultiLabelMarginLoss": Spec(
        lambda: nn.MultiLabelMarginLoss(), [r(3, 4), const(torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3], [1, -1, 0, 0]]))]
    ),
    "MultiLabelSoftMarginLoss": Spec(lambda: nn.MultiLabelSoftMarginLoss(), [r(3, 4), sign(3, 4)], grad=(0,)),
    "MultiMarginLoss": Spec(lambda: nn.MultiMarginLoss(), [r(3, 4), idx(4, 3)]),
    "MultiheadAttention": Spec(
        lambda: nn.MultiheadAttention(8, 2, batch_first=True), [r(2, 3, 8), r(2, 4, 8), r(2, 4, 8)]
    ),
    "NLLLoss": Spec(lambda: nn.NLLLoss(weight=torch.tensor([1.0, 2.0, 0.5])), [log_probs(4, 3), idx(3, 4)]),
    "NLLLoss2d": Spec(lambda: nn.NLLLoss2d(), [log_probs(2, 3, 4, 4, dim=1), idx(3, 2, 4, 4)]),
    "PReLU": Spec(lambda: nn.PReLU(3), [r(2, 3, 4)]),
    "PairwiseDistance": Spec(lambda: nn.PairwiseDistance(), [r(3, 5), r(3, 5)]),
    "PixelShuffle": Spec(lambda: nn.PixelShuffle(2), [r(1, 8, 3, 3)]),
    "PixelUnshuffle": Spec(lambda: nn.PixelUnshuffle(2), [r(1, 2, 4, 4)]),
    "PoissonNLLLoss": Spec(lambda: nn.PoissonNLLLoss(), [r(4, 3), pos(4, 3)], grad=(0,)),
    "RMSNorm": Spec(lambda: nn.RMSNorm(5), [r(3, 5)]),
    "RNN": Spec(lambda: nn.RNN(4, 5, num_layers=2, nonlinearity="relu"), [r(3, 2, 4)]),
    "RNNCell": Spec(lambda: nn.RNNCell(4, 5), [r(3, 4), r(3, 5)]),
    "RReLU": Spec(lambda: nn.RReLU(), [r(3, 4)], eval=True),
    "ReLU": Spec(lambda: nn.ReLU(), [r(3, 4)]),
    "ReLU6": Spec(lambda: nn.ReLU6(), [lambda g: torch.randn(3, 4, generator=g) * 5]),  # reaches both clamps
    "ReflectionPad1d": Spec(lambda: nn.ReflectionPad1d(2), [r(2, 3, 5)]),
    "ReflectionPad2d": Spec(lambda: nn.ReflectionPad2d((1, 2, 0, 1)), [r(2, 3, 4, 4)]),
    "ReflectionPad3d": Spec(lambda: nn.ReflectionPad3d(1), [r(1, 2, 3, 3, 3)]),
    "ReplicationPad1d": Spec(lambda: nn.ReplicationPad1d(2), [r(2, 3, 5)]),
    "ReplicationPad2d": Spec(lambda: nn.ReplicationPad2d((1, 2, 0, 1)), [r(2, 3, 4, 4)]),
    "ReplicationPad3d": Spec(lambda: nn.ReplicationPad3d(1), [r(1, 2, 3, 3, 3)]),
    "SELU": Spec(lambda: nn.SELU(), [r(3, 4)]),
    "SiLU": Spec(lambda: nn.SiLU(), [r(3, 4)]),
    "Sigmoid": Spec(lambda: nn.Sigmoid(), [r(3, 4)]),
    "SmoothL1Loss": Spec(lambda: nn.SmoothL1Loss(beta=0.5), [r(4, 5), r(4, 5)], grad=(0,)),
    "SoftMarginLoss": Spec(lambda: nn.SoftMarginLoss(), [r(4, 5), sign(4, 5)], grad=(0,)),
    "Softmax": Spec(lambda: nn.Softmax(dim=1), [r(3, 4)]),
    "Softmax2d": Spec(lambda: nn.Softmax2d(), [r(2, 3, 4, 4)]),
    "Softmin": Spec(lambda: nn.Softmin(dim=1), [r(3, 4)]),
    "Softplus": Spec(lambda: nn.Softplus(beta=2.0), [r(3, 4)]),
    "Softshrink": Spec(lambda: nn.Softshrink(0.3), [r(3, 4)]),
    "Softsign": Spec(lambda: nn.Softsign(), [r(3, 4)]),
    "SyncBatchNorm": Spec(lambda: nn.SyncBatchNorm(3), [r(2, 3, 4, 4)], eval=True),
    "Tanh": Spec(lambda: nn.Tanh(), [r(3, 4)]),
    "Tanhshrink": Spec(lambda: nn.Tanhshrink(), [r(3, 4)]),
    "Threshold": Spec(lambda: nn.Threshold(0.1, 20.0), [r(3, 4)]),
    "Transformer": Spec(
        lambda: nn.Transformer(
            8, 2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16, dropout=0.0, batch_first=True
        ),
        [r(2, 5, 8), r(2, 4, 8)],
    ),
    "TransformerDecoder": Spec(lambda: nn.TransformerDecoder(decoder_layer(), 2), [r(2, 4, 8), r(2, 5, 8)]),
    "TransformerDecoderLayer": Spec(decoder_layer, [r(2, 4, 8), r(2, 5, 8)]),
    "TransformerEncoder": Spec(
        lambda: nn.TransformerEncoder(encoder_layer(), 2, enable_nested_tensor=False), [r(2, 5, 8)]
    ),
    "TransformerEncoderLayer": Spec(encoder_layer, [r(2, 5, 8)]),
    "TripletMarginLoss": Spec(lambda: nn.TripletMarginLoss(), [r(4, 5), r(4, 5), r(4, 5)]),
    "TripletMarginWithDistanceLoss": Spec(lambda: nn.TripletMarginWithDistanceLoss(), [r(4, 5), r(4, 5), r(4, 5)]),
    "Unflatten": Spec(lambda: nn.Unflatten(1, (2, 3)), [r(2, 6)]),
    "Unfold": Spec(lambda: nn.Unfold(kernel_size=2), [r(2, 3, 4, 4)]),
    "Upsample": Spec(lambda: nn.Upsample(scale_factor=2, mode="bilinear"), [r(1, 2, 3, 3)]),
    "UpsamplingBilinear2d": Spec(lambda: nn.UpsamplingBilinear2d(scale_factor=2), [r(1, 2, 3, 3)]),
    "UpsamplingNearest2d": Spec(lambda: nn.UpsamplingNearest2d(scale_factor=2), [r(1, 2, 3, 3)]),
    "ZeroPad1d": Spec(lambda: nn.ZeroPad1d(2), [r(2, 3, 5)]),
    "ZeroPad2d": Spec(lambda: nn.ZeroPad2d((1, 2, 0, 1)), [r(2, 3, 4, 4)]),
    "ZeroPad3d": Spec(lambda: nn.ZeroPad3d(1), [r(1, 2, 3, 3, 3)]),
}

# Not runnable as such, on any device: containers and abstract bases, and a
# wrapper that only replicates over CUDA devices.
NOT_APPLICABLE = {
    "Container": "deprecated container: no computation of its own",
    "Module": "the base class",
    "ModuleDict": "container",
    "ModuleList": "container",
    "ParameterDict": "container",
    "ParameterList": "container",
    "Sequential": "container (its members are covered one by one)",
    "RNNBase": "abstract base of RNN, LSTM, GRU",
    "RNNCellBase": "abstract base of RNNCell, LSTMCell, GRUCell",
    "DataParallel": "replicates over CUDA devices only",
}


def module_names() -> list[str]:
    return sorted(n for n in dir(nn) if isinstance(getattr(nn, n), type) and issubclass(getattr(nn, n), nn.Module))


def cannot_run() -> dict[str, str]:
    """The README's list: module -> reason."""
    text = README.read_text()
    section = text.split("### nn modules that cannot run on openreg", 1)[1].split("\n#", 1)[0]
    return dict(re.findall(r"^- `nn\.(\w+)`: (.+)$", section, flags=re.M))


def fallback_ops() -> dict[str, list[str]]:
    """The README's list: module -> the operators it runs through the CPU fallback."""
    text = README.read_text()
    section = text.split("### nn modules that reach the CPU fallback", 1)[1].split("\n#", 1)[0]
    return {
        name: re.findall(r"`aten::([\w.]+)`", ops)
        for name, ops in re.findall(r"^- `nn\.(\w+)`: (.+)$", section, flags=re.M)
    }


def test_every_nn_module_has_a_configuration():
    names = set(module_names())
    assert names - set(SPECS) - set(NOT_APPLICABLE) == set()
    assert set(SPECS) - names == set() and set(NOT_APPLICABLE) - names == set()
    assert set(cannot_run()) <= set(SPECS) and set(fallback_ops()) <= set(SPECS)


def flatten(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flatten(v)]
    return []


def build_inputs(spec: Spec) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [make(g) for make in spec.inputs]


def run(
    module: nn.Module,
    inputs: list[torch.Tensor],
    grad_indices: tuple[int, ...],
    device: str,
    upstream: list[torch.Tensor] | None,
):
    leaves = [t.to(device, copy=True) for t in inputs]
    for i in grad_indices:
        leaves[i].requires_grad_()
    outputs = [o for o in flatten(module(*leaves)) if o.is_floating_point()]
    if upstream is None:
        return outputs, None
    differentiable = [(o, u) for o, u in zip(outputs, upstream) if o.requires_grad]
    torch.autograd.backward([o for o, _ in differentiable], [u.to(device) for _, u in differentiable])
    grads = {f"input{i}": leaves[i].grad for i in grad_indices}
    grads.update({name: p.grad for name, p in module.named_parameters()})
    return outputs, grads


def check_module(name: str) -> list[str]:
    """Compares the module on openreg with CPU; returns the operators it ran through the CPU fallback."""
    spec = SPECS[name]
    torch.manual_seed(0)
    cpu_module = spec.make()
    inputs = build_inputs(spec)
    grad_indices = (
        spec.grad if spec.grad is not None else tuple(i for i, t in enumerate(inputs) if t.is_floating_point())
    )
    if name.startswith("Lazy"):
        with torch.no_grad():
            cpu_module(*inputs)  # materialize the parameters once, then copy them
    if spec.eval:
        cpu_module.eval()
    device_module = copy.deepcopy(cpu_module).to("openreg")
    torch_openreg._C._reset_fallback_counts()

    probe = copy.deepcopy(cpu_module)
    reference, _ = run(probe, inputs, grad_indices, "cpu", None)
    g = torch.Generator().manual_seed(1)
    upstream = [torch.randn(o.shape, generator=g) for o in reference]
    expected, expected_grads = run(cpu_module, inputs, grad_indices, "cpu", upstream)
    actual, actual_grads = run(device_module, inputs, grad_indices, "openreg", upstream)

    tol = spec.tol or dict(rtol=1e-4, atol=1e-5)
    assert len(actual) == len(expected) > 0
    for a, e in zip(actual, expected):
        assert a.device.type == "openreg"
        torch.testing.assert_close(a.cpu(), e, **tol)
    assert expected_grads.keys() == actual_grads.keys()
    for key, grad in expected_grads.items():
        if grad is None:
            assert actual_grads[key] is None, key
            continue
        torch.testing.assert_close(actual_grads[key].cpu(), grad, **tol, msg=lambda m: f"{key}: {m}")
    cpu_buffers = dict(cpu_module.named_buffers())
    for key, buffer in device_module.named_buffers():
        torch.testing.assert_close(buffer.cpu(), cpu_buffers[key], **tol, msg=lambda m: f"buffer {key}: {m}")
    return sorted(op.removeprefix("aten::") for op in torch_openreg._C._fallback_counts())


@pytest.mark.parametrize("name", sorted(SPECS))
def test_module_matches_cpu_forward_and_backward(name: str):
    reason = cannot_run().get(name)
    if reason is None:
        assert check_module(name) == sorted(fallback_ops().get(name, [])), (
            "the README's list of modules that reach the CPU fallback is out of date"
        )
        return
    # Listed as unable to run: it must still fail, or the README list is stale.
    with pytest.raises(Exception):  # noqa: B017 (any failure keeps it on the list)
        check_module(name)


@pytest.mark.parametrize(
    "name",
    [
        "BatchNorm2d",
        "MaxPool2d",
        "ReLU6",
        "Hardswish",
        "PReLU",
        "ReplicationPad2d",
        "Upsample",
        "AdaptiveMaxPool2d",
        "SmoothL1Loss",
    ],
)
def test_modules_on_device_kernels_stay_on_the_device_when_profiled(name):
    """No host round trip (a fallback's copies) in a forward and backward; every kernel linked to one op."""
    spec = SPECS[name]
    module = spec.make().to("openreg")
    inputs = [t.to("openreg") for t in build_inputs(spec)]
    grad_indices = (
        spec.grad if spec.grad is not None else tuple(i for i, t in enumerate(inputs) if t.is_floating_point())
    )
    for i in grad_indices:
        inputs[i].requires_grad_()

    def step():
        flatten(module(*inputs))[0].sum().backward()

    step()
    torch.openreg.synchronize()
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
    ) as prof:
        step()
        torch.openreg.synchronize()
    events = prof.events()
    device = [
        e for e in events if e.device_type == torch.autograd.DeviceType.PrivateUse1 and e.activity_type != "cuda_sync"
    ]
    assert device and not [e.name for e in device if e.name.startswith("Memcpy")]
    linked = [k.name for e in events if e.device_type != torch.autograd.DeviceType.PrivateUse1 for k in e.kernels]
    assert sorted(linked) == sorted(e.name for e in device)


@pytest.mark.parametrize("reduction", ["none", "sum"])
@pytest.mark.parametrize("loss", [nn.HuberLoss, nn.BCELoss, nn.SmoothL1Loss], ids=lambda c: c.__name__)
def test_losses_match_cpu_with_and_without_reduction(loss, reduction, fallback_counts):
    g = torch.Generator().manual_seed(6)
    x, target = torch.rand(4, 5, generator=g) * 0.8 + 0.1, torch.rand(4, 5, generator=g)
    expected_x = x.clone().requires_grad_()
    expected = loss(reduction=reduction)(expected_x, target)
    expected.backward(torch.ones_like(expected) * 0.5)
    actual_x = x.to("openreg").requires_grad_()
    actual = loss(reduction=reduction)(actual_x, target.to("openreg"))
    actual.backward(torch.ones_like(actual) * 0.5)
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected)
    torch.testing.assert_close(actual_x.grad.cpu(), expected_x.grad)
    assert fallback_counts() == {}


def test_batch_norm_keeps_channels_last_as_cpu_does():
    x = torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last)
    cpu = nn.BatchNorm2d(3)
    device = copy.deepcopy(cpu).to("openreg")
    xc, xd = x.clone().requires_grad_(), x.to("openreg").requires_grad_()
    expected, actual = cpu(xc), device(xd)
    assert actual.stride() == expected.stride()
    grad = torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last)
    expected.backward(grad)
    actual.backward(grad.to("openreg"))
    assert xd.grad.stride() == xc.grad.stride()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_per_pixel_cross_entropy_matches_cpu(reduction, fallback_counts):
    """Segmentation's loss: cross-entropy over [N, C, H, W] (nll_loss2d), with an ignored label."""
    g = torch.Generator().manual_seed(7)
    logits = torch.randn(2, 4, 3, 5, generator=g)
    target = torch.randint(0, 4, (2, 3, 5), generator=g)
    target[0, 0, :2] = -1
    expected_logits = logits.clone().requires_grad_()
    expected = F.cross_entropy(expected_logits, target, ignore_index=-1, reduction=reduction)
    expected.sum().backward()
    actual_logits = logits.to("openreg").requires_grad_()
    actual = F.cross_entropy(actual_logits, target.to("openreg"), ignore_index=-1, reduction=reduction)
    actual.sum().backward()
    torch.testing.assert_close(actual.cpu(), expected)
    torch.testing.assert_close(actual_logits.grad.cpu(), expected_logits.grad)
    assert fallback_counts() == {}


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool3d_matches_cpu(ceil_mode, fallback_counts):
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 3, 5, 6, 7, generator=g)
    expected_x, actual_x = x.clone().requires_grad_(), x.to("openreg").requires_grad_()
    expected = F.max_pool3d(expected_x, (2, 3, 2), stride=(2, 2, 3), padding=(1, 0, 1), ceil_mode=ceil_mode)
    actual = F.max_pool3d(actual_x, (2, 3, 2), stride=(2, 2, 3), padding=(1, 0, 1), ceil_mode=ceil_mode)
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected)
    expected.sum().backward()
    actual.sum().backward()
    torch.testing.assert_close(actual_x.grad.cpu(), expected_x.grad)
    assert fallback_counts() == {}


@pytest.mark.parametrize("reduction", ["none", "sum"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "single"])
def test_margin_losses_match_cpu(reduction, batched, fallback_counts):
    g = torch.Generator().manual_seed(9)
    x = torch.randn(3, 4, generator=g)
    labels = torch.tensor([1, 0, 3])
    multilabel = torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3], [1, -1, 0, 0]])
    if not batched:
        x, labels, multilabel = x[0], labels[:1], multilabel[0]
    for loss, target in (
        (nn.MultiMarginLoss(reduction=reduction), labels),
        (nn.MultiLabelMarginLoss(reduction=reduction), multilabel),
    ):
        expected_x, actual_x = x.clone().requires_grad_(), x.to("openreg").requires_grad_()
        expected, actual = loss(expected_x, target), loss(actual_x, target.to("openreg"))
        assert actual.shape == expected.shape
        torch.testing.assert_close(actual.cpu(), expected)
        expected.sum().backward()
        actual.sum().backward()
        torch.testing.assert_close(actual_x.grad.cpu(), expected_x.grad)
    assert fallback_counts() == {}


if __name__ == "__main__":
    # Prints the README's list of modules that reach the CPU fallback, as this test measures it:
    #     python tests/backend/test_nn_coverage.py
    import warnings

    warnings.simplefilter("ignore")
    for module_name in sorted(SPECS):
        if module_name in cannot_run():
            continue
        ops = check_module(module_name)
        if ops:
            print(f"- `nn.{module_name}`: " + ", ".join(f"`aten::{op}`" for op in ops))
