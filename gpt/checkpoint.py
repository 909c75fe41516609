"""Checkpoints you cannot lose, and the one loader that train.py and sample.py share.

A run directory holds complete checkpoints, each a directory `ckpt-0001000/` with
    model.safetensors   weights under plain module keys (the tied LM head stored once);
                        for a LoRA run, only the adapters
    state.pt            optimizer, GradScaler, RNG and data-loader state: tensors and plain
                        containers only, read with torch.load(weights_only=True)
    meta.json           readable facts: config, model config, step, tokens seen, best
                        validation loss, tokenizer, versions, the base model of a LoRA run
                        (lora_base: the exact checkpoint or directory, with a fingerprint,
                        and where it lies relative to the run: with_relative_base)
and two pointer files, `latest` and `best`, naming a checkpoint directory.

A save writes everything into `.tmp-*` beside the final name, fsyncs the files and the directory,
renames it into place with one os.replace, then rewrites the pointers the same way. A save that
dies at any point leaves the previous checkpoint and pointers untouched; `.tmp-*` leftovers are
removed on the next start. Nothing here ever unpickles code.

Failures are reported, not raised as library tracebacks (issue 10): a save that cannot be written
(no room, a file-size limit, permissions) raises SaveError naming the checkpoint still current,
after removing its `.tmp-*`; a save that cannot fit in the free space is refused before writing.
A file that cannot be read (truncated or corrupt safetensors, a refused pickle payload, bad JSON)
raises UnreadableFile naming it; open_resumable() skips such checkpoints for an older one, and
those whose meta.json or state.pt lack what resuming reads (RESUME_META, RESUME_STATE).
"""

from __future__ import annotations

import contextlib
import difflib
import glob
import hashlib
import json
import math
import os
import platform
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch

from gpt.atomic import TMP_PREFIX, fsync_dir, same_mode_as, write_text_atomic
from gpt.atomic import files_sha256 as file_sha256  # (one file; tests count its calls)
from gpt.config import another_versions_values, saved_config
from gpt.errors import (ChangedBase, ConfigError, Diverged, HubUnreachable, MissingFile, SaveError, UnreadableFile,
                        is_dir_strictly, is_file_strictly, out_of_memory, sizes_apart, unsearchable_directory)
from gpt.files import (LFS_POINTER, computable_weights, describe_error, read_safetensors, read_torch_file,
                       refuse_an_lfs_pointer, safetensors_error)
from gpt.huggingface import WITHOUT_A_NETWORK, hub_gpt2, in_hub_cache, is_token_id, missing_hf_weights, read_hf_config
from gpt.model import GELU_APPROXIMATE, GPT2_HUB_CONFIGS, POS_ENCODINGS, TIED_KEY, GPT, GPTConfig
from gpt.tokenizer import TOKENIZER_NAMES

CKPT_PREFIX = "ckpt-"
SET_ASIDE_PREFIX = f"{TMP_PREFIX}old-"  # a step's earlier save while the same step is saved again (save_checkpoint)
PRUNED_PREFIX = f"{TMP_PREFIX}pruned-"  # a checkpoint being removed by pruning (prune_checkpoints)
BROKEN_PREFIX = "broken-"  # a checkpoint resume skipped as unreadable, set aside (never resumed, never pruned)
WEIGHTS, STATE, META = "model.safetensors", "state.pt", "meta.json"
SPACE_MARGIN = 1.02, 1 << 20  # needed = 2% + 1 MiB over the tensors' bytes: headers, meta.json, zip padding


class NoCheckpoint(MissingFile):
    """No complete checkpoint where one was asked for; `way`: the way on, said after it where the fact is this
    process's alone (`fact`: without it, as a node that lacks what rank 0 read says it: train.py)."""

    def __init__(self, message: str, way: str = ""):
        super().__init__(f"{message}; {way}" if way else message)
        self.fact = message


class NoBestCheckpoint(NoCheckpoint):
    """`best` asked of a run that has none (`why`), with its newest complete checkpoint: the way on,
    which each caller words as its own options take it (sample.py's --init_from refuses --ckpt=PATH)."""

    def __init__(self, message: str, *, path: Path | None = None, why: str = "", newest: Path | None = None):
        super().__init__(message)
        self.path, self.why, self.newest = path, why, newest


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def write_failed(path: Path, e: OSError) -> SaveError:
    """What a run's other files (metrics.jsonl, config.json) meet when they cannot be written (a full
    disk, a permission): the run stops as a failed checkpoint save does, status 3, naming the
    checkpoint that is still the latest, not with a traceback."""
    return SaveError(f"writing {path} failed: {describe_error(e)}; {latest_note(path.parent)}")


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
        raise Diverged(f"the model diverged: refusing to save non-finite weights "
                       f"({', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''})")
    return out


def save_checkpoint(out_dir: str | Path, step: int, model: GPT, state: dict, meta: dict,
                    keep_last: int = 2, is_best: bool = False,
                    left_behind: frozenset[str] | set[str] = frozenset()) -> Path:
    """Write a complete checkpoint for `step`, crash-safe, then prune old ones (`left_behind`: prune_checkpoints')."""
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    name = f"{CKPT_PREFIX}{step:07d}"
    final, tmp = out_dir / name, out_dir / f"{TMP_PREFIX}{name}.{os.getpid()}"
    old = out_dir / f"{SET_ASIDE_PREFIX}{name}.{os.getpid()}"
    try:
        weights = weights_to_save(model)  # (copies: on a CPU the weights' size in memory again)
        out_dir.mkdir(parents=True, exist_ok=True)
        check_free_space(out_dir, name, tensor_bytes(weights) + tensor_bytes(state))
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        save_file(weights, str(tmp / WEIGHTS), metadata={"format": "pt"})
        with open(tmp / STATE, "wb") as f:  # through a Python file, so a failed write surfaces as its OSError
            torch.save(state, f)
        same_mode_as(tmp / WEIGHTS, tmp / STATE)
        if isinstance(meta.get("lora"), dict):  # (where the base lies from this run: runs moved together, hunt 36-c A6)
            meta = {**meta, "lora": with_relative_base(meta["lora"], out_dir)}
        if ends := getattr(model, "end_tokens", ()):  # the end ids of the Hugging Face directory the run started
            # from (GPT.end_tokens), which load_model gives back: a fine-tune of one whose generation_config.json named
            # "\n" beside 50256 lost it, and sample.py and the run's export ended at 50256 alone (hunt 51-f F1)
            meta = {**meta, "end_tokens": [int(i) for i in ends]}
        (tmp / META).write_text(json.dumps({**meta, "step": step, "versions": versions()}, indent=2) + "\n")
        for f in (WEIGHTS, STATE, META):
            _fsync_file(tmp / f)
        # The same step saved again keeps the LoRA runs that pin it against pruning (else the next prune
        # removed their base: audit, 2026-11-26), also those of a stranded earlier save it replaces
        # (`_stranded`: a LoRA run may have started from it; hunt 30-c F10). Read and carried over under the
        # marks' lock (mark_lora_base's) until the swap: a LoRA run that listed itself between the read and
        # the swap (the files' writes and fsyncs: seconds for a large checkpoint) lost its line, and the base
        # run's next pruning its base (hunt 37-d D3)
        with contextlib.ExitStack() as marks_locked:
            copies = [c for c in (final, *sorted(out_dir.glob(f"{SET_ASIDE_PREFIX}{name}.*"))) if c.is_dir()]
            for c in copies:
                marks_locked.enter_context(_lora_marks_locked(c))
            pinned = [r for c in copies if (c / LORA_BASE_MARK).is_file() for r in lora_runs(c / LORA_BASE_MARK)]
            if pinned:
                (tmp / LORA_BASE_MARK).write_bytes(lora_runs_file(dict.fromkeys(pinned)))
                _fsync_file(tmp / LORA_BASE_MARK)
            fsync_dir(tmp)
            swapped = final.exists()
            if swapped:  # the same step saved again (e.g. a resumed run stopped at once): swap it out
                os.replace(final, old)
            os.replace(tmp, final)
        if swapped:
            shutil.rmtree(old, ignore_errors=True)
        for stranded in out_dir.glob(f"{SET_ASIDE_PREFIX}{name}.*"):  # a killed save's (`_stranded`): replaced now
            shutil.rmtree(stranded, ignore_errors=True)
        fsync_dir(out_dir)
        if is_best:
            write_text_atomic(out_dir / "best", name + "\n")
        write_text_atomic(out_dir / "latest", name + "\n")  # last: only now is the new checkpoint current
    except Diverged as e:  # said with what is still on disk, as the other failed saves are
        raise Diverged(f"{e}; {latest_note(out_dir)}. Try a lower learning_rate.") from None
    except (OSError, RuntimeError, MemoryError, safetensors_error()) as e:
        # RuntimeError: torch.save's zip writer wraps the OSError of a failed write; an allocator that
        # ran out (the weights' CPU copies, the writers' buffers) is said in one line too (audit,
        # 2026-11-26: under `ulimit -v` it was a traceback); any other is a bug.
        oom = out_of_memory(e)
        if isinstance(e, RuntimeError) and not oom and not isinstance(e.__context__, OSError):
            raise
        # Best effort: a filesystem turned read-only by the error refuses these too, which were
        # tracebacks over the save's own line (hunt 33-a F5). A set-aside copy left in place is
        # the step's checkpoint still (`_stranded`), and the next start removes what is left.
        with contextlib.suppress(OSError):
            if old.exists() and not final.exists():  # failed mid-swap: put the earlier save of this step back
                os.replace(old, final)
        with contextlib.suppress(OSError):
            for leftover in out_dir.glob(f"{TMP_PREFIX}*.{os.getpid()}"):  # this save's directory, a half-written pointer
                if leftover == old and not final.exists():  # the step's checkpoint, where it could not be put back
                    continue
                with contextlib.suppress(OSError):
                    shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink(missing_ok=True)
        cause = (f"out of memory ({(str(e).splitlines() or [type(e).__name__])[0]})" if oom
                 else describe_error(e.__context__ if isinstance(e, RuntimeError) else e))
        raise SaveError(f"saving checkpoint {name} in {out_dir} failed: {cause}; {latest_note(out_dir)}") from None
    prune_checkpoints(out_dir, keep_last, final, left_behind)
    return final


def latest_note(out_dir: str | Path, still: bool = True) -> str:
    """What really is on disk, for messages about checkpoints."""
    # without a readable `latest` (a first save killed before writing it, checkpoints copied without it), the
    # newest complete one, which a resume and sample.py take: "no checkpoint has been saved" was said of a
    # run directory holding them (hunt 35-d D4)
    latest = _pointer(Path(out_dir), "latest") or next(reversed(list_checkpoints(out_dir)), None)
    if latest is None:
        return f"no checkpoint has been saved in {out_dir}"
    # (a stranded earlier save by the name everything takes it by, not its .tmp-old- one: review 33)
    return f"the latest checkpoint is {'still ' if still else ''}{latest.with_name(name_of(latest))}"


