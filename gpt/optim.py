"""Optimizers (AdamW, or Muon + AdamW) and the learning-rate schedules, each a pure function of the step."""

from __future__ import annotations

import math

import torch

LR_SCHEDULES = ("cosine", "noam", "wsd", "constant")
OPTIMIZERS = ("adamw", "muon")


def lr_at(step: int, learning_rate: float, min_lr: float, warmup_iters: int, decay_iters: int,
          schedule: str = "cosine", decay_fraction: float = 0.2) -> float:
    """The learning rate at `step`. Every schedule warms up linearly to `learning_rate` at
    `warmup_iters`, then:
      cosine    cosine decay to `min_lr` at `decay_iters`, then flat
      noam      inverse square root, as the Transformer paper (Vaswani et al. 2017, section 5.3):
                lr = d^-0.5 · min(s^-0.5, s · w^-1.5), scaled so its peak (s = w) is `learning_rate`
                and counted from s = step + 1, w = warmup_iters + 1; no floor, no end
      wsd       warmup-stable-decay (Hu et al. 2024, MiniCPM): flat at `learning_rate`, then a linear
                decay to `min_lr` over the last `decay_fraction` of `decay_iters`, then flat
      constant  flat at `learning_rate`
    A pure function of the step, so a resumed run follows exactly the same schedule."""
    if schedule == "noam":
        s, w = step + 1, warmup_iters + 1
        return learning_rate * min(s / w, math.sqrt(w / s))
    if step < warmup_iters:
        return learning_rate * (step + 1) / (warmup_iters + 1)
    if schedule == "constant":
        return learning_rate
    if step >= decay_iters:
        return min_lr
    if schedule == "wsd":
        decay_start = max(warmup_iters, decay_iters - round(decay_fraction * decay_iters))
        if step < decay_start:
            return learning_rate
        progress = (step - decay_start) / max(1, decay_iters - decay_start)
        return min_lr + (1.0 - progress) * (learning_rate - min_lr)
    if schedule != "cosine":
        raise ValueError(f"unknown lr_schedule {schedule!r}; choose one of {', '.join(LR_SCHEDULES)}")
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (learning_rate - min_lr)


