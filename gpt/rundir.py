"""One writer per run directory (issue 10): train.py holds an exclusive OS lock on
`<out_dir>/train.lock` for its whole life, so a second run started on the same directory is
refused before it does anything, told which process holds it. Two runs sharing a directory used
to prune each other's checkpoints and overwrite `latest` and metrics.jsonl.

The lock is flock(2) (msvcrt.locking on Windows): the OS drops it when the holder exits, however
it exits, so a crashed or killed run never leaves a stale lock. The file also records who holds
it (pid, host, start time, command) for the message. Readers (sample.py, anything that only
reads complete checkpoints) take no lock and keep working while a run trains.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import socket
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

from gpt.checkpoint import (NoCheckpoint, checkpoint_holding, find_checkpoint, incomplete_checkpoints,
                            list_checkpoints, name_of)
from gpt.errors import (ReportedByRank0, RunDirBusy, RunDirTaken, SaveError, UnreadableFile, UsageError,
                        unsearchable_directory)
from gpt.files import describe_error

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

LOCK_NAME = "train.lock"


class RunDirLock:
    """Held from acquire() to release(); release() removes the lock file and, when this run made
    the directory and nothing else was written there, the directory too (a refused run leaves
    nothing behind)."""

    def __init__(self, out_dir: str | Path):
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / LOCK_NAME
        self._fd: int | None = None
        self._dir_stat: os.stat_result | None = None  # out_dir as it was locked: moved or removed since, or not
        self._made_dir = False
        self._made_parents: list[Path] = []
        self._not_ours: str | None = None  # why the lock file last opened could not be written: another user's (_open)

    def acquire(self) -> "RunDirLock":
        self._made_dir = not self.out_dir.exists()
        # and the parents it makes with it: a refused --out_dir=a/b/c left a/b behind (hunt 34-b B10)
        self._made_parents = [p for p in self.out_dir.parents if not p.exists()] if self._made_dir else []
        while True:
            made_file = not self.path.exists()
            fd = self._open()
            try:
                locked = _try_lock(fd)
            except OSError as e:  # a filesystem without locks (NFS without its lock daemon: ENOLCK), an I/O
                # error: it said "in use by another training run", of none (hunt 33-a F12)
                os.close(fd)
                if self._not_ours:  # (on NFS, flock's exclusive lock needs a file open to write: EBADF, flock(2))
                    raise UsageError(f"cannot use out_dir {self.out_dir}: {self._not_ours}") from None
                with contextlib.suppress(OSError):  # what this try made, and only that (review 33)
                    if made_file:
                        self.path.unlink()
                    if self._made_dir:
                        self.out_dir.rmdir()
                raise UsageError(f"cannot lock out_dir {self.out_dir} ({describe_error(e)}), which keeps a second "
                                 "run out of it: choose an --out_dir on a filesystem that supports locks") from None
            if not locked:
                holder = _read_holder(fd)
                os.close(fd)
                raise RunDirBusy(f"{self.out_dir} is in use by another training run ({holder}); wait for it to "
                                 "finish or stop it, or choose another --out_dir")
            # The holder before us may have removed the file between our open and our lock:
            # then we locked a file nobody else will ever see. Start over on the current one. (Before a leftover is
            # replaced too: removing the path then removed the lock file another run had just made, both held out_dir,
            # hunt 52-q Q1.)
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            if self._not_ours:  # unlocked: left by a run that ended (SIGKILL leaves the file), another user's
                self._replace_a_leftover(fd)
                continue
            break
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                  "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])}
        try:
            os.ftruncate(fd, 0)
            os.write(fd, (json.dumps(record) + "\n").encode())
        except OSError:  # a full disk: the record only names us to a refused run, the lock holds without it
            pass  # (a refused run then reads no pid; release() removes the file as usual)
        self._fd = fd
        with contextlib.suppress(OSError):
            self._dir_stat = os.stat(self.out_dir)
        return self

    def _open(self) -> int:
        """The lock file's descriptor, or one line naming out_dir and why it cannot be used. Read-only
        (self._not_ours) where the file is another user's: a run of theirs holds it, or left it."""
        self._not_ours = None
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise UsageError(f"out_dir {self.out_dir} is not a directory")
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            # (not through a symbolic link by that name: the holder's record was written over the file it points to,
            # cut to it, a user's file lost: hunt 47-d D7)
            return os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except PermissionError as e:
            # Another user's lock file in a run directory they share (made 0644): a run of theirs that holds it was
            # said as "Permission denied (out/train.lock)", not named, and one that a SIGKILL ended left it so for
            # good, every other user's run refused there (hunt 52-m M2). Opened to read, it is locked all the same
            # (flock), and the holder named or the leftover replaced (_replace_a_leftover).
            if fcntl is not None and self.path.is_file() and not self.path.is_symlink():
                with contextlib.suppress(OSError):
                    fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                    self._not_ours = describe_error(e)
                    return fd
            raise UsageError(f"cannot use out_dir {self.out_dir}: {describe_error(e)}") from None
        except OSError as e:  # a file above it, no permission, a full disk, a read-only filesystem
            if e.errno == errno.ELOOP and self.path.is_symlink():
                raise UsageError(f"cannot use out_dir {self.out_dir}: its {LOCK_NAME} is a symbolic link to "
                                 f"{os.readlink(self.path)}, not a run's lock file, which the run would write over: "
                                 "remove that link, or choose another --out_dir") from None
            # A symbolic link to nothing (a disk not mounted), out_dir's or a parent's, is there for mkdir: the
            # line said "File exists" of a directory that does not exist (hunt 37-d D7)
            link = isinstance(e, FileExistsError) and next(
                (p for p in (self.out_dir, *self.out_dir.parents) if p.is_symlink() and not p.exists()), None)
            if link:  # (looked for only there: is_symlink and exists raise where a directory cannot be searched)
                raise UsageError(f"cannot use out_dir {self.out_dir}: {link} is a symbolic link to {os.readlink(link)}, "
                                 "which does not exist: make that directory, or choose another --out_dir") from None
            raise UsageError(f"cannot use out_dir {self.out_dir}: {describe_error(e)}") from None

    def _replace_a_leftover(self, fd: int) -> None:
        """Remove the lock file `fd` holds locked, read-only: another user's, left by a run of theirs that ended,
        which this run cannot write its record into; acquire() then makes its own. Removed while still locked,
        as release() does, so that an opener waiting on it starts over on the new one."""
        holder = _read_holder(fd)
        try:
            self.path.unlink()
        except OSError as e:  # (a sticky directory, /tmp's kind, or one this user cannot write)
            raise UsageError(f"cannot use out_dir {self.out_dir}: its {LOCK_NAME}, left by a run that has ended "
                             f"({holder}), is another user's and cannot be replaced ({describe_error(e)}): its owner "
                             "can remove it, or choose another --out_dir") from None
        finally:
            os.close(fd)

    def reclaim(self) -> str | None:
        """None while out_dir/train.lock is still the file this run locked. Else out_dir was moved or
        removed while the run trained (by hand, a clean-up script): lock it again, made anew, and return
        a warning that says where the run's earlier files went. A save made it again without a word and
        unlocked: a resume started there trained beside this run, the two pruning each other's
        checkpoints and rewriting `latest` (hunt 35-d D2). SaveError where it holds another run now."""
        if self._fd is None:
            return None
        with contextlib.suppress(OSError):
            if os.path.samestat(os.fstat(self._fd), os.stat(self.path)):
                return None
        with contextlib.suppress(OSError):
            if self._dir_stat is not None and os.path.samestat(self._dir_stat, os.stat(self.out_dir)):
                # out_dir is where it was, and only its lock file went (removed by hand as "stale", a clean-up
                # of *.lock): lock it again. It was taken for a removed out_dir holding another run's
                # checkpoints, its own, and the run stopped at its next save (review 35 R3)
                os.close(self._fd)
                self._fd = None
                self.acquire()  # (RunDirBusy where another run took the directory meanwhile)
                return f"{self.path} was removed while this run trained: locked again"
        try:  # where the locked file is now (Linux's /proc; elsewhere it is not known)
            now = os.readlink(f"/proc/self/fd/{self._fd}")
        except OSError:
            now = ""
        moved = Path(now).parent if now.startswith("/") and not now.endswith(" (deleted)") else None
        if moved is not None:  # the run does not live there any more (unlinked while held, as release() does)
            with contextlib.suppress(OSError):
                (moved / LOCK_NAME).unlink()
        os.close(self._fd)
        self._fd = None
        went = (f"moved to {moved}, with this run's earlier checkpoints, metrics.jsonl and config.json" if moved
                else "removed, with this run's earlier checkpoints")
        if list_checkpoints(self.out_dir):  # another run's directory put in its place: not saved into
            raise SaveError(f"{self.out_dir} was {went}, while this run trained, and holds another run's checkpoints "
                            "now: this run does not save there, and stops")
        self.acquire()  # (RunDirBusy where another run holds it now)
        return f"{self.out_dir} was {went}, while this run trained: it saves on in a new {self.out_dir}"

    def release(self) -> None:
        if self._fd is None:
            return
        if fcntl is not None:  # unlink while still holding it: a waiting opener then retries (see acquire)
            try:
                self.path.unlink(missing_ok=True)
            except OSError:  # out_dir turned read-only: the file stays, harmless (close drops the lock), and
                pass         # raising here would hide why the run ended (a SaveError's status 3, say)
        os.close(self._fd)  # drops the lock
        self._fd = None
        if self._made_dir:
            try:
                self.out_dir.rmdir()  # only when empty: a run that was refused or failed before writing
                for parent in self._made_parents:  # innermost first; each only when empty
                    parent.rmdir()
            except OSError:
                pass

    def __enter__(self) -> "RunDirLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _try_lock(fd: int) -> bool:
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        return True
    except (BlockingIOError, PermissionError):  # (flock's EWOULDBLOCK, msvcrt's EACCES): someone holds it
        return False


