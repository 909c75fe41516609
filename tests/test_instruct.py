"""Instruction data (gpt/instruct.py) from records to answers: the template and its loss mask on
hand-written records of all three forms, the shards and meta.json data/prepare.py writes for them,
bad records named by file and line, and end to end: a tiny model trained on ~30 pairs answers
them through sample.py --instruction / --chat, and beats the same model trained on the same pairs
as plain text on response-token loss."""

import errno
import importlib.util
import io
import json
import random
import re
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import sample
import train
from gpt import instruct
from gpt.checkpoint import load_model
from gpt.data import DataDir, ShardError, TrainBatches, ValBatches
from gpt.prepare import PrepareError, _SplitPicker, prepare
from gpt.tokenizer import get_tokenizer

ROOT = Path(__file__).resolve().parents[1]
BYTE = get_tokenizer("byte")
EOT = BYTE.eot_token


def b(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def write_jsonl(path: Path, records) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def prepare_bytes(path, out, **kw):
    return prepare(source="input", inputs=[str(path)], tokenizer="byte", out_dir=out, num_proc=1, quiet=True, **kw)


# ----------------------------------------------------------------------------- template and mask

PAIR = {"prompt": "Hi", "response": "Yo"}
ALPACA = {"instruction": "Add", "input": "1 2", "output": "3"}
ALPACA_NO_INPUT = {"instruction": "Say yes", "input": "", "output": "yes"}
CHAT = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name?"},
                     {"role": "assistant", "content": "Bob"}, {"role": "user", "content": "Age?"},
                     {"role": "assistant", "content": "9"}]}

# (record, exact byte-tokenizer ids, exact mask): context 0, response and its end-of-text 1
EXPECTED = [
    (PAIR, [*b("User:\nHi\n\nAssistant:\n"), *b("Yo"), EOT], [0] * 21 + [1, 1, 1]),
    (ALPACA, [*b("User:\nAdd\n\n1 2\n\nAssistant:\n"), *b("3"), EOT], [0] * 27 + [1, 1]),
    (ALPACA_NO_INPUT, [*b("User:\nSay yes\n\nAssistant:\n"), *b("yes"), EOT], [0] * 26 + [1] * 4),
    (CHAT, [*b("System:\nBe brief.\n\nUser:\nName?\n\nAssistant:\n"), *b("Bob"), EOT,
            *b("User:\nAge?\n\nAssistant:\n"), *b("9"), EOT],
     [0] * 43 + [1] * 4 + [0] * 23 + [1] * 2),
]


@pytest.mark.parametrize("record, ids, mask", EXPECTED, ids=["prompt-response", "alpaca", "alpaca-no-input", "messages"])
def test_template_and_mask_exact_ids(record, ids, mask):
    got_ids, got_mask = instruct.encode(BYTE, instruct.segments(instruct.to_messages(record, "x")))
    assert got_ids.tolist() == ids
    assert got_mask.tolist() == mask


def test_render_shows_the_template():
    assert instruct.render(instruct.to_messages(CHAT, "x")) == (
        "System:\nBe brief.\n\nUser:\nName?\n\nAssistant:\nBob<|endoftext|>User:\nAge?\n\nAssistant:\n9<|endoftext|>")


def test_gpt2_pieces_are_tokenized_where_generation_splits_them():
    gpt2 = get_tokenizer("gpt2")
    ids, mask = instruct.encode(gpt2, instruct.segments(instruct.to_messages(PAIR, "x")))
    context = gpt2.encode("User:\nHi\n\nAssistant:\n")
    assert ids.tolist() == context + gpt2.encode("Yo") + [gpt2.eot_token]
    assert mask.tolist() == [0] * len(context) + [1] * (len(ids) - len(context))
    # what sample.py feeds the model is exactly the context the answer followed in training
    assert instruct.prompt_ids(gpt2, [{"role": "user", "content": "Hi"}]) == [gpt2.eot_token] + context


def test_questions_leave_out_reference_answers():
    ask = lambda record: instruct.to_messages(record, "x", answered=False)  # noqa: E731
    assert ask({"prompt": "Hi"}) == ask(PAIR) == [{"role": "user", "content": "Hi"}]
    assert ask(ALPACA) == [{"role": "user", "content": "Add\n\n1 2"}]
    assert ask(CHAT) == CHAT["messages"][:-1]
    with pytest.raises(instruct.RecordError, match="nothing to answer"):
        ask({"messages": [{"role": "assistant", "content": "hello"}]})


# ----------------------------------------------------------------------------- prepare: shards and meta


def test_prepare_writes_masked_shards_and_supervised_meta(tmp_path):
    records = [PAIR, ALPACA, CHAT, ALPACA_NO_INPUT] * 3
    out = prepare_bytes(write_jsonl(tmp_path / "pairs.jsonl", records), tmp_path / "d", val_fraction=0.25)
    data = DataDir(out)
    assert data.supervised and data.meta["format_version"] == 2
    picker = _SplitPicker(seed=0, val_fraction=0.25)  # which documents prepare sent to validation
    expected = {r_key: (ids, mask) for r_key, ids, mask in ((json.dumps(r), i, m) for r, i, m in EXPECTED)}
    for split in ("train", "val"):
        docs = [json.dumps(r) for i, r in enumerate(records) if picker.is_val(i) == (split == "val")]
        [shard] = data.open_shards(split)
        assert shard.version == 2
        assert shard.tokens.tolist() == sum((expected[d][0] for d in docs), [])
        assert shard.loss_mask.tolist() == sum((expected[d][1] for d in docs), [])
        s = data.meta["splits"][split]
        assert s["target_tokens"] == sum(sum(expected[d][1]) for d in docs) < s["tokens"]
        assert s["target_bytes"] == sum(len(json.loads(d).get("response") or json.loads(d).get("output") or "Bob9")
                                        for d in docs)
    val = data.meta["splits"]["val"]  # bits per byte counts response tokens and bytes only
    assert data.bits_per_byte(1.0) == pytest.approx(val["target_tokens"] / val["target_bytes"] / np.log(2))


