"""LoRA (gpt/lora.py): fresh adapters change nothing, only adapters train, merge equals unmerged,
adapter checkpoints round-trip strictly, bad configs fail naming the field."""

import copy
import json
import re

import pytest
import torch
import torch.nn as nn

from gpt.lora import (LORA_TARGETS, LoRAConfig, LoRALinear, apply_lora, count_trainable, is_lora,
                      load_lora_state_dict, lora_state_dict, merge_lora, set_lora_dropout)
from gpt.model import GPT, GPTConfig, Linear

TINY = dict(vocab_size=97, block_size=32, n_layer=2, n_head=4, n_embd=32)


def tiny_model(seed=0, **overrides) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(**{**TINY, **overrides})).eval()


def batch(seed=1, B=4, T=16):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, TINY["vocab_size"], (B, T + 1), generator=g)
    return idx[:, :-1], idx[:, 1:]


def adapted(base: GPT, seed=2, **cfg) -> GPT:
    torch.manual_seed(seed)
    return apply_lora(copy.deepcopy(base), LoRAConfig(**{"rank": 4, **cfg}))


def train_adapters(model: GPT, steps=15, lr=1e-2) -> list[float]:
    x, y = batch()
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    losses = []
    for _ in range(steps):
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def logits(model: GPT, x: torch.Tensor) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(x)[0]


def hub_snapshot(model: GPT, tmp_path):
    """A snapshot of "gpt2" in a hub cache under tmp_path holding `model`'s export, copied there as the hub client
    leaves its files (save_pretrained refuses to write into one)."""
    import shutil

    model.save_pretrained(tmp_path / "export-for-the-hub")
    snapshot = tmp_path / "hub" / "models--gpt2" / "snapshots" / ("0" * 40)
    shutil.copytree(tmp_path / "export-for-the-hub", snapshot)
    return snapshot


@pytest.fixture(scope="module")
def trained():
    """(base, adapted copy with trained adapters, training losses)."""
    base = tiny_model()
    model = adapted(base)
    losses = train_adapters(model)
    return base, model, losses


# -- adapting --------------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
def test_fresh_adapters_compute_exactly_what_the_base_computes(bias):
    base = tiny_model(bias=bias)
    model = adapted(base, dropout=0.1)
    x, _ = batch()
    assert torch.equal(logits(model, x), logits(base, x))
    # the keys: base keys kept, adapters added beside them
    keys, base_keys = set(model.state_dict()), set(base.state_dict())
    assert base_keys <= keys
    assert "transformer.h.0.attn.c_attn.lora_A" in keys and "transformer.h.1.mlp.c_proj.lora_B" in keys
    assert len(keys - base_keys) == 2 * len(LORA_TARGETS) * TINY["n_layer"]
    a = model.transformer.h[0].attn.c_attn
    assert isinstance(a, LoRALinear) and not isinstance(a, Linear)
    assert a.lora_A.shape == (4, 32) and a.lora_B.shape == (96, 4) and not a.lora_B.any()
    assert a.lora_A.abs().sum() > 0
    assert type(model.lm_head) is Linear and model.lm_head.weight is model.transformer.wte.weight


def test_only_adapters_train_and_base_tensors_stay_bit_identical(trained):
    base, model, losses = trained
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(n.endswith((".lora_A", ".lora_B")) for n in trainable)
    assert len(trainable) == 2 * len(LORA_TARGETS) * TINY["n_layer"]
    assert losses[-1] < losses[0] - 0.2, losses
    sd, before = model.state_dict(), base.state_dict()
    for k, v in before.items():
        assert torch.equal(sd[k], v), f"base tensor {k} changed"
    assert all(p.grad is None for n, p in model.named_parameters() if not p.requires_grad)
    assert model.transformer.h[0].mlp.c_fc.lora_B.abs().sum() > 0  # the adapters did move


def test_an_adapted_layer_adds_its_update_scaled_by_alpha_over_rank_with_its_dropout():
    # Every other check compares the adapted model with itself (merged and unmerged, resumed and straight),
    # so a scale of alpha / sqrt(r) or adapters without their dropout passed (hunt 32-b LL1, LL2, LL3).
    torch.manual_seed(0)
    base = torch.nn.Linear(8, 6)
    layer = LoRALinear(base, rank=4, alpha=16.0, dropout=0.5)
    with torch.no_grad():
        layer.lora_B.normal_()
    x = torch.randn(64, 8)
    update = x @ layer.lora_A.t() @ layer.lora_B.t()
    layer.eval()
    torch.testing.assert_close(layer(x) - base(x), 4.0 * update)  # alpha / rank = 16 / 4
    layer.train()
    torch.manual_seed(1)
    mask = torch.nn.functional.dropout(torch.ones_like(x), 0.5)  # the mask the layer draws with the same seed
    torch.manual_seed(1)
    torch.testing.assert_close(layer(x) - base(x), 4.0 * ((x * mask) @ layer.lora_A.t() @ layer.lora_B.t()))
    assert not torch.allclose(mask, torch.ones_like(x))
    weight = base.weight.detach().clone()
    merged = layer.merged()
    torch.testing.assert_close(merged.weight - weight, 4.0 * layer.lora_B @ layer.lora_A)
    # apply_lora gives each adapter the config's dropout
    model = apply_lora(GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=16)),
                       LoRAConfig(rank=2, dropout=0.3))
    assert {m.lora_dropout.p for m in model.modules() if isinstance(m, LoRALinear)} == {0.3}
    # and set_lora_dropout (a resume's --lora_dropout) sets every adapter's and the config's (only test_train.py's
    # whole-run test pinned it: hunt 51-q Q9)
    set_lora_dropout(model, 0.1)
    assert {m.lora_dropout.p for m in model.modules() if isinstance(m, LoRALinear)} == {0.1}
    assert model.lora_config.dropout == 0.1


