"""Files replaced all at once: a reader, or the machine after a crash, sees the old contents or the
new, never half of them. Light on purpose (no torch, no numpy), so that the data scripts use the
same helpers as checkpoints and shards."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

TMP_PREFIX = ".tmp-"  # checkpoint.clean_leftovers removes what an interrupted writer left under it


def fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable (POSIX: the directory entry is data of the directory)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(tmp: Path, path: Path) -> None:
    """Make a finished temp file durable, then give it its real name in one step."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


class NotDurable(OSError):
    """The new file is in place, but its directory could not be synced after the rename: a crash may
    yet bring the old one back. Not "nothing was written", which the writers' messages said of it
    (hunt 33-a F3)."""


def write_text_atomic(path: Path, text: str | bytes) -> None:
    """Replace `path` with `text` (UTF-8; bytes as they are) all at once. On an OSError (a full disk, a size limit, a
    permission) the temp file is removed and `path` is as it was, but on NotDurable."""
    path = Path(path)
    if path.is_dir():  # ("", ".", "/": with_name's ValueError was a traceback, hunt 32-c F5; "..": EBUSY)
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    try:  # the rename puts a file in the place of whatever has the name: /dev/full, as root (hunt 32-c F7),
        # or a link to it (review 32). A link to a file is replaced, its file left as it was.
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:  # (nothing there, or a link to nothing)
        special = False
    if special:
        raise OSError(errno.EEXIST, "not a regular file (a device, a pipe or a socket), not replaced", str(path))
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}")
    try:
        with (open(tmp, "wb") if isinstance(text, bytes) else open(tmp, "w", encoding="utf-8")) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    try:
        fsync_dir(path.parent)
    except OSError as e:
        raise NotDurable(e.errno, f"{e.strerror or e} syncing its directory: the new file is in place, but a crash may "
                                  "yet lose it", str(path)) from None


def same_mode_as(path: Path, sibling: Path) -> None:
    """Give `path` the permissions of `sibling`, a file open() just created (the umask's: 0644 under
    the usual 022). safetensors' save_file creates its file 0600, so a run directory shared with a
    group or another user had weights nobody else could sample or fine-tune from. (Reading the umask
    itself means setting it for a moment, which would race other threads' new files.)"""
    os.chmod(path, stat.S_IMODE(os.stat(sibling).st_mode))


def files_sha256(*paths: Path) -> str:
    """sha256 of the files' bytes, one after the other (a LoRA base's weights; a split's shards)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest()
