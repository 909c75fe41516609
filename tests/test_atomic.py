import errno
import hashlib

import pytest

from gpt.atomic import files_sha256, replace_file, write_text_atomic


def test_write_text_atomic_replaces_the_file_as_utf8_and_leaves_nothing_else(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("old\n")
    write_text_atomic(path, "new — ✓\n")
    assert path.read_bytes() == "new — ✓\n".encode("utf-8") and [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_a_write_that_fails_half_way_keeps_the_old_file_and_removes_its_temp(tmp_path, fail_writes):
    path = tmp_path / "f.txt"
    path.write_text("old\n")
    fail_writes(errno.ENOSPC, keep=3)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomic(path, "a much longer new text\n")
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_replace_file_gives_a_finished_temp_its_name(tmp_path):
    tmp, path = tmp_path / ".f.tmp", tmp_path / "f"
    path.write_bytes(b"old")
    tmp.write_bytes(b"new")
    replace_file(tmp, path)
    assert path.read_bytes() == b"new" and not tmp.exists()


@pytest.mark.parametrize("writer", ["write_text_atomic", "replace_file"])
def test_the_new_bytes_are_synced_before_the_rename_and_the_directory_after(tmp_path, monkeypatch, writer):
    # Against a power loss, not a kill: without the first fsync the name can point at a file whose
    # bytes never reached the disk. Dropping either fsync passed every test (hunt 31-b A1, A2).
    import os
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("reads the synced paths from /proc/self/fd")
    events, real_fsync, real_replace = [], os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", os.path.basename(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = tmp_path / "f"
    if writer == "write_text_atomic":
        write_text_atomic(path, "new\n")
        tmp = f".tmp-f.{os.getpid()}"
    else:
        tmp = ".f.tmp"
        (tmp_path / tmp).write_bytes(b"new")
        replace_file(tmp_path / tmp, path)
    assert events == [("fsync", tmp), ("replace", "f"), ("fsync", tmp_path.name)]


def test_a_device_or_a_pipe_is_not_replaced_by_a_file(tmp_path):
    # make_pairs.py --out /dev/full, as root, put a file in the device's place (hunt 32-c F7); a pipe stands in
    import os
    import stat

    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(OSError, match=r"not a regular file \(a device, a pipe or a socket\), not replaced: '.*pipe'"):
        write_text_atomic(tmp_path / "pipe", "text\n")
    (tmp_path / "link").symlink_to(tmp_path / "pipe")  # a link to one, as /dev/stdout is (review 32)
    with pytest.raises(OSError, match=r"not a regular file \(a device, a pipe or a socket\), not replaced: '.*link'"):
        write_text_atomic(tmp_path / "link", "text\n")
    assert (tmp_path / "link").is_symlink() and stat.S_ISFIFO(os.lstat(tmp_path / "pipe").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "pipe"]
    # a directory, also one without a name (with_name's ValueError was a traceback: hunt 32-c F5; "..": EBUSY)
    for name in ("", ".", "/", "..", tmp_path):
        with pytest.raises(IsADirectoryError):
            write_text_atomic(name, "text\n")


def test_files_sha256_hashes_every_byte_of_files_larger_than_its_reads(tmp_path):
    # Its reads are 16 MiB: a split's shards and a LoRA base (GPT-2's 500 MB) are larger, and a hash of the
    # first read alone missed changes past it (hunt 32-a A6). Sparse files: no 80 MiB written.
    paths = [tmp_path / "a", tmp_path / "b"]
    for i, path in enumerate(paths):
        with open(path, "wb") as f:
            f.truncate(40 << 20)
            f.seek((40 << 20) - 1 - i)
            f.write(b"x")
    whole = b"".join(p.read_bytes() for p in paths)
    assert files_sha256(*paths) == hashlib.sha256(whole).hexdigest()
    assert files_sha256(paths[0]) != files_sha256(paths[1])


def test_same_mode_as_copies_a_siblings_permissions(tmp_path):
    import os
    import stat

    from gpt.atomic import same_mode_as

    made, sibling = tmp_path / "weights", tmp_path / "config"
    made.write_bytes(b"w")
    os.chmod(made, 0o600)  # as safetensors creates its files
    sibling.write_bytes(b"c")
    os.chmod(sibling, 0o640)
    same_mode_as(made, sibling)
    assert stat.S_IMODE(made.stat().st_mode) == 0o640


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_replace_files_holds_ctrl_c_and_sigterm_until_its_last_rename(tmp_path, monkeypatch, signum):
    # (hunt 42-d D4: only Ctrl-C, through save_pretrained, was tested: SIGTERM could leave the list unnoticed)
    import os
    import signal

    import gpt.atomic
    from gpt.atomic import replace_files

    signum = getattr(signal, signum)
    pairs = [(tmp_path / f".tmp-{name}", tmp_path / name) for name in ("a", "b")]
    for tmp, _ in pairs:
        tmp.write_text("new")
    real_replace, renamed, seen = os.replace, [], []

    def signal_at_the_first_rename(src, dst):
        real_replace(src, dst)
        renamed.append(dst)
        if len(renamed) == 1:
            signal.raise_signal(signum)

    monkeypatch.setattr(gpt.atomic.os, "replace", signal_at_the_first_rename)
    before = signal.signal(signum, lambda *_: seen.append(len(renamed)))
    try:
        replace_files(pairs)
    finally:
        signal.signal(signum, before)
    assert seen == [2]  # its handler ran once, after both renames
    assert [path.read_text() for _, path in pairs] == ["new", "new"]


def test_replace_files_makes_its_renames_durable_before_a_held_signal_is_raised(tmp_path, monkeypatch):
    # A Ctrl-C held through the renames was raised before the directory's fsync: KeyboardInterrupt (or
    # SIGTERM's default end) left the renames not yet durable, and a crash soon after could bring the old
    # names back (hunt 42-f, hunt 43-a A1)
    import signal

    import gpt.atomic
    from gpt.atomic import replace_files

    pairs = [(tmp_path / ".tmp-a", tmp_path / "a"), (tmp_path / ".tmp-b", tmp_path / "b")]
    for tmp, _ in pairs:
        tmp.write_text("new")
    real_replace, real_fsync_dir, events = gpt.atomic.os.replace, gpt.atomic.fsync_dir, []

    def signal_at_the_first_rename(src, dst):
        real_replace(src, dst)
        events.append(f"rename {dst.name}")
        if len(events) == 1:
            signal.raise_signal(signal.SIGINT)

    def recorded_fsync_dir(path):
        real_fsync_dir(path)
        events.append("fsync_dir")

    monkeypatch.setattr(gpt.atomic.os, "replace", signal_at_the_first_rename)
    monkeypatch.setattr(gpt.atomic, "fsync_dir", recorded_fsync_dir)
    before = signal.signal(signal.SIGINT, lambda *_: events.append("Ctrl-C"))
    try:
        replace_files(pairs)
    finally:
        signal.signal(signal.SIGINT, before)
    assert events == ["rename a", "rename b", "fsync_dir", "Ctrl-C"]  # one directory, synced once


def test_python_signals_held_puts_the_handlers_back_and_holds_nothing_off_the_main_thread():
    # (hunt 42-d D4) the handlers found are those left, a signal ignored stays ignored, and in another thread,
    # where signal.signal raises ValueError, the block runs as it is
    import signal
    import threading

    from gpt.atomic import python_signals_held

    seen = []

    def handler(signum, frame):
        seen.append(signum)

    before = signal.signal(signal.SIGINT, handler), signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with python_signals_held(signal.SIGINT, signal.SIGTERM):
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGINT)
            assert seen == []
        assert seen == [signal.SIGINT]  # once, as it ended
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == (handler, signal.SIG_IGN)
        errors = []

        def in_a_thread():
            try:
                with python_signals_held(signal.SIGINT, signal.SIGTERM):
                    pass
            except ValueError as e:
                errors.append(e)

        thread = threading.Thread(target=in_a_thread)
        thread.start()
        thread.join()
        assert errors == []
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == (handler, signal.SIG_IGN)
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


@pytest.mark.parametrize("existed", [True, False])
def test_a_rename_that_fails_part_way_leaves_the_old_pair_whole(tmp_path, monkeypatch, existed):
    # An EPERM (an immutable or another user's file in a sticky directory) or any OSError on the second
    # rename left the new weights beside the old config: a pair that loaded nowhere, and nothing said so
    # (hunt 44-a A3). Either the old pair (or none, where there was none) or the new one, never half of each.
    import os

    import gpt.atomic
    from gpt.atomic import replace_files

    pairs = [(tmp_path / ".tmp-weights", tmp_path / "weights"), (tmp_path / ".tmp-config", tmp_path / "config")]
    for tmp, path in pairs:
        tmp.write_text("new")
        if existed:
            path.write_text("old")
    real_replace = os.replace

    def refused_for_the_config(src, dst):
        if dst == tmp_path / "config":
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(gpt.atomic.os, "replace", refused_for_the_config)
    with pytest.raises(OSError) as raised:
        replace_files(pairs)
    message = str(raised.value)
    assert "\n" not in message and "Operation not permitted" in message and "config" in message
    assert "as they were" in message
    left = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert left == ({"weights": "old", "config": "old", ".tmp-config": "new"} if existed else {".tmp-config": "new"})


def test_a_single_file_whose_rename_fails_gets_its_own_error(tmp_path, monkeypatch):
    # replace_file (a shard, alone) went through the pair's undoing too, and its error became "Permission denied
    # replacing x; x are as they were": a pair's words, of one file, with its name twice. Alone there is nothing
    # to put back, and the rename's own error says it (review, hunt 44-g G5)
    import os

    import gpt.atomic
    from gpt.atomic import replace_file

    (tmp_path / "x").write_text("old")
    (tmp_path / ".tmp-x").write_text("new")
    refused = PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(tmp_path / "x"))

    def refuse(src, dst):
        raise refused

    monkeypatch.setattr(gpt.atomic.os, "replace", refuse)
    with pytest.raises(PermissionError) as raised:
        replace_file(tmp_path / ".tmp-x", tmp_path / "x")
    assert raised.value is refused and raised.value.strerror == os.strerror(errno.EPERM)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {"x": "old", ".tmp-x": "new"}