def set_lr(optimizer, lr: float) -> None:
    """Set the scheduled learning rate: each group gets `lr` times its `lr_scale` (Muon's groups
    run at muon_learning_rate / learning_rate times the AdamW rate, so both follow one schedule)."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)


def load_state_under_these_settings(optimizer, state: dict) -> None:
    """Load a saved optimizer state (its moments and step counts) under this run's settings: torch's
    load_state_dict also puts back each group's saved weight_decay, betas and Muon's lr_scale, so a
    resume's --weight_decay, --beta1, --beta2 and --muon_learning_rate were recorded in its config and
    ignored, and a new --learning_rate moved Muon's rate by the saved ratio (hunt 29-a). The settings
    are static: unchanged, the resume stays bit for bit the uninterrupted run. Each group's `lr` stays
    the saved one, the scheduled rate in effect then.

    The settings go into the saved groups before torch loads them, because torch places each step
    count by the groups it loads: on the parameter's device for a fused or capturable group, where
    it was saved otherwise. Put on afterwards, a fused=True (CUDA) held the CPU step counts of a
    state saved without it (MPS), for a kernel that reads them on the GPU (hunt 30-a F1)."""

    def under_ours(opt: torch.optim.Optimizer, saved: dict) -> dict:
        if not isinstance(saved, dict) or not isinstance(saved.get("param_groups"), list):
            return saved  # (torch's load says what is wrong with it)
        # (but the rate in effect when it was saved: set by the schedule before every step, it is what a
        # save before the first step records, as the uninterrupted run's does: hunt 31-c F4)
        groups = [{**old, **{k: v for k, v in group.items() if k not in ("params", "lr")}} if isinstance(old, dict) else old
                  for old, group in zip(saved["param_groups"], opt.param_groups)]
        return {**saved, "param_groups": groups + saved["param_groups"][len(groups):]}  # (a count that differs is refused)

    if isinstance(optimizer, Optimizers):
        parts = state.get("optimizers") if isinstance(state, dict) else None
        if isinstance(parts, list):
            state = {**state, "optimizers": [under_ours(opt, s) for opt, s in zip(optimizer.optimizers, parts)]
                     + parts[len(optimizer.optimizers):]}
    else:
        state = under_ours(optimizer, state)
    optimizer.load_state_dict(state)


def adamw(params: list[torch.nn.Parameter], learning_rate: float, weight_decay: float,
          betas: tuple[float, float], device_type: str) -> torch.optim.AdamW:
    """AdamW over `params`. Matrices (linear weights, embeddings) decay; biases and LayerNorm
    gains do not: decaying them only hurts (as GPT-2 / nanoGPT). The fused kernel (one pass over
    all parameters) on CUDA and CPU: on a 2-core CPU it halves the optimizer step."""
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=device_type in ("cuda", "cpu"))


def muon_params(model: torch.nn.Module) -> list[str]:
    """Names of the parameters Muon trains: the trainable 2-D weight matrices inside the blocks
    (attention and MLP projections). Embeddings, the (tied) LM head, gains and biases stay with
    AdamW, as Muon's authors prescribe (Jordan et al. 2024). LoRA adapters also stay with AdamW:
    their scale alpha / r and learning rates were set for Adam (Hu et al. 2021), and orthogonalising
    a rank-r factor on its own says nothing about the update B A it makes."""
    return [name for name, p in model.named_parameters()
            if p.requires_grad and p.dim() == 2 and name.startswith("transformer.h.")
            and not name.endswith((".lora_A", ".lora_B"))]


def make_optimizer(model: torch.nn.Module, learning_rate: float, weight_decay: float,
                   betas: tuple[float, float], device_type: str, optimizer: str = "adamw",
                   muon_learning_rate: float = 0.015):
    """'adamw': one AdamW over the trainable parameters. 'muon': Muon on `muon_params` (peak rate
    muon_learning_rate, Moonshot's RMS-matched scaling, weight decay weight_decay) and AdamW on
    the rest, in one `Optimizers` whose state_dict holds both."""
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer == "adamw":
        return adamw(params, learning_rate, weight_decay, betas, device_type)
    if optimizer != "muon":
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    named = dict(model.named_parameters())
    matrices = [named[n] for n in muon_params(model)]
    chosen = {id(p) for p in matrices}
    rest = [p for p in params if id(p) not in chosen]
    parts = [adamw(rest, learning_rate, weight_decay, betas, device_type)] if rest else []
    if matrices:
        muon = Muon(matrices, lr=muon_learning_rate, weight_decay=weight_decay, adjust_lr_fn="match_rms_adamw")
        muon.param_groups[0]["lr_scale"] = muon_learning_rate / learning_rate
        parts.append(muon)
    return Optimizers(parts)


class Optimizers:
    """Several optimizers stepped as one (what train.py and the GradScaler need of an optimizer):
    param_groups of all, step, zero_grad, and one state_dict holding each one's state."""

    def __init__(self, optimizers: list[torch.optim.Optimizer]):
        self.optimizers = optimizers

    @property
    def param_groups(self) -> list[dict]:
        return [g for opt in self.optimizers for g in opt.param_groups]

    def step(self) -> None:
        for opt in self.optimizers:
            opt.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return {"optimizers": [opt.state_dict() for opt in self.optimizers]}

    def load_state_dict(self, state: dict) -> None:
        saved = state.get("optimizers")
        if saved is None or len(saved) != len(self.optimizers):
            raise ValueError("the checkpoint's optimizer state does not fit this optimizer "
                             "(was it saved with a different --optimizer?)")
        for opt, s in zip(self.optimizers, saved):
            opt.load_state_dict(s)


def newton_schulz(G: torch.Tensor, steps: int, coefficients: tuple[float, float, float], eps: float) -> torch.Tensor:
    """Muon's orthogonalisation of a stack of same-shaped matrices at once: G (N, A, B) -> (N, A, B),
    the quintic Newton–Schulz iteration of torch.optim.Muon (Jordan et al. 2024), batched."""
    a, b, c = coefficients
    X = G
    tall = X.size(-2) > X.size(-1)
    if tall:
        X = X.mT  # (N, short, long): the Gram matrix X X^T is the smaller one
    X = X / X.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)  # spectral norm <= Frobenius norm <= 1
    for _ in range(steps):
        gram = X @ X.mT
        X = torch.baddbmm(X, torch.baddbmm(gram, gram, gram, beta=b, alpha=c), X, beta=a)
    return X.mT if tall else X


