"""Checkpoints you cannot lose, and the one loader that train.py and sample.py share.

A run directory holds complete checkpoints, each a directory `ckpt-0001000/` with
    model.safetensors   weights under plain module keys (the tied LM head stored once);
                        for a LoRA run, only the adapters
    state.pt            optimizer, GradScaler, RNG and data-loader state: tensors and plain
                        containers only, read with torch.load(weights_only=True)
    meta.json           readable facts: config, model config, step, tokens seen, best
                        validation loss, tokenizer, versions, the base model of a LoRA run
and two pointer files, `latest` and `best`, naming a checkpoint directory.

A save writes everything into `.tmp-*` beside the final name, fsyncs the files and the directory,
renames it into place with one os.replace, then rewrites the pointers the same way. A save that
dies at any point leaves the previous checkpoint and pointers untouched; `.tmp-*` leftovers are
removed on the next start. Nothing here ever unpickles code.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from gpt.model import TIED_KEY, GPT, GPTConfig

CKPT_PREFIX = "ckpt-"
TMP_PREFIX = ".tmp-"
WEIGHTS, STATE, META = "model.safetensors", "state.pt", "meta.json"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def write_text_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` all at once: readers see the old or the new, never half."""
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def versions() -> dict:
    import numpy

    return {"torch": torch.__version__, "numpy": numpy.__version__, "python": platform.python_version()}


def weights_to_save(model: GPT) -> dict[str, torch.Tensor]:
    """The tensors a checkpoint stores: plain keys, tied head once; LoRA runs keep only adapters.
    Refuses non-finite weights, so a diverged model can never replace a good checkpoint."""
    from gpt.lora import is_lora, lora_state_dict

    sd = lora_state_dict(model) if is_lora(model) else model.state_dict()
    out = {k: v.detach().cpu().contiguous() for k, v in sd.items() if k != TIED_KEY}
    bad = [k for k, v in out.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise FloatingPointError(f"refusing to save non-finite weights: {bad[:5]}{' ...' if len(bad) > 5 else ''}")
    return out


def save_checkpoint(out_dir: str | Path, step: int, model: GPT, state: dict, meta: dict,
                    keep_last: int = 2, is_best: bool = False) -> Path:
    """Write a complete checkpoint for `step`, crash-safe, then prune old ones."""
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"{CKPT_PREFIX}{step:07d}"
    final, tmp = out_dir / name, out_dir / f"{TMP_PREFIX}{name}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_file(weights_to_save(model), str(tmp / WEIGHTS), metadata={"format": "pt"})
    torch.save(state, tmp / STATE)
    (tmp / META).write_text(json.dumps({**meta, "step": step, "versions": versions()}, indent=2) + "\n")
    for f in (WEIGHTS, STATE, META):
        _fsync_file(tmp / f)
    _fsync_dir(tmp)
    if final.exists():  # the same step saved again (e.g. a resumed run stopped at once): swap it out
        old = out_dir / f"{TMP_PREFIX}old-{name}.{os.getpid()}"
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)
    _fsync_dir(out_dir)
    if is_best:
        write_text_atomic(out_dir / "best", name + "\n")
    write_text_atomic(out_dir / "latest", name + "\n")  # last: only now is the new checkpoint current
    prune_checkpoints(out_dir, keep_last)
    return final


def _is_complete(path: Path) -> bool:
    return path.is_dir() and all((path / f).is_file() for f in (WEIGHTS, STATE, META))