def tensor_bytes(obj) -> int:
    """Bytes of every tensor in nested dicts, lists and tuples (a checkpoint's bulk)."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def check_free_space(out_dir: Path, name: str, payload_bytes: int) -> None:
    """Refuse a save that cannot fit before writing a byte of it (the previous checkpoint stays
    the latest either way; this only makes the message come early and clear)."""
    needed = int(payload_bytes * SPACE_MARGIN[0]) + SPACE_MARGIN[1]
    free = shutil.disk_usage(out_dir).free
    if needed > free:
        needed_said, free_said = sizes_apart(needed, free)
        raise SaveError(f"not enough free space in {out_dir} for checkpoint {name}: it needs about {needed_said}, "
                        f"{free_said} are free; {latest_note(out_dir)}")


def _is_complete(path: Path) -> bool:
    return _holds_files(path, (WEIGHTS, STATE, META))


def _holds_files(path: Path, names: tuple[str, ...]) -> bool:
    """Whether `path` is a directory holding each of `names` as a file. UnreadableFile (not damaged) where it cannot
    be searched (no x permission: a checkpoint another user saved under umask 077 in a shared run directory, a
    `chmod -R go-rwx` of it): each look at the run, a resume, sample.py, a new run there, was a PermissionError
    traceback (hunt 50-c C2)."""
    try:  # (strictly: Python 3.14's is_file is False there, and the checkpoint was passed over as one that lost its
        # files, and set aside as broken)
        return is_dir_strictly(path) and all(is_file_strictly(path / f) for f in names)
    except PermissionError as e:
        found = unsearchable_directory(Path(e.filename)) if e.filename else None
        where = found[0] if found else path  # (the directory to chmod: `path`, or one on its way)
        # (a run's checkpoint can be moved out of the way; a run's or --data's directory is only to chmod)
        ours = where.name.startswith((CKPT_PREFIX, SET_ASIDE_PREFIX))
        raise UnreadableFile(where, f"cannot be searched ({e.strerror or e})" + (
            f", so whether it is a whole checkpoint cannot be seen; give it search permission (chmod +x), or move it "
            f"out of {where.parent}" if ours else "; give it search permission (chmod +x)"), damaged=False) from None


def _has_weights(path: Path) -> bool:
    """A checkpoint whose weights can be loaded (sample.py, --init_from, load_model): its weights and meta.json, its
    state.pt there or not. Only a resume reads state.pt (the optimizer's state, about twice the weights with AdamW),
    which one removes to share or archive the weights: such a checkpoint could not be sampled or fine-tuned from
    at all (hunt 47-c, left; hunt 48-c C1)."""
    return _holds_files(path, (WEIGHTS, META))


def without_state(ckpt: Path) -> str | None:
    """What sample.py and train.py --init_from say of the checkpoint `ckpt` they took, where it lost its state.pt."""
    if _is_complete(ckpt) or not _has_weights(ckpt):
        return None
    return (f"{ckpt} has no {STATE} (its training state, which only a resume reads): its weights are taken; "
            "its run cannot be resumed from it")


def loads_as_weights(ckpt: Path) -> bool:
    """Whether sample.py and --init_from take checkpoint `ckpt`'s weights, whatever its state.pt: its meta.json reads
    and its model.safetensors is whole (its header against its length; the tensors are not read). A resume that
    passed over one whose state.pt is damaged, not missing, said "it cannot be loaded" and set it aside as
    broken-ckpt-*, of weights that load (hunt 50-c C4)."""
    from safetensors import safe_open

    try:
        if not _has_weights(ckpt):
            return False
        read_meta(ckpt)
        with safe_open(str(ckpt / WEIGHTS), framework="pt"):
            return True
    except (UnreadableFile, OSError, ValueError, safetensors_error()):  # (ValueError: a name that is not UTF-8)
        return False


def checkpoint_holding(path: str | Path) -> Path | None:
    """The checkpoint that `path` is, or lies inside, else None: one that lost only its state.pt too, whose weights
    --init_from takes (`_has_weights`); a new run's out_dir there was not refused (hunt 48-c C4)."""
    path = Path(path).resolve()  # (`..` and links as the filesystem takes them: review 31)
    return next((p for p in (path, *path.parents) if _has_weights(p)), None)


def incomplete_checkpoints(out_dir: str | Path, newer_than: Path | None = None) -> list[tuple[Path, str]]:
    """The run's ckpt-* directories that lack a file (of a later step than `newer_than`, if given),
    each with what it lacks ("ckpt-0000030: incomplete, without state.pt"). A save renames a
    finished directory into place, so such a one lost its file afterwards (by hand, a sync tool):
    the checkpoints it would have been are said, not passed over in silence."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    after = _step(newer_than) if newer_than is not None else None
    return [(p, f"{p}: incomplete, without {', '.join(f for f in (WEIGHTS, STATE, META) if not (p / f).is_file())}")
            for p in sorted(out_dir.glob(f"{CKPT_PREFIX}*")) if p.is_dir() and not _is_complete(p)
            and (after is None or (_step(p) or 0) > after)]


def passed_over(init_from: str) -> list[str]:
    """What train.py --init_from says of a run whose newest checkpoints lost a file: each one newer than the
    checkpoint taken (the newest complete one), which it started from without a word, as sample.py did until
    hunt session 27 (hunt 47-c C1: a state.pt removed from ckpt-0000030 fine-tuned ckpt-0000020's weights, named
    only in the model line). Empty for a checkpoint directory itself, a Hugging Face model or a hub name."""
    path = weights_dir(init_from)
    if path is None or _has_weights(path) or is_hf_gpt2_dir(path):
        return []
    taken = find_checkpoint(path, weights_only=True)
    which = "the newest complete one" if _is_complete(taken) else "the newest with its weights"
    return [f"{why}; starting from {name_of(taken)}, {which}"
            for _, why in incomplete_checkpoints(path, newer_than=taken)]


def weights_without_state(init_from: str) -> str | None:
    """train.py --init_from's note where the checkpoint it starts from lost its state.pt (without_state)."""
    path = weights_dir(init_from)
    if path is None or is_hf_gpt2_dir(path):
        return None
    return without_state(find_checkpoint(path, weights_only=True))


def lost_files(path: Path) -> str | None:
    """What the run or checkpoint directory `path`, which holds no complete checkpoint, lost, with the way on; None
    where it lost nothing (it is not a run). train.py --init_from said "no complete checkpoint in RUN/ckpt-0000030"
    of a checkpoint without its state.pt, where sample.py names the file (hunt 47-c C1)."""
    if said := [why for p, why in incomplete_checkpoints(path.parent) if p == path]:
        others = list_checkpoints(path.parent)
        return f"{said[0]}; " + (f"take the run's newest complete one, --init_from={shlex.quote(str(others[-1]))}"
                                 if others else f"{path.parent} has no complete checkpoint either")
    if said := [why for _, why in incomplete_checkpoints(path)]:
        return f"{said[-1]}; {path} has no complete checkpoint"
    return None


def earlier_best_step(out_dir: Path) -> int | None:
    """The step of the run's best checkpoint where it is not its latest (a run that trained past its lowest
    validation loss, as an instruction run past a few epochs of a small set), else None."""
    best, latest = _pointer(out_dir, "best"), _pointer(out_dir, "latest")
    return _step(best) if best and latest and best != latest else None


def worse_than_its_start(ckpt: Checkpoint, source: str) -> str | None:
    """The warning for a checkpoint of a run from trained weights whose validation loss is higher than theirs at
    step 0 (meta.json's started_from), naming them: a fine-tune of a step count saves no checkpoint at step 0, and
    sample.py --ckpt=best of one that only made its weights worse gave the least bad of its checkpoints in silence
    (hunt 52-k K1; train.py's end says so once). None where it is not worse, or not known: a checkpoint without its
    evaluation (a stop's save), of a run from scratch, or saved before started_from was recorded (2026-11-29)."""
    start, own = ckpt.meta.get("started_from"), ckpt.meta.get("val_loss")
    if not isinstance(start, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and
                                              math.isfinite(v) for v in (own, start.get("val_loss"))):
        return None
    # a LoRA run's base where this load found it (moved with the run, or --lora_base), else the recorded place
    weights = ckpt.base_found if ckpt.meta.get("lora") and ckpt.base_found else start.get("weights")
    if own <= start["val_loss"] or not isinstance(weights, str):
        return None
    gone = ", which are no longer there" if Path(weights).is_absolute() and weights_dir(weights) is None else ""
    return (f"{source} has a validation loss of {own:.4f}, higher than the {start['val_loss']:.4f} of the weights its "
            f"run started from (step 0's evaluation): training made them worse; sample those with "
            f"--init_from={shlex.quote(weights)}{gone}")


def _step(ckpt: Path) -> int | None:
    name = name_of(ckpt)
    try:
        return int(name[len(CKPT_PREFIX):])
    except ValueError:  # not a name save_checkpoint gives: not ours to prune
        return None


def _set_aside_name(path: Path) -> str | None:
    """The checkpoint's name where `path` is a step's earlier save set aside while the same step is
    saved again (save_checkpoint's swap: .tmp-old-ckpt-N.PID), else None."""
    if not path.name.startswith(SET_ASIDE_PREFIX):
        return None
    return path.name[len(SET_ASIDE_PREFIX):].rsplit(".", 1)[0]


def name_of(ckpt: Path) -> str:
    """A checkpoint's name (`ckpt-N`), also for a stranded earlier save of its step (`_stranded`)."""
    return _set_aside_name(ckpt) or ckpt.name


def _stranded(out_dir: Path) -> list[Path]:
    """Earlier saves of a step that a save of the same step set aside and was killed before it put
    its new copy in their place: then they are that step's only complete copy, and count as its
    checkpoint (clean_leftovers removed them, and a resume went back to the step before, without a
    word: hunt, session 26). The step's next save, or pruning, removes them."""
    return [p for p in out_dir.glob(f"{SET_ASIDE_PREFIX}{CKPT_PREFIX}*")
            if _is_complete(p) and not (out_dir / _set_aside_name(p)).exists()]


def list_checkpoints(out_dir: str | Path) -> list[Path]:
    """Complete checkpoints, oldest first (a stranded earlier save of a step among them: `_stranded`)."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    complete = [p for p in out_dir.glob(f"{CKPT_PREFIX}*") if _is_complete(p)] + _stranded(out_dir)
    return sorted(complete, key=lambda p: (_step(p) is not None, _step(p) or 0, p.name))  # by step: ckpt-10000000 after ckpt-9999999


def weights_checkpoints(out_dir: Path) -> list[Path]:
    """list_checkpoints' complete checkpoints and those that lost only their state.pt (`_has_weights`), oldest first."""
    weights_only = [p for p in out_dir.glob(f"{CKPT_PREFIX}*") if _has_weights(p) and not _is_complete(p)]
    return sorted(list_checkpoints(out_dir) + weights_only,
                  key=lambda p: (_step(p) is not None, _step(p) or 0, p.name))


def copy_of(ckpt: Path) -> Path:
    """Where checkpoint `ckpt` (a run's `ckpt-N`) is: there, or a stranded earlier save of it
    (`_stranded`) while it is that step's only complete copy. A stranded copy's own path (as LoRA
    runs recorded it before hunt 30-c F10) finds the step's save under its name."""
    if _is_complete(ckpt) or not ckpt.parent.is_dir():
        return ckpt
    name = name_of(ckpt)
    if _is_complete(ckpt.parent / name):
        return ckpt.parent / name
    return next((p for p in _stranded(ckpt.parent) if _set_aside_name(p) == name), ckpt)


def weights_dir(init_from: str | Path) -> Path | None:
    """The directory that pretrained weights `init_from` name (our run or checkpoint, or a Hugging
    Face model), else None: a hub name. A step whose only copy is stranded is found by its name, as
    lora_base records it, where it was taken for a hub name (review 31 F9)."""
    path = copy_of(Path(init_from))
    return path if path.is_dir() else None


def refuse_a_pointer(init_from: str, option: str = "--init_from") -> None:
    """MissingFile where --init_from names a run's `latest` or `best` file, with the checkpoint it points to: it
    was "'out/best' is neither a directory nor one of gpt2, ...", where a run's best checkpoint (the instruct
    preset's, before overfitting) is the one to fine-tune further or answer with (hunt 47-c C2). sample.py's --ckpt
    too (`option`), where it was "out/best is a file, not a run's out_dir or a checkpoint directory" (hunt 52-k K3)."""
    path = Path(init_from)
    if path.name in ("latest", "best") and path.is_file() and (ckpt := _pointer(path.parent, path.name)):
        raise MissingFile(f"{init_from} is a file, the pointer to the {path.name} checkpoint of the run in "
                          f"{path.parent}: give the checkpoint itself, {option}={shlex.quote(str(ckpt))}")


def _pointer(out_dir: Path, name: str, weights_only: bool = False) -> Path | None:
    """The complete checkpoint that `latest` or `best` names, else None: missing, unreadable or
    damaged (bytes that are not UTF-8 were a traceback in train.py and sample.py; hunt, session 24).
    `weights_only`: also one that lost only its state.pt (`_has_weights`)."""
    try:
        target = out_dir / (out_dir / name).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if _is_complete(target) or (weights_only and target.name.startswith(CKPT_PREFIX) and _has_weights(target)):
        return target
    return next((p for p in _stranded(out_dir) if _set_aside_name(p) == target.name), None)


LORA_BASE_MARK = "lora-runs.txt"  # in a base LoRA adapters load onto: pruning keeps it, save_pretrained spares it


def checkpoints_left_behind(out_dir: Path, resumed: Checkpoint) -> set[str]:
    """The names of the run's checkpoints past the step a resume goes on from (`resumed`): of training it left
    behind (a `latest` whose rewrite failed, a newest checkpoint that could not be loaded). The resumed run's saves
    replace those of the steps they land on; prune_checkpoints counts none of the others among its newest."""
    now = resumed.meta["step"]
    return {name_of(p) for p in list_checkpoints(out_dir) if _step(p) is not None and _step(p) > now}


def prune_checkpoints(out_dir: Path, keep_last: int, current: Path,
                      left_behind: frozenset[str] | set[str] = frozenset()) -> None:
    """After saving `current`: among the complete checkpoints up to its step, keep the `keep_last`
    newest by step and the ones `latest` and `best` name, remove the rest. Those of training a resume
    left behind (`left_behind`, checkpoints_left_behind's names) that the run's saves did not replace are
    not counted among the newest: a resume at another --eval_interval after a `latest` whose rewrite failed
    kept one of them as the fallback in place of the run's own checkpoint before (hunt 47-d, left; hunt 48-c
    C2); they are removed once the run's step passes theirs. Checkpoints past its step
    are left alone: counted as the newest, they pushed out the checkpoint just saved (audit bug 1,
    another run's), and they are not this run's to remove (it resumed from an older one: a `latest`
    whose rewrite failed, say); a save of their step replaces them. A checkpoint that LoRA runs were
    trained on stays too (`mark_lora_base`)."""
    now = _step(current)
    upto = [p for p in list_checkpoints(out_dir) if _step(p) is not None and _step(p) <= now]  # by step
    counted = [p for p in upto if p == current or name_of(p) not in left_behind]
    keep = {current, *counted[-keep_last:], _pointer(out_dir, "latest"), _pointer(out_dir, "best"),
            *(p for p in upto if (p / LORA_BASE_MARK).exists())}  # LoRA runs' bases: see mark_lora_base
    for p in upto:
        if p not in keep:
            # renamed first: a kill during the removal leaves a `.tmp-*` leftover, which the next start
            # removes, not a ckpt-* missing files, which a resume reported as damage and kept as
            # broken-ckpt-* for good (hunt 30-c F1)
            doomed = p.with_name(f"{PRUNED_PREFIX}{p.name}.{os.getpid()}")
            try:
                # Looked at again under the marks' lock, which mark_lora_base takes: a LoRA run that listed
                # itself since `keep` was read (while an earlier one was removed: seconds for a large one)
                # found the base still there, trained, and lost it here (hunt 37-d D2); one that lists itself
                # from now on finds it gone, and stops at its start
                with _lora_marks_locked(p):
                    if (p / LORA_BASE_MARK).exists():
                        continue
                    os.replace(p, doomed)
            except OSError:
                continue  # (gone already, or the directory is read-only now: left for the next prune)
            shutil.rmtree(doomed, ignore_errors=True)
            if _is_complete(doomed):  # nothing of it could be removed (made read-only to keep it, another user's
                # in a shared run directory): it stays a checkpoint. It was left as a `.tmp-pruned-*` that never
                # loads, called "left by a save that was interrupted" at each start (hunt 35-d D3)
                with contextlib.suppress(OSError):
                    os.replace(doomed, p)


def repoint_best(out_dir: Path, resumed: Checkpoint) -> str | None:
    """After a resume from `resumed`: make `best` name the best checkpoint of the training that goes
    on, the newest one up to the resumed step whose val_loss is the resumed best_val_loss. It can
    name a later step, of training the resume left behind: the newest checkpoint could not be
    loaded, or a save was killed between writing `best` and `latest`. Left so, that step saved
    again with a worse loss kept the name, and pruning then removed the checkpoint that held the
    best loss (hunt 30-c F2). Returns a note when it moved or removed `best`, else None."""
    pointer = out_dir / "best"
    try:
        named = pointer.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):  # unreadable: no checkpoint of this run is named
        named = ""
    now = resumed.meta["step"]
    named_step = _step(out_dir / named) if named.startswith(CKPT_PREFIX) else None
    # (a step whose only copy is stranded is there by its name: it was "not of the training resumed", and `best`
    # rewritten to the same name, with a note of it: hunt 47-d D6)
    if named_step is not None and named_step <= now and _is_complete(copy_of(out_dir / named)):
        return None  # a checkpoint of the training that goes on: still its best
    best_val = resumed.meta.get("best_val_loss")
    holder = None
    for ckpt in reversed(list_checkpoints(out_dir)):
        if best_val is None or _step(ckpt) is None or _step(ckpt) > now:
            continue
        try:
            val = json.loads((ckpt / META).read_text(encoding="utf-8")).get("val_loss")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue
        if val == best_val:
            holder = name_of(ckpt)  # (a stranded copy is found by its name: `_pointer`)
            break
    what = f"`best` named {named or 'nothing readable'}, which is not of the training resumed from {name_of(resumed.path)}"
    try:
        if holder is not None:
            write_text_atomic(pointer, holder + "\n")
            return f"{what}; it names {holder} now (validation loss {best_val:.4f})"
        pointer.unlink()
    except OSError as e:  # (the next save says the same of its own writes, and stops: it cannot keep `best` either)
        return f"{what}, and it could not be changed ({describe_error(e)})"
    return f"{what}, and that training's best checkpoint is gone: `best` is removed until its next best evaluation"


