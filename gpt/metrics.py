"""Training metrics: metrics.jsonl (one JSON record per logged step or evaluation), optional
Weights & Biases / TensorBoard when asked for and installed, and loss.png, the curve, redrawn at
an evaluation at most every REDRAW_EVERY_S seconds, and at the end (issue 10: users would rather
look at it than read the JSON)."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import time
import typing
from pathlib import Path

from gpt.atomic import write_text_atomic
from gpt.checkpoint import write_failed
from gpt.errors import UsageError, one_line

# Drawing loss.png takes ~0.23 s on one core (a 2-core VM, ~700 records or 60 alike): at each of the
# GPU default's 15 evaluations of a 90 s run (one every ~3.5 s on an H100) that was ~3.5 s of its
# budget, a fourteenth of its training steps' time (issue 9's seventh GPU session: 48.0 s of steps,
# 7.9 s in evaluations with their checkpoints and plots). Every 30 s or more keeps the picture fresh
# for a watcher; a long run draws as often as before (the CPU default evaluates every ~80 s), bar
# its first evaluation's drawing. A budgeted run's plan times the step-0 evaluation, which now
# draws nothing: the drawings after it, one per 30 s at most (under 1% of a run), are left to the
# second looks' 1% slack (train.py).
REDRAW_EVERY_S = 30.0
# and at most this share of the loop's time: a drawing reads all of metrics.jsonl back, so its cost grows with
# the run (1.7 s at 50,000 records, 7 s at 200,000 on the 2-core VM under load, hunt 39-b B1), and every 30 s
# that was 6% and 23% of the training time; the next drawing waits 1/REDRAW_SHARE times the last one's seconds
REDRAW_SHARE = 0.01
# The values of a record that are numbers (or null): plot_losses computes with them
NUMBERS = ("loss", "val_loss", "val_bpb", "tokens_seen")
PLOTTED = ("step", *NUMBERS)  # what plot_losses reads of a record
# Points drawn per curve at most: loss.png is 1,100 pixels wide, so more are not seen, only paid for.
# Every point drawn made a redraw's cost grow with the run: 1.3 s at 1,000 records, 4.6 s at 50,000,
# 12 s at 200,000 (2-core VM under load), in the training loop every 30 s (hunt 39-b B1).
PLOT_POINTS = 2_000


class Metrics:
    def __init__(self, out_dir: Path, enabled: bool, resume_step: int | None = None,
                 wandb_project: str = "", tensorboard: bool = False, config: dict | None = None,
                 redraw_every_s: float = REDRAW_EVERY_S):
        self.enabled = enabled
        # loss.png is redrawn at an evaluation once this long has passed since it was last drawn (or
        # since this object was made, just before the training loop: not at its first evaluation), or
        # longer where a drawing is slow (REDRAW_SHARE); 0: at every evaluation, whatever it costs
        self.redraw_every_s = redraw_every_s
        self._drawn_at = time.monotonic()
        self._drawing_s = 0.0  # the last drawing's
        self._drawn_all = False  # loss.png shows every record logged (close() need not draw it again)
        self._closed = False
        self.path = out_dir / "metrics.jsonl"
        self.notes: list[str] = []
        # A tracker's warning mid-run (_tracker_lost): train.py sets its own writer, which clears the progress bar
        # first and outlives a closed stderr
        self.warn = lambda text: print(text, file=sys.stderr)
        self._wandb = self._tb = None
        self.plot_note: str | None = None
        self.unreadable_lines = 0  # lines of metrics.jsonl that records() skipped (warned about once)
        # an append of this run's failed (the file closed, self.failure kept): the line it may have cut short is said by
        # the run's status-3 line, not again by a warning at the closing plot (hunt 52-m M4)
        self._append_failed = False
        # A write that failed (a full disk, a permission): kept, not raised here, since only rank 0
        # writes and every rank must stop alike; train.py raises it through on_rank0 (check()).
        self.failure: Exception | None = None
        self._file = None
        if not enabled:
            return
        # Imported now (~0.5 s), not at the first evaluation, whose time a time budget's plan uses; and
        # before the log is touched, so that Ctrl-C during the import leaves metrics.jsonl as it was.
        pyplot()
        if wandb_project:
            try:
                import wandb
            except ImportError:
                self.notes.append("wandb_project is set but wandb is not installed (pip install wandb): not logging there")
            else:
                # wandb.init raises its own errors (no API key: UsageError; no network: CommError after its
                # 90 s init_timeout): they were tracebacks, status 1, before the first step (hunt 35-e E1).
                # Kept as self.failure, raised on every rank through train.py's on_rank0 (check()).
                try:
                    self._wandb = wandb.init(project=wandb_project, config=config, dir=str(out_dir))
                except Exception as e:
                    self.failure = self.failure or UsageError(
                        f"--wandb_project={wandb_project}: wandb could not start a run ({one_line(e)}); log in (wandb login, or WANDB_API_KEY), run without the "
                        "network with WANDB_MODE=offline, or leave --wandb_project out")
        # (not after a W&B that could not start: its out_dir/tb events file kept a run that stops before writing
        # from removing its out_dir, as an empty metrics.jsonl did: hunt 41-d D1)
        if tensorboard and self.failure is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                self.notes.append("tensorboard is set but not installed (pip install tensorboard): not logging there")
            else:
                try:
                    # the events of out_dir/tb's earlier files from this step on are hidden (TensorBoard's purge), as
                    # metrics.jsonl drops its records past the checkpoint resumed: TensorBoard's Python loader showed
                    # them beside the redone steps' (killed at step 231, resumed from 200: 431 points of loss for 400
                    # steps), and a diverged run's beside those of the run started over in its place (1.4e11 beside
                    # 5.33 at step 3); its Rust loader keeps a step's newer value (hunt 41-c C1)
                    self._tb = SummaryWriter(str(out_dir / "tb"), purge_step=0 if resume_step is None else resume_step + 1)
                except OSError as e:  # (out_dir/tb unwritable: a traceback before, as wandb's errors: hunt 35-e E1)
                    self.failure = self.failure or write_failed(out_dir / "tb", e)
        # The log is touched once the trackers have started: one that could not (no API key, an invalid project
        # name: status 1) left a new run's empty metrics.jsonl, which kept out_dir from being removed as a run
        # that failed before writing is, and a resumed run's cut to its checkpoint (hunt 41-c C4)
        if self.failure is not None:
            return
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            if resume_step is None:
                self.path.unlink(missing_ok=True)
            else:  # drop records written after the checkpoint we resume from: they are about to be redone
                # (and a torn last line, which records() skips: the next record starts on a line of its own)
                kept = [r for r in self.records() if r["step"] <= resume_step]
                write_text_atomic(self.path, "".join(json.dumps(r) + "\n" for r in kept))
            self._file = open(self.path, "a")
        except OSError as e:
            self.failure = write_failed(self.path, e)

    def records(self) -> list[dict]:
        """The records of metrics.jsonl. A line that is not a JSON record with a step, or whose values
        (NUMBERS) are not numbers, is skipped and counted, with one warning: what a write cut short
        leaves (a full disk, a host crash; the file is not fsynced), or a damaged or hand-edited line,
        which must not stop a resume or the plot (a resume rewrites the file without them)."""
        return list(self.each_record())

    def each_record(self) -> typing.Iterator[dict]:
        """records() one at a time, read from the file as they are taken (its skipped lines warned about
        once all are taken)."""
        if not self.path.exists():
            return
        bad = 0
        # (bytes that are not UTF-8, a torn write's or a disk's, are such a line: a traceback at a resume, review 33b)
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    record = None
                # (a value the plot reads that is not a number, a damaged or hand-edited line's, was a
                # traceback at the closing plot, after the run had finished: hunt 34-b B1)
                if isinstance(record, dict) and isinstance(record.get("step"), int) and all(
                        record.get(k) is None or isinstance(record[k], (int, float)) and not isinstance(record[k], bool)
                        for k in NUMBERS):
                    yield record
                else:
                    bad += 1
        if bad and not self.unreadable_lines and not self._append_failed:
            print(f"warning: {self.path}: skipped {bad} line(s) that are not a JSON record with a step and numbers "
                  f"for {', '.join(NUMBERS)} (a write cut short, e.g. by a full disk or a crash, or a damaged or "
                  "hand-edited line)", file=sys.stderr)
        self.unreadable_lines = max(self.unreadable_lines, bad)

    def reopen(self) -> None:
        """Go on appending to metrics.jsonl by its name: out_dir was made anew (RunDirLock.reclaim), and
        the open file had gone with the old one."""
        if self._file is None:  # (not rank 0, or a write failed: check() reports it)
            return
        with contextlib.suppress(OSError):
            self._file.close()
        try:
            self._file = open(self.path, "a")
        except OSError as e:
            self._file, self.failure = None, write_failed(self.path, e)

    def check(self) -> None:
        """Raise the SaveError (status 3) of a write that failed, if one did."""
        if self.failure is not None:
            raise self.failure

    def log(self, record: dict) -> None:
        if self._file is None:  # not rank 0, or a write failed (check() reports it)
            return
        try:  # on a filling disk this append is what meets ENOSPC first (every log_interval steps)
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()
            self._drawn_all = False
        except OSError as e:
            self.failure = write_failed(self.path, e)
            with contextlib.suppress(OSError):  # closing flushes the buffer again, which fails the same way
                self._file.close()
            self._file, self._append_failed = None, True
            return
        wait_s = max(self.redraw_every_s, self._drawing_s / REDRAW_SHARE) if self.redraw_every_s else 0.0
        if "val_loss" in record and time.monotonic() - self._drawn_at >= wait_s:  # refresh the picture
            # through _plot_records' guard: a metrics.jsonl that cannot be read back (a directory in its
            # place, EIO) was a traceback at an evaluation, before its checkpoint (hunt 35-d D1)
            drawing = time.monotonic()
            self.plot_note = _plot_records(self, self.path.with_name("loss.png"))
            self._drawn_at, self._drawn_all = time.monotonic(), self.plot_note is None
            self._drawing_s = self._drawn_at - drawing
        numbers = {k: v for k, v in record.items() if isinstance(v, (int, float)) and k != "step"}
        if self._wandb is not None:
            try:
                self._wandb.log(numbers, step=record["step"])
            except OSError as e:
                self._wandb = None
                self._tracker_lost("W&B", e, step=record["step"])
        if self._tb is not None:
            try:
                for k, v in numbers.items():
                    self._tb.add_scalar(k, v, record["step"])
            except OSError as e:
                self._tb = None
                self._tracker_lost("TensorBoard", e, step=record["step"])

    def update_config(self, config: dict, step: int) -> None:
        """The run's config changed at `step`: a budgeted run's step count (--max_iters=0), fixed after its warmup
        and maybe cut later, with its schedule's end. W&B kept max_iters 0 where config.json has the count
        (hunt 42-a A4); it gets the whole config, replacing its values. Called at the plan and at each cut, at most
        once a log interval, as log() sends its record: no copy of W&B's config is kept to send only the changed
        values (hunt 42-d N6, hunt 43-a A2). (TensorBoard records no config.)"""
        if self._wandb is None:
            return
        try:
            self._wandb.config.update(config, allow_val_change=True)
        except OSError as e:  # (W&B's service gone: as in log)
            self._wandb = None
            self._tracker_lost("W&B", e, step=step)

    def _tracker_lost(self, name: str, e: OSError, step: int | None = None) -> None:
        """A tracker that raised is left for the rest of the run, with one warning: W&B's service process gone
        (ConnectionResetError), TensorBoard's writer thread's error (a full disk: OSError, raised again at every
        call), raised out of log() in the training loop, were a traceback, status 1, the steps since the last
        checkpoint lost (rank 0 alone: the others said "lost contact"). A dashboard is a copy of metrics.jsonl,
        which has every record: the run goes on (hunt 41-c C2)."""
        when = "at its close" if step is None else f"at step {step}"
        going_on = "" if step is None else "; the run goes on without it"
        self.warn(f"warning: {name} logging stopped {when}: {one_line(e)}{going_on} ({self.path} has every record)")

    def close(self, exit_status: int = 0) -> str | None:
        """Close the logs and draw loss.png (unless the last evaluation just drew every record); returns
        a note when the plot was skipped. Only the first call does anything: train.py also calls it on
        the way out of a run that stops on an error (a failed save, out of memory), whose last
        evaluations may not have been drawn. exit_status: the run's (train.py's), which W&B's run ends
        with: 0 is "finished" there, any other "failed" (a stop by a signal, 130/143, included)."""
        if not self.enabled or self._closed:
            return None
        self._closed = True
        if self._file is not None:
            self._file.close()
        if self._wandb is not None:
            try:
                self._wandb.finish(exit_code=exit_status)
            except OSError as e:
                self._tracker_lost("W&B", e)
        if self._tb is not None:
            try:
                self._tb.close()
            except OSError as e:
                self._tracker_lost("TensorBoard", e)
        png = self.path.with_name("loss.png")
        if self._drawn_all and png.exists():
            return None
        return _plot_records(self, png)


def draw_if_stale(out_dir: Path, upto: int | None = None) -> str | None:
    """Draw loss.png again where it is missing or older than metrics.jsonl (a run killed after its
    last checkpoint, before its closing plot, is resumed as finished: hunt 31-c F3); returns a note
    when the plot was skipped, as Metrics.close() does. `upto`: the finished run's step, past which
    records are of training no checkpoint holds (a continuation killed before its first save: its steps,
    drawn, went on past the "already finished: step 8" said with them, hunt 52-m M3)."""
    log, png = out_dir / "metrics.jsonl", out_dir / "loss.png"
    # (a picture dated in the future, a clock set back since or files copied from a machine ahead of this one,
    # is not known to be newer than the log: it was kept stale for good, hunt 35-d D5)
    if not log.exists() or png.exists() and log.stat().st_mtime_ns <= png.stat().st_mtime_ns <= time.time_ns():
        return None
    return _plot_records(Metrics(out_dir, enabled=False), png, upto)


def _plot_records(metrics: Metrics, png: Path, upto: int | None = None) -> str | None:
    """plot_losses of the records in metrics.jsonl; a note where they cannot be read (a directory in
    its place, an I/O error: a traceback took the place of a failed write's own one line and status
    3 at the end of a run, hunt 33-e E3, and of the resume of a finished run, hunt 34-b B3). A run
    that stopped before its first record draws no empty picture."""
    try:
        # Only what plot_losses reads of each record, its keys the same strings for all: a redraw (in the
        # training loop, every 30 s) held every record whole, +205 MB at 200,000 records (a 33 MB log),
        # growing with the run (hunt 43-g G2)
        records = [{k: r[k] for k in PLOTTED if k in r} for r in metrics.each_record()
                   if upto is None or r["step"] <= upto]
    except OSError as e:
        return f"loss curve not drawn: {metrics.path} cannot be read ({e.strerror or e})"
    return plot_losses(records, png) if records else None


def pyplot():
    """matplotlib.pyplot drawing to files (no window), or None without matplotlib."""
    unwritable = _UnwritableConfigDir()
    logging.getLogger("matplotlib").addFilter(unwritable)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    finally:
        logging.getLogger("matplotlib").removeFilter(unwritable)
    if unwritable.said:
        print(f"warning: matplotlib: {unwritable.said[0]}: it builds its font cache again in a temporary directory "
              "at each start; set MPLCONFIGDIR to a writable directory", file=sys.stderr)
    return plt


class _UnwritableConfigDir(logging.Filter):
    """matplotlib's lines, as it imports, about a configuration directory it cannot write (an unwritable
    HOME: a container run with --user), kept from its log: two lines of its own in every train.py run,
    the project's being one line each (hunt 35-f F7, hunt 42-c C2). The first says which and why."""

    def __init__(self):
        super().__init__()
        self.said: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.funcName != "_get_config_or_cache_dir":
            return True
        self.said.append(record.getMessage())
        return False


