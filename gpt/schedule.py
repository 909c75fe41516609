"""What a run's options make of its learning-rate schedule (gpt/optim.lr_at): the notes train.py gives where a
decay is cut short, too short, or ends early at a rate of 0, or where a resume moves the rate; and the schedule
of a budgeted run whose count is cut."""

from __future__ import annotations

import math
from dataclasses import replace

from gpt.config import BEFORE_OPTION, TrainConfig
from gpt.optim import lr_at


# The options that place the learning rate's decay and the run's end in it
SCHEDULE_SHAPE = ("max_iters", "lr_decay_iters", "warmup_iters", "decay_fraction", "lr_schedule")


def decay_too_short(cfg: TrainConfig) -> str | None:
    """The note for a wsd decay over fewer than 2 steps: its first decayed step is at the peak, so the
    rate never left learning_rate, without a word (hunt 35-e E3; decay_fraction 0.05 of 20 steps)."""
    decay_iters = cfg.lr_decay_iters or cfg.max_iters
    if cfg.lr_schedule != "wsd" or not decay_iters > cfg.warmup_iters:
        return None
    steps = decay_iters - max(cfg.warmup_iters, decay_iters - round(cfg.decay_fraction * decay_iters))
    if steps >= 2:
        return None
    remedy = (f"--decay_fraction={2 / decay_iters:.2g} or more" if decay_iters - cfg.warmup_iters >= 2
              else "fewer --warmup_iters")
    # (past an --lr_decay_iters below the run's count the rate is min_lr: a cliff there, not the end: review 36 R2)
    stays = (f"stays at {cfg.learning_rate:g} to the end" if decay_iters >= cfg.max_iters else
             f"stays at {cfg.learning_rate:g} to step {decay_iters:,}, then drops to min_lr {cfg.min_lr:g} at once")
    return (f"note: --decay_fraction={cfg.decay_fraction:g} of {decay_iters:,} steps is a decay over {steps} step(s), "
            f"whose first is at the peak: the learning rate {stays}; give {remedy} for a decay")


def decay_cut_short(cfg: TrainConfig, count: str) -> str | None:
    """The note for a cosine or wsd decay that ends past the run's last step: it left the rate near
    its peak without a word (hunt 32-c F15). `count` names the run's length."""
    if cfg.lr_schedule not in ("cosine", "wsd") or not cfg.lr_decay_iters > cfg.max_iters > cfg.warmup_iters:
        return None
    last_lr = lr_at(cfg.max_iters - 1, cfg.learning_rate, cfg.min_lr, cfg.warmup_iters, cfg.lr_decay_iters,
                    cfg.lr_schedule, cfg.decay_fraction)
    return (f"note: --lr_decay_iters={cfg.lr_decay_iters} is past {count}: the run ends at learning rate "
            f"{last_lr:.3g}, not min_lr {cfg.min_lr:.3g}; a resume with --max_iters={cfg.lr_decay_iters} finishes "
            "the decay")


def steps_at_rate_zero(cfg: TrainConfig, count: str) -> str | None:
    """The note for a cosine or wsd decay that reaches a min_lr of 0 before the run's last step: the steps past it
    train at rate 0 and change no weight (weight decay is scaled by the rate too), time spent for nothing, unsaid
    (hunt 49-f L3). `count` names the run's length."""
    if cfg.lr_schedule not in ("cosine", "wsd") or cfg.min_lr != 0 or not 0 < cfg.lr_decay_iters < cfg.max_iters:
        return None
    idle = cfg.max_iters - cfg.lr_decay_iters
    return (f"note: --lr_decay_iters={cfg.lr_decay_iters} ends the decay at min_lr 0 before {count}: the last "
            f"{idle:,} step{'s' if idle > 1 else ''} train at rate 0 and change no weight; give "
            f"--max_iters={cfg.lr_decay_iters} or a --min_lr above 0")