def lora_runs(mark: Path) -> list[str]:
    """The LoRA runs a base checkpoint's LORA_BASE_MARK lists: their directories' names as the file
    system has them (bytes), one a line, whatever the locale. As text in the locale's encoding (read)
    and UTF-8 (written), a Latin-1 locale wrote "lora é" as mojibake that grew at each rewrite and never
    matched the run again (listed anew at each resume; not taken back when the run saved nothing), and
    a name that is not UTF-8 (surrogates) was a UnicodeEncodeError traceback (hunt 35-f F2)."""
    return [os.fsdecode(line) for line in mark.read_bytes().splitlines()]


def lora_runs_file(runs) -> bytes:
    """LORA_BASE_MARK's content for `runs` (see lora_runs)."""
    return b"".join(os.fsencode(run) + b"\n" for run in runs)


def mark_lora_base(base: Path, lora_out_dir: Path) -> str | None:
    """Keep checkpoint `base` from its own run's pruning, since the LoRA run in `lora_out_dir` loads
    its adapters onto those weights: a file in it lists such runs, one per line (deleting the file
    lets pruning remove the checkpoint again). Without it, a base run that went on training
    pruned the base away and the adapters could not be loaded any more. A Hugging Face directory that LoRA
    runs load onto gets the list too: GPT.save_pretrained refuses to write over it (hunt 37-h h1). Returns a
    warning when the file cannot be written (a read-only base), else None."""
    mark, run = base / LORA_BASE_MARK, str(Path(lora_out_dir).resolve())
    try:
        with _lora_marks_locked(base):
            runs = lora_runs(mark) if mark.exists() else []
            if run not in runs:
                write_text_atomic(mark, lora_runs_file([*runs, run]))
    except OSError as e:
        return (f"could not mark {base} as the base of this LoRA run ({describe_error(e)}); if its run prunes "
                "it, these adapters will not load: keep a copy of it")
    # A base that is itself a LoRA checkpoint loads onto its own base, which its run listed itself on when
    # it saved; a LoRA run saved before 2026-11-25 did not, and the base run's pruning removed that base,
    # under this run's adapters too (hunt 36-d D2): its run is listed there now (a base recorded as a run
    # directory follows that run's latest, and has nothing to keep; one listed already is left untouched)
    try:
        lora = json.loads((base / META).read_text(encoding="utf-8")).get("lora")
        below = copy_of(Path(lora["base"])) if isinstance(lora, dict) and isinstance(lora.get("base"), str) else None
        if below is None or not _has_weights(below) or _step(below) is None or below == base or (
                (below / LORA_BASE_MARK).is_file()
                and str(base.parent.resolve()) in lora_runs(below / LORA_BASE_MARK)):
            return None
    except (OSError, ValueError):
        return None
    return mark_lora_base(below, base.parent)


def listed_on(base: Path, lora_out_dir: Path) -> bool:
    """Whether the LoRA run in `lora_out_dir` is on base checkpoint `base`'s list (mark_lora_base) already:
    False where the list is missing or cannot be read."""
    try:
        return str(Path(lora_out_dir).resolve()) in lora_runs(base / LORA_BASE_MARK)
    except OSError:
        return False