def refuse_an_unsearchable_out_dir(out_dir: str | Path) -> None:
    """UsageError where out_dir, or what lies in it, cannot be looked up: a directory on its way, or out_dir
    itself, has no search (x) permission. Each look at it (is it a checkpoint? a run? its lock, its
    checkpoints to resume) was a PermissionError traceback, for a new run, a resume and --eval_only alike
    (review 37 R3). Names the directory that cannot be searched, the one to chmod."""
    out_dir = Path(out_dir)
    if found := unsearchable_directory(out_dir / LOCK_NAME):  # (a name in it: out_dir itself searched too)
        directory, e = found
        # (an UnreadableFile: every process of a machine meets it alike, and its first says it, once)
        raise UnreadableFile(directory, f"cannot be searched ({e.strerror or e}), so out_dir {out_dir} cannot "
                             "be used; give it search permission (chmod +x), or choose another --out_dir", damaged=False)


def refuse_if_busy(out_dir: str | Path) -> None:
    """RunDirBusy, naming the holder, where another process holds out_dir's lock now; else nothing. For a
    resume that found no checkpoint: it read the checkpoints before taking the lock, and beside a run that
    had saved none yet it said "no complete checkpoint in out", as if nothing were there, where a run
    trains (hunt 37-c C2; the README says a second run is refused naming the holder)."""
    if (holder := lock_holder(out_dir)) is not None:
        raise RunDirBusy(f"{out_dir} is in use by another training run ({holder}); wait for it to "
                         "finish or stop it, or choose another --out_dir")


