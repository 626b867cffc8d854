"""Training data for the demo: a short embedded text, read one character at a time.

No downloads: the text is part of the package. Batches are drawn on the host,
staged in pinned memory and copied to the device on a separate copy stream one
step ahead, while the device computes, so the trace shows host-to-device copies
overlapping the compute stream, as a real input pipeline would.
"""

from __future__ import annotations

import torch

TEXT = """\
A kernel is launched on a stream and the host moves on at once. The device runs the work in order,
one stream at a time, and stamps every kernel with its own clock. When the profiler stops, the plugin
joins each kernel to the operator that launched it, maps the device clock onto the host clock, and
draws an arrow from the launch to the work. The trace then answers plain questions: which operator
launched which kernel, where the device sat idle while the host was busy, and which operator filled
the memory. A small model learns to spell these sentences one character at a time. It embeds each
character and its position, mixes them with causal attention and a small feed-forward layer, and
predicts the next character. The optimizer updates every weight after each step. Nothing here is
fast, and nothing needs to be: the point is to see where the time goes, on the host and on the device,
and to check that the picture is true.
"""


class CharacterVocabulary:
    def __init__(self, text: str):
        self.symbols = sorted(set(text))
        self._index = {s: i for i, s in enumerate(self.symbols)}

    def __len__(self) -> int:
        return len(self.symbols)

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor([self._index[s] for s in text], dtype=torch.long)


class DeviceBatches:
    """Batches drawn on the host, staged in pinned memory and copied to the device on a copy stream.

    ``prefetch()`` draws the next batch and starts its copy; a training step
    calls it once the device has work queued (after the backward is launched),
    so drawing and copying hide behind the device's compute instead of opening
    each step. ``next()`` hands over the prefetched batch (drawing one at once
    when none was prefetched), ready for the current stream.
    """

    def __init__(self, device: torch.device):
        self._device = device
        self._copy_stream = torch.Stream(device=device)
        self._pending: tuple[torch.Tensor, ...] | None = None

    def draw(self) -> tuple[torch.Tensor, ...]:
        """One batch on the host."""
        raise NotImplementedError

    def prefetch(self) -> None:
        """Draws the next batch and starts its copy, unless one is already on its way."""
        if self._pending is not None:
            return
        # The pinned allocator keeps each buffer until the copy stream is past its copy.
        staged = [tensor.pin_memory() for tensor in self.draw()]
        with self._copy_stream:
            self._pending = tuple(tensor.to(self._device, non_blocking=True) for tensor in staged)

    def _take(self) -> tuple[torch.Tensor, ...]:
        self.prefetch()
        compute_stream = torch.accelerator.current_stream(self._device)
        compute_stream.wait_stream(self._copy_stream)
        batch, self._pending = self._pending, None
        # Allocated on the copy stream, used on the compute stream: keep the
        # allocator from reusing them until the compute stream is done with them.
        for tensor in batch:
            tensor.record_stream(compute_stream)
        return batch


class PrefetchingBatches(DeviceBatches):
    """Random windows of the text: (inputs, targets), the targets one character ahead."""

    def __init__(self, tokens: torch.Tensor, batch_size: int, context: int, device: torch.device, seed: int):
        if tokens.numel() <= context + 1:
            raise ValueError(f"the text has {tokens.numel()} tokens, too few for a context of {context}")
        super().__init__(device)
        self._tokens = tokens
        self._batch_size = batch_size
        self._window = torch.arange(context + 1)
        self._generator = torch.Generator().manual_seed(seed)

    def draw(self) -> tuple[torch.Tensor]:
        starts = torch.randint(
            0, self._tokens.numel() - self._window.numel(), (self._batch_size, 1), generator=self._generator
        )
        return (self._tokens[starts + self._window],)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, targets) on the device, ready for the current stream."""
        (windows,) = self._take()
        return windows[:, :-1], windows[:, 1:]