def unmark_lora_base(base: Path, lora_out_dir: Path) -> None:
    """Take a LoRA run that saved nothing (refused, interrupted, its first save failed) off its base's
    list again, so that it does not pin the base for good (audit, 2026-11-26); the file goes with its
    last line. A base that cannot be written to keeps it: the warning was given when marking."""
    mark, run = base / LORA_BASE_MARK, str(Path(lora_out_dir).resolve())
    try:
        with _lora_marks_locked(base):
            runs = lora_runs(mark)
            if run in runs:
                rest = [r for r in runs if r != run]
                write_text_atomic(mark, lora_runs_file(rest)) if rest else mark.unlink()
    except OSError:
        pass


def base_dir(base: dict) -> Path | None:
    """The directory of the weights that a LoRA run's base record (lora_base's) names, where its list of
    LoRA runs goes (mark_lora_base): the checkpoint (or the stranded copy that is its step's only one,
    copy_of) or the Hugging Face directory; None for a hub name, whose files are Hugging Face's cache's, and so
    for a snapshot of the hub cache given by its path: the run wrote its lora-runs.txt into the hub client's
    snapshot, which then listed it among the revision's files (hunt 52-l L1). Its fingerprint is checked all the
    same; save_pretrained has no business there to be refused."""
    if "base_step" in base:
        return copy_of(Path(base["base"]))
    return Path(base["base"]) if os.path.isabs(base["base"]) and not in_hub_cache(Path(base["base"])) else None


def live_lora_runs(base: Path) -> list[str]:
    """The LoRA runs on `base`'s list (mark_lora_base) whose directories are still there."""
    try:
        return [run for run in lora_runs(base / LORA_BASE_MARK) if os.path.isdir(run)]
    except OSError:  # (no list, or one that cannot be read: nothing known)
        return []


def unmark_removed_lora_run(out_dir: Path) -> None:
    """Before a LoRA run's directory is removed (bench.py's temporary runs), take it off its base
    checkpoint's list, which a run that saved keeps it on: the base run's pruning then kept that
    checkpoint for good, for a run that no longer exists (hunt 34-d D13)."""
    latest = Path(out_dir) / "latest"
    if not latest.is_file():  # (a run that saved nothing took its own mark back)
        return
    meta = json.loads((Path(out_dir) / latest.read_text().strip() / "meta.json").read_text())
    lora = meta.get("lora") or {}
    if lora and (where := base_dir(lora)) is not None:  # (a base of the hub has no list)
        unmark_lora_base(where, Path(out_dir))


@contextlib.contextmanager
def _lora_marks_locked(base: Path):
    """The base checkpoint's list of LoRA runs, read and rewritten by one process at a time: two LoRA
    runs started together from one base both read the old list, and the later write dropped the
    other's line, whose base could then be pruned (hunt 30-c F9). A lock on the checkpoint's
    directory (where flock exists: not on Windows)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    for tries_left in reversed(range(10)):  # (bounded: a filesystem whose numbers are not stable does not hang it)
        fd = os.open(base, os.O_RDONLY)
        try:
            with contextlib.suppress(OSError):  # (a filesystem without such locks, NFS's emulation of them on a
                fcntl.flock(fd, fcntl.LOCK_EX)  # directory: unlocked, as before, rather than refused)
            # Still the directory named `base` once locked? A save of the step again swaps in another one
            # (save_checkpoint, which holds the old one's lock until then), pruning renames it away: a LoRA run
            # that waited on the old one's lock then rewrote the new one's list beside one that held the new
            # one's lock, and one of the two lines was lost (review 37 R1). Gone: the OSError says it.
            if os.path.samestat(os.fstat(fd), os.stat(base)) or not tries_left:
                yield
                return
        finally:
            os.close(fd)  # (and with it the lock)


def clean_leftovers(out_dir: str | Path) -> list[tuple[Path, str | None]]:
    """Remove what a killed save left behind (`.tmp-*`), but a step's only complete copy
    (`_stranded`); returns each leftover with None where it was removed, else why not. (One that
    cannot be removed, another user's in a shared run directory or on a filesystem turned
    read-only, was a traceback: hunt 33-a F10. It is never loaded.)"""
    out_dir = Path(out_dir)
    leftovers = sorted(set(out_dir.glob(f"{TMP_PREFIX}*")) - set(_stranded(out_dir))) if out_dir.is_dir() else []
    done = []
    for p in leftovers:
        try:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            done.append((p, None))
        except OSError as e:
            done.append((p, describe_error(e)))
    return done


def _hf_config(path: Path) -> bool:
    """config.json there is a Hugging Face model's (not the settings train.py keeps in a run)."""
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(config, dict) and ("model_type" in config or "n_positions" in config)


def _refuse_a_file(path: Path) -> None:
    """A file where a run or checkpoint directory was asked for: said so. It was "no checkpoint in
    FILE yet; train one with: python train.py --out_dir=FILE", which train.py refuses (hunt, session 26)."""
    if path.exists() and not path.is_dir():
        raise NoCheckpoint(f"{path} is a file, not a run's out_dir or a checkpoint directory")


def find_checkpoint(path: str | Path, which: str = "latest", weights_only: bool = False) -> Path:
    """A run directory (-> its latest/best complete checkpoint) or a checkpoint directory itself.
    `weights_only`: a checkpoint that lost only its state.pt is one too (`_has_weights`), for its weights
    alone (load_model's); a resume, and what a new run in out_dir is refused by, take complete ones."""
    if which not in ("latest", "best"):  # (any other fell back to the newest checkpoint: hunt 31-a F3)
        raise ValueError(f"which={which!r}: choose 'latest' or 'best', or give a checkpoint's own directory as the path")
    path = copy_of(Path(path))  # (a step whose only copy is stranded, by its name, as lora_base records it: review 31)
    if _is_complete(path) or (weights_only and _has_weights(path)):
        if which == "best":  # it sampled this one, whatever `best` names (hunt 28-a F9)
            raise NoCheckpoint(f"{path} is one checkpoint, not a run: `best` picks among a run's checkpoints; "
                               f"name the run ({path.parent}) or leave out --ckpt=best")
        return path
    _refuse_a_file(path)
    found = _pointer(path, which, weights_only)
    ckpts = (weights_checkpoints(path) if weights_only else list_checkpoints(path)) if found is None else [found]
    if not ckpts:
        # A Hugging Face directory whose weights are missing is not one of our runs: name the files
        # it lacks, where "no checkpoint at DIR" left one guessing (hunt, session 24). Its config.json
        # is a model's: a run's own config.json (train.py's settings) keeps the message it had.
        if _hf_config(path) and is_hf_gpt2_dir(path):  # (it was said to have no weights: hunt, 2026-11-27)
            raise NoCheckpoint(f"{path} is a Hugging Face model, not a run of train.py: give it as --init_from={shlex.quote(str(path))}")
        if _hf_config(path):
            raise NoCheckpoint(f"{path} is a Hugging Face model directory, and " + missing_hf_weights(path)
                               .removeprefix(f"{path} "))
        raise NoCheckpoint(f"no complete checkpoint in {path}")
    if found is None and which == "best":  # the newest is not the best: say so rather than stand in for it
        try:
            named = (path / "best").read_text(encoding="utf-8", errors="backslashreplace").strip()
            why = (f"`best` names {named if named.isprintable() else ascii(named)}, which is gone or incomplete"
                   if named else "`best` is empty")
        except OSError:
            # (a run stopped before its first evaluation at a checkpoint was said to have failed its evaluations:
            # hunt 29-c; step 0's evaluation saves no checkpoint)
            why = ("no checkpoint was saved with an evaluation (none ran at a save yet, or each ran out of memory "
                   "or was not finite)")
        raise NoBestCheckpoint(f"no best checkpoint in {path}: {why}; choose --ckpt=latest or a checkpoint, "
                               f"e.g. --ckpt={shlex.quote(str(ckpts[-1]))}", path=path, why=why, newest=ckpts[-1])
    return ckpts[-1]  # a `latest` pointer missing or stale: the newest complete checkpoint


@dataclass
class Checkpoint:
    path: Path
    meta: dict
    loaded_state: dict | None = field(default=None, repr=False)  # state.pt, when already read
    # a LoRA checkpoint loaded by load_model: where its base was found (absolute, a checkpoint by its name),
    # which a resumed run records (the recorded place, or where the base was moved to: hunt 36-c A6)
    base_found: str | None = None

    @property
    def model_config(self) -> GPTConfig:
        return GPTConfig.from_dict(self.meta["model_config"])

    def weights(self) -> dict[str, torch.Tensor]:
        return read_safetensors(self.path / WEIGHTS)

    def state(self) -> dict:
        return self.loaded_state if self.loaded_state is not None else read_torch_file(self.path / STATE)


MODEL_OPTIONS = {f.name for f in fields(GPTConfig)}


def read_meta(ckpt: Path) -> dict:
    """meta.json of a checkpoint, checked for what loading it needs."""
    try:
        text = (ckpt / META).read_text()
        # (a run kept in Git LFS whole, cloned without it: "unreadable checkpoint metadata (Expecting value ...)", and a
        # resume set the checkpoint aside as broken, out of `git lfs pull`'s reach: hunt 49-m M2)
        refuse_an_lfs_pointer(ckpt / META, text[:64].encode())
        meta = json.loads(text)
        # (True is an int to isinstance, and a step below 0 resumed into more steps than asked: hunt 28-a F6)
        if not isinstance(meta, dict) or type(meta.get("step")) is not int or meta["step"] < 0:
            raise ValueError("no 'step' that is an integer >= 0")
        # (a LoRA checkpoint's too: its load compares it with its base's config, where one missing, unknown to
        # GPTConfig or invalid was a KeyError or ValueError traceback, or a line naming no file: hunt 47-d D5)
        if not isinstance(meta["model_config"], dict):
            raise TypeError("a 'model_config' that is not an object")
        # (what another version's options are is said below; only what this version has is checked here)
        if not (newer := another_versions_model_options(meta)):
            GPTConfig.from_dict(meta["model_config"])
            if meta.get("lora"):
                check_lora_block(meta["lora"])
    except UnreadableFile:  # (the pointer's own line)
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError, KeyError, TypeError) as e:
        # KeyError, TypeError: meta["model_config"] or meta["lora"]["config"] missing or not a dict;
        # ValueError: GPTConfig's or LoRAConfig's checks
        reason = f"no {e}" if isinstance(e, KeyError) else describe_error(e)
        raise UnreadableFile(ckpt / META, f"unreadable checkpoint metadata ({reason})",
                             damaged=not isinstance(e, OSError)) from None
    if newer:
        # Options of the model that another version has (a newer one's): such a checkpoint was set aside as damaged,
        # broken-ckpt-*, and the version that wrote it could not resume it either until renamed back (hunt 47-d D4).
        # (A key mistyped by hand stops the resume too, rather than being set aside: nothing is lost either way.)
        raise ConfigError(f"{ckpt / META}: the checkpoint's model has options this version of the project does not "
                          f"have ({', '.join(newer)}): saved by another version (which reads it), or edited")
    tokenizer = meta.get("tokenizer")
    if "tokenizer" in meta and not isinstance(tokenizer, str):
        # (a list was a TypeError traceback in sample.py, null "unknown tokenizer None; choose one of ...": hunt 52-h H1)
        raise UnreadableFile(ckpt / META, f"unreadable checkpoint metadata ('tokenizer' is {type(tokenizer).__name__}, "
                                          "not str)")
    if isinstance(tokenizer, str) and tokenizer not in TOKENIZER_NAMES:
        # One that another version of this project (or a fork) has: "unknown tokenizer ...; choose one of gpt2, ..."
        # (sample.py, --init_from) and "invalid configuration: tokenizer must be one of ..." (a resume) told the user
        # to choose what the checkpoint records (hunt 47-d D3). Not damage: nothing is set aside for it.
        raise ConfigError(f"{ckpt / META}: the checkpoint's tokenizer {tokenizer!r} is not one this version of the "
                          f"project has ({', '.join(TOKENIZER_NAMES)}): saved by another version (which reads it), "
                          "or edited")
    return meta


