"""A small GPT-style language model, written with stock torch.nn so every op is an ordinary ATen op."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class GPTConfig:
    vocabulary: int
    context: int
    width: int
    layers: int
    heads: int
    batch_size: int
    dropout: float = 0.1
    tied_head: bool = True  # the LM head reuses the token embedding, as in GPT-2


# name -> (context, width, layers, heads, batch size)
SIZES: dict[str, tuple[int, int, int, int, int]] = {
    "tiny": (16, 32, 1, 2, 4),
    "small": (32, 64, 2, 4, 8),
    "medium": (64, 128, 4, 4, 16),
}


def config_for(size: str, vocabulary: int) -> GPTConfig:
    context, width, layers, heads, batch_size = SIZES[size]
    return GPTConfig(
        vocabulary=vocabulary, context=context, width=width, layers=layers, heads=heads, batch_size=batch_size
    )


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        if config.width % config.heads:
            raise ValueError(f"width {config.width} is not a multiple of {config.heads} heads")
        self.heads = config.heads
        self.dropout = config.dropout
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.proj = nn.Linear(config.width, config.width)
        self.proj_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, time, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        return self.proj_dropout(self.proj(y.transpose(1, 2).reshape(batch, time, width)))


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.width)
        self.attention = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.width)
        self.mlp = nn.Sequential(
            nn.Linear(config.width, 4 * config.width),
            nn.GELU(),
            nn.Linear(4 * config.width, config.width),
            nn.Dropout(config.dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tokens = nn.Embedding(config.vocabulary, config.width)
        self.positions = nn.Embedding(config.context, config.width)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.ln = nn.LayerNorm(config.width)
        self.head = nn.Linear(config.width, config.vocabulary, bias=False)
        if config.tied_head:
            self.head.weight = self.tokens.weight
        self.apply(self._initialise)

    @staticmethod
    def _initialise(module: nn.Module) -> None:
        # GPT-2's scale: with torch's unit-variance embeddings a tied head starts with huge logits.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The mean cross-entropy of predicting each next token."""
        positions = torch.arange(inputs.shape[1], device=inputs.device)
        x = self.dropout(self.tokens(inputs) + self.positions(positions))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())  # tied weights count once
