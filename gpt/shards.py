"""The on-disk token format: shard files, and the data directory that holds them.

A shard is a fixed 256-byte header followed by the tokens, little-endian:

    offset  size  field
         0     8  magic b"GPTSHARD"
         8     4  format version (uint32), currently 1
        12     4  bytes per token (uint32): 2 = uint16 (vocab <= 65536), 4 = uint32
        16     8  token count (uint64)
        24     4  vocab size (uint32)
        28     4  end-of-text token id (uint32)
        32    32  tokenizer name, UTF-8, NUL-padded
        64   192  reserved, zero
       256     -  the tokens
  version 2 only:
         -     -  the loss mask: one byte per token, 1 where the token is a training target
                  (a response token of instruction data) and 0 where it is context only

Version 1 is a plain token shard (every token a target); data/prepare.py writes it whenever a
shard has no context-only token, so plain-text data is byte for byte what it always was, and
version 2 only for instruction data (gpt/instruct.py). Both are read. One byte per token, not
one bit: instruction sets are small, and a window's mask is then a plain slice.

A data directory holds the shards of each split (train_000000.bin, val_000000.bin, ...) and a
meta.json written last by data/prepare.py. This module needs only numpy, so data preparation
starts without importing torch; gpt/data.py builds the training batches on top of it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import mmap
import os
import re
import shutil
import struct
import typing
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpt.atomic import replace_file

from gpt.errors import UsageError

MAGIC = b"GPTSHARD"
FORMAT_VERSION = 1  # a plain token shard or data directory
MASKED_FORMAT_VERSION = 2  # tokens followed by a loss mask (issue 12); meta.json says "supervised"
READ_VERSIONS = (FORMAT_VERSION, MASKED_FORMAT_VERSION)
HEADER_SIZE = 256
_HEADER = struct.Struct("<8sIIQII32s")  # the fields above; the rest of the 256 bytes is zero
META_NAME = "meta.json"
FULL_CHECK_MAX_TOKENS = 1 << 24  # shards up to this size get every token id checked when opened
_SAMPLE_SPANS, _SAMPLE_SPAN_TOKENS = 64, 1 << 14  # larger ones: 64 evenly spread spans of 16K tokens


class ShardError(UsageError, ValueError):
    """A shard or data directory that cannot be used; the message names the file and the reason
    (train.py reports it as one line)."""

    def __init__(self, path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)


class DataReplaced(ShardError):
    """DataDir.check_unreplaced's: the directory was prepared again since its meta.json was read. Unlike the
    other ShardErrors, the processes of a torchrun job need not all meet it (the preparation lands between
    their opens): train.py has them agree on it (hunt 37-g G3)."""


class MissingSplit(ShardError, KeyError):
    """A data directory without the split asked for (e.g. no 'val')."""

    def __str__(self) -> str:  # KeyError would quote the message
        return Exception.__str__(self)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is not a count


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits, else uint32 (little-endian on disk whatever the machine)."""
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


