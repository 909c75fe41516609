"""The GPT model in one file: config, positions, attention (with a static KV cache), MLP, block,
model, and the model's decoding loop (`GPT.generate_tokens`; gpt/generation.py builds text on it).

A pre-norm decoder-only Transformer that is exactly GPT-2 (Radford et al. 2019) with the
default config: learned positions, tanh-approximated GELU, LayerNorm eps 1e-5, LM head tied
to the token embedding. `GPT.from_pretrained` loads OpenAI's weights in the Hugging Face
layout and `save_pretrained` writes that layout back (both in gpt/huggingface.py).

Shapes in comments: B batch, T sequence (query) length, S key length, L the KV cache's length,
C n_embd, H n_head, D head size (C // H), V vocab_size.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import threading
import weakref
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable, Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from gpt.errors import ConfigError
from gpt.sampling import check_sampling_args, check_tokens, draw_next_token, sampling_noise, seen_tokens

# -----------------------------------------------------------------------------
# Config


@dataclass
class GPTConfig:
    vocab_size: int = 50257  # GPT-2's BPE; 50304 (next multiple of 64) runs faster on GPUs
    block_size: int = 1024  # longest sequence the model attends over
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True  # biases in Linear layers and LayerNorms, as GPT-2
    # "learned" (GPT-2), "sinusoidal" (Vaswani et al. 2017) or "rope": rotary embeddings of
    # queries and keys (Su et al. 2021), relative positions with no weights; train.py's CPU
    # default (measured at 1,600 steps of that recipe: 2.010 bits per byte vs learned's 2.053).
    pos_encoding: str = "learned"
    # GELU (Hendrycks & Gimpel 2016): "gelu_tanh", the tanh approximation GPT-2 uses, or "gelu",
    # the exact erf form (as nanoGPT). Same quality; on CPUs PyTorch's exact kernel is ~2x faster.
    activation: str = "gelu_tanh"
    # QK-norm (Henry et al. 2020; Dehghani et al. 2023; as modded-nanogpt): queries and keys are
    # RMS-normalised per head, without gains, before the dot product, so no attention logit can
    # grow past sqrt(head size). train.py's CPU default: at 1,200 steps of it, 2.034 vs 2.053 bits per
    # byte at the same Muon rate, and 2.023 with the higher rate it tolerates (README, "Optimizers,
    # schedules, label smoothing").
    qk_norm: bool = False
    # Attention logits are q.k * qk_scale / sqrt(head size); 1 is the Transformer's scaling. With
    # QK-norm the logits are bounded by qk_scale * sqrt(head size), which for small heads keeps
    # attention from getting sharp: train.py's CPU default (head size 32) takes 2 (measured in the
    # same README table: 2.009 vs 2.023 at 1,200 steps).
    qk_scale: float = 1.0

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"GPTConfig.{name} must be a positive integer, got {value!r}")
        # Types first, so that each check below compares what it means to: qk_norm="false" (a string, so
        # true) built a model with QK-norm on without a word, and qk_scale="2" was a TypeError (hunt 35-c C1)
        for name in ("bias", "qk_norm"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"GPTConfig.{name} must be True or False, got {getattr(self, name)!r}")
        for name in ("dropout", "qk_scale"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ConfigError(f"GPTConfig.{name} must be a number, got {value!r}")
        for name in ("pos_encoding", "activation"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"GPTConfig.{name} must be a string, got {getattr(self, name)!r}")
        if self.n_embd % self.n_head != 0:
            raise ConfigError(f"GPTConfig.n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if self.pos_encoding == "sinusoidal" and self.n_embd % 2 != 0:
            raise ConfigError(f"GPTConfig.n_embd must be even for sinusoidal positions, got {self.n_embd}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"GPTConfig.dropout must be in [0, 1), got {self.dropout!r}")
        if self.pos_encoding not in POS_ENCODINGS:
            raise ConfigError(f"GPTConfig.pos_encoding must be one of {', '.join(POS_ENCODINGS)}, "
                              f"got {self.pos_encoding!r}")
        if self.pos_encoding == "rope" and (self.n_embd // self.n_head) % 2 != 0:
            raise ConfigError(f"GPTConfig: rotary positions need an even head size, got "
                             f"n_embd / n_head = {self.n_embd // self.n_head}")
        if not 0 < self.qk_scale <= FLOAT32_MAX:  # (1e39 is inf in float32: NaN losses, README audit 2026-11-26)
            raise ConfigError(f"GPTConfig.qk_scale must be positive and finite in float32, got {self.qk_scale!r}")
        if why := qk_scale_underflow(self.qk_scale, self.n_embd // self.n_head):
            raise ConfigError(f"GPTConfig.qk_scale {why}")
        if self.activation not in GELU_APPROXIMATE:
            raise ConfigError(f"GPTConfig.activation must be 'gelu_tanh' or 'gelu', got {self.activation!r}")

    def num_params(self) -> int:
        """The parameters of the model it builds, the tied embedding counted once (as
        GPT.num_params(False)), counted here: a model too large to build, even on the meta device
        (n_embd 1e9 overflowed torch's size check, n_layer 1e8 took minutes), is refused by its
        size before it is built (hunt 32-c F1)."""
        c, bias = self.n_embd, int(self.bias)
        # attention's qkv and projection, the MLP's two layers (4C wide): 12C² weights and 9C biases;
        # two LayerNorms (QK-norm has no weights)
        block = 12 * c * c + 9 * c * bias + 2 * c * (1 + bias)
        positions = self.block_size * c if self.pos_encoding == "learned" else 0
        return self.n_layer * block + c * (1 + bias) + self.vocab_size * c + positions

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "GPTConfig":
        return config_from_dict(cls, d)


def config_from_dict(cls, d: dict):
    """A config dataclass from a dict (e.g. checkpoint JSON); unknown keys are an error naming them."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys {unknown}; valid keys: {sorted(known)}")
    return cls(**d)


POS_ENCODINGS = ("learned", "sinusoidal", "rope")
GELU_APPROXIMATE = {"gelu_tanh": "tanh", "gelu": "none"}  # activation -> F.gelu's `approximate`

