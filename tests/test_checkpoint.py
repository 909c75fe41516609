import errno
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from gpt.checkpoint import (clean_leftovers, find_checkpoint, list_checkpoints, load_model, open_checkpoint,
                            save_checkpoint)
from gpt.errors import SaveError, UnreadableFile
from gpt.model import GPT, GPTConfig

CFG = GPTConfig(vocab_size=50, block_size=16, n_layer=1, n_head=2, n_embd=16)


def make_model(seed=0):
    torch.manual_seed(seed)
    return GPT(CFG)


def save(out, step, model, best=False, **meta):
    return save_checkpoint(out, step, model, {"optimizer": {}, "note": torch.arange(3)},
                           {"model_config": CFG.to_dict(), "tokenizer": "byte", **meta}, keep_last=2, is_best=best)


def test_round_trip_plain_keys_tied_head_once(tmp_path):
    model = make_model()
    path = save(tmp_path, 10, model)
    from safetensors.torch import load_file
    keys = set(load_file(str(path / "model.safetensors")))
    assert "lm_head.weight" not in keys and "transformer.wte.weight" in keys
    assert not any(k.startswith(("_orig_mod.", "module.")) for k in keys)
    loaded, ckpt = load_model(tmp_path)
    assert ckpt.meta["step"] == 10 and ckpt.meta["versions"]["torch"] == torch.__version__
    assert loaded.lm_head.weight is loaded.transformer.wte.weight
    idx = torch.randint(0, 50, (1, 8))
    assert torch.equal(loaded.eval()(idx)[0], model.eval()(idx)[0])
    assert torch.equal(ckpt.state()["note"], torch.arange(3))


def test_keeps_last_n_and_the_best(tmp_path):
    model = make_model()
    save(tmp_path, 1, model)
    save(tmp_path, 2, model, best=True)
    for step in (3, 4, 5):
        save(tmp_path, step, model)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["ckpt-0000002", "ckpt-0000004", "ckpt-0000005"]
    assert find_checkpoint(tmp_path).name == "ckpt-0000005"
    assert find_checkpoint(tmp_path, "best").name == "ckpt-0000002"


def test_a_failed_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    # A write failing part-way (weights written, then the disk is full): one SaveError naming the
    # checkpoint still current, the previous checkpoint intact and nothing half-written left.
    model = make_model()
    save(tmp_path, 1, model)
    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(SaveError, match=r"saving checkpoint ckpt-0000002 in .* failed: No space left on device; "
                                        r"the latest checkpoint is still .*ckpt-0000001"):
        save(tmp_path, 2, make_model(1))
    monkeypatch.undo()
    assert (tmp_path / "latest").read_text().strip() == "ckpt-0000001"
    loaded, ckpt = load_model(tmp_path)
    assert ckpt.meta["step"] == 1
    assert not list(tmp_path.glob(".tmp-*")) and [p.name for p in list_checkpoints(tmp_path)] == ["ckpt-0000001"]


