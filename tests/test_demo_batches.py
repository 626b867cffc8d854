"""The demo's batch sources: one batch ahead on a copy stream, in the order they were drawn."""

from __future__ import annotations

import torch

import torch_openreg  # noqa: F401
from torch_openreg.demo.data import TEXT, CharacterVocabulary, PrefetchingBatches
from torch_openreg.demo.resnet import ResNetConfig, SyntheticImages

DEVICE = torch.device("openreg")


def _text_batches(seed: int) -> PrefetchingBatches:
    return PrefetchingBatches(CharacterVocabulary(TEXT).encode(TEXT), 4, 16, DEVICE, seed)


def test_prefetched_batches_come_in_the_order_drawn_and_none_is_skipped():
    reference = _text_batches(3)
    drawn = [reference.draw()[0] for _ in range(4)]
    batches = _text_batches(3)
    got = [batches.next()]  # nothing prefetched: drawn at once
    batches.prefetch()
    batches.prefetch()  # already on its way: draws nothing more
    got.append(batches.next())
    batches.prefetch()
    got.append(batches.next())
    got.append(batches.next())
    for (inputs, targets), windows in zip(got, drawn, strict=True):
        assert inputs.device.type == "openreg"
        torch.testing.assert_close(inputs.cpu(), windows[:, :-1], rtol=0, atol=0)
        torch.testing.assert_close(targets.cpu(), windows[:, 1:], rtol=0, atol=0)


def test_a_prefetched_batch_is_copied_on_the_copy_stream_and_ready_on_the_current_one():
    config = ResNetConfig(width=8, image=16, classes=3, batch_size=2)
    reference = SyntheticImages(config, DEVICE, seed=5)
    expected = [reference.draw() for _ in range(2)]
    batches = SyntheticImages(config, DEVICE, seed=5)
    batches.next()
    side = torch.Stream(device=DEVICE)
    with side:  # a step on another stream: the batch must be ready there, not only on the default one
        batches.prefetch()
        images, labels = batches.next()
        torch.testing.assert_close(images.cpu(), expected[1][0], rtol=0, atol=0)
        torch.testing.assert_close(labels.cpu(), expected[1][1], rtol=0, atol=0)
    assert images.shape == (2, 3, 16, 16) and labels.dtype == torch.long