FLOAT32_MAX = 3.4028234663852886e38  # the largest finite float32: attention's scale is applied in it at most
FLOAT32_TINY = 1.1754943508222875e-38  # the smallest normal float32


def qk_scale_underflow(qk_scale: float, head_size: int) -> str | None:
    """Why a positive qk_scale still cannot scale attention logits in float32, or None. The scale applied
    is qk_scale / sqrt(head size); one that rounds to 0 in float32 (qk_scale 1e-320 passed `> 0`) made every
    masked logit 0 * -inf, NaN, and a run stopped at step 0 with "the model diverged ... Try a lower
    learning_rate" (hunt 43-e E2). So it must be a normal float32, as qk_scale must be finite in float32."""
    if qk_scale / math.sqrt(head_size) >= FLOAT32_TINY:
        return None
    return (f"makes the attention scale qk_scale / sqrt(head size {head_size}) smaller than float32's smallest "
            f"normal number ({FLOAT32_TINY:.4g}; it rounds to 0, and the logits to NaN), got {qk_scale!r}")

# The OpenAI checkpoints on the Hugging Face hub.
GPT2_HUB_CONFIGS = {
    "gpt2": dict(n_layer=12, n_head=12, n_embd=768),  # 124M
    "gpt2-medium": dict(n_layer=24, n_head=16, n_embd=1024),  # 350M
    "gpt2-large": dict(n_layer=36, n_head=20, n_embd=1280),  # 774M
    "gpt2-xl": dict(n_layer=48, n_head=25, n_embd=1600),  # 1558M
}

TIED_KEY = "lm_head.weight"  # the same tensor as transformer.wte.weight; stored once


# -----------------------------------------------------------------------------
# Positions
# GPTConfig.pos_encoding: "learned" is GPT's table (transformer.wpe); "sinusoidal" and "rope" are
# computed here from the positions alone: they hold no weights.


Rotary = tuple[torch.Tensor, torch.Tensor]  # (cos, sin), each (T, D/2)


def rotary_angles(positions: torch.Tensor, head_dim: int, base: float = 10000.0) -> Rotary:
    """cos and sin of RoPE's angles (Su et al. 2021, RoFormer): position p turns the i-th pair of
    a head's dimensions by p · base^(-2i/D). (T,) -> two (T, D/2) float32 tensors."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim)
    angles = positions.float()[:, None] * inv_freq[None, :]  # (T, D/2)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, rotary: Rotary) -> torch.Tensor:
    """Queries or keys (B, H, T, D) turned by their positions' angles; pairs are (i, i + D/2), the
    "rotate half" layout of GPT-NeoX and Llama. A query at p and a key at s then score by p - s only."""
    cos, sin = (t.to(x.dtype) for t in rotary)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def sinusoidal_positions(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """Fixed sin/cos position embedding (Vaswani et al. 2017, section 3.5): (T,) -> (T, dim).
    Computed on the fly, so it holds no state and needs no weights."""
    inv_freq = torch.exp(torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32)
                         * (-math.log(10000.0) / dim))
    angles = positions.float()[:, None] * inv_freq[None, :]  # (T, dim/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)  # interleaved sin, cos


# -----------------------------------------------------------------------------
# KV cache


class KVCache:
    """Keys and values of one layer for past positions, preallocated once: (B, H, max_len, D).

    Position p of the sequence lives at index p. A forward pass over tokens at positions
    [pos, pos + T) writes there and attends over [0, pos + T); whatever lies beyond was never
    read, so starting again at pos 0 is a reset. (The static decode step reads beyond, masked:
    `GPT.generate_tokens` zeroes the caches before it runs.)"""

    def __init__(self, batch_size: int, n_head: int, max_len: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device):
        shape = (batch_size, n_head, max_len, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)

    def update(self, pos: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write k, v (b, H, T, D) at [pos, pos + T); return the keys and values of [0, pos + T).
        b may be 1 while the cache holds B rows: the write broadcasts to every row (one prompt
        shared by B samples, prefilled once) and the first row is returned."""
        end = pos + k.size(2)
        self.k[:, :, pos:end] = k
        self.v[:, :, pos:end] = v
        b = k.size(0)
        return self.k[:b, :, :end], self.v[:b, :, :end]  # (b, H, S=end, D)


# -----------------------------------------------------------------------------
# Layers


def one_row_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """F.linear of an x that holds one row, (..., K) with weight (N, K) -> (..., N), written as a
    multiply and a sum over K for torch.compile. Decoding one token at batch 1, cuBLAS runs each
    Linear as a GEMM kernel of its own (~4.4 us for GPT-2 124M's on an H100, 48 a token: a step
    bound by kernel count, not bytes) and the bias, GELU and residual add as more kernels;
    inductor turns this form into one reduction kernel per Linear with those fused around it, and
    keeps the products in fp32: the compiled GPT-2 124M bf16 step runs 1.2x faster on an H100,
    greedy tokens unchanged (issue 9; the figures in docs/gpu-measurements.md). Eager it would build an
    (N, K) product: only `Linear` under torch.compile uses it."""
    y = (x.unsqueeze(-2) * weight).sum(-1)  # (..., 1, K) * (N, K) -> (..., N, K) -> (..., N)
    return y if bias is None else y + bias


