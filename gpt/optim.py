"""AdamW with weight decay on matrices only, and the learning-rate schedule as a pure function."""

from __future__ import annotations

import math

import torch


def lr_at(step: int, learning_rate: float, min_lr: float, warmup_iters: int, decay_iters: int) -> float:
    """Linear warmup to `learning_rate`, then cosine decay to `min_lr` at `decay_iters`, then flat.
    A pure function of the step, so a resumed run follows exactly the same schedule."""
    if step < warmup_iters:
        return learning_rate * (step + 1) / (warmup_iters + 1)
    if step >= decay_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (learning_rate - min_lr)


def make_optimizer(model: torch.nn.Module, learning_rate: float, weight_decay: float,
                   betas: tuple[float, float], device_type: str) -> torch.optim.AdamW:
    """AdamW over the trainable parameters. Matrices (linear weights, embeddings) decay; biases and
    LayerNorm gains do not: decaying them only hurts (as GPT-2 / nanoGPT). The fused kernel
    (one pass over all parameters) on CUDA and CPU: on a 2-core CPU it halves the optimizer step."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=device_type in ("cuda", "cpu"))