def lock_holder(out_dir: str | Path) -> str | None:
    """The training run that holds out_dir's lock now (its process, host, start and command, as RunDirBusy
    names it), else None (a lock this probe gets is let go at once): for readers, which take no lock, to
    say that a run trains there."""
    try:
        fd = os.open(Path(out_dir) / LOCK_NAME, os.O_RDONLY)
    except OSError:  # no lock file: no run holds it (a run removes it as it lets go)
        return None
    try:
        try:  # (shared, where flock is: the processes of a torchrun job probing at once do not see each other)
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                locked = True
            else:
                locked = _try_lock(fd)
        except (BlockingIOError, PermissionError):  # someone holds it (as _try_lock)
            locked = False
        except OSError:  # a filesystem without locks: nothing known (a resume's own lock says so)
            return None
        if not locked:
            return _read_holder(fd)
        if fcntl is None:  # (msvcrt's lock is let go by hand; closing drops flock's)
            with contextlib.suppress(OSError):
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return None
    finally:
        os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        # to its end: one read of 4,096 bytes cut a longer record (a long command line), which was then "not
        # recorded yet" (hunt 52-m M1); 4 MiB at most (a command line is at most ARG_MAX, 2 MiB on Linux)
        text = b""
        while len(text) < 1 << 22 and (chunk := os.read(fd, 1 << 16)):
            text += chunk
        record = json.loads(text.decode() or "{}")
        return (f"process {record['pid']} on {record['host']}, started {record['started']}: "
                f"{record['command']}")
    except (OSError, ValueError, KeyError, TypeError):  # just taken and not written yet; Windows' byte lock
        return "its process id is not recorded yet"


