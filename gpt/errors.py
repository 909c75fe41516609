"""The failures a user can cause or meet: bad options, unreadable files, a busy run directory, a
save that cannot be written. The scripts report these as one line and exit with `exit_status`;
any other exception is a bug and keeps its traceback (issue 10: a broad `except ValueError` in
train.py used to turn bugs into one-line messages too).

Each is raised where the problem is found, never inferred from a generic exception caught far
away. Classes that replace a built-in type keep it as a base (ConfigError is a ValueError), so
callers that caught the old type still do.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import functools
import importlib.metadata
import itertools
import os
import re
import shlex
import signal
import stat
import sys
import threading
import time
from collections.abc import Collection
from pathlib import Path


def one_line_on_ctrl_c(line: str, on_sigterm: str | None = None) -> None:
    """Ctrl-C or SIGTERM while a script still imports (torch's imports take seconds) prints `line`
    (`on_sigterm` for SIGTERM, where given) instead of a traceback, and the process ends by that
    signal, as it would without a handler (the shell's 130 / 143); any other exception keeps its
    traceback. Set before the imports; the script's main says the same line for each once it runs
    (data/prepare.py's SIGTERM said "interrupted" here and "terminated" there: hunt 34-c C6).
    (SIGTERM in those seconds ended the process without a word: hunt, session 24.)"""
    def excepthook(kind, e, tb):
        if not issubclass(kind, KeyboardInterrupt):
            if (refused := _refused_environment(e, tb)) is not None:  # (the interpreter's status: 1)
                print(f"{Path(sys.argv[0]).name}: error: {refused}", file=sys.stderr, flush=True)
                return None
            return sys.__excepthook__(kind, e, tb)
        if first_of_its_machine():
            print(on_sigterm if on_sigterm and issubclass(kind, Terminated) else line, file=sys.stderr, flush=True)
        if issubclass(kind, Terminated):  # (Python itself ends an uncaught KeyboardInterrupt by SIGINT)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)

    sys.excepthook = excepthook
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)  # main's sigterm_raises takes over, and puts this back


def _refused_environment(e: BaseException, tb) -> str | None:
    """A setting of the environment that torch refuses as it imports, as one line; None for anything
    else. TORCH_LOGS, which the README and the warnings name (TORCH_LOGS=cudagraphs,perf_hints), with a
    name mistyped was a ValueError traceback of 19 lines from `import torch`, --help included (hunt 35-f F8);
    so was a machine without a usable temporary directory (F6)."""
    import traceback

    frames = {frame.f_code.co_name for frame, _ in traceback.walk_tb(tb)}
    if isinstance(e, ValueError) and "_parse_log_settings" in frames:
        said = " ".join(str(e).split("Valid settings:")[0].split())
        return f"TORCH_LOGS={os.environ.get('TORCH_LOGS', '')}: {said}"
    if isinstance(e, ValueError) and (setting := _tqdm_setting(tb)) is not None:
        # tqdm reads its TQDM_* settings as it imports (torch imports it): one it cannot read as the number it
        # takes (TQDM_NCOLS=abc, TQDM_MININTERVAL=x) was a ValueError traceback of 22 lines, --help included,
        # which named no variable (hunt 35-f F9, hunt 42-c C1)
        return f"{setting}={os.environ.get(setting, '')}: tqdm cannot read it ({one_line(e)}): correct it or unset it"
    if isinstance(e, FileNotFoundError) and "_get_default_tempdir" in frames:
        # (torch imports dill where it is installed, which asks for the temporary directory as it imports:
        # TMPDIR, /tmp, /var/tmp and the current directory all unwritable or full, hunt 35-f F6)
        return ("no usable temporary directory (TMPDIR, /tmp, /var/tmp and the current directory are unwritable "
                "or full), which torch needs as it imports: set TMPDIR to a writable directory")
    return None


def _tqdm_setting(tb) -> str | None:
    """The TQDM_* variable whose value tqdm's envwrap (tqdm/utils.py, as tqdm imports) was converting
    where `tb` ends; None where it ends elsewhere."""
    import traceback

    for frame, _ in traceback.walk_tb(tb):
        code = frame.f_code
        if code.co_name == "wrap" and Path(code.co_filename).parent.name == "tqdm" and "k" in frame.f_locals:
            return f"TQDM_{frame.f_locals['k'].upper()}"
    return None


def unsearchable_directory(path: Path) -> tuple[Path, PermissionError] | None:
    """The first directory on `path`'s way (its parents from the top, then `path` itself looked up)
    that cannot be searched (no x permission: a look-up of any name in it is refused), with that
    refusal; None where every look-up succeeds or one fails otherwise (a name not there is said where
    it is used). The directory to name and `chmod +x`, not the name looked for, which may not exist
    (train.py's out_dir: review 37 R3; data/prepare.py's inputs: hunt 37-f F3)."""
    for step in (*reversed(path.parents), path)[1:]:  # (the root, or '.', is where every look-up starts)
        try:
            os.stat(step)
        except PermissionError as e:
            return step.parent, e
        except OSError:
            return None
    return None


def is_file_strictly(path: Path) -> bool:
    """Path.is_file(), which raised PermissionError for a name in a directory listed but not searchable
    (no x permission) before Python 3.14; 3.14 returns False there, and such files were left out of the
    data without a word (hunt 37-f F3), and a checkpoint that cannot be searched was taken for one that lost
    its files (hunt 50-c C2). The other errors are pathlib's False, as before."""
    return _is(path, stat.S_ISREG)


def is_dir_strictly(path: Path) -> bool:
    """Path.is_dir(), raising PermissionError as on Python 3.13 and before (see is_file_strictly)."""
    return _is(path, stat.S_ISDIR)


def _is(path: Path, kind) -> bool:
    try:
        return kind(os.stat(path).st_mode)
    except ValueError:  # (a NUL in the name)
        return False
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):  # (pathlib's False)
            return False
        raise


def unusable_path(path: str | Path) -> str | None:
    """Why `path` can name nothing here, whatever is there: a loop of symbolic links (Path.resolve()
    raises RuntimeError on it in Python 3.11 and 3.12), or a name longer than the filesystem takes
    (the existence checks raise OSError on it). Each was a traceback from the first check that met
    it, in train.py, sample.py and data/prepare.py (hunt 32-c F2, F12). None where it can."""
    try:
        Path(path).resolve()
        os.stat(path)
    except RuntimeError:
        return "a loop of symbolic links"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a loop of symbolic links"
        if e.errno == errno.ENAMETOOLONG:
            return f"{e.strerror.lower()} for the filesystem"
    except ValueError:  # ("embedded null byte": a preset's or a saved config's "\u0000", a traceback: hunt 43-e E3)
        return "holds a NUL character, which no path can"
    return None


def one_line(e: BaseException, limit: int | None = None) -> str:
    """An exception as "TypeName: its text" on one line, cut to `limit` characters of text: third-party
    errors end in lines of advice (inductor's), which made warnings and errors several lines (hunt 35-f F4)."""
    return f"{type(e).__name__}: {' '.join(str(e).split())[:limit]}"


def sizes_apart(*sizes: int) -> list[str]:
    """Byte counts for one message, in MiB with as few decimals (1 to 3) as tell unequal ones apart, else
    in bytes: "it needs about 3.0 MiB, 3.0 MiB are free" refused a save for a difference it did not show."""
    for decimals in (1, 2, 3):
        said = [f"{n / 2**20:,.{decimals}f} MiB" for n in sizes]
        if len(set(said)) == len(set(sizes)):
            return said
    return [f"{n:,} bytes" for n in sizes]


def world_size() -> int:
    """The number of processes of the job this one belongs to: torchrun's WORLD_SIZE, 1 without it.
    A value that is not a number (`export WORLD_SIZE=$N` with N unset) is one line, where int() of
    it was a ValueError traceback (hunt 34-a A7)."""
    value = os.environ.get("WORLD_SIZE", "1")
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"WORLD_SIZE={value!r} in the environment is not a number of processes: unset it, "
                         "or start the processes with torchrun") from None


def first_of_its_machine() -> bool:
    """Whether this process is its machine's first of a torchrun job (LOCAL_RANK 0), or alone. What
    every process of a machine meets alike (a signal to the job, a file that is not there) is said
    by it, once, rather than once a process (hunt, session 26); another machine may see other files. A
    LOCAL_RANK left in the environment of a process started alone silenced its missing files and its Ctrl-C,
    exit 1 or 130 with no word (hunt 37-d D4; first_of_the_job's RANK: review 34 R7)."""
    return not under_torchrun() or os.environ.get("LOCAL_RANK", "0") == "0"


def first_of_the_job() -> bool:
    """Whether this process is the first of a torchrun job (RANK 0), or alone: what every process
    meets alike (a bad option) is said by it, once. A RANK left in the environment of a process
    started alone silenced its bad options (review 34 R7)."""
    return not under_torchrun() or os.environ.get("RANK", "0") == "0"


# How long a process leaving an error to another process to say waits for it (wait_while_another_says_it)
ANOTHER_SAYS_IT_WAIT_S = 30.0


def wait_while_another_says_it(sayer_on_this_machine: bool = True) -> None:
    """Where a process of a torchrun job leaves an error every process meets alike to another (rank 0,
    or its machine's first) to say, it waits here, up to ANOTHER_SAYS_IT_WAIT_S, for torchrun to end
    it once that one has said it and ended. It left at once, as the job's first failure: torchrun then
    ended the others with SIGTERM, and the one to say it among them where it was slower (a loaded
    machine), so that no process said the error (issue 9's GPU machine: sample.py under torchrun).
    Only where the one to say it runs on this machine: torchrun ends a process when one of its own
    machine ends, and on the other nodes of a job the wait was 30 s of nothing (review 36 R5)."""
    if not under_torchrun() or not sayer_on_this_machine:
        return
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # torchrun's SIGTERM ends this process at once, quietly
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # and its SIGINT (Ctrl-C), where train.main drops signals
    time.sleep(ANOTHER_SAYS_IT_WAIT_S)


def on_rank_0s_machine() -> bool:
    """Whether this process runs on the machine of its job's rank 0 (torchrun's GROUP_RANK 0, its node),
    or alone."""
    return os.environ.get("GROUP_RANK", "0").strip() == "0"


def on_one_machine() -> bool:
    """Whether all of this process's job runs on this machine (torchrun's LOCAL_WORLD_SIZE is its
    WORLD_SIZE), or it is alone."""
    return os.environ.get("LOCAL_WORLD_SIZE", "1").strip() == os.environ.get("WORLD_SIZE", "1").strip()


def under_torchrun() -> bool:
    """Whether the environment says this process is one of several (a WORLD_SIZE of 2 or more);
    never raises, for the paths that report errors (`world_size` refuses a WORLD_SIZE that is no number)."""
    value = os.environ.get("WORLD_SIZE", "1").strip()
    return value.isdigit() and int(value) > 1


def out_of_memory(e: BaseException) -> bool:
    """An allocator that ran out: CUDA's torch.OutOfMemoryError, the CPU's and MPS's plain
    RuntimeError (recognised by its text), cuBLAS's (its handle and workspace, allocated outside torch's
    allocator at a process's first matmul: a plain RuntimeError, "CUDA error: CUBLAS_STATUS_ALLOC_FAILED
    when calling `cublasCreate(handle)`"; hunt 37-e), Python's MemoryError."""
    import torch  # (imported by then wherever this is called; not at this module's import)

    return isinstance(e, (MemoryError, torch.OutOfMemoryError)) or isinstance(e, RuntimeError) and any(
        s in str(e)
        for s in ("can't allocate memory", "not enough memory", "out of memory", "CUBLAS_STATUS_ALLOC_FAILED"))


@contextlib.contextmanager
def reported_oom(doing: str, hint: str):
    """Running out of memory while `doing` is one line with `hint`, not the allocator's traceback."""
    try:
        yield
    except (RuntimeError, MemoryError) as e:  # torch.OutOfMemoryError is a RuntimeError; check_fits raises MemoryError
        if not out_of_memory(e):
            raise
        said = (str(e).splitlines() or [type(e).__name__])[0]  # Python's own MemoryError has no message
        raise UsageError(f"out of memory {doing}: {said}; {hint}") from None


def lost_peer(e: BaseException) -> bool:
    """A collective that failed because another process of a torchrun job is gone (killed, crashed):
    gloo says so in a plain RuntimeError, recognised by its text. (NCCL waits for its watchdog;
    torchrun has stopped the job's other processes by then.)"""
    return isinstance(e, RuntimeError) and any(s in str(e) for s in ("Connection closed by peer",
                                                                      "Connection reset by peer"))


class UsageError(Exception):
    """Bad configuration, input or environment: one line, exit status 1, nothing written."""

    exit_status = 1


class WideText(UsageError):
    """Text in UTF-16 or UTF-32 where UTF-8 was expected (named by its byte order mark or its NULs): a whole
    file's or stream's encoding, not one line's."""


class ConfigError(UsageError, ValueError):
    """An option or preset that is unknown, mistyped or inconsistent."""


class UnreadableFile(UsageError, ValueError):
    """A file that cannot be used: truncated, corrupt, a refused pickle payload, bad JSON.
    The message names the file and the reason. damaged=False: reading it failed in the system (a
    permission, an I/O error, memory), not for what it holds: it may read again, so a resume must
    not set its checkpoint aside as broken (hunt 30-c F5)."""

    def __init__(self, path: str | Path, reason: str, damaged: bool = True):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason, self.damaged = Path(path), reason, damaged


class MissingFile(UsageError, FileNotFoundError):
    """A file, directory or checkpoint that is not where it was asked for."""


class DataRefused(UsageError):
    """Prepared data this run cannot use as asked (tokens of another tokenizer than --tokenizer, no
    answer token to evaluate). Like a file, it is a machine's: under torchrun, said by each machine's
    first process (another node may hold other data)."""


class ChangedBase(MissingFile):
    """A LoRA checkpoint's base model is gone, or no longer the weights its adapters were trained on."""


class HubUnreachable(UsageError, RuntimeError):
    """Pretrained weights named on the hub, neither cached nor downloadable (e.g. offline)."""


class MissingPackage(UsageError, RuntimeError):
    """A package the project needs is not installed, or its files fail their hash check."""


def install_hint(e: ImportError, package: str, module: str | None = None) -> str:
    """What to do after `import module` (default: the package's name) raised e: 'pip install package'
    where it is absent; where it is installed but does not import (a release made for a newer torch or
    NumPy than the one here, say), which release and why, since installing it again would not help."""
    module = module or package
    if isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] == module.split(".")[0]:
        return f"pip install {package}"
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        version = "(version unknown)"
    return (f"{package} {version} is installed but does not import here ({e}): install a release that fits "
            f"the torch and NumPy installed (README, 'Two commands')")