def thinned(points: list[tuple[float, float]], limit: int) -> list[tuple[float, float]]:
    """At most `limit` points of a curve: where there are more, consecutive runs of them become their
    mean (step and value), so a noisy training loss keeps its level, not one draw of its noise; the
    last point is kept as it is (the value the curve ends at)."""
    if len(points) <= limit:
        return points
    size = -(-(len(points) - 1) // (limit - 1))  # (ceiling) points per mean, the last point apart
    body = points[:-1]
    means = [(sum(s for s, _ in run) / len(run), sum(v for _, v in run) / len(run))
             for run in (body[i:i + size] for i in range(0, len(body), size))]
    return means + [points[-1]]


def plot_losses(records: list[dict], png: Path) -> str | None:
    """Two panels against steps (bottom axis) and tokens seen (top axis): the train and validation
    loss in nats per token, and the validation bits per byte (comparable across tokenizers).
    Written atomically, so a viewer never shows half a file. Returns a note when not drawn."""
    plt = pyplot()
    if plt is None:
        return "loss curve not drawn: matplotlib is not installed (pip install matplotlib)"
    train = [(r["step"], r["loss"]) for r in records if r.get("loss") is not None and math.isfinite(r["loss"])]
    val = [(r["step"], r["val_loss"]) for r in records if r.get("val_loss") is not None]
    bpb = [(r["step"], r["val_bpb"]) for r in records if r.get("val_bpb") is not None]
    # tokens per step, from the newest record that has both (a resumed run may have changed it)
    per_step = next((r["tokens_seen"] / r["step"] for r in reversed(records) if r.get("tokens_seen") and r["step"]), 0)
    train, val, bpb = (thinned(points, PLOT_POINTS) for points in (train, val, bpb))  # (each keeps its last point)
    fig, (ax_loss, ax_bpb) = plt.subplots(1, 2, figsize=(11, 4))
    if train:
        ax_loss.plot(*zip(*train), label="train loss", linewidth=1)
    if val:
        ax_loss.plot(*zip(*val), "o-", label="validation loss")
    ax_loss.set_ylabel("cross-entropy (nats/token)")
    if bpb:
        ax_bpb.plot(*zip(*bpb), "o-", color="C1", label="validation")
        ax_bpb.annotate(f"{bpb[-1][1]:.3f}", bpb[-1], textcoords="offset points", xytext=(4, 4))
    ax_bpb.set_ylabel("bits per byte")
    for ax in (ax_loss, ax_bpb):
        ax.set_xlabel("step")
        if per_step:
            top = ax.secondary_xaxis("top", functions=(lambda s: s * per_step, lambda t: t / per_step))
            top.set_xlabel("tokens seen")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    fig.tight_layout()
    tmp = png.with_name(f".tmp-{png.name}.{os.getpid()}")
    try:
        fig.savefig(tmp, dpi=100, format="png")
        os.replace(tmp, png)
    except OSError as e:  # e.g. the disk is full: the run goes on, the picture waits
        tmp.unlink(missing_ok=True)
        return f"loss curve not drawn: {e.strerror or e}"
    finally:
        plt.close(fig)
    return None
