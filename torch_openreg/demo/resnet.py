"""A ResNet-18-shaped image classifier and synthetic images for ``demo --model resnet``.

The network has ResNet-18's layout (a 7x7 stride-2 stem with max pooling,
four stages of two basic blocks with 3x3 convolutions, batch norm and ReLU,
1x1 stride-2 projections where the shape changes, global average pooling and
a linear classifier), with the widths scaled down so that it trains quickly on
a simulated device. No weights or data are downloaded: the images are drawn
on the host from one fixed random pattern per class plus noise (half the
pattern's scale), so the loss falls within a few steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_openreg.demo.data import DeviceBatches


@dataclass(frozen=True)
class ResNetConfig:
    width: int  # channels of the first stage (ResNet-18: 64)
    image: int  # side of the square input images
    classes: int
    batch_size: int
    blocks: tuple[int, ...] = (2, 2, 2, 2)  # ResNet-18


# name -> (width, image side, classes, batch size)
SIZES: dict[str, tuple[int, int, int, int]] = {
    "tiny": (8, 32, 10, 4),
    "small": (16, 32, 10, 8),
    "medium": (32, 64, 10, 16),
}


def config_for(size: str) -> ResNetConfig:
    width, image, classes, batch_size = SIZES[size]
    return ResNetConfig(width=width, image=image, classes=classes, batch_size=batch_size)


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False), nn.BatchNorm2d(channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, config: ResNetConfig):
        super().__init__()
        self.config = config
        width = config.width
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages = []
        in_channels = width
        for index, count in enumerate(config.blocks):
            channels = width * 2**index
            for block in range(count):
                stages.append(BasicBlock(in_channels, channels, stride=2 if block == 0 and index > 0 else 1))
                in_channels = channels
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(in_channels, config.classes)

    def forward(self, images: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The mean cross-entropy of classifying `images`."""
        x = self.stages(self.stem(images))
        logits = self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        return F.cross_entropy(logits, targets)

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def convolution_count(self) -> int:
        return sum(isinstance(m, nn.Conv2d) for m in self.modules())


class SyntheticImages(DeviceBatches):
    """Labelled images drawn on the host: (images [B, 3, H, W], labels [B])."""

    def __init__(self, config: ResNetConfig, device: torch.device, seed: int):
        super().__init__(device)
        self._generator = torch.Generator().manual_seed(seed)
        self._patterns = torch.randn(config.classes, 3, config.image, config.image, generator=self._generator)
        self._batch_size = config.batch_size

    def draw(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One host batch: (images [B, 3, H, W], labels [B])."""
        labels = torch.randint(0, self._patterns.shape[0], (self._batch_size,), generator=self._generator)
        noise = torch.randn((self._batch_size, *self._patterns.shape[1:]), generator=self._generator)
        return self._patterns[labels] + 0.5 * noise, labels

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(images, labels) on the device, ready for the current stream."""
        images, labels = self._take()
        return images, labels
