import json
import os
import subprocess
import sys
import textwrap
from contextlib import ExitStack

import pytest

from gpt.errors import RunDirBusy, UsageError
from gpt.rundir import LOCK_NAME, RunDirLock, hold_run_dir, refuse_if_busy
from gpt.runtime import Dist

HOLD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from gpt.rundir import RunDirLock
    lock = RunDirLock({out!r}).acquire()
    print("locked", flush=True)
    time.sleep(60)
""")


def hold_in_another_process(out) -> subprocess.Popen:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", HOLD.format(root=root, out=str(out))], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path):
    holder = hold_in_another_process(tmp_path / "run")
    try:
        with pytest.raises(RunDirBusy, match=rf"run is in use by another training run \(process {holder.pid} on "
                                             r".*started .*: -c\); wait for it to finish"):
            RunDirLock(tmp_path / "run").acquire()
    finally:
        holder.kill()
        holder.wait()
    # Killed (SIGKILL): the OS dropped its lock, so the directory is free again at once.
    with RunDirLock(tmp_path / "run") as lock:
        assert f'"pid": {os.getpid()}' in lock.path.read_text()
    assert not (tmp_path / "run" / LOCK_NAME).exists()


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_refuse_if_busy_names_the_holder_and_not_another_probe(tmp_path):
    # A resume that found no checkpoint asks whether a run holds out_dir (hunt 37-c C2). Its probe took the
    # lock exclusively, so the processes of a torchrun job probing at once could each see the other's probe
    # as a training run ("its process id is not recorded yet"): it takes a shared lock (hunt 37-c C2b)
    refuse_if_busy(tmp_path / "none")  # no directory, no lock file: nothing to say
    holder = hold_in_another_process(tmp_path / "run")
    try:
        with pytest.raises(RunDirBusy, match=rf"run is in use by another training run \(process {holder.pid} on "):
            refuse_if_busy(tmp_path / "run")
    finally:
        holder.kill()
        holder.wait()
    probe = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); "
                              "fcntl.flock(fd, fcntl.LOCK_SH); print('probing', flush=True); time.sleep(60)",
                              str(tmp_path / "run" / LOCK_NAME)], stdout=subprocess.PIPE, text=True)
    try:
        assert probe.stdout.readline().strip() == "probing"
        refuse_if_busy(tmp_path / "run")  # another process's probe is no run
    finally:
        probe.kill()
        probe.wait()
    RunDirLock(tmp_path / "run").acquire().release()  # and the probes left no lock behind


def test_the_same_process_cannot_take_it_twice_and_release_frees_it(tmp_path):
    first = RunDirLock(tmp_path).acquire()
    with pytest.raises(RunDirBusy, match=rf"process {os.getpid()}"):
        RunDirLock(tmp_path).acquire()
    first.release()
    RunDirLock(tmp_path).acquire().release()


def test_a_refused_or_finished_run_leaves_no_directory_it_made(tmp_path):
    out = tmp_path / "new"
    with ExitStack() as on_exit:
        hold_run_dir(out, Dist(), on_exit)
        assert (out / LOCK_NAME).is_file()
    assert not out.exists()  # made by the lock and still empty: removed
    (tmp_path / "kept").mkdir()
    with RunDirLock(tmp_path / "kept"):
        (tmp_path / "kept" / "metrics.jsonl").write_text("{}\n")
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["metrics.jsonl"]


def test_a_holder_that_removed_the_file_under_a_waiting_opener_is_not_shared(tmp_path, monkeypatch):
    # Opener B opened train.lock, then A released (unlinking it) before B locked: B must not keep a
    # lock on the orphaned file while a third run locks the new one. acquire() checks and retries.
    import gpt.rundir as R

    real_try_lock, calls = R._try_lock, []

    def release_the_other_first(fd):
        if not calls:
            other.release()  # unlinks the file this fd points to
        calls.append(fd)
        return real_try_lock(fd)

    other = RunDirLock(tmp_path).acquire()
    monkeypatch.setattr(R, "_try_lock", release_the_other_first)
    lock = RunDirLock(tmp_path).acquire()
    assert len(calls) == 2  # the first fd was for the removed file: opened again
    assert os.path.samestat(os.fstat(lock._fd), os.stat(lock.path))
    lock.release()


def test_the_lock_file_is_not_a_checkpoint_or_leftover(tmp_path):
    from gpt.checkpoint import clean_leftovers, list_checkpoints

    with RunDirLock(tmp_path):
        assert clean_leftovers(tmp_path) == [] and list_checkpoints(tmp_path) == []
        assert (tmp_path / LOCK_NAME).exists()


def test_release_in_a_directory_turned_read_only_does_not_raise_and_frees_the_lock(tmp_path, monkeypatch):
    # Audit bug 6: unlinking train.lock failed (EACCES) in release(), which raised over the SaveError
    # that was ending the run. The file may stay; closing it drops the lock all the same.
    import errno
    import pathlib

    lock = RunDirLock(tmp_path).acquire()
    real_unlink = pathlib.Path.unlink

    def refused(self, *args, **kwargs):
        if self.name == LOCK_NAME:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_unlink(self, *args, **kwargs)
    monkeypatch.setattr(pathlib.Path, "unlink", refused)
    lock.release()
    monkeypatch.undo()
    assert (tmp_path / LOCK_NAME).exists()
    RunDirLock(tmp_path).acquire().release()  # free again


def test_an_unusable_out_dir_is_one_usage_error_naming_it(tmp_path, monkeypatch):
    # Audit bug 5: a file, a path under a file, a directory we may not write: tracebacks from mkdir/open.
    import errno

    from gpt.errors import UsageError

    (tmp_path / "afile").write_text("")
    with pytest.raises(UsageError, match=rf"^out_dir {tmp_path / 'afile'} is not a directory$"):
        RunDirLock(tmp_path / "afile").acquire()
    with pytest.raises(UsageError, match=rf"^cannot use out_dir {tmp_path / 'afile' / 'sub'}: Not a directory"):
        RunDirLock(tmp_path / "afile" / "sub").acquire()
    real_open = os.open

    def refused(path, *args, **kwargs):  # as a read-only directory does (root ignores the mode bits)
        if str(path).endswith(LOCK_NAME):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(os, "open", refused)
    with pytest.raises(UsageError, match=rf"^cannot use out_dir {tmp_path}: Permission denied \(.*{LOCK_NAME}\)$"):
        RunDirLock(tmp_path).acquire()


def test_a_holder_record_that_cannot_be_written_does_not_stop_the_run(tmp_path, monkeypatch):
    # Audit bug 5: a full disk failed the informational record with a traceback and left an empty
    # train.lock behind. The lock holds without the record, and release removes the file.
    import errno

    def disk_full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "write", disk_full)
    lock = RunDirLock(tmp_path / "run").acquire()
    monkeypatch.undo()
    with pytest.raises(RunDirBusy, match="not recorded"):
        RunDirLock(tmp_path / "run").acquire()
    lock.release()
    assert not (tmp_path / "run").exists()  # made by the lock, left empty: removed, train.lock included


def test_a_new_run_is_refused_where_a_run_lives_and_a_resume_is_not(tmp_path):
    # Audit bug 1: a new run in a directory holding a run cut its metrics.jsonl, replaced config.json
    # and mixed its checkpoints with the old ones. Refused before anything is written.
    from gpt.checkpoint import save_checkpoint
    from gpt.errors import RunDirTaken
    from gpt.model import GPT, GPTConfig

    out = tmp_path / "run"
    out.mkdir()
    # A run that saved no checkpoint (it diverged, ran out of memory): nothing to resume, so the
    # command its error advised may start over there.
    (out / "metrics.jsonl").write_text('{"step": 0, "val_loss": 5.0}\n{"step": 1, "loss": 5.0}\n')
    with ExitStack() as on_exit:
        hold_run_dir(out, Dist(), on_exit)
    model = GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=1, n_head=2, n_embd=16))
    save_checkpoint(out, 60, model, {}, {"model_config": model.config.to_dict()})
    with pytest.raises(RunDirTaken, match=rf"^{out} holds a run \(latest ckpt-0000060\): continue it with "
                                          r"--init_from=resume, or choose another --out_dir \(or remove that one\)$"):
        with ExitStack() as on_exit:
            hold_run_dir(out, Dist(), on_exit)
    assert sorted(p.name for p in out.iterdir()) == ["ckpt-0000060", "latest", "metrics.jsonl"]  # lock released
    with ExitStack() as on_exit:
        hold_run_dir(out, Dist(), on_exit, resuming=True)


def test_a_new_run_is_refused_where_a_runs_checkpoints_lost_a_file(tmp_path):
    # Checkpoints whose state.pt was removed to keep their weights (or that lost any file) were no run to a new
    # one: it replaced config.json and metrics.jsonl, wrote its own checkpoint over the one of the step it saved
    # (other weights under the old name) and left the others beside its own (hunt 48-c C3)
    from gpt.checkpoint import save_checkpoint
    from gpt.errors import RunDirTaken
    from gpt.model import GPT, GPTConfig

    out = tmp_path / "run"
    model = GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=1, n_head=2, n_embd=16))
    for step in (30, 60):
        save_checkpoint(out, step, model, {}, {"model_config": model.config.to_dict()})
        (out / f"ckpt-{step:07d}" / "state.pt").unlink()
    with pytest.raises(RunDirTaken) as refused:
        with ExitStack() as on_exit:
            hold_run_dir(out, Dist(), on_exit)
    assert str(refused.value) == (f"{out} holds a run's checkpoints ({out / 'ckpt-0000060'}: incomplete, without "
                                  "state.pt), which a new run there would replace: choose another --out_dir (or "
                                  "remove that one)")
    assert sorted(p.name for p in out.iterdir()) == ["ckpt-0000030", "ckpt-0000060", "latest"]  # lock released
    # nor inside one of them, whose weights --init_from takes (hunt 48-c C4)
    inside = out / "ckpt-0000060" / "new"
    with pytest.raises(RunDirTaken, match=rf"^--out_dir={inside} lies inside checkpoint {out / 'ckpt-0000060'} of the "
                                          rf"run in {out}, .* \(to start from that checkpoint: "
                                          rf"--init_from={out / 'ckpt-0000060'} --out_dir=<another directory>\)$"):
        with ExitStack() as on_exit:
            hold_run_dir(inside, Dist(), on_exit)
    assert not inside.exists()


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links")
def test_an_out_dir_through_a_symbolic_link_to_nothing_is_said_so(tmp_path):
    # mkdir met the link's name: "File exists", of a directory that does not exist (hunt 37-d D7)
    from gpt.errors import UsageError

    (tmp_path / "link").symlink_to(tmp_path / "unmounted" / "run")
    for out in (tmp_path / "link", tmp_path / "link" / "sub"):
        with pytest.raises(UsageError, match=rf"^cannot use out_dir {out}: {tmp_path / 'link'} is a symbolic link to "
                                             rf"{tmp_path / 'unmounted' / 'run'}, which does not exist: make that "
                                             r"directory, or choose another --out_dir$"):
            RunDirLock(out).acquire()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"]
    (tmp_path / "unmounted" / "run").mkdir(parents=True)  # (mounted: a run directory as any other)
    RunDirLock(tmp_path / "link").acquire().release()


def test_release_leaves_a_directory_the_user_made_and_removes_one_it_made(tmp_path):
    # a directory made beforehand (`mkdir out`: a mount point, its permissions set) went with a run
    # refused before writing, had release() removed whatever it found empty (hunt 33-c S9)
    (tmp_path / "mine").mkdir()
    RunDirLock(tmp_path / "mine").acquire().release()
    assert (tmp_path / "mine").is_dir() and not any((tmp_path / "mine").iterdir())
    RunDirLock(tmp_path / "made").acquire().release()
    assert not (tmp_path / "made").exists()


def test_a_longer_record_left_by_a_killed_holder_is_overwritten_whole(tmp_path):
    # SIGKILL leaves the file; a new holder's shorter record kept the old one's tail after its JSON, and a
    # second run was told "its process id is not recorded yet" instead of the holder (hunt 33-c S10)
    (tmp_path / LOCK_NAME).write_text('{"pid": 1, "host": "h", "started": "x", "command": "' + "y" * 500 + '"}\n')
    first = RunDirLock(tmp_path).acquire()
    try:
        with pytest.raises(RunDirBusy, match=rf"process {os.getpid()}"):
            RunDirLock(tmp_path).acquire()
    finally:
        first.release()


def test_a_holder_whose_command_is_longer_than_one_read_is_still_named(tmp_path, monkeypatch):
    # The record was read with one os.read of 4,096 bytes: a run whose command line is longer (a sweep tool's
    # generated command, long paths) was named "its process id is not recorded yet", by the refused run and by
    # sample.py alike, the holder's pid, host and command being in the file (hunt 52-m M1)
    from gpt.rundir import lock_holder
    monkeypatch.setattr(sys, "argv", ["train.py", "--wandb_project=" + "x" * 5000])
    first = RunDirLock(tmp_path).acquire()
    try:
        with pytest.raises(RunDirBusy, match=rf"process {os.getpid()} on .*: train.py --wandb_project=x{{5000}}\)"):
            RunDirLock(tmp_path).acquire()
        assert lock_holder(tmp_path).startswith(f"process {os.getpid()} on ")
    finally:
        first.release()

@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_another_users_lock_file_names_its_run_or_is_replaced_once_that_run_ended(tmp_path, monkeypatch):
    # A lock file made by another user (0644) in a run directory they share could not be opened to write: a run of
    # theirs holding it was said as "Permission denied (run/train.lock)", not named, and one that a SIGKILL ended
    # left it so for good, every other user's run refused there (hunt 52-m M2; reproduced with two uids by
    # setpriv). Here the holder's file is refused to writers as another user's would be.
    import errno
    out = tmp_path / "run"
    holder = hold_in_another_process(out)
    theirs = os.stat(out / LOCK_NAME).st_ino
    real_open, real_unlink = os.open, os.unlink

    def as_another_user(path, flags, *args, **kwargs):
        if flags & (os.O_RDWR | os.O_WRONLY) and os.path.exists(path) and os.stat(path).st_ino == theirs:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", as_another_user)
    try:
        with pytest.raises(RunDirBusy, match=rf"in use by another training run \(process {holder.pid} on "):
            RunDirLock(out).acquire()
    finally:
        holder.kill()
        holder.wait()
    # their run killed: the file they left is not ours to write, but it is replaced where the directory lets us
    monkeypatch.setattr(os, "unlink", lambda path, **kw: (_ for _ in ()).throw(
        PermissionError(errno.EPERM, "Operation not permitted", str(path))))
    with pytest.raises(UsageError, match=rf"its {LOCK_NAME}, left by a run that has ended \(process {holder.pid} on .*"
                                         r"\), is another user's and cannot be replaced"):
        RunDirLock(out).acquire()
    monkeypatch.setattr(os, "unlink", real_unlink)
    with RunDirLock(out) as lock:
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
    assert not (out / LOCK_NAME).exists()


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_two_runs_replacing_another_users_leftover_lock_file_do_not_both_hold_the_directory(tmp_path, monkeypatch):
    # Two runs start on a directory whose lock file another user's killed run left (hunt 52-m M2). The second opened
    # that file before the first replaced it, and locked it once the first had closed it: a file no longer there.
    # It removed what was there, the first run's own new lock file, and made a third, so both held the directory
    # (hunt 52-q Q1). A leftover is replaced only while it is still the lock file, as every other lock is taken.
    import errno
    import gpt.rundir
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_NAME).write_text('{"pid": 1, "host": "h", "started": "x", "command": "train.py"}\n')
    theirs = os.stat(out / LOCK_NAME).st_ino
    real_open, real_try_lock = os.open, gpt.rundir._try_lock

    def as_another_user(path, flags, *args, **kwargs):
        if flags & (os.O_RDWR | os.O_WRONLY) and os.path.exists(path) and os.stat(path).st_ino == theirs:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", as_another_user)
    first, started = RunDirLock(out), []

    def the_first_run_starts_between_our_open_and_our_lock(fd):
        if not started:
            started.append(True)
            first.acquire()
        return real_try_lock(fd)
    monkeypatch.setattr(gpt.rundir, "_try_lock", the_first_run_starts_between_our_open_and_our_lock)
    try:
        with pytest.raises(RunDirBusy, match=rf"in use by another training run \(process {os.getpid()} on "):
            RunDirLock(out).acquire()
        assert os.path.samestat(os.fstat(first._fd), os.stat(out / LOCK_NAME))
    finally:
        first.release()


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_another_users_lock_file_that_cannot_be_locked_open_to_read_is_said_as_theirs(tmp_path, monkeypatch):
    # On NFS an exclusive flock needs a file open to write (EBADF, flock(2)): another user's lock file, opened to
    # read (hunt 52-m M2), is said as before, not as "choose a filesystem that supports locks"
    import errno
    import gpt.rundir
    (tmp_path / LOCK_NAME).write_text('{"pid": 1, "host": "h", "started": "x", "command": "train.py"}\n')
    theirs = os.stat(tmp_path / LOCK_NAME).st_ino
    real_open = os.open

    def as_another_user(path, flags, *args, **kwargs):
        if flags & (os.O_RDWR | os.O_WRONLY) and os.path.exists(path) and os.stat(path).st_ino == theirs:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", as_another_user)

    def nfs_flock_on_a_file_open_to_read(fd):
        raise OSError(errno.EBADF, "Bad file descriptor")
    monkeypatch.setattr(gpt.rundir, "_try_lock", nfs_flock_on_a_file_open_to_read)
    with pytest.raises(UsageError, match=rf"^cannot use out_dir {tmp_path}: Permission denied "
                                         rf"\({tmp_path / LOCK_NAME}\)$"):
        RunDirLock(tmp_path).acquire()
    assert (tmp_path / LOCK_NAME).exists()

def test_a_lock_refused_by_the_filesystem_is_not_called_another_run(tmp_path, monkeypatch):
    # flock's ENOLCK (NFS without its lock daemon) said "in use by another training run" of none, on every
    # try, and left an empty train.lock (hunt 33-a F12, by strace)
    import errno

    import gpt.rundir
    from gpt.errors import UsageError

    if gpt.rundir.fcntl is None:
        pytest.skip("flock: POSIX only")

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(gpt.rundir.fcntl, "flock", no_locks)
    with pytest.raises(UsageError) as e:
        RunDirLock(tmp_path / "run").acquire()
    assert not isinstance(e.value, RunDirBusy)
    assert str(e.value) == (f"cannot lock out_dir {tmp_path / 'run'} (No locks available), which keeps a second run "
                            "out of it: choose an --out_dir on a filesystem that supports locks")
    assert not (tmp_path / "run").exists()  # made for the run, removed with its lock file
    (tmp_path / "mine").mkdir()  # a directory made beforehand keeps nothing of the try (review 33)
    with pytest.raises(UsageError, match="No locks available"):
        RunDirLock(tmp_path / "mine").acquire()
    assert (tmp_path / "mine").is_dir() and list((tmp_path / "mine").iterdir()) == []


def test_a_refused_run_leaves_none_of_the_parent_directories_it_made(tmp_path):
    # --out_dir=a/b/c refused before writing removed c and left a/b (hunt 34-b B10)
    RunDirLock(tmp_path / "a" / "b" / "c").acquire().release()
    assert not (tmp_path / "a").exists()
    (tmp_path / "x").mkdir()
    with RunDirLock(tmp_path / "x" / "y" / "z"):
        (tmp_path / "x" / "y" / "other.txt").write_text("not the run's")
    assert sorted(p.name for p in (tmp_path / "x" / "y").iterdir()) == ["other.txt"]  # not empty: kept


def test_an_out_dir_moved_or_removed_while_held_is_locked_again_with_a_warning(tmp_path):
    # a save made it again without a word and unlocked: a resume started there trained beside the run,
    # the two pruning each other's checkpoints and rewriting `latest` (hunt 35-d D2)
    import shutil

    out, moved = tmp_path / "run", tmp_path / "run-old"
    lock = RunDirLock(out).acquire()
    assert lock.reclaim() is None  # still in place
    out.rename(moved)
    note = lock.reclaim()
    assert note == (f"{out} was moved to {moved}, with this run's earlier checkpoints, metrics.jsonl and config.json, "
                    f"while this run trained: it saves on in a new {out}")
    assert not (moved / LOCK_NAME).exists()  # no run lives there any more
    with pytest.raises(RunDirBusy):  # held again, where the run saves
        RunDirLock(out).acquire()
    shutil.rmtree(out)
    assert lock.reclaim() == (f"{out} was removed, with this run's earlier checkpoints, while this run trained: it "
                              f"saves on in a new {out}")
    with pytest.raises(RunDirBusy):
        RunDirLock(out).acquire()
    lock.release()
    assert not out.exists()  # (nothing saved in it yet)


def test_an_out_dir_replaced_by_another_runs_directory_is_not_saved_into(tmp_path):
    from gpt.errors import SaveError

    out = tmp_path / "run"
    lock = RunDirLock(out).acquire()
    out.rename(tmp_path / "mine")
    other = out / "ckpt-0000005"
    other.mkdir(parents=True)
    for name in ("model.safetensors", "state.pt", "meta.json"):
        (other / name).write_text("x")
    with pytest.raises(SaveError, match=f"{out} was moved to {tmp_path / 'mine'}, .* and holds another run's "
                                        "checkpoints now: this run does not save there, and stops"):
        lock.reclaim()
    assert not (out / LOCK_NAME).exists()
    lock.release()


def test_a_lock_file_removed_from_an_out_dir_in_place_is_locked_again_not_taken_for_another_run(tmp_path):
    # Only train.lock removed (by hand, as stale): the directory, with the run's own checkpoints, is where
    # it was. It was said to be "removed ... and holds another run's checkpoints", and the run stopped at
    # its next save with status 3 (review 35 R3)
    from gpt.checkpoint import save_checkpoint
    from gpt.model import GPT, GPTConfig

    out = tmp_path / "run"
    lock = RunDirLock(out).acquire()
    model = GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=1, n_head=2, n_embd=16))
    save_checkpoint(out, 2, model, {}, {"model_config": model.config.to_dict()}, keep_last=2)
    (out / LOCK_NAME).unlink()
    assert lock.reclaim() == f"{out / LOCK_NAME} was removed while this run trained: locked again"
    with pytest.raises(RunDirBusy):  # held again
        RunDirLock(out).acquire()
    assert lock.reclaim() is None
    lock.release()
    assert not (out / LOCK_NAME).exists() and (out / "ckpt-0000002").is_dir()


def test_a_resume_stops_where_the_run_saved_since_it_read_its_checkpoint(tmp_path):
    # It read its checkpoint before taking the lock: the run's previous process, still in its closing save
    # then and gone by the lock, saved the checkpoint it said to continue from, and the resume trained from
    # the one before, whose saves pruned it (hunt 37-d D5)
    from gpt.checkpoint import save_checkpoint
    from gpt.model import GPT, GPTConfig

    out = tmp_path / "run"
    model = GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=1, n_head=2, n_embd=16))
    for step in (40, 43):
        save_checkpoint(out, step, model, {}, {"model_config": model.config.to_dict()})
    read = out / "ckpt-0000040"  # (what `latest` named when the resume read it)
    with pytest.raises(RunDirBusy, match=rf"^{out} holds ckpt-0000043, saved by the run's previous process while this "
                                         r"one read ckpt-0000040 to resume \(that process was still saving\): nothing "
                                         r"was written; run the same command again to resume from ckpt-0000043$"):
        with ExitStack() as on_exit:
            hold_run_dir(out, Dist(), on_exit, resuming=True, read=read)
    assert not (out / LOCK_NAME).exists()
    with ExitStack() as on_exit:  # the checkpoint `latest` names, or a newer one skipped as unreadable: no refusal
        hold_run_dir(out, Dist(), on_exit, resuming=True, read=out / "ckpt-0000043")
    with ExitStack() as on_exit:
        hold_run_dir(out, Dist(), on_exit, resuming=True, read=read, skipped=[out / "ckpt-0000043"])


def test_a_runs_metrics_cut_short_before_its_first_line_ended_is_the_runs_and_a_foreign_one_is_not(tmp_path):
    # A crash before a run's first checkpoint can leave its metrics.jsonl's first line NULs or half a record: the
    # same command again (which starts such a run over) was refused, "holds metrics.jsonl, not written by a train.py
    # run" (hunt 47-d D2). Beside no config.json of a run, such a file is still not taken for the run's.
    from gpt.rundir import not_a_runs_files
    (tmp_path / "config.json").write_text(json.dumps({"data": "d", "out_dir": str(tmp_path), "init_from": "scratch"}))
    for torn in (b"\0" * 300, b'{"step": 0, "val_loss": 5.56'):
        (tmp_path / "metrics.jsonl").write_bytes(torn)
        assert not_a_runs_files(tmp_path) == []
    (tmp_path / "config.json").write_text('{"model": "mine"}\n')
    assert not_a_runs_files(tmp_path) == ["config.json", "metrics.jsonl"]


@pytest.mark.skipif(not hasattr(os, "O_NOFOLLOW"), reason="O_NOFOLLOW")
def test_a_lock_file_that_is_a_symbolic_link_is_refused_and_its_target_left_alone(tmp_path):
    # The lock was opened through it, and the holder's record written over the file it points to, cut to it (a
    # user's file lost), in a directory someone else prepared, say (hunt 47-d D7)
    from gpt.errors import UsageError
    precious = tmp_path / "precious.txt"
    precious.write_text("mine\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / LOCK_NAME).symlink_to(precious)
    with pytest.raises(UsageError, match=rf"^cannot use out_dir {tmp_path / 'run'}: its train.lock is a symbolic link "
                                         rf"to {precious}, not a run's lock file, which the run would write over: "
                                         "remove that link, or choose another --out_dir$"):
        RunDirLock(tmp_path / "run").acquire()
    assert precious.read_text() == "mine\n" and (tmp_path / "run" / LOCK_NAME).is_symlink()