def schedule_moved(cfg: TrainConfig, saved: dict, step: int) -> str | None:
    """The note for a resume whose options move its schedule at this step: cosine and wsd decay to the run's
    count, so a finished run continued with a larger --max_iters (the way on that train.py itself gives) jumped
    from min_lr back up the decay in silence: a 1,000-step default run continued to 2,000 steps went from 4e-4
    to 2.27e-3 at once (hunt 37-a A2). So did a --warmup_iters typed past the step, back down a warmup: a run
    that ended at 4e-4 went on at 1.98e-4 (hunt 48-e E2). Said where this step's rate differs from the run's.
    (A rate typed anew, --learning_rate or --min_lr, is the user's own: both rates are at the one typed.)
    `step`: the checkpoint's, the steps already taken."""
    decays = cfg.lr_schedule in ("cosine", "wsd")
    decay = cfg.lr_decay_iters or cfg.max_iters
    # The run's own schedule, not the one typed now: a cosine run resumed with --lr_schedule=constant went from its
    # decay to the peak without a word, and with --warmup_iters too the note gave constant's rate as the run's
    # (hunt 49-f F1). A run saved before the option existed trained with cosine, as resume_config reads it (the one
    # typed was taken for its own: hunt 49-m M1)
    saved = {**BEFORE_OPTION, **saved}
    was_schedule = saved["lr_schedule"]
    was_decays = was_schedule in ("cosine", "wsd")
    was_count = saved.get("max_iters") or 0
    was_decay = saved.get("lr_decay_iters") or was_count
    was_warmup = saved.get("warmup_iters", cfg.warmup_iters)
    was_fraction = saved.get("decay_fraction", cfg.decay_fraction)
    # Past a warmup the rate depends on the decay, which a count not fixed yet does not give (a budgeted run
    # stopped before its plan): not said then. Within it the decay plays no part (the loop's own stand-in).
    if (was_decays and step >= was_warmup and not was_decay) or (decays and step >= cfg.warmup_iters and not decay):
        return None
    had = lr_at(step, cfg.learning_rate, cfg.min_lr, was_warmup, was_decay or was_warmup, was_schedule,
                was_fraction)
    now = lr_at(step, cfg.learning_rate, cfg.min_lr, cfg.warmup_iters, decay or cfg.warmup_iters, cfg.lr_schedule,
                cfg.decay_fraction)
    if math.isclose(had, now, rel_tol=1e-6):
        return None
    moved, keep = [], []
    if was_schedule != cfg.lr_schedule:
        moved.append(f"the schedule is now {cfg.lr_schedule} (it was {was_schedule})")
        keep.append(f"--lr_schedule={was_schedule}")
    if was_warmup != cfg.warmup_iters:
        moved.append(f"the warmup {'now ' if not moved else ''}ends at step {cfg.warmup_iters:,} (it ended at "
                     f"{was_warmup:,})")
        keep.append(f"--warmup_iters={was_warmup}")
    if was_decays and was_decay != decay:
        if decays:
            moved.append(f"the {cfg.lr_schedule} decay {'now ends ' if not moved else ''}at step {decay:,} "
                         f"(it ended at {was_decay:,})")
        keep.append(f"--lr_decay_iters={was_decay}")  # (with --lr_schedule back to one that decays)
    if cfg.lr_schedule == "wsd" and was_schedule == "wsd" and was_fraction != cfg.decay_fraction:
        moved.append(f"the decay {'now ' if not moved else ''}takes the last {cfg.decay_fraction:g} of the steps "
                     f"(it took {was_fraction:g})")
        keep.append(f"--decay_fraction={was_fraction!r}")
    if not moved:  # (nothing else of the schedule is kept from the run)
        return None
    kept = ("the decay it had (min_lr after it)" if keep == [f"--lr_decay_iters={was_decay}"]
            else "the schedule it had")
    # Named by the step it trains, step + 1, as metrics.jsonl logs it and a stop names it: "at step 6" (the
    # checkpoint's) gave the rate metrics.jsonl shows at step 7 (hunt 51-b B5)
    return (f"note: {', and '.join(moved)}: the learning rate at step {step + 1:,} is {now:.3g} where the run's "
            f"schedule had {had:.3g}; give {' '.join(keep)} to keep {kept}")


def refit_schedule(cfg: TrainConfig, step: int, steps: int) -> TrainConfig:
    """cfg with `steps` steps instead of cfg.max_iters, after `step` steps were taken, and a
    learning rate that leaves the rates of the steps taken as they were: the first of
      - the schedule ending at the new count (wsd while still flat at the new count's decay start;
        constant and noam, which have no end);
      - wsd still flat: its decay from this step to the new count (decay_fraction);
      - the schedule it had (lr_decay_iters; cosine, whose rates depend on the count from the
        second step after warmup, and wsd already decaying): it then ends above min_lr.
    Either way the returned config's --max_iters, --lr_decay_iters and --decay_fraction repeat the run."""
    def rates(c: TrainConfig) -> list[float]:
        return [lr_at(s, c.learning_rate, c.min_lr, c.warmup_iters, c.lr_decay_iters or c.max_iters, c.lr_schedule,
                      c.decay_fraction) for s in range(step)]
    taken = rates(cfg)
    candidates = [] if cfg.lr_decay_iters else [replace(cfg, max_iters=steps)]
    if cfg.lr_schedule == "wsd" and not cfg.lr_decay_iters and steps > step:
        candidates.append(replace(cfg, max_iters=steps, decay_fraction=(steps - step) / steps))
    return next((c for c in candidates if rates(c) == taken),
                replace(cfg, max_iters=steps, lr_decay_iters=cfg.lr_decay_iters or cfg.max_iters))