def test_loader_ignores_context_targets(tmp_path):
    out = prepare_bytes(write_jsonl(tmp_path / "pairs.jsonl", [PAIR] * 40), tmp_path / "d")
    batches = TrainBatches(out, batch_size=4, block_size=16)
    [shard] = DataDir(out).open_shards("train")
    tokens, mask = np.asarray(shard.tokens, dtype=np.int64), np.asarray(shard.loss_mask)
    for _ in range(5):
        x, y = batches.next_batch()
        for row_x, row_y in zip(x.tolist(), y.tolist()):
            # find the window: y is x shifted by one; every -1 is a context token, every other a target
            start = next(i for i in range(len(tokens)) if tokens[i:i + 16].tolist() == row_x
                         and all(t == -1 or t == tokens[i + 1 + j] for j, t in enumerate(row_y)))
            want = np.where(mask[start + 1:start + 17] == 1, tokens[start + 1:start + 17], -1)
            assert row_y == want.tolist()


@pytest.mark.parametrize("edit", [{"supervised": False}, {"supervised": False, "format_version": 1}])
def test_masked_shards_under_a_meta_json_that_does_not_say_supervised_are_refused(tmp_path, edit):
    # Hunt 29-b: they loaded, the masks applied, and bits per byte counted the prompts too, in silence
    out = prepare_bytes(write_jsonl(tmp_path / "pairs.jsonl", [PAIR] * 40), tmp_path / "d")
    meta = json.loads((out / "meta.json").read_text())
    (out / "meta.json").write_text(json.dumps({**meta, **edit}))
    with pytest.raises(ShardError, match=re.escape(f"{out / 'train_000000.bin'}: holds a loss mask (instruction "
                                                   'data), and meta.json does not say "supervised": true')):
        TrainBatches(out, batch_size=4, block_size=16)