def hold_run_dir(out_dir: str | Path, dist, on_exit: ExitStack, resuming: bool = False, read: Path | None = None,
                 skipped: list[Path] | tuple = ()) -> RunDirLock | None:
    """Rank 0 locks out_dir until `on_exit` closes; if it cannot, or if a run that is not `resuming`
    finds another run there, or a resume finds that the run saved since it `read` its checkpoint (see
    refuse_a_newer_save), every rank stops (RunDirBusy, RunDirTaken) before anything is written.
    Returns the lock on rank 0 (for its `reclaim` before each save), None on the others."""
    held = []

    def hold() -> None:
        if not resuming:
            refuse_a_checkpoint(Path(out_dir))
        held.append(on_exit.enter_context(RunDirLock(out_dir)))
        if not resuming:
            refuse_another_run(Path(out_dir))
        elif read is not None:
            refuse_a_newer_save(Path(out_dir), read, skipped)
    on_rank0(dist, hold)
    return held[0] if held else None


def refuse_a_newer_save(out_dir: Path, read: Path, skipped: list[Path] | tuple = ()) -> None:
    """A resume reads its checkpoint before it takes the lock (the device it was saved on picks ours). The
    run's previous process, still in its closing save then (a Ctrl-C's, a preemption's), and gone by the
    lock, had saved the checkpoint it said to continue from, and the resume trained from the one before,
    whose saves then pruned it: those steps were lost in silence (hunt 37-d D5). Where `latest` names another
    checkpoint now than the one read (and not one the resume skipped as unreadable), it stops."""
    try:
        now = find_checkpoint(out_dir)  # (as open_resumable takes it: `latest`, else the newest)
    except NoCheckpoint:
        return
    if name_of(now) == name_of(read) or now in skipped:
        return
    raise RunDirBusy(f"{out_dir} holds {name_of(now)}, saved by the run's previous process while this one read "
                     f"{name_of(read)} to resume (that process was still saving): nothing was written; run the same "
                     f"command again to resume from {name_of(now)}")


def refuse_a_checkpoint(out_dir: Path) -> None:
    """A new run's out_dir must not be one of a run's checkpoints, or lie inside one: it was written
    there, sample.py then read the checkpoint rather than the run, and the checkpoint's pruning
    removed the run whole (hunt 31-a F5)."""
    if ckpt := checkpoint_holding(out_dir):
        where = "is" if ckpt == Path(out_dir).resolve() else "lies inside"
        raise RunDirTaken(f"--out_dir={out_dir} {where} checkpoint {ckpt} of the run in {ckpt.parent}, which prunes "
                          f"its checkpoints whole: choose a directory of its own (to start from that checkpoint: "
                          f"--init_from={shlex.quote(str(ckpt))} --out_dir=<another directory>)")


