"""Choosing the next token from logits: temperature, top-k, nucleus (top-p), repetition penalty.

Shared by `GPT.generate`, sample.py and training-time samples, so every path samples alike.
"""

from __future__ import annotations

import torch


def check_sampling_args(temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                        repetition_penalty: float = 1.0) -> None:
    """Raise ValueError naming the first bad value (checked once, before any work)."""
    if not temperature >= 0:  # also catches NaN
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1 (or None to disable), got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] (or None to disable), got {top_p}")
    if not repetition_penalty > 0:
        raise ValueError(f"repetition_penalty must be > 0 (1 = off), got {repetition_penalty}")


def apply_repetition_penalty(logits: torch.Tensor, previous: torch.Tensor, penalty: float) -> torch.Tensor:
    """Make already-seen tokens less likely (CTRL, Keskar et al. 2019, section 4.1):
    positive logits are divided by `penalty`, negative ones multiplied.
    logits: (B, V); previous: (B, T) token ids already in each sequence."""
    if penalty == 1.0:
        return logits
    seen = torch.gather(logits, 1, previous)
    seen = torch.where(seen > 0, seen / penalty, seen * penalty)
    return logits.scatter(1, previous, seen)


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """Set logits outside the top-k and outside the nucleus (top-p) to -inf. logits: (B, V)."""
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        # Nucleus sampling (Holtzman et al. 2019): the smallest set of tokens whose probability
        # reaches top_p. A token is dropped when the mass *before* it already reaches top_p,
        # so the most likely token always survives.
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        mass_before = torch.cumsum(probs, dim=-1) - probs
        drop_sorted = mass_before >= top_p
        drop = drop_sorted.scatter(1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sample_next_token(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None,
                      previous: torch.Tensor | None = None, repetition_penalty: float = 1.0) -> torch.Tensor:
    """Pick one token per row. logits: (B, V) -> (B, 1) int64. temperature 0 is greedy (argmax).

    Non-finite logits raise instead of producing a garbage token."""
    if not torch.isfinite(logits).all():
        raise FloatingPointError("the model produced non-finite logits (NaN or inf); refusing to sample")
    logits = logits.float()
    if previous is not None:
        logits = apply_repetition_penalty(logits, previous, repetition_penalty)
    if temperature == 0:
        return torch.argmax(logits, dim=-1, keepdim=True)
    logits = filter_logits(logits / temperature, top_k, top_p)
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)
