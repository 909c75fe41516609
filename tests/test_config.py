import re
from dataclasses import fields

import pytest

from gpt.config import TrainConfig, check_options_apply, command_line_keys, parse_args, resume_config
from gpt.errors import ConfigError


def test_defaults_are_valid_and_overrides_take_types_from_the_dataclass():
    cfg, keys = parse_args(["--n_layer=3", "--learning_rate", "1e-3", "--bias=true", "--compile=false", "--max_iters=1_000"])
    assert (cfg.n_layer, cfg.learning_rate, cfg.bias, cfg.compile, cfg.max_iters) == (3, 1e-3, True, "false", 1000)
    assert keys == {"n_layer", "learning_rate", "bias", "compile", "max_iters"}


def test_a_set_step_count_needs_no_time_budget_and_the_default_run_has_one():
    assert parse_args(["--max_iters=20", "--time_budget=0", "--warmup_iters=0"])[0].max_iters == 20
    assert parse_args(["--eval_only=true", "--time_budget=0", "--init_from=resume"])[0].eval_only
    default = TrainConfig()
    assert (default.max_iters, default.time_budget) == (0, 300.0)  # "python train.py": 5 minutes


def test_unknown_key_gives_suggestions_and_points_to_help_in_one_line():
    with pytest.raises(ValueError) as err:
        parse_args(["--learning_rat=0.1"])
    msg = str(err.value)
    assert "--learning_rat" in msg and "did you mean --learning_rate" in msg and "train.py --help" in msg
    assert "\n" not in msg  # (the options table followed, 56 lines: hunt 43-e N1)


@pytest.mark.parametrize("typed, hint", [("--N_LAYER=2", "--n_layer"), ("--Learning_Rate=0.1", "--learning_rate"),
                                         ("--MAX_ITER=2", "--max_iters")])
def test_an_option_typed_in_another_case_gets_its_hint(typed, hint):
    # difflib's ratio is case-sensitive: --N_LAYER got no "did you mean" at all (hunt 43-e E4)
    with pytest.raises(ConfigError, match=f"unknown option {typed.partition('=')[0]} in the command line "
                                          rf"\(did you mean {hint}[,?]"):
        parse_args([typed])


@pytest.mark.parametrize("typed, hint", [("--lr=1e-3", "--learning_rate?"), ("--max_steps=9", "--max_iters, "),
                                         ("--grad_accum=8", "--gradient_accumulation_steps, "),
                                         ("--resume", "--init_from=resume?"), ("--seq_len=64", "--block_size?")])
def test_another_trainers_name_for_an_option_gets_ours_first(typed, hint):
    # no likeness of spelling finds them: --lr got no hint, --grad_accum was offered --grad_clip, another knob that
    # takes a number too, and --max_steps --max_bad_steps first (gpt.errors.OTHER_NAMES, hunt 52-c C4)
    with pytest.raises(ConfigError, match=f"unknown option {typed.partition('=')[0]} in the command line "
                                          rf"\(did you mean {re.escape(hint)}"):
        parse_args([typed])


@pytest.mark.parametrize("arg, needle", [
    ("--n_layer=two", "expects int"),
    ("--bias=maybe", "expects bool"),
    ("--learning_rate=fast", "expects float"),
    ("--n_embd=102", "divisible by n_head"),
    ("--dropout=1.5", "dropout"),
    ("--keep_last=1", "keep_last"),
    ("--dtype=float8", "dtype"),
    ("--min_lr=1", "min_lr"),
    # lower bounds the suite let go (hunt 32-b CF6, CF20, CF7, CF3): a negative clip or rate trained up the loss
    ("--grad_clip=-1", "grad_clip must be >= 0, got -1.0"),
    ("--min_lr=-1e-4", "min_lr must be >= 0, got -0.0001"),
    ("--weight_decay=-0.1", "weight_decay must be >= 0, got -0.1"),
    ("--beta2=1", r"beta1 and beta2 must be in \[0, 1\), got 0.9, 1.0"),
    ("--beta1=-0.1", r"beta1 and beta2 must be in \[0, 1\), got -0.1, 0.99"),
    ("--lora_rank=4", "pretrained"),
    # a new random model was scored as if it were out_dir's run (hunt 32-c F10)
    ("--eval_only=true", "eval_only evaluates trained weights: give --init_from=resume"),
    ("--lr_schedule=linear", "lr_schedule must be one of cosine, noam, wsd, constant"),
    ("--optimizer=sgd", "optimizer must be one of adamw, muon"),
    ("--label_smoothing=1", "label_smoothing must be in"),
    ("--label_smoothing=-0.1", "label_smoothing must be in"),
    ("--decay_fraction=0", "decay_fraction"),
    ("--muon_learning_rate=0", "muon_learning_rate"),
    ("--qk_scale=0", "qk_scale must be > 0"),
    ("--qk_scale=1e39", "qk_scale must be > 0 and finite in float32, got 1e\\+39"),  # (NaN losses: README audit)
    # 0 in float32 once divided by sqrt(head size): NaN at step 0, "Try a lower learning_rate" (hunt 43-e E2)
    ("--qk_scale=1e-320", r"qk_scale makes the attention scale qk_scale / sqrt\(head size 32\) smaller than float32's "
                          r"smallest normal number \(1.175e-38; it rounds to 0, and the logits to NaN\), got 1e-320"),
    ("--time_budget=-1", "time_budget must be >= 0"),
    ("--time_budget=1e308", "time_budget must be at most 31,536,000 s \\(a year\\), got 1e\\+308"),  # (hunt, session 22)
    ("--time_budget=31536001", "time_budget must be at most 31,536,000 s \\(a year\\), got 31,536,001$"),
    ("--time_budget=0", "max_iters 0 means 'as many steps as fit in time_budget', but time_budget is 0"),
    ("--warmup_iters=5", "warmup_iters must be >= 10"),
    # a traceback at the first micro-step ("int too big to convert"), or a first step that never ended (hunt 49-b B1)
    ("--gradient_accumulation_steps=" + "1" + "0" * 23, "gradient_accumulation_steps must be at most 1,000,000 "
                                                       "micro-batches a step, got 100,000,000,000,000,000,000,000: for "
                                                       "more tokens a step, raise --batch_size"),
    ("--gradient_accumulation_steps=1000001", "gradient_accumulation_steps must be at most 1,000,000"),
])
def test_bad_values_fail_before_any_work(arg, needle):
    with pytest.raises(ValueError, match=needle):
        parse_args([arg])


def test_a_weight_decay_that_wipes_or_flips_the_weights_at_their_peak_rate_is_refused():
    # the decay multiplies the weights by 1 - rate x weight_decay a step: 150 with Muon's 0.015 is -1.25, and the
    # run trained on without a word (hunt 44-f F1)
    with pytest.raises(ConfigError, match=r"weight_decay \(150\) x muon_learning_rate \(0.015\) must be < 1: each step "
                                          r"multiplies the weights by 1 - muon_learning_rate x weight_decay = -1.25"):
        parse_args(["--weight_decay=150", "--max_iters=2"])
    with pytest.raises(ConfigError, match=r"weight_decay \(500\) x learning_rate \(0.004\) must be < 1"):
        parse_args(["--weight_decay=500", "--optimizer=adamw", "--max_iters=2"])
    # each rate against its own part: AdamW's (embeddings, gains) alone in a LoRA run, whose adapters AdamW trains
    parse_args(["--weight_decay=150", "--optimizer=adamw", "--max_iters=2"])
    parse_args(["--init_from=somewhere", "--lora_rank=4", "--weight_decay=150", "--max_iters=2"])
    parse_args(["--weight_decay=66", "--max_iters=2"])  # 1 - 0.99: a decay, however strong


def test_a_lora_scale_that_is_0_in_float32_is_refused():
    # lora_alpha 1e-320: the adapters' gradients were 0 (grad_norm 0.0 every step) and the run trained nothing,
    # status 0, without a word (hunt 43-e E2)
    with pytest.raises(ConfigError, match=r"lora_alpha / lora_rank \(1e-320 / 4\) must be at least float32's smallest "
                                          r"normal number \(1.175e-38\): below it the update's scale is 0"):
        parse_args(["--init_from=somewhere", "--lora_rank=4", "--lora_alpha=1e-320", "--max_iters=2"])
    parse_args(["--init_from=somewhere", "--lora_rank=4", "--lora_alpha=1e-30", "--max_iters=2"])


def test_a_lora_scale_that_is_infinite_in_float32_is_refused():
    # lora_alpha 1e300: the scale was inf in float32, the fresh adapters' 0 times it NaN, and the run stopped with
    # "the validation loss is nan at step 0: the model diverged ... Try a lower learning_rate" (hunt 49-a A1)
    with pytest.raises(ConfigError, match=r"lora_alpha / lora_rank \(1e\+300 / 4\) must be at most float32's largest "
                                          r"number \(3.403e\+38\): above it the update's scale is infinite"):
        parse_args(["--init_from=somewhere", "--lora_rank=4", "--lora_alpha=1e300", "--max_iters=2"])
    parse_args(["--init_from=somewhere", "--lora_rank=4", "--lora_alpha=1e38", "--max_iters=2"])  # (1e38 / 4: finite)


def test_accumulation_must_split_evenly_across_processes():
    cfg = TrainConfig(gradient_accumulation_steps=3)
    with pytest.raises(ValueError, match="divisible by the number of processes"):
        cfg.validate(world_size=2)
    TrainConfig(gradient_accumulation_steps=4).validate(world_size=2)