def _read_exactly(path: Path, dtype: np.dtype, count: int, offset: int) -> np.ndarray:
    """`count` items of `dtype` at byte `offset`, or OSError. (np.fromfile reads through stdio, which
    takes a failed read for the file's end: it returned fewer tokens without a word, and prepare
    wrote a short last shard under meta.json's full count: hunt 33-a F1.)"""
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(count * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise OSError(errno.EIO, f"read {len(data):,} of {count * dtype.itemsize:,} bytes", str(path))
    return np.frombuffer(data, dtype)


class ShardWriter:
    """Streams tokens into one shard: a temp file in the target directory that gets its header
    and its real name only in close(), so a crash never leaves a shard that looks complete."""

    def __init__(self, path, *, vocab_size: int, eot_token: int, tokenizer_name: str):
        name = tokenizer_name.encode("utf-8")
        if not 0 < len(name) <= 32:
            raise ValueError(f"tokenizer name {tokenizer_name!r} must be 1..32 UTF-8 bytes")
        if not 0 <= eot_token < vocab_size < 1 << 32:
            raise ValueError(f"bad vocab_size {vocab_size} / eot_token {eot_token}")
        self.path = Path(path)
        # A unique temp name in the same directory (so the final rename is atomic); "xb" never
        # reuses a file, and unlike mkstemp it leaves permissions to the umask.
        self.tmp_path = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex[:12]}.tmp")
        self.vocab_size, self.eot_token, self.tokenizer_name = vocab_size, eot_token, tokenizer_name
        self.dtype = token_dtype(vocab_size)
        self.num_tokens = 0
        self._file = open(self.tmp_path, "xb")
        self._file.write(bytes(HEADER_SIZE))  # placeholder until the count is known
        # The loss mask goes to a second temp file, opened at the first context-only token (the
        # tokens before it get 1s) and appended after the tokens in close(): plain data never has one.
        self.mask_path = self.tmp_path.with_name(self.tmp_path.name + ".mask")
        self._mask: typing.BinaryIO | None = None

    def write(self, tokens, mask=None) -> None:
        """Append tokens; mask (0/1 per token, default all 1) marks which are training targets."""
        tokens = np.asarray(tokens)
        if tokens.size and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(f"{self.path}: token ids must lie in [0, {self.vocab_size})")
        if mask is not None:
            mask = np.asarray(mask, dtype=np.uint8)
            if mask.shape != tokens.shape or mask.max(initial=0) > 1:
                raise ValueError(f"{self.path}: the loss mask must be 0/1, one value per token")
            if self._mask is None and not mask.all():
                self._mask = open(self.mask_path, "xb")
                for start in range(0, self.num_tokens, 1 << 24):  # the tokens so far were all targets
                    self._mask.write(np.ones(min(1 << 24, self.num_tokens - start), np.uint8).tobytes())
        if self._mask is not None:
            self._mask.write((mask if mask is not None else np.ones(tokens.size, np.uint8)).tobytes())
        # (the array's own bytes: tobytes() was one more copy of a document's tokens, hunt 44-c C1)
        self._file.write(np.ascontiguousarray(tokens, self.dtype).data)
        self.num_tokens += tokens.size

    def truncate(self, num_tokens: int) -> None:
        """Keep only the first num_tokens tokens (used to rebalance the last two shards)."""
        self._file.flush()
        self._file.truncate(HEADER_SIZE + num_tokens * self.dtype.itemsize)
        self._file.seek(0, os.SEEK_END)
        if self._mask is not None:
            self._mask.flush()
            self._mask.truncate(num_tokens)
            self._mask.seek(0, os.SEEK_END)
        self.num_tokens = num_tokens

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens [start, stop) written so far."""
        self._file.flush()
        return _read_exactly(self.tmp_path, self.dtype, stop - start, HEADER_SIZE + start * self.dtype.itemsize)

    def read_mask(self, start: int, stop: int) -> np.ndarray | None:
        """The loss mask of tokens [start, stop), or None while every token so far is a target."""
        if self._mask is None:
            return None
        self._mask.flush()
        return _read_exactly(self.mask_path, np.dtype(np.uint8), stop - start, start)

    def close(self) -> Path:
        version = FORMAT_VERSION if self._mask is None else MASKED_FORMAT_VERSION
        header = _HEADER.pack(MAGIC, version, self.dtype.itemsize, self.num_tokens, self.vocab_size,
                              self.eot_token, self.tokenizer_name.encode("utf-8"))
        self._file.seek(0)
        self._file.write(header)
        if self._mask is not None:
            self._mask.close()
            self._file.seek(0, os.SEEK_END)
            with open(self.mask_path, "rb") as mask:
                shutil.copyfileobj(mask, self._file, 1 << 24)
            self.mask_path.unlink()
        self._file.close()
        replace_file(self.tmp_path, self.path)
        return self.path

    def abort(self) -> None:
        self._file.close()
        self.tmp_path.unlink(missing_ok=True)
        if self._mask is not None:
            self._mask.close()
            self.mask_path.unlink(missing_ok=True)


def write_shard(path, tokens: np.ndarray, mask: np.ndarray | None = None, *, vocab_size: int, eot_token: int,
                tokenizer_name: str) -> None:
    """Write a whole shard at once (temp name, fsync, rename); with a mask that has a 0, version 2."""
    writer = ShardWriter(path, vocab_size=vocab_size, eot_token=eot_token, tokenizer_name=tokenizer_name)
    try:
        writer.write(tokens, mask)
        writer.close()
    except BaseException:
        writer.abort()
        raise


@dataclass(frozen=True)
class Shard:
    """An open, checked shard: its header fields and its tokens as a read-only np.memmap."""

    path: Path
    version: int
    num_tokens: int
    vocab_size: int
    eot_token: int
    tokenizer_name: str
    dtype: np.dtype
    tokens: np.ndarray = field(repr=False)
    loss_mask: np.ndarray | None = field(default=None, repr=False)  # version 2: 1 = target, 0 = context

    def __len__(self) -> int:
        return self.num_tokens


def open_files_for(maps: int) -> None:
    """Raise this process's soft limit of open files, within the hard one, to leave room for `maps`
    more: each open shard keeps a descriptor (its memory map's), and a corpus of 1,000 shards (100B
    tokens at the default --shard_tokens) ran into the usual soft limit of 1,024 (hunt 33-a F11)."""
    try:
        import resource
    except ImportError:  # (Windows: no such limit to raise)
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = maps + OPEN_FILES_SLACK
    if soft != resource.RLIM_INFINITY and soft < want:
        with contextlib.suppress(ValueError, OSError):  # (not allowed: open_shard says so, with what to do)
            resource.setrlimit(resource.RLIMIT_NOFILE,
                               (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))


# Descriptors beside the shards' maps (torch's, the run's files): under the usual soft limit of 1,024,
# so that most runs leave the limit as it was
OPEN_FILES_SLACK = 256


def is_shard(path) -> bool:
    """Whether the file starts as a token shard does (its magic); an unreadable one is not taken for one."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:  # preparing it as text will say why it cannot be read
        return False