class NonFiniteLogits(UsageError, FloatingPointError):
    """The model produced NaN or inf logits: refused, never turned into a token."""


class Diverged(UsageError, FloatingPointError):
    """Training made the weights non-finite (a learning rate far too high, say): refused, never
    saved over a good checkpoint. Exit status 2, as for max_bad_steps non-finite steps in a row."""

    exit_status = 2


class LostPeer(UsageError):
    """Another process of the torchrun job stopped or failed, and this one lost contact with it in
    a collective: said by each process that met it (its own message, or torchrun's report, says why)."""


class RunDirBusy(UsageError):
    """Another training run holds the run directory's lock."""


class RunDirTaken(UsageError):
    """A run that does not continue the one already in its run directory (checkpoints, metrics)."""


class SaveError(UsageError):
    """A checkpoint could not be written (disk full, file too large, permission): the previous
    checkpoint is untouched and still the latest."""

    exit_status = 3


class PreparationInterrupted(UsageError):
    """Ctrl-C (or SIGTERM: `exit_status` 143) while train.py prepared its data: prepare() removed
    its temp build; status 130 (128 + SIGINT)."""

    exit_status = 130

    def __init__(self, message: str, exit_status: int = 130):
        super().__init__(message)
        self.exit_status = exit_status


class Terminated(KeyboardInterrupt):
    """SIGTERM (kill, timeout, docker stop, a scheduler's preemption) while `sigterm_raises` is in
    force: raised in the main thread, it takes Ctrl-C's way out (temp builds removed, the run
    directory's lock released, one line), with the shell's status 143 (128 + SIGTERM)."""

    exit_status = 143


