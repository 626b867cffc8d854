"""A few training steps of a small GPT-style transformer give the same losses on openreg as on CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, WIDTH, HEADS, LAYERS, CONTEXT = 48, 32, 4, 2, 16


class Block(nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.ln1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.ln2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(
            nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH), nn.Dropout(dropout)
        )
        self.dropout = dropout

    def forward(self, x):
        batch, time, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, time, HEADS, width // HEADS).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        x = x + self.proj(y.transpose(1, 2).reshape(batch, time, width))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, dropout: float = 0.0):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, WIDTH)
        self.positions = nn.Embedding(CONTEXT, WIDTH)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(dropout) for _ in range(LAYERS))
        self.ln = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.tokens.weight  # tied, as in GPT-2

    def forward(self, idx, targets):
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tokens(idx) + self.positions(positions))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def train(device: str, optimizer: str, steps: int = 4, dropout: float = 0.0, seed: int = 0) -> list[float]:
    torch.manual_seed(seed)
    model = TinyGPT(dropout).to(device)
    if optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, foreach=True)
    elif optimizer == "adamw_fused":
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, fused=True)
    elif optimizer == "sgd_fused":
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, fused=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, foreach=True)
    data = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        batch = torch.randint(0, VOCAB, (4, CONTEXT + 1), generator=data)
        loss = model(batch[:, :-1].to(device), batch[:, 1:].to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("optimizer", ["adamw", "sgd", "adamw_fused", "sgd_fused"])
def test_losses_match_cpu(optimizer, fallback_counts):
    on_device = train("openreg", optimizer)
    assert fallback_counts() == {}, "a training step left the device"
    on_cpu = train("cpu", optimizer)
    assert on_device[-1] < on_device[0]
    torch.testing.assert_close(on_device, on_cpu, rtol=1e-5, atol=1e-5)


def test_training_with_dropout_is_deterministic_under_manual_seed(fallback_counts):
    first = train("openreg", "adamw", dropout=0.1)
    second = train("openreg", "adamw", dropout=0.1)
    assert first == second
    assert train("openreg", "adamw", dropout=0.1, seed=5) != first
    assert fallback_counts() == {}


def test_parameters_and_optimizer_state_stay_on_device():
    torch.manual_seed(0)
    model = TinyGPT().to("openreg")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = torch.randint(0, VOCAB, (2, CONTEXT + 1), device="openreg")
    model(batch[:, :-1], batch[:, 1:]).backward()
    opt.step()
    for state in opt.state.values():
        assert state["exp_avg"].is_openreg and state["exp_avg_sq"].is_openreg
    assert all(p.grad.is_openreg for p in model.parameters())


def test_autocast_and_grad_scaler_step_on_device(fallback_counts):
    torch.manual_seed(0)
    model = TinyGPT().to("openreg")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("openreg")
    batch = torch.randint(0, VOCAB, (2, CONTEXT + 1), device="openreg")
    losses = []
    for _ in range(3):
        with torch.autocast(device_type="openreg", dtype=torch.bfloat16):
            loss = model(batch[:, :-1], batch[:, 1:])
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        losses.append(loss.item())
    assert scaler.get_scale() == 65536.0  # finite gradients: no backoff
    assert losses[-1] < losses[0]
    assert fallback_counts() == {}


def logits_of(model: TinyGPT, idx: torch.Tensor) -> torch.Tensor:
    positions = torch.arange(idx.shape[1], device=idx.device)
    x = model.drop(model.tokens(idx) + model.positions(positions))
    for block in model.blocks:
        x = block(x)
    return model.head(model.ln(x))


def generate(model: TinyGPT, prompt: torch.Tensor, steps: int, sample: bool, eos: int = 3) -> torch.Tensor:
    """What a generate() loop calls per token: a repetition penalty (gather,
    scatter), temperature, top-k and top-p filtering (topk, sort, softmax,
    cumsum, scatter, masked_fill), greedy or multinomial choice, end-of-sequence
    bookkeeping (isin, ne, mul, any), and the growing sequence (cat)."""
    device = prompt.device
    idx = prompt
    unfinished = torch.ones(prompt.shape[0], dtype=torch.long, device=device)
    eos_ids = torch.tensor([eos], device=device)
    for _ in range(steps):
        scores = logits_of(model, idx[:, -CONTEXT:])[:, -1, :]
        seen = torch.gather(scores, 1, idx)
        seen = torch.where(seen < 0, seen * 1.3, seen / 1.3)
        scores = scores.scatter(1, idx, seen) / 0.8
        kth = torch.topk(scores, 10)[0][..., -1, None]
        scores = scores.masked_fill(scores < kth, -float("inf"))
        sorted_logits, sorted_idx = torch.sort(scores, descending=False)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= 1 - 0.9
        remove[..., -1:] = 0
        scores = scores.masked_fill(remove.scatter(1, sorted_idx, remove), -float("inf"))
        if sample:
            token = torch.multinomial(F.softmax(scores, dim=-1), num_samples=1).squeeze(1)
        else:
            token = torch.argmax(scores, dim=-1)
        token = token * unfinished + 0 * (1 - unfinished)
        idx = torch.cat([idx, token[:, None]], dim=-1)
        unfinished = unfinished & ~torch.isin(token, eos_ids)
        if unfinished.max() == 0:
            break
    return idx


def test_generation_stays_on_device_and_matches_cpu(fallback_counts):
    torch.manual_seed(0)
    model = TinyGPT().eval()
    prompt = torch.tensor([[5, 6, 7], [9, 8, 1]])
    with torch.no_grad():
        expected = generate(model, prompt, steps=8, sample=False)
        model.to("openreg")
        got = generate(model, prompt.to("openreg"), steps=8, sample=False)
        sampled = generate(model, prompt.to("openreg"), steps=8, sample=True)
    assert fallback_counts() == {}, "a generation step left the device"
    assert torch.equal(got.cpu(), expected)
    assert sampled.shape[0] == 2 and sampled.is_openreg