def test_a_rename_that_fails_part_way_without_hard_links_says_the_pair_is_parted(tmp_path, monkeypatch):
    # (hunt 44-a A3) a filesystem without hard links keeps no second name to put the old file back by: the
    # error says so, rather than that the files are as they were
    import os

    import gpt.atomic
    from gpt.atomic import replace_files

    pairs = [(tmp_path / ".tmp-weights", tmp_path / "weights"), (tmp_path / ".tmp-config", tmp_path / "config")]
    for tmp, path in pairs:
        tmp.write_text("new")
        path.write_text("old")
    real_replace = os.replace

    def no_links(*args, **kwargs):
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))

    def refused_for_the_config(src, dst):
        if dst == tmp_path / "config":
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(gpt.atomic.os, "link", no_links)
    monkeypatch.setattr(gpt.atomic.os, "replace", refused_for_the_config)
    with pytest.raises(PermissionError, match="weights could not be put back: weights, config do not belong together"):
        replace_files(pairs)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {"weights": "new", "config": "old", ".tmp-config": "new"}


@pytest.mark.parametrize("first, second", [("SIGINT", "SIGTERM"), ("SIGTERM", "SIGINT")])
def test_of_two_signals_held_through_the_renames_the_first_decides_and_the_second_cuts_nothing(
        tmp_path, monkeypatch, first, second):
    # (hunt 44-a A1) Ctrl-C and a scheduler's SIGTERM both held: the first is raised as the hold ends (130 or
    # 143, the way out it names), the second is dropped, as ExitCallbacks and StopSignal drop any after the
    # first. Raised after it, it cut the cleanups that the first's way out runs (the lock, the temp files).
    import os
    import signal

    import gpt.atomic
    from gpt.atomic import replace_files
    from gpt.errors import Terminated, sigterm_raises

    pairs = [(tmp_path / ".tmp-a", tmp_path / "a"), (tmp_path / ".tmp-b", tmp_path / "b")]
    for tmp, _ in pairs:
        tmp.write_text("new")
    real_replace, cleaned = os.replace, []

    def both_signals_at_the_first_rename(src, dst):
        real_replace(src, dst)
        if dst.name == "a":
            signal.raise_signal(getattr(signal, first))
            signal.raise_signal(getattr(signal, second))

    monkeypatch.setattr(gpt.atomic.os, "replace", both_signals_at_the_first_rename)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as raised, sigterm_raises():
            try:
                replace_files(pairs)
            finally:
                for _ in range(1000):  # bytecodes enough for a pending handler to run
                    pass
                cleaned.append(True)
    finally:
        signal.signal(signal.SIGINT, before)
    assert (raised.type is Terminated) == (first == "SIGTERM") and cleaned == [True]
    assert [path.read_text() for _, path in pairs] == ["new", "new"]