def test_count_trainable_and_is_lora():
    base = tiny_model()
    total = sum(p.numel() for p in base.parameters())
    assert count_trainable(base) == (total, total) and not is_lora(base)
    model = adapted(base, rank=2, targets=("attn.c_attn",))
    n_adapter = TINY["n_layer"] * 2 * (32 + 96)  # rank 2 x (in + out) per c_attn
    assert count_trainable(model) == (n_adapter, total + n_adapter)
    assert is_lora(model) and model.lora_config.rank == 2


def test_targets_select_the_projections():
    model = adapted(tiny_model(), targets=["mlp.c_fc"])  # a list, as JSON gives
    block = model.transformer.h[1]
    assert isinstance(block.mlp.c_fc, LoRALinear)
    assert type(block.mlp.c_proj) is Linear and type(block.attn.c_attn) is Linear


def test_applying_twice_is_an_error():
    model = adapted(tiny_model())
    with pytest.raises(ValueError, match="already has LoRA"):
        apply_lora(model, LoRAConfig(rank=2))


# -- merging -----------------------------------------------------------------------------------


def test_merge_equals_unmerged_and_gives_a_plain_model(trained, tmp_path):
    base, model, _ = trained
    model = copy.deepcopy(model)
    x, _ = batch(seed=3)
    unmerged = logits(model, x)
    assert not torch.allclose(unmerged, logits(base, x), atol=1e-4)  # training changed the outputs
    merged_model = merge_lora(model)
    assert merged_model is model and not is_lora(model) and not hasattr(model, "lora_config")
    torch.testing.assert_close(logits(model, x), unmerged, atol=1e-5, rtol=1e-5)
    assert list(model.state_dict()) == list(base.state_dict())
    assert all(type(m) is Linear for n, m in model.named_modules() if n.endswith(LORA_TARGETS))
    assert all(p.requires_grad for p in model.parameters())
    # a never-adapted GPT loads the merged weights strictly and computes the same
    fresh = tiny_model(seed=9)
    fresh.load_weights(model.state_dict())
    assert torch.equal(logits(fresh, x), logits(model, x))
    # and the GPT-2 export works on it
    pytest.importorskip("safetensors")
    model.save_pretrained(tmp_path / "hf")
    torch.testing.assert_close(logits(GPT.from_pretrained(str(tmp_path / "hf")), x), logits(model, x))
    with pytest.raises(ValueError, match="no LoRA adapters"):
        merge_lora(model)


def test_merge_without_bias():
    base = tiny_model(bias=False)
    model = adapted(base)
    train_adapters(model, steps=3)
    x, _ = batch()
    unmerged = logits(model, x)
    merge_lora(model)
    torch.testing.assert_close(logits(model, x), unmerged, atol=1e-5, rtol=1e-5)
    assert list(model.state_dict()) == list(base.state_dict())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_merge_rounds_w_plus_the_update_once(dtype):
    # the nearest value of the dtype to W + alpha / r · B A: the update rounded to bf16 and then added in bf16 was
    # rounded twice, and landed elsewhere on 30% of a bf16 merge's elements (hunt 46-c C1)
    torch.manual_seed(0)
    layer = LoRALinear(nn.Linear(32, 96).to(dtype), rank=4, alpha=16.0)
    with torch.no_grad():
        layer.lora_B.normal_(0, 0.05)
    exact = layer.weight.float() + (layer.lora_B.float() @ layer.lora_A.float()) * 4.0
    assert torch.equal(layer.merged().weight, exact.to(dtype))


def test_lora_layers_are_not_prepacked_and_bf16_generation_runs():
    model = adapted(tiny_model()).to(torch.bfloat16)
    x, _ = batch(B=1, T=5)
    ref = logits(model, x)
    with model.cpu_bf16_packed(1):
        assert all(getattr(m, "packed_weight", None) is None
                   for m in model.modules() if isinstance(m, LoRALinear))
        torch.testing.assert_close(logits(model, x), ref, atol=2e-2, rtol=2e-2)
    out = model.generate(x, 4, temperature=0.0)
    assert out.shape == (1, 9)


# -- adapter checkpoints -----------------------------------------------------------------------


def test_lora_state_dict_round_trips_into_a_fresh_adapted_copy(trained, tmp_path):
    base, model, _ = trained
    sd = lora_state_dict(model)
    assert sd and all(k.endswith((".lora_A", ".lora_B")) for k in sd)
    assert len(sd) == 2 * len(LORA_TARGETS) * TINY["n_layer"]
    torch.save(sd, tmp_path / "lora.pt")
    meta = json.loads(json.dumps(model.lora_config.to_dict()))

    other = adapted(base, seed=123, **meta)  # the config as a checkpoint's metadata gives it
    x, _ = batch(seed=4)
    assert not torch.equal(logits(other, x), logits(model, x))
    load_lora_state_dict(other, torch.load(tmp_path / "lora.pt", weights_only=True))
    assert torch.equal(logits(other, x), logits(model, x))