def test_masked_shards_roll_over_with_their_masks(tmp_path):
    records = [PAIR, CHAT, ALPACA] * 30
    whole = prepare_bytes(write_jsonl(tmp_path / "p.jsonl", records), tmp_path / "whole")
    # shards of a size that leaves each split a last shard under half full, so that it is rebalanced
    # (with 100 neither was, and the masks' rebalancing went untested: hunt 31-b S2)
    counts = [DataDir(whole).num_tokens(split) for split in ("train", "val")]
    shard_tokens = next(n for n in range(60, 200) if all(0 < c % n < n // 2 and c > 2 * n for c in counts))
    cut = prepare_bytes(tmp_path / "p.jsonl", tmp_path / "cut", shard_tokens=shard_tokens)
    for split in ("train", "val"):
        a, c = DataDir(whole).open_shards(split), DataDir(cut).open_shards(split)
        assert len(c) > 2 and abs(c[-1].num_tokens - c[-2].num_tokens) <= 1  # the last two rebalanced, masks included
        assert np.concatenate([s.tokens for s in c]).tolist() == a[0].tokens.tolist()
        masks = [s.loss_mask if s.loss_mask is not None else np.ones(s.num_tokens, np.uint8) for s in c]
        assert np.concatenate(masks).tolist() == a[0].loss_mask.tolist()


def test_plain_records_beside_pairs_are_trained_on_everywhere(tmp_path):
    records = [{"text": "plain words"}, PAIR] * 10
    data = DataDir(prepare_bytes(write_jsonl(tmp_path / "mix.jsonl", records), tmp_path / "d"))
    [shard] = data.open_shards("train")
    ids, mask = shard.tokens.tolist(), shard.loss_mask.tolist()
    plain = b("plain words") + [EOT]
    at = next(i for i in range(len(ids)) if ids[i:i + len(plain)] == plain)
    assert mask[at:at + len(plain)] == [1] * len(plain)


def test_plain_jsonl_is_unchanged(tmp_path):
    """A text field wins over the instruction fields, and plain data is still version 1."""
    records = [{"text": f"document {i}", "prompt": "metadata"} for i in range(10)]
    data = DataDir(prepare_bytes(write_jsonl(tmp_path / "t.jsonl", records), tmp_path / "d"))
    assert not data.supervised and data.meta["format_version"] == 1
    assert all(s.version == 1 and s.loss_mask is None for s in data.open_shards("train"))
    s = data.meta["splits"]["val"]
    assert data.bits_per_byte(1.0) == pytest.approx(s["tokens"] / s["bytes"] / np.log(2))


@pytest.mark.parametrize("line, message", [
    ({"prompt": "Hi"}, "field 'response' is missing"),
    ({"prompt": "Hi", "response": "  "}, "field 'response' is empty"),
    ({"instruction": "", "output": "x"}, "field 'instruction' is empty"),
    ({"instruction": "Add", "input": "1 2"}, "field 'output' is missing"),
    ({"prompt": 3, "response": "x"}, "field 'prompt' is a number, not text"),  # "a int" (hunt, session 24)
    ({"prompt": "Hi", "response": ["x"]}, "field 'response' is a list, not text"),
    ({"prompt": "Hi", "response": True}, "field 'response' is a boolean, not text"),
    ({"messages": []}, "'messages' must be a non-empty list"),
    ({"messages": [{"role": "user", "content": "Hi"}]}, "last message must be the assistant's"),
    ({"messages": [{"role": "bot", "content": "Hi"}]}, r"messages\[0\]: role 'bot' is not one of"),
    ({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant"}]}, r"messages\[1\]: field 'content' is missing"),
    ({"title": "no text here"}, "no field 'text'.*prompt/response, instruction/output or messages"),
    ("{not json", "not valid JSON"),
    ("[" * 100_000 + "]" * 100_000, r"not valid JSON \(nested too deeply\)"),  # a traceback (hunt, session 27)
    ('{"text": 1' + "0" * 5000 + "}", r"not valid JSON \(Exceeds the limit \(4300 digits\)"),
    (["a list"], "no field 'text' \\(has: a list\\)"),  # it said "(has: list)"
])
def test_bad_records_name_the_file_and_line(tmp_path, line, message):
    path = write_jsonl(tmp_path / "pairs.jsonl", [PAIR, PAIR, line, PAIR])
    with pytest.raises(PrepareError, match=f"{path}:3: .*{message}"):
        prepare_bytes(path, tmp_path / "d")
    assert not (tmp_path / "d").exists()


def test_prepare_cli_reports_a_bad_record_in_one_line(tmp_path):
    path = write_jsonl(tmp_path / "pairs.jsonl", [PAIR, {"prompt": "Hi"}])
    proc = subprocess.run([sys.executable, str(ROOT / "data" / "prepare.py"), "--input", str(path), "--tokenizer",
                           "byte", "--out_dir", str(tmp_path / "d")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"data/prepare.py: error: {path}:2: field 'response' is missing (the record has: prompt)"


def test_make_pairs_from_the_plays(tmp_path):
    out = tmp_path / "who.jsonl"
    proc = subprocess.run([sys.executable, str(ROOT / "data" / "make_pairs.py"), "--play", "hamlet", "--max_pairs",
                           "50", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    pairs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(pairs) == 50 and len({p["prompt"] for p in pairs}) == 50
    assert pairs[0] == {"prompt": "Who says: Nay, answer me: stand, and unfold yourself.", "response": "FRANCISCO"}
    assert all(instruct.is_supervised(p) and len(p["prompt"]) >= len("Who says: ") + 20 for p in pairs)
    bad = subprocess.run([sys.executable, str(ROOT / "data" / "make_pairs.py"), "--play", "nonesuch", "--out",
                          str(out)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.startswith("data/make_pairs.py: error: --play 'nonesuch' matches 0 plays")



@pytest.fixture
def make_pairs():
    """data/make_pairs.py as a module: its main(argv) runs in-process, a tenth of a second a call."""
    spec = importlib.util.spec_from_file_location("make_pairs_script", ROOT / "data" / "make_pairs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("play", ["henry-v", "Richard II"])
def test_make_pairs_an_exact_play_name_wins_over_longer_names_that_contain_it(make_pairs, tmp_path, play):
    # henry-v is inside henry-vi-part-1..3 and henry-viii, richard-ii inside richard-iii.
    out = tmp_path / "p.jsonl"
    assert make_pairs.main(["--play", play, "--max_pairs", "2", "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 2


def test_make_pairs_out_after_an_equals_sign_expands_a_tilde(make_pairs, tmp_path, monkeypatch, capsys):
    # the shell leaves `--out=~/...` as it is: it was "~/pairs.jsonl: No such file or directory" (hunt 47-a A3)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    monkeypatch.chdir(tmp_path)
    assert make_pairs.main(["--max_pairs", "2", "--out=~/pairs.jsonl"]) == 0
    assert len((tmp_path / "home" / "pairs.jsonl").read_text().splitlines()) == 2
    assert not (tmp_path / "~").exists() and "wrote 2 pairs" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--max_pairs", "0"], "--max_pairs must be >= 1"), (["--max_pairs", "-1"], "--max_pairs must be >= 1"),
    (["--min_chars", "-1"], "--min_chars >= 0"), (["--min_chars", "100000"], "no speech in hamlet has a first line")])
def test_make_pairs_refuses_options_that_give_no_or_fewer_pairs_than_asked(make_pairs, tmp_path, capsys, args, message):
    out = tmp_path / "p.jsonl"
    assert make_pairs.main(args + ["--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("data/make_pairs.py: error: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_make_pairs_names_the_option_an_unknown_one_is_close_to(make_pairs):
    # argparse's "unrecognized arguments: --max_pair=3" named none, where train.py and sample.py do (hunt 48-g G2)
    with pytest.raises(SystemExit) as exit_:
        make_pairs.main(["--max_pair=3"])
    assert exit_.value.code == ("data/make_pairs.py: error: unknown option --max_pair (did you mean --max_pairs?); "
                                "see python data/make_pairs.py --help")  # one line, status 1


def test_make_pairs_output_faults_are_one_line_and_keep_the_old_file(make_pairs, tmp_path, capsys, fail_writes):
    for out, reason in [(tmp_path / "nodir" / "p.jsonl", "No such file or directory"), (tmp_path, "Is a directory")]:
        assert make_pairs.main(["--max_pairs", "1", "--out", str(out)]) == 1
        assert capsys.readouterr().err == f"data/make_pairs.py: error: {out}: {reason}; nothing was written\n"
    # paths without a name: with_name's ValueError was a traceback (hunt 32-c F5)
    for out in (".", "/"):
        assert make_pairs.main(["--max_pairs", "1", "--out", out]) == 1
        assert capsys.readouterr().err == f"data/make_pairs.py: error: {out}: Is a directory; nothing was written\n"
    with pytest.raises(SystemExit) as exit_:
        make_pairs.main(["--max_pairs", "1", "--out="])
    assert exit_.value.code == "data/make_pairs.py: error: --out names no file"  # one line, status 1
    out = tmp_path / "p.jsonl"
    out.write_text("an older complete file\n")

    fail_writes(errno.EFBIG, keep=100)  # the first bytes land (ulimit -f)
    assert make_pairs.main(["--out", str(out)]) == 1
    assert capsys.readouterr().err == f"data/make_pairs.py: error: {out}: File too large; nothing was written\n"
    assert out.read_text() == "an older complete file\n" and [p.name for p in tmp_path.iterdir()] == ["p.jsonl"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_make_pairs_through_a_symlink_replaces_its_target_not_the_link(make_pairs, tmp_path):
    # the link was replaced by a file of the new pairs; the shared file it named kept the old ones (hunt 43-d D10)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "pairs.jsonl").write_text("old\n")
    (tmp_path / "pairs.jsonl").symlink_to(tmp_path / "shared" / "pairs.jsonl")
    assert make_pairs.main(["--max_pairs", "2", "--out", str(tmp_path / "pairs.jsonl")]) == 0
    assert (tmp_path / "pairs.jsonl").is_symlink()
    assert len((tmp_path / "shared" / "pairs.jsonl").read_text().splitlines()) == 2
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "nowhere" / "x.jsonl")  # (a link to nothing: one line)
    assert make_pairs.main(["--max_pairs", "2", "--out", str(tmp_path / "dangling.jsonl")]) == 1
    assert (tmp_path / "dangling.jsonl").is_symlink()
    (tmp_path / "loop.jsonl").symlink_to("loop.jsonl")  # (a link to itself: one line, not a traceback, hunt 43-f F4)
    assert make_pairs.main(["--max_pairs", "2", "--out", str(tmp_path / "loop.jsonl")]) == 1
    assert (tmp_path / "loop.jsonl").is_symlink()


def test_make_pairs_summary_to_a_full_disk_or_a_closed_pipe_is_one_line_or_quiet(tmp_path):
    # block-buffered, as stdout to a file or pipe is without PYTHONUNBUFFERED: the summary failed at the
    # interpreter's exit, "Exception ignored" and status 120 (review 33)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    cmd = [sys.executable, str(ROOT / "data" / "make_pairs.py"), "--max_pairs", "2", "--out", str(tmp_path / "p.jsonl")]
    with open("/dev/full", "w") as full:
        proc = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and proc.stderr == ("data/make_pairs.py: error: writing to stdout failed: No space left "
                                                    "on device; the rest of its output is dropped, and the work goes on\n")
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 2
    read, write = os.pipe()
    os.close(read)  # the reader gone before a line was written
    proc = subprocess.run(cmd, stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    os.close(write)
    assert proc.returncode == 0 and proc.stderr == ""


def test_make_pairs_never_says_nothing_was_written_of_a_file_it_replaced(make_pairs, tmp_path, capsys, monkeypatch):
    # The directory's fsync after the rename failed (hunt 33-a F3: an EIO injected with strace): it
    # said "nothing was written" with the new pairs in place
    import gpt.atomic

    def fsync_dir(path):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(gpt.atomic, "fsync_dir", fsync_dir)
    out = tmp_path / "p.jsonl"
    out.write_text("an older complete file\n")
    assert make_pairs.main(["--max_pairs", "2", "--out", str(out)]) == 1
    assert capsys.readouterr().err == (f"data/make_pairs.py: error: {out}: Input/output error syncing its directory: the new file is in "
                                       "place, but a crash may yet lose it\n")
    assert len(out.read_text().splitlines()) == 2 and [p.name for p in tmp_path.iterdir()] == ["p.jsonl"]


# ----------------------------------------------------------------------------- end to end

SPEAKERS = {"Hamlet": "Denmark", "Ophelia": "flowers", "Romeo": "Verona", "Juliet": "balcony", "Macbeth": "dagger",
            "Portia": "mercy"}
WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing "
         "matches and pack my box with five dozen liquor jugs").split()
# A tiny model from scratch, sized so that a 2-core machine trains it in seconds.
TINY = ["--n_layer=2", "--n_head=4", "--n_embd=64", "--block_size=128", "--batch_size=8", "--max_iters=300",
        "--learning_rate=3e-3", "--min_lr=1e-4", "--warmup_iters=20", "--eval_interval=1000", "--eval_iters=1",
        "--dropout=0", "--compile=false", "--device=cpu", "--seed=1337"]


def who_says_pairs(n: int = 60, seed: int = 0) -> list[dict]:
    """Fixed "Who says" pairs: each line starts with its speaker's word, then random words."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        who = rng.choice(sorted(SPEAKERS))
        line = " ".join([SPEAKERS[who]] + [rng.choice(WORDS) for _ in range(rng.randint(2, 4))])
        pairs.append({"prompt": f"Who says: {line}?", "response": who})
    return pairs


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The same 60 pairs (half of them validation: 30 trained on) prepared as instruction data and as
    plain text with the same template, and the same tiny model trained 300 steps on each."""
    root = tmp_path_factory.mktemp("instruct")
    pairs = who_says_pairs()
    text = [{"text": instruct.render(instruct.to_messages(p, "x")).removesuffix("<|endoftext|>")} for p in pairs]
    dirs = {}
    for kind, records in (("pairs", pairs), ("plain", text)):
        dirs[kind] = prepare_bytes(write_jsonl(root / f"{kind}.jsonl", records), root / kind, val_fraction=0.5)
    assert DataDir(dirs["pairs"]).supervised and not DataDir(dirs["plain"]).supervised
    # the same tokens: only the mask differs
    assert [s.tokens.tolist() for s in DataDir(dirs["pairs"]).open_shards("train")] == \
           [s.tokens.tolist() for s in DataDir(dirs["plain"]).open_shards("train")]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models gain nothing from threads on a shared machine
    outputs = {}
    try:
        for kind, data in dirs.items():
            stdout = io.StringIO()
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(sys, "stdout", stdout)
                assert train.main([f"--data={data}", f"--out_dir={root / ('out-' + kind)}", *TINY]) == 0
            outputs[kind] = stdout.getvalue()
    finally:
        torch.set_num_threads(threads)
    [train_shard] = DataDir(dirs["pairs"]).open_shards("train")
    train_text = BYTE.decode([t for t in train_shard.tokens.tolist() if t != EOT])
    seen = [p for p in pairs if f"User:\n{p['prompt']}\n\n" in train_text]
    assert 25 <= len(seen) <= 35
    return {"root": root, "dirs": dirs, "outputs": outputs, "seen": seen,
            "runs": {k: root / f"out-{k}" for k in dirs}}


def response_loss(run: Path, data: Path, split: str) -> float:
    """Mean loss over the response tokens of every window of the split."""
    model, _ = load_model(run)
    total = count = 0.0
    with torch.no_grad():
        for x, y in ValBatches(data, 8, 128, split=split):
            _, loss = model.eval()(x, y)
            n = int((y != -1).sum())
            total, count = total + loss.item() * n, count + n
    return total / count


def ask(capsys, run: Path, prompt: str) -> dict:
    rc = sample.main([f"--out_dir={run}", f"--instruction={prompt}", "--temperature=0", "--device=cpu",
                      "--max_new_tokens=20", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "was trained on plain text" not in err  # (instruction data: no warning)
    [answer] = [json.loads(line) for line in out.splitlines()]
    return answer


@pytest.mark.slow
def test_tiny_model_answers_its_training_prompts(capsys, trained):
    assert "bits per byte (response tokens only)" in trained["outputs"]["pairs"]
    assert "response tokens only" not in trained["outputs"]["plain"]
    answers = [ask(capsys, trained["runs"]["pairs"], p["prompt"]) for p in trained["seen"]]
    right = sum(a["text"] == p["response"] for a, p in zip(answers, trained["seen"]))
    assert right >= 0.9 * len(trained["seen"]), [(p, a["text"]) for a, p in zip(answers, trained["seen"])]
    assert all(a["finish_reason"] == "eot" for a in answers)  # the answer ends at end-of-text, alone
    # the same template asked of the run on plain text: answered, with a warning (hunt 30-d F1)
    assert sample.main([f"--out_dir={trained['runs']['plain']}", f"--instruction={trained['seen'][0]['prompt']}",
                        "--device=cpu", "--max_new_tokens=5", "--json"]) == 0
    assert "was trained on plain text" in capsys.readouterr().err


@pytest.mark.slow
def test_loss_on_responses_only_beats_loss_everywhere_at_equal_steps(trained):
    pairs, plain = trained["runs"]["pairs"], trained["runs"]["plain"]
    data = trained["dirs"]["pairs"]
    supervised_loss, plain_loss = response_loss(pairs, data, "train"), response_loss(plain, data, "train")
    # measured 0.09 vs 0.31 nats per response token (torch 2.x, CPU)
    assert supervised_loss * 1.5 < plain_loss, (supervised_loss, plain_loss)


@pytest.mark.slow
def test_chat_through_stdin(trained):
    """--chat in a real process: one answer line per question line, the conversation carried on."""
    questions = trained["seen"][:3]
    proc = subprocess.run([sys.executable, str(ROOT / "sample.py"), f"--out_dir={trained['runs']['pairs']}", "--chat",
                           "--temperature=0", "--device=cpu", "--max_new_tokens=20"],
                          input="".join(q["prompt"] + "\n" for q in questions), capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    answers = proc.stdout.splitlines()
    assert len(answers) == 3 and all(a in SPEAKERS for a in answers), answers
    assert sum(a == q["response"] for a, q in zip(answers, questions)) >= 2


@pytest.mark.slow
def test_chat_json_answers_each_line(capsys, monkeypatch, trained):
    seen = trained["seen"]
    lines = [json.dumps({"prompt": seen[0]["prompt"]}),
             "",
             json.dumps({"instruction": seen[1]["prompt"], "input": "", "output": "reference, left out"}),
             "{oops",
             json.dumps({"messages": [{"role": "user", "content": seen[2]["prompt"]}]})]
    # a file that begins with a byte order mark, as a training file may (data preparation drops it):
    # line 1 was refused as "not valid JSON (Unexpected UTF-8 BOM)" (audit, 2026-11-26)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbf" + ("\n".join(lines) + "\n").encode())))
    rc = sample.main([f"--out_dir={trained['runs']['pairs']}", "--chat", "--json", "--temperature=0",
                      "--device=cpu", "--max_new_tokens=20"])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rc == 1  # one line was not a request; the others were answered
    assert [o["line"] for o in out] == [1, 3, 4, 5]
    assert out[2] == {"line": 4, "error": out[2]["error"]} and "line 4: not valid JSON" in out[2]["error"]
    # each request is answered on its own: as --instruction answers the same question
    for o, q in zip([out[0], out[1], out[3]], seen[:3]):
        assert o["text"] == ask(capsys, trained["runs"]["pairs"], q["prompt"])["text"]
        assert o["finish_reason"] == "eot" and o["dropped_turns"] == 0


def test_a_null_field_is_named_null_not_missing():
    with pytest.raises(instruct.RecordError, match=r"^x:1: field 'prompt' is null, not text$"):
        instruct.to_messages({"prompt": None, "response": "y"}, "x:1")
    with pytest.raises(instruct.RecordError, match=r"^x:1: field 'prompt' is missing \(the record has: response\)$"):
        instruct.to_messages({"response": "y"}, "x:1")
    assert instruct.to_messages({"instruction": "i", "input": None, "output": "o"}, "x:1")[0]["content"] == "i"


# ----------------------------------------------------------------------------- a step's loss on answers


def answers_of_many_lengths(tmp_path: Path) -> list[str]:
    """train.py's options on instruction data whose micro-batches hold different numbers of answer tokens."""
    rng = random.Random(0)
    pairs = [{"prompt": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))),
              "response": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))} for _ in range(200)]
    data = prepare_bytes(write_jsonl(tmp_path / "pairs.jsonl", pairs), tmp_path / "data", val_fraction=0.1)
    batches = TrainBatches(data, 2, 32)  # the two micro-batches of step 1 differ
    assert len({int((batches.next_batch()[1] != -1).sum()) for _ in range(2)}) == 2
    return [f"--data={data}", "--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=32", "--max_iters=4",
            "--eval_interval=1000", "--eval_iters=1", "--log_interval=1", "--dropout=0", "--compile=false",
            "--device=cpu", "--warmup_iters=1", "--learning_rate=1e-2"]


def step_losses(out: Path) -> list[float]:
    return [r["loss"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


def test_a_steps_loss_is_the_mean_over_its_answer_tokens_however_it_is_accumulated(tmp_path):
    # Micro-batches with few answer tokens weighed as much as ones with many (a mean of their own
    # means), and one with none diluted the step; validation weighs by counted targets. Now batch 4
    # in one micro-batch and 2 x 2 accumulated train alike (audit, 2026-11-26).
    common = answers_of_many_lengths(tmp_path)
    assert train.main([*common, "--batch_size=4", f"--out_dir={tmp_path / 'one'}"]) == 0
    assert train.main([*common, "--batch_size=2", "--gradient_accumulation_steps=2", f"--out_dir={tmp_path / 'two'}"]) == 0
    one = step_losses(tmp_path / "one")
    assert len(one) == 4 and one == pytest.approx(step_losses(tmp_path / "two"), rel=1e-5)


def test_instruction_datas_micro_batches_are_drawn_as_they_are_trained_on(tmp_path, draws_and_forwards):
    # Each micro-batch's weight needs the step's count of answer tokens, and a step drew its whole list of
    # micro-batches first to count them, its memory growing with --gradient_accumulation_steps (hunt 49-b B2;
    # plain data draws them as trained on since hunt 48-g G1). The counts now come from the masks alone.
    common = answers_of_many_lengths(tmp_path)
    draws_and_forwards.clear()  # (what preparing the data drew)
    assert train.main([*common, "--batch_size=2", "--gradient_accumulation_steps=3", f"--out_dir={tmp_path / 'run'}"]) == 0
    assert draws_and_forwards == ["draw", "train"] * 12


def test_the_validation_loss_is_the_mean_over_all_answer_tokens_of_its_batches(tmp_path):
    # Tested with one evaluation batch only: a mean of the batches' own means (a batch with 3 answer
    # tokens weighing as much as one with 300) passed, and with it a wrong `best` (hunt 31-b T2b)
    import torch.nn.functional as F

    from gpt.model import GPT, GPTConfig
    from gpt.runtime import Dist

    answers_of_many_lengths(tmp_path)
    val = ValBatches(tmp_path / "data", 2, 32, max_batches=4)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=257, block_size=32, n_layer=1, n_head=2, n_embd=32))
    total, counts = 0.0, []
    with torch.no_grad():
        for x, y in val:
            logits, _ = model(x)
            total += F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-1, reduction="sum").item()
            counts.append(int((y != -1).sum()))
    assert len(counts) == 4 and len(set(counts)) > 1  # batches with different numbers of answer tokens
    loss = train.evaluate(model, val, torch.device("cpu"), torch.float32, Dist())
    assert loss == pytest.approx(total / sum(counts), rel=1e-5)


@pytest.mark.slow
def test_a_steps_loss_is_the_mean_over_its_answer_tokens_across_processes(tmp_path):
    from tests.test_train import torchrun

    common = answers_of_many_lengths(tmp_path)
    assert train.main([*common, "--batch_size=4", f"--out_dir={tmp_path / 'one'}"]) == 0
    proc = torchrun(ROOT / "train.py", *common, "--batch_size=2", "--gradient_accumulation_steps=2",
                    f"--out_dir={tmp_path / 'ranks'}")  # two gloo processes, a micro-batch each
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert step_losses(tmp_path / "ranks") == pytest.approx(step_losses(tmp_path / "one"), rel=1e-5)


def test_records_longer_than_the_window_are_warned_about(tmp_path, capsys):
    # windows of context alone train nothing: steps of such windows logged a loss of 0 without a word
    pairs = [{"prompt": "x" * 3000, "response": "LONG"}, *({"prompt": "Hi", "response": "Yo"} for _ in range(40))]
    data = prepare_bytes(write_jsonl(tmp_path / "long.jsonl", pairs), tmp_path / "data", val_fraction=0.1)
    none, seen, epochs = TrainBatches(data, 2, 32, seed=1337).without_targets(1)  # (the run's seed, its one step)
    assert epochs == 1
    assert seen > 0 and none >= 3000 // 33 - 2  # the long prompt's windows (its split's share of them)
    run = [f"--data={data}", "--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=2",
           "--eval_iters=1", "--compile=false", "--device=cpu", f"--out_dir={tmp_path / 'run'}"]
    assert train.main([*run, "--max_iters=1"]) == 0
    warning = (f"warning: {none:,} of {seen:,} training windows of 32 tokens hold no answer token (records longer than "
               "the window) and train nothing: shorten the records")
    assert f"{warning}, or raise --block_size\n" in capsys.readouterr().err
    # resumed, the window cannot change: the advice is only what can (review, 2026-11-26)
    assert train.main([*run, "--max_iters=2", "--init_from=resume"]) == 0
    assert f"{warning} (a resumed run keeps its --block_size)\n" in capsys.readouterr().err
    # from pretrained weights the window goes up to their context, and one at it already cannot rise: it was
    # told to "raise --block_size up to the model's context" all the same (hunt 35-a A4)
    tuned = [f"--data={data}", "--batch_size=2", "--eval_iters=1", "--compile=false", "--device=cpu", "--max_iters=1",
             f"--init_from={tmp_path / 'run'}"]
    assert train.main([*tuned, f"--out_dir={tmp_path / 'at'}"]) == 0
    assert f"{warning} (the window is the model's whole context of 32 already)\n" in capsys.readouterr().err
    assert train.main([*tuned, "--block_size=16", f"--out_dir={tmp_path / 'below'}"]) == 0
    none, seen, _ = TrainBatches(data, 2, 16, seed=1337).without_targets(1)
    assert (f"warning: {none:,} of {seen:,} training windows of 16 tokens hold no answer token (records longer than "
            "the window) and train nothing: shorten the records, or raise --block_size up to the model's context of "
            "32\n") in capsys.readouterr().err


def test_the_warning_on_windows_without_an_answer_counts_the_epochs_the_run_trains(tmp_path, capsys):
    # 2 records of 16-token windows: epoch 0's windows alone were counted, at no offset, "2 of 2 training windows ...
    # train nothing", where the run's later epochs cut them elsewhere and step 4 trained (hunt 51-f L1)
    pairs = [{"prompt": "Who says: line 0 xxxxxxxxxxxxxx", "response": "OPHELIA"},
             {"prompt": "Who says: line 1 xxxxxxxxx", "response": "HAMLET"}]
    data = prepare_bytes(write_jsonl(tmp_path / "two.jsonl", pairs), tmp_path / "data", val_fraction=0.5)
    out = tmp_path / "run"
    assert train.main([f"--data={data}", "--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=16",
                       "--batch_size=2", "--eval_iters=1", "--compile=false", "--device=cpu", "--max_iters=4",
                       "--log_interval=1", "--eval_interval=100", f"--out_dir={out}"]) == 0
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    trained = [r["step"] for r in steps if r.get("loss") is not None]
    assert trained  # (the run trained: a step held an answer token)
    assert ("warning: 7 of 8 training windows of 16 tokens over 4 epochs hold no answer token (records longer than "
            "the window) and train nothing") in capsys.readouterr().err
    assert len(trained) == 1  # (3 steps of 2 windows without one, and 1 window of step 4)


def test_a_step_without_an_answer_token_logs_no_loss(tmp_path):
    # It logged "loss": 0.0, a perfect loss, where there was nothing to count (hunt 29-c)
    from gpt.config import TrainConfig

    pairs = [{"prompt": "x" * 1500, "response": "LONG"}, *({"prompt": "Hi", "response": "Yo"} for _ in range(40))]
    data = prepare_bytes(write_jsonl(tmp_path / "long.jsonl", pairs), tmp_path / "data", val_fraction=0.1)
    out = tmp_path / "run"
    assert train.main([f"--data={data}", "--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=32",
                       "--batch_size=2", "--eval_iters=1", "--compile=false", "--device=cpu", "--max_iters=16",
                       "--log_interval=1", "--eval_interval=100", f"--out_dir={out}"]) == 0
    loader = TrainBatches(data, 2, 32, seed=TrainConfig().seed)  # the run's batches, step by step
    empty = [not bool((loader.next_batch()[1] != -1).any()) for _ in range(16)]
    assert any(empty) and not all(empty)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    assert [r["step"] for r in steps] == list(range(1, 17))
    assert [r["loss"] is None for r in steps] == empty
    assert all(r["loss"] > 0 for r in steps if r["loss"] is not None) and (out / "loss.png").is_file()


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_a_step_without_an_answer_token_leaves_the_weights_as_they_were(tmp_path, optimizer):
    # Its gradients were zero, but the optimizer stepped all the same: weight decay shrank the weights
    # (and the momentum of earlier steps moved them), training on no data (hunt 35-a A1)
    from gpt.config import TrainConfig

    model = ["--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=2", "--eval_iters=1",
             "--compile=false", "--device=cpu", "--eval_interval=100", "--warmup_iters=1"]
    short = prepare_bytes(write_jsonl(tmp_path / "short.jsonl", [{"prompt": "Hi", "response": "Yo"}] * 40),
                          tmp_path / "short")
    assert train.main([f"--data={short}", *model, "--max_iters=2", f"--out_dir={tmp_path / 'base'}"]) == 0
    pairs = [{"prompt": "x" * 6000, "response": "LONG"}, {"prompt": "y" * 6000, "response": "LONG"}]
    data = prepare_bytes(write_jsonl(tmp_path / "long.jsonl", pairs), tmp_path / "data", val_fraction=0.5)
    loader = TrainBatches(data, 2, 32, seed=TrainConfig().seed)  # the run's batches: none holds an answer token
    assert not any(bool((loader.next_batch()[1] != -1).any()) for _ in range(3))
    out = tmp_path / "run"
    assert train.main([f"--data={data}", *model, "--max_iters=3", "--log_interval=1", f"--optimizer={optimizer}",
                       "--weight_decay=0.1", f"--init_from={tmp_path / 'base'}", f"--out_dir={out}"]) == 0
    assert [r["loss"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "loss" in r] \
        == [None] * 3
    before, after = load_model(tmp_path / "base")[0].state_dict(), load_model(out)[0].state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_validation_windows_without_an_answer_token_measure_nothing_and_keep_no_best(tmp_path, capsys):
    # Their loss was 0/0, logged as 0.0000, and `best` stayed on the first evaluation, an untrained
    # model that sample.py --ckpt=best then took (hunt, session 27)
    from gpt.data import ValBatches

    pairs = [{"prompt": f"Question {i}: " + "tell me about the weather today " * 4, "response": "Sunny."}
             for i in range(8)]
    data = prepare_bytes(write_jsonl(tmp_path / "few.jsonl", pairs), tmp_path / "data")
    val = ValBatches(data, 1, 64, max_batches=20)
    assert val.windows >= 1 and not val.holds_targets()  # the one record's answer is past the split's windows
    run = [f"--data={data}", "--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=64", "--batch_size=1",
           "--eval_interval=2", "--compile=false", "--device=cpu", f"--out_dir={tmp_path / 'run with space'}"]
    assert train.main([*run, "--max_iters=4"]) == 0
    out, err = capsys.readouterr()
    assert (f"warning: the validation windows ({val.windows} of 64 tokens) hold no answer token (instruction data "
            "counts only those): evaluations measure nothing") in err
    records = [json.loads(line) for line in (tmp_path / "run with space" / "metrics.jsonl").read_text().splitlines()]
    assert not any("val_loss" in r for r in records) and "val loss" not in out
    assert not (tmp_path / "run with space" / "best").exists()
    # the closing line says so, and its command pastes as one argument (a path with a space split in two);
    # it asks in the template, where plain sampling of the run came back empty (hunt 42-e E1)
    assert out.splitlines()[-1] == (f"done: step 4, no validation loss measured. Ask it with: python sample.py "
                                    f"--out_dir='{tmp_path / 'run with space'}' --chat (a question per line; or "
                                    "--instruction=TEXT)")
    assert train.main([*run, "--eval_only=true", "--init_from=resume"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"train.py: error: the validation windows ({val.windows} of 64 tokens) hold no answer token: there is "
        "nothing to evaluate; prepare with a larger --val_fraction (data/prepare.py's option: for raw text, "
        "data/prepare.py --input TEXT --val_fraction F --out_dir DIR, then train.py --data=DIR)")


def test_make_pairs_asks_only_about_speeches_of_real_speakers_and_lines_of_verse(make_pairs, tmp_path):
    # a verse line ending in ':' after a stage direction was taken for a speaker ("Who says: Hamlet in
    # madness hath Polonius slain," -> "Friends both, go join you with some further aid"), and a stage
    # direction for the speech's first line ("Who says: [Aside to GUILDENSTERN]") (hunt 34-e E3)
    out = tmp_path / "p.jsonl"
    assert make_pairs.main(["--out", str(out)]) == 0
    pairs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(pairs) == 833
    speakers = {p["response"] for p in pairs}
    assert "Friends both, go join you with some further aid" not in speakers and "O, give me leave" not in speakers
    assert not [p for p in pairs if p["prompt"].startswith("Who says: [")]


def test_sample_tokens_on_instruction_data_answers_a_question_of_the_data(tmp_path, capsys):
    # from end-of-text such a model, its loss on the answers only, wrote nothing: every sample of
    # --sample_tokens was empty (hunt 42-e E6)
    pairs = [{"prompt": f"Question {i}?", "response": "An answer."} for i in range(40)]
    data = prepare_bytes(write_jsonl(tmp_path / "pairs.jsonl", pairs), tmp_path / "data", val_fraction=0.2)
    run = [f"--data={data}", "--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=64", "--batch_size=2",
           "--max_iters=2", "--eval_interval=2", "--eval_iters=1", "--sample_tokens=8", "--compile=false",
           "--device=cpu", f"--out_dir={tmp_path / 'run'}"]
    assert train.main(run) == 0
    samples = re.findall(r"---- sample ----\n(.*?)\n----------------", capsys.readouterr().out, re.S)
    [val_shard] = DataDir(data).open_shards("val")
    asked = BYTE.decode(val_shard.tokens[:int(np.argmax(val_shard.loss_mask))].tolist())  # its first question
    assert re.fullmatch(r"User:\nQuestion \d+\?\n\nAssistant:\n", asked)
    assert len(samples) == 2 and all(s.startswith(asked) for s in samples), samples
