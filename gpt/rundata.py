"""The data a training run reads: --data prepared (once, by rank 0) or taken as it is, refused where it names a
run, a checkpoint or a model, checked to be the same on every node of a torchrun job; and the run's loaders."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import sys
from pathlib import Path

import torch

from gpt.checkpoint import checkpoint_holding, is_hf_gpt2_dir, list_checkpoints
from gpt.config import TrainConfig
from gpt.data import DataReplaced, TrainBatches, ValBatches
from gpt.errors import PreparationInterrupted, ReportedByRank0, Terminated, UsageError
from gpt.runtime import Dist, gather, largest
from gpt.shards import DataDir, holds_prepared_data


def refuse_a_run(data: str) -> None:
    """--data naming a training run or one of its checkpoints, which were read as text (the run's
    config.json as a record without a text field) or as shards (a checkpoint's meta.json, "format
    version None"): neither said what to do (hunt 32-c)."""
    from gpt.prepare import PrepareError
    from gpt.sources import training_output

    path = Path(data)
    if ckpt := checkpoint_holding(path) if path.exists() else None:
        raise PrepareError(f"--data={data} is checkpoint {ckpt.name} of the training run in {ckpt.parent}, not text "
                           f"or prepared data: to start a run from its weights, --init_from={shlex.quote(str(ckpt))}")
    # (a file of the run, named itself, is read as text, as data/prepare.py reads it)
    if path.is_dir() and training_output(path):  # (also before its first checkpoint: review 33)
        how = (f"to continue it, --init_from=resume --out_dir={shlex.quote(data)}; to start a run from its weights, "
               f"--init_from={shlex.quote(data)}" if list_checkpoints(path) else "it has no checkpoint yet")
        raise PrepareError(f"--data={data} holds a training run, not text or prepared data: {how}")
    if path.is_dir() and is_hf_gpt2_dir(path) and not (path / "meta.json").is_file():
        # its config.json was read as a text record: "record 1: no field 'text' (has: model_type, ...)" (hunt 37-h h6)
        raise PrepareError(f"--data={data} is a Hugging Face model directory, not text or prepared data: to start a "
                           f"run from its weights, --init_from={shlex.quote(data)}")


def prepare_data(data: str, tokenizer: str | None, cache_root: str, dist: Dist, resuming: bool = False,
                 cache_typed: bool = False) -> Path:
    """A prepared shard directory as is; 'shakespeare' or raw text prepared (once, by rank 0). Rank 0
    decides for every rank, so that ranks that see the files differently (another node's disk) never
    wait in different collectives: a rank where the data is not is one line, and torchrun stops the rest.
    cache_typed: --data_cache was typed, which only raw text uses: refused beside other data."""
    from gpt.prepare import PrepareError, default_out_dir, prepare, prepare_cached, warnings_as_lines
    from gpt.shards import is_shard
    from gpt.sources import SAVE_IT_FIRST, is_glob, training_output

    def not_cached(what: str) -> PrepareError:  # (it was ignored without a word: hunt 48-e E3)
        return PrepareError(f"--data_cache applies to raw text given as --data, and {what}: leave --data_cache out")

    def prepared() -> Path:
        if data == "shakespeare" and cache_typed:
            raise not_cached("--data=shakespeare is the embedded plays, prepared into "
                             f"{default_out_dir('shakespeare', tokenizer=tokenizer).parent}")
        if data == "shakespeare":  # the embedded plays, whatever ./shakespeare holds: a run in it (or a run's
            # --out_dir=shakespeare itself) refused them (hunt 34-b B8), prepared data there was taken in their
            # place without a word (review 34 R5); a folder of that name is said (hunt, session 27), but a run's
            if Path(data).exists() and not (Path(data).is_dir() and training_output(Path(data))):
                print("note: --data=shakespeare is the embedded plays; for the local ./shakespeare give "
                      "--data=./shakespeare", file=sys.stderr)
            try:
                return prepare(source="shakespeare", tokenizer=tokenizer)
            except PrepareError as e:
                # The plays are prepared into the checkout's data/ whatever --data_cache says: a checkout the
                # user cannot write (a container run with --user, a shared install) gave only the error of a
                # temporary folder there, and no way on (hunt 35-f F12)
                target = default_out_dir("shakespeare", tokenizer=tokenizer)
                if target.is_dir() or os.access(target.parent, os.W_OK):
                    raise
                raise PrepareError(f"{e}; the embedded plays are prepared into {target.parent}, which cannot be "
                                   f"written: prepare them elsewhere (python data/prepare.py --tokenizer={tokenizer} "
                                   "--out_dir=DIR) and train with --data=DIR") from None
        refuse_a_run(data)
        if holds_prepared_data(data):
            if cache_typed:
                raise not_cached(f"{data} is prepared data, read where it is")
            return Path(data)
        if Path(data).is_dir() and any(map(is_shard, Path(data).glob("*.bin"))):  # not raw text to prepare
            raise PrepareError(f"{data}: shards without meta.json (an incomplete preparation or copy); prepare it "
                               "again with data/prepare.py")
        if data == "-" and not Path(data).exists():
            raise PrepareError(f"--data=-: stdin is not read; {SAVE_IT_FIRST}")
        if not is_glob(data) and not Path(data).exists():  # (a glob is matched by the preparation)
            # the way on, where a preset's data not prepared yet (--config=gpt2-124m) said only "no
            # such file or directory" (hunt, session 24)
            hint = "" if Path(data).suffix else (f" (python data/prepare.py ... --out_dir {data}; a preset's data: "
                                                    "its file in configs/ gives the command)")
            if hub_dataset_name(data):  # (the advice was a folder of that name, with no word of --hf: hunt 51-p P3)
                hint = (" (a Hugging Face dataset is prepared first, from the network: python data/prepare.py "
                        f"--hf {data} --out_dir DIR, then --data=DIR)")
            if resuming:  # (moved data resumes where it is now, raw text too: gpt.config.data_moved)
                hint += "; a run's data that was moved resumes with --data=<where it is now>"
            raise PrepareError(f"--data={data}: no such file or directory; give text (a file, a folder, a glob) "
                               f"or a directory that data/prepare.py made{hint}")
        return prepare_cached([data], tokenizer=tokenizer, cache_root=cache_root)

    path = None
    if dist.is_main:
        try:
            with warnings_as_lines():
                path = prepared()
        except PrepareError as e:
            path = UsageError(str(e))  # every rank must learn of it, not only this one
        except KeyboardInterrupt as e:
            path = PreparationInterrupted("interrupted while preparing the data: nothing was written",
                                          Terminated.exit_status if isinstance(e, Terminated) else 130)
    if dist.enabled:
        box = [path]
        try:
            torch.distributed.broadcast_object_list(box, src=0)
        except RuntimeError as e:  # (gloo's timeout; DistBackendError is a RuntimeError)
            # Rank 0's own refusal or interruption is why it stopped: a Ctrl-C or torchrun's SIGTERM reaches
            # every rank, and the others, waiting here, leave at once, so its broadcast found them gone and
            # it said "lost contact with another process" over "interrupted while preparing the data" (hunt 35-b B1)
            if dist.is_main and isinstance(path, UsageError):
                raise path from None
            # the others wait at most the process group's timeout (30 min on gloo): a larger corpus
            # ended in a traceback on each (audit, 2026-11-26)
            if dist.is_main or "timed out" not in str(e).lower():
                raise
            raise UsageError(f"rank 0 was still preparing --data={data} when the process group's timeout ran out: "
                             f"prepare it beforehand (python data/prepare.py --input {data} --out_dir DIR) and give "
                             "--data=DIR") from None
        path = box[0]
    if isinstance(path, UsageError):  # said once, by rank 0
        raise path if dist.is_main else ReportedByRank0(path.exit_status)
    here = (path / "meta.json").is_file()  # rank 0 has it; a rank on another node may not see it
    # Every rank learns whether one lacks it, so that the others stop here too, silently, rather than
    # in DDP's first collective with the rank gone (another node printed gloo's traceback: audit, 2026-11-26)
    if largest(0 if here else 1, dist):
        if here:
            raise ReportedByRank0(1)
        raise UsageError(f"{path}: not found on {socket.gethostname()} (rank {dist.rank}), where rank 0 has it: "
                         "put the data on a filesystem every node shares, or prepare it on every node")
    # and it holds the same tokens: another preparation at that path on one node (a stale copy) trained each rank on
    # tokens of its own without a word, status 0 (hunt 47-b B4)
    held = gather(prepared_tokens(path), dist)
    if held[dist.rank] != held[0]:
        raise UsageError(f"{path}: on {socket.gethostname()} (rank {dist.rank}) it holds other data than rank 0's "
                         "(its meta.json records other tokens): put the data on a filesystem every node shares, or "
                         "the same preparation on every node")
    if len(set(held)) > 1:
        raise ReportedByRank0(1)
    return path


def hub_dataset_name(data: str) -> bool:
    """Whether --data, not found, reads as a Hugging Face dataset's name (roneneldan/TinyStories), as other trainers
    take one: OWNER/NAME, where no folder OWNER is. Not data/NAME, where data/prepare.py puts data by default (a
    preset's, data/fineweb-edu-gpt2, run from outside the checkout)."""
    owner, _, name = data.partition("/")
    return bool(re.fullmatch(r"[\w.-]+", owner) and re.fullmatch(r"[\w.-]+", name) and not Path(name).suffix
                and owner != "data" and not Path(owner).exists())


def prepared_tokens(path: Path) -> tuple | None:
    """What a prepared directory's meta.json says of its tokens (the tokenizer, each split's count and
    sha256), to compare across nodes; not where they came from, which a preparation on each node names as
    its own. None where meta.json cannot be read (DataDir says why)."""
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        return (meta["tokenizer"], meta["vocab_size"],
                tuple(sorted((name, split["tokens"], split.get("sha256")) for name, split in meta["splits"].items())))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # (a malformed one: DataDir refuses it)
        return None


def open_loaders(data: DataDir, cfg: TrainConfig, micro_batches: int, dist: Dist,
                 device: torch.device) -> tuple[TrainBatches, ValBatches]:
    """This process's training and validation loaders of `data`, or DataReplaced, said once for the job."""
    # `data` itself, whose meta.json said the tokenizer, the vocabulary and the bytes per token: each loader read
    # it again (data.path), and data prepared again in between trained under the old one's (hunt 37-b B1)
    replaced = None
    try:
        train_batches = TrainBatches(data, cfg.batch_size, cfg.block_size, seed=cfg.seed, rank=dist.rank,
                                     world_size=dist.world_size, micro_batches=micro_batches, device=device)
        val_batches = ValBatches(data, cfg.batch_size, cfg.block_size, max_batches=cfg.eval_iters,
                                 rank=dist.rank, world_size=dist.world_size, device=device)
    except DataReplaced as e:
        replaced = e
    if dist.enabled and True in (seen := gather(replaced is not None, dist)):
        # A preparation that landed between the processes' opens is met by the later ones alone: left to the
        # machine's first process (as a ShardError), which had opened the old directory and trained on, it was
        # said by none ("lost contact with another process", hunt 37-g G3). The first process that met it says it.
        if dist.rank != seen.index(True):
            raise ReportedByRank0(replaced.exit_status if replaced else 1)
        raise UsageError(str(replaced))  # (said by this process, whatever its LOCAL_RANK)
    if replaced:
        raise replaced
    return train_batches, val_batches