def test_load_lora_state_dict_is_strict(trained):
    base, model, _ = trained
    other = adapted(base)
    sd = lora_state_dict(model)
    missing = dict(sd)
    del missing["transformer.h.1.attn.c_proj.lora_A"]
    with pytest.raises(KeyError, match=r"missing keys \['transformer\.h\.1\.attn\.c_proj\.lora_A'\]"):
        load_lora_state_dict(other, missing)
    extra = {**sd, "transformer.h.7.mlp.c_fc.lora_B": torch.zeros(1)}
    with pytest.raises(KeyError, match=r"unexpected keys \['transformer\.h\.7\.mlp\.c_fc\.lora_B'\]"):
        load_lora_state_dict(other, extra)
    wrong_rank = lora_state_dict(adapted(base, rank=8))
    with pytest.raises(ValueError, match="lora_A"):
        load_lora_state_dict(other, wrong_rank)
    with pytest.raises(ValueError, match="no LoRA adapters"):
        load_lora_state_dict(base, sd)


# -- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, needle", [
    (dict(rank=0), "rank"),
    (dict(rank=2.0), "rank"),
    (dict(rank=True), "rank"),
    (dict(alpha=0), "alpha"),
    (dict(alpha=float("inf")), "alpha"),
    (dict(alpha=1e-320), r"alpha / rank \(1e-320 / 4\) must be at least float32's smallest normal"),  # (hunt 43-e E2)
    (dict(alpha=1e300), r"alpha / rank \(1e\+300 / 4\) must be at most float32's largest"),  # (hunt 49-a A1)
    # just past each bound (1e-38 is a float32 subnormal; 3.5e38 past its largest): the cases above are orders of
    # magnitude out, and bounds halved or doubled passed them (hunt 51-q Q8)
    (dict(alpha=4e-38), r"alpha / rank \(4e-38 / 4\) must be at least float32's smallest normal"),
    (dict(alpha=1.4e39), r"alpha / rank \(1.4e\+39 / 4\) must be at most float32's largest"),
    (dict(dropout=1.0), "dropout"),
    (dict(dropout=-0.1), "dropout"),
    (dict(targets=("attn.c_attn", "lm_head")), "targets"),
    (dict(targets=()), "targets"),
    (dict(targets="attn.c_attn"), "targets"),
    (dict(targets=("mlp.c_fc", "mlp.c_fc")), "targets"),
])
def test_config_rejects_bad_values_naming_the_field(overrides, needle):
    with pytest.raises(ValueError, match=needle):
        LoRAConfig(**{"rank": 4, **overrides})


def test_config_round_trips_through_json_and_rejects_unknown_keys():
    cfg = LoRAConfig(rank=8, alpha=32.0, dropout=0.05, targets=("attn.c_attn", "mlp.c_proj"))
    assert cfg.scale == 4.0
    assert LoRAConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="lora_rank"):
        LoRAConfig.from_dict({**cfg.to_dict(), "lora_rank": 3})


# -- a LoRA checkpoint's base: recorded exactly, refused when missing or changed ---------------


def save_run(out_dir, step, model, meta=None):  # the keys train.py saves, so that open_resumable takes it
    from gpt.checkpoint import save_checkpoint

    state = {"optimizer": {}, "scaler": {}, "rng": [], "loader": {}}
    return save_checkpoint(out_dir, step, model, state=state,
                           meta={"config": {}, "model_config": model.config.to_dict(), "tokenizer": "byte",
                                 "tokens_seen": 0, **(meta or {})})


def save_lora_run(out_dir, model, base_record, step=3):
    return save_run(out_dir, step, model, {"lora": {**base_record, "config": model.lora_config.to_dict()}})


def test_a_lora_checkpoint_loads_onto_the_base_checkpoint_it_was_trained_on(trained, tmp_path, monkeypatch):
    from gpt.checkpoint import load_model, lora_base

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    monkeypatch.chdir(tmp_path)
    record = lora_base("base")  # relative, as typed: recorded absolute, the checkpoint itself
    assert record["base"] == str(tmp_path / "base" / "ckpt-0000005") and record["base_step"] == 5
    (tmp_path / "current").symlink_to(tmp_path / "base" / "ckpt-0000005")  # a link re-pointed later is not the base
    assert lora_base("current", fingerprint=False)["base"] == record["base"]  # (review 31)
    save_lora_run(tmp_path / "lora", model, record)
    x, _ = batch()
    expected = logits(model, x)
    # the base run goes on: its latest checkpoint is no longer the one the adapters were trained on
    save_run(tmp_path / "base", 10, tiny_model(seed=7))
    monkeypatch.chdir("/")
    loaded, _ = load_model(tmp_path / "lora")
    assert torch.allclose(logits(loaded, x), expected, atol=1e-5)


def test_a_missing_or_changed_base_is_refused_in_one_line(trained, tmp_path):
    import shutil

    from gpt.checkpoint import load_model, lora_base
    from gpt.errors import ChangedBase

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    save_lora_run(tmp_path / "lora", model, lora_base(str(tmp_path / "base")))
    lora_ckpt, base_ckpt = tmp_path / "lora" / "ckpt-0000003", tmp_path / "base" / "ckpt-0000005"
    save_run(tmp_path / "base", 5, tiny_model(seed=7))  # the same step saved again, other weights
    with pytest.raises(ChangedBase) as e:
        load_model(tmp_path / "lora")
    assert str(e.value) == (f"LoRA checkpoint {lora_ckpt} was trained on base {base_ckpt} (step 5), "
                            f"which has changed since; {ELSEWHERE}")
    shutil.rmtree(tmp_path / "base")
    with pytest.raises(ChangedBase) as e:
        load_model(tmp_path / "lora")
    assert str(e.value) == (f"LoRA checkpoint {lora_ckpt} was trained on base {base_ckpt} (step 5), which is missing; "
                            f"{ELSEWHERE}")


