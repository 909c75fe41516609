"""gpt/schedule.py: the notes on a schedule that a resume moved or a budget cut short, and the refit of a shortened
run's schedule; what train.py says with them is tested in tests/test_train.py."""
from dataclasses import replace

import pytest

import gpt.schedule
from gpt.config import TrainConfig
from gpt.optim import lr_at


def test_a_resume_whose_lr_schedule_moves_the_rate_says_so_with_the_runs_own_rate():
    # A cosine run resumed with --lr_schedule=constant went from its decay back to the peak without a word; with
    # --warmup_iters too, the note gave constant's rate as the run's, and --warmup_iters=2 alone as the way to keep
    # "the schedule it had" (hunt 49-f F1)
    recipe = dict(max_iters=8, warmup_iters=2, learning_rate=3e-3, min_lr=3e-4)
    saved = TrainConfig(**recipe).to_dict()  # cosine: 0.00232 after step 4 (step 5's rate)
    assert gpt.schedule.schedule_moved(TrainConfig(**recipe, lr_schedule="constant"), saved, 4) == (
        "note: the schedule is now constant (it was cosine): the learning rate at step 5 is 0.003 where the run's "
        "schedule had 0.00232; give --lr_schedule=cosine to keep the schedule it had")
    assert gpt.schedule.schedule_moved(TrainConfig(**{**recipe, "warmup_iters": 6}, lr_schedule="constant"), saved,
                                       4) == (
        "note: the schedule is now constant (it was cosine), and the warmup ends at step 6 (it ended at 2): the "
        "learning rate at step 5 is 0.00214 where the run's schedule had 0.00232; give --lr_schedule=cosine "
        "--warmup_iters=2 to keep the schedule it had")
    # a finished run continued without its decay: the way back keeps the decay's end too
    assert gpt.schedule.schedule_moved(TrainConfig(**{**recipe, "max_iters": 12}, lr_schedule="wsd"), saved, 8) == (
        "note: the schedule is now wsd (it was cosine), and the wsd decay at step 12 (it ended at 8): the learning "
        "rate at step 9 is 0.003 where the run's schedule had 0.0003; give --lr_schedule=cosine --lr_decay_iters=8 to "
        "keep the schedule it had")
    assert gpt.schedule.schedule_moved(TrainConfig(**recipe), saved, 4) is None
    # options that moved, where this step's rate is the run's still (constant, both warmups over): no note (a note
    # saying "0.003 where the run's schedule had 0.003" passed every test: hunt 51-q Q12)
    constant = TrainConfig(**recipe, lr_schedule="constant").to_dict()
    assert gpt.schedule.schedule_moved(TrainConfig(**{**recipe, "warmup_iters": 3}, lr_schedule="constant"), constant,
                                       4) is None
    # a run saved before --lr_schedule existed trained with cosine (BEFORE_OPTION, as resume_config reads it): resumed
    # with --lr_schedule=constant, its schedule was taken for the one typed, and the jump to the peak went unsaid
    # (hunt 49-m M1)
    older = {k: v for k, v in saved.items() if k not in ("lr_schedule", "decay_fraction")}
    assert gpt.schedule.schedule_moved(TrainConfig(**recipe, lr_schedule="constant"), older, 4) == (
        "note: the schedule is now constant (it was cosine): the learning rate at step 5 is 0.003 where the run's "
        "schedule had 0.00232; give --lr_schedule=cosine to keep the schedule it had")


@pytest.mark.parametrize("schedule, step, steps, decay, fraction", [
    ("cosine", 12, 30, 100, 0.2),  # past warmup every rate depends on the count: the schedule it had, kept
    ("cosine", 5, 30, 0, 0.2),     # still warming up: nothing taken depends on the count, which then moves
    ("wsd", 40, 60, 0, 0.2),       # still flat at the new count's decay start (48): the decay moves with it
    ("wsd", 50, 60, 0, 1 / 6),     # past 48 but still flat: the decay starts here and ends at the new count
    ("wsd", 90, 95, 100, 0.2),     # decaying already (from 80): the schedule it had, kept
    ("constant", 50, 60, 0, 0.2),
    ("noam", 50, 60, 0, 0.2)])
def test_a_shortened_schedule_keeps_the_rates_of_the_steps_taken(schedule, step, steps, decay, fraction):
    cfg = TrainConfig(max_iters=100, time_budget=10, warmup_iters=10, lr_schedule=schedule, decay_fraction=0.2)
    shorter = gpt.schedule.refit_schedule(cfg, step, steps)
    assert (shorter.max_iters, shorter.lr_decay_iters) == (steps, decay)
    assert shorter.decay_fraction == pytest.approx(fraction)
    shorter.validate()  # a config train.py accepts: what the printed flags give

    def rates(c):
        return [lr_at(s, c.learning_rate, c.min_lr, c.warmup_iters, c.lr_decay_iters or c.max_iters, c.lr_schedule,
                      c.decay_fraction) for s in range(steps)]
    assert rates(shorter)[:step] == rates(cfg)[:step]
    if decay == 0 and schedule in ("cosine", "wsd"):  # where it moved, the run decays to min_lr by its new end
        assert rates(shorter)[-1] < rates(cfg)[steps - 1]
        assert rates(shorter)[-1] <= cfg.min_lr + 0.1 * (cfg.learning_rate - cfg.min_lr) + 1e-12
    user_set = gpt.schedule.refit_schedule(replace(cfg, lr_decay_iters=80), step, steps)
    assert user_set.lr_decay_iters == 80  # the user's is kept