def list_checkpoints(out_dir: str | Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    return sorted(p for p in out_dir.glob(f"{CKPT_PREFIX}*") if _is_complete(p))


def _pointer(out_dir: Path, name: str) -> Path | None:
    try:
        target = out_dir / (out_dir / name).read_text().strip()
    except OSError:
        return None
    return target if _is_complete(target) else None


def prune_checkpoints(out_dir: Path, keep_last: int) -> None:
    """Keep the newest `keep_last` complete checkpoints and the best one; remove the rest."""
    ckpts = list_checkpoints(out_dir)
    keep = set(ckpts[-keep_last:])
    best = _pointer(out_dir, "best")
    if best is not None:
        keep.add(best)
    for p in ckpts:
        if p not in keep:
            shutil.rmtree(p, ignore_errors=True)


def clean_leftovers(out_dir: str | Path) -> list[Path]:
    """Remove what a killed save left behind (`.tmp-*`); returns what was removed."""
    out_dir = Path(out_dir)
    removed = sorted(out_dir.glob(f"{TMP_PREFIX}*")) if out_dir.is_dir() else []
    for p in removed:
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return removed


def find_checkpoint(path: str | Path, which: str = "latest") -> Path:
    """A run directory (-> its latest/best complete checkpoint) or a checkpoint directory itself."""
    path = Path(path)
    if _is_complete(path):
        return path
    found = _pointer(path, which)
    if found is None:  # pointer missing or stale: fall back to the newest complete checkpoint
        ckpts = list_checkpoints(path)
        found = ckpts[-1] if ckpts else None
    if found is None:
        raise FileNotFoundError(f"no complete checkpoint in {path}")
    return found


@dataclass
class Checkpoint:
    path: Path
    meta: dict

    @property
    def model_config(self) -> GPTConfig:
        return GPTConfig.from_dict(self.meta["model_config"])

    def weights(self) -> dict[str, torch.Tensor]:
        from safetensors.torch import load_file

        return load_file(str(self.path / WEIGHTS))

    def state(self) -> dict:
        # weights_only=True: tensors and plain containers only; a pickled payload is refused unrun.
        return torch.load(self.path / STATE, map_location="cpu", weights_only=True)


def open_checkpoint(path: str | Path, which: str = "latest") -> Checkpoint:
    ckpt = find_checkpoint(path, which)
    try:
        meta = json.loads((ckpt / META).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{ckpt / META}: unreadable checkpoint metadata ({e})") from None
    return Checkpoint(ckpt, meta)


def load_model(path: str | Path, which: str = "latest", device: str | torch.device = "cpu",
               merge_lora: bool = True) -> tuple[GPT, Checkpoint]:
    """The model of a checkpoint, ready to use: built on the meta device, weights loaded with
    strict keys. A LoRA checkpoint loads its base (recorded in meta.json) and its adapters,
    merged by default for fast inference."""
    ckpt = open_checkpoint(path, which)
    lora = ckpt.meta.get("lora")
    if lora:
        from gpt.lora import LoRAConfig, apply_lora, load_lora_state_dict
        from gpt.lora import merge_lora as merge

        model = load_base_model(lora["base"], dropout=0.0)
        apply_lora(model, LoRAConfig.from_dict(lora["config"]))
        load_lora_state_dict(model, ckpt.weights())
        if merge_lora:
            merge(model)
    else:
        with torch.device("meta"):
            model = GPT(ckpt.model_config)
        model.load_weights(ckpt.weights(), assign=True)
    return model.to(device), ckpt


def is_hf_gpt2_dir(path: str | Path) -> bool:
    """A Hugging Face GPT-2 directory: config.json beside the weights (our runs keep theirs in ckpt-*/)."""
    path = Path(path)
    return (path / "config.json").is_file() and any((path / f).is_file() for f in ("model.safetensors", "pytorch_model.bin"))


def pretrained_tokenizer(init_from: str) -> str:
    """The tokenizer of pretrained weights: OpenAI's GPT-2 BPE, or what our checkpoint recorded."""
    path = Path(init_from)
    if path.is_dir() and not is_hf_gpt2_dir(path):
        return open_checkpoint(path).meta["tokenizer"]
    return "gpt2"


def load_base_model(init_from: str, dropout: float = 0.0) -> GPT:
    """Pretrained weights to start from: one of our checkpoints (a run or checkpoint directory),
    a Hugging Face GPT-2 directory, or a hub name (gpt2, gpt2-medium, ...)."""
    path = Path(init_from)
    if path.is_dir() and not is_hf_gpt2_dir(path):
        model, _ = load_model(path)
        model.set_dropout(dropout)
        return model
    return GPT.from_pretrained(init_from, dropout=dropout)