# the way on from a base that is not where recorded (hunt 36-c A6)
ELSEWHERE = ("if it is elsewhere now (moved or copied), point to it with --lora_base=PATH (its run's directory or its "
             "ckpt-* directory)")


def test_a_base_whose_weights_are_a_git_lfs_pointer_is_said_to_be_one_not_changed(trained, tmp_path):
    # A run kept in Git LFS and cloned without it has pointers for weights: a LoRA checkpoint's base was "which has
    # changed since; if it is elsewhere now (moved or copied), point to it with --lora_base", where `git lfs pull`
    # brings the very weights back (hunt 49-m M5)
    from gpt.checkpoint import load_model, lora_base
    from gpt.errors import ChangedBase, UnreadableFile

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    save_lora_run(tmp_path / "lora", model, lora_base(str(tmp_path / "base")))
    weights = tmp_path / "base" / "ckpt-0000005" / "model.safetensors"
    weights.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 8000\n")
    with pytest.raises(UnreadableFile) as e:
        load_model(tmp_path / "lora")
    assert str(e.value) == (f"{weights}: a Git LFS pointer, not the file itself: fetch it with `git lfs pull` where it "
                            "was cloned")
    weights.write_text("other weights, not a pointer")  # (changed, it is said to have changed)
    with pytest.raises(ChangedBase, match="which has changed since"):
        load_model(tmp_path / "lora")


def test_adapters_that_do_not_fit_an_unchanged_base_name_their_own_file(trained, tmp_path):
    # A rank-2 checkpoint holding rank-4 adapters (a mixed-up copy) blamed its base, "which must have
    # changed", though the base was just found unchanged, and never named the file (hunt 33-b B3)
    import shutil

    from gpt.checkpoint import load_model, lora_base
    from gpt.errors import UnreadableFile

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    record = lora_base(str(tmp_path / "base"))
    save_lora_run(tmp_path / "rank4", model, record)
    save_lora_run(tmp_path / "rank2", adapted(base, rank=2), record)
    weights = tmp_path / "rank2" / "ckpt-0000003" / "model.safetensors"
    shutil.copyfile(tmp_path / "rank4" / "ckpt-0000003" / "model.safetensors", weights)
    with pytest.raises(UnreadableFile) as e:
        load_model(tmp_path / "rank2")
    assert str(e.value).startswith(f"{weights}: adapters that do not fit the LoRA config in its meta.json, on a base "
                                   "found unchanged: LoRA checkpoint shapes do not fit the model: ")
    assert e.value.damaged  # (what it holds is wrong, not the system's reading of it)


@pytest.mark.parametrize("fingerprinted", [True, False])
def test_a_truncated_adapters_file_is_named_as_such_not_blamed_on_the_config_or_the_base(trained, tmp_path,
                                                                                      fingerprinted):
    # UnreadableFile is a ValueError: the load's own reading error was taken for adapters that do not
    # fit ("adapters that do not fit the LoRA config", or without a fingerprint "its base ... must have changed")
    import os

    from gpt.checkpoint import load_model, lora_base
    from gpt.errors import UnreadableFile

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    record = lora_base(str(tmp_path / "base")) if fingerprinted else {"base": str(tmp_path / "base" / "ckpt-0000005")}
    weights = save_lora_run(tmp_path / "lora", model, record) / "model.safetensors"
    os.truncate(weights, 100)
    with pytest.raises(UnreadableFile) as e:
        load_model(tmp_path / "lora")
    assert str(e.value).startswith(f"{weights}: truncated or corrupt safetensors file"), str(e.value)


def test_a_hugging_face_base_is_recorded_absolute_with_its_fingerprint(trained, tmp_path, monkeypatch):
    from gpt.checkpoint import load_model, lora_base
    from gpt.errors import ChangedBase

    base, model, _ = trained
    base.save_pretrained(tmp_path / "hf")
    monkeypatch.chdir(tmp_path)
    record = lora_base("hf")
    assert record["base"] == str(tmp_path / "hf") and "base_step" not in record and record["base_weights"]
    # a hub name without a fingerprint is its own record, fetched from nowhere (with one, the weights the hub
    # cache serves are fingerprinted: tests/test_train.py, hunt 30-e F5)
    assert lora_base("gpt2", fingerprint=False) == {"base": "gpt2"}
    save_lora_run(tmp_path / "lora", model, record)
    x, _ = batch()
    assert torch.allclose(logits(load_model(tmp_path / "lora")[0], x), logits(model, x), atol=1e-5)
    # and one whose weights are a pytorch_model.bin (older exports): untested, its load looked for
    # model.safetensors without a test noticing (hunt 31-b L3)
    from safetensors.torch import load_file
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "config.json").write_text((tmp_path / "hf" / "config.json").read_text())
    torch.save(load_file(str(tmp_path / "hf" / "model.safetensors")), tmp_path / "bin" / "pytorch_model.bin")
    save_lora_run(tmp_path / "lora-bin", model, lora_base(str(tmp_path / "bin")))
    assert torch.allclose(logits(load_model(tmp_path / "lora-bin")[0], x), logits(model, x), atol=1e-5)
    tiny_model(seed=7).save_pretrained(tmp_path / "hf")
    with pytest.raises(ChangedBase, match=r"was trained on base .*hf, which has changed since; if it is elsewhere now "
                                          r"\(moved or copied\), point to it with --lora_base=PATH \(its directory\)$"):
        load_model(tmp_path / "lora")