def test_a_failed_resave_of_the_same_step_puts_the_first_back(tmp_path, monkeypatch):
    save(tmp_path, 1, make_model())
    real_replace = os.replace
    def fail_second_rename(src, dst):
        if str(src).endswith(".tmp-ckpt-0000001." + str(os.getpid())):
            raise OSError(errno.EACCES, "Permission denied")
        real_replace(src, dst)
    monkeypatch.setattr(os, "replace", fail_second_rename)
    with pytest.raises(SaveError, match="Permission denied"):
        save(tmp_path, 1, make_model(1))
    monkeypatch.undo()
    loaded, _ = load_model(tmp_path)
    assert torch.equal(loaded.transformer.wte.weight, make_model().transformer.wte.weight)
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_save_that_cannot_fit_is_refused_before_writing(tmp_path, monkeypatch):
    import gpt.checkpoint as C

    save(tmp_path, 1, make_model())
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(C.shutil, "disk_usage", lambda path: usage._replace(free=100_000))
    with pytest.raises(SaveError, match=r"not enough free space in .* for checkpoint ckpt-0000002: it needs about "
                                        r"1\.\d MiB, 0\.1 MiB are free; the latest checkpoint is still"):
        save(tmp_path, 2, make_model(1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-0000001", "latest"]


def test_checkpoint_size_estimate_covers_what_is_written(tmp_path):
    from gpt.checkpoint import SPACE_MARGIN, tensor_bytes, weights_to_save

    model = make_model()
    state = {"optimizer": {"state": {0: {"exp_avg": torch.zeros(1000)}}}, "rng": [torch.zeros(5000, dtype=torch.uint8)]}
    path = save_checkpoint(tmp_path, 1, model, state, {"model_config": CFG.to_dict()})
    written = sum(f.stat().st_size for f in path.iterdir())
    estimate = (tensor_bytes(weights_to_save(model)) + tensor_bytes(state)) * SPACE_MARGIN[0] + SPACE_MARGIN[1]
    assert tensor_bytes(state) == 4000 + 5000 and written <= estimate


def test_a_save_killed_midway_leaves_the_previous_checkpoint_loadable(tmp_path):
    # A real process killed (os._exit, like SIGKILL) in the middle of writing its second checkpoint.
    script = textwrap.dedent(f"""
        import os, sys, torch
        sys.path.insert(0, {str(os.getcwd())!r})
        import gpt.checkpoint as C
        from tests.test_checkpoint import make_model, save
        save({str(tmp_path)!r}, 1, make_model())
        real = C._fsync_file
        def die(path):
            if path.name == "state.pt":
                os._exit(9)  # weights written, state half-synced, nothing renamed
            real(path)
        C._fsync_file = die
        save({str(tmp_path)!r}, 2, make_model(1))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd())
    assert proc.returncode == 9
    assert list(tmp_path.glob(".tmp-ckpt-0000002*"))  # the torn save is there...
    loaded, ckpt = load_model(tmp_path)  # ...and ignored
    assert ckpt.meta["step"] == 1
    assert torch.equal(loaded.transformer.wte.weight, make_model().transformer.wte.weight)


def test_pointer_missing_falls_back_to_newest_complete(tmp_path):
    model = make_model()
    save(tmp_path, 1, model)
    save(tmp_path, 2, model)
    (tmp_path / "latest").unlink()
    assert find_checkpoint(tmp_path).name == "ckpt-0000002"
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        find_checkpoint(tmp_path / "nothing-here")


def test_non_finite_weights_are_never_saved(tmp_path):
    model = make_model()
    with torch.no_grad():
        model.transformer.h[0].mlp.c_fc.weight[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="non-finite"):
        save(tmp_path, 1, model)
    assert not list_checkpoints(tmp_path)


class Payload:
    def __reduce__(self):
        return (os.system, (f"touch {Payload.marker}",))


def test_a_pickle_with_a_payload_is_refused_and_never_runs(tmp_path):
    model = make_model()
    path = save(tmp_path, 1, model)
    Payload.marker = tmp_path / "pwned"
    with open(path / "state.pt", "wb") as f:
        pickle.dump({"optimizer": Payload()}, f)
    with pytest.raises(UnreadableFile, match=r"ckpt-0000001/state\.pt: refused: it holds pickled objects .* "
                                             r"nothing in it was run"):
        open_checkpoint(tmp_path).state()
    assert not Payload.marker.exists()
    # The same for a Hugging Face pytorch_model.bin.
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 50, "n_positions": 16,
                                                "n_embd": 16, "n_layer": 1, "n_head": 2}))
    with open(hf / "pytorch_model.bin", "wb") as f:
        pickle.dump({"transformer.wte.weight": Payload()}, f)
    with pytest.raises(UnreadableFile, match=r"hf/pytorch_model\.bin: refused"):
        GPT.from_pretrained(str(hf))
    assert not Payload.marker.exists()
