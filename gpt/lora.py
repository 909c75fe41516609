"""LoRA: low-rank adapters for fine-tuning (Hu et al. 2021, "LoRA: Low-Rank Adaptation of
Large Language Models", arXiv:2106.09685).

A frozen projection W (out, in) gets a trainable update of rank r: h = W x + (alpha / r) · B A x,
with A (r, in) and B (out, r). B starts at zero, so a freshly adapted model computes exactly
what the base computes (paper, section 4.1). Only A and B are trained; for sampling and export
`merge_lora` folds W += (alpha / r) · B A into the base weight and puts a plain Linear back.

State-dict keys: an adapted layer keeps its base keys (`transformer.h.0.attn.c_attn.weight`,
`.bias`) and adds `...c_attn.lora_A` and `...c_attn.lora_B`. A LoRA checkpoint stores only the
adapter tensors (`lora_state_dict`) plus, in its metadata, `LoRAConfig.to_dict()`.

Order of use: load the base weights, `apply_lora`, then build the optimizer / torch.compile / DDP.
`apply_lora` draws A from torch's global RNG, so seed before calling it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from gpt.model import FLOAT32_MAX, FLOAT32_TINY, Linear, config_from_dict

# The projections LoRA may adapt, as module-name suffixes. The paper adapts attention only
# (section 7.1); adapting the MLP too is the common choice today (QLoRA, Dettmers et al. 2023).
# The LM head and the embeddings (tied to each other) are never adapted.
LORA_TARGETS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
ADAPTER_SUFFIXES = (".lora_A", ".lora_B")


def scale_out_of_range(alpha: float, rank: int) -> str | None:
    """Why (said after "alpha / rank ") a positive alpha scales a rank's update by 0 or by infinity in float32, or
    None. Below float32's smallest normal number the adapters' gradients were 0, and the run trained nothing
    without a word, as qk_scale 1e-320 made NaN (hunt 43-e E2); above its largest, the scale is inf, and the fresh
    adapters' 0 times it made every output NaN: "the validation loss is nan at step 0 ... Try a lower
    learning_rate", of --lora_alpha=1e300 (hunt 49-a A1, as qk_scale 1e39)."""
    if alpha / rank < FLOAT32_TINY:
        return (f"({alpha!r} / {rank}) must be at least float32's smallest normal number "
                f"({FLOAT32_TINY:.4g}): below it the update's scale is 0 and the adapters train nothing")
    if alpha / rank > FLOAT32_MAX:
        return (f"({alpha!r} / {rank}) must be at most float32's largest number ({FLOAT32_MAX:.4g}): above it the "
                "update's scale is infinite and every output NaN")
    return None


@dataclass
class LoRAConfig:
    rank: int  # r: the rank of the update B A
    alpha: float = 16.0  # the update is scaled by alpha / rank (paper, section 4.1)
    dropout: float = 0.0  # dropout on the adapter's input only, as the reference code (loralib)
    targets: tuple[str, ...] = LORA_TARGETS  # which projections of every block get adapters

    def __post_init__(self):
        if not isinstance(self.rank, int) or isinstance(self.rank, bool) or self.rank < 1:
            raise ValueError(f"LoRAConfig.rank must be an integer >= 1, got {self.rank!r}")
        if (not isinstance(self.alpha, (int, float)) or isinstance(self.alpha, bool)
                or not math.isfinite(self.alpha) or self.alpha <= 0):
            raise ValueError(f"LoRAConfig.alpha must be a finite number > 0, got {self.alpha!r}")
        if why := scale_out_of_range(self.alpha, self.rank):
            raise ValueError(f"LoRAConfig.alpha / rank {why}")
        if (not isinstance(self.dropout, (int, float)) or isinstance(self.dropout, bool)
                or not 0.0 <= self.dropout < 1.0):
            raise ValueError(f"LoRAConfig.dropout must be in [0, 1), got {self.dropout!r}")
        if isinstance(self.targets, str) or not isinstance(self.targets, (list, tuple)):
            raise ValueError(f"LoRAConfig.targets must be a list of names from {list(LORA_TARGETS)}, "
                             f"got {self.targets!r}")
        self.targets = tuple(self.targets)  # JSON gives a list
        unknown = [t for t in self.targets if t not in LORA_TARGETS]
        if unknown or not self.targets or len(set(self.targets)) != len(self.targets):
            raise ValueError(f"LoRAConfig.targets must be distinct names from {list(LORA_TARGETS)} "
                             f"(at least one), got {list(self.targets)}")

    @property
    def scale(self) -> float:
        return self.alpha / self.rank

    def to_dict(self) -> dict:
        return dict(rank=self.rank, alpha=self.alpha, dropout=self.dropout, targets=list(self.targets))

    @classmethod
    def from_dict(cls, d: dict) -> "LoRAConfig":
        return config_from_dict(cls, d)