class StoppedAtOnce(KeyboardInterrupt):
    """A second SIGINT or SIGTERM to a single-process run while a training step or an evaluation is under
    way (see gpt.runtime.StopSignal): the run stops there, unsaved, with the line `message` (what is on
    disk, how to go on) and the shell's status for that signal (128 + its number)."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_status = 128 + signum


def exit_status_of(e: BaseException | None) -> int:
    """The status train.main exits with where `e` ends a run (None: none did): a UsageError's own, 128 + the
    signal for Ctrl-C (130) or SIGTERM (Terminated: 143), 1 for a bug's traceback."""
    if e is None:
        return 0
    return getattr(e, "exit_status", 130 if isinstance(e, KeyboardInterrupt) else 1)


def _raise_terminated(signum, frame):
    raise Terminated


@contextlib.contextmanager
def sigterm_raises():
    """SIGTERM raises Terminated inside the block, as SIGINT raises KeyboardInterrupt, instead of
    killing the process before its cleanups run; the handler before it is put back on exit. Only
    the main thread can set handlers: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _dropped(signum, frame):
    pass


class ExitCallbacks(contextlib.ExitStack):
    """An ExitStack whose callbacks run whole once it closes (a run directory's lock, a LoRA base's mark,
    the process group): SIGINT and SIGTERM from then on are dropped, until the caller puts its handlers back
    (train.main, as it returns). The first signal, or the error, already decided how the process ends. Under
    torchrun a second one is the rule, not a user's impatience: the other processes, stopped by the same
    signal, leave first, and torchrun sends the slower one SIGTERM, which raised in its callbacks and cut
    them short: the lock and a LoRA base's mark were left behind by a run that saved nothing (hunt 36-b B6).
    (In training, StopSignal's handler drops them until its own callback, the last, restores the handlers.)"""

    def __exit__(self, *exc) -> bool:
        drop_signals()
        try:
            return super().__exit__(*exc)
        finally:
            drop_signals()  # (StopSignal's restore, the last callback, put the raising ones back)


def drop_signals() -> None:
    """SIGINT and SIGTERM dropped in silence (see ExitCallbacks); only the main thread sets handlers."""
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, _dropped)


