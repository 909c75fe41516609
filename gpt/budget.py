"""A run's --time_budget (--max_iters=0): its step count fixed at the end of warmup from the steps' times, cut
where the run falls behind it, the warning where the warmup alone overruns it, and the account the run closes
with."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import torch

from gpt.config import TrainConfig
from gpt.runtime import Dist, collective_device, steps_in_budget
from gpt.schedule import refit_schedule


# What --max_iters=0 keeps of its time budget for the end of the run, past the last evaluation
# and its checkpoint (which the plan counts as an evaluation): the closing loss plot and the
# interpreter's exit. On the 2-core VM 1.9 s with the last checkpoint, 1.5 s of it torch's exit.
# With CUDA, on an H100, the process's start and exit alone took 2.3-2.9 s beyond the run's own
# account in four 90 s runs (issue 9's sixth GPU session), and three of them ended 3-5 s late; MPS,
# not measured, gets CUDA's.
BUDGET_RESERVE_S = {"cpu": 2.0, "cuda": 3.5}
# How far past its budget a run may be projected to end before its count is cut (shorten_to_budget).
# It was 5%: three of those four H100 runs kept their counts under it, closed their accounts
# 0.4-1.9% past their 90 s, and their processes ended 3-5 s past it.
BUDGET_SLACK = 0.01
# The same between evaluations, where the run looks at every --log_interval. The speed since the
# plan lags a slowdown, so each look cuts too little and the next cuts again. In a model of the
# loop (not a run) on the CPU default's plan (about 1,800 steps of 163 ms in 300 s, an evaluation
# every 500 steps), steps slowed 1.2-8x from step 60, 600 or 1,500 ended 299-312 s in after at
# most 11 cuts with 5%, 299-303 s after up to 32 cuts with 1%, and 299-639 s looked at evaluations only.
BUDGET_SLACK_BETWEEN = 0.05


def budget_reserve_s(device: torch.device) -> float:
    return BUDGET_RESERVE_S["cpu" if device.type == "cpu" else "cuda"]


def fit_time_budget(cfg: TrainConfig, started: float, step: int, step_s: float, eval_s: float | None,
                    accum: int, dist: Dist, reserve_s: float, at_least: int = 1,
                    evaluation_next: bool = False) -> tuple[int, float]:
    """(steps, seconds per step) of a --max_iters=0 run: fixed at the end of warmup from the mean time of the
    warmup's timed steps, `step_s` (the mean, not the median: slow outliers take their share of
    the budget too). Every rank gets the same count, from the slowest rank's times. Without a timed
    evaluation (a run resumed during warmup), one is taken to cost a micro-step for each of the
    rank's share of the eval_iters batches (a forward pass costs less; the checkpoint and loss plot
    after it are left out).
    at_least: the fewest steps past `step` it returns; evaluation_next: an evaluation at `step` is
    still to come, and counted (`shorten_to_budget`)."""
    eval_s = eval_s if eval_s is not None else step_s * math.ceil(cfg.eval_iters / dist.world_size) / accum
    elapsed = time.monotonic() - started + (eval_s if evaluation_next else 0.0)  # (one at `step` itself, to come)
    if dist.enabled:
        t = torch.tensor([step_s, eval_s, elapsed], dtype=torch.float64, device=collective_device())
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        step_s, eval_s, elapsed = t.tolist()
    return steps_in_budget(cfg.time_budget, elapsed, step, step_s, eval_s, cfg.eval_interval, reserve_s,
                           at_least), step_s


def budget_spent(budget_s: float, elapsed_s: float, compile_s: float, steps_s: float, evaluations_s: float,
                 profile_s: float = 0.0, compile_evaluation_s: float = 0.0, before_loop_s: float | None = None,
                 restarted: bool = False) -> str:
    """The account a --max_iters=0 run closes with: its seconds so far (all but the interpreter's
    exit) in compiling (with the steps that compile, before the loop; compile_evaluation_s of it
    the evaluation's graph), in the loop's training steps, in its evaluations with their
    checkpoints, in writing --profile's files (where it recorded: the plan cannot count them, and
    they took 30 s and more on the CPU), and in the rest: before_loop_s of it before the first
    step (imports, device, data, model; on an H100 the rest was 8.4-11.7 s of 90 in issue 9's
    seventh GPU session, where it went not said), the rest after the last. `restarted`: a torchrun restart, whose
    budget counts from torchrun's start: its earlier attempts are in the rest, before this attempt's first step."""
    rest = elapsed_s - compile_s - steps_s - evaluations_s - profile_s
    rest_note = "" if before_loop_s is None else f", {before_loop_s:.1f} s of it before the first step" + (
        " of this attempt, the earlier attempts' among them" if restarted else "")
    profile = f", {profile_s:.1f} s writing the profile" if profile_s else ""
    of_it = f"; of the compiling, {compile_evaluation_s:.1f} s was the evaluation's graph" \
        if compile_evaluation_s else ""
    return (f"time budget {budget_s:g} s: {elapsed_s:.1f} s spent: {compile_s:.1f} s compiling, {steps_s:.1f} s in "
            f"training steps, {evaluations_s:.1f} s in evaluations with their checkpoints{profile} and {rest:.1f} s "
            f"in the rest (start-up, data, the loss plot){rest_note}{of_it}")


WARMUP_CHECK_WITHIN = 100  # steps


def warn_if_warmup_overruns(cfg: TrainConfig, started: float, step: int, step_s: float, reserve_s: float,
                            say) -> None:
    """A budgeted run whose warmup alone will not fit its budget is told so early (it will run its
    warmup to the end, past the budget, and stop without the learning rate's decay), rather than
    after the time is gone (audit, 2026-11-26: a 5 s budget with 3,000 warmup steps ran 19 s)."""
    warmup_ends = time.monotonic() - started + (cfg.warmup_iters - step) * step_s
    if warmup_ends + reserve_s > cfg.time_budget:
        say(f"warning: time budget {cfg.time_budget:g} s: the warmup alone ({cfg.warmup_iters:,} steps of "
            f"{1000 * step_s:.0f} ms) ends about {warmup_ends:.0f} s into the run: the run will stop after it, without "
            "the learning rate's decay; give fewer --warmup_iters or a longer --time_budget")


def shorten_to_budget(cfg: TrainConfig, started: float, step: int, step_s: float, eval_s: float | None,
                      accum: int, dist: Dist, reserve_s: float, say, evaluation_next: bool = True,
                      since: str = "the count was fixed") -> TrainConfig:
    """A budgeted run at the end of a step that an evaluation follows (`evaluation_next`), or of
    one whose losses were read: where the run no longer fits its budget at the speed of its steps
    since the count was fixed (`step_s`), a count that does, else cfg itself. The plan made at the
    end of warmup can be far off: on an H100 one run of the GPU default's 90 s recipe took 124 s,
    another 77 s (docs/gpu-measurements.md). eval_s: the median evaluation so far, so that one slow one
    does not cut the run for good. The stop moves only earlier (a later one would train on at
    min_lr), and the learning rate keeps the steps already taken (`refit_schedule`). An
    evaluation to come is counted; where not even one more step fits, the run ends at this one.
    A run projected to end within BUDGET_SLACK of its budget is
    left alone: the machine's speed swings (±20% on the 2-core VM) would otherwise cut runs, and
    their learning rates' ends, for under a percent of their budget (3 s of the CPU default's 300);
    between evaluations, where it looks at every log_interval, within BUDGET_SLACK_BETWEEN.
    A run resumed past its warmup has a count and no plan: it takes no second look, but for a torchrun restart,
    which looks from its first step on (`since`: "the restart")."""
    slack = BUDGET_SLACK if evaluation_next else BUDGET_SLACK_BETWEEN
    late = replace(cfg, time_budget=cfg.time_budget * (1 + slack))
    if fit_time_budget(late, started, step, step_s, eval_s, accum, dist, reserve_s, at_least=0,
                       evaluation_next=evaluation_next)[0] >= cfg.max_iters:
        return cfg
    steps, step_s = fit_time_budget(cfg, started, step, step_s, eval_s, accum, dist, reserve_s, at_least=0,
                                    evaluation_next=evaluation_next)
    shorter = refit_schedule(cfg, step, steps)
    repeat = f"--max_iters={steps}" + (f" --lr_decay_iters={shorter.lr_decay_iters}" if shorter.lr_decay_iters else "")
    if cfg.lr_schedule == "wsd":  # an earlier look may have changed it
        repeat += f" --decay_fraction={shorter.decay_fraction!r}"
    lr = (f"the learning rate on its schedule to step {shorter.lr_decay_iters:,}" if shorter.lr_decay_iters
          else "the learning rate decaying from here" if shorter.decay_fraction != cfg.decay_fraction
          else "the learning rate's schedule with it")
    # (the evaluations' time too: a cut made by evaluations slower than the step-0 one the plan timed, such as
    # --sample_tokens' samples, blamed the steps alone, at the speed the plan had: "steps take 3 ms since the count
    # was fixed: stopping at step 320 instead of 815", hunt 35-e E5)
    evals = f"; its evaluations take {eval_s:.3g} s (the median)" if eval_s is not None else ""
    say(f"time budget {cfg.time_budget:g} s: steps take {1000 * step_s:.0f} ms since {since}: stopping at "
        f"step {steps:,} instead of {cfg.max_iters:,}, {lr} ({repeat} repeats this run){evals}")
    return shorter