def refuse_another_run(out_dir: Path) -> None:
    """A new run (from scratch or from pretrained weights, out_dir itself included) must not start
    where a run lives: its metrics.jsonl would be cut and config.json replaced, and its checkpoints
    would be mixed with the new run's in `latest` and pruning (audit bug 1). A run that saved no
    checkpoint (diverged, out of memory, stopped early) cannot be resumed: the same command again,
    with what its error advised, starts over there."""
    if list_checkpoints(out_dir):
        raise RunDirTaken(f"{out_dir} holds a run (latest {name_of(find_checkpoint(out_dir))}): continue it with "
                          "--init_from=resume, or choose another --out_dir (or remove that one)")
    # Checkpoints that lost a file (by hand, a sync tool: a save renames only complete ones into place), state.pt
    # removed to keep the weights, say, are still the run's: a new run there replaced those of the steps it saved
    # with its own and left the others beside them, its metrics.jsonl and config.json over the run's (hunt 48-c C3)
    if lost := incomplete_checkpoints(out_dir):
        raise RunDirTaken(f"{out_dir} holds a run's checkpoints ({lost[-1][1]}), which a new run there would replace: "
                          "choose another --out_dir (or remove that one)")


# What a run writes at the top of its out_dir besides checkpoints, `latest`, `best` and its lock.
RUN_FILES = ("config.json", "metrics.jsonl", "loss.png")


def not_a_runs_files(out_dir: Path) -> list[str]:
    """The files of RUN_FILES in out_dir that no train.py run wrote, which a new run there would replace:
    a project's own config.json, metrics.jsonl or loss.png were overwritten without a word (--out_dir=. in
    a project, or any folder of one's own: hunt 43-e E1). A run's config.json is a JSON object holding its
    data, out_dir and init_from; its metrics.jsonl is empty, begins with a record of a step or lies beside
    its config.json; its loss.png lies beside either of them. (A failed run's leftovers are its own: the
    same command again starts over.)"""
    def ours_config(path: Path) -> bool:
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
            return False
        return isinstance(saved, dict) and {"data", "out_dir", "init_from"} <= saved.keys()

    def ours_metrics(path: Path) -> bool:
        try:
            with path.open(encoding="utf-8") as f:
                first = f.readline(1 << 16)
            record = json.loads(first) if first.strip() else {"step": 0}
        except (OSError, ValueError):
            return False
        return isinstance(record, dict) and "step" in record

    present = {name: out_dir / name for name in RUN_FILES if (out_dir / name).is_file()}
    ours = {name: ours_config(present[name]) if name == "config.json" else ours_metrics(present[name])
            for name in ("config.json", "metrics.jsonl") if name in present}
    if "metrics.jsonl" in ours and ours.get("config.json"):
        # beside the run's config.json, a first line that is no record is the run's, cut short (a crash before its
        # first checkpoint leaves NULs or half a line, which records() skips): the same command again was refused,
        # "holds metrics.jsonl, not written by a train.py run" (hunt 47-d D2)
        ours["metrics.jsonl"] = True
    if "loss.png" in present:
        ours["loss.png"] = any(ours.values())
    return [name for name, is_ours in ours.items() if not is_ours]


def on_rank0(dist, action: Callable[[], object]) -> None:
    """Run `action` on rank 0 only (taking the lock, saving a checkpoint), then meet the other
    ranks: a UsageError it raised is raised on every rank (on the others as ReportedByRank0, whose
    message rank 0 prints), so no rank is left waiting for a peer that has stopped."""
    error = None
    if dist.is_main:
        try:
            action()
        except UsageError as e:
            error = e
    if dist.enabled:
        import torch.distributed

        box = [None if error is None else error.exit_status]
        torch.distributed.broadcast_object_list(box, src=0)
        if box[0] is not None and error is None:
            error = ReportedByRank0(box[0])
    if error is not None:
        raise error
