"""Files replaced all at once: a reader, or the machine after a crash, sees the old contents or the
new, never half of them. Light on purpose (no torch, no numpy), so that the data scripts use the
same helpers as checkpoints and shards."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import signal
import stat
import threading
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
    """Make a finished temp file durable, then give it its real name in one step (replace_files, alone)."""
    replace_files([(tmp, path)])


def replace_files(renames: list[tuple[Path, Path]]) -> None:
    """replace_file of files that only make sense together (a model's weights and its config), each
    (finished temp file, real name): all made durable first, then renamed one right after the other with
    Ctrl-C and SIGTERM held until the last rename is done and made durable. Replaced one by one, the
    weights were new and the config old for the 1-4 ms the config took to write, and an export of another
    shape stopped then left a pair that loaded nowhere (hunt 40-a A3). A rename that fails (EPERM: an
    immutable file, another user's in a sticky directory) puts the ones before it back, from second names
    (hard links) the old files get first: it left new weights beside the old config (hunt 44-a A3). Only a
    kill -9 or a crash in the microseconds of the renames can still part them, or a failure where the
    filesystem has no hard links, which the error then says."""
    for _, path in renames:
        refuse_special(path)
    for tmp, _ in renames:
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
    # (real name, whether a file was there, its second name: None where nothing was there or none could be made)
    kept: list[tuple[Path, bool, Path | None]] = []
    try:
        if len(renames) > 1:
            kept = [(path, os.path.lexists(path), _second_name(path)) for _, path in renames]
        # The directories' fsync inside the hold too: a signal held through the renames and raised before it
        # ended the process (KeyboardInterrupt, SIGTERM's default) with the renames not yet durable, and a crash
        # soon after could bring the old names back (hunt 42-f, hunt 43-a A1). It holds Ctrl-C no longer than a
        # directory's fsync, one per directory (the files' data, the long part, was synced above, outside it).
        with python_signals_held(signal.SIGINT, signal.SIGTERM):
            done: list[Path] = []
            for tmp, path in renames:
                try:
                    os.replace(tmp, path)
                except OSError as e:
                    if len(renames) == 1:  # (alone, nothing to put back: its own error, hunt 44-g G5)
                        raise
                    raise _renames_undone(e, path, done, kept) from None
                done.append(path)
            for directory in dict.fromkeys(path.parent for _, path in renames):
                fsync_dir(directory)
    finally:
        for _, _, second in kept:
            if second is not None:
                with contextlib.suppress(OSError):
                    second.unlink()


def _second_name(path: Path) -> Path | None:
    """A hard link to the file at `path`, for replace_files to put it back by: None where nothing is there
    or the filesystem has no hard links (the error then says what is left)."""
    if not os.path.lexists(path):
        return None
    second = path.with_name(f"{TMP_PREFIX}old-{path.name}.{os.getpid()}")
    try:
        second.unlink(missing_ok=True)
        os.link(path, second, follow_symlinks=False)
    except OSError:
        return None
    return second


def remove_dead_writers_parts(directory: Path, names: tuple[str, ...]) -> None:
    """Remove what a writer killed outright (kill -9, a crash) left beside `names` in `directory`: its temp files
    `.tmp-NAME.PID` and replace_files' second names `.tmp-old-NAME.PID`, where PID is no process of this machine. An
    export's weights are hundreds of MB, and each kill left a hidden copy of the new ones, or a second name that kept
    the old ones on disk (session 44's leftover, hunt 44-a A3). A live process's parts are left alone (two saves
    into one directory at once); on a filesystem shared between machines, a save running on another one loses its
    parts and fails in one line, the export it was replacing intact."""
    for name in names:
        for prefix in (TMP_PREFIX, f"{TMP_PREFIX}old-"):
            for part in Path(directory).glob(f"{prefix}{name}.*"):
                pid = part.name.rsplit(".", 1)[1]
                if pid.isdigit() and not _process_alive(int(pid)):
                    with contextlib.suppress(OSError):
                        if part.is_dir() and not part.is_symlink():  # (a part written in a directory of its own:
                            shutil.rmtree(part)  # an export's weights, gpt.huggingface.save_pretrained)
                        else:
                            part.unlink()


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # (signal 0: nothing is sent, the process is only looked up)
    except ProcessLookupError:
        return False
    except OSError:  # (EPERM: another user's process, alive)
        return True
    return True


def _renames_undone(e: OSError, failed: Path, done: list[Path], kept: list[tuple[Path, bool, Path | None]]) -> OSError:
    """replace_files' error for a rename that failed, once the renames before it are undone: the old files
    back by their second names, a new file where there was none removed. One line, that says what is left."""
    left = []
    for path, existed, second in reversed([k for k in kept if k[0] in done]):
        try:
            if not existed:
                path.unlink()
            elif second is None:
                left.append(path.name)  # (no hard link kept the old file)
            else:
                os.replace(second, path)
        except OSError:
            left.append(path.name)
    with contextlib.suppress(OSError):
        fsync_dir(failed.parent)
    names = ", ".join(dict.fromkeys(path.name for path, _, _ in kept))
    if left:
        outcome = f"{', '.join(left)} could not be put back: {names} do not belong together"
    else:
        outcome = f"{names} are as they were"
    return OSError(e.errno, f"{e.strerror or e} replacing {failed.name}; {outcome}", str(failed))


@contextlib.contextmanager
def python_signals_held(*signals: signal.Signals):
    """The Python handlers of `signals` (KeyboardInterrupt, train.py's stop, SIG_DFL's end) run when the
    block ends, not inside it. Not pthread_sigmask: a signal that another thread (torch's, tqdm's) takes
    still runs its handler in the main thread, at the next bytecode. Off the main thread, where no handler
    runs, nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {}
    for s in signals:
        if signal.getsignal(s) is not None:  # (None: a handler set outside Python, which cannot be put back)
            previous[s] = signal.signal(s, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for s in dict.fromkeys(caught):
            signal.raise_signal(s)


def refuse_special(path: Path) -> None:
    """A rename puts a file in the place of whatever has the name: /dev/full, as root (hunt 32-c F7), or a
    link to it (review 32); a directory ("", ".", "/": with_name's ValueError was a traceback, hunt 32-c
    F5; "..": EBUSY). A link to a regular file is fine: the link is replaced, its file left as it was."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:  # (nothing there, or a link to nothing)
        special = False
    if special:
        raise OSError(errno.EEXIST, "not a regular file (a device, a pipe or a socket), not replaced", str(path))


class NotDurable(OSError):
    """The new file is in place, but its directory could not be synced after the rename: a crash may
    yet bring the old one back. Not "nothing was written", which the writers' messages said of it
    (hunt 33-a F3)."""


def write_text_atomic(path: Path, text: str | bytes) -> None:
    """Replace `path` with `text` (UTF-8; bytes as they are) all at once. On an OSError (a full disk, a size limit, a
    permission) the temp file is removed and `path` is as it was, but on NotDurable."""
    path = Path(path)
    refuse_special(path)
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