class Linear(nn.Linear):
    """nn.Linear that can run on a oneDNN-prepacked copy of its weight (see `GPT.cpu_bf16_packed`),
    and compiled on CUDA in half precision, on one row as `one_row_linear`."""

    packed_weight: torch.Tensor | None = None  # a plain attribute: never in the state dict

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            # One row (the decode step at batch 1): a reduction kernel, not a GEMM (one_row_linear).
            # Half precision only: in fp32 the compiled step keeps cuBLAS's sums, so its tokens stay
            # the eager step's exactly (generate_tokens' fp32 promise). The plain path otherwise:
            # inductor cannot lower the prepacked weight, an attribute it sees as a graph input
            # rather than a constant (the compiled bf16 decode step failed on a CPU with native
            # bf16 and ran eager, audit of 2026-11-26), and it lays weights out itself.
            if x.is_cuda and x.dtype in (torch.bfloat16, torch.float16) and x.numel() == x.size(-1):
                return one_row_linear(x, self.weight, self.bias)
            return super().forward(x)
        if self.packed_weight is not None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "none", [], "")
        return super().forward(x)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.head_dim = config.n_embd // config.n_head
        self.dropout = config.dropout
        self.c_attn = Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # fused q, k, v
        self.c_proj = Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.qk_norm = config.qk_norm
        self.scale = config.qk_scale / math.sqrt(self.head_dim)  # of the attention logits
        self.kv_cache: KVCache | None = None

    def qkv(self, x: torch.Tensor, rotary: Rotary | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, T, C) -> queries, keys, values, each (B, H, T, D), normalised and rotated as the
        config says. Keys are cached in this form: their positions never change."""
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)  # each (B, T, C)
        q, k, v = (t.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))  # C split in H heads
        if self.qk_norm:
            q, k = F.rms_norm(q, (self.head_dim,)), F.rms_norm(k, (self.head_dim,))
        if rotary is not None:
            q, k = rotate(q, rotary), rotate(k, rotary)
        return q, k, v

    def forward(self, x: torch.Tensor, pos: int | None = None, rotary: Rotary | None = None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x, rotary)  # (B, H, T, D)

        mask, is_causal = None, True
        if pos is not None:  # incremental decoding: queries sit at [pos, pos + T)
            k, v = self.kv_cache.update(pos, k, v)  # (B, H, S = pos + T, D)
            if T == 1:
                is_causal = False  # one query at the newest position sees every cached key
            elif pos > 0:
                # SDPA's is_causal aligns the mask top-left, which is wrong when T < S:
                # query i (position pos + i) may see keys 0 .. pos + i.
                S = k.size(2)
                mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=pos)
                is_causal = False

        # Flash / memory-efficient attention where available (CUDA), a fused kernel on CPU.
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal,
                                           dropout_p=self.dropout if self.training else 0.0, scale=self.scale)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, H, T, D) -> the heads side by side again
        return self.resid_dropout(self.c_proj(y))

    def decode_step(self, x: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor,
                    rotary: Rotary | None = None) -> torch.Tensor:
        """One new position per row with static shapes (see `GPT.decode_step`): x (B, 1, C);
        pos (1,) the position, a tensor; mask (1, 1, 1, L) the cache positions <= pos."""
        B, T, C = x.shape
        q, k, v = self.qkv(x, rotary)  # (B, H, 1, D)
        cache = self.kv_cache
        cache.k.index_copy_(2, pos, k)  # in place, at a tensor position: no Python-int slicing
        cache.v.index_copy_(2, pos, v)
        # over the whole cache, masked: (B, H, 1, D)
        y = F.scaled_dot_product_attention(q, cache.k, cache.v, attn_mask=mask, scale=self.scale)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)
        self.approximate = GELU_APPROXIMATE[config.activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (B, T, C) -> (B, T, 4C) -> (B, T, C): GPT-2's hidden layer is 4 times the embedding's width
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate=self.approximate)))


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, pos: int | None = None, rotary: Rotary | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), pos, rotary)  # pre-norm residual blocks
        x = x + self.mlp(self.ln_2(x))
        return x


# -----------------------------------------------------------------------------
# The model


def _run_block(block: Block, x: torch.Tensor, pos: int | None, rotary: Rotary | None) -> torch.Tensor:
    return block(x, pos, rotary)  # compiled once for every block by GPT.compile_regions


def _head_and_loss(model: GPT, x: torch.Tensor, targets: torch.Tensor, label_smoothing: float):
    return model.head_and_loss(x, targets, label_smoothing)  # compiled by GPT.compile_regions


class _SkipInit(torch.overrides.TorchFunctionMode):
    """Inside: torch.nn.init's functions (which modules' constructors call) leave their tensor as it is."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__module__", None) == "torch.nn.init":
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