def test_a_snapshot_of_the_hub_cache_as_the_base_gets_no_list_of_lora_runs_written_into_it(trained, tmp_path):
    # --init_from=~/.cache/huggingface/hub/models--gpt2/snapshots/<revision> (a path, not the hub name) was taken for
    # a Hugging Face directory of the user's: the LoRA run wrote its lora-runs.txt into the hub client's snapshot,
    # which then listed it among the revision's files (hunt 52-l L1). It is the hub cache's, as the hub name's
    # weights are: recorded with its fingerprint, and no list
    from gpt.checkpoint import base_dir, load_model, lora_base, unmark_removed_lora_run

    base, model, _ = trained
    snapshot = hub_snapshot(base, tmp_path)
    record = lora_base(str(snapshot))
    assert record["base"] == str(snapshot) and record["base_weights"]  # (still checked by its fingerprint)
    assert base_dir(record) is None  # where train.py lists the run (mark_the_lora_base): nowhere
    save_lora_run(tmp_path / "lora", model, record)
    x, _ = batch()
    assert torch.allclose(logits(load_model(tmp_path / "lora")[0], x), logits(model, x), atol=1e-5)
    unmark_removed_lora_run(tmp_path / "lora")
    assert sorted(p.name for p in snapshot.iterdir()) == ["config.json", "generation_config.json", "model.safetensors"]
    # a directory of the user's of the same name elsewhere keeps its list (save_pretrained spares it)
    base.save_pretrained(tmp_path / "snapshots" / "mine")
    assert base_dir(lora_base(str(tmp_path / "snapshots" / "mine"))) == tmp_path / "snapshots" / "mine"


def test_save_pretrained_refuses_a_snapshot_of_the_hub_cache(trained, tmp_path):
    # A LoRA run on a snapshot of the hub cache by its path lists itself there no more (hunt 52-l L1), so the list no
    # longer kept save_pretrained from exporting over the snapshot: the merged model replaced the hub's weights in the
    # hub client's cache, and the LoRA run's base no longer matched its fingerprint (hunt 52-y Y2)
    from gpt.checkpoint import load_model, lora_base
    from gpt.lora import merge_lora

    base, model, _ = trained
    snapshot = hub_snapshot(base, tmp_path)
    save_lora_run(tmp_path / "lora", model, lora_base(str(snapshot)))
    before = sorted((p.name, p.read_bytes()) for p in snapshot.iterdir())
    with pytest.raises(ValueError, match="^" + re.escape(f"{snapshot} is a snapshot of the Hugging Face hub cache")):
        merge_lora(copy.deepcopy(model)).save_pretrained(snapshot)
    assert sorted((p.name, p.read_bytes()) for p in snapshot.iterdir()) == before
    load_model(tmp_path / "lora")  # (loads: its base is whole)
    with pytest.raises(ValueError, match="hub cache"):  # nor a hub name's own snapshot, of no run at all
        base.save_pretrained(snapshot)
    (tmp_path / "link").symlink_to(snapshot)  # nor by a link to it
    with pytest.raises(ValueError, match="hub cache"):
        base.save_pretrained(tmp_path / "link")


def test_a_lora_run_on_a_hub_name_takes_lora_base_where_its_weights_are_a_copy_of_the_hubs(trained, tmp_path,
                                                                                           monkeypatch):
    # A LoRA run on `gpt2`, with the hub cache cleared since and no network (another machine): --lora_base naming a
    # copy of those very weights was refused as "not a LoRA checkpoint whose base has a fingerprint to check another
    # place by" (it has one), and nothing loaded the adapters; the hub's "pass a local directory" had no option to go
    # in (hunt 52-l L4). The copy is taken by its fingerprint, as a moved base of any other kind
    import shutil

    import huggingface_hub.constants

    from gpt.checkpoint import load_model, lora_base
    from gpt.errors import ChangedBase, HubUnreachable

    base, model, _ = trained
    snapshot = hub_snapshot(base, tmp_path)
    (tmp_path / "hub" / "models--gpt2" / "refs").mkdir()
    (tmp_path / "hub" / "models--gpt2" / "refs" / "main").write_text("0" * 40)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # (no network, whatever happens)
    save_lora_run(tmp_path / "lora", model, lora_base("gpt2"))
    shutil.copytree(snapshot, tmp_path / "copy")
    tiny_model(seed=7).save_pretrained(tmp_path / "other")
    x, _ = batch()
    expected = logits(model, x)
    assert torch.allclose(logits(load_model(tmp_path / "lora", lora_base=tmp_path / "copy")[0], x), expected, atol=1e-5)
    with pytest.raises(ChangedBase, match=r"^--lora_base=\S+other is not the base of \S+ \(it holds other weights than "
                                          r"the base the adapters were trained on \(by their fingerprint\)\), whose base "
                                          r"was found without it: leave out --lora_base$"):
        load_model(tmp_path / "lora", lora_base=tmp_path / "other")
    shutil.rmtree(snapshot)
    with pytest.raises(HubUnreachable, match=r"^LoRA checkpoint \S+ was trained on base gpt2: could not download 'gpt2' "
                                             r"from the Hugging Face hub .*\. If a copy of the weights it was trained on "
                                             r"is at hand, point to it with --lora_base=PATH \(its directory\)$"):
        load_model(tmp_path / "lora")
    assert torch.allclose(logits(load_model(tmp_path / "lora", lora_base=tmp_path / "copy")[0], x), expected, atol=1e-5)
    with pytest.raises(HubUnreachable, match=r"\. --lora_base=\S+other: it holds other weights than the base the "
                                             r"adapters were trained on \(by their fingerprint\)$"):
        load_model(tmp_path / "lora", lora_base=tmp_path / "other")
    # a directory without such weights (a run of ours) is said to hold none, not to be missing (hunt 52-l L5)
    save_run(tmp_path / "run", 5, base)
    with pytest.raises(HubUnreachable, match=r"\. --lora_base=\S+run: it has neither model\.safetensors nor "
                                             r"pytorch_model\.bin$"):
        load_model(tmp_path / "lora", lora_base=tmp_path / "run")
    # a resume given the copy records it (train.py, rebased): the run's older checkpoints find it there too, as those
    # of any other base do (hunt 52-l L6)
    save_lora_run(tmp_path / "lora", model, lora_base(str(tmp_path / "copy")), step=5)
    loaded, ckpt = load_model(tmp_path / "lora" / "ckpt-0000003")
    assert torch.allclose(logits(loaded, x), expected, atol=1e-5) and ckpt.base_found == str(tmp_path / "copy")