class Muon(torch.optim.Muon):
    """torch.optim.Muon (same hyperparameters, same state, same update) with one batched
    Newton–Schulz iteration per matrix shape, in float32 off CUDA.

    Why not torch's step: it orthogonalises each matrix alone, in bfloat16. On a CPU without
    native bf16 matmuls (this project's 2-core AVX2 machine) that took ~900 ms per step of the
    default 4-layer model against ~30 ms for the same iteration in float32 on stacks of
    same-shaped matrices (measured; the issue 11 notes). On CUDA it runs in bfloat16, as torch's."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        # 1.0 where the step must leave weights and momentum as they are, decided on the device (the
        # attribute through which torch's fused optimizers skip a step; see `step_unless`)
        found_inf = getattr(self, "found_inf", None)
        keep = None if found_inf is None else found_inf.bool()
        for group in self.param_groups:
            lr, wd, momentum = group["lr"], group["weight_decay"], group["momentum"]
            by_shape: dict[torch.Size, list] = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad)
                buf = state["momentum_buffer"]
                if keep is None:
                    buf.lerp_(p.grad, 1 - momentum)
                else:
                    buf.copy_(torch.where(keep, buf, buf.lerp(p.grad, 1 - momentum)))
                update = p.grad.lerp(buf, momentum) if group["nesterov"] else buf
                by_shape.setdefault(p.shape, []).append((p, update))
            for shape, items in by_shape.items():
                ns_dtype = torch.bfloat16 if items[0][0].device.type == "cuda" else torch.float32
                stack = torch.stack([u for _, u in items]).to(ns_dtype)
                ortho = newton_schulz(stack, group["ns_steps"], group["ns_coefficients"], group["eps"])
                adjusted_lr = lr * _lr_adjustment(group["adjust_lr_fn"], shape)
                for (p, _), o in zip(items, ortho):
                    if keep is None:
                        p.mul_(1 - lr * wd)  # decoupled weight decay, as torch.optim.Muon
                        p.add_(o.to(p.dtype), alpha=-adjusted_lr)
                    else:  # the same arithmetic, kept only where the step is not skipped
                        p.copy_(torch.where(keep, p, torch.add(p * (1 - lr * wd), o.to(p.dtype), alpha=-adjusted_lr)))
        return loss


def skips_on_device(optimizer) -> bool:
    """Whether every part of `optimizer` can skip a step on the device (`step_unless`): fused
    AdamW and this module's Muon read the `found_inf` flag; foreach AdamW (MPS here) cannot."""
    parts = getattr(optimizer, "optimizers", [optimizer])
    return all(isinstance(o, Muon) or (isinstance(o, torch.optim.AdamW) and o.defaults.get("fused")) for o in parts)


def step_unless(optimizer, scaler: torch.amp.GradScaler, bad: torch.Tensor, on_device: bool | None = None) -> None:
    """scaler.step(optimizer), or nothing where `bad` (a 0-dim bool tensor: a non-finite loss or
    gradient) is true. on_device: decide on the device, without waiting for it, by handing each
    optimizer the `found_inf` flag through which it skips a step in place (torch's GradScaler hands
    the fused optimizers the same flag). On a GPU, a host sync per step leaves it idle while the
    host queues the next step (issue 9). Otherwise the flag is read first: free where the device
    is the host, a wait per step elsewhere. None: on the device on CUDA where every part can
    (`skips_on_device`) and no GradScaler runs. With one (fp16) the scaler hands a fused AdamW its
    own found_inf (an overflow), which `bad` (a non-finite loss) cannot join, so `bad` is read."""
    if on_device is None:
        on_device = bad.device.type == "cuda" and not scaler.is_enabled() and skips_on_device(optimizer)
    if not on_device:
        if not bad.item():
            scaler.step(optimizer)
        return
    if scaler.is_enabled():
        raise ValueError("a GradScaler sets found_inf itself: decide on the host (on_device=False)")
    parts = getattr(optimizer, "optimizers", [optimizer])
    flag = bad.float()
    for opt in parts:
        opt.found_inf = flag
    try:
        scaler.step(optimizer)
    finally:
        for opt in parts:
            del opt.found_inf


def _lr_adjustment(adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """torch.optim.Muon's per-shape learning-rate factor (see its docstring), A fan-out, B fan-in."""
    A, B = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return math.sqrt(max(1, A / B))
    if adjust_lr_fn == "match_rms_adamw":  # Liu et al. 2025, "Muon is Scalable for LLM Training"
        return 0.2 * math.sqrt(max(A, B))
    if adjust_lr_fn == "spectral_unclamped":
        return math.sqrt(A / B)
    return 1.0