def one_integer(value):
    """A 0-d integer tensor (`tokens[0, -1]`, an id taken from a tensor of them) as the Python int it holds; any
    other value as it is. An eot_token so given was "tensor(5) is not an id of this model's vocabulary" (hunt 50-g
    G2), where a numpy integer is taken."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype != torch.bool \
            and not value.is_floating_point() and not value.is_complex():
        return int(value)
    return value


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList(Block(config) for _ in range(config.n_layer)),
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        if config.pos_encoding == "learned":
            self.transformer["wpe"] = nn.Embedding(config.block_size, config.n_embd)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # weight tying (Press & Wolf 2017), as GPT-2
        self.compiled_regions: tuple[Callable, Callable] | None = None  # see compile_regions
        # The ids the training data holds, where the vocabulary is padded past them for speed (train.py
        # sets it): label smoothing spreads its ε over these alone (see head_and_loss). None: all of them.
        self.data_vocab_size: int | None = None
        # The inputs of the static decode step, (B, 1) token and (1,) position, made with the KV
        # caches (setup_kv_cache): fixed addresses that a CUDA graph of the step reads directly.
        self.decode_inputs: tuple[torch.Tensor, torch.Tensor] | None = None
        # The tokenizer the model was trained with, where known (gpt.checkpoint.load_model sets it from the
        # checkpoint's meta.json): save_pretrained writes its end-of-text unless given one (hunt 43-a A3)
        self.tokenizer_name: str | None = None
        # The end-of-text id of the Hugging Face export the model was loaded from (its config.json's eos_token_id,
        # from_pretrained sets it): save_pretrained writes it back where the tokenizer is not known (hunt 44-a A2)
        self.export_eot_token: int | None = None
        # The ids where transformers' generate ends this export's samples (gpt.huggingface.hf_end_tokens;
        # from_pretrained sets them): sample.py ends a sample of a Hugging Face directory there too
        self.end_tokens: tuple[int, ...] = ()
        self.apply(self._init_weights)
        # GPT-2 scales the init of the layers that write into the residual stream by
        # 1/sqrt(2 * n_layer): each block adds two of them (GPT-2 paper, section 2.3).
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @classmethod
    def empty(cls, config: GPTConfig) -> GPT:
        """A model to load weights into with `load_weights(..., assign=True)`: built on the meta
        device (no memory) and not initialised. Initialising meta tensors computes nothing, yet
        torch runs it through its reference ops, whose first use imports torch._dynamo: ~1.4 s
        of sample.py's start-up on the 2-core CPU, for a 10.8M model whose decoding takes less."""
        with torch.device("meta"), _SkipInit():
            return cls(config)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    # -- facts -----------------------------------------------------------------

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameters, the tied embedding counted once. With non_embedding=True the learned
        position table is left out (the token table stays: it is also the LM head's weight)."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding and "wpe" in self.transformer:
            n -= self.transformer.wpe.weight.numel()
        return n

    def flops_per_token(self, seq_len: int | None = None) -> int:
        """Training FLOPs (forward + backward) per token: 6N + 12·L·H·Q·T, with N the non-embedding
        parameters, L layers, H heads, Q head size and T the sequence length; the second term is
        attention's score and value matmuls (PaLM, Chowdhery et al. 2022, appendix B). A frozen
        parameter (LoRA's base) counts 4, not 6: its forward and the gradient through it, but no
        gradient of its own (LoRA runs' MFU read up to 1.5x high: hunt 29-a)."""
        cfg = self.config
        T = seq_len or cfg.block_size
        frozen = sum(p.numel() for name, p in self.named_parameters()
                     if not p.requires_grad and name != "transformer.wpe.weight")  # (wpe: not in N)
        return 6 * self.num_params() - 2 * frozen + 12 * cfg.n_layer * cfg.n_head * (cfg.n_embd // cfg.n_head) * T

    def set_dropout(self, p: float) -> None:
        """Change the dropout probability everywhere (e.g. fine-tuning pretrained weights)."""
        self.config.dropout = p
        for m in self.modules():
            if isinstance(m, nn.Dropout):
                m.p = p
            elif isinstance(m, CausalSelfAttention):
                m.dropout = p

    # -- forward ---------------------------------------------------------------

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, *,
                pos: int | None = None, last_only: bool = False, label_smoothing: float = 0.0):
        """idx: (B, T) token ids -> (logits, loss).

        logits are (B, T, V), or (B, 1, V) with last_only=True; loss is the mean cross-entropy
        against targets (B, T), ignoring targets equal to -1, or None without targets.
        label_smoothing=ε smooths the loss (for training): the target distribution puts 1 - ε on the
        true token and ε spread evenly over the vocabulary (Szegedy et al. 2016; Vaswani et al. 2017).
        pos=None is an ordinary forward pass; pos=p uses the KV cache (`setup_kv_cache`): idx
        holds the tokens at positions [p, p + T) and earlier positions come from the cache."""
        B, T = idx.shape
        start = 0 if pos is None else pos
        if start + T > self.config.block_size:
            raise ValueError(f"sequence of {start + T} tokens is longer than block_size {self.config.block_size}")
        if pos is not None:
            cache = self.transformer.h[0].attn.kv_cache
            if cache is None:
                raise RuntimeError("pos was given but no KV cache is set up: call setup_kv_cache() first")
            if start + T > cache.k.size(2) or B not in (1, cache.k.size(0)):  # (a shape mismatch in the cache's update)
                raise ValueError(f"{B} sequence(s) of {start + T} tokens do not fit the KV cache, set up for "
                                 f"{cache.k.size(0)} of {cache.k.size(2)}: call setup_kv_cache(batch_size, max_len)")

        positions = torch.arange(start, start + T, dtype=torch.long, device=idx.device)  # (T,)
        x, rotary = self.embed(idx, positions)  # (B, T, C)
        x = self.transformer.drop(x)
        if targets is not None and pos is None and self.compiled_regions:  # training and evaluation
            run_block, head_and_loss = self.compiled_regions
            for block in self.transformer.h:
                x = run_block(block, x, None, rotary)
            return head_and_loss(self, x, targets, label_smoothing)
        for block in self.transformer.h:
            x = block(x, pos, rotary)
        if targets is not None:
            return self.head_and_loss(x, targets, label_smoothing)
        x = self.transformer.ln_f(x)
        if last_only:
            x = x[:, -1:, :]  # generation only needs the last position: skips most of the head's work
        return self.lm_head(x), None

    def head_and_loss(self, x: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0):
        """The last blocks' output (B, T, C) -> (logits (B, T, V), the loss against targets (B, T))."""
        logits = self.lm_head(self.transformer.ln_f(x))  # (B, T, V)
        # The mean over the targets that count: -1 is ignored (the prompts of instruction data,
        # issue 12). A batch with none gives 0 and no gradient, not the NaN of an empty mean.
        counted = (targets != -1).sum().clamp(min=1)
        used, vocab = self.data_vocab_size, logits.size(-1)
        if label_smoothing and used is not None and used < vocab:
            # A vocabulary padded for speed (on CUDA, or for --fp8_head: bytes' 257 ids to 320) has ids no
            # tokenizer makes. torch's smoothing spread ε over them too, and trained the model to put
            # ε · 63/320 of its probability there (1.9% at ε 0.1, measured): the validation loss was
            # 0.019 nats higher than over the data's ids (hunt 37-a A1). The ε goes to the data's ids;
            # the padded ones stay in the softmax, so they are still pushed down.
            logp = logits.view(-1, vocab).float().log_softmax(-1)  # (B*T, V)
            flat = targets.reshape(-1)  # (B*T,)
            nll = -logp.gather(1, flat.clamp(min=0)[:, None]).squeeze(1)  # (B*T,); -1's rows are masked below
            smooth = -logp[:, :used].mean(-1)  # (B*T,)
            per_token = (1 - label_smoothing) * nll + label_smoothing * smooth
            return logits, per_token.masked_fill(flat == -1, 0.0).sum() / counted
        loss = F.cross_entropy(logits.view(-1, vocab).float(), targets.reshape(-1), ignore_index=-1,
                               reduction="sum", label_smoothing=label_smoothing) / counted
        return logits, loss

    def compile_regions(self) -> None:
        """--compile=regional: torch.compile one block's forward, which every block then reuses (the
        blocks are alike and their weights are the graph's inputs, so dynamo traces one graph for
        all of them), and the head with its loss. Compiling takes a fraction of the whole model's
        time (48 s -> 23 s for the GPU preset's 6 x 384 model on the 2-core CPU, at the same step
        time); torchtitan compiles block by block too. Only the training and evaluation forwards
        (targets given, no KV cache) run compiled: sampling stays eager, so no position or length
        ever recompiles. Compilation happens at the first call."""
        # module-level functions, the model an argument: a compiled bound method would hold the
        # model in a reference cycle (freed only by the collector) and go along into a deepcopy
        self.compiled_regions = (torch.compile(_run_block), torch.compile(_head_and_loss))

    def embed(self, idx: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, Rotary | None]:
        """Token embeddings with the positions (T,) added, (B, T, C); and RoPE's angles for the
        attention layers (None unless pos_encoding is "rope")."""
        x = self.transformer.wte(idx)
        if self.config.pos_encoding == "learned":
            return x + self.transformer.wpe(positions), None
        if self.config.pos_encoding == "sinusoidal":
            return x + sinusoidal_positions(positions, self.config.n_embd).to(x.dtype), None
        return x, rotary_angles(positions, self.config.n_embd // self.config.n_head)

    def decode_step(self, idx: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """The per-token step of decoding with static shapes, for `torch.compile(mode="reduce-overhead")`
        (CUDA graphs): idx (B, 1) the newest token of every row, pos (1,) long tensor its position,
        -> logits (B, V). It writes position pos of the preallocated caches in place and attends
        over the whole cache under a boolean mask of the positions <= pos, so every call has the
        same shapes and no Python-int slicing: one compiled graph serves every step. Computes what
        `self(idx, pos=int(pos), last_only=True)` does; `generate_tokens(decode_step=...)` uses it."""
        cache_len = self.transformer.h[0].attn.kv_cache.k.size(2)
        x, rotary = self.embed(idx, pos)  # (B, 1, C)
        # (1, 1, 1, L): the cache positions <= pos, the same for every row and head
        mask = (torch.arange(cache_len, device=idx.device) <= pos).view(1, 1, 1, cache_len)
        for block in self.transformer.h:
            x = x + block.attn.decode_step(block.ln_1(x), pos, mask, rotary)
            x = x + block.mlp(block.ln_2(x))
        return self.lm_head(self.transformer.ln_f(x))[:, -1, :]

    def decode_token(self, idx: torch.Tensor, pos: torch.Tensor, noise: torch.Tensor | None,
                     seen: torch.Tensor | None, *, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float | None = None, repetition_penalty: float = 1.0,
                     vocab_limit: int | None = None) -> torch.Tensor:
        """`decode_step` and the choice of the next token in one static-shape function: idx (B, 1),
        pos (1,), noise (B, V') from `sampling_noise` (None when greedy), seen (B, V') bool (None
        without a repetition penalty) -> next token (B, 1), NON_FINITE where the logits were not
        finite. Under torch.compile(mode="reduce-overhead") the whole per-token step, sampling
        included, is one CUDA graph: no host sync and one launch per token (issue 9)."""
        logits = self.decode_step(idx, pos)[:, :vocab_limit]  # (B, V')
        return draw_next_token(logits, temperature, top_k, top_p, noise, seen, repetition_penalty)

    # -- KV cache and generation -----------------------------------------------

    def setup_kv_cache(self, batch_size: int, max_len: int | None = None) -> None:
        """Preallocate every layer's cache, on the model's device and in its dtype, and the
        inputs of the static decode step (`decode_inputs`)."""
        max_len = max_len or self.config.block_size
        if max_len > self.config.block_size:
            raise ValueError(f"KV cache length {max_len} exceeds block_size {self.config.block_size}")
        ref = self.transformer.wte.weight
        # Tensors made under inference mode (generate's) cannot be written outside it: a cached forward of
        # one's own after a generate() was "Inplace update to inference tensor outside InferenceMode"
        # (hunt 35-c C3). Outside inference mode, such caches are made again.
        stale = lambda t: t.is_inference() and not torch.is_inference_mode_enabled()  # noqa: E731
        for block in self.transformer.h:
            attn = block.attn
            cache = attn.kv_cache
            if cache is None or cache.k.shape[0] != batch_size or cache.k.shape[2] < max_len \
                    or cache.k.dtype != ref.dtype or cache.k.device != ref.device or stale(cache.k):
                attn.kv_cache = KVCache(batch_size, attn.n_head, max_len, attn.head_dim, ref.dtype, ref.device)
        tok = self.decode_inputs[0] if self.decode_inputs is not None else None
        if tok is None or tok.shape[0] != batch_size or tok.device != ref.device or stale(tok):
            self.decode_inputs = (torch.zeros(batch_size, 1, dtype=torch.long, device=ref.device),
                                  torch.zeros(1, dtype=torch.long, device=ref.device))

    def clear_kv_cache(self) -> None:
        """Free the caches' memory."""
        for block in self.transformer.h:
            block.attn.kv_cache = None
        self.decode_inputs = None

    @contextlib.contextmanager
    def cpu_bf16_packed(self, batch_size: int):
        """While inside, bf16 Linear layers on the CPU run on weights prepacked once into oneDNN's
        blocked layout. PyTorch's eager bf16 matmul re-lays out the weight on every call, which
        halves its speed on the few-row matmuls of decoding (measured in `bench.py decode`).
        The copies live only for the block, so they can never go stale; elsewhere a no-op."""
        ref = self.transformer.wte.weight
        linears = [m for m in self.modules() if isinstance(m, Linear)]
        usable = (ref.device.type == "cpu" and ref.dtype == torch.bfloat16 and not self.training
                  and torch.backends.mkldnn.is_available()
                  and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"))
        try:
            if usable:
                try:
                    for m in linears:
                        m.packed_weight = torch.ops.mkldnn._reorder_linear_weight(m.weight.detach(), batch_size)
                except RuntimeError:  # this build of PyTorch cannot: stay on the ordinary path
                    for m in linears:
                        m.packed_weight = None
            yield
        finally:
            for m in linears:  # back to the class default, None (attributes stay as torch.compile saw them)
                m.__dict__.pop("packed_weight", None)

    @torch.inference_mode()
    def generate_tokens(self, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                        top_k: int | None = None, top_p: float | None = None, *,
                        repetition_penalty: float = 1.0, use_cache: bool = True,
                        generator: torch.Generator | None = None,
                        vocab_limit: int | None = None, num_samples: int = 1,
                        decode_step: Callable | str | None = "auto", to_host: bool = False,
                        eot_token: int | None = None) -> Iterator[torch.Tensor]:
        """Yield the next token of every sequence, (B, 1), max_new_tokens times. A token equal to
        NON_FINITE (-1) means the logits of that row were NaN or inf: the reader must refuse it
        (`gpt.sampling.check_tokens`); nothing here waits for the device to find out.

        idx: (B, T) prompt, all rows the same length; prefilled in one forward pass, after which
        each token costs one position of compute through the KV cache.

        num_samples: with a single prompt row idx (1, T), draw this many samples of it: the prompt
        is prefilled once, its keys and values written to every row of the cache, and the rows go
        their own ways from the first sampled token (B = num_samples).

        decode_step: how the one-token steps of the cached path run. "static": `decode_token`,
        the static-shape step (attention always over the whole cache, so GPU attention kernels see
        one shape and build one plan: bf16 cuDNN attention otherwise builds one per key length,
        ~70 ms each on an H100, issue 9); None: the ordinary forward over the cached prefix
        (fewer FLOPs, best on a CPU); "auto" (default): static on CUDA, ordinary elsewhere; or a
        function with `decode_token`'s signature, e.g. a `gpt.generation.CompiledDecodeStep`.
        Prefills always run the ordinary forward.

        to_host: yield the tokens on the host, for a reader that looks at every one (streaming,
        stop strings). The device then runs one step ahead of the reader: token t is copied to
        pinned memory right behind step t, step t + 1 is queued, and only then does token t wait
        for its copy, so the host's work on token t overlaps the device's step t + 1. (Reading
        the device tensor instead would wait for everything queued, step t + 1 included.)

        Past block_size: the model sees a window that starts somewhere in the sequence; when the
        window is full it slides forward to keep only its last block_size // 2 tokens, which are
        prefilled again, and decoding continues from there. The cached and the uncached paths
        follow the same rule, so they produce the same tokens (in float32: in bf16 or fp16 they round
        the logits differently); sliding by half a window keeps the
        cost of re-prefilling to one pass per block_size // 2 new tokens.

        vocab_limit: never emit ids >= this (a vocabulary padded for speed has ids no tokenizer knows); None: the
        data's vocabulary where the model knows it (`data_vocab_size`, which `load_model` and train.py set), else
        the whole of it.
        eot_token: the tokenizer's end-of-text, which the repetition penalty never counts as seen: it is no text
        to repeat, and prompts begin with it (an empty --start, every instruction and chat prompt), so every
        sample was made less likely to end (hunt 44-b B3). None: every id counts.
        Sampling: `gpt.sampling.draw_next_token`; every path draws the same noise from `generator`,
        so for one seed the cached, uncached, eager and compiled paths give the same tokens in float32
        (in bf16 their roundings differ, and sampled tokens can part: audit, 2026-11-26)."""
        check_sampling_args(temperature, top_k, top_p, repetition_penalty)
        if idx.dim() != 2 or idx.size(1) == 0:
            raise ValueError(f"idx must be a (B, T) batch of token ids with T >= 1, got shape {tuple(idx.shape)}")
        # (num_samples=0 was told "num_samples > 1 needs a single prompt row", max_new_tokens=-5 gave the prompt
        # back and vocab_limit=0 sampled the whole vocabulary, without a word: hunt 35-c C6)
        for name, value, least in (("max_new_tokens", max_new_tokens, 0), ("num_samples", num_samples, 1),
                                   ("vocab_limit", 1 if vocab_limit is None else vocab_limit, 1)):
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < least:  # (numpy's too)
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        # (-1 was taken as the last id, which the penalty then never lowered, and True was ignored, in silence: hunt
        # 48-b B5)
        eot_token = one_integer(eot_token)
        if eot_token is not None and (isinstance(eot_token, bool) or not isinstance(eot_token, numbers.Integral)
                                      or not 0 <= eot_token < self.config.vocab_size):
            raise ValueError(f"eot_token {eot_token!r} is not an id of this model's vocabulary (0 to "
                             f"{self.config.vocab_size - 1})")
        if num_samples > 1 and idx.size(0) != 1:
            raise ValueError(f"num_samples > 1 needs a single prompt row (1, T); got num_samples={num_samples}, "
                             f"idx of shape {tuple(idx.shape)}")
        # Any other string ("eager", "compiled") was "'str' object is not callable" after the prefill, or no
        # error at all with max_new_tokens=1 (hunt 43-b B2)
        if not (isinstance(decode_step, str) and decode_step in ("auto", "static") or decode_step is None
                or callable(decode_step)):
            raise ValueError(f"decode_step must be 'auto', 'static', None (the ordinary forward) or a function with "
                             f"decode_token's signature, got {decode_step!r}")
        # Ids of another tokenizer (GPT-2's in a byte model): "IndexError: index out of range in self" from the
        # embedding on a CPU, a device-side assert that ends the CUDA context on a GPU (hunt 43-b B1). One look at
        # the prompt, before any work; the ids this model draws never leave its vocabulary.
        # (a batch of no rows has no ids to look at: aminmax raised on it, where it gave its empty result, hunt 43-f F3)
        lowest, highest = torch.stack(idx.aminmax()).tolist() if idx.numel() else (0, 0)  # (one read from the device)
        if lowest < 0 or highest >= self.config.vocab_size:
            raise ValueError(f"idx holds token ids from {lowest} to {highest}, outside the model's vocabulary of "
                             f"{self.config.vocab_size} (ids 0 to {self.config.vocab_size - 1}): a prompt made with "
                             f"another tokenizer?")
        if decode_step == "auto":
            decode_step = "static" if idx.device.type == "cuda" else None
        if decode_step == "static":
            decode_step = self.decode_token
        # The model's own passes on CUDA (prefills, and its eager steps) attend without cuDNN, whose
        # library load and per-shape plans doubled a first bf16 generate on an H100 and slowed warm
        # ones too: a prefill of a new prompt length would build a new plan. A graphed or compiled step
        # keeps it: one shape, one plan, and faster replays (issue 9, docs/gpu-measurements.md). Entered
        # around each call, never across a yield, so the caller's code between tokens runs with its
        # own settings.
        own_pass = no_cudnn_attention if idx.is_cuda else contextlib.nullcontext
        step_attention = own_pass if decode_step in (None, self.decode_token) else contextlib.nullcontext
        batch = idx.size(0) * num_samples
        block = self.config.block_size
        keep = max(1, block // 2)
        vocab = self.sampled_vocab(vocab_limit)
        sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, repetition_penalty=repetition_penalty)
        # the model's current window, a copy: the caller's prompt is read once, whatever it does later
        seq = (idx[:, -block:] if idx.size(1) > block else idx).clone()
        if seq.size(0) != batch:
            seq = seq.expand(batch, -1)  # one row per sample; the shared prompt is prefilled once, below
        seen = seen_tokens(idx.expand(batch, -1), vocab) if repetition_penalty != 1.0 else None  # (batch, vocab)
        # the end-of-text's column of `seen`, kept False (see eot_token)
        unseen_eot = seen[:, eot_token] if seen is not None and eot_token is not None and eot_token < vocab else None
        if unseen_eot is not None:
            unseen_eot.fill_(False)
        was_training = self.training
        _start_generating(self)
        try:  # (self.eval() inside: a Ctrl-C there, which sample.py --chat survives since 780fb99, left the model
            # "generating", and the next answer a RuntimeError traceback: hunt 42-f F3)
            self.eval()
            with self.cpu_bf16_packed(batch):
                if use_cache:
                    self.setup_kv_cache(batch, block)
                    if decode_step is not None:
                        # The static step attends over the whole cache, the positions not written yet masked out;
                        # a masked position still weighs in as 0 x its value, and 0 x NaN is NaN. A NaN or inf left
                        # there by an earlier generation that went non-finite made every later one on the model
                        # refuse its tokens, whatever its prompt, where the ordinary step was fine (hunt 52-g G3).
                        for layer in self.transformer.h:
                            layer.attn.kv_cache.k.zero_()
                            layer.attn.kv_cache.v.zero_()
                # The window's newest token, clamped (a NON_FINITE row goes on as a valid id): the
                # decode step's input. With the cache it is the model's own input buffer, written in
                # place, so a CUDA graph of the step reads it where it was captured (no copy per token).
                last, pos_t = self.decode_inputs if use_cache else (
                    torch.empty(batch, 1, dtype=torch.long, device=idx.device), None)
                last.copy_(seq[:, -1:])
                tail: list[torch.Tensor] = []  # tokens made since `seq` was put together: joined only
                window = seq.size(1)  # when a forward pass needs the window (a prefill, a slide, no cache)
                cached_upto = 0  # positions of the window already in the cache
                shared_prompt = num_samples > 1
                pending = None  # the token computed last, yielded once the next step is queued
                copy_ready = None  # CUDA with to_host: the event that marks pending's copy to the host
                for _ in range(max_new_tokens):
                    noise = None if temperature == 0 else sampling_noise(batch, vocab, idx.device, generator)
                    if use_cache and decode_step is not None and window - cached_upto == 1:
                        with step_attention():
                            nxt = decode_step(last, pos_t.fill_(cached_upto), noise, seen, **sampling,
                                              vocab_limit=vocab)
                    else:
                        if tail:
                            seq, tail = torch.cat((seq, *tail), dim=1).clamp_min(0), []
                        rows = seq[:1] if shared_prompt else seq  # the shared prompt: computed once for all rows
                        with own_pass():  # the logits of the window's last position, (1 or batch, V)
                            if use_cache:
                                logits = self(rows[:, cached_upto:], pos=cached_upto, last_only=True)[0][:, -1]
                            else:
                                logits = self(rows, last_only=True)[0][:, -1]
                        nxt = draw_next_token(logits[:, :vocab].expand(batch, -1), **sampling, noise=noise, seen=seen)
                    cached_upto = window
                    shared_prompt = False  # the rows go their own ways from the first token (a decoded one too)
                    nxt = nxt.clone()  # a CUDA graph's output is overwritten by its next replay
                    torch.clamp_min(nxt, 0, out=last)
                    if seen is not None:
                        seen.scatter_(1, last, True)
                        if unseen_eot is not None:
                            unseen_eot.fill_(False)
                    if pending is not None:
                        yield self._on_host(pending, copy_ready) if to_host else pending
                    pending = nxt
                    if to_host and nxt.is_cuda:  # queued behind this step only (see the docstring)
                        pending = torch.empty(nxt.shape, dtype=nxt.dtype, pin_memory=True).copy_(nxt, non_blocking=True)
                        copy_ready = torch.cuda.Event()
                        copy_ready.record(torch.cuda.current_stream(nxt.device))  # cuda:1 need not be current
                    tail.append(nxt)
                    window += 1
                    if window > block:  # window full: slide, and re-prefill what is kept
                        seq, tail = torch.cat((seq, *tail), dim=1).clamp_min(0)[:, -keep:], []
                        window, cached_upto = keep, 0
                if pending is not None:
                    yield self._on_host(pending, copy_ready) if to_host else pending
        finally:
            self.train(was_training)
            _GENERATING.discard(self)

    def sampled_vocab(self, vocab_limit: int | None = None) -> int:
        """How many ids, from 0, generation may draw: vocab_limit, else the data's vocabulary where the model
        knows it. A model trained on a GPU has its vocabulary padded past its data's (bytes' 257 ids to 320,
        GPT-2's 50257 to 50304), and `load_model(...)` then `model.generate(...)`, the README's way, drew ids no
        tokenizer knows: the byte tokenizer decoded them to nothing, GPT-2's raised a KeyError (hunt 43-b B3)."""
        return min(vocab_limit or self.data_vocab_size or self.config.vocab_size, self.config.vocab_size)

    @staticmethod
    def _on_host(token: torch.Tensor, copy_ready: torch.cuda.Event | None) -> torch.Tensor:
        """A token of `generate_tokens(to_host=True)` once it can be read: a pinned copy waits for
        its own event only (not for the step queued after it); a device tensor is copied over."""
        if copy_ready is not None:
            copy_ready.synchronize()
            return token
        return token.cpu()

    def generate(self, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None, top_p: float | None = None, **kwargs) -> torch.Tensor:
        """(B, T) prompt -> (B, T + max_new_tokens) ids. temperature=0 is greedy.
        Keyword arguments as `generate_tokens` (repetition_penalty, use_cache, generator, num_samples, ...)."""
        new = list(self.generate_tokens(idx, max_new_tokens, temperature, top_k, top_p, **kwargs))
        idx = idx.expand(idx.size(0) * kwargs.get("num_samples", 1), -1)
        out = torch.cat([idx, *new], dim=1)
        check_tokens(out[:, idx.size(1):].amin(dim=1).tolist() if new else [])  # one wait, at the end
        return out

    # -- weights: strict loading, GPT-2 interop --------------------------------

    def load_weights(self, state_dict: dict[str, torch.Tensor], assign: bool = False) -> None:
        """Load weights with strict keys: anything missing or unexpected is an error listing the
        keys. The tied LM head may be present or absent; if present it must equal the embedding (or
        stand for it, where the embedding is absent).
        assign=True adopts the given tensors (for a model built on the meta device)."""
        expected = {k for k in self.state_dict() if k != TIED_KEY}
        given = dict(state_dict)
        if "transformer.wte.weight" not in given and TIED_KEY in given:
            # The tied tensor under the head's name alone: safetensors' save_model, its way to save a model whose
            # tensors share memory (save_file refuses them), keeps one name of each, for this model and transformers'
            # GPT2LMHeadModel "lm_head.weight". Such a file (which transformers loads) was "missing keys
            # ['transformer.wte.weight']" (hunt 49-g G4)
            given["transformer.wte.weight"] = given.pop(TIED_KEY)
        head = given.pop(TIED_KEY, None)
        missing, unexpected = sorted(expected - set(given)), sorted(set(given) - expected)
        if missing or unexpected:
            raise KeyError(f"checkpoint does not fit the model: missing keys {missing}, unexpected keys {unexpected}")
        wte = given["transformer.wte.weight"]
        if head is not None and (head.shape != wte.shape or not torch.equal(head, wte)):
            raise ValueError("lm_head.weight differs from transformer.wte.weight, but this model ties them")
        own = self.state_dict()
        wrong = [f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}"
                 for k, v in given.items() if v.shape != own[k].shape]
        if wrong:
            raise ValueError("checkpoint shapes do not fit the model: " + "; ".join(wrong))
        given[TIED_KEY] = wte
        self.load_state_dict(given, strict=True, assign=assign)
        self.lm_head.weight = self.transformer.wte.weight  # assign=True replaced both: tie again

    @classmethod
    def from_pretrained(cls, name_or_path: str, dropout: float = 0.0) -> "GPT":
        """OpenAI GPT-2 in the Hugging Face layout: a hub name (gpt2, gpt2-medium, gpt2-large,
        gpt2-xl; needs the network or the hub cache) or a local directory with config.json and
        model.safetensors (or pytorch_model.bin). See gpt.huggingface.from_pretrained."""
        from gpt.huggingface import from_pretrained  # (here: gpt.huggingface imports this module)

        return from_pretrained(name_or_path, dropout, model_class=cls)

    def save_pretrained(self, out_dir: str | Path, eot_token: int | None = None) -> None:
        """Write config.json + model.safetensors (and generation_config.json) that transformers.GPT2LMHeadModel
        loads, with `eot_token` (the tokenizer's end-of-text) as the config's eos_token_id. See
        gpt.huggingface.save_pretrained."""
        from gpt.huggingface import save_pretrained  # (here: gpt.huggingface imports this module)

        save_pretrained(self, out_dir, eot_token)


# -----------------------------------------------------------------------------
# Generation's helpers (see GPT.generate_tokens)


# The models inside a generate_tokens call (started, not yet finished or closed). Their KV caches, decode
# inputs, mode and prepacked weights belong to that call: a second generation on the same model, interleaved
# (a stream held open while another call runs) or from another thread, overwrote the first's caches, and
# one of the two went on from another sequence's keys in silence (hunt 35-c C7). Weak: a model that is
# freed leaves; a set rather than an attribute: copy.deepcopy and torch.save of the model stay as they were.
_GENERATING: "weakref.WeakSet[GPT]" = weakref.WeakSet()
_GENERATING_LOCK = threading.Lock()  # makes the check and the claim one step between threads


def _start_generating(model: GPT) -> None:
    with _GENERATING_LOCK:
        if model in _GENERATING:
            raise RuntimeError(
                "this model is generating already (a generate_tokens that has not finished, or another thread's "
                "generate): its KV caches hold that sequence. Finish or close() the first, or generate with a "
                "copy of the model (copy.deepcopy) or one thread at a time")
        _GENERATING.add(model)


@contextlib.contextmanager
def no_cudnn_attention():
    """scaled_dot_product_attention without its cuDNN backend while inside, for eager decoding on
    CUDA (see `GPT.generate_tokens`). Only that flag changes, and only where a backend that takes
    a mask (memory-efficient or math) stays on: other backend settings of the caller's are kept. The
    flags are global: where cuDNN is off already (another thread inside), it does nothing, so
    overlapping uses can never leave it off."""
    cuda = torch.backends.cuda
    turn_off = cuda.cudnn_sdp_enabled() and (cuda.mem_efficient_sdp_enabled() or cuda.math_sdp_enabled())
    if turn_off:
        cuda.enable_cudnn_sdp(False)
    try:
        yield
    finally:
        if turn_off:
            cuda.enable_cudnn_sdp(True)
