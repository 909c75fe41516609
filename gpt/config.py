"""Training configuration: one typed dataclass, overridden by a TOML preset and `--key=value` flags.

Names follow nanoGPT where the concept is the same, so its users feel at home. Everything is
checked before any work starts: unknown keys (with suggestions), wrong types, inconsistent values.
No config file is ever executed.
"""

from __future__ import annotations

import copy
import math
import os
import shlex
import typing
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import tomllib

from gpt.errors import TRAIN_OTHER_NAMES, ConfigError, did_you_mean, unquoted_value, unusable_path
from gpt.lora import scale_out_of_range as lora_scale_out_of_range
from gpt.model import FLOAT32_MAX, POS_ENCODINGS, qk_scale_underflow
from gpt.optim import LR_SCHEDULES, OPTIMIZERS
from gpt.tokenizer import TOKENIZER_NAMES

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
COMPILE_CHOICES = ("auto", "true", "regional", "reduce-overhead", "false")  # train.py's --compile (gpt/runtime.maybe_compile)


def opt(default, help: str):
    return field(default=default, metadata={"help": help})


@dataclass
class TrainConfig:
    # -- data and outputs
    data: str = opt("shakespeare", "'shakespeare' (embedded corpus), a prepared shard directory, "
                                   "or raw text (file, directory, .jsonl) prepared automatically")
    data_cache: str = opt("data/cache", "where raw text given as --data is prepared (reused while unchanged)")
    tokenizer: str = opt("shakespeare-bpe", "tokenizer for raw text: 'shakespeare-bpe' (1,024 ids), 'gpt2' or 'byte' "
                                            "(a shard directory brings its own)")
    out_dir: str = opt("out", "run directory: checkpoints, metrics.jsonl, config.json, loss.png")
    init_from: str = opt("scratch", "'scratch', 'resume' (latest checkpoint in out_dir), gpt2|gpt2-medium|"
                                    "gpt2-large|gpt2-xl, a Hugging Face GPT-2 directory, one of our run directories (its "
                                    "latest checkpoint) or a checkpoint directory")
    # -- model (ignored when starting from pretrained weights, which bring their own shape)
    n_layer: int = opt(4, "transformer blocks")
    n_head: int = opt(4, "attention heads per block")
    n_embd: int = opt(128, "embedding width")
    block_size: int = opt(128, "context length in tokens")
    dropout: float = opt(0.0, "dropout probability (0 for pretraining, ~0.1 for small data)")
    bias: bool = opt(False, "biases in Linear layers and LayerNorms (GPT-2 has them)")
    pos_encoding: str = opt("rope", "'learned' (GPT-2), 'sinusoidal' or 'rope' (rotary, Su et al. 2021)")
    activation: str = opt("gelu", "'gelu' (exact; ~2x faster GELU on CPUs) or 'gelu_tanh' (GPT-2's approximation)")
    qk_norm: bool = opt(True, "RMS-normalise queries and keys per head before attention (QK-norm; GPT-2 has none)")
    qk_scale: float = opt(2.0, "attention logits are q.k * qk_scale / sqrt(head size) (GPT-2: 1)")
    # -- optimisation
    batch_size: int = opt(16, "micro-batch size per process")
    gradient_accumulation_steps: int = opt(1, "micro-batches per optimizer step, summed over all processes")
    max_iters: int = opt(0, "optimizer steps in the run; 0 = as many as fit in time_budget")
    time_budget: float = opt(300.0, "with max_iters 0: seconds of wall-clock for the whole run, start-up included; "
                                    "the step count is fixed at the end of warmup, from the speed of its steps, and "
                                    "moved earlier if the run falls behind")
    learning_rate: float = opt(4e-3, "peak learning rate (AdamW's; Muon's is muon_learning_rate)")
    min_lr: float = opt(4e-4, "learning rate at the end of the cosine or wsd decay")
    warmup_iters: int = opt(50, "linear warmup steps")
    lr_decay_iters: int = opt(0, "step where the cosine or wsd decay reaches min_lr (0 = max_iters)")
    weight_decay: float = opt(0.1, "weight decay of the weight matrices only (by AdamW, and by Muon with "
                                            "optimizer muon), decoupled")
    beta1: float = opt(0.9, "AdamW beta1")
    beta2: float = opt(0.99, "AdamW beta2")
    grad_clip: float = opt(1.0, "clip the gradient norm to this (0 = off)")
    max_bad_steps: int = opt(10, "stop after this many consecutive steps with a non-finite loss or gradient")
    # -- optimizer, schedule and loss choices (issue 11; README "Optimizers, schedules, label smoothing")
    optimizer: str = opt("muon", "'muon': Muon on the blocks' weight matrices, AdamW on the rest; or 'adamw'")
    muon_learning_rate: float = opt(0.015, "Muon's peak learning rate (RMS-matched to AdamW's; same schedule)")
    lr_schedule: str = opt("cosine", "'cosine', 'noam' (Transformer paper: warmup, then 1/sqrt(step); peak "
                                     "learning_rate), 'wsd' (warmup, flat, decay at the end) or 'constant'")
    decay_fraction: float = opt(0.2, "wsd: the last fraction of the steps over which the rate decays to min_lr")
    label_smoothing: float = opt(0.0, "label smoothing of the training loss only; validation loss and bits "
                                      "per byte stay plain cross-entropy, so runs compare")
    # -- evaluation, logging, checkpoints
    eval_interval: int = opt(500, "steps between evaluations (and checkpoints)")
    eval_iters: int = opt(20, "validation batches of batch_size windows per evaluation, shared among processes")
    eval_only: bool = opt(False, "evaluate once and exit")
    log_interval: int = opt(10, "steps between metric records")
    keep_last: int = opt(2, "complete checkpoints kept besides the best one (>= 2)")
    sample_tokens: int = opt(0, "tokens of a sample printed at each evaluation (0 = none)")
    wandb_project: str = opt("", "log to this Weights & Biases project (needs wandb installed)")
    tensorboard: bool = opt(False, "also write TensorBoard events to out_dir/tb (needs tensorboard)")
    profile: int = opt(0, "record this many training steps with torch.profiler, from the run's 11th step (a "
                          "budgeted run's: from the end of its warmup; or from an evaluation due among them): the "
                          "costliest operators and kernels in out_dir/profile.txt, a trace in out_dir/profile.json "
                          "(0 = off)")
    # -- system
    device: str = opt("auto", "'auto' (cuda, then mps, then cpu), or e.g. 'cpu', 'cuda', 'cuda:1'")
    dtype: str = opt("auto", "'auto', 'float32', 'bfloat16' or 'float16' (fp16 uses a GradScaler)")
    compile: str = opt("auto", "torch.compile: 'auto' (on for CUDA), 'true' (the whole model), 'regional' (one "
                               "block's graph reused by every block, and the head with its loss: about half the "
                               "compile time, for short runs), 'reduce-overhead' (the whole model, its forward and "
                               "backward replayed from CUDA graphs: for small models whose steps wait on the host; "
                               "one process) or 'false'")
    seed: int = opt(1337, "random seed (data order, init, dropout)")
    fp8: bool = opt(False, "float8 matmuls in the blocks' Linear layers (torchao's float8 training; a GPU of compute "
                           "capability >= 8.9, e.g. H100, L4, RTX 40xx; runs on the CPU too, slowly); checkpoints stay plain")
    fp8_head: bool = opt(False, "with fp8: the head's matmul (the logits) in float8 too, as modded-nanogpt's speedrun "
                                "does (torchtitan and nanochat keep it in bf16); its gain and loss drift: bench.py train")
    deterministic: bool = opt(False, "deterministic kernels: identical runs give identical losses, also on a GPU, "
                                     "and a resume continues bit for bit; slower on a GPU (bench.py train --deterministic)")
    # -- fine-tuning
    lora_rank: int = opt(0, "LoRA rank: train only low-rank adapters (0 = full fine-tuning)")
    lora_alpha: float = opt(16.0, "LoRA scale numerator: updates are scaled by lora_alpha / lora_rank")
    lora_dropout: float = opt(0.0, "dropout on the LoRA branch")
    lora_base: str = opt("", "where a LoRA run's base is now, if it was moved: its run directory or its ckpt-* "
                             "directory, taken only where its weights' fingerprint is the one recorded (resume, or "
                             "--init_from a LoRA run); a resume records it in its next checkpoint")

    def __post_init__(self):
        self.validate()

    def validate(self, world_size: int = 1) -> None:
        """Raise ConfigError (a ValueError) listing every inconsistent value."""
        errors = []
        positive = ["n_layer", "n_head", "n_embd", "block_size", "batch_size", "gradient_accumulation_steps",
                    "eval_interval", "eval_iters", "log_interval", "max_bad_steps"]
        errors += [f"{k} must be > 0, got {getattr(self, k)}" for k in positive if getattr(self, k) <= 0]
        errors += [f"{k} must be >= 0, got {getattr(self, k)}" for k in
                   ("max_iters", "warmup_iters", "lr_decay_iters", "weight_decay", "grad_clip", "sample_tokens",
                    "lora_rank", "min_lr", "profile") if getattr(self, k) < 0]
        # Path("") is the current directory: --out_dir= would write (and prune) there, --init_from= fine-tune
        # whatever run is there, --data= prepare all of it
        errors += [f"{k} must not be empty" for k in ("out_dir", "data", "data_cache", "init_from")
                   if not getattr(self, k).strip()]
        errors += [f"{k} {getattr(self, k)}: {why}" for k in ("out_dir", "data", "data_cache", "init_from", "lora_base")
                   if getattr(self, k) and (why := unusable_path(getattr(self, k)))]
        if self.time_budget < 0:
            errors.append(f"time_budget must be >= 0, got {self.time_budget}")
        elif self.time_budget > MAX_TIME_BUDGET:  # (1e308 overflowed the plan; 5e20 hung it, deaf to Ctrl-C)
            got = f"{self.time_budget:,.0f}" if self.time_budget < 1e15 else f"{self.time_budget:g}"
            errors.append(f"time_budget must be at most {MAX_TIME_BUDGET:,} s (a year), got {got}")
        if self.max_iters == 0 and not self.eval_only:
            if self.time_budget <= 0:
                errors.append("max_iters 0 means 'as many steps as fit in time_budget', but time_budget is 0: "
                              "set one of them")
            elif self.warmup_iters < MIN_BUDGET_WARMUP:
                errors.append(f"max_iters 0 fixes the step count from the warmup's step times: warmup_iters must be "
                              f">= {MIN_BUDGET_WARMUP}, got {self.warmup_iters} (or set max_iters)")
        if self.n_head > 0 and self.n_embd % self.n_head:
            errors.append(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if not 0 <= self.dropout < 1:
            errors.append(f"dropout must be in [0, 1), got {self.dropout}")
        if not self.learning_rate > 0:
            errors.append(f"learning_rate must be > 0, got {self.learning_rate}")
        # (only where a schedule decays to it: noam and constant have no floor, and refuse a typed --min_lr,
        # so the default 4e-4 made every noam or constant run below that rate impossible: hunt 35-e E2)
        if self.lr_schedule in ("cosine", "wsd") and self.min_lr > self.learning_rate:
            # with the way on: a fine-tune's rate typed alone (3e-5, as the from-scratch recipe's note advises) met
            # the default min_lr 4e-4 and was refused without a word of min_lr's (hunt 48-d D2)
            errors.append(f"min_lr ({self.min_lr}) must not exceed learning_rate ({self.learning_rate}): the decay "
                          f"ends at min_lr; give a lower --min_lr (--min_lr={self.learning_rate / 10:.3g} is a tenth "
                          "of it, as the defaults have)")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            errors.append(f"beta1 and beta2 must be in [0, 1), got {self.beta1}, {self.beta2}")
        if not self.muon_learning_rate > 0:
            errors.append(f"muon_learning_rate must be > 0, got {self.muon_learning_rate}")
        elif self.learning_rate > 0 and (why := decay_out_of_range(self)):
            errors.append(why)
        if not 0 < self.qk_scale <= FLOAT32_MAX:
            errors.append(f"qk_scale must be > 0 and finite in float32, got {self.qk_scale}")
        elif self.n_head > 0 and (why := qk_scale_underflow(self.qk_scale, max(self.n_embd // self.n_head, 1))):
            errors.append(f"qk_scale {why}")  # (hunt 43-e E2)
        if not 0 < self.decay_fraction <= 1:
            errors.append(f"decay_fraction must be in (0, 1], got {self.decay_fraction}")
        if not 0 <= self.label_smoothing < 1:
            errors.append(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.keep_last < 2:
            errors.append(f"keep_last must be >= 2 so a failed save always leaves one behind, got {self.keep_last}")
        errors += [f"{k} must be one of {', '.join(v)}, got {getattr(self, k)!r}"
                   for k, v in NAMED_OPTIONS.items() if getattr(self, k) not in v]
        if not 0 <= self.seed <= 2**64 - world_size:  # rank r seeds with seed + r; numpy wants it >= 0, torch < 2**64
            errors.append(f"seed must be in [0, 2**64 - {world_size}], got {self.seed}")
        if self.compile == "reduce-overhead" and world_size > 1:
            errors.append("compile=reduce-overhead runs in one process: under torchrun use --compile=true (CUDA "
                          "graph trees with DDP's all-reduce hooks are not supported here: pytorch/pytorch#128218)")
        if self.gradient_accumulation_steps > MAX_ACCUMULATION:  # (10**23 was a traceback at the first micro-step,
            # "int too big to convert"; 10**13 held its first step for good, deaf to one signal: hunt 49-b B1)
            errors.append(f"gradient_accumulation_steps must be at most {MAX_ACCUMULATION:,} micro-batches a step, got "
                          f"{self.gradient_accumulation_steps:,}: for more tokens a step, raise --batch_size")
        elif self.gradient_accumulation_steps % world_size:
            errors.append(f"gradient_accumulation_steps ({self.gradient_accumulation_steps}) must be divisible by "
                          f"the number of processes ({world_size}): each process runs an equal share")
        # (else LoRAConfig refuses them mid-setup, with a traceback). Each named alone: --lora_dropout=1.0 was told
        # "lora_alpha must be finite and > 0 and lora_dropout in [0, 1), got 16.0, 1.0" (hunt 51-f L4)
        alpha_fits = 0 < self.lora_alpha < float("inf")
        if not alpha_fits:
            errors.append(f"lora_alpha must be finite and > 0, got {self.lora_alpha}")
        if not 0 <= self.lora_dropout < 1:
            errors.append(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if alpha_fits and self.lora_rank > 0 and (why := lora_scale_out_of_range(self.lora_alpha, self.lora_rank)):
            errors.append(f"lora_alpha / lora_rank {why}")
        if self.pos_encoding == "sinusoidal" and self.n_embd % 2:
            errors.append(f"n_embd must be even for sinusoidal positions, got {self.n_embd}")
        if self.pos_encoding == "rope" and self.n_head > 0 and (self.n_embd // self.n_head) % 2:
            errors.append(f"rotary positions need an even head size, got n_embd / n_head = {self.n_embd // self.n_head}")
        if self.fp8_head and not self.fp8:
            errors.append("fp8_head puts the head in float8 beside the blocks: it needs fp8=true")
        if self.fp8 and (self.batch_size * self.block_size) % 16:
            # torch._scaled_mm on CUDA needs its inner size to be a multiple of 16, and the weights'
            # gradient in float8 multiplies over the micro-batch's tokens (the CPU would not notice)
            errors.append(f"fp8: the weights' gradients are float8 matmuls over the micro-batch's batch_size x "
                          f"block_size = {self.batch_size * self.block_size} tokens, which must be a multiple of 16 "
                          "(or --fp8=false)")
        if self.fp8 and self.lora_rank:
            errors.append("fp8 speeds up training all the weights; with lora_rank the base weights are frozen: "
                          "use one or the other")
        if self.lora_base and self.init_from == "scratch":  # (hunt 36-c A6)
            errors.append("lora_base points to where a LoRA checkpoint's base is now: it applies to --init_from=resume "
                          "of a LoRA run, or --init_from a LoRA run")
        if self.lora_rank and self.init_from == "scratch":
            errors.append("lora_rank needs pretrained weights: set init_from (gpt2, a directory or a checkpoint)")
        if self.eval_only and self.init_from == "scratch":  # (it scored a new random model as if it were the
            # out_dir's run: hunt 32-c F10)
            errors.append("eval_only evaluates trained weights: give --init_from=resume (the run in out_dir), a run "
                          "or checkpoint directory, a Hugging Face model or a hub name")
        if errors:
            raise ConfigError("invalid configuration:\n  " + "\n  ".join(errors))

    def to_dict(self) -> dict:
        return asdict(self)


# The options whose values are names from a list, which another version of the project may add to.
NAMED_OPTIONS = {"tokenizer": TOKENIZER_NAMES, "pos_encoding": POS_ENCODINGS, "activation": ("gelu", "gelu_tanh"),
                 "optimizer": OPTIMIZERS, "lr_schedule": LR_SCHEDULES,
                 "dtype": ("auto", "float32", "bfloat16", "float16"), "compile": COMPILE_CHOICES}


def another_versions_values(saved: dict) -> list[str]:
    """The names a checkpoint's train config (meta.json's "config", converted by saved_config) gives a named option's
    value that this version does not have but another may (lr_schedule 'trapezoid'): a resume said "invalid
    configuration: lr_schedule must be one of ...", naming no file, as if the user had typed it (hunt 48-d D3)."""
    return [f"{k} {v!r}" for k, names in NAMED_OPTIONS.items() if isinstance(v := saved.get(k), str) and v not in names]


def options_unknown_here(saved: dict) -> list[str]:
    """The options of a checkpoint's train config that this version does not have. No option has been removed since
    the first TrainConfig (1f78017), so each is a newer version's, or an edit: a resume leaves them out (train.py
    says so: it resumed without them, under another recipe than the run's, without a word: hunt 48-d D3)."""
    return sorted(set(saved) - {f.name for f in fields(TrainConfig)})


def decay_out_of_range(cfg: TrainConfig) -> str | None:
    """Why weight_decay is too large for the peak rate it is applied at, or None. AdamW and Muon decay
    decoupled, multiplying the weights by 1 - rate x weight_decay at each step: from a product of 1 on that
    factor is 0 or negative, and the weights are wiped or flip sign at every step. Such a run trained on
    without a word: weight_decay 150 with Muon's 0.015 (a factor of -1.25) left the validation loss of a
    tiny model at 5.29 after 40 steps, against 2.91 with 0.1 (hunt 44-f F1). A Muon run's matrices decay at
    muon_learning_rate (a LoRA run's adapters are AdamW's, at learning_rate)."""
    rates = {"learning_rate": cfg.learning_rate}
    if cfg.optimizer == "muon" and not cfg.lora_rank:
        rates["muon_learning_rate"] = cfg.muon_learning_rate
    name, rate = max(rates.items(), key=lambda item: item[1])
    if rate * cfg.weight_decay < 1:
        return None
    return (f"weight_decay ({cfg.weight_decay:g}) x {name} ({rate:g}) must be < 1: each step multiplies the weights by "
            f"1 - {name} x weight_decay = {1 - rate * cfg.weight_decay:g}, which wipes them or flips their sign")


# --max_iters=0 times the warmup's steps, the first fifth left out (they are slow: allocations,
# thread pools); ten warmup steps leave eight to time.
MIN_BUDGET_WARMUP = 10
# The longest --time_budget: a year, far beyond any run, and far below where the plan's float
# arithmetic (gpt/runtime.steps_in_budget) stops telling one step from the next.
MAX_TIME_BUDGET = 365 * 24 * 3600
# The most micro-batches a step (hunt 49-b B1): 500x the 2,048 that a step of the largest published batch (Llama 3's
# 16M tokens) takes in one process from micro-batches of one 8,192-token window. A million micro-steps of the tests'
# tiny CPU model (3.3 ms each) are 54 min for one step; 10**23 was a traceback.
MAX_ACCUMULATION = 1_000_000


def describe_options() -> str:
    """Every option with its type, default and description, for --help; --config first, which is no field
    (hunt 41-a A9)."""
    hints = typing.get_type_hints(TrainConfig)
    config = ["  --config=NAME".ljust(42) + f"{'str':<6} a preset applied first, the other options on top: "
              f"configs/NAME.toml ({presets()}) or a TOML file's path"]
    return "\n".join(config + [f"  --{f.name}={f.default!r}".ljust(42) + f"{hints[f.name].__name__:<6} "
                               f"{f.metadata['help']}" for f in fields(TrainConfig)])


TRUE_WORDS, FALSE_WORDS = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def parse_bool(text: str) -> bool:
    """The one spelling of booleans on every command line (train.py, sample.py)."""
    if text.lower() in TRUE_WORDS:
        return True
    if text.lower() in FALSE_WORDS:
        return False
    raise ConfigError(f"expected true or false, got {text!r}")


# Options that are 'auto' or a boolean, stored as the strings "auto", "true", "false".
AUTO_BOOL_OPTIONS = ("compile",)


def parse_auto_bool(text: str) -> str:
    """'auto' or any spelling parse_bool accepts (nanoGPT users type --compile=False) -> "auto",
    "true" or "false"; anything else is returned as is, for the caller's choices check."""
    if text.lower() in ("auto", "regional", "reduce-overhead"):  # regional, reduce-overhead: train.py's --compile only
        return text.lower()
    if text.lower() in TRUE_WORDS + FALSE_WORDS:
        return str(parse_bool(text)).lower()
    return text


def parse_int(text: str) -> int:
    """Integers on the command line; underscores allowed (100_000)."""
    return int(text.replace("_", ""))


def _toml_bool_int(value) -> bool:
    """A TOML integer 0 or 1 given for a boolean: "1" and "0" are boolean words on the command line,
    so the same digits unquoted in a preset mean the same (hunt, session 24: `bias = 1` was refused
    while `bias = "1"` passed). Other integers (2) stay errors: no C-style truthiness."""
    return isinstance(value, int) and not isinstance(value, bool) and value in (0, 1)


def _value_error(key: str, value, problem: str, where: str | None) -> ConfigError:
    """A value that does not convert: `--key problem, got value` for the command line; for a preset,
    `key = value in FILE: problem`, the key as written there and the file named, as an unknown key's
    message names it (hunt, session 24: `bias = "maybe"` in a preset said only "--bias expects bool")."""
    if where is None:
        return ConfigError(f"--{key} {problem}, got {value!r}")
    return ConfigError(f"{key} = {value!r} in {where}: {problem}")


def _convert(key: str, value, kind: type, where: str | None = None):
    """A TOML value (from the preset `where`) or a command-line string (where None) -> the field's
    type, or ConfigError."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in TRUE_WORDS + FALSE_WORDS:
            return parse_bool(value)
        if _toml_bool_int(value):  # `bias = 1` in a preset, as the README promises (hunt, session 24)
            return bool(value)
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return parse_int(value)
            except ValueError:
                pass
    elif kind is float:
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                pass
        if number is not None:
            # nan and inf pass every `x < 0` check (all False for nan) and end in tracebacks later
            if not math.isfinite(number):
                raise _value_error(key, value, "must be a finite number", where)
            return number
    elif kind is str:
        if isinstance(value, str):
            return parse_auto_bool(value) if key in AUTO_BOOL_OPTIONS else value
        if isinstance(value, bool):
            return str(value).lower()  # e.g. compile = true in TOML
        if key in AUTO_BOOL_OPTIONS and _toml_bool_int(value):  # compile = 0, as --compile=0 (hunt, session 24)
            return str(bool(value)).lower()
    raise _value_error(key, value, f"expects {kind.__name__}", where)


LIST_OPTIONS = "train.py --help lists them"
# The options whose value is a name of the run's own making, any text: a word typed after one unquoted is its value's
# rest (gpt.errors.unquoted_value); after another option's value only where the words joined name a path that is there.
NAMES_TO_MAKE = ("out_dir", "data_cache", "wandb_project")


def _check_keys(keys, where: str, command_line: bool = False) -> None:
    valid = [f.name for f in fields(TrainConfig)]
    for key in keys:
        if key not in valid:
            # (--confg: no hint before, hunt 41-d D3)
            hint = did_you_mean(key, valid + ["config"] * command_line, other_names=TRAIN_OTHER_NAMES)
            # one line, as sample.py's argparse says it: the 56-line options table after a typo buried its hint
            # (hunt 43-e N1); --help has the table
            raise ConfigError(f"unknown option --{key} in {where}{hint}; {LIST_OPTIONS}")


def load_preset(name_or_path: str) -> tuple[dict, dict]:
    """A TOML preset: a path, or a name in configs/ (e.g. 'gpt2-124m') -> (its values, its [lora] table: the
    values it takes instead in a LoRA run, see parse_args)."""
    path = preset_path(name_or_path)
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError as e:  # (a traceback before: hunt 28-a)
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror or e}") from None
    lora = values.pop("lora", {})
    if not isinstance(lora, dict):
        raise ConfigError(f"{path}: lora must be a table of options ([lora], then key = value lines), got {lora!r}")
    _check_keys(values, str(path))
    _check_keys(lora, f"{path}'s [lora] table")
    return values, lora


def presets() -> str:
    """The preset names in configs/, for messages."""
    return ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.toml")))


def preset_training(out_dir: str) -> str | None:
    """The command that trains the run a preset writes to out_dir, as the preset's opening comment gives it (else
    `python train.py --config=NAME`); None for the default's out/ and a directory no preset writes to. sample.py
    --out_dir=out-instruct with nothing there said "train one with: python train.py --out_dir=out-instruct", a run
    from scratch on Shakespeare, not the instruction tuning the directory is named for (hunt 49-l L2)."""
    for path in sorted(CONFIG_DIR.glob("*.toml")):
        text = path.read_text(encoding="utf-8")
        preset_out = tomllib.loads(text).get("out_dir")
        if preset_out and preset_out != TrainConfig.out_dir and Path(preset_out) == Path(out_dir):
            command = f"python train.py --config={path.stem}"
            said = [line.strip("# ") for line in text.splitlines() if line.strip("# ").startswith(command + " ")]
            return said[0] if said else command
    return None


def preset_path(name_or_path: str) -> Path:
    """The file of a preset: the path given, or configs/NAME.toml; ConfigError listing the presets."""
    path = Path(name_or_path)
    if why := unusable_path(path):
        raise ConfigError(f"config file {name_or_path!r}: {why}")
    # a folder of that name where train.py runs (a `finetune/` beside one's data) is not a preset file:
    # it shadowed the preset, an IsADirectoryError traceback (hunt 28-a)
    if not path.is_file() and (CONFIG_DIR / f"{name_or_path}.toml").exists():
        path = CONFIG_DIR / f"{name_or_path}.toml"
    if not path.exists():
        raise ConfigError(f"config file {name_or_path!r} not found; presets: {presets()}")
    return path


# The values parse_args puts in while it reads a resume's options (see there): each passes every check that
# weighs it against another option.
RESUME_PUT_OFF = {"weight_decay": 0.0, "min_lr": 0.0, "fp8_head": False}
# And the architecture's options checked against one another (n_embd by n_head, an even head size, qk_scale at the head
# size), each where it is right on its own: a resume compares them with its weights' instead (resume_config).
RESUME_SHAPE_PUT_OFF = {"n_embd": lambda v: v > 0, "n_head": lambda v: v > 0,
                        "qk_scale": lambda v: 0 < v <= FLOAT32_MAX, "pos_encoding": lambda v: v in POS_ENCODINGS}


def parse_args(argv: list[str]) -> tuple[TrainConfig, set[str]]:
    """`[--config FILE] --key=value ...` -> (config, the keys the user set). Later values win:
    dataclass defaults < preset file < command line."""
    preset, overrides, i = None, {}, 0
    hints = typing.get_type_hints(TrainConfig)
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--"):
            raise ConfigError(unquoted_value(argv, i, text=NAMES_TO_MAKE)  # (`--out_dir=my run`)
                              or f"unexpected argument {arg!r}: options are --key=value; {LIST_OPTIONS}")
        typed, eq, value = arg[2:].partition("=")
        key = typed.replace("-", "_")
        if key != "config":
            _check_keys([key], "the command line", command_line=True)
        if not eq:  # also accept "--key value"
            # ... but not "--key --other": nanoGPT's bare `--bias` before another option took that option
            # as its value ("--bias expects bool, got '--n_layer=1'"; a string option kept it silently).
            # A value that begins with -- can still be given as --key=VALUE (hunt, session 24)
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                if hints.get(key) is bool:
                    raise ConfigError(f"--{typed} needs a value: --{typed}=true or --{typed}=false")
                raise ConfigError(f"--{typed} needs a value (--{typed}=VALUE)")
            value, i = argv[i + 1], i + 1
        if key == "config":
            if not value.strip():  # (it ran with no preset: hunt 28-a F10)
                raise ConfigError(f"--{typed} is empty: give a preset's name ({presets()}) or a TOML file")
            if preset is not None and value != preset:
                # presets do not add up: the last one was applied alone, the first dropped without a word (hunt 48-d D4)
                raise ConfigError(f"--config given twice ({preset}, {value}): a run takes one preset, with --key=value "
                                  "options on top; for both, copy the values you want into one TOML file")
            preset = value
        else:
            overrides[key] = value
        i += 1
    # A preset's values convert naming its file, the command line's naming the option; a preset's
    # value the command line overrides is not read, as before (hunt, session 24)
    where = str(preset_path(preset)) if preset else None  # (the file, found once)
    preset_values, lora_values = load_preset(where) if where else ({}, {})
    converted = {k: _convert(k, v, hints[k], where) for k, v in preset_values.items() if k not in overrides}
    converted.update({k: _convert(k, v, hints[k]) for k, v in overrides.items()})
    # A preset's [lora] table holds its values for a LoRA run, under what is typed: adapters train at some ten times
    # a full fine-tune's rate (the LoRA paper's GPT-2 runs: 2e-4, Hu et al. 2021, table 11), and the finetune
    # preset's 3e-5 with --lora_rank=8, as its own comment said to add, hardly moved them (hunt 49-a)
    if converted.get("lora_rank", 0) > 0:
        converted.update({k: _convert(k, v, hints[k], f"{where}'s [lora] table") for k, v in lora_values.items()
                          if k not in overrides})
    converted = home_expanded(converted)
    keys = set(converted)
    # A resume's options meet the saved run's count, not the default's 0 nor a budget preset's (which a
    # resume does not apply either): a resume given only --warmup_iters=2 was refused against the
    # default's budget (review 31), and with --config=shakespeare-cpu against the preset's (hunt 34-b B6).
    # A count is put in for the check; resume_config puts the saved count in and checks the merged config.
    resuming = converted.get("init_from") == "resume"
    counted = resuming and "max_iters" not in overrides
    # And a resume's values checked against others that only the saved config holds: its weight_decay against the run's
    # optimizer and learning rates (checked against the defaults' Muon rate, an AdamW run at 3e-3 started with
    # --weight_decay=100 was refused its resume with the same value: hunt 44-h H2); its min_lr against the run's
    # learning_rate and the other way round (a run at 1e-2 resumed with --min_lr=5e-3 was refused, "must not exceed
    # learning_rate (0.004)", the default's; one whose min_lr is 1e-4 with --learning_rate=2e-4); its fp8_head beside the
    # run's fp8 (--fp8_head=true on an fp8 run: "it needs fp8=true": hunt 46-a A1). Each is put in as a value that
    # passes those checks, then put back; resume_config checks the merged config. A negative one is refused at once.
    put_off = {k: v for k, v in RESUME_PUT_OFF.items() if resuming and not converted.get(k, 0) < 0}
    # A resume's architecture is its weights': what is typed is compared with them (resume_config), not checked here
    # against the defaults' other sizes, where a resume given the run's own --n_head=3 (n_embd 48) was refused, "n_embd
    # (128) must be divisible by n_head (3)", and one given --n_head=6 so, not as another architecture (hunt 46-a A4)
    shape = {k: converted[k] for k, right in RESUME_SHAPE_PUT_OFF.items()
             if resuming and k in converted and right(converted[k])}
    cfg = TrainConfig(**{**{k: v for k, v in converted.items() if k not in shape},
                         **({"max_iters": 10**9} if counted else {}), **put_off})
    for k, v in shape.items():
        setattr(cfg, k, v)
    if counted and "max_iters" in converted:
        cfg.max_iters = converted["max_iters"]  # the preset's, as read (preset_not_applied names it)
    for k in put_off:
        setattr(cfg, k, converted.get(k, getattr(TrainConfig, k)))
    return cfg, keys


def command_line_keys(argv: list[str]) -> set[str]:
    """The options set on the command line itself, not by a preset (--config) or a default."""
    return {a[2:].partition("=")[0].replace("-", "_") for a in argv if a.startswith("--")} - {"config"}


def without_options(argv: list[str], keys: set[str]) -> list[str]:
    """argv without the options named (as --key=value, --key value, or with hyphens for underscores)."""
    kept, i = [], 0
    while i < len(argv):
        typed, eq, _ = argv[i][2:].partition("=") if argv[i].startswith("--") else ("", "", "")
        if typed.replace("-", "_") in keys:
            i += 1 if eq or i + 1 >= len(argv) or argv[i + 1].startswith("--") else 2
            continue
        kept.append(argv[i])
        i += 1
    return kept


# Options that only act beside another's value: typed without it, they were ignored in silence
# (hunt 28-a F10), as --time_budget beside --max_iters would be, which is refused too.
APPLIES_ONLY = {
    "decay_fraction": ("lr_schedule", ("wsd",)),
    "min_lr": ("lr_schedule", ("cosine", "wsd")),
    "lr_decay_iters": ("lr_schedule", ("cosine", "wsd")),
    "muon_learning_rate": ("optimizer", ("muon",)),
}


def check_options_apply(cfg: TrainConfig, typed: set[str]) -> None:
    """ConfigError for each option typed on the command line that this run would ignore: a preset's
    values are not checked (a preset serves several schedules), and a resumed run is checked with
    its saved config (its lr_schedule, its LoRA rank). And a cosine or wsd decay that ends within the
    warmup, wherever lr_decay_iters and warmup_iters come from."""
    def way(on: str, give: str) -> str:  # (a resume keeps its optimizer and LoRA rank: review 29)
        if cfg.init_from == "resume" and on in RESUME_FIXED:
            return f"leave it out (a resumed run keeps its --{on})"
        return f"leave it out, or give {give}"

    errors = [f"--{k} applies to LoRA runs, and this run trains every weight: " + way("lora_rank", "--lora_rank")
              for k in ("lora_alpha", "lora_dropout") if k in typed and not cfg.lora_rank]
    if cfg.eval_only:  # an evaluation has no optimizer nor schedule: their options are taken and not used, so that
        # --eval_only=true may be added to a command (README), where `--min_lr` beside a constant schedule was refused
        # (hunt 49-l L3)
        if errors:
            raise ConfigError("; ".join(errors))
        return
    errors += [f"--{k} applies to --{on}={' or '.join(values)}, and this run's --{on} is {getattr(cfg, on)}: "
               + way(on, f"--{on}={' or '.join(values)}") for k, (on, values) in APPLIES_ONLY.items()
               if k in typed and getattr(cfg, on) not in values]
    if "muon_learning_rate" in typed and cfg.lora_rank and cfg.optimizer == "muon":  # (ignored: hunt 34-b B13)
        errors.append("--muon_learning_rate applies to Muon, and this LoRA run trains only its adapters, which AdamW "
                      "trains at --learning_rate: " + way("lora_rank", "--lora_rank=0"))
    # (the rate dropped from the warmup's ramp straight to min_lr: hunt 29-a.) Wherever the two values come from: with
    # lr_decay_iters from a preset, or --warmup_iters typed past a preset's or a resumed run's lr_decay_iters, it
    # dropped so without a word (2.73e-3 to 3e-4 at step 10 of a preset's warmup 10, lr_decay_iters 5: hunt 44-f F3)
    if cfg.lr_schedule in ("cosine", "wsd") and 0 < cfg.lr_decay_iters <= cfg.warmup_iters:
        errors.append(f"--lr_decay_iters={cfg.lr_decay_iters} ends the decay within the {cfg.warmup_iters}-step "
                      "warmup, before it begins: give a larger one, or fewer --warmup_iters")
    if errors:
        raise ConfigError("; ".join(errors))


def fit_accumulation(cfg: TrainConfig, world_size: int, user_set: bool) -> tuple[TrainConfig, int | None]:
    """Under torchrun each process runs gradient_accumulation_steps / world_size micro-batches. A
    value the user did not set (the default 1, a preset's) that does not split evenly becomes the
    smallest multiple of world_size above it; a value the user set stays as it is, for validate() to
    refuse (issue 10). Returns the config and the value replaced, if any, for `accumulation_note`."""
    steps = cfg.gradient_accumulation_steps
    if user_set or world_size <= 1 or steps % world_size == 0:
        return cfg, None
    return replace(cfg, gradient_accumulation_steps=-(-steps // world_size) * world_size), steps


def accumulation_note(cfg: TrainConfig, replaced: int, world_size: int) -> str:
    """What fit_accumulation changed, in tokens per step of `cfg` as it trains: said once the
    context is fitted to the weights (a preset's block_size said 512 -> 1,024 tokens where 256 -> 512
    trained: hunt 30-b F3)."""
    fitted = cfg.gradient_accumulation_steps
    tokens = cfg.batch_size * cfg.block_size
    # each process's share is fitted / world_size micro-batches, not always one: a preset's 3 on 2
    # processes said "(one share each)" for 2 each (hunt, session 24); one stays "one share each"
    share = fitted // world_size
    each = "one share each" if share == 1 else f"{share} micro-batches each"
    return (f"gradient_accumulation_steps {replaced} -> {fitted}, the smallest multiple of {world_size} processes "
            f"({each}): tokens per step {tokens * replaced:,} -> {tokens * fitted:,}; "
            "set --gradient_accumulation_steps to choose")


def fit_compile(cfg: TrainConfig, device_type: str, distributed: bool, user_set: bool) -> tuple[TrainConfig, str | None]:
    """CUDA graphs (compile=reduce-overhead) replay a step in one process on one CUDA device. A value
    not typed on the command line (the shakespeare-gpu preset's, or a resumed run's) becomes 'auto'
    under torchrun, with a note, and off CUDA (MPS, the CPU) without one, where the run's start line
    says what compiles: the preset then runs as it did before it chose graphs (issue 9). A value
    typed stays, for validate() to refuse under torchrun."""
    if user_set or cfg.compile != "reduce-overhead" or (device_type == "cuda" and not distributed):
        return cfg, None
    note = ("compile reduce-overhead -> auto under torchrun: CUDA graphs replay a step in one process; set --compile "
            "to choose") if distributed else None
    return replace(cfg, compile="auto"), note


def fit_block_size(cfg: TrainConfig, context: int, preset_set: bool, user_set: bool) -> tuple[TrainConfig, str | None]:
    """The training window, as cfg.block_size (so config.json and the checkpoints record the one
    used), for a model of context `context`. From scratch or resumed it is cfg's (the model was
    built with it). From pretrained weights: a --block_size given on the command line (`user_set`),
    refused above the context; a preset's (finetune's 256, instruct's 512: `preset_set`), capped at
    the context with a note; with neither, the pretrained context itself."""
    note = None
    if cfg.init_from in ("scratch", "resume") or user_set:
        fitted = cfg.block_size
    elif not preset_set:
        fitted = context
    else:
        fitted = min(cfg.block_size, context)
        if fitted < cfg.block_size:
            note = (f"block_size {cfg.block_size} (the preset's) -> {context}, the context of {cfg.init_from}; "
                    "set --block_size to choose")
    if fitted > context:
        raise ConfigError(f"block_size {fitted} exceeds the model's context of {context}")
    return replace(cfg, block_size=fitted), note


# What a resumed run may not change: the weights, the optimizer state and the data position
# would no longer fit. (Fine-tuning a finished run on new data is init_from=<its out_dir>.)
RESUME_FIXED = ("n_layer", "n_head", "n_embd", "block_size", "bias", "pos_encoding", "activation", "qk_norm",
                "qk_scale", "tokenizer", "data", "lora_rank", "lora_alpha")
# The optimizer too: its saved state fits only the optimizer that wrote it. And the seed: the run
# continues the saved data order and random streams, so another seed was recorded but not used
# (hunt 28-a F8); it is a new run from these weights.
RESUME_FIXED += ("optimizer", "seed")
# What runs saved before an option existed used (so resuming them keeps their recipe even where
# the default changed since).
BEFORE_OPTION = {"optimizer": "adamw", "lr_schedule": "cosine", "label_smoothing": 0.0, "qk_norm": False,
                 "qk_scale": 1.0}


# The architecture options whose truth is the checkpoint's model config rather than its train
# config: they differ for a run started from pretrained weights (which bring their own shape) and
# for runs saved before an option existed (activation: GPT-2's tanh GELU, the GPTConfig default).
MODEL_KEYS = ("n_layer", "n_head", "n_embd", "bias", "pos_encoding", "activation", "qk_norm", "qk_scale")


def preset_not_applied(parsed: TrainConfig, resumed: TrainConfig, preset_keys: set[str]) -> str | None:
    """The note for a --config preset given to a resumed run (`resume_config` does not apply its
    values): those that differ from the run's, which it keeps (an ignored preset was not said:
    hunt 31-c F8)."""
    differ = [k for k in sorted(preset_keys)
              if k not in ("init_from", "out_dir", "eval_only") and getattr(parsed, k) != getattr(resumed, k)]
    if not differ:
        return None
    said = {k: f"{k} {getattr(resumed, k)!r} (the preset's {getattr(parsed, k)!r})" for k in differ}
    # The way on differs: an option typed on resume changes the others, but RESUME_FIXED's are refused there,
    # so "give an option on the command line" sent a user to that refusal (hunt 41-a A6)
    changeable = [said[k] for k in differ if k not in RESUME_FIXED]
    # A new run from the weights takes their shape, their tokenizer and at most their context: "a new run from its
    # weights can" was said of n_layer and of finetune's block_size 256 on a run of 32, which it refuses (hunt 41-d D4)
    weights_fix = [said[k] for k in differ if k in (*MODEL_KEYS, "tokenizer")
                   or k == "block_size" and getattr(parsed, k) > getattr(resumed, k)]
    fixed = [said[k] for k in differ if k in RESUME_FIXED and said[k] not in weights_fix]
    ways = [f"{', '.join(changeable)}; give an option on the command line to change it"] if changeable else []
    ways += [f"{', '.join(fixed)}, which a resume cannot change (a new run from its weights can)"] if fixed else []
    ways += [f"{', '.join(weights_fix)}, which its weights fix (a new run from scratch can change them)"] \
        if weights_fix else []
    return "a --config preset is not applied to a resumed run, which keeps its own values: " + "; and ".join(ways)


def preset_as_resumed(argv: list[str], parsed: TrainConfig, keys: set[str],
                      resumed: TrainConfig) -> tuple[TrainConfig, set[str]]:
    """parse_args(argv)'s (config, keys) as its preset applies to the resumed run: for a LoRA run resumed without
    --lora_rank (the run's own), with the preset's [lora] table, whose rates started it. preset_not_applied compared
    such a run's 2e-4 with the finetune preset's full fine-tune 3e-5 as "the preset's", and said to give it (hunt 49-h
    H2). Where that parse is refused (a [lora] value of a preset not applied), the parse as it was."""
    if not resumed.lora_rank or parsed.lora_rank:
        return parsed, keys
    try:
        with_lora, lora_keys = parse_args([*argv, f"--lora_rank={resumed.lora_rank}"])
    except ConfigError:
        return parsed, keys
    return with_lora, lora_keys - {"lora_rank"}  # (the run's, not the preset's)


# What moves the weights, which a new run from a run's weights takes from the defaults unless given: its
# optimizer, learning rates and their schedule's shape, regularisation, and LoRA (the adapters' rates are not
# for every weight). Not the schedule's length (max_iters, lr_decay_iters, decay_fraction): a new run's own.
RECIPE_KEYS = ("optimizer", "learning_rate", "muon_learning_rate", "lr_schedule", "min_lr", "warmup_iters",
               "weight_decay", "beta1", "beta2", "grad_clip", "label_smoothing", "dropout", "lora_rank", "lora_alpha",
               "lora_dropout")


# The optimizer and its learning rates: a LoRA run's are its adapters', some ten times a full fine-tune's.
RATE_KEYS = ("optimizer", "learning_rate", "muon_learning_rate", "min_lr")


def rates_of_the_other_kind(saved: dict) -> str:
    """What advice for a new run of the other kind (LoRA from a run of every weight, or the other way round) says of
    the rates of the run whose config is `saved`, which it leaves out (resume_config)."""
    adamw = f"AdamW at {saved.get('learning_rate', TrainConfig.learning_rate):g}"
    if saved.get("lora_rank"):  # (a LoRA run's adapters train with AdamW, whatever its --optimizer: recipe_options)
        return (f"the run's learning rates ({adamw}) were its adapters', which take some ten times a full "
                "fine-tune's: give a full fine-tune's too (--config=finetune, or your own --optimizer, --learning_rate "
                "and --min_lr)")
    rates = adamw
    if saved.get("optimizer", TrainConfig.optimizer) == "muon":
        rates = f"Muon at {saved.get('muon_learning_rate', TrainConfig.muon_learning_rate):g} and {adamw}"
    return (f"the run's learning rates ({rates}) trained every weight, and adapters take some ten times a full "
            "fine-tune's: give a LoRA run's too (--config=finetune gives them with --lora_rank, or your own "
            "--learning_rate and --min_lr)")


def recipe_options(cfg: TrainConfig) -> list[str]:
    """cfg's RECIPE_KEYS that differ from the defaults, as options, each where it applies (as
    check_options_apply would take it typed)."""
    def applies(k: str) -> bool:
        if k in APPLIES_ONLY:
            on, values = APPLIES_ONLY[k]
            return getattr(cfg, on) in values and not (k == "muon_learning_rate" and cfg.lora_rank)
        return bool(cfg.lora_rank) if k in ("lora_alpha", "lora_dropout") else True
    return [f"--{k}={getattr(cfg, k)}" for k in RECIPE_KEYS if getattr(cfg, k) != getattr(TrainConfig, k) and applies(k)]


def scratch_recipe_note(cfg: TrainConfig, typed: set[str], preset_given: bool) -> str | None:
    """The note for a new run from pretrained weights at a from-scratch recipe: no --config preset and no
    optimizer or learning rate typed. `python train.py --init_from=gpt2 --data=notes/` (nanoGPT's way to
    fine-tune) trained GPT-2 with Muon at 0.015 and AdamW at 4e-3 on a CPU (the shakespeare-gpu preset's AdamW
    1e-3 on a GPU) without a word, the rates the finetune preset exists to avoid (hunt 47-c, left 1). Said,
    not refused: continuing a run's pretraining on more text at its own recipe is a choice."""
    if cfg.init_from in ("scratch", "resume") or preset_given or cfg.eval_only:
        return None
    if typed & {"optimizer", "learning_rate", "muon_learning_rate"}:
        return None
    if cfg.lora_rank:  # (the weights stay as they are: the adapters' rate is the question, hunt 49-h H8)
        return (f"--init_from={cfg.init_from} trains LoRA adapters at the from-scratch recipe (AdamW at "
                f"{cfg.learning_rate:g}, weight decay {cfg.weight_decay:g}), not at a fine-tune's rates; for those "
                "give --config=finetune (its [lora] table's), or your own --learning_rate and --min_lr")
    rates = f"AdamW at {cfg.learning_rate:g}"
    if cfg.optimizer == "muon":
        rates = f"Muon at {cfg.muon_learning_rate:g} and {rates}"
    return (f"--init_from={cfg.init_from} starts from trained weights at the from-scratch recipe ({rates}, "
            f"weight decay {cfg.weight_decay:g}, dropout {cfg.dropout:g}), rates that can undo what they learned; "
            "for a fine-tune give --config=finetune (small AdamW rates), or your own --optimizer, --learning_rate and "
            "--min_lr")


def new_run_from(out_dir, cfg: TrainConfig) -> str:
    """The options, quoted for a shell, that start a new run from out_dir's weights on cfg's data
    (its --data_cache too, where not the default) with cfg's recipe: the way on that refusals of a resume
    give. `--init_from=out_dir` alone was refused as printed ("out holds a run") and, with an --out_dir,
    trained on the default data (reviews, session 23); and at the defaults' rates: a fine-tune of AdamW at
    3e-5 (--config=finetune), refused its resume on edited text, was advised a run of Muon at 0.015 and
    AdamW at 4e-3, which that preset exists to avoid (hunt 47-c C4)."""
    return " ".join([f"--init_from={shlex.quote(str(out_dir))}", data_options(cfg), *recipe_options(cfg),
                     "--out_dir=<another directory>"])


def _prepared_tokenizer(data: str) -> str | None:
    """The tokenizer named by the meta.json of prepared data at `data`; None for raw text (prepared with the
    run's own tokenizer) or data that cannot be read (said where the data is read, not in advice)."""
    from gpt.shards import DataDir, holds_prepared_data
    try:
        return DataDir(data).tokenizer_name if data != "shakespeare" and holds_prepared_data(data) else None
    except (OSError, ValueError):  # (ShardError is a ValueError)
        return None


def data_options(cfg: TrainConfig) -> str:
    """--data, and --data_cache where not the default, quoted for a shell: a run's data in advice. Not beside
    data it does not prepare (the embedded plays, prepared data), where train.py refuses it (hunt 48-e E3)."""
    from gpt.shards import holds_prepared_data
    try:
        cached = cfg.data != "shakespeare" and not holds_prepared_data(cfg.data)
    except OSError:  # (a path that cannot be looked at: said where the data is read, not in advice)
        cached = True
    typed = cfg.data_cache != TrainConfig.data_cache
    cache = [f"--data_cache={shlex.quote(cfg.data_cache)}"] if cached and typed else []
    return " ".join([f"--data={shlex.quote(cfg.data)}", *cache])


PATH_OPTIONS = ("data", "out_dir", "data_cache", "init_from", "lora_base")


def home_expanded(values: dict) -> dict:
    """The path options' values with a leading ~ as the home directory. `--data=~/notes`: the shell
    leaves a ~ after = as it is, and train.py said "no such file" (hunt, session 27); --out_dir=~/x
    went into a folder named ~ here (hunt 34-b B9). A run saved with ~ in its config is read alike."""
    return {k: os.path.expanduser(v) if k in PATH_OPTIONS and isinstance(v, str) else v for k, v in values.items()}


def saved_config(saved: dict) -> dict:
    """A checkpoint's train config (meta.json's "config") with its values converted to the options'
    types, as a preset's are, or ConfigError: a hand-edited `"learning_rate": "abc"` was a TypeError
    traceback on resume, and `"max_iters": true` ran (hunt 28-a F6). Options this version does not have
    are kept as they are (options_unknown_here names them; resume_config leaves them out)."""
    hints = typing.get_type_hints(TrainConfig)

    def whole(k, v):  # 30.0 for 30, as some JSON tools write a whole number (review 29: the checkpoint was set aside)
        return int(v) if hints.get(k) is int and isinstance(v, float) and v.is_integer() else v

    return home_expanded({k: _convert(k, whole(k, v), hints[k], '"config"') if k in hints else v
                          for k, v in saved.items()})


def data_moved(saved: str, typed: str) -> bool:
    """Whether a resume's --data names the run's data where it was moved to: the saved path is gone,
    and the typed one is there. The loader's state then checks that it holds the same tokens (their
    count, windows and sha256: `TrainBatches.load_state_dict`), and raw text first that it is the text
    the run prepared (train.py: its cache's name is the hash of its contents); a moved directory could
    not be resumed at all (hunt 30-c F7). Raw text too: moved, or given by a relative path from another
    directory, its path now was refused as "different data", the way on a new run (hunt 35-a A5)."""
    return saved != "shakespeare" and not Path(saved).exists() and Path(typed).exists()


def resume_config(saved: dict, cfg: TrainConfig, user_keys: set[str], model_config: dict | None = None,
                  typed: set[str] | None = None) -> TrainConfig:
    """The config of a resumed run: the saved run's config (its architecture from model_config,
    the checkpoint's GPTConfig as a dict), with what the user set on top (e.g. a larger
    max_iters). Changing the architecture, tokenizer or data is refused. `typed`: the keys of
    user_keys set on the command line itself (None: all of them). A preset's (--config) are not
    put on top: the run started with them and has its own since, fitted (a preset's block_size cut
    to the weights' context, hunt 31-c F1; a budget's max_iters=0 fixed to a count, F5), so the
    command that started a run resumed it only where nothing had been fitted."""
    if typed is not None:  # (but what asks this invocation to evaluate only is the invocation's: review 31)
        user_keys = user_keys & (typed | {"eval_only"})
    saved = {**BEFORE_OPTION, **saved, **{k: model_config[k] for k in MODEL_KEYS if k in (model_config or {})}}
    changed = [k for k in RESUME_FIXED if k in user_keys and k in saved and saved[k] != getattr(cfg, k)
               # (an evaluation draws nothing at random, review 29, and steps no optimizer: hunt 49-l L3)
               and not (k in ("seed", "optimizer") and cfg.eval_only)
               and not (k == "data" and data_moved(saved[k], cfg.data))]
    if changed:
        # Weights keep their shape and tokenizer (and a context up to theirs): with another, the
        # way on is a new model, where --init_from was refused as printed (hunt, session 24)
        reshaped = [k for k in changed if k in (*MODEL_KEYS, "tokenizer") or k == "block_size" and cfg.block_size > saved[k]]
        # on the run's data unless another was typed: without --data the advice trained on the
        # default data (review, session 24)
        on = copy.copy(cfg)  # (not replace(), which checks it again: its typed sizes meet the defaults' there, A4)
        if "data" not in user_keys:
            on.data, on.data_cache = saved.get("data", cfg.data), saved.get("data_cache", cfg.data_cache)
        # From LoRA to every weight or back, the run's rates are the other kind's: a LoRA run's AdamW at 2e-4 (the
        # finetune preset's [lora] table) or 1e-2, refused with --lora_rank=0, was advised a full fine-tune at those,
        # some ten times a full fine-tune's rate, and the new run's note on a from-scratch recipe was silenced by them
        # (hunt 52-l L2). They are left out, but for those typed: the new run says what it then trains at. (Left out
        # only where none was typed, a typed --min_lr or --optimizer brought the adapters' learning rate back into a
        # full fine-tune's advice: hunt 52-y Y4.)
        other_kind = "lora_rank" in changed and bool(saved["lora_rank"]) != bool(cfg.lora_rank)
        for k in RECIPE_KEYS:  # the run's recipe, but for what was typed (new_run_from; hunt 47-c C4)
            if k not in user_keys and k in saved and not (other_kind and k in RATE_KEYS):
                setattr(on, k, saved[k])
        # (with a shape or tokenizer that the weights keep, the way on is a new model, which takes the data's tokenizer)
        data_tokenizer = _prepared_tokenizer(cfg.data) if "data" in changed and not reshaped else None
        if data_tokenizer not in (None, saved.get("tokenizer")):  # the way on below was refused in turn, for its
            # tokens: "does not match the model: tokenizer: model 'byte', data 'gpt2'" (hunt 49-o O3)
            way = (f"{cfg.data} holds tokens of the {data_tokenizer} tokenizer, and these weights read "
                   f"{saved.get('tokenizer')} tokens: prepare the data with --tokenizer {saved.get('tokenizer')}")
        elif reshaped and cfg.eval_only:
            way = f"the weights keep their {', '.join(reshaped)}: leave {'them' if len(reshaped) > 1 else 'it'} out"
        elif cfg.eval_only:
            # an evaluation trains nothing: the way on was to train ("start a new run from these weights ...
            # --out_dir=<another directory>"); --init_from=<the run> evaluates its latest checkpoint with these
            # options, in place (hunt 46-a A2)
            way = (f"to evaluate these weights with these options, give them with "
                   f"--init_from={shlex.quote(str(cfg.out_dir))} --eval_only=true {data_options(on)}")
        elif reshaped and "tokenizer" in reshaped and (held := _prepared_tokenizer(on.data)) not in (None, cfg.tokenizer):
            # (prepared data of another tokenizer: "start a new model with them and --data=DIR" was refused in turn,
            # "--tokenizer=X, but DIR holds Y tokens, prepared already": hunt 52-h H4)
            way = (f"the weights keep their {', '.join(reshaped)}, and {on.data} holds {held} tokens, prepared already: "
                   f"to train with these options, start a new model with them and --data=<the text, or data prepared "
                   f"with --tokenizer={cfg.tokenizer}> --out_dir=<another directory>, without --init_from")
        elif reshaped:
            way = (f"the weights keep their {', '.join(reshaped)}: to train with these options, start a new model "
                   f"with them and {data_options(on)} --out_dir=<another directory>, without --init_from")
        else:
            way = f"to start a new run from these weights with these options, give them with {new_run_from(cfg.out_dir, on)}"
            if other_kind and not any(getattr(on, k) != getattr(TrainConfig, k)
                                      for k in ("learning_rate", "muon_learning_rate")):  # (at the defaults' rates)
                way += "; " + rates_of_the_other_kind(saved)
        raise ConfigError("cannot resume with a different architecture, tokenizer, data, optimizer or seed:\n  "
                          + "\n  ".join(f"{k}: checkpoint {saved[k]!r}, now {getattr(cfg, k)!r}" for k in changed)
                          + f"\n({way})")
    # out_dir: where the checkpoint was read, typed or not: a copy of a run resumed as ./out (the
    # default) wrote its checkpoints into the saved out_dir, another run's directory, unlocked
    merged = {**saved, **{k: getattr(cfg, k) for k in user_keys}, "init_from": "resume", "out_dir": cfg.out_dir}
    if "fp8" in user_keys and not cfg.fp8 and "fp8_head" not in user_keys:
        merged["fp8_head"] = False  # it rides on fp8: --fp8=false (say, on a GPU without float8) ends both
    return TrainConfig(**{k: v for k, v in merged.items() if k in {f.name for f in fields(TrainConfig)}})