# The model's options whose values are names, each from a list another version may add to.
NAMED_MODEL_OPTIONS = {"pos_encoding": POS_ENCODINGS, "activation": tuple(GELU_APPROXIMATE)}


def another_versions_model_options(meta: dict) -> list[str]:
    """What a checkpoint's meta.json records of its model that this version does not have but another may:
    a model option (a key of model_config), a name for a named option's value (pos_encoding 'alibi'), a LoRA
    option or target. Such a checkpoint is another version's, not damaged: a value or a LoRA key was set aside
    as broken-ckpt-* where a model_config key was said (hunt 48-d D1). A value of the wrong type, or out of
    range, is damage (read_meta)."""
    model_config = meta["model_config"]
    newer = sorted(set(model_config) - MODEL_OPTIONS)
    newer += [f"{k} {v!r}" for k, names in NAMED_MODEL_OPTIONS.items()
              if isinstance(v := model_config.get(k), str) and v not in names]
    lora = meta.get("lora")
    if isinstance(lora, dict) and isinstance(config := lora.get("config"), dict):
        from gpt.lora import LORA_TARGETS, LoRAConfig

        newer += [f"LoRA's {k}" for k in sorted(set(config) - {f.name for f in fields(LoRAConfig)})]
        targets = config.get("targets")
        if isinstance(targets, (list, tuple)):
            newer += [f"LoRA target {t!r}" for t in targets if isinstance(t, str) and t not in LORA_TARGETS]
    return newer


def check_lora_block(lora) -> None:
    """A LoRA checkpoint's meta["lora"]: its base (see lora_base) and LoRAConfig, or ValueError."""
    from gpt.lora import LoRAConfig

    if not isinstance(lora, dict) or not isinstance(lora.get("base"), str) or not lora["base"]:
        raise ValueError("a 'lora' block without its 'base'")
    if not isinstance(lora.get("base_step", 0), int) or not isinstance(lora.get("base_weights", ""), str):
        raise ValueError("a 'lora' block with a 'base_step' that is not an integer or 'base_weights' not text")
    LoRAConfig.from_dict(lora["config"])


def open_checkpoint(path: str | Path, which: str = "latest") -> Checkpoint:
    """The checkpoint whose weights `path` names (find_checkpoint's; its state.pt there or not), with its meta.json."""
    ckpt = find_checkpoint(path, which, weights_only=True)
    return Checkpoint(ckpt, read_meta(ckpt))


# What resuming reads from a checkpoint beyond what loading its model needs (read_meta), by type:
# a checkpoint without one of them is skipped like an unreadable one, never a KeyError half-way.
RESUME_META = {"config": dict, "tokens_seen": int, "tokenizer": str}
RESUME_STATE = {"optimizer": dict, "scaler": dict, "rng": list, "loader": dict}


def _check_keys(path: Path, found, expected: dict[str, type], what: str) -> None:
    if not isinstance(found, dict):
        raise UnreadableFile(path, f"{what} (a {type(found).__name__}, not a dict)")
    for key, kind in expected.items():
        if key not in found:
            raise UnreadableFile(path, f"{what} (no {key!r})")
        if not isinstance(found[key], kind):
            raise UnreadableFile(path, f"{what} ({key!r} is {type(found[key]).__name__}, not {kind.__name__})")


def _check_resume_values(path: Path, meta: dict) -> None:
    """meta.json's config converted to the options' types in place, and its best_val_loss a number
    or null, else UnreadableFile: hand edits were TypeError tracebacks mid-setup (hunt 28-a F6)."""
    try:
        meta["config"] = saved_config(meta["config"])
    except ConfigError as e:
        raise UnreadableFile(path, f"unreadable checkpoint metadata ({e})") from None
    if newer := another_versions_values(meta["config"]):
        # Not damage: said, and nothing set aside, as a model's options of another version are (read_meta)
        raise ConfigError(f"{path}: the run was trained with options this version of the project does not have "
                          f"({', '.join(newer)}): saved by another version (which resumes it), or edited")
    best = meta.get("best_val_loss")  # (null: no evaluation yet; absent in runs saved before it was)
    if best is not None and (isinstance(best, bool) or not isinstance(best, (int, float)) or not math.isfinite(best)):
        raise UnreadableFile(path, f"unreadable checkpoint metadata ('best_val_loss' is {best!r}, not a finite "
                                   "number or null)")


def open_resumable(out_dir: str | Path) -> tuple[Checkpoint, list[tuple[Path, str]]]:
    """The newest checkpoint of a run whose files all read back, and (path, why) for each newer
    one skipped. Its state.pt is kept, already read, on the Checkpoint. Raises NoCheckpoint
    when there is none, UnreadableFile when none of them can be read, or at once when reading one
    failed other than for its contents (`UnreadableFile.damaged`)."""
    for tries_left in reversed(range(PRUNED_RETRIES)):
        try:
            return _open_resumable(Path(out_dir))
        except UnreadableFile as e:
            # read while the run trains there (--eval_only takes no lock; a resume reads before it takes the lock,
            # which then says "in use by another training run"): the checkpoint its pruning removed meanwhile was
            # "No such file or directory; reading it failed ... move ckpt-N out of RUN" (hunt 37-b B4)
            if not tries_left or not _pruned_while_read(Path(out_dir), e.path):
                raise
    raise AssertionError("unreachable")


def _open_resumable(out_dir: Path) -> tuple[Checkpoint, list[tuple[Path, str]]]:
    _refuse_a_file(out_dir)
    if _is_complete(out_dir):  # (it said "no complete checkpoint in" the checkpoint: hunt 34-b B5)
        run = Path(os.path.normpath(out_dir / ".."))  # (out_dir=. inside it: its parent is "..", not ".": review 34 R1)
        raise NoCheckpoint(f"{out_dir} is a checkpoint of the run in {run}, not a run's out_dir: resume the run with "
                           f"--out_dir={shlex.quote(str(run))}, or start a new run from this checkpoint with "
                           f"--init_from={shlex.quote(str(out_dir))} --out_dir=<another directory>")
    candidates = list_checkpoints(out_dir)[::-1]
    latest = _pointer(out_dir, "latest")
    if latest in candidates:  # the pointer first; it names the newest unless a save failed half-way
        candidates.remove(latest)
        candidates.insert(0, latest)
    if not candidates:
        # Checkpoints that lost a file are named, the way on with them: it was "no complete checkpoint in RUN" of a
        # run whose checkpoints lost only their state.pt (hunt 48-c C1), whose weights a new run starts from
        if lost := incomplete_checkpoints(out_dir):
            newest = lost[-1][0]
            way = (f"; its weights can start a new run: --init_from={shlex.quote(str(newest))} "
                   "--out_dir=<another directory>" if _has_weights(newest) else "")
            raise NoCheckpoint(f"no checkpoint in {out_dir} can be resumed: {lost[-1][1]}{way}")
        # (the way on: a typo in --out_dir, or a first run given --init_from=resume, heard only "no complete
        # checkpoint in out-instruct", hunt 49-l)
        there = "there is no such directory" if not out_dir.exists() else "nothing to resume"
        raise NoCheckpoint(f"no complete checkpoint in {out_dir}: {there}",
                           way="a new run there is started without --init_from=resume")
    skipped = incomplete_checkpoints(out_dir)  # said and set aside like an unreadable one
    for path in candidates:
        try:
            ckpt = Checkpoint(path, read_meta(path))
            _check_keys(path / META, ckpt.meta, RESUME_META, "unreadable checkpoint metadata")
            _check_resume_values(path / META, ckpt.meta)
            ckpt.weights()  # read through once: a torn file is found now, not half-way through setup
            ckpt.loaded_state = ckpt.state()
            _check_keys(path / STATE, ckpt.loaded_state, RESUME_STATE, "not a training state")
        except UnreadableFile as e:
            if not e.damaged:  # (a permission, an I/O error: a good checkpoint was set aside as broken, hunt 30-c F5)
                raise UnreadableFile(e.path, f"{e.reason}; reading it failed, which does not make {path.name} "
                                             f"damaged: nothing was set aside. Resume once it reads, or move {path.name} "
                                             f"out of {out_dir} to resume from the checkpoint before it",
                                     damaged=False) from None
            skipped.append((path, str(e)))
            continue
        # Older ones that lost only their state.pt are not passed over: weights kept without their training state (to
        # save room, the resumed one's predecessors), which sample.py and --init_from take. They were said to be
        # "skipped" by a resume that took a newer one, and renamed broken-ckpt-*, out of their names' reach (hunt 48-c C5)
        return ckpt, [(p, why) for p, why in skipped
                      if not (_has_weights(p) and (_step(p) or 0) < (_step(path) or 0))]
    raise UnreadableFile(out_dir, "no checkpoint can be loaded: " + "; ".join(why for _, why in skipped))


def set_aside(ckpt: Path) -> Path:
    """Rename a checkpoint that cannot be loaded to broken-ckpt-*: kept for inspection, but never
    resumed again and never counted (or pruned) as one of the run's checkpoints. A name already
    taken (this step was set aside before, then saved again) gets a suffix: broken-ckpt-*.1, .2, ..."""
    target, n = ckpt.with_name(BROKEN_PREFIX + ckpt.name), 0
    while target.exists():  # os.replace would fail on a full directory, or replace an empty one
        n += 1
        target = ckpt.with_name(f"{BROKEN_PREFIX}{ckpt.name}.{n}")
    os.replace(ckpt, target)
    return target


