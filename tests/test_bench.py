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


def test_gpu_quality_recipes_are_issue_9s_reference_and_the_cpu_winners_on_the_gpu_preset():
    gpu_preset, _ = parse_args(["--config=shakespeare-gpu"])
    before, _ = parse_args(bench.QUALITY_RECIPES["gpu-before"])
    # The preset as issue 9 found it: nanoGPT's shakespeare_char recipe, on bytes.
    assert (before.tokenizer, before.n_layer, before.n_head, before.n_embd, before.block_size, before.batch_size,
            before.dropout) == ("byte", 6, 6, 384, 256, 64, 0.2)
    assert (before.optimizer, before.pos_encoding, before.qk_norm, before.qk_scale, before.learning_rate,
            before.min_lr, before.warmup_iters) == ("adamw", "learned", False, 1.0, 1e-3, 1e-4, 100)
    muon, _ = parse_args(bench.QUALITY_RECIPES["gpu-muon"])
    cpu = TrainConfig()
    assert (muon.optimizer, muon.pos_encoding, muon.qk_norm, muon.qk_scale, muon.learning_rate, muon.min_lr,
            muon.muon_learning_rate) == (cpu.optimizer, cpu.pos_encoding, cpu.qk_norm, cpu.qk_scale,
                                         cpu.learning_rate, cpu.min_lr, cpu.muon_learning_rate)
    assert (muon.tokenizer, muon.n_layer, muon.n_embd, muon.block_size, muon.batch_size, muon.dropout) == \
        (gpu_preset.tokenizer, gpu_preset.n_layer, gpu_preset.n_embd, gpu_preset.block_size, gpu_preset.batch_size,
         gpu_preset.dropout)


def test_quality_defaults_name_known_recipes_and_positive_budgets():
    for recipes, budget in bench.QUALITY_DEFAULTS.values():
        assert set(recipes.split(",")) <= set(bench.QUALITY_RECIPES) and budget > 0


def test_the_gpu_script_names_its_stages_and_refuses_others():
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / ".ci" / "gpu"
    for argv in ([], ["no-such-stage"]):
        proc = subprocess.run(["bash", str(script), *argv], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2 and "tests-cuda" in proc.stderr and "quality" in proc.stderr