@contextlib.contextmanager
def signals_blocked(*signals: signal.Signals):
    """Signals held back (pending) in this thread, and in the processes it forks until they unblock
    them, then delivered here; where the platform cannot (no pthread_sigmask), nothing is held."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


# Other trainers' and samplers' names for our options (nanoGPT's are ours; Hugging Face's, litgpt's, llama.cpp's...),
# which no likeness of spelling finds: --lr got no hint, --grad_accum was offered --grad_clip, another knob that
# takes a number as well, and --max_steps --max_bad_steps first (hunt 52-c C4). Offered where the script has ours.
OTHER_NAMES = {"lr": "learning_rate", "max_steps": "max_iters", "steps": "max_iters", "num_steps": "max_iters",
               "warmup_steps": "warmup_iters", "grad_accum": "gradient_accumulation_steps",
               "gradient_accumulation": "gradient_accumulation_steps",
               "accumulation_steps": "gradient_accumulation_steps",
               "seq_len": "block_size", "max_seq_len": "block_size", "context_length": "block_size",
               "d_model": "n_embd", "hidden_size": "n_embd", "wd": "weight_decay", "eval_every": "eval_interval",
               "save_every": "eval_interval", "log_every": "log_interval",
               "model": "init_from", "prompt": "start", "checkpoint": "ckpt", "n_predict": "max_new_tokens"}
# ... and train.py's alone: sample.py, which has --init_from too, refuses --init_from=resume ("'resume' is neither a
# directory nor one of gpt2, ...") and was offered it for --resume (hunt 52-z Z1)
TRAIN_OTHER_NAMES = {**OTHER_NAMES, "resume": "init_from=resume"}


def did_you_mean(key: str, valid: list[str], n: int = 3, other_names: dict[str, str] = OTHER_NAMES) -> str:
    """' (did you mean --a, --b?)' for an unknown option, or ''. Options it begins are named first:
    difflib alone offered --stream for --temp (audit, 2026-11-26). Compared without case: --N_LAYER and
    --Learning_Rate got no hint, difflib's ratio being case-sensitive (hunt 43-e E4). Another trainer's name for
    one of `valid` (`other_names`: OTHER_NAMES, or train.py's TRAIN_OTHER_NAMES) comes before all."""
    folded = {v.lower(): v for v in valid}
    typed = key.lower()
    ours = other_names.get(typed.replace("-", "_"), "")
    close = [ours] if ours.partition("=")[0] in valid else []
    close += [v for v in valid if v.lower().startswith(typed) and v not in close][:n] if len(key) >= 3 else []
    close += [folded[c] for c in difflib.get_close_matches(typed, list(folded), n=n)
              if folded[c] not in close][:n - len(close)]
    return f" (did you mean {', '.join('--' + c for c in close[:n])}?)" if close else ""


def typed_value(argv: list[str], key: str) -> str | None:
    """Option `key`'s value as typed in `argv` (the arguments after the script's name), read as train.py's
    parse_args reads it, for the moments before the options are parsed (or where they could not be): --key=value
    or --key value, hyphens for underscores (--out-dir), the last one where it is typed twice; None where it is not
    typed, or typed with no value (last, or before another --option: parse_args refuses both). Free of imports:
    train.py reads it before its own (torch's take seconds)."""
    value, i = None, 0
    while i < len(argv):
        name, eq, given = argv[i][2:].partition("=") if argv[i].startswith("--") else ("", "", "")
        spaced = bool(name) and not eq and i + 1 < len(argv) and not argv[i + 1].startswith("--")  # --key value
        if name.replace("-", "_") == key:
            value = given if eq else argv[i + 1] if spaced else None
        i += 2 if spaced else 1
    return value


def unquoted_value(argv: list[str], i: int, text: Collection[str] = ()) -> str | None:
    """Where argv[i], no option, is the rest of the value of the `--key=value` (or `--key value`) before it
    (`--start=To be`: the shell's two arguments), what to say of it: the quoted form. "options are --key=value" said
    nothing of the quotes (hunt 50-f F2). None where it is no such rest: where the value with the words joined to it
    makes no sense for that option, neither one of `text` (the options whose value is any text, a name to be made)
    nor a path that is there. `train.py --init_from=resume out` (--out_dir=out meant) was advised
    --init_from='resume out', and --n_layer=2 4, --n_layer='2 4' (hunt 51-r R2)."""
    option, eq, value = argv[i - 1].partition("=") if i else ("", "", "")
    typed = argv[i - 1] if i else ""
    # (`--start To be`, the value after a space, as the scripts take it too: it was "unexpected argument 'be': options
    # are --key=value", no word of quoting: hunt 52-c C8)
    if not eq and i >= 2 and argv[i - 2].startswith("--") and "=" not in argv[i - 2] and not typed.startswith("-"):
        option, eq, value, typed = argv[i - 2], " ", typed, f"{argv[i - 2]} {typed}"
    # (a word that begins with "-" is an option, not a value's rest: `--out_dir=x -n 3` was told "must be quoted:
    # --out_dir=x", the very words typed, as the rest is taken up to the next option: hunt 51-r R6)
    if not (option.startswith("--") and eq) or argv[i].startswith("-"):
        return None
    # ... but past the first, "-5" or "-" is a word of the value, only "--key" or "-n" an option: `--start=The answer
    # is -5 degrees` was advised --start='The answer is', losing the rest (hunt 51-v V5)
    words = list(itertools.takewhile(lambda a: not re.match(r"--|-[^\W\d]", a), argv[i:]))
    # (`--start= To be`, a space typed after "=": the value is the words, not " To be" with the space the shell took)
    joined = " ".join([value, *words] if value else words)
    if option[2:].replace("-", "_") not in text and not os.path.lexists(os.path.expanduser(joined)):
        return None
    return (f"unexpected argument {argv[i]!r} after {typed}: a value with spaces must be quoted: "
            f"{option}={shlex.quote(joined)}")


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, `PROG: error: MESSAGE`, with status 1, as every bad value
    of train.py's: not argparse's usage block and status 2 (hunt 29-c; the data scripts kept them
    until hunt 32-c F13). Options are not taken by a prefix: data/prepare.py read --val_fractio as
    --val_fraction, and a later option sharing a prefix would change what an old command means."""

    def __init__(self, *args, names_to_make: Collection[str] = (), **kwargs):
        """names_to_make: the options whose value is any name (unquoted_value's `text`)."""
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.names_to_make = names_to_make

    def error(self, message: str):
        raise SystemExit(f"{self.prog}: error: {message}")

    def parse_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            self.error(self.not_taken(unknown, args))
        return parsed

    def not_taken(self, unknown: list[str], argv: list[str] = ()) -> str:
        """What parse_known_args left, said as train.py and sample.py say an unknown option, with the
        options it is close to: the data scripts and bench.py said argparse's 'unrecognized arguments:
        --val-fraction=0.1', naming none (hunt 48-g G2). Words that are no --option keep argparse's, but for
        the rest of an unquoted value in `argv` (the arguments parsed), said as train.py and sample.py say it:
        data/prepare.py --input=my notes.txt was 'unrecognized arguments: notes.txt' (hunt 52-c C5)."""
        if not unknown[0].startswith("--") or unknown[0] == "--":
            i = argv.index(unknown[0]) if unknown[0] in argv else 0
            return (unquoted_value(argv, i, self.names_to_make)
                    or f"unrecognized arguments: {' '.join(unknown)}")
        key = unknown[0][2:].split("=", 1)[0]
        valid = [o[2:] for o in self._option_string_actions if o.startswith("--")]
        return f"unknown option --{key}{did_you_mean(key, valid)}; see python {self.prog} --help"

    def fail(self, message, status: int = 1) -> int:
        """A failure past the command line (bad input, a full disk), said as the parser's own errors are, `PROG:
        error: MESSAGE` on stderr, as train.py, sample.py and bench.py say theirs; returns the exit status. The data
        scripts said `error: MESSAGE`, with no name, where their command-line errors had it (hunt 44-c C6)."""
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        return status

    def _parse_known_args(self, arg_strings, *args, **kwargs):
        self._arg_strings = arg_strings  # (for _match_argument's message)
        return super()._parse_known_args(arg_strings, *args, **kwargs)

    def _match_argument(self, action, arg_strings_pattern):
        # `--stop ---` (a markdown rule) or `--start -x`: a value that begins with "-" is taken for an option, and
        # argparse's "argument --stop: expected at least one argument" said nothing of the way to give it (hunt 52-c
        # C6). Not where the word is one of the options: `--start --json` wants a value before it; nor one mistyped
        # (`--start --temp=0.5` was advised --start=--temp=0.5, --temperature meant: hunt 52-z Z2).
        try:
            return super()._match_argument(action, arg_strings_pattern)
        except argparse.ArgumentError as e:
            words = getattr(self, "_arg_strings", [])
            options = [o[2:] for o in self._option_string_actions if o.startswith("--")]
            after = [w for typed, w in zip(words, words[1:]) if typed in action.option_strings
                     and w.startswith("-") and w.split("=", 1)[0] not in self._option_string_actions
                     and not (w.startswith("--") and did_you_mean(w[2:].split("=", 1)[0], options))]
            if not after:
                raise
            raise argparse.ArgumentError(action, f"{e.message} (a value that begins with \"-\" is typed after \"=\": "
                                                 f"{action.option_strings[-1]}={shlex.quote(after[0])})") from None

    def _get_values(self, action, arg_strings):
        # --key=--: "--" is the value. Python 3.11's argparse takes it for the end of options and hands
        # the option [], neither converted nor checked: sample.py --start=-- and data/prepare.py
        # --out_dir=-- were tracebacks, sample.py --stop=-- dropped its stop string without a word,
        # --seed=-- skipped its type (hunt 34-a A1). (`--key --` still ends the options: a missing value.)
        if action.option_strings and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value if action.nargs in (None, argparse.OPTIONAL) else [value]
        return super()._get_values(action, arg_strings)


class StdoutFailed(UsageError):
    """CheckedStdout's `stop`: the product could not be written. Its caller's to say: train.main run by
    bench.py, on bench.py's stdout, said it as train.py's, and bench.py then blamed train.py's status."""


class CheckedStdout:
    """sys.stdout while a script runs. A write or flush that fails (a full disk or quota: `> /dev/full`;
    an I/O error; a reader gone: `| head`) was a traceback, which lost the work under way: a run's
    steps since its checkpoint, a preparation nearly done (hunt 33-a F4). Where the output is a log
    of the work (train.py, the data scripts: `stop` None), the failure is said once on stderr, the
    rest of the output goes nowhere, and the work goes on; `exit_status` then makes its 0 a 1 (not
    for a reader gone, which is the reader's choice); and a log is flushed at the end of each line.
    Where the output is the product (sample.py's samples), `stop` names it and the failure is
    UsageError, at once; a reader gone stays BrokenPipeError, for the script to end quietly. The
    product goes out a write at a time, whole (see _write_whole)."""

    def __init__(self, stream, script: str, stop: str | None = None):
        self._stream, self._script, self._stop = stream, script, stop
        self.failed: OSError | None = None
        self._encoder = None  # (the product's, made at its first write to the descriptor: see _encoded)

    def write(self, text: str) -> int:
        if self._stop is not None:
            return self._write_whole(text)
        written = self._write(text)
        if self._stop is None and "\n" in text:
            # A log goes out line by line: block-buffered (`> log 2>&1`, `| tee`, a batch job's output, without
            # PYTHONUNBUFFERED), its lines came minutes late, and out of order with stderr's: the progress bar's
            # closing newline came after train.py's error line, which was then written onto the bar (hunt 38-e E1)
            self.flush()
        return written

    def _write(self, text: str) -> int:
        if self.failed:
            return len(text)
        try:
            return self._guarded(self._stream.write, text)
        except UnicodeEncodeError:
            # A stdout whose encoding lacks a character of the line (PYTHONIOENCODING=ascii or latin-1, a
            # Latin-1 locale: an --out_dir "run é"; any strict encoding, PYTHONIOENCODING=utf-8 too: a file
            # name that is not UTF-8, held as surrogates) was a traceback after the shards were written, or
            # before the run's first step (hunt 35-f F1). Such characters are written as Python writes them
            # on stderr, \xe9 / \udcff; the rest of the line is unchanged. (The text encodes as a whole before
            # any of it is written, so nothing is written twice.)
            encoding = getattr(self._stream, "encoding", None) or "utf-8"
            text = text.encode(encoding, "backslashreplace").decode(encoding, "replace")
            return self._guarded(self._stream.write, text)

    def _write_whole(self, text: str) -> int:
        """The product's write, all of it on stdout before the call returns, with Ctrl-C and SIGTERM held back
        until it is out. A signal while a write waits for a slow reader (a full pipe) cut it: sample.py's second
        signal stopped at once there, and its reader got half a --json record; and Python's buffered stdout,
        interrupted after writing part of its buffer, drops the rest even where the handler only notes the
        signal (CPython 3.11-3.13): one SIGTERM there lost the end of a record and ran the next into it (hunt
        51-s S1). So the bytes go to the descriptor here, until all are written. Blocked, not
        gpt.atomic.python_signals_held: swapping two handlers cost some 50 us a write, a streamed token's."""
        with signals_blocked(signal.SIGINT, signal.SIGTERM):
            fd = self._descriptor()
            if fd is None:  # a stream of Python's own (a test's capture), or not POSIX
                written = self._write(text)
                self.flush()
                return written
            self.flush()  # (what the stream holds goes first)
            self._guarded(_write_all, fd, self._encoded(text, fd))
            return len(text)

    def _encoded(self, text: str, fd: int) -> bytes:
        """text's bytes as the stream would write them: one encoder for all the writes, as the stream has, where
        each write encoded on its own began with a byte order mark under utf-8-sig or utf-16 (PYTHONIOENCODING;
        a U+FEFF before each sample and streamed token: hunt 52-r R1); and none after text already there, as
        the stream does (`>>`)."""
        import codecs

        if self._encoder is None:
            encoding = getattr(self._stream, "encoding", None) or "utf-8"
            self._encoder = codecs.getincrementalencoder(encoding)(getattr(self._stream, "errors", None) or "strict")
            with contextlib.suppress(OSError):  # (a pipe or a terminal has no position)
                if os.lseek(fd, 0, os.SEEK_CUR):
                    self._encoder.setstate(0)
        state, errors = self._encoder.getstate(), self._encoder.errors
        try:
            return self._encoder.encode(text)
        except UnicodeEncodeError:  # as _write writes it
            self._encoder.setstate(state)
            self._encoder.errors = "backslashreplace"
            try:
                return self._encoder.encode(text)
            finally:
                self._encoder.errors = errors

    def _descriptor(self) -> int | None:
        if os.name != "posix":  # (a Windows console or a text-mode stdout: its own newlines and encoding)
            return None
        try:
            return self._stream.fileno()
        except (AttributeError, OSError, ValueError):  # (io.UnsupportedOperation is both)
            return None

    def flush(self) -> None:
        if not self.failed:
            self._guarded(self._stream.flush)

    def exit_status(self, status: int) -> int:
        return 1 if status == 0 and self.failed and not isinstance(self.failed, BrokenPipeError) else status

    def _guarded(self, call, *args):
        try:
            return call(*args)
        except OSError as e:
            if self._stream is sys.__stdout__:  # what it still buffers would fail again at exit, a second report
                _to_devnull(self._stream)  # (or, for a reader gone, "Exception ignored" and status 120)
            if self._stop and isinstance(e, BrokenPipeError):
                raise
            if self._stop:
                raise StdoutFailed(f"writing {self._stop} to stdout failed: {e.strerror or e}") from None
            self.failed = e
            if not isinstance(e, BrokenPipeError):
                try:  # (stderr on the same full disk, `> log 2>&1`: the note itself raised, and the run was
                    # lost as before: review 33)
                    print(f"{self._script}: error: writing to stdout failed: {e.strerror or e}; the rest of its "
                          "output is dropped, and the work goes on", file=sys.stderr, flush=True)
                except (OSError, ValueError):  # (ValueError: a closed stderr)
                    if sys.stderr is sys.__stderr__ and sys.stderr is not None:
                        _to_devnull(sys.stderr)
            return len(args[0]) if args else None

    def __getattr__(self, name):  # isatty, encoding, fileno, ...
        return getattr(self._stream, name)


class ProgressStream:
    """A stream for a progress bar (data/prepare.py's, on stderr): a write that fails turns the bar
    off, without a word, where it stopped the preparation and was blamed on the output directory
    (review 33b Q7): a bar is no reason to stop the work."""

    def __init__(self, stream):
        self._stream, self._off = stream, False

    def write(self, text: str) -> int:
        if not self._off:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):  # (ValueError: a closed stream)
                self._off = True
        return len(text)

    def flush(self) -> None:
        if not self._off:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._off = True

    def __getattr__(self, name):  # isatty, encoding, fileno, ...
        return getattr(self._stream, name)


def _write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written (a write interrupted by a signal writes part of them)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _to_devnull(stream) -> None:
    """Point the descriptor under `stream` at /dev/null: what it still buffers would fail again at
    the interpreter's exit ("Exception ignored", status 120)."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)


def stdout_checked(script: str):
    """A script's main(), with sys.stdout a CheckedStdout of a log while it runs. The output is
    flushed before the status is decided: a buffered last line (stdout to a file or pipe) failed only
    at the interpreter's exit, status 120 (review 33). A stdout already checked (train.main run by
    bench.py) keeps its caller's rule."""
    def decorate(main):
        @functools.wraps(main)
        def checked_main(*args, **kwargs) -> int:
            saved = sys.stdout
            if saved is None or isinstance(saved, CheckedStdout):  # (None: a closed descriptor 1)
                return main(*args, **kwargs)
            sys.stdout = checked = CheckedStdout(saved, script)
            try:
                try:
                    status = main(*args, **kwargs)
                except SystemExit as e:  # argparse's --help: a 0 after a failed write is a 1
                    if e.code in (0, None):
                        checked.flush()
                        if checked.exit_status(0):
                            raise SystemExit(1) from None
                    raise
                checked.flush()
                return checked.exit_status(status)
            finally:
                sys.stdout = saved
        return checked_main
    return decorate


class ReportedByRank0(UsageError):
    """On the other ranks of a torchrun job: rank 0 (or the one rank that met it, as a node without
    the data) met `exit_status` and printed why."""

    def __init__(self, exit_status: int):
        super().__init__("")
        self.exit_status = exit_status