def test_toml_preset_then_command_line(tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text('n_layer = 3\nlearning_rate = 1e-3\ncompile = false\n')
    cfg, keys = parse_args([f"--config={preset}", "--n_layer=5"])
    assert (cfg.n_layer, cfg.learning_rate, cfg.compile) == (5, 1e-3, "false")
    assert {"n_layer", "learning_rate", "compile"} <= keys
    preset.write_text('n_layers = 3\n')
    with pytest.raises(ValueError, match="n_layers"):
        parse_args([f"--config={preset}"])
    preset.write_text('n_layer = \n')
    with pytest.raises(ValueError, match="TOML"):
        parse_args([f"--config={preset}"])


@pytest.mark.parametrize("name", ["shakespeare-cpu", "shakespeare-gpu", "gpt2-124m", "finetune", "instruct"])
def test_shipped_presets_parse(name):
    # each value the file gives is the config's (it asserted nothing: hunt 31-b), the rest the defaults'
    import tomllib

    from gpt.config import CONFIG_DIR
    cfg, keys = parse_args([f"--config={name}"])
    given = tomllib.loads((CONFIG_DIR / f"{name}.toml").read_text())
    lora = given.pop("lora", {})  # (a LoRA run's values instead: test_a_presets_lora_table_...)
    assert given and keys == set(given) and all(getattr(cfg, k) == v for k, v in given.items())
    assert all(getattr(cfg, f.name) == getattr(TrainConfig(), f.name) for f in fields(TrainConfig) if f.name not in given)
    if lora:
        cfg, keys = parse_args([f"--config={name}", "--lora_rank=8"])
        assert keys == set(given) | set(lora) | {"lora_rank"}
        assert all(getattr(cfg, k) == lora.get(k, v) for k, v in given.items())


@pytest.mark.parametrize("name", ["finetune", "instruct"])
def test_a_presets_lora_table_gives_a_lora_run_its_rates_under_what_is_typed(name, tmp_path):
    # --config=finetune --lora_rank=8, as the preset's comment said to add, trained the adapters at the full fine-tune's
    # 3e-5: on a tiny base, 40 steps moved the validation loss 6.65 -> 6.58, against 5.42 at 3e-3 (hunt 49-a). LoRA
    # takes some ten times a full fine-tune's rate (the LoRA paper's GPT-2 runs: 2e-4)
    full, _ = parse_args([f"--config={name}"])
    lora, _ = parse_args([f"--config={name}", "--lora_rank=8"])
    assert lora.learning_rate >= 5 * full.learning_rate and lora.min_lr >= 5 * full.min_lr
    assert lora.min_lr < lora.learning_rate
    typed, _ = parse_args([f"--config={name}", "--lora_rank=8", "--learning_rate=1e-4"])
    assert (typed.learning_rate, typed.min_lr) == (1e-4, lora.min_lr)
    preset = tmp_path / "p.toml"
    preset.write_text('learning_rate = 1e-5\nmin_lr = 1e-6\ndropout = 0.1\n'
                      '[lora]\nlearning_rate = 1e-3\ndropout = 0.0\n')
    assert parse_args([f"--config={preset}"])[0].learning_rate == 1e-5
    cfg, keys = parse_args([f"--config={preset}", "--init_from=out", "--lora_rank=2"])
    assert (cfg.learning_rate, cfg.dropout) == (1e-3, 0.0) and {"learning_rate", "dropout"} <= keys
    preset.write_text('[lora]\nlearning_rte = 1e-3\n')
    with pytest.raises(ConfigError,
                       match=r"unknown option --learning_rte in .*p\.toml's \[lora\] table.*learning_rate"):
        parse_args([f"--config={preset}"])
    preset.write_text('lora = 3\n')
    with pytest.raises(ConfigError, match="lora must be a table"):
        parse_args([f"--config={preset}"])
    preset.write_text('[lora]\nlearning_rate = "fast"\n')
    with pytest.raises(ConfigError, match=r"learning_rate = 'fast' in .*p\.toml's \[lora\] table: expects float"):
        parse_args([f"--config={preset}", "--init_from=out", "--lora_rank=2"])


@pytest.mark.parametrize("name", ["finetune", "instruct"])
def test_fine_tuning_presets_start_from_pretrained_weights(name):
    # --config=finetune alone trained a new model at 3e-5 without a word (hunt, session 24); as
    # nanoGPT's fine-tuning config, the preset names weights (the command line's win)
    assert parse_args([f"--config={name}"])[0].init_from == "gpt2"
    assert parse_args([f"--config={name}", "--init_from=out"])[0].init_from == "out"


@pytest.mark.parametrize("name", ["gpt2-124m", "finetune", "instruct"])
def test_presets_with_adamws_learning_rates_use_adamw(name):
    # instruct fine-tuned pretrained weights with Muon at 0.015 (the default) under AdamW's 2e-5:
    # the commit that made Muon the default pinned the other presets and missed it (README audit, 2026-11-26)
    cfg, _ = parse_args([f"--config={name}"])
    assert cfg.optimizer == "adamw"


def test_cpu_preset_is_the_dataclass_default():
    cfg, _ = parse_args(["--config=shakespeare-cpu"])
    assert cfg == TrainConfig()


def test_resume_refuses_a_different_architecture_and_keeps_the_saved_config():
    saved = TrainConfig(n_layer=2, n_head=2, n_embd=32, max_iters=10).to_dict()
    cfg, keys = parse_args(["--init_from=resume", "--max_iters=20"])
    merged = resume_config(saved, cfg, keys)
    assert (merged.n_layer, merged.n_embd, merged.max_iters, merged.init_from) == (2, 32, 20, "resume")
    cfg, keys = parse_args(["--init_from=resume", "--n_layer=4", "--tokenizer=gpt2"])
    with pytest.raises(ValueError) as err:
        resume_config(saved, cfg, keys)
    assert "n_layer: checkpoint 2, now 4" in str(err.value) and "tokenizer" in str(err.value)
    # a LoRA run's adapters keep the alpha they were built with: another was recorded and not used (hunt 32-b CF17)
    saved = TrainConfig(init_from="gpt2", lora_rank=4, lora_alpha=8.0, max_iters=10).to_dict()
    cfg, keys = parse_args(["--init_from=resume", "--lora_alpha=32"])
    with pytest.raises(ValueError, match="lora_alpha: checkpoint 8.0, now 32.0"):
        resume_config(saved, cfg, keys)


def test_a_resume_on_prepared_data_of_another_tokenizer_is_told_to_prepare_it_with_the_weights_tokenizer(tmp_path):
    # The refusal's way on, "--init_from=RUN --data=DIR --out_dir=<another directory>" (or --eval_only=true), was
    # refused in turn: "does not match the model: tokenizer: model 'byte', data 'shakespeare-bpe'" (hunt 49-o O3)
    from gpt.prepare import prepare
    (tmp_path / "a.txt").write_text("The first document.\n")
    (tmp_path / "b.txt").write_text("The second one.\n")
    texts = [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    data = {tok: str(prepare(source="input", inputs=texts, tokenizer=tok, out_dir=tmp_path / tok, num_proc=1,
                             quiet=True)) for tok in ("byte", "shakespeare-bpe")}
    other_bytes = str(prepare(source="input", inputs=texts[::-1], tokenizer="byte", out_dir=tmp_path / "other",
                              num_proc=1, quiet=True))
    saved = TrainConfig(tokenizer="byte", data=data["byte"], max_iters=10).to_dict()
    for evaluate in ([], ["--eval_only=true"]):
        cfg, keys = parse_args(["--init_from=resume", f"--data={data['shakespeare-bpe']}", *evaluate])
        with pytest.raises(ConfigError) as err:
            resume_config(saved, cfg, keys)
        assert str(err.value).endswith(f"\n({data['shakespeare-bpe']} holds tokens of the shakespeare-bpe tokenizer, "
                                       "and these weights read byte tokens: prepare the data with --tokenizer byte)")
    cfg, keys = parse_args(["--init_from=resume", f"--data={other_bytes}"])  # data of the same tokenizer: as before
    with pytest.raises(ConfigError, match=r"\(to start a new run from these weights with these options, give them"):
        resume_config(saved, cfg, keys)
    # another tokenizer typed too: a new model, which takes the data's tokenizer, as before
    cfg, keys = parse_args(["--init_from=resume", f"--data={data['shakespeare-bpe']}", "--tokenizer=shakespeare-bpe"])
    with pytest.raises(ConfigError, match=r"\(the weights keep their tokenizer: to train with these options, start a new"):
        resume_config(saved, cfg, keys)


def test_a_resume_typed_another_tokenizer_on_prepared_data_is_not_advised_that_data(tmp_path):
    # "start a new model with them and --data=<the run's prepared byte data> ..." was refused in turn: "--tokenizer=
    # shakespeare-bpe, but DIR holds byte tokens, prepared already" (hunt 52-h H4)
    from gpt.prepare import prepare
    (tmp_path / "a.txt").write_text("The first document.\n")
    (tmp_path / "b.txt").write_text("The second one.\n")
    data = str(prepare(source="input", inputs=[str(tmp_path / "a.txt"), str(tmp_path / "b.txt")], tokenizer="byte",
                       out_dir=tmp_path / "byte", num_proc=1, quiet=True))
    saved = TrainConfig(tokenizer="byte", data=data, max_iters=10).to_dict()
    cfg, keys = parse_args(["--init_from=resume", "--tokenizer=shakespeare-bpe"])
    with pytest.raises(ConfigError) as err:
        resume_config(saved, cfg, keys)
    assert str(err.value).endswith(f"\n(the weights keep their tokenizer, and {data} holds byte tokens, prepared "
                                   "already: to train with these options, start a new model with them and "
                                   "--data=<the text, or data prepared with --tokenizer=shakespeare-bpe> "
                                   "--out_dir=<another directory>, without --init_from)")


def test_a_fine_tune_trains_at_the_weights_context_unless_a_preset_or_the_command_line_says():
    # Without either it trained at the default 128 tokens, not GPT-2's 1,024, without a note (hunt 32-b CF9)
    from dataclasses import replace

    from gpt.config import fit_block_size

    cfg = TrainConfig(init_from="gpt2")
    assert fit_block_size(cfg, 1024, preset_set=False, user_set=False) == (replace(cfg, block_size=1024), None)
    assert fit_block_size(replace(cfg, block_size=256), 1024, preset_set=True, user_set=False)[0].block_size == 256
    fitted, note = fit_block_size(replace(cfg, block_size=512), 64, preset_set=True, user_set=False)
    assert fitted.block_size == 64 and note.startswith("block_size 512 (the preset's) -> 64, the context of gpt2")
    assert fit_block_size(replace(cfg, block_size=32), 1024, preset_set=False, user_set=True)[0].block_size == 32
    with pytest.raises(ConfigError, match="block_size 2048 exceeds the model's context of 1024"):
        fit_block_size(replace(cfg, block_size=2048), 1024, preset_set=False, user_set=True)


def test_resume_cuts_a_presets_block_size_to_the_checkpoints_context_but_not_a_typed_one():
    # a fine-tune from weights of context 32 trained the finetune preset's 256 at 32 (fit_block_size):
    # resumed with the same command, the preset's 256 was refused as a change (hunt 31-c F1)
    saved = {**parse_args(["--config=finetune", "--block_size=32"])[0].to_dict(), "n_layer": 2, "n_head": 2, "n_embd": 32}
    model_config = {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32}
    argv = ["--config=finetune", "--init_from=resume"]
    cfg, keys = parse_args(argv)
    assert resume_config(saved, cfg, keys, model_config, typed=command_line_keys(argv)).block_size == 32
    argv = ["--config=finetune", "--init_from=resume", "--block_size=256"]  # typed: the user's, refused
    cfg, keys = parse_args(argv)
    with pytest.raises(ValueError, match="block_size: checkpoint 32, now 256"):
        resume_config(saved, cfg, keys, model_config, typed=command_line_keys(argv))


def test_resume_keeps_the_count_a_budgeted_preset_run_fixed_but_takes_a_typed_one():
    # the preset's max_iters = 0 replaced the count the budget had fixed, and the resume of
    # `--config=shakespeare-cpu` was refused past its warmup: "give --max_iters" (hunt 31-c F5)
    saved = {**parse_args(["--config=shakespeare-cpu"])[0].to_dict(), "max_iters": 4004}
    argv = ["--config=shakespeare-cpu", "--init_from=resume"]
    cfg, keys = parse_args(argv)
    assert resume_config(saved, cfg, keys, typed=command_line_keys(argv)).max_iters == 4004
    argv = ["--config=shakespeare-cpu", "--init_from=resume", "--max_iters=5000"]
    cfg, keys = parse_args(argv)
    assert resume_config(saved, cfg, keys, typed=command_line_keys(argv)).max_iters == 5000


def test_a_preset_given_to_a_resume_is_not_applied_and_that_is_said(tmp_path):
    # another preset than the run's, given on resume, was ignored without a word (hunt 31-c F8)
    from gpt.config import preset_not_applied

    saved = TrainConfig(max_iters=10).to_dict()
    argv = ["--config=finetune", "--init_from=resume", "--max_iters=20"]
    parsed, keys = parse_args(argv)
    resumed = resume_config(saved, parsed, keys, typed=command_line_keys(argv))
    assert (resumed.optimizer, resumed.learning_rate, resumed.max_iters) == ("muon", TrainConfig.learning_rate, 20)
    note = preset_not_applied(parsed, resumed, keys - command_line_keys(argv))
    assert note.startswith("a --config preset is not applied to a resumed run, which keeps its own values: ")
    assert "optimizer 'muon' (the preset's 'adamw')" in note and "max_iters" not in note and "init_from" not in note
    # the way on is said apart for the values a resume refuses to change: "give an option on the command line"
    # sent a user typing --optimizer=adamw or --block_size=256 to that refusal (hunt 41-a A6)
    typable, fixed, weights_fix = note.split("; and ")
    assert typable.endswith("learning_rate 0.004 (the preset's 3e-05), min_lr 0.0004 (the preset's 3e-06), "
                            "warmup_iters 50 (the preset's 20), weight_decay 0.1 (the preset's 0.0); "
                            "give an option on the command line to change it")
    assert fixed == ("optimizer 'muon' (the preset's 'adamw'), which a resume cannot change (a new run from its weights "
                     "can)")
    # but not a longer context or another shape, which a new run from the weights refuses (hunt 41-d D4)
    assert weights_fix == "block_size 128 (the preset's 256), which its weights fix (a new run from scratch can change them)"
    import dataclasses
    # (the preset's context shorter than the run's: a new run from its weights can take it)
    shallower = dataclasses.replace(parsed, n_layer=2, block_size=2 * parsed.block_size, tokenizer="gpt2")
    assert parsed.tokenizer != "gpt2"
    assert preset_not_applied(parsed, shallower, {"n_layer", "block_size", "tokenizer"}) == (
        "a --config preset is not applied to a resumed run, which keeps its own values: block_size "
        f"{2 * parsed.block_size} (the preset's {parsed.block_size}), which a resume cannot change (a new run from its "
        f"weights can); and n_layer 2 (the preset's {parsed.n_layer}), tokenizer 'gpt2' (the preset's "
        f"{parsed.tokenizer!r}), which its weights fix (a new run from scratch can change them)")
    argv = ["--config=shakespeare-cpu", "--init_from=resume"]  # the run's own: only what the run fitted is said
    parsed, keys = parse_args(argv)
    assert preset_not_applied(parsed, resume_config(saved, parsed, keys, typed=set()), keys) == (
        "a --config preset is not applied to a resumed run, which keeps its own values: max_iters 10 (the preset's 0); "
        "give an option on the command line to change it")
    assert preset_not_applied(parsed, resume_config({**saved, "max_iters": 0}, parsed, keys, typed=set()), keys) is None
    # but a preset's eval_only is this invocation's: it evaluates rather than trains (review 31)
    preset = tmp_path / "evaluate.toml"
    preset.write_text('init_from = "resume"\neval_only = true\nmax_iters = 99\n')
    parsed, keys = parse_args([f"--config={preset}"])
    resumed = resume_config(saved, parsed, keys, typed=set())
    assert resumed.eval_only and resumed.max_iters == 10



def test_a_preset_given_to_a_lora_runs_resume_is_compared_with_its_lora_table():
    # A LoRA run started with --config=finetune --lora_rank=8 trains at the preset's [lora] 2e-4; resumed with
    # --config=finetune --init_from=resume (the rank is the run's), the note said "learning_rate 0.0002 (the preset's
    # 3e-05), min_lr 2e-05 (the preset's 3e-06); give an option on the command line to change it": the full
    # fine-tune's rates as the preset's, which for this run are its [lora] table's (hunt 49-h H2)
    from gpt.config import preset_as_resumed, preset_not_applied

    argv = ["--config=finetune", "--init_from=resume"]
    for started, said in ((["--lora_rank=8"], None),
                          (["--lora_rank=8", "--learning_rate=1e-4"], "learning_rate 0.0001 (the preset's 0.0002)")):
        saved = parse_args(["--config=finetune", *started])[0].to_dict()
        parsed, keys = parse_args(argv)
        resumed = resume_config(saved, parsed, keys, typed=command_line_keys(argv))
        assert resumed.lora_rank == 8 and parsed.lora_rank == 0
        parsed, keys = preset_as_resumed(argv, parsed, keys, resumed)
        note = preset_not_applied(parsed, resumed, keys - command_line_keys(argv))
        assert note == (said and "a --config preset is not applied to a resumed run, which keeps its own values: "
                        f"{said}; give an option on the command line to change it")
    saved = parse_args(["--config=finetune"])[0].to_dict()  # a full fine-tune's resume: the preset's own rates
    parsed, keys = parse_args(argv)
    resumed = resume_config({**saved, "learning_rate": 1e-4}, parsed, keys, typed=command_line_keys(argv))
    assert preset_as_resumed(argv, parsed, keys, resumed) == (parsed, keys)
    assert "learning_rate 0.0001 (the preset's 3e-05)" in preset_not_applied(parsed, resumed, keys - command_line_keys(argv))


def test_a_resume_checks_the_options_given_against_the_saved_count_not_the_default_budget():
    # --warmup_iters=2 alone was refused: "max_iters 0 fixes the step count ... warmup_iters must be >= 10"
    cfg, keys = parse_args(["--init_from=resume", "--warmup_iters=2"])
    assert keys == {"init_from", "warmup_iters"}
    assert resume_config(TrainConfig(max_iters=10).to_dict(), cfg, keys).max_iters == 10
    with pytest.raises(ConfigError, match="warmup_iters must be >= 10"):  # a budgeted run's warmup still needs them
        resume_config(TrainConfig().to_dict(), cfg, keys)
    with pytest.raises(ConfigError, match="warmup_iters must be >= 10"):  # and a new run's
        parse_args(["--warmup_iters=2"])


def test_resume_with_fp8_off_turns_the_float8_head_off_too():
    saved = TrainConfig(fp8=True, fp8_head=True).to_dict()
    cfg, keys = parse_args(["--init_from=resume", "--fp8=false"])  # e.g. resumed on a GPU without float8
    merged = resume_config(saved, cfg, keys)
    assert (merged.fp8, merged.fp8_head) == (False, False)
    cfg, keys = parse_args(["--init_from=resume", "--max_iters=9"])
    assert resume_config(saved, cfg, keys).fp8_head is True  # kept where nothing asks otherwise


def test_resume_takes_the_architecture_from_the_checkpoints_model_config():
    # A run saved before `activation` existed: its train config lacks the key and its model is
    # GPT-2's tanh GELU (the GPTConfig default), whatever TrainConfig's default is now.
    from gpt.model import GPTConfig

    saved = TrainConfig().to_dict()
    del saved["activation"]
    old_model = GPTConfig(vocab_size=257, block_size=128, n_layer=4, n_head=4, n_embd=128).to_dict()
    del old_model["activation"]
    model_config = GPTConfig.from_dict(old_model).to_dict()
    cfg, keys = parse_args(["--init_from=resume"])
    assert resume_config(saved, cfg, keys, model_config).activation == "gelu_tanh"
    cfg, keys = parse_args(["--init_from=resume", "--activation=gelu"])
    with pytest.raises(ValueError, match="activation: checkpoint 'gelu_tanh', now 'gelu'"):
        resume_config(saved, cfg, keys, model_config)
    # A run from pretrained weights: the model's shape, not the ignored defaults, is the config.
    gpt2_small = GPTConfig(n_layer=12, n_head=12, n_embd=768).to_dict()
    cfg, keys = parse_args(["--init_from=resume"])
    merged = resume_config(TrainConfig(init_from="gpt2").to_dict(), cfg, keys, gpt2_small)
    assert (merged.n_layer, merged.n_head, merged.n_embd, merged.activation) == (12, 12, 768, "gelu_tanh")
    assert (merged.qk_norm, merged.qk_scale) == (False, 1.0)  # GPT-2's attention, whatever TrainConfig's default


def test_resume_of_a_run_saved_before_qk_norm_keeps_attention_without_it():
    from gpt.model import GPTConfig

    assert (TrainConfig().qk_norm, TrainConfig().qk_scale) == (True, 2.0)  # the CPU default since issue 11's third round
    saved = TrainConfig().to_dict()
    del saved["qk_norm"], saved["qk_scale"]
    old_model = GPTConfig(vocab_size=257, block_size=128, n_layer=4, n_head=4, n_embd=128).to_dict()
    del old_model["qk_norm"], old_model["qk_scale"]
    model_config = GPTConfig.from_dict(old_model).to_dict()
    cfg, keys = parse_args(["--init_from=resume"])
    for merged in (resume_config(saved, cfg, keys, model_config), resume_config(saved, cfg, keys)):
        assert (merged.qk_norm, merged.qk_scale) == (False, 1.0)  # with or without the model config at hand
    cfg, keys = parse_args(["--init_from=resume", "--qk_norm=true"])
    with pytest.raises(ValueError, match="qk_norm: checkpoint False, now True"):
        resume_config(saved, cfg, keys, model_config)


def test_resume_keeps_the_saved_optimizer_and_the_recipe_of_runs_saved_before_the_options():
    saved = TrainConfig(optimizer="muon", lr_schedule="wsd").to_dict()
    cfg, keys = parse_args(["--init_from=resume"])
    merged = resume_config(saved, cfg, keys)
    assert (merged.optimizer, merged.lr_schedule) == ("muon", "wsd")
    cfg, keys = parse_args(["--init_from=resume", "--optimizer=adamw"])
    with pytest.raises(ValueError, match="optimizer: checkpoint 'muon', now 'adamw'"):
        resume_config(saved, cfg, keys)
    old = TrainConfig().to_dict()
    for key in ("optimizer", "lr_schedule", "label_smoothing"):
        del old[key]  # saved before issue 11: AdamW, cosine, no smoothing, whatever the defaults are now
    cfg, keys = parse_args(["--init_from=resume"])
    merged = resume_config(old, cfg, keys)
    assert (merged.optimizer, merged.lr_schedule, merged.label_smoothing) == ("adamw", "cosine", 0.0)


def test_a_resume_refused_for_another_kind_of_run_is_not_advised_the_other_kinds_rates():
    # A LoRA run resumed with --lora_rank=0 was advised a full fine-tune at its adapters' AdamW rate, some ten times a
    # full fine-tune's (the finetune preset's [lora] 2e-4, with its --optimizer=adamw; or a typed 1e-2), and those
    # rates, typed, silenced the new run's note on a from-scratch recipe (hunt 52-l L2). The reverse too
    way = "(to start a new run from these weights with these options, give them with --init_from=L --data=notes "

    def advice(saved: TrainConfig, *typed: str) -> str:
        cfg, keys = parse_args(["--init_from=resume", "--out_dir=L", *typed])
        with pytest.raises(ConfigError) as err:
            resume_config(saved.to_dict(), cfg, keys)
        assert str(err.value).splitlines()[-1].startswith(way), str(err.value)
        return str(err.value).splitlines()[-1].removeprefix(way)

    lora = TrainConfig(init_from="base", data="notes", lora_rank=4, learning_rate=1e-2, min_lr=1e-3, warmup_iters=0,
                      max_iters=10)
    assert advice(lora, "--lora_rank=0") == (
        "--warmup_iters=0 --out_dir=<another directory>; the run's learning rates (AdamW at 0.01) were its adapters', "
        "which take some ten times a full fine-tune's: give a full fine-tune's too (--config=finetune, or your own "
        "--optimizer, --learning_rate and --min_lr))")
    preset, _ = parse_args(["--config=finetune", "--init_from=base", "--data=notes", "--lora_rank=4"])
    assert (preset.optimizer, preset.learning_rate) == ("adamw", 2e-4)  # (its [lora] table's)
    assert advice(preset, "--lora_rank=0").startswith(
        "--warmup_iters=20 --weight_decay=0.0 --dropout=0.1 --out_dir=<another directory>; the run's learning rates "
        "(AdamW at 0.0002) were its adapters'")
    full = TrainConfig(init_from="base", data="notes", learning_rate=1e-2, min_lr=1e-3, max_iters=10)
    assert advice(full, "--lora_rank=4") == (
        "--lora_rank=4 --out_dir=<another directory>; the run's learning rates (Muon at 0.015 and AdamW "
        "at 0.01) trained every weight, and adapters take some ten times a full fine-tune's: give a LoRA run's too "
        "(--config=finetune gives them with --lora_rank, or your own --learning_rate and --min_lr))")
    # rates typed with the other rank: those alone (the run's min_lr was its adapters' too)
    assert advice(lora, "--lora_rank=0", "--learning_rate=3e-3") == (
        "--learning_rate=0.003 --warmup_iters=0 --out_dir=<another directory>)")
    # a typed --min_lr or --optimizer brought the adapters' 0.01 back into a full fine-tune's advice (hunt 52-y Y4)
    for typed, options in (("--min_lr=1e-5", "--min_lr=1e-05 "), ("--optimizer=adamw", "--optimizer=adamw ")):
        assert advice(lora, "--lora_rank=0", typed) == (
            f"{options}--warmup_iters=0 --out_dir=<another directory>; the run's learning rates (AdamW at 0.01) were "
            "its adapters', which take some ten times a full fine-tune's: give a full fine-tune's too "
            "(--config=finetune, or your own --optimizer, --learning_rate and --min_lr))")
    # another rank of the same kind: the run's rates, as before
    assert advice(lora, "--lora_rank=8") == (
        "--learning_rate=0.01 --min_lr=0.001 --warmup_iters=0 --lora_rank=8 --out_dir=<another directory>)")


@pytest.mark.parametrize("argv, error", [
    (["--decay_fraction=0.5"], "--decay_fraction applies to --lr_schedule=wsd, and this run's --lr_schedule is cosine: "
                               "leave it out, or give --lr_schedule=wsd"),
    (["--lr_schedule=constant", "--min_lr=1e-5", "--lr_decay_iters=500"],
     "--min_lr applies to --lr_schedule=cosine or wsd, and this run's --lr_schedule is constant: leave it out, or "
     "give --lr_schedule=cosine or wsd; --lr_decay_iters applies to --lr_schedule=cosine or wsd, and this run's "
     "--lr_schedule is constant: leave it out, or give --lr_schedule=cosine or wsd"),
    (["--optimizer=adamw", "--muon_learning_rate=0.02"],
     "--muon_learning_rate applies to --optimizer=muon, and this run's --optimizer is adamw: leave it out, or give "
     "--optimizer=muon"),
    (["--lora_alpha=32"], "--lora_alpha applies to LoRA runs, and this run trains every weight: leave it out, or give "
                          "--lora_rank"),
    (["--lora_dropout=0.1"], "--lora_dropout applies to LoRA runs, and this run trains every weight: leave it out, "
                             "or give --lora_rank"),
    # (Muon trains none of a LoRA run's weights: its rate was ignored in silence, hunt 34-b B13)
    (["--init_from=gpt2", "--lora_rank=4", "--muon_learning_rate=0.02"],
     "--muon_learning_rate applies to Muon, and this LoRA run trains only its adapters, which AdamW trains at "
     "--learning_rate: leave it out, or give --lora_rank=0"),
    # (the rate dropped from the warmup's ramp straight to min_lr: hunt 29-a)
    (["--warmup_iters=50", "--lr_decay_iters=50"], "--lr_decay_iters=50 ends the decay within the 50-step warmup, "
                                                   "before it begins: give a larger one, or fewer --warmup_iters"),
])
def test_an_option_typed_where_it_has_no_effect_is_refused(argv, error):
    # Hunt 28-a F10: each was ignored in silence
    cfg, _ = parse_args(argv)
    with pytest.raises(ConfigError, match="^" + re.escape(error) + "$"):
        check_options_apply(cfg, command_line_keys(argv))


def test_a_decay_that_ends_within_the_warmup_is_refused_wherever_its_values_come_from(tmp_path):
    # a preset's lr_decay_iters, or a --warmup_iters typed past it: the rate fell from the warmup's 2.73e-3 to
    # min_lr's 3e-4 at step 10 without a word, where the same values typed were refused (hunt 44-f F3)
    preset = tmp_path / "p.toml"
    preset.write_text("warmup_iters = 10\nlr_decay_iters = 5\nmax_iters = 14\n")
    error = ("--lr_decay_iters=5 ends the decay within the 10-step warmup, before it begins: give a larger one, or "
             "fewer --warmup_iters")
    for argv in ([f"--config={preset}"], [f"--config={preset}", "--warmup_iters=5"],
                 ["--lr_decay_iters=5", "--max_iters=14", "--config", str(preset)]):
        cfg, _ = parse_args(argv)
        with pytest.raises(ConfigError, match="^" + re.escape(error.replace("10-step", f"{cfg.warmup_iters}-step")) + "$"):
            check_options_apply(cfg, command_line_keys(argv))
    cfg, _ = parse_args(argv := [f"--config={preset}", "--warmup_iters=4"])
    check_options_apply(cfg, command_line_keys(argv))  # the decay begins after the warmup
    # noam and constant have no decay: a preset's lr_decay_iters means nothing to them (and typed, --lr_decay_iters
    # is refused as an option without effect, not as a decay within the warmup)
    cfg, _ = parse_args(argv := [f"--config={preset}", "--lr_schedule=noam"])
    check_options_apply(cfg, command_line_keys(argv))


@pytest.mark.parametrize("schedule", ["noam", "constant"])
def test_a_schedule_without_a_floor_runs_below_the_default_min_lr(schedule):
    # min_lr > learning_rate was refused whatever the schedule, and --min_lr is refused with noam and constant,
    # so the default 4e-4 made every noam or constant run below 4e-4 impossible (hunt 35-e E2)
    argv = [f"--lr_schedule={schedule}", "--learning_rate=1e-4"]
    cfg, _ = parse_args(argv)
    check_options_apply(cfg, command_line_keys(argv))
    assert (cfg.lr_schedule, cfg.learning_rate, cfg.min_lr) == (schedule, 1e-4, 4e-4)
    for decaying in ("cosine", "wsd"):  # where the rate decays to min_lr, it is still refused
        with pytest.raises(ConfigError, match=re.escape("min_lr (0.0004) must not exceed learning_rate (0.0001)")):
            parse_args([f"--lr_schedule={decaying}", "--learning_rate=1e-4"])


def test_a_learning_rate_below_the_default_min_lr_is_refused_with_the_way_on_that_the_fine_tune_note_names():
    # The note for a new run from trained weights at the from-scratch recipe advised "your own --optimizer and
    # --learning_rate"; a fine-tune's rate typed so met the default min_lr 4e-4 and was refused, "min_lr (0.0004) must
    # not exceed learning_rate (3e-05)", with no word of how on (hunt 48-d D2)
    from gpt.config import scratch_recipe_note
    note = scratch_recipe_note(parse_args(["--init_from=out"])[0], {"init_from"}, preset_given=False)
    assert note.endswith("or your own --optimizer, --learning_rate and --min_lr")
    # A LoRA run's weights stay as they are: "rates that can undo what they learned" was said of its frozen weights,
    # and the finetune preset's way to adapters' rates is its [lora] table (hunt 49-h H8)
    cfg, typed = parse_args(["--init_from=out", "--lora_rank=8"])
    note = scratch_recipe_note(cfg, typed, preset_given=False)
    assert note == ("--init_from=out trains LoRA adapters at the from-scratch recipe (AdamW at 0.004, weight decay "
                    "0.1), not at a fine-tune's rates; for those give --config=finetune (its [lora] table's), or your "
                    "own --learning_rate and --min_lr")
    assert parse_args(["--config=finetune", "--init_from=out", "--lora_rank=8"])[0].learning_rate == 2e-4
    with pytest.raises(ConfigError, match=re.escape("min_lr (0.0004) must not exceed learning_rate (3e-05): the decay "
                                                    "ends at min_lr; give a lower --min_lr (--min_lr=3e-06 is a tenth "
                                                    "of it, as the defaults have)")):
        parse_args(["--init_from=out", "--optimizer=adamw", "--learning_rate=3e-5"])
    cfg, _ = parse_args(["--init_from=out", "--optimizer=adamw", "--learning_rate=3e-5", "--min_lr=3e-06"])
    assert (cfg.learning_rate, cfg.min_lr) == (3e-5, 3e-6)


def test_a_second_config_preset_is_refused_not_applied_in_place_of_the_first():
    # --config=finetune --config=my.toml applied my.toml alone, finetune's init_from and rates dropped without a word
    # (hunt 48-d D4); the same preset twice is the same run
    with pytest.raises(ConfigError, match=r"^--config given twice \(finetune, gpt2-124m\): a run takes one preset, "
                                          r"with --key=value options on top; for both, copy the values you want into "
                                          r"one TOML file$"):
        parse_args(["--config=finetune", "--n_layer=2", "--config", "gpt2-124m"])
    assert parse_args(["--config=finetune", "--config=finetune"])[0] == parse_args(["--config=finetune"])[0]


def test_options_typed_where_they_apply_and_a_presets_values_are_not_refused(tmp_path):
    for argv in (["--lr_schedule=wsd", "--decay_fraction=0.5", "--min_lr=1e-5"], ["--init_from=gpt2", "--lora_rank=4", "--lora_alpha=8"],
                 ["--optimizer=muon", "--muon_learning_rate=0.02"]):
        cfg, _ = parse_args(argv)
        check_options_apply(cfg, command_line_keys(argv))
    preset = tmp_path / "p.toml"  # a preset serves several schedules: its min_lr stays quiet under constant
    preset.write_text("min_lr = 1e-5\ndecay_fraction = 0.3\n")
    argv = [f"--config={preset}", "--lr_schedule=constant"]
    cfg, keys = parse_args(argv)
    assert {"min_lr", "decay_fraction"} <= keys
    check_options_apply(cfg, command_line_keys(argv))
    # resumed, the optimizer and LoRA rank are the run's: the way on is to leave the option out (review 29)
    cfg = resume_config(TrainConfig(optimizer="adamw").to_dict(), *parse_args(["--init_from=resume",
                                                                               "--muon_learning_rate=0.02"]))
    with pytest.raises(ConfigError, match=re.escape("this run's --optimizer is adamw: leave it out (a resumed run "
                                                    "keeps its --optimizer)") + "$"):
        check_options_apply(cfg, {"init_from", "muon_learning_rate"})
    # a resumed LoRA run's rank is its saved one: --lora_dropout applies
    merged = resume_config(TrainConfig(init_from="gpt2", lora_rank=4).to_dict(),
                           *parse_args(["--init_from=resume", "--lora_dropout=0.1"]))
    check_options_apply(merged, {"init_from", "lora_dropout"})


def test_an_empty_config_is_refused_naming_the_presets():
    # (it ran with no preset: hunt 28-a F10)
    for argv in (["--config="], ["--config", " "]):
        with pytest.raises(ConfigError, match=r"--config is empty: give a preset's name \(.*gpt2-124m.*\) or a TOML file"):
            parse_args(argv)


def test_resume_with_another_seed_is_refused_and_with_the_same_seed_runs():
    # Hunt 28-a F8: the run continued the saved data order and random streams, and recorded the
    # typed seed as if it had been used
    saved = TrainConfig(seed=1337).to_dict()
    cfg, keys = parse_args(["--init_from=resume", "--seed=5"])
    with pytest.raises(ValueError, match=re.escape("cannot resume with a different architecture, tokenizer, data, "
                                                   "optimizer or seed:\n  seed: checkpoint 1337, now 5")):
        resume_config(saved, cfg, keys)
    cfg, keys = parse_args(["--init_from=resume", "--seed=1337"])
    assert resume_config(saved, cfg, keys).seed == 1337
    cfg, keys = parse_args(["--init_from=resume", "--seed=5", "--eval_only=true"])  # draws nothing: let be (review 29)
    assert resume_config(saved, cfg, keys).eval_only


def test_an_evaluation_takes_the_optimizer_and_schedule_options_and_does_not_use_them():
    # --eval_only steps no optimizer and follows no schedule: "--optimizer=adamw" on a Muon run was refused as a
    # different optimizer, and --min_lr beside the run's constant schedule as not applying, where the README says
    # such options are taken and not used (hunt 49-l L3)
    saved = TrainConfig(optimizer="muon", lr_schedule="constant").to_dict()
    for argv in (["--optimizer=adamw"], ["--optimizer=adamw", "--muon_learning_rate=0.02"], ["--min_lr=1e-5"],
                 ["--lr_schedule=cosine", "--lr_decay_iters=1", "--warmup_iters=5"]):
        argv = ["--init_from=resume", "--eval_only=true", *argv]
        cfg = resume_config(saved, *parse_args(argv))
        check_options_apply(cfg, command_line_keys(argv))
    # what the weights are is still checked (their LoRA options), and a training run is refused as before
    argv = ["--init_from=resume", "--eval_only=true", "--lora_alpha=4"]
    with pytest.raises(ConfigError, match=r"^--lora_alpha applies to LoRA runs"):
        check_options_apply(parse_args(argv)[0], command_line_keys(argv))
    with pytest.raises(ValueError, match="optimizer: checkpoint 'muon', now 'adamw'"):
        resume_config(saved, *parse_args(["--init_from=resume", "--optimizer=adamw"]))


def test_a_resume_checks_its_min_lr_learning_rate_and_fp8_head_against_the_runs_own_values():
    # parse_args checked them against the defaults before the saved config was read: a run at learning_rate 1e-2
    # resumed with --min_lr=5e-3 was refused, "min_lr (0.005) must not exceed learning_rate (0.004)" (the default's);
    # one whose min_lr is 1e-4 with --learning_rate=2e-4, against the default min_lr 4e-4; an fp8 run with
    # --fp8_head=true, "it needs fp8=true" (hunt 46-a A1)
    saved = TrainConfig(learning_rate=1e-2, min_lr=1e-4, fp8=True, max_iters=10).to_dict()
    for typed, value in (("min_lr", 5e-3), ("learning_rate", 2e-4), ("fp8_head", True)):
        resumed = resume_config(saved, *parse_args(["--init_from=resume", f"--{typed}={value}"]))
        assert getattr(resumed, typed) == value
        assert (resumed.learning_rate, resumed.min_lr, resumed.fp8) == ({"learning_rate": 2e-4}.get(typed, 1e-2),
                                                                         {"min_lr": 5e-3}.get(typed, 1e-4), True)
    # the merged config is still checked, naming the run's values; a value wrong on its own is refused at once
    with pytest.raises(ConfigError, match=re.escape("min_lr (0.02) must not exceed learning_rate (0.01)")):
        resume_config(saved, *parse_args(["--init_from=resume", "--min_lr=2e-2"]))
    with pytest.raises(ConfigError, match=re.escape("fp8_head puts the head in float8 beside the blocks")):
        resume_config(TrainConfig(max_iters=10).to_dict(), *parse_args(["--init_from=resume", "--fp8_head=true"]))
    with pytest.raises(ConfigError, match=re.escape("min_lr must be >= 0, got -1.0")):
        parse_args(["--init_from=resume", "--min_lr=-1"])
    # and what parse_args returns is what was typed, or the default where nothing was
    cfg, _ = parse_args(["--init_from=resume", "--learning_rate=2e-4"])
    assert (cfg.min_lr, cfg.weight_decay, cfg.fp8_head) == (4e-4, 0.1, False)


def test_a_resume_compares_its_typed_sizes_with_the_weights_not_with_the_defaults():
    # parse_args checked them against the defaults' other sizes: a run of n_embd 48 resumed with its own --n_head=3 was
    # refused, "n_embd (128) must be divisible by n_head (3)", and with --n_head=6 so too, not as another architecture
    # (hunt 46-a A4)
    saved = TrainConfig(n_embd=48, n_head=3, max_iters=10).to_dict()
    assert resume_config(saved, *parse_args(["--init_from=resume", "--n_head=3"])).n_head == 3
    with pytest.raises(ConfigError, match=re.escape("cannot resume with a different architecture, tokenizer, data, "
                                                    "optimizer or seed:\n  n_head: checkpoint 3, now 6\n")):
        resume_config(saved, *parse_args(["--init_from=resume", "--n_head=6"]))
    with pytest.raises(ConfigError, match=re.escape("n_head must be > 0, got 0")):  # wrong on its own: at once
        parse_args(["--init_from=resume", "--n_head=0"])
    with pytest.raises(ConfigError, match=re.escape("n_embd (128) must be divisible by n_head (3)")):  # a new run: as before
        parse_args(["--n_head=3"])


@pytest.mark.parametrize("spelling, value", [("False", "false"), ("false", "false"), ("0", "false"), ("NO", "false"),
                                             ("True", "true"), ("yes", "true"), ("1", "true"), ("Auto", "auto")])
def test_booleans_as_nanogpt_users_type_them(spelling, value):
    cfg, _ = parse_args([f"--compile={spelling}", f"--bias={spelling if value != 'auto' else 'true'}"])
    assert cfg.compile == value and cfg.bias == (value != "false")


def test_booleans_in_toml_presets(tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text('compile = "False"\nbias = "yes"\neval_only = false\n')
    cfg, _ = parse_args([f"--config={preset}"])
    assert (cfg.compile, cfg.bias, cfg.eval_only) == ("false", True, False)
    with pytest.raises(ConfigError, match="compile must be one of auto, true, regional, reduce-overhead, false, got 'maybe'"):
        parse_args(["--compile=maybe"])
    assert parse_args(["--compile=Regional"])[0].compile == "regional"  # one block's graph for all blocks
    assert parse_args(["--compile=Reduce-Overhead"])[0].compile == "reduce-overhead"  # torch.compile's mode name


def test_toml_integers_0_and_1_are_booleans_in_presets(tmp_path):
    # (hunt, session 24) the README says 1/0 are booleans in TOML presets too: `bias = 1` was refused
    # ("--bias expects bool, got 1") while `bias = "1"` passed
    preset = tmp_path / "p.toml"
    for written, value in (("1", True), ("0", False)):
        preset.write_text(f"bias = {written}\nqk_norm = {written}\ncompile = {written}\n")
        cfg, _ = parse_args([f"--config={preset}"])
        assert (cfg.bias, cfg.qk_norm, cfg.compile) == (value, value, str(value).lower())
    for key in ("bias", "compile"):  # other integers are no booleans
        preset.write_text(f"{key} = 2\n")
        with pytest.raises(ConfigError, match="expects"):
            parse_args([f"--config={preset}"])


def test_cuda_graphs_of_the_whole_step_run_in_one_process():
    # --compile=reduce-overhead with DDP: inductor's CUDA graph trees and DDP's all-reduce hooks
    # are refused rather than guessed at (pytorch/pytorch#128218: a crash after training)
    TrainConfig(compile="reduce-overhead").validate(world_size=1)
    with pytest.raises(ConfigError, match="compile=reduce-overhead runs in one process: under torchrun use --compile=true"):
        TrainConfig(compile="reduce-overhead", gradient_accumulation_steps=2).validate(world_size=2)
    TrainConfig(compile="true", gradient_accumulation_steps=2).validate(world_size=2)


def test_config_errors_are_usage_errors_and_value_errors():
    from gpt.errors import UsageError

    with pytest.raises(ConfigError) as err:
        parse_args(["--n_layer=0"])
    assert isinstance(err.value, UsageError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize("argv, world, expected, note", [
    ([], 2, 2, "gradient_accumulation_steps 1 -> 2, the smallest multiple of 2 processes (one share each): "
               "tokens per step 2,048 -> 4,096"),
    (["--config=gpt2-124m"], 3, 18, "gradient_accumulation_steps 16 -> 18, the smallest multiple of 3 processes "
                                     "(6 micro-batches each): tokens per step 524,288 -> 589,824"),
    (["--config=gpt2-124m"], 8, 16, None),  # divides: kept
    ([], 1, 1, None),
    (["--gradient_accumulation_steps=3"], 2, 3, None),  # the user's value: left for validate() to refuse
])
def test_unset_accumulation_fits_the_process_count(argv, world, expected, note):
    from gpt.config import accumulation_note, command_line_keys, fit_accumulation

    cfg, _ = parse_args(argv)
    fitted, replaced = fit_accumulation(cfg, world, "gradient_accumulation_steps" in command_line_keys(argv))
    assert fitted.gradient_accumulation_steps == expected
    assert (replaced is None) if note is None else accumulation_note(fitted, replaced, world).startswith(note)
    if expected % world:
        with pytest.raises(ConfigError, match="divisible by the number of processes"):
            fitted.validate(world)
    else:
        fitted.validate(world)


def test_the_accumulation_note_says_each_process_share(tmp_path):
    # (hunt, session 24) a preset's 3 under 2 processes became 4 with a note of "(one share each)",
    # though each process runs 2 micro-batches
    from gpt.config import accumulation_note, fit_accumulation

    preset = tmp_path / "p.toml"
    preset.write_text("gradient_accumulation_steps = 3\n")
    fitted, replaced = fit_accumulation(parse_args([f"--config={preset}"])[0], 2, user_set=False)
    said = accumulation_note(fitted, replaced, 2)
    assert fitted.gradient_accumulation_steps == 4
    assert "4, the smallest multiple of 2 processes (2 micro-batches each): tokens per step 6,144 -> 8,192" in said
    fitted.validate(2)


@pytest.mark.parametrize("argv, message", [
    (["--bias", "--n_layer=1"], "--bias needs a value: --bias=true or --bias=false"),
    (["--eval-only", "--max_iters", "5"], "--eval-only needs a value: --eval-only=true or --eval-only=false"),
    (["--n_layer=1", "--bias"], "--bias needs a value: --bias=true or --bias=false"),  # last: no value either
    (["--out_dir", "--bias=true"], "--out_dir needs a value (--out_dir=VALUE)"),  # was out_dir '--bias=true'
    (["--config", "--n_layer=1"], "--config needs a value (--config=VALUE)"),
])
def test_an_option_with_another_option_for_its_value_is_refused(argv, message):
    # (hunt, session 24) nanoGPT's bare `--bias --n_layer=1` said "--bias expects bool, got '--n_layer=1'"
    with pytest.raises(ConfigError, match="^" + re.escape(message) + "$"):
        parse_args(argv)
    with pytest.raises(ConfigError, match="unknown option --biass"):  # an unknown option: said as such
        parse_args(["--biass", "--n_layer=1"])
    cfg, _ = parse_args(["--bias", "true", "--out_dir=--odd", "--seed", "-0", "--n_layer", "1"])  # still values
    assert (cfg.bias, cfg.out_dir, cfg.seed, cfg.n_layer) == (True, "--odd", 0, 1)


def test_command_line_keys_leave_out_the_preset():
    from gpt.config import command_line_keys

    assert command_line_keys(["--config=gpt2-124m", "--max-iters", "5", "--compile=false"]) == {"max_iters", "compile"}


def test_fp8_and_lora_are_refused_together():
    with pytest.raises(ConfigError, match="fp8 speeds up training all the weights; with lora_rank"):
        parse_args(["--fp8=true", "--lora_rank=8", "--init_from=gpt2"])
    assert parse_args(["--fp8=true"])[0].fp8 is True


def test_fp8_needs_a_micro_batch_of_a_multiple_of_16_tokens():
    # the float8 matmul of a weight's gradient runs over the micro-batch's tokens, and CUDA's
    # torch._scaled_mm needs that inner size to be a multiple of 16: refused before it starts
    with pytest.raises(ConfigError, match=r"fp8: the weights' gradients are float8 matmuls over the micro-batch's "
                                          r"batch_size x block_size = 24 tokens, which must be a multiple of 16"):
        parse_args(["--fp8=true", "--batch_size=3", "--block_size=8"])
    assert parse_args(["--fp8=true", "--batch_size=2", "--block_size=8"])[0].fp8 is True
    assert parse_args(["--batch_size=3", "--block_size=8"])[0].batch_size == 3  # without fp8: any size


def test_fp8_head_needs_fp8():
    with pytest.raises(ConfigError, match="fp8_head puts the head in float8 beside the blocks: it needs fp8=true"):
        parse_args(["--fp8_head=true"])
    assert parse_args(["--fp8=true", "--fp8_head=true"])[0].fp8_head is True


@pytest.mark.parametrize("arg, needle", [
    ("--seed=-1", "seed must be in [0, 2**64 - 1], got -1"),  # numpy's data order refused it mid-setup
    ("--seed=18446744073709551616", "seed must be in [0, 2**64 - 1]"),  # torch's manual_seed: overflow
    ("--lora_alpha=inf", "--lora_alpha must be a finite number"),  # LoRAConfig refused it mid-setup
])
def test_values_that_failed_mid_setup_are_refused_up_front(arg, needle):
    with pytest.raises(ConfigError, match=needle.replace("*", r"\*").replace("[", r"\[")):
        parse_args([arg])
    assert parse_args(["--seed=18446744073709551615"])[0].seed == 2**64 - 1


def test_an_infinite_lora_alpha_given_in_python_is_refused_by_validate():  # not only on the command line
    with pytest.raises(ConfigError, match="lora_alpha must be finite and > 0"):
        TrainConfig(lora_alpha=float("inf")).validate()


def test_a_lora_alpha_and_a_lora_dropout_out_of_range_are_each_named_alone():
    # --lora_dropout=1.0 was told "lora_alpha must be finite and > 0 and lora_dropout in [0, 1), got 16.0, 1.0",
    # naming a lora_alpha that was fine (hunt 51-f L4)
    with pytest.raises(ConfigError) as refused:
        TrainConfig(lora_dropout=1.0).validate()
    assert str(refused.value).splitlines()[1:] == ["  lora_dropout must be in [0, 1), got 1.0"]
    with pytest.raises(ConfigError) as refused:
        TrainConfig(lora_alpha=0.0, lora_dropout=-0.5).validate()
    assert str(refused.value).splitlines()[1:] == ["  lora_alpha must be finite and > 0, got 0.0",
                                                   "  lora_dropout must be in [0, 1), got -0.5"]


def test_every_rank_seeds_within_range():  # rank r seeds with seed + r
    with pytest.raises(ConfigError, match=r"seed must be in \[0, 2\*\*64 - 2\]"):
        TrainConfig(seed=2**64 - 1, gradient_accumulation_steps=2).validate(world_size=2)
    TrainConfig(seed=2**64 - 2, gradient_accumulation_steps=2).validate(world_size=2)


@pytest.mark.parametrize("arg", ["--time_budget=nan", "--time_budget=inf", "--min_lr=nan", "--learning_rate=inf",
                                 "--muon_learning_rate=-inf", "--grad_clip=nan", "--weight_decay=NaN",
                                 "--qk_scale=inf"])
def test_non_finite_floats_are_refused_naming_the_option(arg):
    # nan passes every `x < 0` check, and both ended in tracebacks mid-run (int(nan), non-finite weights)
    key, _, value = arg[2:].partition("=")
    with pytest.raises(ConfigError, match=rf"^--{key} must be a finite number, got '{value}'$"):
        parse_args(["--max_iters=5", arg])


def test_non_finite_floats_in_a_toml_preset_are_refused(tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text("time_budget = inf\n")
    with pytest.raises(ConfigError, match=f"^time_budget = inf in {re.escape(str(preset))}: must be a finite number$"):
        parse_args([f"--config={preset}"])


@pytest.mark.parametrize("line, message", [
    ('bias = "maybe"', "bias = 'maybe' in {}: expects bool"),
    ("bias = 2", "bias = 2 in {}: expects bool"),
    ('n_layer = "two"', "n_layer = 'two' in {}: expects int"),
    ('learning_rate = "fast"', "learning_rate = 'fast' in {}: expects float"),
    ("out_dir = 3", "out_dir = 3 in {}: expects str"),
])
def test_a_bad_value_in_a_preset_names_the_file_and_the_key_as_written(tmp_path, line, message):
    # (hunt, session 24) a preset's unknown key named its file, a bad value only "--bias expects bool"
    preset = tmp_path / "p.toml"
    preset.write_text(line + "\n")
    with pytest.raises(ConfigError, match="^" + re.escape(message.format(preset)) + "$"):
        parse_args([f"--config={preset}"])
    key = line.partition(" ")[0]
    good = {"bias": "true", "n_layer": "2", "learning_rate": "1e-3", "out_dir": "out"}[key]
    assert parse_args([f"--config={preset}", f"--{key}={good}"])  # overridden on the command line: not read
    preset.write_text("n_layer = 2\n")
    with pytest.raises(ConfigError, match="^--bias expects bool, got 'maybe'$"):  # the command line's: as before
        parse_args([f"--config={preset}", "--bias=maybe"])


def test_a_bad_value_in_a_shipped_preset_names_its_file(monkeypatch, tmp_path):
    import gpt.config

    (tmp_path / "mine.toml").write_text('eval_only = "perhaps"\n')
    monkeypatch.setattr(gpt.config, "CONFIG_DIR", tmp_path)
    with pytest.raises(ConfigError, match=f"^eval_only = 'perhaps' in {re.escape(str(tmp_path / 'mine.toml'))}: "):
        parse_args(["--config=mine"])


@pytest.mark.parametrize("key", ["out_dir", "init_from", "data", "data_cache"])  # (--tokenizer=: not a choice)
def test_empty_paths_and_names_are_refused(key):
    # an empty path is the current directory: --out_dir= trained into it, --init_from= fine-tuned its run
    with pytest.raises(ConfigError, match=rf"\n  {key} must not be empty"):
        parse_args([f"--{key}="])
    with pytest.raises(ConfigError, match=rf"\n  {key} must not be empty"):
        parse_args([f"--{key}= "])


@pytest.mark.parametrize("key", ["out_dir", "data", "data_cache", "init_from"])
def test_a_path_that_can_name_nothing_is_refused(key, tmp_path):
    # Path.resolve() raises RuntimeError on a loop of links, and the existence checks OSError on a name
    # too long: a traceback from the first check that met it (hunt 32-c F2, F12)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(ConfigError, match=rf"\n  {key} {re.escape(str(tmp_path / 'a'))}: a loop of symbolic links$"):
        parse_args([f"--{key}={tmp_path / 'a'}"])
    long = tmp_path / ("x" * 300)
    with pytest.raises(ConfigError, match=rf"\n  {key} {re.escape(str(long))}: file name too long for the filesystem$"):
        parse_args([f"--{key}={long}"])
    parse_args([f"--{key}={tmp_path / 'c'}"])  # a path not there yet is fine


def test_a_preset_path_that_can_name_nothing_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="^config file '.*x{300}': file name too long for the filesystem$"):
        parse_args([f"--config={tmp_path / ('x' * 300)}"])


@pytest.mark.parametrize("argv, device, distributed, expected, note", [
    (["--config=shakespeare-gpu"], "cuda", False, "reduce-overhead", None),  # the GPU default: CUDA graphs
    (["--config=shakespeare-gpu"], "cuda", True, "auto", "compile reduce-overhead -> auto under torchrun"),
    (["--config=shakespeare-gpu"], "mps", False, "auto", None),  # a Mac's every default run: no note
    (["--config=shakespeare-gpu"], "cpu", False, "auto", None),
    (["--config=shakespeare-gpu", "--compile=reduce-overhead"], "cuda", True, "reduce-overhead", None),  # refused below
    (["--config=shakespeare-gpu", "--compile=true"], "cuda", True, "true", None),
    (["--config=gpt2-124m"], "cuda", True, "auto", None),
])
def test_the_presets_cuda_graphs_give_way_under_torchrun_and_off_cuda(argv, device, distributed, expected, note):
    # Issue 9: the GPU preset replays its step from CUDA graphs (one process, one CUDA device); a
    # multi-GPU run of the same preset compiles as before, and says so; MPS and the CPU too. The user's own
    # --compile=reduce-overhead is not changed: validate() refuses it under torchrun.
    from gpt.config import command_line_keys, fit_accumulation, fit_compile

    world = 2 if distributed else 1
    cfg, _ = fit_accumulation(parse_args(argv)[0], world, user_set=False)  # train.py fits both, then validates
    fitted, said = fit_compile(cfg, device, distributed, "compile" in command_line_keys(argv))
    assert fitted.compile == expected
    assert (said is None) if note is None else said.startswith(note)
    if expected == "reduce-overhead" and distributed:
        with pytest.raises(ConfigError, match="compile=reduce-overhead runs in one process"):
            fitted.validate(world)
    else:
        fitted.validate(world)


def test_a_folder_named_as_a_preset_does_not_shadow_it_and_unreadable_presets_are_one_line(tmp_path, monkeypatch):
    # a `finetune/` folder where train.py ran was taken for the preset (IsADirectoryError); a preset
    # that is not UTF-8 was a UnicodeDecodeError traceback (hunt 28-a)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "finetune").mkdir()
    assert parse_args(["--config=finetune"])[0].init_from == "gpt2"  # the shipped preset's
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe = 1\n")
    with pytest.raises(ConfigError, match=r"bin\.toml: not valid TOML: not UTF-8 \(invalid start byte at byte 0\)$"):
        parse_args(["--config=bin.toml"])
    (tmp_path / "dir.toml").mkdir()
    with pytest.raises(ConfigError, match=r"dir\.toml: Is a directory$"):
        parse_args(["--config=dir.toml"])


@pytest.mark.parametrize("args, needle", [
    (["--learning_rate=0"], "learning_rate must be > 0, got 0.0"),
    (["--learning_rate=-1"], "learning_rate must be > 0, got -1.0"),
    (["--pos_encoding=sinusoidal", "--n_head=3", "--n_embd=33"], "n_embd must be even for sinusoidal positions, got 33"),
    (["--config=nonexistent"], "config file 'nonexistent' not found; presets: "),
    (["foo"], "unexpected argument 'foo': options are --key=value"),
])
def test_checks_no_test_reached_are_one_clear_error(args, needle):
    # each worked when driven by hand, and no test ran it (hunt 33-b U6-U9)
    with pytest.raises(ConfigError) as e:
        parse_args(args)
    assert needle in str(e.value)


def test_train_py_help_lists_every_option():
    # never run by a test (hunt 33-b U1)
    import contextlib
    import dataclasses
    import io

    import train

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert train.main(["--help"]) == 0
    assert [f.name for f in dataclasses.fields(TrainConfig) if f"--{f.name}=" not in out.getvalue()] == []
    # and --config, which is no field: the presets were named only in the README (hunt 41-a A9)
    config_line = next((line for line in out.getvalue().splitlines() if line.startswith("  --config=NAME ")), "")
    from gpt.config import presets
    assert "shakespeare-cpu" in presets() and f"configs/NAME.toml ({presets()})" in config_line


def test_an_unknown_option_is_one_line_with_its_hint_and_a_preset_file_takes_no_config(tmp_path):
    # --confg got no "did you mean --config?" (hunt 41-d D3); a preset file takes no --config. One line: the
    # 56-line options table after it buried the hint (hunt 43-e N1); --help lists them
    with pytest.raises(ConfigError) as refused:
        parse_args(["--confg=shakespeare-cpu"])
    assert str(refused.value) == ("unknown option --confg in the command line (did you mean --config?); "
                                  "train.py --help lists them")
    with pytest.raises(ConfigError) as refused:
        parse_args(["learning_rate=1"])
    assert str(refused.value) == ("unexpected argument 'learning_rate=1': options are --key=value; "
                                  "train.py --help lists them")
    # a value with spaces, unquoted: the shell's two arguments (sample.py said so since hunt 50-f F2; one helper)
    with pytest.raises(ConfigError) as refused:
        parse_args(["--out_dir=my", "run", "--max_iters=3"])
    assert str(refused.value) == ("unexpected argument 'run' after --out_dir=my: a value with spaces must be quoted: "
                                  "--out_dir='my run'")
    (tmp_path / "p.toml").write_text('confg = "x"\n')
    with pytest.raises(ConfigError) as refused:
        parse_args([f"--config={tmp_path / 'p.toml'}"])
    assert "unknown option --confg in" in str(refused.value) and "--config" not in str(refused.value)


def test_a_word_after_a_value_is_offered_as_its_rest_only_where_that_makes_sense(tmp_path, monkeypatch):
    # `--init_from=resume out` (--out_dir=out meant) was advised "a value with spaces must be quoted: --init_from='resume
    # out'", a run that is nowhere, and --n_layer=2 4 was advised --n_layer='2 4' (hunt 51-r R2, 52-c C1)
    for typed in (["--init_from=resume", "out"], ["--n_layer=2", "4"], ["--data=a.txt", "b.txt"],
                  ["--init_from", "resume", "out"]):
        with pytest.raises(ConfigError) as refused:
            parse_args(typed)
        assert str(refused.value) == (f"unexpected argument {typed[-1]!r}: options are --key=value; "
                                      "train.py --help lists them")
    # ... but a path that is there, once joined, is the quoted value meant; so is any name of a directory to make
    (tmp_path / "my notes.txt").write_text("hi")
    monkeypatch.setenv("HOME", str(tmp_path))  # (~ is the home directory in --data, as typed after "=")
    for typed, meant in (([f"--data={tmp_path}/my", "notes.txt"], f"'{tmp_path}/my notes.txt'"),
                         (["--data=~/my", "notes.txt"], "'~/my notes.txt'"),
                         (["--data_cache=my", "cache", "-1"], "'my cache -1'"),
                         (["--out_dir", "my", "run"], "'my run'")):  # (--key VALUE: no hint before, hunt 52-c C8)
        with pytest.raises(ConfigError) as refused:
            parse_args(typed)
        assert str(refused.value).endswith(f"a value with spaces must be quoted: {typed[0].split('=')[0]}={meant}")


def test_a_short_option_after_a_value_is_not_said_to_be_the_rest_of_it():
    # `--out_dir=x -n 3`: "-n" is no word of --out_dir's value (the quoted form left it out), and the line said "a value
    # with spaces must be quoted: --out_dir=x", the very words typed (gpt.errors.unquoted_value, hunt 51-r R6)
    for stray in ("-n", "-"):
        with pytest.raises(ConfigError) as refused:
            parse_args(["--out_dir=x", stray, "3"])
        assert str(refused.value) == (f"unexpected argument {stray!r}: options are --key=value; "
                                      "train.py --help lists them")


def test_a_tilde_in_a_path_option_is_the_home_directory(monkeypatch, tmp_path):
    # the shell leaves a ~ after = as it is: --out_dir=~/x wrote the run into a folder named ~ here (hunt 34-b B9)
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg, _ = parse_args(["--out_dir=~/x", "--data_cache=~/cache", "--init_from=~/base", "--data=~/notes"])
    assert (cfg.out_dir, cfg.data_cache, cfg.init_from, cfg.data) == (f"{tmp_path}/x", f"{tmp_path}/cache",
                                                                      f"{tmp_path}/base", f"{tmp_path}/notes")
    assert parse_args(["--init_from=resume"])[0].init_from == "resume"


def test_a_resume_given_its_budget_preset_meets_the_runs_count_not_the_presets():
    # the preset's max_iters=0 (a budget), which a resume does not apply, refused the options given:
    # "warmup_iters must be >= 10, got 5" (hunt 34-b B6); the preset's value is still there for its note
    cfg, keys = parse_args(["--config=shakespeare-cpu", "--init_from=resume", "--warmup_iters=5"])
    assert cfg.max_iters == 0 and "max_iters" in keys and cfg.warmup_iters == 5


def test_a_path_with_a_nul_character_in_a_preset_is_one_line(tmp_path):
    # TOML's "\u0000" (argv cannot hold one): os.stat's ValueError "embedded null byte" was a traceback (hunt 43-e E3)
    for key in ("data", "out_dir", "data_cache", "init_from"):
        preset = tmp_path / f"{key}.toml"
        preset.write_text(f'{key} = "run\\u0000x"\n')
        with pytest.raises(ConfigError, match=f"{key} run\x00x: holds a NUL character, which no path can"):
            parse_args([f"--config={preset}", "--max_iters=2"])



def test_without_options_leaves_out_each_spelling_of_the_options_named():
    from gpt.config import without_options
    argv = ["--max_iters=0", "--n_layer", "2", "--time-budget", "40", "--data=x", "--max_iters", "--out_dir=o"]
    assert without_options(argv, {"max_iters", "time_budget"}) == ["--n_layer", "2", "--data=x", "--out_dir=o"]
    assert without_options(argv, set()) == argv
