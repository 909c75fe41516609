import sys
from pathlib import Path

# Tests import the project the way the scripts do: from the repository root.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import os  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

# pytest-xdist's workers (the README's `-n 2`) share the machine's cores: each worker, and every
# process its tests start, gets its share of them as torch's threads (read when torch is first
# imported, after this file). Two workers on 2 cores, each with torch's default of 2 threads, ran
# the suite in 7 min 8 s; with one thread each, 6 min 15 s (serially: 10 min 59 s). A setting of
# the caller's own (.ci/gpu gives each worker 2) is kept.
if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    os.environ["OMP_NUM_THREADS"] = str(max(1, cores // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)))


def processes_end(pids, seconds: float) -> bool:
    """Whether every process `pids` names has ended within `seconds`, as /proc (Linux) says: gone, or
    a zombie no one has reaped yet. Not Process.is_alive, which says "alive" of a child that another
    thread (an executor's own) has reaped, with no exit code."""
    def running(pid) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + seconds
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(map(running, pids))


def tqdm_monitors() -> list:
    """The tqdm monitor threads running: tqdm's own and each subclass's (huggingface_hub's bars have one)."""
    import threading

    from tqdm._monitor import TMonitor

    return [t for t in threading.enumerate() if isinstance(t, TMonitor)]


@pytest.fixture
def no_tqdm_monitor():
    """None running as the test starts (the bars of other tests started them): a bar that starts one, of any
    class, then does (tqdm starts a new one for a class whose monitor has ended)."""
    for monitor in tqdm_monitors():
        monitor.exit()


@pytest.fixture
def fail_writes(monkeypatch):
    """fail_writes(errno.ENOSPC, keep=4096): from then on, gpt/atomic.py's writes land `keep`
    characters and then raise that error, as a full disk (ENOSPC) or a size limit (EFBIG) does."""
    import gpt.atomic

    def arm(code: int, keep: int) -> None:
        def failing_open(name, mode="r", **kwargs):
            f = open(name, mode, **kwargs)
            write = f.write

            def cut(text):
                write(text[:keep])
                raise OSError(code, os.strerror(code), str(name))

            f.write = cut
            return f

        monkeypatch.setattr(gpt.atomic, "open", failing_open, raising=False)

    return arm


@pytest.fixture
def draws_and_forwards(monkeypatch) -> list[str]:
    """From then on, the order in which training draws its micro-batches ("draw": TrainBatches.next_batch) and runs
    training forward passes ("train"), as a list that grows as they come: drawn as trained on, a step's memory does not
    grow with its accumulation (hunt 48-g G1, 49-b B2)."""
    from gpt.data import TrainBatches
    from gpt.model import GPT

    events, real_next, real_forward = [], TrainBatches.next_batch, GPT.forward

    def next_batch(self):
        events.append("draw")
        return real_next(self)

    def forward(self, *args, **kwargs):
        if self.training:
            events.append("train")
        return real_forward(self, *args, **kwargs)

    monkeypatch.setattr(TrainBatches, "next_batch", next_batch)
    monkeypatch.setattr(GPT, "forward", forward)
    return events


@pytest.fixture
def run_dir_held_elsewhere():
    """run_dir_held_elsewhere(out_dir) -> the process (Popen) that holds out_dir's run lock from then on, as
    a training run that has saved nothing yet does; it is ended when the test ends, or by the test."""
    import subprocess

    holders = []

    def hold(out_dir):
        holder = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]); "
                                   "from gpt.rundir import RunDirLock; RunDirLock(sys.argv[2]).acquire(); "
                                   "print('locked', flush=True); time.sleep(300)", str(ROOT), str(out_dir)],
                                  stdout=subprocess.PIPE, text=True)
        holders.append(holder)
        assert holder.stdout.readline().strip() == "locked"
        return holder

    yield hold
    for holder in holders:
        holder.kill()
        holder.wait()
        holder.stdout.close()


@pytest.fixture
def cuda_gpus(monkeypatch):
    """cuda_gpus({0: (7, 0), 1: (9, 0)}): from then on torch.cuda says the machine has CUDA GPUs of these
    compute capabilities by index, cuda:0 the current one (torch's bf16 check asks about that one)."""
    import types

    import torch

    def arm(capabilities: dict) -> None:
        def index(d=None):
            return 0 if d is None else d if isinstance(d, int) else torch.device(d).index or 0

        monkeypatch.setattr(torch.version, "hip", None)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: capabilities[index(d)])
        monkeypatch.setattr(torch.cuda, "get_device_properties",
                            lambda d=None: types.SimpleNamespace(major=capabilities[index(d)][0]))

    return arm