def test_an_older_versions_lora_checkpoint_whose_base_moved_says_how_to_load_it(trained, tmp_path, capsys):
    # A LoRA checkpoint saved before 2026-11-25 (the base's path alone, no fingerprint) whose base moved said
    # "which is missing" with no way on, and --lora_base was passed over in silence (hunt 36-d D3). Nothing
    # can check another place for it: taken unchecked, the option meant for another level of a LoRA run on a
    # LoRA run put the adapters onto another model (review 36 R7). So the way on is the recorded place.
    import os

    from gpt.checkpoint import load_model
    from gpt.errors import ChangedBase

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    save_lora_run(tmp_path / "lora", model, {"base": str(tmp_path / "base" / "ckpt-0000005")})
    (tmp_path / "archive").mkdir()
    (tmp_path / "base").rename(tmp_path / "archive" / "base")
    way = (r"its record, saved by an older version, has no fingerprint to check another place by: if it is elsewhere "
           r"now \(moved or copied\), put it back there, or a symbolic link to it$")
    with pytest.raises(ChangedBase, match=r"ckpt-0000005, which is missing; " + way):
        load_model(tmp_path / "lora")
    with pytest.raises(ChangedBase, match=r"ckpt-0000005, which is missing; --lora_base=\S+ cannot stand for it: " + way):
        load_model(tmp_path / "lora", lora_base=tmp_path / "archive" / "base")
    os.symlink(tmp_path / "archive" / "base", tmp_path / "base")  # the way it names
    x, _ = batch()
    assert torch.allclose(logits(load_model(tmp_path / "lora")[0], x), logits(model, x), atol=1e-5)
    assert "(saved by an older version)" in capsys.readouterr().err


def test_old_lora_checkpoints_naming_a_run_directory_still_load_with_a_warning(trained, tmp_path, capsys):
    from gpt.checkpoint import load_model
    from gpt.errors import ChangedBase

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    save_lora_run(tmp_path / "lora", model, {"base": str(tmp_path / "base")})  # as saved before the fingerprint
    x, _ = batch()
    assert torch.allclose(logits(load_model(tmp_path / "lora")[0], x), logits(model, x), atol=1e-5)
    assert f"names its base only as {tmp_path / 'base'} (saved by an older version)" in capsys.readouterr().err
    # re-created with another shape: one line, not load_lora_state_dict's ValueError traceback
    save_run(tmp_path / "base", 6, tiny_model(n_embd=16))
    with pytest.raises(ChangedBase, match=r"trained on base .*, whose config has changed since: it now has n_embd 16 "
                                          r"\(the adapters were trained with 32\)$"):
        load_model(tmp_path / "lora")
    # a relative base, read from another directory
    save_lora_run(tmp_path / "rel", model, {"base": "../somewhere/base"})
    with pytest.raises(ChangedBase, match=r"trained on base \.\./somewhere/base, which is missing \(a relative path"):
        load_model(tmp_path / "rel")