class LoRALinear(nn.Module):
    """A frozen Linear plus a trainable low-rank update: base(x) + dropout(x) A^T B^T · alpha / r.

    It holds the base layer's own `weight` and `bias` Parameters (so their state-dict keys do not
    change) and is deliberately not a `gpt.model.Linear`: `GPT.cpu_bf16_packed` prepacks only
    those, so an adapted layer always runs the ordinary path below."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout: float = 0.0):
        super().__init__()
        self.in_features, self.out_features = base.in_features, base.out_features
        self.rank, self.alpha, self.scale = rank, alpha, alpha / rank
        self.weight = base.weight
        self.register_parameter("bias", base.bias)  # a Parameter, or None without bias
        w = base.weight
        self.lora_A = nn.Parameter(torch.empty(rank, self.in_features, device=w.device, dtype=w.dtype))
        self.lora_B = nn.Parameter(torch.zeros(self.out_features, rank, device=w.device, dtype=w.dtype))
        # A as the paper's reference code (loralib): nn.Linear's default init; B = 0, so B A = 0.
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.lora_dropout = nn.Dropout(dropout)  # no state: adds no keys

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        base = F.linear(x, self.weight, self.bias)
        return base + (self.lora_dropout(x) @ self.lora_A.t() @ self.lora_B.t()) * self.scale

    @torch.no_grad()
    def merged(self) -> Linear:
        """The plain Linear with W + scale · B A, reusing this layer's weight/bias Parameters."""
        delta = (self.lora_B.float() @ self.lora_A.float()) * self.scale  # (out, in), in fp32
        # W + delta summed in fp32 and rounded once to W's dtype: a bf16 delta added in bf16 was rounded twice,
        # and a bf16 merge landed off the nearest bf16 of W + delta on 30% of the elements, up to twice as far
        # (hunt 46-c C1)
        self.weight.copy_(self.weight.float() + delta)
        linear = Linear(self.in_features, self.out_features, bias=self.bias is not None, device="meta")
        linear.weight = self.weight  # adopt the merged tensors: no copy, no random init
        linear.bias = self.bias
        return linear

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}, alpha={self.alpha}"


def _is_target(name: str, targets: tuple[str, ...]) -> bool:
    return any(name == t or name.endswith("." + t) for t in targets)


def _replace(model: nn.Module, name: str, new: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, new)


def is_lora(model: nn.Module) -> bool:
    """Whether the model has (unmerged) LoRA adapters."""
    return any(isinstance(m, LoRALinear) for m in model.modules())


def apply_lora(model: nn.Module, config: LoRAConfig) -> nn.Module:
    """Put adapters on every target projection (in place), freeze every base parameter
    (embeddings and LayerNorms included) and leave only lora_A / lora_B trainable."""
    if is_lora(model):
        raise ValueError("the model already has LoRA adapters: apply_lora was called twice")
    found = [(name, m) for name, m in model.named_modules() if _is_target(name, config.targets)]
    if not found:
        raise ValueError(f"no module of the model matches the LoRA targets {list(config.targets)}")
    not_linear = [name for name, m in found if not isinstance(m, nn.Linear)]
    if not_linear:
        raise ValueError(f"LoRA targets must be Linear layers, but these are not: {not_linear}")
    for p in model.parameters():
        p.requires_grad_(False)
    for name, m in found:
        _replace(model, name, LoRALinear(m, config.rank, config.alpha, config.dropout))
    model.lora_config = config  # for checkpoint metadata; removed by merge_lora
    return model


def set_lora_dropout(model: nn.Module, p: float) -> None:
    """The adapters' dropout, and the LoRAConfig a checkpoint records. After GPT.set_dropout, which
    sets every nn.Dropout, these included: a resumed LoRA run trained its adapters with the
    model's --dropout instead of their own (audit, 2026-11-26)."""
    for m in model.modules():
        if isinstance(m, LoRALinear):
            m.lora_dropout.p = p
    model.lora_config = LoRAConfig.from_dict({**model.lora_config.to_dict(), "dropout": p})


def lora_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """Only the adapter tensors: what a LoRA checkpoint stores."""
    return {k: v for k, v in model.state_dict().items() if k.endswith(ADAPTER_SUFFIXES)}


@torch.no_grad()
def load_lora_state_dict(model: nn.Module, state_dict: dict[str, torch.Tensor]) -> None:
    """Copy adapter tensors into an adapted model. Strict: missing or unexpected keys, or wrong
    shapes, are an error listing them."""
    own = {k: p for k, p in model.named_parameters() if k.endswith(ADAPTER_SUFFIXES)}
    if not own:
        raise ValueError("the model has no LoRA adapters: call apply_lora first")
    missing, unexpected = sorted(set(own) - set(state_dict)), sorted(set(state_dict) - set(own))
    if missing or unexpected:
        raise KeyError(f"LoRA checkpoint does not fit the model: missing keys {missing}, "
                       f"unexpected keys {unexpected}")
    wrong = [f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}"
             for k, v in state_dict.items() if v.shape != own[k].shape]
    if wrong:
        raise ValueError("LoRA checkpoint shapes do not fit the model: " + "; ".join(wrong))
    for k, v in state_dict.items():
        own[k].copy_(v)


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every adapter into its base weight (W += alpha / r · B A) and put the plain Linear
    back, in place: module types and state-dict keys are those of a never-adapted model, and
    every parameter is trainable again, as in one. Returns the model."""
    layers = [(name, m) for name, m in model.named_modules() if isinstance(m, LoRALinear)]
    if not layers:
        raise ValueError("the model has no LoRA adapters to merge")
    for name, m in layers:
        _replace(model, name, m.merged())
    for p in model.parameters():
        p.requires_grad_(True)
    if "lora_config" in vars(model):
        del model.lora_config
    return model


def count_trainable(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts, a tied tensor counted once."""
    params = list(model.parameters())  # deduplicated by identity
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)
