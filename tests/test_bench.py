"""bench.py's pieces that can break without a benchmark run: its recipes are valid train.py
command lines. (Speed and quality are measured by running bench.py, never asserted here.)"""

import pytest

import bench
from gpt.config import TrainConfig, parse_args


@pytest.mark.parametrize("name", list(bench.QUALITY_RECIPES))
def test_quality_recipes_are_valid_train_configs(name):
    cfg, _ = parse_args([*bench.QUALITY_RECIPES[name], "--max_iters=0", "--time_budget=300"])
    cfg.validate(1)
    assert cfg.max_iters == 0 and cfg.time_budget == 300


def test_quality_recipes_are_the_ones_issue_11_names():
    default, _ = parse_args(bench.QUALITY_RECIPES["default"])
    assert default == TrainConfig()  # the default recipe is train.py's, with nothing added
    before, _ = parse_args(bench.QUALITY_RECIPES["adamw-before"])
    assert (before.optimizer, before.pos_encoding, before.qk_norm, before.qk_scale) == ("adamw", "learned", False, 1.0)
    assert (before.tokenizer, before.n_layer, before.n_embd, before.batch_size, before.block_size) == \
        (default.tokenizer, default.n_layer, default.n_embd, default.batch_size, default.block_size)
    nanogpt, _ = parse_args(bench.QUALITY_RECIPES["nanogpt-cpu"])
    assert (nanogpt.n_layer, nanogpt.n_head, nanogpt.n_embd, nanogpt.block_size, nanogpt.batch_size) == (4, 4, 128, 64, 12)
    assert (nanogpt.tokenizer, nanogpt.optimizer, nanogpt.learning_rate, nanogpt.min_lr, nanogpt.warmup_iters) == \
        ("byte", "adamw", 1e-3, 1e-4, 100)
    assert nanogpt.device == TrainConfig().device  # no --device: the bench runs where train.py would


def test_quality_refuses_an_unknown_recipe():
    with pytest.raises(SystemExit, match="unknown recipe.*nanogpt"):
        bench.main(["quality", "--recipes=default,nanogtp"])


@pytest.mark.parametrize("flag", ["--rounds=0", "--time_budget=0"])
def test_quality_refuses_no_rounds_or_no_time(flag):
    with pytest.raises(SystemExit, match="--rounds must be >= 1 and --time_budget > 0"):
        bench.main(["quality", flag])