@pytest.mark.parametrize("damage", [{"config": {"rank": 0}}, {"base": None}, {"config": None}, {"base_step": "5"}])
def test_a_damaged_lora_block_makes_the_checkpoint_unreadable_and_resume_skips_it(trained, tmp_path, damage):
    from gpt.checkpoint import load_model, open_resumable
    from gpt.errors import UnreadableFile

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    record = {"base": str(tmp_path / "base" / "ckpt-0000005")}
    save_lora_run(tmp_path / "lora", model, record, step=3)
    damaged = save_lora_run(tmp_path / "lora", model, record, step=4)
    meta = json.loads((damaged / "meta.json").read_text())
    meta["lora"].update(damage)
    (damaged / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(UnreadableFile, match="unreadable checkpoint metadata"):
        load_model(tmp_path / "lora")
    ckpt, skipped = open_resumable(tmp_path / "lora")
    assert ckpt.meta["step"] == 3 and [p for p, _ in skipped] == [damaged]


# -- a base moved: with its LoRA run (found where it lay relative to it), or alone (--lora_base) ------
# The base was recorded by its absolute path only: moved, "which is missing" at every load and
# resume, and nothing let the user point to the very weights, which their fingerprint proves the
# same (hunt 35-a A6, hunt 36-c A6)


def test_runs_moved_together_find_their_base_where_it_lay_relative_to_the_run(trained, tmp_path):
    import shutil

    from gpt.checkpoint import load_model, lora_base
    from gpt.errors import ChangedBase

    base, model, _ = trained
    project = tmp_path / "project"
    save_run(project / "runs" / "base", 5, base)
    save_lora_run(project / "lora", model, lora_base(str(project / "runs" / "base")))
    base.save_pretrained(project / "hf")  # a Hugging Face base moves with them too
    save_lora_run(project / "lora-hf", adapted(base, seed=3), lora_base(str(project / "hf")))
    meta = json.loads((project / "lora" / "ckpt-0000003" / "meta.json").read_text())
    assert meta["lora"]["base_relative"] == "../runs/base/ckpt-0000005"
    x, _ = batch()
    expected, expected_hf = logits(model, x), logits(load_model(project / "lora-hf")[0], x)
    moved = tmp_path / "elsewhere" / "project"
    moved.parent.mkdir()
    shutil.move(project, moved)  # the whole project directory: both runs
    loaded, ckpt = load_model(moved / "lora")
    assert torch.allclose(logits(loaded, x), expected, atol=1e-5)
    assert ckpt.base_found == str(moved / "runs" / "base" / "ckpt-0000005")  # what a resume records
    assert torch.allclose(logits(load_model(moved / "lora-hf")[0], x), expected_hf, atol=1e-5)
    # where it lay holds other weights now: refused, naming both places looked
    save_run(moved / "runs" / "base", 5, tiny_model(seed=7))
    with pytest.raises(ChangedBase) as e:
        load_model(moved / "lora")
    assert str(e.value) == (
        f"LoRA checkpoint {moved / 'lora' / 'ckpt-0000003'} was trained on base "
        f"{project / 'runs' / 'base' / 'ckpt-0000005'} (step 5), which is missing; "
        f"{moved / 'runs' / 'base' / 'ckpt-0000005'} (where it lay relative to this run) holds other weights; {ELSEWHERE}")


def test_a_base_moved_alone_is_taken_from_lora_base_only_where_its_fingerprint_matches(trained, tmp_path):
    import shutil

    from gpt.checkpoint import load_model, lora_base, open_checkpoint
    from gpt.errors import ChangedBase, ConfigError

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    save_run(tmp_path / "other", 5, tiny_model(seed=7))  # a checkpoint of the same name, other weights
    record = lora_base(str(tmp_path / "base"))
    save_lora_run(tmp_path / "lora", model, record)
    lora_ckpt, was = tmp_path / "lora" / "ckpt-0000003", tmp_path / "base" / "ckpt-0000005"
    x, _ = batch()
    expected = logits(model, x)
    (tmp_path / "archive").mkdir()
    shutil.move(tmp_path / "base", tmp_path / "archive" / "base")
    now = tmp_path / "archive" / "base" / "ckpt-0000005"
    missing = f"LoRA checkpoint {lora_ckpt} was trained on base {was} (step 5), which is missing"
    with pytest.raises(ChangedBase) as e:
        load_model(tmp_path / "lora")
    assert str(e.value) == f"{missing}; {ELSEWHERE}"  # (the way on)
    for given in tmp_path / "archive" / "base", now:  # its run's directory, or the checkpoint itself
        loaded, ckpt = load_model(tmp_path / "lora", lora_base=given)
        assert torch.allclose(logits(loaded, x), expected, atol=1e-5) and ckpt.base_found == str(now)
    # a wrong base is refused by the fingerprint of its weights, whatever its name
    for given, why in [(tmp_path / "other", "its ckpt-0000005 holds"), (tmp_path / "other" / "ckpt-0000005", "it holds")]:
        with pytest.raises(ChangedBase) as e:
            load_model(tmp_path / "lora", lora_base=given)
        assert str(e.value) == (f"{missing}; --lora_base={given}: {why} other weights than the base the adapters "
                                "were trained on (by their fingerprint)")
    with pytest.raises(ChangedBase) as e:
        load_model(tmp_path / "lora", lora_base=tmp_path / "nowhere")
    assert str(e.value) == f"{missing}; --lora_base={tmp_path / 'nowhere'}: no such directory"
    # given where the base is found where recorded, a wrong one is still refused, not passed over
    shutil.copytree(tmp_path / "archive" / "base", tmp_path / "base")
    with pytest.raises(ChangedBase) as e:
        load_model(tmp_path / "lora", lora_base=tmp_path / "other")
    assert str(e.value) == (f"--lora_base={tmp_path / 'other'} is not the base of {lora_ckpt} (its ckpt-0000005 holds "
                            "other weights than the base the adapters were trained on (by their fingerprint)), whose "
                            "base was found without it: leave out --lora_base")
    with pytest.raises(ConfigError, match=r"ckpt-0000005 is not a LoRA checkpoint whose base has a fingerprint"):
        load_model(tmp_path / "other", lora_base=now)
    # a checkpoint saved since records the new place (as a resume given --lora_base does): the run's older
    # checkpoints (`best`, say) need the option no more either
    shutil.rmtree(tmp_path / "base")
    save_lora_run(tmp_path / "lora", model, {**record, "base": str(now)}, step=4)
    assert torch.allclose(logits(load_model(lora_ckpt)[0], x), expected, atol=1e-5)
    assert open_checkpoint(tmp_path / "lora").meta["lora"]["base_relative"] == "../archive/base/ckpt-0000005"


def test_a_lora_run_on_a_lora_run_takes_lora_base_at_the_level_it_fits(trained, tmp_path):
    import shutil

    from gpt.checkpoint import load_model, lora_base

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    save_lora_run(tmp_path / "lora", model, lora_base(str(tmp_path / "base")))
    merged = load_model(tmp_path / "lora")[0]
    on_lora = adapted(merged, seed=4)
    save_lora_run(tmp_path / "lora2", on_lora, lora_base(str(tmp_path / "lora")))
    x, _ = batch()
    expected = logits(load_model(tmp_path / "lora2")[0], x)
    shutil.move(tmp_path / "base", tmp_path / "moved")
    assert torch.allclose(logits(load_model(tmp_path / "lora2", lora_base=tmp_path / "moved")[0], x), expected,
                          atol=1e-5)


def test_a_lora_checkpoint_without_the_relative_record_loads_as_before(trained, tmp_path, capsys):
    # checkpoints saved before base_relative: the absolute path alone, and --lora_base where it moved
    import shutil

    from gpt.checkpoint import load_model, lora_base
    from gpt.errors import ChangedBase

    base, model, _ = trained
    save_run(tmp_path / "runs" / "base", 5, base)
    lora_ckpt = save_lora_run(tmp_path / "runs" / "lora", model, lora_base(str(tmp_path / "runs" / "base")))
    meta = json.loads((lora_ckpt / "meta.json").read_text())
    del meta["lora"]["base_relative"]
    (lora_ckpt / "meta.json").write_text(json.dumps(meta))
    x, _ = batch()
    expected = logits(model, x)
    assert torch.allclose(logits(load_model(tmp_path / "runs" / "lora")[0], x), expected, atol=1e-5)
    shutil.move(tmp_path / "runs", tmp_path / "moved")  # together, but nothing says where it lay from the run
    with pytest.raises(ChangedBase) as e:
        load_model(tmp_path / "moved" / "lora")
    assert str(e.value) == (f"LoRA checkpoint {tmp_path / 'moved' / 'lora' / 'ckpt-0000003'} was trained on base "
                            f"{tmp_path / 'runs' / 'base' / 'ckpt-0000005'} (step 5), which is missing; {ELSEWHERE}")
    loaded, _ = load_model(tmp_path / "moved" / "lora", lora_base=tmp_path / "moved" / "base")
    assert torch.allclose(logits(loaded, x), expected, atol=1e-5)
    # and one saved before the fingerprint, naming a run directory: its latest, with a warning, as before
    save_lora_run(tmp_path / "old", model, {"base": str(tmp_path / "moved" / "base")})
    assert "base_relative" not in json.loads((tmp_path / "old" / "ckpt-0000003" / "meta.json").read_text())["lora"]
    assert torch.allclose(logits(load_model(tmp_path / "old")[0], x), expected, atol=1e-5)
    assert "(saved by an older version)" in capsys.readouterr().err


def test_lora_base_given_as_a_link_to_a_checkpoint_records_the_checkpoint_it_names(trained, tmp_path):
    # base_found named the link's name under its target's directory, where no checkpoint is: a resume given
    # --lora_base=<a link to a checkpoint> recorded that place, and train.py refused it as "removed by its run
    # (pruned)" (review 36 R3)
    import shutil

    from gpt.checkpoint import load_model, lora_base

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    save_lora_run(tmp_path / "lora", model, lora_base(str(tmp_path / "base")))
    (tmp_path / "store").mkdir()
    shutil.move(tmp_path / "base" / "ckpt-0000005", tmp_path / "store" / "weights-v1")
    (tmp_path / "base" / "ckpt-0000005").symlink_to(tmp_path / "store" / "weights-v1")
    shutil.move(tmp_path / "base", tmp_path / "moved")
    for given in tmp_path / "moved" / "ckpt-0000005", tmp_path / "moved":
        _, ckpt = load_model(tmp_path / "lora", lora_base=given)
        assert ckpt.base_found == str(tmp_path / "store" / "weights-v1")  # as lora_base records it: a checkpoint
        assert lora_base(ckpt.base_found)["base"] == ckpt.base_found


def test_a_changed_config_of_a_base_found_elsewhere_names_where_it_was_found(trained, tmp_path):
    # moved (here alone, given with lora_base), the base's config.json edited: the refusal named the recorded
    # place alone, which no longer exists, and not the file that changed (review 36 R4)
    import shutil

    from gpt.checkpoint import load_model, lora_base
    from gpt.errors import ChangedBase

    base, model, _ = trained
    save_run(tmp_path / "base", 5, base)
    save_lora_run(tmp_path / "lora", model, lora_base(str(tmp_path / "base")))
    shutil.move(tmp_path / "base", tmp_path / "moved")
    meta_path = tmp_path / "moved" / "ckpt-0000005" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["model_config"]["n_head"] = 1  # (every tensor's shape the same)
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ChangedBase) as e:
        load_model(tmp_path / "lora", lora_base=tmp_path / "moved")
    assert str(e.value).startswith(
        f"LoRA checkpoint {tmp_path / 'lora' / 'ckpt-0000003'} was trained on base {tmp_path / 'base' / 'ckpt-0000005'} "
        f"(found at {tmp_path / 'moved' / 'ckpt-0000005'}), whose config has changed since: it now has n_head 1")