def load_model(path: str | Path, which: str = "latest", device: str | torch.device = "cpu",
               merge_lora: bool = True, lora_base: str | Path | BaseOverride | None = None) -> tuple[GPT, Checkpoint]:
    """The model of a checkpoint, ready to use: built on the meta device, weights loaded with
    strict keys, in eval mode. A LoRA checkpoint loads its base (recorded in meta.json) and its adapters,
    merged by default for fast inference. `lora_base`: where its base is now, if it was moved (a run
    directory or a checkpoint directory), taken where its fingerprint matches (checked_base); one that
    no base of the checkpoint matches is refused."""
    override = BaseOverride(Path(lora_base)) if isinstance(lora_base, (str, Path)) else lora_base
    for tries_left in reversed(range(PRUNED_RETRIES)):
        try:
            model, ckpt = _load_model(path, which, device, merge_lora, override)
            break
        except UnreadableFile as e:
            # A run that trains beside the reader (README: sample.py samples while a run trains) pruned the
            # checkpoint its `latest` named between our reading its meta.json and its weights: "model.safetensors:
            # No such file or directory; choose another with --ckpt", of a run with newer checkpoints (hunt 37-b
            # B2). The run's newest is taken again; a checkpoint asked for by its own path is not replaced.
            if not tries_left or not _pruned_while_read(Path(path), e.path):
                raise
            if override is not lora_base:  # (ours: what it found on the way, forgotten)
                override = BaseOverride(Path(lora_base))
    if override is not None and not override.used and override is not lora_base:  # (the outermost call says it)
        raise override.refusal(str(ckpt.path))
    return model, ckpt


PRUNED_RETRIES = 3  # loads of a run whose checkpoint its training pruned while it was read


def _pruned_while_read(run: Path, file: Path) -> bool:
    """Whether `file`, which could not be read, is in one of `run`'s checkpoints that is gone now (pruned)."""
    ckpt = file.parent
    if not ckpt.name.startswith(CKPT_PREFIX) or ckpt.exists() or _has_weights(copy_of(run)):
        return False
    with contextlib.suppress(OSError):
        return os.path.samefile(ckpt.parent, run)
    return False


def _load_model(path: str | Path, which: str, device: str | torch.device, merge_lora: bool,
                override: BaseOverride | None) -> tuple[GPT, Checkpoint]:
    ckpt = open_checkpoint(path, which)
    lora = ckpt.meta.get("lora")
    if lora:
        from gpt.lora import LoRAConfig, apply_lora, load_lora_state_dict
        from gpt.lora import merge_lora as merge

        found = checked_base(ckpt.path, lora, override)
        # by its name and absolute, as lora_base records a base (a stranded copy's `.tmp-old-` name is not one)
        # (a record without a fingerprint, saved by an older version, is kept as it was: checked_base takes its
        # base only there, review 36 R7). The name is the resolved
        # path's, as lora_base takes it: a link's name under its target's directory named no checkpoint, and a
        # resume given --lora_base=a link to a checkpoint was refused as "removed by its run" (review 36 R3)
        where = Path(found).resolve()
        ckpt.base_found = (str(where.parent / name_of(where)) if "base_step" in lora
                           else str(Path(found).resolve()) if "base_weights" in lora and Path(found).is_dir()
                           else found)
        # in float32, as train.py trained the adapters on it: a half-precision base merged in its own
        # dtype rounded W + BA to it (0.006 in the logits of a bf16 base: hunt 30-e F6)
        model = load_base_model(found, dropout=0.0, lora_base=override).float()
        # Its weights are fingerprinted; its config is read again at each load: a base's config.json
        # edited since (n_head, the activation: every tensor's shape the same) put the adapters onto
        # another computation, loaded and resumed without a word (hunt 30-e F1)
        theirs, trained_on = model.config.to_dict(), ckpt.model_config.to_dict()
        changed = [f"{k} {theirs[k]!r} (the adapters were trained with {trained_on[k]!r})"
                   for k in theirs if k != "dropout" and theirs[k] != trained_on.get(k)]
        if changed:  # (naming where the base was found, where that is not the recorded place: moved with the run,
            # or --lora_base; the recorded one may be missing, and was named alone: review 36 R4)
            at = "" if found == lora["base"] else f" (found at {found})"
            raise ChangedBase(f"LoRA checkpoint {ckpt.path} was trained on base {lora['base']}{at}, whose config has "
                              f"changed since: it now has {', '.join(changed)}")
        apply_lora(model, LoRAConfig.from_dict(lora["config"]))  # (checked by read_meta)
        weights = ckpt.weights()  # a truncated file says so itself (UnreadableFile is a ValueError too)
        try:
            load_lora_state_dict(model, weights)
        except (KeyError, ValueError) as e:  # its own reports: adapters that do not fit the base's shapes
            why = e.args[0] if isinstance(e, KeyError) else e
            if "base_weights" in lora:  # the base's weights and config were found unchanged just now: the
                # adapters are what is wrong, and no message named their file (hunt 33-b B3)
                raise UnreadableFile(ckpt.path / WEIGHTS, f"adapters that do not fit the LoRA config in its "
                                     f"meta.json, on a base found unchanged: {why}") from None
            raise ChangedBase(f"LoRA checkpoint {ckpt.path} does not fit its base {lora['base']}, which must have "
                              f"changed: {why}") from None
        if merge_lora:
            merge(model)
    else:
        model = GPT.empty(ckpt.model_config)
        # (integer weights were torch's RuntimeError traceback from load_state_dict, in sample.py and a resume too;
        # complex, float8 or mixed ones loaded as they were, for a forward that failed or, after sample.py's cast,
        # complex ones' imaginary parts dropped with a mere warning: from_pretrained refused or converted them
        # already, hunt 49-g G2)
        weights = computable_weights(ckpt.weights(), ckpt.path / WEIGHTS)
        try:
            model.load_weights(weights, assign=True)
        except (KeyError, ValueError) as e:  # load_weights' own reports: keys or shapes that do not fit
            reason = str(e.args[0]) if isinstance(e, KeyError) else str(e)
            raise UnreadableFile(ckpt.path / WEIGHTS, f"{reason} (model config from {META})") from None
    # (its end-of-text, which save_pretrained writes for transformers' generate: hunt 43-a A3)
    tokenizer = ckpt.meta.get("tokenizer")
    model.tokenizer_name = tokenizer if isinstance(tokenizer, str) else None
    # The data's vocabulary, where the model's is padded past it (trained on a GPU): generate() then draws
    # from it alone, as sample.py does (hunt 43-b B3)
    ends = ckpt.meta.get("end_tokens")  # (save_checkpoint's record; a LoRA run's base has given its own already)
    if isinstance(ends, list):
        model.end_tokens = tuple(dict.fromkeys(i for i in ends if is_token_id(i, model.config.vocab_size)))
    data_vocab = ckpt.meta.get("vocab_size")
    if isinstance(data_vocab, int) and not isinstance(data_vocab, bool) and 0 < data_vocab < model.config.vocab_size:
        model.data_vocab_size = data_vocab
    # eval mode, as transformers' from_pretrained: in nn.Module's default training mode a run trained with
    # --dropout gave other logits and a higher loss at every call, in silence (hunt 35-c C2). model.train()
    # to fine-tune it.
    return model.to(device).eval(), ckpt


def is_hf_gpt2_dir(path: str | Path) -> bool:
    """A Hugging Face GPT-2 directory: config.json beside the weights (our runs keep theirs in ckpt-*/)."""
    path = Path(path)
    return (path / "config.json").is_file() and any((path / f).is_file() for f in ("model.safetensors", "pytorch_model.bin"))


def weights_fingerprint(path: Path) -> dict:
    """The identity of a LoRA run's base weights file, recorded with the run: the sha256 of the
    whole file, taken once at the run's start (0.4 s for 500 MB, GPT-2 124M's size, on the 2-core
    VM from the page cache), and its `file_stat`, which lets a load skip the hash while it is
    unchanged and hash the file again where it is not. Its ctime is what no tool sets: tar, cp -p,
    shutil.copy2 and rsync -t write a file in place and then set its mtime, so size, inode and
    mtime alone stayed the same for other weights of the same shape (review, 2026-11-26). A file
    changed (ctime) in the last RACY_NS before the run started gets no stat, and is hashed at
    each load: a filesystem with coarse timestamps could give a second write within its tick the
    same stat (git's "racy" files). Until 2026-11-26 the hash read 16 slices of 64 KiB, and
    changes between them went unseen (audit R1); `base_unchanged` still checks such records so."""
    stat = file_stat(path)
    record = {"base_weights": f"sha256:{file_sha256(path)}"}
    if time.time_ns() - max(stat[-2:]) > RACY_NS:
        record["base_weights_stat"] = stat
    return record


RACY_NS = 3 * 10**9  # a weights file changed this recently is not trusted by its stat