@pytest.fixture
def ctrl_c_at_import():
    """ctrl_c_at_import("train.py", "gpt.metrics", *argv): the script run as `python SCRIPT argv` in a
    fresh interpreter, with Ctrl-C (KeyboardInterrupt) raised where it imports that module, as a
    user's Ctrl-C during the seconds torch's imports take; with sigterm=True, SIGTERM sent to it
    there instead. Returns the CompletedProcess."""
    import subprocess

    def run(script: str, module: str, *argv: str, cwd=None, sigterm=False) -> subprocess.CompletedProcess:
        interrupt = "os.kill(os.getpid(), signal.SIGTERM)" if sigterm else "raise KeyboardInterrupt"
        code = f"""import builtins, os, runpy, signal, sys
real_import = builtins.__import__
def ctrl_c(name, *args, **kwargs):
    if name == {module!r}:
        {interrupt}
    return real_import(name, *args, **kwargs)
builtins.__import__ = ctrl_c
sys.argv, sys.path[0] = [{script!r}, *{list(argv)!r}], {str(ROOT)!r}
runpy.run_path({str(ROOT / script)!r}, run_name="__main__")
"""
        return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)

    return run


DEADLINE_SKIP = "not run: the stage's time was spent (PYTEST_DEADLINE)"


def pytest_configure(config):
    # A shell starts a background job (`pytest &`, `nohup`) with SIGINT ignored, which Python then keeps (it raises
    # no KeyboardInterrupt) and passes on to every process the tests start: the tests of Ctrl-C failed there, "DID
    # NOT RAISE KeyboardInterrupt" and runs that ended with 0, not 130 (hunt 50-t T1, 50-m). The suite delivers it.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    deadline = os.environ.get("PYTEST_DEADLINE")
    try:
        float(deadline or 0)
    except ValueError:
        raise pytest.UsageError(f"PYTEST_DEADLINE must be seconds since the epoch, got {deadline!r}") from None


def pytest_runtest_setup(item):
    """PYTEST_DEADLINE (seconds since the epoch), which .ci/gpu sets for its test stages: a test that
    would start past it is skipped, so a stage cut short by its time limit still ends with pytest's
    summary, naming the tests it did not run (an interrupted pytest-xdist run was killed before it
    printed one: 8 tests of the H100's `tests` stage went unnamed, 2026-11-26)."""
    deadline = os.environ.get("PYTEST_DEADLINE")
    if deadline and time.time() > float(deadline):
        pytest.skip(f"{DEADLINE_SKIP}: {item.nodeid}")  # (-rs groups skips by their reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """PYTEST_TIMES_DIR (a directory, which .ci/gpu sets for its test stages): each test leaves a file
    in its running/ while it runs, and its seconds in times.tsv when done, in whichever process runs it.
    A stage cut at its time limit ends pytest-xdist without its summary or --durations: those files
    still name the tests that were running then, and the time every finished one took (five tests
    of the H100's `tests` stage were cut unnamed, 2026-11-26)."""
    folder = os.environ.get("PYTEST_TIMES_DIR")
    if not folder:
        yield
        return
    running = Path(folder, "running")
    running.mkdir(parents=True, exist_ok=True)
    marker = running / f"{os.getpid()}-{time.monotonic_ns()}"
    marker.write_text(f"{item.nodeid} (started {time.strftime('%H:%M:%S')})\n")
    start = time.monotonic()
    outcome = yield
    if outcome.excinfo is None:  # an interrupted test keeps its marker: it did not finish
        with open(Path(folder, "times.tsv"), "a") as times:  # (a line per append: processes can share it)
            times.write(f"{time.monotonic() - start:.1f}\t{item.nodeid}\n")
        marker.unlink()


def pytest_sessionfinish(session, exitstatus):
    """A run with tests skipped for the deadline did not run them all: its status says so (2, as an
    interrupted run's), so the stage fails as a cut one did (review, 2026-11-26)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []  # (with xdist: every worker's, here)
    if exitstatus == 0 and any(DEADLINE_SKIP in str(report.longrepr) for report in skipped):
        session.exitstatus = pytest.ExitCode.INTERRUPTED