def holds_prepared_data(directory) -> bool:
    """Whether a directory is prepared data (to be opened as a DataDir), not text to prepare: its meta.json is
    beside token shards, or holds a data directory's keys (format_version, splits), or cannot be read as JSON
    (DataDir then says what is wrong with it). A folder of text with a meta.json of its own, a record file of that
    name, was taken for prepared data by train.py: "meta.json: format version None ... rebuild with data/prepare.py
    --force", where data/prepare.py --input reads that folder as text (hunt 47-a A2)."""
    directory = Path(directory)
    try:
        if not (directory / META_NAME).is_file():
            return False
    except PermissionError:  # a directory that cannot be searched (no x permission): not known to be prepared data;
        return False  # read as text, it is said in one line, naming the directory (it was a traceback: hunt 50-c C3)
    if any(map(is_shard, directory.glob("*.bin"))):
        return True
    try:
        meta = json.loads((directory / META_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    return isinstance(meta, dict) and not meta.keys().isdisjoint({"format_version", "splits"})


def open_shard(path, full_check: bool | None = None) -> Shard:
    """Open a shard and check its header against the file. Token ids are all checked against the
    vocab size when full_check is True (default: for shards of up to 16M tokens), else in 64
    evenly spread samples, which catches a wrong-vocabulary shard without reading 100M tokens."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(_HEADER.size)
    except OSError as e:  # no read permission, an I/O error: the user's to fix, so one line
        raise ShardError(path, f"cannot read it ({e.strerror or e})") from None
    if size < HEADER_SIZE:
        raise ShardError(path, f"{size} bytes is shorter than the {HEADER_SIZE}-byte shard header (truncated?)")
    magic, version, itemsize, count, vocab_size, eot, name = _HEADER.unpack(head)
    if magic != MAGIC:
        raise ShardError(path, f"not a token shard: magic {magic!r}, expected {MAGIC!r}")
    if version not in READ_VERSIONS:
        raise ShardError(path, f"unknown shard format version {version} (this code reads versions "
                               f"{', '.join(map(str, READ_VERSIONS))})")
    if itemsize not in (2, 4):
        raise ShardError(path, f"unknown token size {itemsize} bytes (expected 2 or 4)")
    if token_dtype(vocab_size).itemsize != itemsize:
        raise ShardError(path, f"{itemsize}-byte tokens, but vocab size {vocab_size} is stored in "
                               f"{token_dtype(vocab_size).itemsize}-byte tokens")
    payload = size - HEADER_SIZE
    per_token = itemsize + (version == MASKED_FORMAT_VERSION)  # a mask byte per token in version 2
    if payload % per_token:
        raise ShardError(path, f"odd byte length: {payload} bytes of tokens is not a multiple of {per_token}")
    if count * per_token != payload:
        # (the way on: prepare.py called such a directory "up to date" before hunt 30-c F11)
        raise ShardError(path, f"header says {count} tokens but the file holds {payload // per_token} "
                               "(truncated or appended to?); prepare the data again: data/prepare.py rebuilds such a "
                               "directory")
    if count == 0:
        raise ShardError(path, "empty shard (0 tokens)")
    if not eot < vocab_size:
        raise ShardError(path, f"end-of-text id {eot} >= vocab size {vocab_size}")
    try:
        tokenizer_name = name.rstrip(b"\0").decode("utf-8")
    except UnicodeDecodeError:
        raise ShardError(path, f"tokenizer name {name!r} is not UTF-8") from None
    dtype = token_dtype(vocab_size)
    try:
        tokens = np.memmap(path, dtype=dtype, mode="r", offset=HEADER_SIZE, shape=(count,))
        mask = None
        if version == MASKED_FORMAT_VERSION:
            mask = np.memmap(path, dtype=np.uint8, mode="r", offset=HEADER_SIZE + count * itemsize, shape=(count,))
    except OSError as e:  # (a traceback: hunt 33-a F11) each map keeps a descriptor open
        hint = ("; each open shard keeps a file open: raise the limit (ulimit -n) or prepare with a larger "
                "--shard_tokens" if e.errno == errno.EMFILE else "")
        raise ShardError(path, f"cannot map it ({e.strerror or e}){hint}") from None
    full = count <= FULL_CHECK_MAX_TOKENS if full_check is None else full_check
    if not full:  # (a whole shard's check reads it in order, where read-ahead helps: advised after it)
        _advise_random_access(tokens, mask)
    _check_token_ids(path, tokens, vocab_size, full, mask)
    if full:
        _advise_random_access(tokens, mask)
    return Shard(path, version, count, vocab_size, eot, tokenizer_name, dtype, tokens, mask)


def _advise_random_access(*maps: np.memmap | None) -> None:
    """Tell the kernel that these maps are read at random places (training reads windows of a few hundred
    bytes in a random order), so that a page fault reads that page, not the read-ahead window around it.
    With Linux's read-around (up to read_ahead_kb, 8 MB on some machines) the 64 sampled spans of each
    shard read all of a 200 MB shard from disk when the data was opened, and 200 training batches of 16
    windows 733 MB of an 800 MB split: data larger than memory was read over and over, pushing out the
    page cache (hunt 43-g G1). Where madvise is missing (Windows), nothing is done."""
    if not hasattr(mmap, "MADV_RANDOM"):
        return
    for m in maps:
        # (np.memmap keeps the mmap it maps as _mmap, not public: a numpy without it maps as before, and
        # tests/test_data.py's test of the advice says so)
        if getattr(m, "_mmap", None) is not None:
            m._mmap.madvise(mmap.MADV_RANDOM)


def _check_token_ids(path: Path, tokens: np.ndarray, vocab_size: int, full: bool,
                     mask: np.ndarray | None = None) -> None:
    if full or len(tokens) <= _SAMPLE_SPANS * _SAMPLE_SPAN_TOKENS:
        spans = [(0, len(tokens))]
    else:
        starts = np.linspace(0, len(tokens) - _SAMPLE_SPAN_TOKENS, _SAMPLE_SPANS).astype(np.int64)
        spans = [(int(s), int(s) + _SAMPLE_SPAN_TOKENS) for s in starts]
    for start, stop in spans:
        chunk = tokens[start:stop]
        if int(chunk.max()) >= vocab_size:
            at = start + int(np.argmax(chunk >= vocab_size))
            raise ShardError(path, f"token id {int(tokens[at])} at position {at} >= vocab size {vocab_size} "
                                   "(written with another tokenizer?)")
        if mask is not None and int(mask[start:stop].max()) > 1:
            at = start + int(np.argmax(mask[start:stop] > 1))
            raise ShardError(path, f"loss mask value {int(mask[at])} at position {at} is not 0 or 1")


class DataDir:
    """A prepared data directory: meta.json plus the shards of each split."""

    def __init__(self, path):
        self.path = Path(path)
        # the directory as its meta.json is read (before): data/prepare.py replaces a data directory whole, by
        # renames, so the same directory when its shards are opened means shards of this meta.json (open_shards)
        self._identity = _identity(self.path)
        meta_path = self.path / META_NAME
        if not meta_path.is_file():
            hint = ("prepare it first: python data/prepare.py (Shakespeare), or --input FILES / --hf NAME; "
                    "see python data/prepare.py --help")
            raise FileNotFoundError(f"{meta_path}: not found, so {self.path} is not a prepared data directory; {hint}")
        try:
            self.meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ShardError(meta_path, f"unreadable meta.json ({e}); rebuild with data/prepare.py --force") from None
        version = self.meta.get("format_version") if isinstance(self.meta, dict) else None
        if version not in READ_VERSIONS:
            raise ShardError(meta_path, f"format version {version}, this code reads "
                                        f"{', '.join(map(str, READ_VERSIONS))}; rebuild with data/prepare.py --force")
        missing = [k for k in ("tokenizer", "vocab_size", "eot_token", "splits") if k not in self.meta]
        splits = self.meta.get("splits")
        if not missing and isinstance(splits, dict):
            missing = [f"splits.{name}.{k}" for name, split in splits.items() for k in ("shards", "tokens", "bytes")
                       if not isinstance(split, dict) or k not in split]
        elif not missing:
            missing = ["splits (an object)"]
        if missing:
            raise ShardError(meta_path, f"meta.json lacks {', '.join(missing)}; rebuild with data/prepare.py --force")
        # Types and ranges once, here: a hand-edited value would otherwise fail as a traceback far
        # away, some only at the first evaluation (bits per byte) after steps have run.
        problems = self._meta_problems()
        if problems:
            raise ShardError(meta_path, f"{'; '.join(problems)}; rebuild with data/prepare.py --force")

    def split_sha256(self, split: str) -> str | None:
        """The sha256 of the split's shard files, as data/prepare.py recorded it (None in data
        prepared before it did, 2026-11-26, or by other means; a malformed one is refused on opening)."""
        return self.meta["splits"].get(split, {}).get("sha256")

    def _meta_problems(self) -> list[str]:
        meta, problems = self.meta, []

        def check(key: str, value, ok: bool, expected: str) -> None:
            if not ok:
                problems.append(f"{key} is {json.dumps(value)}, expected {expected}")

        def positive_int(key: str, value) -> None:
            check(key, value, _is_int(value) and value > 0, "a positive integer")

        check("tokenizer", meta["tokenizer"], isinstance(meta["tokenizer"], str), "a tokenizer name")
        positive_int("vocab_size", meta["vocab_size"])
        check("eot_token", meta["eot_token"], _is_int(meta["eot_token"]) and 0 <= meta["eot_token"]
              and (not _is_int(meta["vocab_size"]) or meta["eot_token"] < meta["vocab_size"]),
              "an integer in [0, vocab_size)")
        check("supervised", meta.get("supervised"), isinstance(meta.get("supervised", False), bool), "true or false")
        counts = ("tokens", "bytes", "target_tokens", "target_bytes") if self.supervised else ("tokens", "bytes")
        listed: dict[str, str] = {}  # shard name -> the split listing it
        for name, split in meta["splits"].items():
            for k in counts:
                if k not in split:  # only instruction data needs the target counts (bits per byte)
                    problems.append(f'splits.{name}.{k} is missing, and "supervised" is true')
                else:
                    positive_int(f"splits.{name}.{k}", split[k])
            if "sha256" in split:  # (data/prepare.py's since 2026-11-26: a resume checks it)
                check(f"splits.{name}.sha256", split["sha256"],
                      isinstance(split["sha256"], str) and re.fullmatch(r"[0-9a-f]{64}", split["sha256"]) is not None,
                      "a sha256 in hex")
            shards = split["shards"]
            if not (isinstance(shards, list) and shards and all(isinstance(f, str) and f for f in shards)):
                check(f"splits.{name}.shards", shards, False, "a list of shard file names")
                continue
            # A shard listed twice, or in two splits, would train on the validation text or count it twice;
            # so would one spelled as a path out of the directory and back (hunt 29-b: /abs/dir/train_*.bin
            # or ../dir/train_*.bin listed in val went unnoticed), and one from elsewhere is not this data's.
            for f in shards:
                key = os.path.normpath(f)
                if os.path.isabs(key) or key.split(os.sep)[0] == os.pardir:
                    problems.append(f"splits.{name}.shards lists {f!r}: shards are named by their path inside "
                                    "the data directory")
                    continue
                if key in listed:
                    where = "twice in" if listed[key] == name else f"in splits.{listed[key]}.shards and in"
                    problems.append(f"{f} is listed {where} splits.{name}.shards")
                listed.setdefault(key, name)
        return problems

    @property
    def tokenizer_name(self) -> str:
        return self.meta["tokenizer"]

    @property
    def vocab_size(self) -> int:
        return self.meta["vocab_size"]

    @property
    def eot_token(self) -> int:
        return self.meta["eot_token"]

    @property
    def splits(self) -> list[str]:
        return list(self.meta["splits"])

    def _split(self, split: str) -> dict:
        if split not in self.meta["splits"]:
            raise MissingSplit(self.path, f"no split {split!r} (has {', '.join(self.meta['splits'])})")
        return self.meta["splits"][split]

    def shard_paths(self, split: str) -> list[Path]:
        return [self.path / name for name in self._split(split)["shards"]]

    def num_tokens(self, split: str) -> int:
        return self._split(split)["tokens"]

    def num_bytes(self, split: str) -> int:
        """UTF-8 bytes of the split's text: loss in bits per byte compares across tokenizers."""
        return self._split(split)["bytes"]

    def num_documents(self, split: str) -> int:
        return self._split(split)["documents"]

    @property
    def shard_tokens(self) -> int | None:
        """The --shard_tokens the shards were made with, where meta.json records it."""
        options = self.meta.get("options")
        made_with = options.get("shard_tokens") if isinstance(options, dict) else None
        return made_with if _is_int(made_with) else None

    @property
    def supervised(self) -> bool:
        """Instruction data: only response tokens are targets (gpt/instruct.py)."""
        return bool(self.meta.get("supervised", False))

    def bits_per_byte(self, loss_nats: float, split: str = "val") -> float:
        """Nats per target token -> bits per UTF-8 byte of the split's text: comparable across
        tokenizers. For instruction data both count the responses only (with the end-of-text
        closing each, as plain text counts each document's end-of-text among its tokens)."""
        s = self._split(split)
        tokens, nbytes = (s["target_tokens"], s["target_bytes"]) if self.supervised else (s["tokens"], s["bytes"])
        return loss_nats / math.log(2) * tokens / nbytes

    def open_shards(self, split: str, full_check: bool | None = None) -> list[Shard]:
        """Open and check every shard of a split, including that each agrees with meta.json."""
        open_files_for(2 * len(self.shard_paths(split)))  # (a map each, and a mask's)
        shards = []
        try:
            for path in self.shard_paths(split):
                if not path.is_file():
                    raise ShardError(path, f"missing, but listed in {META_NAME}; rebuild with data/prepare.py --force")
                shards.append(open_shard(path, full_check))
        except ValueError:  # (ShardError is one) a directory prepared again meanwhile is said as that
            self.check_unreplaced()
            raise
        self.check_unreplaced()
        for shard in shards:
            path = shard.path
            got = (shard.tokenizer_name, shard.vocab_size, shard.eot_token)
            want = (self.tokenizer_name, self.vocab_size, self.eot_token)
            if got != want:
                raise ShardError(path, f"header says tokenizer/vocab/eot {got}, {META_NAME} says {want}")
            if shard.version == MASKED_FORMAT_VERSION and not self.supervised:  # (hunt 29-b: bits per byte were
                # then counted over prompts too, and the masks still applied: a wrong figure, in silence)
                raise ShardError(path, f"holds a loss mask (instruction data), and {META_NAME} does not say "
                                 '"supervised": true; rebuild with data/prepare.py --force')
        # From the headers: a shard swapped in from another data set (same tokenizer) or a
        # hand-edited count would otherwise train and report bits per byte on the wrong text.
        got, want = sum(s.num_tokens for s in shards), self.num_tokens(split)
        if got != want:
            which = f"its shard {shards[0].path.name} holds" if len(shards) == 1 else f"its {len(shards)} shards hold"
            raise ShardError(self.path / META_NAME, f"splits.{split}.tokens is {want:,} but {which} {got:,} "
                             "tokens (a shard replaced, or meta.json edited); rebuild with data/prepare.py --force")
        return shards

    def check_unreplaced(self) -> None:
        """ShardError where the directory is not the one whose meta.json this DataDir read: data/prepare.py
        --force (or a preparation of other text into the same --out_dir) replaced it since. A run starting
        meanwhile took its tokenizer, vocabulary and bits per byte from the old meta.json and its batches from
        the new shards: byte tokens trained a "gpt2" model, in silence (hunt 37-b B1). The same meta.json
        again, with its splits' sha256, is the same tokens, whichever directory each shard came from."""
        if _identity(self.path) == self._identity:
            return
        try:
            again = json.loads((self.path / META_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            again = None
        if again == self.meta and all(isinstance(s, dict) and "sha256" in s for s in self.meta["splits"].values()):
            return  # the same tokens again (two runs preparing the same raw text into train.py's cache at once)
        raise DataReplaced(self.path, "was prepared again (replaced by data/prepare.py) while it was being opened: "
                                      "start again, once that preparation has finished")

    def check_compatible(self, tokenizer_name: str, vocab_size: int) -> None:
        """Refuse, before training starts, a model whose tokenizer or vocabulary can't embed these
        tokens. A model vocab larger than the data's is fine (GPT-2's 50257 padded to 50304)."""
        problems = []
        if tokenizer_name != self.tokenizer_name:
            problems.append(f"tokenizer: model {tokenizer_name!r}, data {self.tokenizer_name!r}")
        if vocab_size < self.vocab_size:
            problems.append(f"vocab size: model {vocab_size} < data {self.vocab_size}")
        if problems:
            advice = (f"Prepare the data with --tokenizer {tokenizer_name}, or train a model for {self.tokenizer_name!r}."
                      if tokenizer_name != self.tokenizer_name and not _fewer_ids_than(vocab_size, tokenizer_name) else
                      # a model that cannot embed its own tokenizer's ids: an export of a byte or shakespeare-bpe
                      # model, read as GPT-2's, was told to prepare the data with gpt2, which was then refused for
                      # its vocabulary (hunt 37-h h2)
                      f"The model has fewer token embeddings ({vocab_size}) than {tokenizer_name!r} has ids: it was not "
                      f"trained with that tokenizer (a Hugging Face directory is read with GPT-2's; start from the run "
                      f"of ours it was exported from instead)."
                      if tokenizer_name != self.tokenizer_name else
                      # the same tokenizer: the weights were trained with another one (a Hugging Face
                      # directory is read as GPT-2's, an export of a byte model too: audit, 2026-11-26)
                      f"The model has fewer token embeddings than {tokenizer_name!r} has ids: it was not trained "
                      f"with that tokenizer.")
            raise ShardError(self.path, f"does not match the model: {'; '.join(problems)}. {advice}")

    def __repr__(self) -> str:
        return f"DataDir({str(self.path)!r}, tokenizer={self.tokenizer_name!r}, splits={self.splits})"


def _identity(path: Path) -> tuple[int, int] | None:
    """A directory's (device, inode), None where it cannot be read (its meta.json then says why)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def write_meta(directory, meta: dict) -> None:
    """meta.json, written atomically: its presence marks a complete data directory."""
    path = Path(directory) / META_NAME
    tmp = path.with_name(f".{META_NAME}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    replace_file(tmp, path)


def _fewer_ids_than(vocab_size: int, tokenizer_name: str) -> bool:
    """Whether a model of `vocab_size` embeddings is too small for tokenizer `tokenizer_name`'s ids (False for a
    name that is not one of ours)."""
    from gpt.errors import MissingPackage, UnreadableFile
    from gpt.tokenizer import TOKENIZER_NAMES, get_tokenizer  # only on the way to a refusal: gpt2's loads its ranks

    try:
        return tokenizer_name in TOKENIZER_NAMES and vocab_size < get_tokenizer(tokenizer_name).n_vocab
    except (MissingPackage, UnreadableFile):  # a tokenizer that cannot be loaded: the refusal's usual advice
        return False