def file_stat(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def base_unchanged(weights: Path, lora: dict) -> bool:
    """Whether `weights` is still the file a LoRA run recorded (weights_fingerprint)."""
    recorded = lora["base_weights"]
    if not recorded.startswith("sha256:"):  # "size:hash" of 16 slices: saved before 2026-11-26
        size, digest = weights.stat().st_size, hashlib.sha256()
        with open(weights, "rb") as f:
            for i in range(16):
                f.seek(size * i // 16)
                digest.update(f.read(1 << 16))
        return recorded == f"{size}:{digest.hexdigest()[:32]}"
    if lora.get("base_weights_stat") == file_stat(weights):
        return True
    return recorded == f"sha256:{file_sha256(weights)}"


def _hf_weights(path: Path) -> Path:
    return path / "model.safetensors" if (path / "model.safetensors").is_file() else path / "pytorch_model.bin"


def lora_base(init_from: str, fingerprint: bool = True) -> dict:
    """What a run started from `init_from` records of it, so that its LoRA adapters only ever load
    onto those very weights (and not onto whatever a base run's latest checkpoint is later): the
    concrete checkpoint (absolute) with its step for one of our runs, the absolute directory of a
    Hugging Face one, each with weights_fingerprint (which hashes the file: `fingerprint` False
    leaves it out where no adapters will be saved); the name of a hub model."""
    path = weights_dir(init_from)
    if path is None:  # a hub name: the weights its cache serves now (hunt 30-e F5: a later revision, or
        # another machine's cache or mirror, took the adapters without a word); the file from_pretrained reads there,
        # which may be pytorch_model.bin (model.safetensors alone was a FileNotFoundError traceback: hunt 51-v V1)
        return {"base": init_from, **weights_fingerprint(_hf_weights(hub_gpt2(init_from)))} if fingerprint else \
            {"base": init_from}
    if is_hf_gpt2_dir(path):
        weights = _hf_weights(path)
        record = {"base": str(path.resolve())}
    else:
        ckpt = open_checkpoint(path)
        weights = ckpt.path / WEIGHTS
        # by its name, also where that step's only copy is a stranded earlier save (`copy_of` finds it): the
        # base run's next save of the step removes that copy (hunt 30-c F10)
        where = ckpt.path.resolve()  # (a link to a checkpoint, re-pointed later, is not the base: review 31)
        record = {"base": str(where.parent / name_of(where)), "base_step": ckpt.meta["step"]}
    try:
        return {**record, **weights_fingerprint(weights)} if fingerprint else record
    except FileNotFoundError:  # (a traceback: hunt 37-b B3)
        refuse_a_pruned_base(record)
        raise


def refuse_a_pruned_base(base: dict) -> None:
    """ChangedBase where the checkpoint `base` (lora_base's record) is gone: its run, training beside this
    one, pruned it while this run started from it (between reading it and loading it, or marking it)."""
    if "base_step" in base and not _has_weights(copy_of(Path(base["base"]))):
        raise ChangedBase(f"the base checkpoint {base['base']} was removed by its run (pruned) while this one started: "
                          "start again, from the run's newer checkpoint")


def with_relative_base(lora: dict, out_dir: Path) -> dict:
    """A LoRA checkpoint's record of its base (lora_base), with where that base lies relative to the
    run's directory (`base_relative`): the absolute path alone was "missing" wherever the runs were
    moved together (a project directory moved or copied, runs copied to another machine), and nothing
    took the weights where they were (hunt 36-c A6). Only for a fingerprinted base on a path (not a hub
    name), which is taken there only where the fingerprint matches (checked_base); recomputed at each save."""
    lora = {k: v for k, v in lora.items() if k != "base_relative"}
    if "base_weights" not in lora or not os.path.isabs(lora["base"]):
        return lora
    try:
        relative = os.path.relpath(lora["base"], Path(out_dir).resolve())
    except ValueError:  # (another drive, on Windows: the absolute path is all there is)
        return lora
    return {**lora, "base_relative": Path(relative).as_posix()}


@dataclass
class BaseOverride:
    """Where the user says a LoRA run's base is now (sample.py's and train.py's --lora_base,
    load_model's lora_base): a run directory of ours (its checkpoint of the recorded name is taken), a
    ckpt-* directory, or a Hugging Face directory. checked_base takes it only where its weights are the
    recorded ones by their fingerprint, at any depth of a LoRA run on a LoRA run; `used` says whether
    one took it, `tried` what each level found there."""
    path: Path
    used: bool = False
    tried: list[str] = field(default_factory=list)

    def place(self, base: str, ours: bool) -> Path:
        """Where it puts the base recorded as `base` (a checkpoint of ours where `ours`)."""
        path = Path(os.path.abspath(self.path))
        if not ours or _has_weights(copy_of(path)):
            return path
        return path / name_of(Path(base))

    def found(self, place: Path, why: str) -> str:
        """What `place` (self.place's) held, said of the option."""
        if why == "missing" and not os.path.isdir(self.path):
            return "no such directory"
        if why == "missing" and place != Path(os.path.abspath(self.path)):
            return f"it has no {place.name}"
        if why == "missing":  # (a directory without the weights: a run of ours given for a Hugging Face base was said
            # to be "missing", there: hunt 52-l L5)
            return "it has neither model.safetensors nor pytorch_model.bin" if place.is_dir() else f"{place} is missing"
        return (("it holds" if place == Path(os.path.abspath(self.path)) else f"its {place.name} holds")
                + " other weights than the base the adapters were trained on (by their fingerprint)")

    def option(self) -> str:
        return f"--lora_base={shlex.quote(str(self.path))}"

    def refusal(self, target: str) -> Exception:
        """Why it was not taken for `target` (a checkpoint, an --init_from), where nothing took it: given
        where it stands for nothing, it is refused rather than ignored."""
        if self.tried:  # (a wrong base, while the right one was found where recorded)
            return ChangedBase(f"{self.option()} is not the base of {target} ({'; '.join(self.tried)}), whose base was "
                               "found without it: leave out --lora_base")
        return ConfigError(f"{self.option()}: {target} is not a LoRA checkpoint whose base has a fingerprint to check "
                           "another place by, which alone it could stand for: leave out --lora_base")


def checked_base(ckpt: Path, lora: dict, override: BaseOverride | None = None) -> str:
    """The base a LoRA checkpoint's adapters load onto, found where its fingerprint matches: at
    `override`'s place (--lora_base) where given, then where it was recorded (`copy_of` it, for one of
    our checkpoints), then where it lay relative to the run (`base_relative`), then where the run's other
    checkpoints recorded it since (a resume that was given --lora_base: hunt 36-c A6). Refused in one
    line, naming each place looked, if it is in none of them. Checkpoints saved before the base was
    recorded exactly name a run directory: its latest checkpoint is used, as then, with a warning."""
    base = lora["base"]
    if "base_weights" not in lora and base not in GPT2_HUB_CONFIGS:
        if not Path(base).is_dir():
            # Moved since, such a base is put back where it was recorded (a symbolic link there will do): with no
            # fingerprint to check another place by, --lora_base took it anywhere, and in a LoRA run on a LoRA
            # run the option meant for another level put the adapters onto another model (review 36 R7; it
            # was passed over in silence before, and the line gave no way on: hunt 36-d D3)
            relative = "" if Path(base).is_absolute() else " (a relative path, taken from the current directory)"
            given = f"{override.option()} cannot stand for it: " if override is not None else ""
            raise ChangedBase(f"LoRA checkpoint {ckpt} was trained on base {base}, which is missing{relative}; "
                              f"{given}its record, saved by an older version, has no fingerprint to check another "
                              "place by: if it is elsewhere now (moved or copied), put it back there, or a symbolic "
                              "link to it")
        print(f"warning: LoRA checkpoint {ckpt} names its base only as {base} (saved by an older version): "
              "its adapters are applied to that base as it is now", file=sys.stderr)
    if "base_weights" not in lora:  # (nothing to check another place by: --lora_base is not taken here)
        return base
    step = lora.get("base_step")
    what = f"LoRA checkpoint {ckpt} was trained on base {base}" + (f" (step {step})" if step is not None else "")
    ours = step is not None

    def weights_at(place: Path) -> tuple[Path, Path]:  # (the directory to load, its weights file)
        where = copy_of(place) if ours else place
        return where, where / WEIGHTS if ours else _hf_weights(where)

    unsearchable: dict[Path, str] = {}  # place -> the directory on its way that cannot be searched, and why

    def found_at(place: Path, given: bool = False) -> tuple[Path, str | None]:  # (the directory to load, else why not)
        try:
            where, weights = weights_at(place)
            if not weights.is_file():
                return where, "missing"
        except (UnreadableFile, PermissionError) as e:
            if given or getattr(e, "damaged", False):  # (--lora_base: the user's own place, to chmod)
                raise
            # A recorded place this user cannot search (another user's home, where the run was trained) is passed
            # over as a missing one, for where the base lies now (relative to the run): it stopped the lookup, a
            # PermissionError traceback on Python 3.11, and on 3.14 too since the strict look (hunt 50-d D2)
            blocked = unsearchable_directory(place)
            unsearchable[place] = f"{blocked[0]}: {blocked[1].strerror}" if blocked else describe_error(e)
            return place, "cannot be searched"
        return where, None if base_unchanged(weights, lora) else "other weights"

    def said_of(place: Path, missing: str, other: str) -> str:
        return {"missing": missing, "other weights": other}.get(
            looked[place], f"cannot be searched here ({unsearchable.get(place)})")

    if base in GPT2_HUB_CONFIGS and not Path(base).is_dir():  # (as the hub cache serves it now)
        return checked_hub_base(ckpt, what, base, lora, override, found_at)
    looked: dict[Path, str] = {}  # place -> what was there, in the order looked
    if override is not None:
        place = override.place(base, ours)
        where, why = found_at(place, given=True)
        if why is None:
            override.used = True
            return str(where)
        override.tried.append(override.found(place, why))
        looked[place] = why
    recorded = [Path(base)]
    if isinstance(lora.get("base_relative"), str):  # (ckpt's parent: the run, also for a stranded copy of a step)
        recorded.append(Path(os.path.normpath(ckpt.parent.resolve() / lora["base_relative"])))
    for place in recorded:
        if place not in looked:
            where, looked[place] = found_at(place)
            if looked[place] is None:
                return str(where)
    for place in dict.fromkeys([*recorded_since(ckpt, lora), *(set_aside_copies(recorded) if ours else [])]):
        if place not in looked:
            where, looked_since = found_at(place)
            if looked_since is None:
                return str(where)
    if looked[Path(base)] == "other weights":
        # A Git LFS pointer where the base's weights are (a run kept in LFS, cloned without it) is not other weights
        # but these, not fetched: "which has changed since" sent the user to --lora_base (hunt 49-m M5)
        weights = weights_at(Path(base))[1]
        with contextlib.suppress(OSError), open(weights, "rb") as f:
            refuse_an_lfs_pointer(weights, f.read(len(LFS_POINTER)))
    said = "which " + said_of(Path(base), "is missing", "has changed since")
    given_place = override.place(base, ours) if override is not None else None
    others = [f"{place} (where it lay relative to this run) " + said_of(place, "is missing too", "holds other weights")
              for place in looked if place not in (Path(base), given_place)]
    given = [f"{override.option()}: {override.tried[-1]}"] if override is not None else [
        "if it is elsewhere now (moved or copied), point to it with --lora_base=PATH (its run's directory or its "
        "ckpt-* directory)" if ours else "if it is elsewhere now (moved or copied), point to it with --lora_base=PATH "
        "(its directory)"]
    raise ChangedBase("; ".join([f"{what}, {said}", *others, *given]))


def checked_hub_base(ckpt: Path, what: str, base: str, lora: dict, override: BaseOverride | None, found_at) -> str:
    """checked_base for a base recorded as a hub name: `override`'s place (--lora_base) where its weights are the
    recorded ones, else the hub cache's, where they are, else where the run's other checkpoints recorded them since
    (a resume given --lora_base). --lora_base was not looked at: with the hub cache cleared and no network (another
    machine), a copy of those very weights could not stand in, refused as "not a LoRA checkpoint whose base has a
    fingerprint to check another place by", and nothing else loaded the adapters (hunt 52-l L4). `what`: the
    checkpoint and its base, as said; `found_at`: checked_base's."""
    if override is not None:
        place = override.place(base, ours=False)
        where, why = found_at(place, given=True)
        if why is None:
            override.used = True
            return str(where)
        override.tried.append(override.found(place, why))
    way = ("if a copy of the weights it was trained on is at hand, point to it with --lora_base=PATH (its directory)"
           if override is None else f"{override.option()}: {override.tried[-1]}")
    try:
        weights = _hf_weights(hub_gpt2(base))  # (the file lora_base fingerprinted: the one from_pretrained reads)
        if weights.is_file() and base_unchanged(weights, lora):
            return base
        error = ChangedBase(f"{what}, which {'has changed since' if weights.is_file() else 'is missing'}; {way}")
    except HubUnreachable as e:
        # (the hub's way on, a local directory for --init_from, is --lora_base's here)
        error = HubUnreachable(f"{what}: {str(e).removesuffix(' ' + WITHOUT_A_NETWORK)} {way[0].upper()}{way[1:]}")
    for place in dict.fromkeys(p for p in recorded_since(ckpt, lora) if str(p) != base):  # (not the hub name again)
        where, why = found_at(place)
        if why is None:
            return str(where)
    raise error


def rebased(lora: dict, found: str) -> dict:
    """A LoRA checkpoint's record of its base (lora_base's keys) for the run's next checkpoint, with the
    base where load_model found it (Checkpoint.base_found). Found elsewhere than recorded (moved with the
    run, or --lora_base: hunt 36-c A6), its weights were hashed there just now (their stat differs from the
    recorded one), so their stat there is taken, as weights_fingerprint takes one: each later load hashed
    the whole file again. A record without a fingerprint (saved before 2026-11-25: the base's path alone,
    a checkpoint or a run directory) becomes lora_base's exact record of the checkpoint loaded now, as a
    new LoRA run's is: without its step the resumed run did not list itself in the base's lora-runs.txt,
    and the base run's next pruning removed the base for good, under adapters saved by this version too;
    and a run directory's later `latest` took the adapters (hunt 36-d D1)."""
    record = {k: v for k, v in lora.items() if k != "config"}
    if "base_weights" not in lora and (found not in GPT2_HUB_CONFIGS or Path(found).is_dir()):
        return {**record, **lora_base(found)}
    if found == lora["base"] or "base_weights" not in lora:
        return record
    record = {k: v for k, v in record.items() if k != "base_weights_stat"} | {"base": found}
    weights = Path(found) / WEIGHTS if "base_step" in lora else _hf_weights(Path(found))
    with contextlib.suppress(OSError):
        stat = file_stat(weights)
        if time.time_ns() - max(stat[-2:]) > RACY_NS:
            record["base_weights_stat"] = stat
    return record


def set_aside_copies(places: list[Path]) -> list[Path]:
    """The broken-ckpt-* names (`set_aside`'s) that checkpoints recorded at `places` may have now. A resume renames
    a newer checkpoint it passes over, one that lost only its state.pt too, whose weights are whole: a LoRA run
    trained on it was "trained on base RUN/ckpt-N, which is missing" (or "has changed since", once the resumed run
    saved step N again), though its very weights lay beside it (hunt 50-c C1). checked_base takes one only where
    the fingerprint matches."""
    return [p for place in places
            for p in [place.with_name(BROKEN_PREFIX + place.name),
                      *sorted(place.parent.glob(f"{glob.escape(BROKEN_PREFIX + place.name)}.*"))]]


def recorded_since(ckpt: Path, lora: dict) -> list[Path]:
    """Where the other checkpoints of `ckpt`'s run record the same base (by its fingerprint) at
    another place: a resume given --lora_base recorded it in its own checkpoints, and the run's older
    ones (`best`, say) need the option no more either (hunt 36-c A6). Unreadable ones are passed over."""
    places = []
    for other in list_checkpoints(ckpt.parent):
        try:
            theirs = json.loads((other / META).read_text(encoding="utf-8"))["lora"]
            if theirs["base_weights"] == lora["base_weights"]:
                places.append(Path(theirs["base"]))
                if isinstance(theirs.get("base_relative"), str):
                    places.append(Path(os.path.normpath(ckpt.parent.resolve() / theirs["base_relative"])))
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
            continue
    return places


# A few of OpenAI's GPT-2 BPE ids, as a Hugging Face directory's vocab.json spells its tokens
GPT2_VOCAB_IDS = {"the": 1169, "\u0120the": 262, "\u0120king": 5822, "<|endoftext|>": 50256}


def refuse_another_hf_tokenizer(path: Path) -> None:
    """A Hugging Face directory is read and written with OpenAI's GPT-2 BPE (this project has no
    other for it): one that holds another tokenizer (vocab.json, or tokenizer.json's vocabulary) is
    refused, where a GPT-2 of another language was fed GPT-2's ids without a word (hunt 30-e F2).
    Files that cannot be read as such are left to the weights' own checks. Tokens added to GPT-2's
    (tokenizer.json's added_tokens, added_tokens.json: a chat fine-tune's "<|user|>" at 50257) are
    another tokenizer too: GPT-2's BPE splits them into other ids (hunt 37-h h3). But for a pad token
    (special_tokens_map.json's or tokenizer_config.json's pad_token, as many fine-tunes add "[PAD]"):
    it pads batches, and is not in the text this project feeds the model."""
    pads = set()
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        try:
            pad = json.loads((path / name).read_text(encoding="utf-8")).get("pad_token")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue
        pads.add(pad.get("content") if isinstance(pad, dict) else pad)
    pads.discard("<|endoftext|>")  # (GPT-2's own, at its own id only)
    for name in ("vocab.json", "tokenizer.json", "added_tokens.json"):
        try:
            vocab = json.loads((path / name).read_text(encoding="utf-8"))
            added = vocab if name == "added_tokens.json" else vocab.get("added_tokens") if name == "tokenizer.json" else []
            vocab_model = vocab["model"] if name == "tokenizer.json" else {}
            vocab = vocab_model["vocab"] if name == "tokenizer.json" else vocab
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            continue
        added = ([(t.get("content"), t.get("id")) for t in added if isinstance(t, dict)] if isinstance(added, list)
                 else list(added.items()) if isinstance(added, dict) else [])
        if others := [(token, id_) for token, id_ in added
                      if (token, id_) != ("<|endoftext|>", 50256) and token not in pads]:
            raise UnreadableFile(path / name, f"adds {len(others)} token(s) to OpenAI's GPT-2 BPE ({others[0][0]!r} is "
                                              f"{others[0][1]}): this project reads a Hugging Face model's text with "
                                              "GPT-2's BPE only, which would split them into other token ids")
        if name == "added_tokens.json":
            continue
        if not isinstance(vocab, dict):
            if name == "tokenizer.json" and isinstance(vocab, list):  # a Unigram (SentencePiece) model's
                # [piece, score] list: it was passed over, and the model fed GPT-2's ids (hunt 34-e E5)
                raise UnreadableFile(path / name, f"a tokenizer other than OpenAI's GPT-2 BPE (a "
                                                  f"{vocab_model.get('type', 'Unigram')} model of {len(vocab):,} "
                                                  "pieces): this project reads a Hugging Face model's text with "
                                                  "GPT-2's BPE only, which would give this one other token ids")
            continue
        differs = [f"{token!r} is {vocab.get(token)}, not {id_}" for token, id_ in GPT2_VOCAB_IDS.items()
                   if vocab.get(token) != id_]
        if differs or len(vocab) != 50257:
            raise UnreadableFile(path / name, f"a tokenizer other than OpenAI's GPT-2 BPE ({len(vocab):,} tokens"
                                              f"{'; ' + differs[0] if differs else ''}): this project reads a Hugging "
                                              "Face model's text with GPT-2's BPE only, which would give this one "
                                              "other token ids")
        # (it returned here, after vocab.json: the tokenizer.json beside it, which transformers reads first, went
        # unread; hunt 37-h h3)


def pretrained_tokenizer(init_from: str) -> str:
    """The tokenizer of pretrained weights: OpenAI's GPT-2 BPE, or what our checkpoint recorded.
    A hub model is fetched now (then loaded from the hub cache), so that a typo'd name or an
    unreachable hub is said before the data is prepared for it, not after (minutes on large data)."""
    path = weights_dir(init_from)
    if path and not is_hf_gpt2_dir(path):
        try:
            ckpt = open_checkpoint(path)
        except NoCheckpoint as e:
            if isinstance(e, NoBestCheckpoint) or not (lost := lost_files(path)):
                raise
            raise NoCheckpoint(lost) from None
        _check_keys(ckpt.path / META, ckpt.meta, {"tokenizer": str}, "unreadable checkpoint metadata")
        return ckpt.meta["tokenizer"]
    if not path and init_from not in GPT2_HUB_CONFIGS:
        refuse_a_pointer(init_from)
        # train.py's own two words are choices too: --init_from=resum named only the hub's (hunt, session 24)
        close = difflib.get_close_matches(init_from, ["resume", "scratch", *GPT2_HUB_CONFIGS], n=1)
        raise MissingFile(f"{init_from!r} is neither a directory nor one of {', '.join(GPT2_HUB_CONFIGS)}, resume or "
                          "scratch" + (f" (did you mean --init_from={close[0]}?)" if close else ""))
    if not path:
        hub_gpt2(init_from)
    else:
        refuse_another_hf_tokenizer(path)
    return "gpt2"


def pretrained_config(init_from: str) -> GPTConfig:
    """The architecture of pretrained weights, read without loading them: our checkpoint's
    meta.json, a Hugging Face directory's config.json, or a hub model's (fetched now, as
    pretrained_tokenizer does)."""
    path = weights_dir(init_from)
    if path and not is_hf_gpt2_dir(path):
        return open_checkpoint(path).model_config
    return read_hf_config(path or hub_gpt2(init_from))


def refuse_unreadable_weights(init_from: str) -> None:
    """Where the weights file of --init_from (our checkpoint's, a Hugging Face directory's) is a Git LFS pointer or,
    a safetensors file, cut short or corrupt in its header, the refusal the load would give, said before the data is
    prepared: it came after minutes of preparing a large corpus and a cache of it left (hunt 51-f F3). Reads the
    file's first bytes and its header only. (The weights of a LoRA run's base are checked by their fingerprint:
    refuse_a_missing_lora_base.)"""
    path = weights_dir(init_from)
    if path is None:  # (a hub name: its cache's files are fetched whole)
        return
    weights = _hf_weights(path) if is_hf_gpt2_dir(path) else open_checkpoint(path).path / WEIGHTS
    if weights.suffix == ".safetensors":
        read_safetensors(weights, header_only=True)
    elif weights.is_file():  # (pytorch_model.bin: the pointer alone, as read_torch_file says it first)
        try:
            with open(weights, "rb") as f:
                refuse_an_lfs_pointer(weights, f.read(len(LFS_POINTER)))
        except OSError:  # (said by the load, as before)
            pass


def refuse_a_missing_lora_base(init_from: str, lora_base: str = "") -> None:
    """Where --init_from is a LoRA run whose base (at any depth of a LoRA run on a LoRA run) is found nowhere, or
    `lora_base` (--lora_base) fits no base of it, the refusal load_model would give, said before the data is prepared:
    it came once the model was built, after minutes of preparing a large corpus and a cache of it left, where the
    tokenizer, the architecture and the LoRA rank are refused first (hunt 51-f F2). Looks only: loads no weights."""
    override = BaseOverride(Path(lora_base)) if lora_base else None
    path = weights_dir(init_from)
    while path is not None and not is_hf_gpt2_dir(path):
        ckpt = open_checkpoint(path)
        lora = ckpt.meta.get("lora")
        if not lora or ("base_weights" not in lora and Path(lora["base"]).is_dir()):  # (not LoRA; or an older
            break  # version's record of a base that is there, which load_model takes with its warning, said once)
        path = weights_dir(checked_base(ckpt.path, lora, override))  # (None: a hub name, found in the hub cache)
    if override is not None and not override.used:
        raise override.refusal(f"--init_from={init_from}")


def load_base_model(init_from: str, dropout: float = 0.0, lora_base: BaseOverride | None = None) -> GPT:
    """Pretrained weights to start from: one of our checkpoints (a run or checkpoint directory),
    a Hugging Face GPT-2 directory, or a hub name (gpt2, gpt2-medium, ...). `lora_base`: where a LoRA
    checkpoint's base is now (load_model), for the bases of a LoRA run on a LoRA run."""
    path = weights_dir(init_from)
    if path and not is_hf_gpt2_dir(path):
        model, _ = load_model(path, lora_base=lora_base)
        model.set_dropout(dropout)
        return model
    return GPT.from_pretrained(init_from, dropout=dropout)
