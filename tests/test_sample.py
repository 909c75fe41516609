"""sample.py and gpt/generation.py: greedy equals the full forward's argmax, seeds, stop strings,
prompt cropping, cached == uncached == static decode step, shared prefill, streaming UTF-8,
--json, the CLI end to end on a checkpoint train.py wrote, and one clear line for every bad value."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import sample
from gpt.checkpoint import load_model, save_checkpoint
from gpt.errors import sigterm_raises
from gpt.generation import SampleText, crop_prompt, generate_samples, native_cpu_bf16, pick_inference_dtype
from gpt.model import GPT, GPTConfig
from gpt.tokenizer import get_tokenizer

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(vocab_size=257, block_size=32, n_layer=2, n_head=2, n_embd=32)
BYTE = get_tokenizer("byte")


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models gain nothing from threads, and a busy machine makes them wait for each other."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def make_run(out_dir: Path, seed: int = 0, tokenizer: str = "byte", vocab_size: int = 257, config=None,
             meta_vocab: int | None = 257, scale_weights: float | None = None, endless: bool = False,
             **meta_keys) -> Path:
    torch.manual_seed(seed)
    cfg = GPTConfig(**{**TINY, "vocab_size": vocab_size, **(config or {})})
    model = GPT(cfg)
    if endless:  # the end-of-text never drawn: every position's logits are ln_f's bias against the embeddings,
        with torch.no_grad():  # the end-of-text's -20, the others' from -4 to 4 (samples as long as asked)
            eot = model.transformer.wte.weight[get_tokenizer(tokenizer).eot_token]
            model.transformer.ln_f.weight.zero_()
            model.transformer.ln_f.bias.copy_(eot * (-20 / (eot @ eot)))
    if scale_weights is not None:  # finite weights, logits beyond fp32's range (3.4e38) on any device:
        with torch.no_grad():  # every product ln_f(x)_c * wte_vc is ~1e35 * 1e4; the final LayerNorm's
            model.transformer.ln_f.weight.fill_(scale_weights)  # input (~1e4) stays far from overflowing,
            model.transformer.wte.weight.mul_(1e6)  # as a GPU's LayerNorm would otherwise output zeros
    meta = {"model_config": cfg.to_dict(), "tokenizer": tokenizer, "config": {}, **meta_keys}
    if meta_vocab is not None:
        meta["vocab_size"] = meta_vocab
    save_checkpoint(out_dir, 7, model, state={}, meta=meta, keep_last=2)
    return out_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("run") / "out")


def cli(capsys, *args) -> tuple[int, str, str]:
    rc = sample.main([str(a) for a in args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def cli_json(capsys, run_dir, *args) -> list[dict]:
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--json", "--device=cpu", "--dtype=float32", *args)
    assert rc == 0, err
    return [json.loads(line) for line in out.splitlines()]


# -- greedy, seeds, top-k ----------------------------------------------------------------------


def test_greedy_is_deterministic_and_the_argmax_of_the_full_forward_at_every_step(capsys, run_dir):
    prompt, n = "To be", 20
    first = cli_json(capsys, run_dir, f"--start={prompt}", "--temperature=0", f"--max_new_tokens={n}")
    again = cli_json(capsys, run_dir, f"--start={prompt}", "--temperature=0", f"--max_new_tokens={n}")
    assert first == [{**again[0], "tokens_per_s": first[0]["tokens_per_s"], "seconds": first[0]["seconds"]}]
    model, _ = load_model(run_dir)
    ids = BYTE.encode(prompt)
    new = []
    with torch.no_grad():
        for _ in range(n):
            logits, _ = model.eval()(torch.tensor([ids + new]))  # the whole sequence, no cache
            new.append(int(logits[0, -1, :BYTE.n_vocab].argmax()))
            if new[-1] == BYTE.eot_token:
                break
    assert first[0]["text"] == BYTE.decode(new) and first[0]["tokens"] == len(new)
    assert first[0]["finish_reason"] == ("eot" if new[-1] == BYTE.eot_token else "length")


def test_torchrun_is_refused_in_one_line(run_dir):
    # every process sampled and printed the same text, and --chat's processes shared one stdin (hunt, session 26)
    from tests.test_train import torchrun

    proc = torchrun(ROOT / "sample.py", f"--out_dir={run_dir}", "--max_new_tokens=4")
    assert proc.returncode != 0 and "---------------" not in proc.stdout
    assert [line for line in proc.stderr.splitlines() if "sample.py: error:" in line] == [
        "sample.py: error: sample.py runs in one process: start it with python, not torchrun (its 2 processes "
        "would each print the same samples)"]


@pytest.mark.parametrize("value", ["", "two"])
def test_a_world_size_that_is_no_number_is_one_line(capsys, run_dir, monkeypatch, value):
    monkeypatch.setenv("WORLD_SIZE", value)  # (`export WORLD_SIZE=$N`, N unset: int() of it was a ValueError traceback)
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--max_new_tokens=2")
    assert rc == 1 and out == "" and err == (f"sample.py: error: WORLD_SIZE={value!r} in the environment is not a "
                                             "number of processes: unset it, or start the processes with torchrun\n")


def test_a_local_rank_left_in_the_environment_does_not_silence_errors(capsys, run_dir, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")  # not under torchrun (no WORLD_SIZE): exit status 1 said nothing
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--num_samples=0")
    assert rc == 1 and err == "sample.py: error: num_samples must be >= 1, got 0\n"


@pytest.mark.parametrize("top_p", ["1.0", "0.9"])
def test_sampling_without_compile_never_imports_the_compiler(run_dir, top_p):
    # Issue 9: `python sample.py` within 3 s of starting, on a GPU. Importing torch._dynamo costs
    # ~1.4 s on the 2-core CPU, and two innocent calls pulled it in: initialising the weights of
    # the model built on the meta device, and restoring use_deterministic_algorithms on exit.
    # A third: the nucleus's cumulative sum, a custom op for the compiled step, whose first eager call
    # imported it before the first token of every --top_p sample (2-3 s; hunt 43-b B5)
    code = ("import sys, sample; rc = sample.main(sys.argv[1:]); "
            "print(rc, 'torch._dynamo' in sys.modules, 'torch._inductor' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, f"--out_dir={run_dir}", "--max_new_tokens=5", "--device=cpu",
                           "--compile=auto", f"--top_p={top_p}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.split()[-3:] == ["0", "False", "False"], proc.stdout + proc.stderr


def test_greedy_samples_of_one_batch_are_said_to_be_the_same(capsys, run_dir):
    # --temperature=0 --num_samples=3 printed three copies of one sample without a word (hunt 43-b B6)
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--temperature=0", "--num_samples=3", "--max_new_tokens=8",
                       "--device=cpu")
    assert rc == 0 and len(set(out.split(sample.SEPARATOR + "\n"))) == 2  # three equal samples (and the end)
    assert "note: --temperature=0 is greedy decoding, which has one answer: the 3 samples are the same" in err
    for options in (["--temperature=0"], ["--temperature=0.5", "--num_samples=3"]):
        rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--max_new_tokens=8", "--device=cpu", *options)
        assert rc == 0 and "note: " not in err


def test_top_k_1_equals_greedy(capsys, run_dir, monkeypatch):
    greedy = cli_json(capsys, run_dir, "--start=abc", "--temperature=0", "--max_new_tokens=24")
    top1 = cli_json(capsys, run_dir, "--start=abc", "--temperature=1.3", "--top_k=1", "--seed=5", "--max_new_tokens=24")
    assert top1[0]["text"] == greedy[0]["text"]
    # in a chat too: sample.py's --chat passing top_k=None whatever --top_k said passed this file and
    # tests/test_chat.py (hunt 44-i I5)
    answers = []
    for options in (["--temperature=0"], ["--temperature=1.3", "--top_k=1", "--seed=5"]):
        monkeypatch.setattr(sample.sys, "stdin", io.TextIOWrapper(io.BytesIO(b"Hi\n")))
        rc, out, _ = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--chat", "--max_new_tokens=24", *options)
        answers.append(out)
    assert rc == 0 and answers[0].strip() and answers[0] == answers[1], answers


def test_top_p_none_is_off_as_the_refusal_of_a_bad_top_p_says(capsys, run_dir, monkeypatch):
    # "top_p must be in (0, 1] (1 or None to disable)", but --top_p=none was refused: invalid float
    # value (hunt, session 24)
    rc, _, err = cli(capsys, f"--out_dir={run_dir}", "--top_p=0")
    assert rc == 1 and "(1 or None to disable)" in err, err
    # What reaches generation, from sample and chat: sample.py passing top_p=None whatever --top_p said
    # made every sample "off", and the comparison of off with off below still passed (hunt 44-i I4)
    nuclei, generate_tokens = [], GPT.generate_tokens
    monkeypatch.setattr(GPT, "generate_tokens", lambda self, idx, n, temperature, top_k, top_p, *a, **k: (
        nuclei.append(top_p), generate_tokens(self, idx, n, temperature, top_k, top_p, *a, **k))[1])
    args = ("--start=abc", "--temperature=1", "--top_k=none", "--seed=3", "--max_new_tokens=24")
    off = cli_json(capsys, run_dir, *args, "--top_p=1")
    for none in "none", "None":
        assert [s["text"] for s in cli_json(capsys, run_dir, *args, f"--top_p={none}")] == [s["text"] for s in off]
    cli_json(capsys, run_dir, *args, "--top_p=0.5")
    monkeypatch.setattr(sample.sys, "stdin", io.TextIOWrapper(io.BytesIO(b"Hi\n")))
    cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--chat", "--max_new_tokens=3", "--top_p=0.25")
    assert nuclei == [1.0, None, None, 0.5, 0.25]


def test_same_seed_same_samples_different_seed_different(capsys, run_dir):
    args = ("--start=abc", "--temperature=1", "--top_k=none", "--num_samples=3", "--max_new_tokens=24")
    a = [s["text"] for s in cli_json(capsys, run_dir, *args, "--seed=1")]
    b = [s["text"] for s in cli_json(capsys, run_dir, *args, "--seed=1")]
    c = [s["text"] for s in cli_json(capsys, run_dir, *args, "--seed=2")]
    assert a == b and a != c
    assert len(set(a)) == 3  # the samples of one batch differ from each other


def test_empty_prompt_starts_from_end_of_text(capsys, run_dir):
    [s] = cli_json(capsys, run_dir, "--temperature=0", "--max_new_tokens=10")
    model, _ = load_model(run_dir)
    ref = model.generate(torch.tensor([[BYTE.eot_token]]), 10, temperature=0, vocab_limit=BYTE.n_vocab)[0, 1:]
    ids = ref.tolist()
    ids = ids[:ids.index(BYTE.eot_token)] if BYTE.eot_token in ids else ids
    assert s["prompt"] == "" and s["text"] == BYTE.decode(ids)


# -- cache paths -------------------------------------------------------------------------------


def test_cached_and_uncached_greedy_agree_past_the_block_size(capsys, run_dir, monkeypatch):
    args = ("--start=Once upon a time", "--temperature=0", "--max_new_tokens=80")  # block_size is 32
    lengths, forward = [], GPT.forward
    monkeypatch.setattr(GPT, "forward", lambda self, idx, *a, **k: (lengths.append(idx.shape[1]),
                                                                    forward(self, idx, *a, **k))[1])
    cached = cli_json(capsys, run_dir, *args)
    cached_lengths, lengths[:] = lengths[:], []
    uncached = cli_json(capsys, run_dir, *args, "--use_cache=false")
    assert cached[0]["text"] == uncached[0]["text"]
    # each path is the one it names: --use_cache=false was always cached, and this test compared the
    # cached path with itself (hunt 33-c S5). The prompt is 16 bytes, and a full window (the block
    # size, 32) keeps its last half, 16 tokens (GPT.generate_tokens). Uncached, the window grows by
    # one a pass; cached, a pass takes one token, and a slid window is prefilled again
    n = uncached[0]["tokens"]
    assert lengths == [16 + i % 17 for i in range(n)]
    assert cached_lengths == [16 if i % 17 == 0 else 1 for i in range(n)]
    # and in a chat: sample.py --chat passing use_cache=True whatever --use_cache said passed this file and
    # tests/test_chat.py (hunt 44-i I6). Cached, its passes after the prompt's take one token; uncached, none does.
    answers = []
    for options in ([], ["--use_cache=false"]):
        lengths.clear()
        monkeypatch.setattr(sample.sys, "stdin", io.TextIOWrapper(io.BytesIO(b"Once upon a time\n")))
        rc, out, _ = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--chat", "--temperature=0",
                         "--max_new_tokens=40", *options)
        answers.append((rc, out, 1 in lengths))
    assert answers[0][0] == 0 and answers[0][1].strip() and answers == [(0, answers[0][1], True),
                                                                        (0, answers[0][1], False)], answers


def test_the_repetition_penalty_reaches_the_model_from_sample_and_chat(capsys, run_dir, monkeypatch):
    # dropped on the way, --repetition_penalty did nothing, and no test saw it (hunt 33-c S4)
    penalties, generate_tokens = [], GPT.generate_tokens
    monkeypatch.setattr(GPT, "generate_tokens", lambda self, *a, **k: (penalties.append(k["repetition_penalty"]),
                                                                       generate_tokens(self, *a, **k))[1])
    cli_json(capsys, run_dir, "--start=ab", "--max_new_tokens=3", "--repetition_penalty=1.5")
    monkeypatch.setattr(sample.sys, "stdin", io.TextIOWrapper(io.BytesIO(b"Hi\n")))
    cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--chat", "--max_new_tokens=3", "--repetition_penalty=1.25")
    assert penalties == [1.5, 1.25]


@pytest.mark.parametrize("pos_encoding, qk_norm", [("learned", False), ("sinusoidal", False), ("rope", False),
                                                   ("rope", True)])
def test_static_decode_step_gives_the_tokens_of_the_ordinary_path(pos_encoding, qk_norm):
    torch.manual_seed(0)
    model = GPT(GPTConfig(**{**TINY, "pos_encoding": pos_encoding, "qk_norm": qk_norm,
                             "qk_scale": 2.0 if qk_norm else 1.0})).eval()
    prompt = torch.randint(0, 256, (2, 5))
    plain = model.generate(prompt, 80, temperature=0, decode_step=None)  # slides past block_size twice
    static = model.generate(prompt, 80, temperature=0, decode_step="static")
    assert torch.equal(plain, static)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    a = model.generate(prompt[:1], 40, temperature=1.0, generator=g1, num_samples=3, decode_step=None)
    b = model.generate(prompt[:1], 40, temperature=1.0, generator=g2, num_samples=3, decode_step="static")
    assert torch.equal(a, b)
    one = prompt[:1, :1]  # a one-token prompt: the very first step is already a decode step
    g1, g2 = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    a = model.generate(one, 20, temperature=1.0, generator=g1, num_samples=3, decode_step=None)
    b = model.generate(one, 20, temperature=1.0, generator=g2, num_samples=3, decode_step="static")
    assert torch.equal(a, b)
    with torch.no_grad():  # and the logits themselves, at one position
        model.setup_kv_cache(2, TINY["block_size"])
        model(prompt, pos=0)
        ref, _ = model(prompt[:, -1:], pos=5)
        model(prompt, pos=0)
        got = model.decode_step(prompt[:, -1:].contiguous(), torch.tensor([5]))
    assert torch.allclose(got, ref[:, -1], atol=1e-5)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # inductor's imports
def test_compiled_static_decode_step_gives_the_same_tokens():
    from gpt.generation import compiled_decode_step

    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY)).eval()
    prompt = torch.randint(0, 256, (2, 5))
    plain = model.generate(prompt, 70, temperature=0)
    step = compiled_decode_step(model)
    step.warm_up(batch_size=2)
    if step.failed:
        pytest.skip("torch.compile is not usable on this machine (no C++ compiler?)")
    with torch._dynamo.config.patch(error_on_recompile=True):  # one graph for every step and call
        compiled = model.generate(prompt, 70, temperature=0, decode_step=step)  # slides past block_size
        again = model.generate(prompt, 70, temperature=0, decode_step=step)
    assert torch.equal(plain, compiled) and torch.equal(plain, again)
    # Sampling inside the compiled step (top-k, top-p, repetition penalty): the eager path's tokens,
    # and after the warm-up sample.py gives these settings, no second compile (the penalty's mask
    # keeps the warm-up's strides), also with prompt ids past vocab_limit (they count for nothing).
    kw = dict(temperature=0.9, top_k=20, top_p=0.9, repetition_penalty=1.3, vocab_limit=250)
    prompt[0, 0] = 253
    step.warm_up(batch_size=2, **kw)
    eager = model.generate(prompt, 40, generator=torch.Generator().manual_seed(7), decode_step=None, **kw)
    with torch._dynamo.config.patch(error_on_recompile=True):
        fused = model.generate(prompt, 40, generator=torch.Generator().manual_seed(7), decode_step=step, **kw)
    assert torch.equal(eager, fused)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # inductor's imports
def test_a_compiled_decode_step_of_bf16_weights_on_a_cpu_compiles_instead_of_falling_back():
    # The eager bf16 step runs on oneDNN-prepacked weights (GPT.cpu_bf16_packed), entered around the
    # warm-up and generation; traced, they failed inductor's lowering ("weight must be a graph
    # constant") and `--compile=true --dtype=bfloat16` ran eager after an IR dump (audit, 2026-11-26).
    import warnings

    from gpt.generation import compiled_decode_step

    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY)).to(torch.bfloat16).eval()
    prompt = torch.randint(0, 256, (2, 5))
    step = compiled_decode_step(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step.warm_up(batch_size=2)
        if not step.failed:
            with torch._dynamo.config.patch(error_on_recompile=True):
                tokens = model.generate(prompt, 30, temperature=0, decode_step=step)
    failures = [str(w.message) for w in caught if "decode step" in str(w.message)]
    if step.failed and "C++ compile error" in "".join(failures):
        pytest.skip("torch.compile is not usable on this machine (no C++ compiler)")
    assert not step.failed and not failures, failures
    assert tokens.shape == (2, 35) and torch.equal(tokens[:, :5], prompt) and int(tokens.max()) < 256


def test_a_compiled_decode_step_that_fails_while_recording_falls_back_to_eager(monkeypatch):
    # On CUDA, graph trees record the step at its second call and replay it first at its third: a
    # kernel that cannot be captured fails there, after compiling went well. sample.py must then go
    # on eagerly with one warning, as when compiling fails, not end in a traceback.
    import gpt.generation as generation

    calls = []

    def fake_compile(fn, **kw):
        def compiled(*args):
            calls.append(len(calls) + 1)
            if len(calls) == 2:
                raise RuntimeError("operation not permitted when stream is capturing")
            return fn(*args)
        return compiled

    monkeypatch.setattr(generation.torch, "compile", fake_compile)
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY)).eval()
    prompt = torch.randint(0, 256, (2, 5))
    plain = model.generate(prompt, 20, temperature=0)
    step = generation.CompiledDecodeStep(model, cuda_graphs=True)
    monkeypatch.setattr(generation.torch.compiler, "cudagraph_mark_step_begin", lambda: None)  # no CUDA here
    with pytest.warns(UserWarning, match=r"the compiled decode step \(call 2\) failed \(RuntimeError: operation "
                                         r"not permitted when stream is capturing\); continuing in eager mode"):
        step.warm_up(batch_size=2)
    assert step.failed and calls == [1, 2]
    assert torch.equal(model.generate(prompt, 20, temperature=0, decode_step=step), plain)
    assert calls == [1, 2]  # eager from then on


def test_num_samples_share_one_prefill_of_the_prompt():
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY)).eval()
    shapes = []
    hook = model.transformer.wte.register_forward_hook(lambda m, args, out: shapes.append(tuple(args[0].shape)))
    prompt = torch.randint(0, 256, (1, 6))
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    shared = model.generate(prompt, 5, temperature=1.0, generator=g1, num_samples=4)
    hook.remove()
    assert shapes == [(1, 6)] + [(4, 1)] * 4  # the prompt once, then every row one token per step
    separate = model.generate(prompt.expand(4, -1), 5, temperature=1.0, generator=g2)
    assert torch.equal(shared, separate)


# -- stop strings, finish reasons, batches -------------------------------------------------------


def test_stop_strings_cut_at_the_first_occurrence_with_the_finish_reason(capsys, run_dir):
    args = ("--start=The", "--temperature=0", "--max_new_tokens=60")
    [full] = cli_json(capsys, run_dir, *args)
    text = full["text"]
    assert len(text) > 20
    stop_a, stop_b = text[12:14], text[6:8]
    first = min(text.find(stop_a), text.find(stop_b))
    [cut] = cli_json(capsys, run_dir, *args, f"--stop={stop_a}", f"--stop={stop_b}")
    assert cut["text"] == text[:first] and cut["finish_reason"] == "stop"
    assert cut["tokens"] < full["tokens"]
    rc, _, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--dtype=float32", *args, f"--stop={stop_a}",
                     "--num_samples=2")  # the closing line says how they ended in words, not "2 stop"
    assert rc == 0 and "sample.py: 2 samples (2 at a stop string), " in err
    [never] = cli_json(capsys, run_dir, *args, "--stop=\U0001F642 not in a random model's output")
    assert never["text"] == text and never["finish_reason"] == full["finish_reason"]


class ScriptedModel:
    """Stands in for GPT in generate_samples: each row yields its script, then filler."""

    def __init__(self, scripts: list[list[int]], filler: int = ord("z")):
        self.scripts, self.filler, self.steps = scripts, filler, 0
        self.transformer = SimpleNamespace(wte=SimpleNamespace(weight=torch.zeros(1)))
        self.config = SimpleNamespace(block_size=1024)  # (generate_samples reads it: hunt 44-b B1)

    def generate_tokens(self, idx, max_new_tokens, *args, num_samples=1, **kwargs):
        assert idx.shape[0] == 1 and num_samples == len(self.scripts)
        for t in range(max_new_tokens):
            self.steps += 1
            yield torch.tensor([[s[t] if t < len(s) else self.filler] for s in self.scripts])


def test_rows_finish_independently_and_generation_stops_when_all_have():
    eot = BYTE.eot_token
    scripts = [list(b"ab\n\ncd"), list(b"xyz") + [eot], list(b"long line without a stop")]
    model = ScriptedModel(scripts, filler=ord("-"))
    samples = generate_samples(model, BYTE, [eot], 3, max_new_tokens=1000, stop=("\n\n",), temperature=0)
    assert [(s.text, s.finish_reason, s.tokens) for s in samples[:2]] == [("ab", "stop", 4), ("xyz", "eot", 4)]
    assert samples[2].finish_reason == "length" and samples[2].text.startswith("long line without a stop---")
    assert model.steps == 1000
    model = ScriptedModel(scripts[:2])
    samples = generate_samples(model, BYTE, [eot], 2, max_new_tokens=1000, stop=("\n\n",), temperature=0)
    assert model.steps == 4  # both rows ended at step 4: nothing more is generated
    assert all(s.seconds >= 0 and s.tokens_per_s >= 0 for s in samples)


def test_a_finished_sample_going_non_finite_past_its_end_ends_no_other_sample():
    # A finished row is still computed with the batch. Its continuation, which nobody reads, going non-finite (NaN
    # logits: NON_FINITE, -1) ended every other sample with "non-finite logits" (hunt 46-d D1); a row still going
    # that goes non-finite is refused as before
    from gpt.errors import NonFiniteLogits

    eot = BYTE.eot_token
    samples = generate_samples(ScriptedModel([[ord("a"), eot, -1, -1], list(b"bcde")]), BYTE, [eot], 2,
                               max_new_tokens=4, temperature=0)
    assert [(s.text, s.finish_reason) for s in samples] == [("a", "eot"), ("bcde", "length")]
    with pytest.raises(NonFiniteLogits):
        generate_samples(ScriptedModel([[ord("a"), eot], [ord("b"), -1]]), BYTE, [eot], 2, max_new_tokens=4,
                         temperature=0)


def test_streamed_text_of_each_row_is_its_whole_text_however_it_ends():
    # Text held back (it might begin a stop string) is handed out when the row ends: by length after
    # the loop, by end-of-text in the feed that ends it. Dropping either passed (hunt 31-b G5, G6)
    eot = BYTE.eot_token
    scripts = [list(b"ab\n"), list(b"cd\n") + [eot], list(b"ef\n\n")]
    pieces = {i: [] for i in range(3)}
    samples = generate_samples(ScriptedModel(scripts, filler=ord("\n")), BYTE, [eot], 3, max_new_tokens=3,
                               stop=("\n\n",), temperature=0, on_text=lambda i, piece: pieces[i].append(piece))
    assert [(s.text, s.finish_reason) for s in samples] == [("ab\n", "length"), ("cd\n", "length"), ("ef\n", "length")]
    assert ["".join(pieces[i]) for i in range(3)] == [s.text for s in samples]
    pieces = {i: [] for i in range(3)}
    samples = generate_samples(ScriptedModel(scripts, filler=ord("-")), BYTE, [eot], 3, max_new_tokens=10,
                               stop=("\n\n",), temperature=0, on_text=lambda i, piece: pieces[i].append(piece))
    assert [(s.text, s.finish_reason) for s in samples][1:] == [("cd\n", "eot"), ("ef", "stop")]
    assert ["".join(pieces[i]) for i in range(3)] == [s.text for s in samples]


def test_streamed_text_holds_back_a_possible_stop_string_and_split_utf8():
    row = SampleText(BYTE, stop=("\n\n",))
    pieces = [row.feed(t) for t in BYTE.encode("ab\nc")]
    assert pieces == ["a", "b", "", "\nc"]  # "\n" waited: it might have begun "\n\n"
    pieces = [row.feed(t) for t in BYTE.encode("é\n\nignored")]
    assert pieces[:2] == ["", "é"]  # the two bytes of é arrive as one character
    assert row.text == "ab\ncé" and row.finish_reason == "stop" and row.tokens == 8
    assert row.feed(65) == "" and row.tokens == 8  # a finished row takes nothing more


def test_stop_strings_completed_by_one_token_cut_at_the_one_that_begins_first():
    # "xab" and "b" both end at the token "b": the text ends before "xab", not before "b" (hunt 31-b G3)
    row = SampleText(BYTE, stop=("b", "xab"))
    pieces = [row.feed(t) for t in BYTE.encode("say xab")]
    assert "".join(pieces) == row.text == "say " and row.finish_reason == "stop"


@pytest.mark.parametrize("stop", [(), ("\n\nTHE END", "xyz")])
def test_a_token_of_a_long_sample_does_not_copy_the_text_before_it(stop):
    # the text was one string, `text += piece` at every token: a copy of the whole sample each time, so
    # a sample's host time grew with the square of its length (hunt 39-b B3)
    import tracemalloc

    row = SampleText(BYTE, stop=stop)
    for t in BYTE.encode("To be, or not to be, that is the question. " * 5_000):  # 220,000 characters
        row.feed(t)
    tracemalloc.start()
    try:
        for t in BYTE.encode("Whether 'tis nobler"):
            row.feed(t)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20_000  # bytes: a copy of the text is 220,000
    assert row.text == "To be, or not to be, that is the question. " * 5_000 + "Whether 'tis nobler"


def test_a_long_sample_holds_its_characters_not_an_object_per_token():
    # the pieces handed out were kept in a list, a str object per token (some 50 bytes beside its few
    # characters; a pointer each for the byte tokenizer's cached one-character strings): 6.4 MB for 130,000
    # GPT-2 tokens of 430,000 characters, where the text is 430,000 bytes (hunt 40-a A1)
    import tracemalloc

    text = "To be, or not to be, that is the question. " * 5_000  # 215,000 characters
    tracemalloc.start()
    try:
        row = SampleText(BYTE)
        for t in BYTE.encode(text):
            row.feed(t)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 1.5 * len(text)  # bytes: a list of 215,000 pointers alone is 1,720,000
    assert row.text == text


@pytest.mark.parametrize("name", ["byte", "gpt2"])
def test_streaming_decodes_multibyte_characters_split_across_tokens(name):
    tok = get_tokenizer(name)
    text = "naïve café 🙂🙂 日本語 ok"
    row = SampleText(tok)
    pieces = [row.feed(t) for t in tok.encode(text)] + [row.finish("length")]
    assert "".join(pieces) == text and "\ufffd" not in "".join(pieces)
    assert "" in pieces  # some token ended inside a character, and nothing was printed for it
    row = SampleText(tok)
    first = tok.encode("🙂")[:1]  # a token that ends inside the character
    assert tok.decode_bytes(first) != "🙂".encode()
    pieces = [row.feed(t) for t in first] + [row.finish("length")]  # cut mid-character
    assert "".join(pieces) == "\ufffd" and row.finish_reason == "length"


def test_cuda_graph_typed_where_it_does_nothing_says_so(capsys, run_dir):
    # it was ignored without a word off CUDA (hunt 31-a F4), as --compile with --use_cache=false is not
    args = (f"--out_dir={run_dir}", "--max_new_tokens=3", "--device=cpu", "--cuda_graph=true")
    rc, _, err = cli(capsys, *args)
    assert rc == 0 and "note: --cuda_graph applies to the eager cached decode step on CUDA; ignored on cpu\n" in err
    rc, _, err = cli(capsys, *args[:-1], "--cuda_graph=auto")
    assert rc == 0 and "--cuda_graph" not in err


def test_stream_output_equals_whole_output(capsys, run_dir):
    args = (f"--out_dir={run_dir}", "--start=Hi", "--num_samples=2", "--max_new_tokens=30", "--seed=3", "--device=cpu")
    rc, whole, _ = cli(capsys, *args, "--stream=false")
    assert rc == 0
    rc, streamed, _ = cli(capsys, *args, "--stream=true")
    assert rc == 0 and streamed == whole
    assert whole.count(sample.SEPARATOR + "\n") == 2 and whole.startswith("Hi")


def test_a_long_prompt_is_tokenized_from_near_its_end_into_the_same_last_tokens(capsys, monkeypatch, tmp_path):
    # Only the last block_size tokens are kept; the whole text was tokenized for them (a 50 MB prompt file: 22 s and
    # 1.4 GB on a GPT-2 run, hunt 49-c). Now from a line start near its end: the same ids, not counted (hunt 50-a A1)
    import gpt.generation
    import gpt.tokenizer

    bpe = get_tokenizer("shakespeare-bpe")
    run = make_run(tmp_path / "out", tokenizer="shakespeare-bpe", vocab_size=bpe.n_vocab, meta_vocab=bpe.n_vocab)
    text = "".join(f"{i} To be, or not to be:\n  that is the question.\n\n" for i in range(4000))
    (tmp_path / "prompt.txt").write_text(text, encoding="utf-8")
    encoded, prompts = [], []
    encode, generate = gpt.tokenizer.BPETokenizer.encode, gpt.generation.generate_samples
    monkeypatch.setattr(gpt.tokenizer.BPETokenizer, "encode", lambda tok, t: encoded.append(len(t)) or encode(tok, t))
    monkeypatch.setattr(gpt.generation, "generate_samples",
                        lambda model, tok, prompt, *a, **k: prompts.append(prompt) or generate(model, tok, prompt, *a, **k))
    rc, out, err = cli(capsys, f"--out_dir={run}", f"--start=FILE:{tmp_path / 'prompt.txt'}", "--max_new_tokens=3",
                       "--json", "--device=cpu")
    assert rc == 0 and json.loads(out)["prompt"] == text and max(encoded) < len(text) // 2 and len(text) == 202_890
    assert prompts == [encode(bpe, text)[-32:]]
    assert ("warning: the prompt (202,890 characters) is longer than the model's context of 32: all but its last 32 "
            "tokens were dropped\n") in err and "note:" not in err

def test_json_output_parses_with_every_field(capsys, run_dir):
    samples = cli_json(capsys, run_dir, "--start=Hi", "--num_samples=2", "--max_new_tokens=16", "--stop=\\n")
    assert [s["index"] for s in samples] == [0, 1]
    for s in samples:
        assert set(s) == {"index", "prompt", "text", "tokens", "finish_reason", "tokens_per_s", "seconds"}
        assert s["prompt"] == "Hi" and isinstance(s["text"], str) and "\n" not in s["text"]
        assert 1 <= s["tokens"] <= 16 and s["finish_reason"] in ("stop", "eot", "length")
        assert s["tokens_per_s"] > 0 and s["seconds"] > 0


def test_a_json_record_holding_a_unicode_line_break_is_one_line_to_every_splitter(capsys, run_dir):
    # JSON leaves U+2028, U+2029 and U+0085 as they are; Python's str.splitlines() breaks a line at each: a record
    # whose prompt held one was read as two pieces, neither JSON (hunt 51-s S3). Escaped, the line is the same JSON.
    prompt = "a\u2028b\u2029c\x85d"
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", f"--start={prompt}", "--max_new_tokens=4", "--json",
                       "--device=cpu")
    assert rc == 0, err
    assert len(out.splitlines()) == 1 and json.loads(out)["prompt"] == prompt


# -- prompt --------------------------------------------------------------------------------------


def test_long_prompt_keeps_its_last_part_with_a_warning(capsys, run_dir):
    prompt = "".join(chr(ord("a") + i % 26) for i in range(45))  # 45 byte tokens, block_size 32
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", f"--start={prompt}", "--temperature=0",
                       "--max_new_tokens=10", "--json", "--device=cpu")
    assert rc == 0 and "the prompt is 45 tokens" in err and "its first 13 tokens were dropped" in err
    tail = cli_json(capsys, run_dir, f"--start={prompt[13:]}", "--temperature=0", "--max_new_tokens=10")
    assert json.loads(out)["text"] == tail[0]["text"]
    assert crop_prompt([1, 2, 3], 5) == ([1, 2, 3], 0) and crop_prompt(list(range(7)), 5) == ([2, 3, 4, 5, 6], 2)


def test_prompt_from_a_file_and_from_stdin(capsys, run_dir, tmp_path, monkeypatch):
    (tmp_path / "prompt.txt").write_text("ROMEO:\n", encoding="utf-8")
    [from_file] = cli_json(capsys, run_dir, f"--start=FILE:{tmp_path / 'prompt.txt'}", "--max_new_tokens=5")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ROMEO:\n")))  # read as bytes: .buffer
    [from_stdin] = cli_json(capsys, run_dir, "--start=-", "--max_new_tokens=5")
    [inline] = cli_json(capsys, run_dir, "--start=ROMEO:\n", "--max_new_tokens=5")
    assert from_file["prompt"] == from_stdin["prompt"] == "ROMEO:\n"
    assert from_file["text"] == from_stdin["text"] == inline["text"]
    # A byte order mark (Windows editors, PowerShell) begins the file or stream, not the prompt: data
    # preparation drops it, so the model never saw it (audit, 2026-11-26: it was 3 byte tokens); one
    # further in is text and stays
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfROMEO:\n")
    [bom_file] = cli_json(capsys, run_dir, f"--start=FILE:{tmp_path / 'bom.txt'}", "--max_new_tokens=5")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbfROMEO:\n")))
    [bom_stdin] = cli_json(capsys, run_dir, "--start=-", "--max_new_tokens=5")
    for bom, plain in (bom_file, from_file), (bom_stdin, from_stdin):
        assert (bom["prompt"], bom["text"]) == (plain["prompt"], plain["text"])
    (tmp_path / "inner.txt").write_bytes(b"RO\xef\xbb\xbfMEO:")
    [inner] = cli_json(capsys, run_dir, f"--start=FILE:{tmp_path / 'inner.txt'}", "--max_new_tokens=1")
    assert inner["prompt"] == "RO\ufeffMEO:"


def test_an_empty_prompt_file_or_stdin_samples_from_end_of_text_with_a_warning(capsys, tmp_path, monkeypatch):
    # `false | sample.py --start=-` (a producer that failed) sampled from end-of-text without a word
    # (hunt 34-a A11); a typed empty --start is the documented way to do so, and stays quiet
    (tmp_path / "empty.txt").write_bytes(b"")
    assert sample.read_prompt(f"FILE:{tmp_path / 'empty.txt'}") == ""
    assert capsys.readouterr().err == f"warning: --start: {tmp_path / 'empty.txt'} is empty: sampling from end-of-text\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    assert sample.read_prompt("-") == ""
    assert capsys.readouterr().err == "warning: --start: stdin is empty: sampling from end-of-text\n"
    assert sample.read_prompt("") == "" and capsys.readouterr().err == ""


def test_a_prompt_file_named_in_lower_case_is_text_with_a_warning(capsys, tmp_path):
    # FILE: is case-sensitive: file:PATH was the prompt's text without a word (hunt 32-c F14)
    (tmp_path / "p.txt").write_text("ROMEO:")
    assert sample.read_prompt(f"file:{tmp_path / 'p.txt'}") == f"file:{tmp_path / 'p.txt'}"
    assert capsys.readouterr().err == (f"warning: --start=file:{tmp_path / 'p.txt'} is taken as text; "
                                       f"--start=FILE:{tmp_path / 'p.txt'} (in capitals) reads the file\n")
    for text in ("file: a note about files", "file:" + "x" * 300, "file:a\0b"):  # no such file, or no path: no warning
        assert sample.read_prompt(text) == text
    assert capsys.readouterr().err == ""


def test_ctrl_c_while_sample_py_imports_is_one_line_not_a_traceback(tmp_path, ctrl_c_at_import):
    # torch's imports take the first seconds of every run; Ctrl-C there was a traceback (audit, 2026-11-26)
    import signal

    proc = ctrl_c_at_import("sample.py", "torch", cwd=tmp_path)
    assert proc.stderr == "sample.py: interrupted\n" and proc.returncode == -signal.SIGINT
    # SIGTERM there ended the process without a word (hunt, session 24)
    proc = ctrl_c_at_import("sample.py", "torch", cwd=tmp_path, sigterm=True)
    assert proc.stderr == "sample.py: interrupted\n" and proc.returncode == -signal.SIGTERM


def test_sigterm_while_sampling_is_one_line_and_status_143(run_dir, monkeypatch, capsys):
    # as Ctrl-C's, with the shell's status for SIGTERM: the handler the imports set (above) raises
    # Terminated, which main said was Ctrl-C's 130
    import gpt.generation
    from gpt.errors import Terminated

    def preempted(*args, **kwargs):
        raise Terminated
    monkeypatch.setattr(gpt.generation, "generate_samples", preempted)
    assert sample.main([f"--out_dir={run_dir}", "--device=cpu", "--compile=false"]) == 143
    err = capsys.readouterr().err
    assert err.endswith("\nsample.py: interrupted\n") and "\n\n" not in err  # (no empty line: hunt, session 27)


def signals_at_token(monkeypatch, token: int, *signums: int) -> None:
    """Sends the signals to this process while the sample's `token`-th token is checked (as a user's Ctrl-C or
    a scheduler's SIGTERM while generating), then lets generation go on."""
    import gpt.generation

    check, calls = gpt.generation.check_tokens, []

    def check_and_signal(tokens):
        calls.append(1)
        if len(calls) == token:
            for signum in signums:
                os.kill(os.getpid(), signum)
        return check(tokens)
    monkeypatch.setattr(gpt.generation, "check_tokens", check_and_signal)


@pytest.fixture(scope="module")
def endless_run(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("endless") / "out", endless=True)


@pytest.mark.parametrize("signum, status", [(2, 130), (15, 143)])  # SIGINT (Ctrl-C), SIGTERM
@pytest.mark.parametrize("mode", [["--json"], [], ["--stream=true"], ["--instruction=Who?", "--json"]])
def test_a_signal_while_sampling_keeps_the_samples_so_far(capsys, monkeypatch, endless_run, signum, status, mode):
    # Without streaming every sample was lost: 0 bytes on stdout after 5 s of generating with --json, plain to a
    # pipe, or --num_samples=2; a streamed one kept only its first sample's text (hunt 49-c, hunt 49-n N1). They
    # end at the token the signal came in, printed as far as they got (--json: whole records, "interrupted"),
    # and the process still ends as interrupted, its one line last.
    run = [f"--out_dir={endless_run}", "--device=cpu", "--num_samples=2", "--start=To be", *mode]
    if "--instruction=Who?" in mode:
        run.remove("--start=To be")
    as_json = "--json" in mode
    rc, whole, err = cli(capsys, *[o for o in run if o not in ("--json", "--stream=true")], "--json",
                         "--max_new_tokens=5")
    assert rc == 0, err
    five = [json.loads(line) for line in whole.splitlines()]  # the same seed, uninterrupted at 5 tokens
    signals_at_token(monkeypatch, 5, signum)
    with sigterm_raises():  # as the script's imports set it up (one_line_on_ctrl_c): never pytest's end
        rc, out, err = cli(capsys, *run, "--max_new_tokens=1000")
    assert rc == status and err.endswith("sample.py: interrupted\n") and "Traceback" not in err
    if as_json:
        records = [json.loads(line) for line in out.splitlines()]
        assert [(r["text"], r["tokens"], r["finish_reason"]) for r in records] == [
            (r["text"], 5, "interrupted") for r in five]
    else:  # streamed or not, each sample once, whole, with its separator (the streamed one's text not repeated)
        assert out == "".join(f"To be{r['text']}\n{sample.SEPARATOR}\n" for r in five)
        assert "sample.py: 2 samples (2 interrupted), 10 tokens in " in err


@pytest.mark.parametrize("streamed", [False, True])
def test_ctrl_c_at_a_terminal_leaves_the_echoed_line_before_the_samples_and_no_empty_line(
        capsys, monkeypatch, endless_run, streamed):
    # The terminal echoes "^C" where the cursor is: not streamed, at the start of the line that the samples (or,
    # stdout elsewhere, their closing line) would begin; streamed, inside the streamed text, whose line ends after it
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    signals_at_token(monkeypatch, 5, 2)
    rc, out, err = cli(capsys, f"--out_dir={endless_run}", "--device=cpu", "--max_new_tokens=1000",
                       f"--stream={str(streamed).lower()}")
    after_info = err.split(" compile off\n")[1].split("\n")
    summary = next(line for line in after_info if line.startswith("sample.py: 1 sample (1 interrupted), "))
    assert rc == 130 and after_info == [*([] if streamed else [""]), summary, "sample.py: interrupted", ""]


@pytest.mark.parametrize("mode", [["--json"], ["--stream=true"]])
def test_a_second_signal_while_sampling_stops_at_once(capsys, monkeypatch, endless_run, mode):
    signals_at_token(monkeypatch, 5, 2, 15)  # Ctrl-C, then SIGTERM before the next token: nothing more printed
    with sigterm_raises():
        rc, out, err = cli(capsys, f"--out_dir={endless_run}", "--device=cpu", "--num_samples=2",
                           "--max_new_tokens=1000", *mode)
    assert rc == 143 and err.endswith("sample.py: interrupted\n") and "Traceback" not in err and "samples (" not in err
    assert out == "" if mode == ["--json"] else out.endswith("\n") and sample.SEPARATOR not in out


@pytest.mark.parametrize("as_json", [True, False])
def test_a_signal_during_a_chat_answer_from_a_pipe_keeps_it_and_ends_the_session(capsys, monkeypatch, endless_run,
                                                                                   as_json):
    # The answer under way was lost, as every plain sample was (hunt 49-n N2); the lines after it are not answered.
    # (At a terminal, plain --chat's Ctrl-C stops one answer and the session goes on: tests/test_chat.py.)
    import io

    def chat(first_line_only: bool = False) -> tuple[int, str, str]:
        lines = b'{"prompt": "Who?"}\n{"prompt": "Where?"}\n' if as_json else b"Who?\nWhere?\n"
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.split(b"\n")[0] if first_line_only
                                                                       else lines)))
        with sigterm_raises():
            return cli(capsys, f"--out_dir={endless_run}", "--device=cpu", "--chat", f"--json={as_json}",
                       f"--max_new_tokens={5 if first_line_only else 8}")
    rc, five, err = chat(first_line_only=True)  # uninterrupted, 5 tokens
    assert rc == 0, err
    signals_at_token(monkeypatch, 5, 15)
    rc, out, err = chat()
    assert rc == 143 and err.endswith("\nsample.py: interrupted\n") and "Traceback" not in err
    if as_json:
        [record], [whole] = [json.loads(line) for line in out.splitlines()], [json.loads(five)]
        assert record == {**whole, "finish_reason": "interrupted", "tokens_per_s": record["tokens_per_s"],
                          "seconds": record["seconds"]} and record["tokens"] == 5
    else:
        assert out == five and out.count("\n") == 1


def test_a_reader_gone_with_the_signal_still_ends_sampling_as_interrupted(capsys, monkeypatch, endless_run):
    # `sample.py | head` and Ctrl-C: the terminal's reaches both, and the samples kept met a closed pipe. They
    # still end as interrupted (130, the line); a reader gone alone still ends it quietly, for __main__'s status 0
    import errno

    from tests.test_errors import FailingStream

    run = [f"--out_dir={endless_run}", "--device=cpu", "--max_new_tokens=100", "--json"]
    monkeypatch.setattr(sys, "stdout", FailingStream(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    with pytest.raises(BrokenPipeError):
        sample.main(run)
    assert "interrupted" not in capsys.readouterr().err
    signals_at_token(monkeypatch, 5, 2)
    assert sample.main(run) == 130 and capsys.readouterr().err.endswith("\nsample.py: interrupted\n")


WRITES_INTO_A_FULL_PIPE = """
import os, signal, sys
from gpt.errors import CheckedStdout, StoppedAtOnce
signals = []

def handler(signum, frame):  # as sample.py's: the first signal noted (argv 0), a second one stops at once (1)
    signals.append(signum)
    if len(signals) == int(sys.argv[1]):
        raise StoppedAtOnce("sample.py: interrupted", signum)

signal.signal(signal.SIGTERM, handler)
out = CheckedStdout(sys.stdout, "sample.py", stop="the samples")
out.write(sys.argv[2])  # all but a page of the pipe
out.flush()
os.write(2, b"filled\\n")
try:
    out.write(sys.argv[3])  # the record: its first page, then it waits for the reader
    out.flush()
except StoppedAtOnce:
    os.write(2, b"stopped\\n")
os.write(2, f"{signals}\\n".encode())
"""


@pytest.mark.skipif(not hasattr(__import__("fcntl"), "F_GETPIPE_SZ"), reason="a Linux pipe's size")
@pytest.mark.parametrize("at_once", [False, True])
def test_a_signal_while_a_record_waits_for_a_slow_reader_leaves_it_whole(at_once):
    # A --json record written into a full pipe (a reader that reads slowly) when a signal came: a second one (which
    # stops at once) cut it, and the reader got half of it; a first one, which only notes it, made Python's buffered
    # stdout drop the rest of what it was writing, and the next record ran into it (hunt 51-s S1)
    import fcntl
    import signal
    import termios
    import time

    read_end, write_end = os.pipe()
    size = fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)
    os.close(read_end), os.close(write_end)
    record = json.dumps({"index": 0, "text": "to be or not " * 500}) + "\n"  # (within a buffer of Python's)
    proc = subprocess.Popen([sys.executable, "-c", WRITES_INTO_A_FULL_PIPE, str(int(at_once)), "x" * (size - 4096),
                             record], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stderr.readline() == b"filled\n"

        def pending() -> int:
            return int.from_bytes(fcntl.ioctl(proc.stdout.fileno(), termios.FIONREAD, bytes(4)), sys.byteorder)
        while pending() < size:  # the record's first page is in: it waits for the reader
            time.sleep(0.01)
        time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # (the reader reads a while later; read at once, 2 runs of 3 lost the end)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert out[size - 4096:].decode() == record
    assert err.decode() == ("stopped\n" if at_once else "") + f"[{signal.SIGTERM.value}]\n"


def test_ctrl_c_while_streaming_keeps_every_sample_end_to_end(endless_run):
    # The signal a user sends, once the first text is out (the streamed sample's): the samples so far follow it
    import signal

    proc = subprocess.Popen([sys.executable, "sample.py", f"--out_dir={endless_run}", "--device=cpu", "--num_samples=2",
                             "--stream=true", "--max_new_tokens=100000", "--start=To be"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        first = proc.stdout.read(6)  # the prompt, then the first streamed byte: generating
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    out = (first + rest).decode()
    samples = out.split(f"\n{sample.SEPARATOR}\n")
    assert proc.returncode == 130 and err.decode().endswith("\nsample.py: interrupted\n"), err.decode()
    assert len(samples) == 3 and samples[-1] == "" and all(s.startswith("To be") and len(s) > 5 for s in samples[:2])
    assert "sample.py: 2 samples (2 interrupted)" in err.decode()


# -- bad values ----------------------------------------------------------------------------------


@pytest.mark.parametrize("args, needle", [
    (["--temperature=-0.5"], "temperature must be >= 0"),
    (["--top_p=0"], "top_p must be in (0, 1]"),
    (["--top_p=1.5"], "top_p must be in (0, 1]"),
    (["--top_k=0"], "top_k must be >= 1"),
    (["--top_k=many"], "expected an integer or none"),
    (["--top_p=many"], "expected a number or none"),
    (["--num_samples=0"], "num_samples must be >= 1"),
    (["--max_new_tokens=-1"], "max_new_tokens must be >= 0"),
    (["--stop="], "stop strings must not be empty"),
    (["--json", "--stream=true"], "--stream=true prints the text as it comes, --json whole records"),  # (hunt 32-c F14)
    (["--temprature=1"], "unknown option --temprature (did you mean --temperature?)"),
    (["--temp=1"], "unknown option --temp (did you mean --temperature, --stream?)"),  # was --stream alone
    # a value that begins with "-", taken for an option: argparse's words alone said not how to give it (hunt 52-c C6)
    (["--stop", "---"], 'argument --stop: expected at least one argument (a value that begins with "-" is typed after '
                        '"=": --stop=---)'),
    (["--prompt=hi"], "unknown option --prompt (did you mean --start?)"),  # no hint before (hunt 52-c C4)
    # nothing to resume in sample.py: it was offered --init_from=resume, which it refuses ("'resume' is neither a
    # directory nor one of gpt2, ..."): hunt 52-z Z1
    (["--resume"], "unknown option --resume; see python sample.py --help"),
    (["ROMEO"], "unexpected argument 'ROMEO'"),
    # the shell's two arguments of an unquoted value: "options are --key=value" said nothing of quoting (hunt 50-f F2)
    (["--start=To", "be", "or", "--json"], "unexpected argument 'be' after --start=To: a value with spaces must be "
                                           "quoted: --start='To be or'"),
    # and after a value given as --key VALUE: it was "unexpected argument 'be': options are --key=value" (hunt 52-c C8)
    (["--start", "To", "be", "--json"], "unexpected argument 'be' after --start To: a value with spaces must be quoted: "
                                        "--start='To be'"),
    (["--stop=b", "c"], "--stop='b c' (several stop strings: repeat --stop)"),
    # a short option is no rest of a value: it was "must be quoted: --start=hello", the very words typed (hunt 51-r R6)
    (["--start=hello", "-n", "3"], "unexpected argument '-n': options are --key=value"),
    # past the first word, "-5" is a word of the text: it was quoted as --start='The answer is', the rest lost (hunt 52-c C2)
    (["--start=The", "answer", "is", "-5", "degrees", "--json"], "quoted: --start='The answer is -5 degrees'"),
    # a word after a value it would make nothing of is said to be no option: it was "a value with spaces must be
    # quoted: --ckpt='best out'", a checkpoint that is nowhere (--out_dir=out meant; hunt 52-c C1)
    # a space typed after "=" is no space the value begins with: it was advised --start=' To be' (hunt 51-r R2, 52-c C3)
    (["--start=", "To", "be"], "unexpected argument 'To' after --start=: a value with spaces must be quoted: "
                               "--start='To be'"),
    (["--ckpt=best", "out"], "unexpected argument 'out': options are --key=value (see python sample.py --help)"),
    (["--use_cache=maybe"], "expected true or false"),
    (["--start=FILE:/nonexistent/prompt.txt"], "cannot read the prompt file"),
    (["--start=FILE:"], "--start=FILE: names no file"),  # was "cannot read the prompt file ." (hunt, session 24)
    (["--instruction=FILE:"], "--instruction=FILE: names no file"),
    # (beside the run's --out_dir, a path elsewhere is refused first; a missing path alone: the bare-name test)
    (["--ckpt=/nonexistent/ckpt-0000001"], "--ckpt=/nonexistent/ckpt-0000001 is not in --out_dir="),
    (["--device=cuda:0"] if not torch.cuda.is_available() else ["--device=nonsense"], "device"),
])
def test_bad_values_give_one_line_and_status_1(capsys, run_dir, args, needle):
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", *args)
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("sample.py: error: ") and needle in err, err


@pytest.mark.parametrize("supervised", [False, True, None])  # None: saved before meta.json said
def test_an_instruction_to_a_model_of_plain_text_is_answered_with_a_warning(capsys, tmp_path, supervised):
    # the template was applied to a model that never saw it, without a word (hunt 30-d F1)
    said = {} if supervised is None else {"supervised": supervised, "data": "data/notes"}
    run = make_run(tmp_path / "out", **said)
    for asked in ("--instruction=hi", "--start=hi"):
        rc, out, err = cli(capsys, f"--out_dir={run}", asked, "--max_new_tokens=3", "--device=cpu")
        assert rc == 0 and out
        warned = asked.startswith("--instruction") and supervised is False
        # an answer that --max_new_tokens=3 stopped is said to be so, on its own line (hunt 42-e E5)
        cut = err.count("warning: the answer stopped at --max_new_tokens=3, before the model ended it")
        assert cut <= asked.startswith("--instruction") and err.count("warning: ") == warned + cut
        assert ("was trained on plain text (data/notes), not on instruction data" in err) == warned


def test_an_instruction_to_openais_gpt2_is_answered_with_a_warning(capsys, monkeypatch):
    # a hub GPT-2 was asked in the template it never saw without the word a run of plain text gets (hunt 50-f F3)
    import gpt.checkpoint

    torch.manual_seed(0)
    tiny = GPT(GPTConfig(**{**TINY, "vocab_size": 50257, "n_layer": 1, "n_embd": 8}))
    monkeypatch.setattr(gpt.checkpoint, "load_base_model", lambda name: tiny)  # (no network)
    for asked in ("--instruction=hi", "--start=hi"):
        rc, out, err = cli(capsys, "--init_from=gpt2-medium", asked, "--max_new_tokens=2", "--device=cpu")
        assert rc == 0 and out
        assert ("warning: gpt2-medium is OpenAI's GPT-2, trained on plain text (WebText), not on instruction data"
                in err) == asked.startswith("--instruction"), err

@pytest.mark.parametrize("supervised", [False, True, None])  # None: saved before meta.json said
def test_a_model_of_instruction_data_sampled_from_end_of_text_is_sampled_with_a_warning(capsys, tmp_path, supervised):
    # train.py's closing line named plain sampling for an instruction run, whose samples from end-of-text
    # then came back empty (the loss was on the answers only), without a word (hunt 42-e E1)
    said = {} if supervised is None else {"supervised": supervised, "data": "data/pairs"}
    run = make_run(tmp_path / "out", **said)
    rc, out, err = cli(capsys, f"--out_dir={run}", "--max_new_tokens=3", "--device=cpu")
    assert rc == 0 and out
    warning = ("was trained on instruction data (data/pairs), its loss on the answers only (and on any plain text "
               "beside them): sampled from end-of-text, as here, it writes what it never learned to but for such "
               "text; ask it with --instruction=TEXT or --chat")
    assert err.count("warning: ") == (supervised is True) and (warning in err) == (supervised is True), err


def test_a_fine_tunes_checkpoint_worse_than_the_weights_it_started_from_is_sampled_with_a_warning(capsys, tmp_path):
    # --ckpt=best of a fine-tune of a step count that only made its weights worse gave the least bad of its
    # checkpoints, worse than the start (which such a run does not save), without a word (hunt 52-k K1)
    base = make_run(tmp_path / "base") / "ckpt-0000007"
    for name, meta, warned in [
        ("worse", {"val_loss": 5.5976, "started_from": {"weights": str(base), "val_loss": 4.6226}}, str(base)),
        ("base gone", {"val_loss": 5.5, "started_from": {"weights": str(tmp_path / "gone"), "val_loss": 4.5}},
         f"{tmp_path / 'gone'}, which are no longer there"),
        ("hub", {"val_loss": 5.5, "started_from": {"weights": "gpt2", "val_loss": 4.5}}, "gpt2"),
        ("better", {"val_loss": 4.5, "started_from": {"weights": str(base), "val_loss": 4.6}}, None),
        ("a stop's save", {"val_loss": None, "started_from": {"weights": str(base), "val_loss": 4.6}}, None),
        ("saved before it was recorded", {"val_loss": 5.5}, None),
        ("edited", {"val_loss": 5.5, "started_from": {"weights": str(base), "val_loss": "4.6"}}, None),
        ("edited too", {"val_loss": 5.5, "started_from": ["x"]}, None),
    ]:
        run = make_run(tmp_path / name, **meta)
        rc, out, err = cli(capsys, f"--out_dir={run}", "--max_new_tokens=2", "--device=cpu")
        assert rc == 0 and out, err
        warning = (f"warning: {run / 'ckpt-0000007'} (step 7) has a validation loss of {meta['val_loss']:.4f}, higher "
                   f"than the {meta['started_from']['val_loss']:.4f} of the weights its run started from (step 0's "
                   f"evaluation): training made them worse; sample those with --init_from={warned}\n") if warned else ""
        assert err.count("warning: ") == bool(warned) and warning in err, (name, err)


def test_init_from_names_the_model_alone_and_an_empty_instruction_is_refused(capsys, run_dir, monkeypatch, tmp_path):
    # --out_dir and --ckpt=PATH beside --init_from were silently ignored, --ckpt=best too (the latest
    # was sampled); an empty --instruction was answered (audit, 2026-11-26)
    for args, needle in [
        (["--init_from=not-a-model"], "neither a directory nor one of gpt2"),
        ([f"--init_from={run_dir}", "--out_dir=elsewhere"], "--init_from names the model to sample: leave out --out_dir"),
        # the default's own value, typed, was let through silently (hunt, session 24)
        ([f"--init_from={run_dir}", "--out_dir=out"], "--init_from names the model to sample: leave out --out_dir"),
        ([f"--init_from={run_dir}", f"--ckpt={run_dir}"], "--init_from names the model to sample"),
        (["--init_from=gpt2", "--ckpt=best"], "--ckpt=best: gpt2 is not one of our runs"),
        (["--instruction=-"], "--instruction=-: the instruction is empty"),
        # given empty (an unset shell variable) is not "not given": it sampled unconditionally (hunt, session 24)
        ([f"--out_dir={run_dir}", "--instruction="], "--instruction=: the instruction is empty"),
        ([f"--out_dir={run_dir}", "--instruction", ""], "--instruction=: the instruction is empty"),
    ]:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"  \n")))
        rc, out, err = cli(capsys, *args)
        assert rc == 1 and out == "" and err.count("\n") == 1 and needle in err, err
    # --ckpt=best with an --init_from run: its best checkpoint, as with --out_dir
    model = GPT(GPTConfig(**{**TINY, "vocab_size": 257}))
    meta = {"model_config": model.config.to_dict(), "tokenizer": "byte", "config": {}, "vocab_size": 257}
    for step in 3, 7:
        save_checkpoint(tmp_path / "run", step, model, state={}, meta=meta, keep_last=2, is_best=step == 3)
    for ckpt, step in ("best", 3), ("latest", 7):
        rc, _, err = cli(capsys, f"--init_from={tmp_path / 'run'}", f"--ckpt={ckpt}", "--max_new_tokens=1", "--json",
                         "--device=cpu")
        assert rc == 0 and f"{tmp_path / 'run' / f'ckpt-{step:07d}'} (step {step})" in err, err
        # the run's pointer file itself names the checkpoint to give: it was "neither a directory nor one of gpt2,
        # ..." (hunt 47-c C2)
        rc, out, err = cli(capsys, f"--init_from={tmp_path / 'run' / ckpt}", "--max_new_tokens=1", "--device=cpu")
        assert rc == 1 and out == "" and err == (
            f"sample.py: error: {tmp_path / 'run' / ckpt} is a file, the pointer to the {ckpt} checkpoint of the run in "
            f"{tmp_path / 'run'}: give the checkpoint itself, --init_from={tmp_path / 'run' / f'ckpt-{step:07d}'}\n")
        # and as --ckpt, its path or its name with a slash: it was "RUN/best is a file, not a run's out_dir or a
        # checkpoint directory" (hunt 52-k K3)
        for given in [f"--ckpt={tmp_path / 'run' / ckpt}"], [f"--out_dir={tmp_path / 'run'}", f"--ckpt={ckpt}/"]:
            rc, out, err = cli(capsys, *given, "--max_new_tokens=1", "--device=cpu")
            assert rc == 1 and out == "" and err == (
                f"sample.py: error: {tmp_path / 'run' / ckpt} is a file, the pointer to the {ckpt} checkpoint of the "
                f"run in {tmp_path / 'run'}: give the checkpoint itself, --ckpt={tmp_path / 'run' / f'ckpt-{step:07d}'}"
                "\n"), err
    # with one checkpoint's directory, best was dropped and that checkpoint sampled (hunt 28-a F9)
    one = tmp_path / "run" / "ckpt-0000007"
    for given in f"--init_from={one}", f"--out_dir={one}":
        rc, out, err = cli(capsys, given, "--ckpt=best", "--max_new_tokens=1", "--device=cpu")
        assert rc == 1 and out == "" and err == (
            f"sample.py: error: {one} is one checkpoint, not a run: `best` picks among a run's checkpoints; "
            f"name the run ({tmp_path / 'run'}) or leave out --ckpt=best\n"), err


def test_the_way_on_from_an_unreadable_or_missing_checkpoint_is_one_the_command_takes(capsys, tmp_path):
    # With --init_from, a damaged newest checkpoint and a run without `best` were answered "--ckpt=PATH",
    # which beside --init_from is refused; a LoRA run's damaged base offered its base run's other
    # checkpoints, another model without the adapters (hunt 35-a A2)
    from gpt.checkpoint import lora_base
    from gpt.lora import LoRAConfig, apply_lora

    model = GPT(GPTConfig(**TINY))
    meta = {"model_config": model.config.to_dict(), "tokenizer": "byte", "config": {}, "vocab_size": 257}
    for step in 3, 7:
        save_checkpoint(tmp_path / "run", step, model, state={}, meta=meta, keep_last=2)
    older = tmp_path / "run" / "ckpt-0000003"
    rc, out, err = cli(capsys, f"--init_from={tmp_path / 'run'}", "--ckpt=best", "--max_new_tokens=1", "--device=cpu")
    assert rc == 1 and err.count("\n") == 1 and err.endswith(
        f"leave out --ckpt=best, or sample a checkpoint, e.g. --init_from={tmp_path / 'run' / 'ckpt-0000007'}\n"), err
    lora = apply_lora(GPT(GPTConfig(**TINY)), LoRAConfig(rank=2))
    save_checkpoint(tmp_path / "lora", 2, lora, state={}, meta={**meta, "lora": {
        **lora_base(str(tmp_path / "run")), "config": LoRAConfig(rank=2).to_dict()}})
    (tmp_path / "run" / "ckpt-0000007" / "meta.json").write_text("{")  # the LoRA run's base
    rc, out, err = cli(capsys, f"--out_dir={tmp_path / 'lora'}", "--max_new_tokens=1", "--device=cpu")
    assert rc == 1 and err.startswith(f"sample.py: error: {tmp_path / 'run' / 'ckpt-0000007' / 'meta.json'}: ") \
        and "--ckpt" not in err and str(older) not in err, err
    (tmp_path / "run" / "ckpt-0000007" / "model.safetensors").write_bytes(b"torn")
    rc, out, err = cli(capsys, f"--init_from={tmp_path / 'run'}", "--max_new_tokens=1", "--device=cpu")
    assert rc == 1 and err.endswith(f"; choose another with --init_from, e.g. --init_from={older}\n"), err
    rc, out, err = cli(capsys, f"--init_from={older}", "--max_new_tokens=1", "--device=cpu")  # as told
    assert rc == 0, err


def test_a_lora_run_whose_base_was_moved_samples_with_lora_base(capsys, tmp_path, hf_dir):
    # "... which is missing" was all there was, with no way to point to the weights (hunt 35-a A6, hunt 36-c A6)
    import shutil

    from gpt.checkpoint import lora_base
    from gpt.lora import LoRAConfig, apply_lora

    make_run(tmp_path / "base")
    make_run(tmp_path / "other", seed=3)
    lora = apply_lora(load_model(tmp_path / "base")[0], LoRAConfig(rank=2))
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if name.endswith("lora_B"):
                p.normal_()  # (fresh adapters change nothing)
    meta = {"model_config": lora.config.to_dict(), "tokenizer": "byte", "config": {}, "vocab_size": 257}
    save_checkpoint(tmp_path / "lora", 2, lora, state={}, meta={**meta, "lora": {
        **lora_base(str(tmp_path / "base")), "config": LoRAConfig(rank=2).to_dict()}})
    args = ("--max_new_tokens=8", "--temperature=0", "--start=ab")
    [expected] = cli_json(capsys, tmp_path / "lora", *args)
    shutil.move(tmp_path / "base", tmp_path / "moved")
    rc, out, err = cli(capsys, f"--out_dir={tmp_path / 'lora'}", *args, "--device=cpu")
    assert rc == 1 and out == "" and err.count("\n") == 1 and err.endswith(
        "which is missing; if it is elsewhere now (moved or copied), point to it with --lora_base=PATH (its run's "
        "directory or its ckpt-* directory)\n"), err
    [again] = cli_json(capsys, tmp_path / "lora", *args, f"--lora_base={tmp_path / 'moved'}")
    assert again["text"] == expected["text"]
    rc, out, err = cli(capsys, f"--out_dir={tmp_path / 'lora'}", *args, "--device=cpu", f"--lora_base={tmp_path / 'other'}")
    assert rc == 1 and out == "" and err.count("\n") == 1 and err.endswith(
        f"; --lora_base={tmp_path / 'other'}: its ckpt-0000007 holds other weights than the base the adapters were "
        "trained on (by their fingerprint)\n"), err
    for refused in ([f"--init_from={hf_dir}", f"--lora_base={tmp_path / 'moved'}"],
                    [f"--out_dir={tmp_path / 'other'}", f"--lora_base={tmp_path / 'moved'}"],
                    [f"--out_dir={tmp_path / 'lora'}", "--lora_base="]):
        rc, out, err = cli(capsys, *refused, *args, "--device=cpu")
        assert rc == 1 and out == "" and err.count("\n") == 1 and "--lora_base" in err and "Traceback" not in err, err


def test_no_checkpoint_names_the_command_that_makes_one(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(capsys)
    assert rc == 1 and out == ""
    assert err == "sample.py: error: no checkpoint in out/ yet; train one with: python train.py\n"
    rc, _, err = cli(capsys, "--out_dir=elsewhere")
    assert rc == 1 and err.endswith("train one with: python train.py --out_dir=elsewhere\n")
    rc, _, err = cli(capsys, "--out_dir=my run")  # pasted, it was --out_dir=my and a stray "run"
    assert rc == 1 and err.endswith("train one with: python train.py --out_dir='my run'\n"), err
    # a preset's directory: its preset's command, where "python train.py --out_dir=out-instruct" trained a model from
    # scratch on Shakespeare there (hunt 49-l L2)
    rc, _, err = cli(capsys, "--out_dir=out-instruct")
    assert rc == 1 and err.endswith("train one with: python train.py --config=instruct --init_from=gpt2 "
                                    "--data=pairs.jsonl\n"), err
    for preset in ("finetune", "gpt2-124m"):
        rc, _, err = cli(capsys, f"--out_dir=./out-{preset}/")
        assert rc == 1 and f"train one with: python train.py --config={preset}" in err, err
    # prepared data is no run: "train one with: python train.py --out_dir=shards" wrote a run into the data
    # directory (hunt 47-d, left); its way on trains on it
    from gpt.prepare import prepare
    (tmp_path / "text.txt").write_text("the king is dead.\n" * 200)
    prepare(source="input", inputs=[str(tmp_path / "text.txt")], tokenizer="byte", out_dir=tmp_path / "my shards",
            num_proc=1, quiet=True)
    rc, out, err = cli(capsys, "--out_dir=my shards")
    assert rc == 1 and out == "" and err == (
        "sample.py: error: my shards holds prepared data (token shards), not a training run: train on it with python "
        "train.py --data='my shards' --out_dir=RUN, then sample --out_dir=RUN\n"), err


def test_a_run_that_trains_and_has_saved_nothing_yet_is_named_not_trained_again(capsys, tmp_path, monkeypatch,
                                                                                 run_dir_held_elsewhere):
    # "train one with: python train.py --out_dir=busy" of a directory a run trains in: that command is refused,
    # "busy is in use by another training run" (hunt 47-d D1)
    monkeypatch.chdir(tmp_path)
    holder = run_dir_held_elsewhere(tmp_path / "busy")
    for which in ("latest", "best"):
        rc, out, err = cli(capsys, "--out_dir=busy", f"--ckpt={which}")
        assert rc == 1 and out == "" and err.count("\n") == 1, err
        assert err.startswith(f"sample.py: error: no checkpoint in busy/ yet: the training run there (process "
                              f"{holder.pid} on ") and err.endswith(
            "has saved none so far; sample once it saves its first, at its first evaluation\n"), err
    holder.kill()
    holder.wait()
    rc, _, err = cli(capsys, "--out_dir=busy")  # gone (killed: its lock file stays, unlocked): train one
    assert rc == 1 and err == "sample.py: error: no checkpoint in busy/ yet; train one with: python train.py --out_dir=busy\n"


def test_a_tilde_in_a_path_option_is_the_home_directory(capsys, run_dir, monkeypatch):
    # the shell leaves a ~ after = as it is (train.py expands it: hunt 34-b B9)
    monkeypatch.setenv("HOME", str(Path(run_dir).parent))
    [sampled] = cli_json(capsys, f"~/{Path(run_dir).name}", "--max_new_tokens=2")
    assert len(sampled["text"]) > 0


def test_a_bare_checkpoint_name_is_looked_up_in_the_run_and_a_missing_one_lists_the_run(capsys, tmp_path, monkeypatch):
    # train.py prints "latest ckpt-0000112"; --ckpt=ckpt-0000112 said "no checkpoint at ckpt-0000112"
    # beside out/ckpt-0000112, and a missing one named nothing to choose from (hunt, session 24)
    monkeypatch.chdir(tmp_path)
    model = GPT(GPTConfig(**{**TINY, "vocab_size": 257}))
    meta = {"model_config": model.config.to_dict(), "tokenizer": "byte", "config": {}, "vocab_size": 257}
    for step in range(1, 8):
        save_checkpoint(tmp_path / "run", step, model, state={}, meta=meta, keep_last=10)
    args = ("--out_dir=run", "--max_new_tokens=1", "--device=cpu")
    rc, _, err = cli(capsys, *args, "--ckpt=ckpt-0000003")
    assert rc == 0 and "run/ckpt-0000003 (step 3)" in err, err
    (tmp_path / "ckpt-0000003").mkdir()  # another run's checkpoint of that name here: the run's is taken (review 34 R4)
    rc, _, err = cli(capsys, *args, "--ckpt=ckpt-0000003")
    assert rc == 0 and "run/ckpt-0000003 (step 3)" in err, err
    (tmp_path / "ckpt-0000003").rmdir()
    rc, _, err = cli(capsys, *args, "--ckpt=run/ckpt-0000004")  # a path, as before
    assert rc == 0 and "run/ckpt-0000004 (step 4)" in err, err
    rc, out, err = cli(capsys, *args, "--ckpt=ckpt-0000099")
    assert rc == 1 and out == "" and err == (
        "sample.py: error: no checkpoint at ckpt-0000099 (nor run/ckpt-0000099); run has 7 checkpoints, the newest: "
        "ckpt-0000003, ckpt-0000004, ckpt-0000005, ckpt-0000006, ckpt-0000007\n")
    (tmp_path / "empty").mkdir()
    rc, _, err = cli(capsys, "--out_dir=empty", "--ckpt=ckpt-0000001")
    assert rc == 1 and err.endswith("no checkpoint at ckpt-0000001 (nor empty/ckpt-0000001); empty has no complete "
                                    "checkpoint either\n")
    rc, _, err = cli(capsys, "--ckpt=/nowhere/ckpt-0000001")  # a path, and no out/ here (review, session 24)
    assert rc == 1 and err.endswith("no checkpoint at /nowhere/ckpt-0000001; there is no out/\n")
    # a path outside a typed --out_dir: the run named was never looked at, without a word (hunt 34-a A10)
    rc, out, err = cli(capsys, "--out_dir=empty", "--ckpt=run/ckpt-0000004", "--device=cpu")
    assert rc == 1 and out == "" and err == ("sample.py: error: --ckpt=run/ckpt-0000004 is not in --out_dir=empty: "
                                             "give one of them, or --ckpt the name of a checkpoint of empty\n")
    # its name is offered where --out_dir has a checkpoint of that name (empty had none: hunt 52-n N2)
    rc, out, err = cli(capsys, "--out_dir=run", "--ckpt=other/ckpt-0000004", "--device=cpu")
    assert rc == 1 and out == "" and err == ("sample.py: error: --ckpt=other/ckpt-0000004 is not in --out_dir=run: "
                                             "give one of them, or --ckpt the name of a checkpoint of run "
                                             "(ckpt-0000004, say)\n")


def test_a_ckpt_outside_an_out_dir_that_cannot_be_searched_is_said_so_without_a_traceback(capsys, tmp_path,
                                                                                           monkeypatch):
    # Whether --out_dir has a checkpoint of --ckpt's name (hunt 52-n N2) was asked of a directory this user cannot
    # search (another user's run: EACCES on its entries; root passes, hence the stand-in): a PermissionError
    # traceback where the same command said "is not in --out_dir" before (hunt 52-y Y3)
    import errno

    monkeypatch.chdir(tmp_path)
    (tmp_path / "locked").mkdir()
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if os.fspath(path).endswith(os.path.join("locked", "ckpt-0000004")):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    rc, out, err = cli(capsys, "--out_dir=locked", "--ckpt=run/ckpt-0000004", "--device=cpu")
    assert rc == 1 and out == "" and err == ("sample.py: error: --ckpt=run/ckpt-0000004 is not in --out_dir=locked: "
                                             "give one of them, or --ckpt the name of a checkpoint of locked\n")


def test_a_step_whose_only_copy_is_stranded_goes_by_its_name(capsys, tmp_path, monkeypatch):
    # A re-save of step 5 killed between its two renames leaves the earlier save set aside as the step's
    # only copy; LoRA runs record it as ckpt-0000005 (hunt 30-c F10). --init_from took that name for a hub
    # model's, and the run's listing offered the set-aside name, which the step's next save removes (review 31 F9).
    monkeypatch.chdir(tmp_path)
    model = GPT(GPTConfig(**{**TINY, "vocab_size": 257}))
    meta = {"model_config": model.config.to_dict(), "tokenizer": "byte", "config": {}, "vocab_size": 257}
    for step in (4, 5):
        save_checkpoint(tmp_path / "run", step, model, state={}, meta=meta, keep_last=10)
    (tmp_path / "run" / "ckpt-0000005").rename(tmp_path / "run" / ".tmp-old-ckpt-0000005.4242")
    rc, _, err = cli(capsys, "--init_from=run/ckpt-0000005", "--max_new_tokens=1", "--device=cpu")
    assert rc == 0 and "run/.tmp-old-ckpt-0000005.4242 (step 5)" in err, err
    rc, _, err = cli(capsys, "--out_dir=run", "--ckpt=ckpt-0000009", "--device=cpu")
    assert rc == 1 and err.endswith("run has ckpt-0000004, ckpt-0000005\n"), err


def test_a_path_that_can_name_nothing_and_an_empty_init_from_are_one_line(capsys, tmp_path):
    # tracebacks from the first existence check (hunt 32-c F2, F12); an empty --init_from sampled out/ (F14)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    long = tmp_path / ("x" * 300)
    for option in ("--out_dir", "--ckpt", "--init_from"):
        for path, why in ((tmp_path / "a", "a loop of symbolic links"), (long, "file name too long for the filesystem")):
            rc, out, err = cli(capsys, f"{option}={path}")
            assert (rc, out, err) == (1, "", f"sample.py: error: {option}={path}: {why}\n")
    rc, _, err = cli(capsys, "--init_from=")
    assert rc == 1 and err == "sample.py: error: --init_from is empty: name a hub model (gpt2, ...), a Hugging Face " \
                              "directory or a run\n"


def test_a_hugging_face_directory_without_weights_names_them(capsys, tmp_path):
    # config.json alone was "no checkpoint at DIR" (hunt, session 24)
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 32}))
    for arg in f"--init_from={tmp_path / 'hf'}", f"--ckpt={tmp_path / 'hf'}", f"--out_dir={tmp_path / 'hf'}":
        rc, out, err = cli(capsys, arg)
        assert rc == 1 and out == "" and err == (
            f"sample.py: error: {tmp_path / 'hf'} is a Hugging Face model directory, and has neither "
            "model.safetensors nor pytorch_model.bin\n"), err
    # sharded weights are there: said so, where they were said to be missing (hunt 28-a F11)
    (tmp_path / "hf" / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {}}))
    rc, out, err = cli(capsys, f"--init_from={tmp_path / 'hf'}")
    assert rc == 1 and out == "" and err == (
        f"sample.py: error: {tmp_path / 'hf'} is a Hugging Face model directory, and holds sharded weights "
        "(model.safetensors.index.json), which are not read here: save the model as one file, e.g. transformers' "
        'model.save_pretrained(DIR, max_shard_size="100GB")\n'), err
    # a run train.py has begun keeps its own config.json: still "no checkpoint yet", not a model's weights
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps({"out_dir": "run", "max_iters": 10, "n_layer": 2}))
    rc, _, err = cli(capsys, f"--out_dir={tmp_path / 'run'}")
    assert rc == 1 and f"no checkpoint in {tmp_path / 'run'}/ yet" in err, err


def test_a_hugging_face_model_given_as_a_run_says_to_give_it_as_init_from(capsys, tmp_path):
    # --out_dir= or --ckpt= a Hugging Face directory with its weights said it had no weights (hunt, 2026-11-27)
    from gpt.model import GPT, GPTConfig

    GPT(GPTConfig(vocab_size=50257, block_size=16, n_layer=1, n_head=2, n_embd=16)).save_pretrained(tmp_path / "hf")
    for arg in f"--ckpt={tmp_path / 'hf'}", f"--out_dir={tmp_path / 'hf'}":
        rc, out, err = cli(capsys, arg)
        assert rc == 1 and out == "" and err == (
            f"sample.py: error: {tmp_path / 'hf'} is a Hugging Face model, not a run of train.py: give it as "
            f"--init_from={tmp_path / 'hf'}\n"), err
    rc, out, err = cli(capsys, f"--init_from={tmp_path / 'hf'}", "--max_new_tokens=2", "--seed=1")
    assert rc == 0 and out, err


def test_checkpoint_whose_vocabulary_does_not_match_its_tokenizer_is_refused(capsys, tmp_path):
    small = make_run(tmp_path / "small", tokenizer="gpt2", meta_vocab=None)  # 257 ids for GPT-2's 50257
    rc, _, err = cli(capsys, f"--out_dir={small}")
    assert rc == 1 and "vocabulary (257) is smaller than the gpt2 tokenizer's (50257)" in err
    recorded = make_run(tmp_path / "recorded", meta_vocab=300)
    rc, _, err = cli(capsys, f"--out_dir={recorded}")
    assert rc == 1 and "records a vocabulary of 300, but its tokenizer (byte) has 257" in err
    padded = make_run(tmp_path / "padded", vocab_size=320)  # padded for speed: fine, never samples past 257
    assert cli(capsys, f"--out_dir={padded}", "--max_new_tokens=40", "--temperature=2", "--top_k=none",
               "--device=cpu")[0] == 0


def test_non_finite_logits_are_an_error_not_a_token(capsys, tmp_path):
    run = make_run(tmp_path / "huge", scale_weights=1e35)  # finite weights whose logits overflow to inf
    for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        for extra in (["--use_cache=false"], ["--compile=false"], ["--temperature=0"]):
            rc, out, err = cli(capsys, f"--out_dir={run}", "--max_new_tokens=5", "--dtype=float32",
                               f"--device={device}", *extra)
            assert rc == 1 and out == "" and "non-finite logits" in err and "Traceback" not in err, (device, extra)


def test_boolean_options_take_any_spelling(capsys, run_dir):
    args = sample.parse_args(["--compile=False", "--stream=No", "--use_cache=TRUE", "--json=0"])
    assert (args.compile, args.stream, args.use_cache, args.json) == ("false", "false", True, False)
    assert sample.parse_args(["--compile=Auto"]).compile == "auto"
    assert sample.parse_args(["--cuda_graph=No"]).cuda_graph == "false" and sample.parse_args([]).cuda_graph == "auto"
    assert cli_json(capsys, run_dir, "--compile=False", "--max_new_tokens=2")[0]["tokens"] == 2
    rc, _, err = cli(capsys, f"--out_dir={run_dir}", "--compile=sometimes")
    assert rc == 1 and err.count("\n") == 1 and "invalid choice: 'sometimes'" in err


def test_compile_auto_compiles_on_cuda_only_from_the_measured_break_even():
    from gpt.generation import COMPILE_MIN_TOKENS, compile_pays_off

    cuda, cpu = torch.device("cuda"), torch.device("cpu")  # devices as names: no GPU needed
    assert not compile_pays_off("auto", cuda, COMPILE_MIN_TOKENS - 1)
    assert compile_pays_off("auto", cuda, COMPILE_MIN_TOKENS)
    assert not compile_pays_off("auto", cpu, 10 * COMPILE_MIN_TOKENS)
    assert compile_pays_off("true", cpu, 1) and not compile_pays_off("false", cuda, 10 * COMPILE_MIN_TOKENS)
    # a sample.py call of the usual size (8 samples of a 1,024-token context) decodes uncompiled on CUDA
    assert not compile_pays_off("auto", cuda, 8 * 1024)


def test_a_checkpoint_with_torn_meta_names_the_file(capsys, tmp_path):
    from tests.test_checkpoint import corrupt

    run = make_run(tmp_path / "run")
    corrupt(run / "ckpt-0000007", "bad meta.json")
    rc, out, err = cli(capsys, f"--out_dir={run}")
    assert rc == 1 and out == "" and err.count("\n") == 1
    assert f"{run / 'ckpt-0000007' / 'meta.json'}: unreadable checkpoint metadata" in err
    assert f"no other checkpoint in {run}" in err


def test_hub_model_out_of_reach_fails_fast_with_one_line(capsys, monkeypatch):
    import gpt.huggingface

    def offline(name):  # what gpt.huggingface._download_gpt2 raises without a network
        from gpt.errors import HubUnreachable

        raise HubUnreachable(f"could not download {name!r} from the Hugging Face hub (ConnectError: no network).\n"
                           "Without a network, pass a local directory holding config.json and model.safetensors.")

    monkeypatch.setattr(gpt.huggingface, "_download_gpt2", offline)
    rc, out, err = cli(capsys, "--init_from=gpt2-medium")
    assert rc == 1 and out == "" and err.count("\n") == 1 and "could not download 'gpt2-medium'" in err


def test_inference_dtype_choice():
    cpu = torch.device("cpu")
    assert pick_inference_dtype("auto", cpu, 1_000_000)[0] == torch.float32  # small: fp32 is faster
    big = pick_inference_dtype("auto", cpu, 124_000_000)[0]
    assert big == (torch.bfloat16 if native_cpu_bf16() else torch.float32)
    assert pick_inference_dtype("bfloat16", cpu, 1)[0] == torch.bfloat16


def test_the_auto_inference_dtype_is_the_sampling_gpus_not_the_current_ones(cuda_gpus):
    # --device=cuda:1, an H100 beside a V100 (cuda:0, the current GPU): torch.cuda.is_bf16_supported judged
    # the V100, and the H100 decoded in fp16 "because this GPU has no bf16" (hunt 37-e E4)
    cuda_gpus({0: (7, 0), 1: (9, 0)})
    assert pick_inference_dtype("auto", torch.device("cuda:1"), 1) == (torch.bfloat16, "auto on CUDA")
    assert pick_inference_dtype("auto", torch.device("cuda:0"), 1) == (torch.float16, "auto: this GPU has no bf16")


# -- other sources: LoRA, Hugging Face, and a run that train.py wrote ----------------------------


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> Path:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=50257, n_positions=32, n_embd=16, n_layer=2, n_head=2)
    path = tmp_path_factory.mktemp("hf-gpt2")
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    return path


def test_lora_checkpoint_samples_with_its_base_and_hugging_face_dirs_load(capsys, hf_dir, tmp_path):
    from gpt.checkpoint import load_base_model
    from gpt.lora import LoRAConfig, apply_lora

    torch.manual_seed(1)
    model = apply_lora(load_base_model(str(hf_dir)), LoRAConfig(rank=2, alpha=8.0))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("lora_B"):
                p.normal_(0, 0.5)  # adapters that change the output
    lora_cfg = LoRAConfig(rank=2, alpha=8.0).to_dict()
    save_checkpoint(tmp_path / "lora", 3, model, state={},
                    meta={"model_config": model.config.to_dict(), "tokenizer": "gpt2", "vocab_size": 50257,
                          "config": {}, "lora": {"base": str(hf_dir), "config": lora_cfg}})
    args = ("--start=Hello world", "--temperature=0", "--max_new_tokens=12")
    [tuned] = cli_json(capsys, tmp_path / "lora", *args)
    gpt2 = get_tokenizer("gpt2")
    prompt = torch.tensor([gpt2.encode("Hello world")])
    ref = model.eval().generate(prompt, 12, temperature=0, vocab_limit=gpt2.n_vocab)[0, prompt.size(1):].tolist()
    ref = ref[:ref.index(gpt2.eot_token)] if gpt2.eot_token in ref else ref
    assert tuned["text"] == gpt2.decode(ref)
    rc, out, err = cli(capsys, f"--init_from={hf_dir}", *args, "--json", "--device=cpu")
    assert rc == 0 and json.loads(out)["text"] != tuned["text"]  # the base alone: the adapters mattered


@pytest.mark.parametrize("where", ["config.json", "generation_config.json"])
def test_a_hugging_face_directory_ends_its_samples_at_its_own_eos_token(capsys, hf_dir, tmp_path, where):
    # transformers' generate ends a sample at the directory's eos_token_id (generation_config.json's, which it
    # prefers, else config.json's); one that named another id than GPT-2's 50256 ("\n", say) was sampled on to
    # --max_new_tokens (hunt 49-c C1)
    import shutil

    gpt2 = get_tokenizer("gpt2")
    args = ("--start=Hello world", "--temperature=0", "--max_new_tokens=12", "--json", "--device=cpu")
    rc, out, err = cli(capsys, f"--init_from={hf_dir}", *args)
    assert rc == 0 and json.loads(out)["finish_reason"] == "length" and "eos_token_id" not in err  # 50256: GPT-2's
    prompt = torch.tensor([gpt2.encode("Hello world")])
    ids = GPT.from_pretrained(str(hf_dir)).eval().generate(prompt, 12, temperature=0)[0, prompt.size(1):].tolist()
    eos = ids[1]  # the second greedy token (the first, where they are the same)
    assert eos != gpt2.eot_token
    own = shutil.copytree(hf_dir, tmp_path / "hf")
    if where == "config.json":
        (own / "generation_config.json").unlink()
        config = json.loads((own / "config.json").read_text())
        (own / "config.json").write_text(json.dumps({**config, "eos_token_id": eos}))
    else:  # (config.json keeps 50256: generation_config.json's list is the one transformers reads)
        (own / "generation_config.json").write_text(json.dumps({"eos_token_id": [gpt2.eot_token, eos]}))
    rc, out, err = cli(capsys, f"--init_from={own}", *args)
    sample = json.loads(out)
    end = ids.index(eos)
    assert rc == 0 and (sample["finish_reason"], sample["tokens"], sample["text"]) == ("eot", end + 1,
                                                                                        gpt2.decode(ids[:end]))
    assert f"names id {eos} as its end of sequence (eos_token_id)" in err


@pytest.mark.parametrize("lora", [False, True])
def test_a_run_fine_tuned_from_a_hugging_face_directory_keeps_its_end_ids(capsys, hf_dir, tmp_path, lora):
    # A run fine-tuned from a directory whose generation_config.json names another end id beside GPT-2's 50256
    # lost it: its checkpoints did not record it, so sample.py on the run ran on past it, and the run's export named
    # 50256 alone, where transformers' generate of the directory stopped there; a LoRA run, whose base is loaded
    # again, kept it in the export but not in sample.py (hunt 50-g, left 1; hunt 51-f F1)
    import shutil

    from gpt.checkpoint import load_base_model
    from gpt.huggingface import hf_end_tokens
    from gpt.lora import LoRAConfig, apply_lora

    gpt2 = get_tokenizer("gpt2")
    prompt = torch.tensor([gpt2.encode("Hello world")])
    ids = GPT.from_pretrained(str(hf_dir)).eval().generate(prompt, 12, temperature=0)[0, prompt.size(1):].tolist()
    eos = ids[1]
    assert eos != gpt2.eot_token
    own = shutil.copytree(hf_dir, tmp_path / "hf")
    (own / "generation_config.json").write_text(json.dumps({"eos_token_id": [gpt2.eot_token, eos]}))
    model = load_base_model(str(own))  # as train.py's build_model loads --init_from
    meta = {"model_config": model.config.to_dict(), "tokenizer": "gpt2", "vocab_size": 50257, "config": {}}
    if lora:  # (fresh adapters: the base's outputs)
        apply_lora(model, LoRAConfig(rank=2))
        meta["lora"] = {"base": str(own), "config": model.lora_config.to_dict()}
    save_checkpoint(tmp_path / "run", 1, model, state={}, meta=meta)
    loaded, _ = load_model(tmp_path / "run")
    assert loaded.end_tokens == (gpt2.eot_token, eos)
    loaded.save_pretrained(tmp_path / "export")
    assert hf_end_tokens(tmp_path / "export", 50257) == (gpt2.eot_token, eos)
    rc, out, err = cli(capsys, f"--out_dir={tmp_path / 'run'}", "--start=Hello world", "--temperature=0",
                       "--max_new_tokens=12", "--json", "--device=cpu")
    sample = json.loads(out)
    end = ids.index(eos)
    assert rc == 0 and (sample["finish_reason"], sample["tokens"], sample["text"]) == ("eot", end + 1,
                                                                                        gpt2.decode(ids[:end]))
    assert f"names id {eos} as its end of sequence (eos_token_id)" in err


@pytest.mark.slow
def test_cli_end_to_end_on_a_run_that_train_py_wrote(tmp_path):
    from gpt.prepare import prepare

    text = tmp_path / "text"
    text.mkdir()
    for i in range(6):
        (text / f"doc{i}.txt").write_text("To be, or not to be: that is the question.\n" * (20 + i))
    data = prepare(source="input", inputs=[str(text)], tokenizer="byte", out_dir=tmp_path / "shards",
                   num_proc=1, quiet=True)
    # the caller's environment (PYTHONDONTWRITEBYTECODE, LD_LIBRARY_PATH were dropped: hunt 28-b), one thread
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    train = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), f"--data={data}", "--n_layer=2", "--n_head=2", "--n_embd=32",
         "--block_size=32", "--batch_size=4", "--max_iters=3", "--eval_interval=100", "--eval_iters=2",
         "--compile=false", "--device=cpu", "--out_dir=out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert train.returncode == 0, train.stderr[-2000:]
    proc = subprocess.run([sys.executable, str(ROOT / "sample.py"), "--start=To be", "--num_samples=2",
                           "--max_new_tokens=40", "--stop=\\n", "--json", "--device=cpu"],  # no --out_dir: out/
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    samples = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(samples) == 2 and all(s["prompt"] == "To be" and "\n" not in s["text"] for s in samples)
    assert "step 3" in proc.stderr and "byte tokenizer" in proc.stderr
    plain = subprocess.run([sys.executable, str(ROOT / "sample.py"), "--max_new_tokens=20", "--device=cpu"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert plain.returncode == 0 and plain.stdout.endswith(sample.SEPARATOR + "\n")


def test_a_bug_keeps_its_traceback(monkeypatch, run_dir):
    def buggy(args):
        raise KeyError("a bug, not a user's mistake")

    monkeypatch.setattr(sample, "sample", buggy)
    with pytest.raises(KeyError):  # not turned into a one-line "error:" and status 1
        sample.main([f"--out_dir={run_dir}"])


@pytest.mark.parametrize("args, stdin, needle", [
    (["--start=-"], b"\xffROMEO", "stdin (--start=-): not valid UTF-8 (invalid start byte at byte 0)"),
    (["--start=ROMEO\udcff"], b"", "--start: not valid UTF-8 (invalid start byte at byte 5)"),  # argv's PEP 383 form
    (["--instruction=Who says: \udcff"], b"", "--instruction: not valid UTF-8"),
    (["--instruction=-"], b"Who says: \xff", "stdin (--instruction=-): not valid UTF-8"),
    (["--stop=\udcff"], b"", "--stop: not valid UTF-8"),
    (["--start=FILE:{bad}"], b"", "the prompt file {bad}: not valid UTF-8"),
])
def test_prompt_text_that_is_not_utf8_gives_one_line_and_status_1(capsys, run_dir, tmp_path, monkeypatch,
                                                                    args, stdin, needle):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xffROMEO")  # (not b"\xff\xfe", UTF-16's byte order mark, which is named: hunt 44-b B4)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--json", *[a.format(bad=bad) for a in args])
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and needle.format(bad=bad) in err, err


@pytest.mark.parametrize("seed", [-2**63 - 1, -1, 2**64])
def test_a_seed_outside_train_pys_range_is_one_line(capsys, run_dir, seed):
    # -1, which is "a random seed" to some tools, sampled the same text each time (hunt 32-c); train.py refused it
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", f"--seed={seed}")
    assert rc == 1 and out == "" and err == (f"sample.py: error: seed must be in [0, 2**64 - 1], got {seed} "
                                             "(the same seed gives the same samples)\n")
    assert cli_json(capsys, run_dir, f"--seed={2**64 - 1}", "--max_new_tokens=2")[0]["tokens"] == 2
    assert cli_json(capsys, run_dir, "--seed=0", "--max_new_tokens=2")[0]["tokens"] == 2


def test_a_command_line_value_decoded_by_a_latin1_locale_is_not_refused(monkeypatch):
    # Under an ISO-8859-1 locale argv is decoded as Latin-1: "café" arrives as proper text, and
    # encoding it back with the locale's codec gives bytes that are not UTF-8.
    import os

    import sample
    from gpt.errors import UsageError

    monkeypatch.setattr(os, "fsencode", lambda value: value.encode("latin-1", "surrogateescape"))
    assert sample.argv_text("café", "--start") == "café"
    with pytest.raises(UsageError, match=r"^--start: not valid UTF-8"):
        sample.argv_text("caf\udce9", "--start")  # an undecodable byte, as PEP 383 hands it over


def test_the_cuda_graph_step_runs_the_eager_step_off_cuda(capsys, run_dir):
    # --cuda_graph=true or auto (the default) on a CPU: the eager decode step, the same samples, and
    # no claim of a graph
    from gpt.generation import GraphedDecodeStep

    model, _ = load_model(run_dir, device="cpu")
    prompt = torch.tensor([[5, 6, 7]])
    step = GraphedDecodeStep(model)
    kw = dict(temperature=0.9, top_k=20, top_p=0.9, repetition_penalty=1.2, num_samples=3)
    expected = model.generate(prompt, 40, generator=torch.Generator().manual_seed(1), decode_step="static", **kw)
    got = model.generate(prompt, 40, generator=torch.Generator().manual_seed(1), decode_step=step, **kw)
    assert torch.equal(got, expected) and not step._graphs and not step.failed
    # On CUDA a graph reads the model's decode inputs where they are, and copies other tensors in
    # (its key and that choice are plain Python: checked here, where the capture cannot run)
    tok, pos = model.decode_inputs
    kw = dict(temperature=0.9, top_k=20, top_p=None, repetition_penalty=1.0)
    assert step._direct(tok, pos) and not step._direct(tok.clone(), pos)
    assert step._key(tok, pos, None, None, kw)[-1] == tok.data_ptr()
    assert step._key(tok.clone(), pos, None, None, kw)[-1] is None
    samples = []
    for graph in ("false", "true", "auto"):
        rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--json", "--device=cpu", "--dtype=float32", "--start=To be",
                           "--max_new_tokens=30", "--num_samples=2", f"--cuda_graph={graph}")
        assert rc == 0, err
        assert next(line for line in err.splitlines() if " | " in line).endswith("compile off")
        samples.append([{k: v for k, v in json.loads(line).items() if k not in ("seconds", "tokens_per_s")}
                        for line in out.splitlines()])
    assert samples[0] == samples[1] == samples[2] and len(samples[0]) == 2


# -- what stdout, stdin and memory can refuse (hunt, session 27) ---------------------------------


def run_sample(run_dir, *args, env=None, **kwargs) -> subprocess.CompletedProcess:
    import os

    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs}
    return subprocess.run([sys.executable, str(ROOT / "sample.py"), f"--out_dir={run_dir}", "--max_new_tokens=8",
                           "--device=cpu", *args], cwd=ROOT, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}, **pipes)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("how", [[], ["--json"], ["--stream=true"], ["--help"]])
def test_a_full_disk_under_stdout_is_one_line(run_dir, how):
    # `sample.py > samples.txt` on a full disk was an OSError traceback (and a second report at exit);
    # --help's said "the samples" (hunt 34-a A9)
    with open("/dev/full", "w") as full:
        proc = run_sample(run_dir, *how, stdout=full)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.splitlines()[-1] == \
        f"sample.py: error: writing the {'help' if how == ['--help'] else 'samples'} to stdout failed: No space left on device", err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_a_stdout_that_is_not_utf8_gets_json_in_utf8_and_text_with_question_marks(run_dir):
    # An ASCII or Latin-1 stdout was a UnicodeEncodeError traceback after generating
    text = run_sample(run_dir, "--start=café ✓", env={"PYTHONIOENCODING": "ascii"})
    assert text.returncode == 0 and text.stdout.startswith(b"caf? ?"), text.stderr.decode()
    assert "warning: stdout's encoding is ascii: characters it lacks are printed as '?'" in text.stderr.decode()
    as_json = run_sample(run_dir, "--start=café ✓", "--json", env={"PYTHONIOENCODING": "latin-1"})
    assert as_json.returncode == 0 and b"warning" not in as_json.stderr, as_json.stderr.decode()
    assert json.loads(as_json.stdout.decode("utf-8"))["prompt"] == "café ✓"  # JSON's own encoding, exact


def test_a_stdout_in_utf16_or_utf8_sig_is_not_said_to_lack_characters(capsys):
    # Every character has its bytes there: "characters it lacks are printed as '?'" was false, and the text went
    # out in its encoding (hunt 52-r R2). --json is still written in UTF-8, JSON's own encoding
    import io

    from sample import samples_out

    for encoding in ["utf-16", "utf-8-sig", "utf-32-le"]:
        stream = io.TextIOWrapper(io.BytesIO(), encoding=encoding)
        samples_out(stream, as_json=False).write("café ✓ 日本\n")
        assert capsys.readouterr().err == "" and stream.encoding == encoding and stream.errors == "strict"
        stream.flush()
        assert stream.buffer.getvalue().decode(encoding) == "café ✓ 日本\n"
        stream = io.TextIOWrapper(io.BytesIO(), encoding=encoding)
        samples_out(stream, as_json=True)
        assert stream.encoding == "utf-8" and capsys.readouterr().err == ""


@pytest.mark.parametrize("args, closed, message", [
    (["--start=-"], 0, "stdin is closed: nothing to read for --start=-"),
    (["--chat"], 0, "stdin is closed: nothing to read for --chat"),
    ([], 1, "stdout is closed: nowhere to write the samples (redirect it, e.g. > samples.txt)"),
])
def test_a_closed_stdin_or_stdout_is_one_line(run_dir, args, closed, message):
    # Python's sys.stdin / sys.stdout are None for a closed descriptor: an AttributeError traceback
    import os

    proc = run_sample(run_dir, *args, stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(closed),
                      **({"stdout": None} if closed == 1 else {}))
    assert proc.returncode == 1 and proc.stderr.decode().splitlines() == [f"sample.py: error: {message}"]


@pytest.mark.parametrize("arg, message", [
    ("--out_dir=", "--out_dir is empty: name a run directory (default: out)"),
    ("--ckpt=", "--ckpt is empty: give latest, best, or a checkpoint's name or path"),
])
def test_an_empty_run_or_checkpoint_is_refused_not_read_as_the_current_directory(capsys, arg, message):
    rc, out, err = cli(capsys, arg)
    assert rc == 1 and err.splitlines() == [f"sample.py: error: {message}"] and out == ""


def test_more_samples_than_memory_holds_is_one_line(capsys, run_dir, monkeypatch):
    # 10^8 samples built their Python objects for minutes, then the allocator's traceback; checked first now
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--num_samples=100000000")
    assert rc == 1 and out == "", err
    assert err.splitlines()[-1].startswith("sample.py: error: out of memory for 100,000,000 samples at once: "
                                           "their KV cache and logits need "), err
    assert err.splitlines()[-1].endswith("; give a smaller --num_samples")
    # and an allocation that fails anyway (a ulimit, a GPU shared with others) is one line too
    import gpt.generation

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 2457600000 bytes")

    monkeypatch.setattr(gpt.generation, "generate_samples", out_of_memory)
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--num_samples=3")
    assert rc == 1 and err.splitlines()[-1] == (
        "sample.py: error: out of memory generating 3 samples at once: DefaultCPUAllocator: can't allocate memory: "
        "you tried to allocate 2457600000 bytes; give a smaller --num_samples"), err


def test_a_newer_checkpoint_that_lost_a_file_is_said_not_passed_over(capsys, tmp_path):
    run = make_run(tmp_path / "run")  # ckpt-0000007
    newer = run / "ckpt-0000009"
    import shutil

    shutil.copytree(run / "ckpt-0000007", newer)
    (newer / "model.safetensors").unlink()  # (its state.pt alone lost: its weights are sampled, the next test)
    (run / "latest").write_text("ckpt-0000009")
    rc, out, err = cli(capsys, f"--out_dir={run}", "--device=cpu", "--max_new_tokens=2")
    assert rc == 0 and f"warning: {newer}: incomplete, without model.safetensors; sampling ckpt-0000007, the newest " \
                       "complete one" in err.splitlines(), err
    rc, out, err = cli(capsys, f"--out_dir={run}", "--device=cpu", "--ckpt=ckpt-0000009")
    assert rc == 1 and err.splitlines() == [f"sample.py: error: {newer}: incomplete, without model.safetensors; {run} "
                                            "has ckpt-0000007"], err  # it said "no checkpoint at ckpt-0000009"
    # a path: the run it is in, not --out_dir's ("there is no out/" here, or another run's checkpoints)
    rc, out, err = cli(capsys, "--device=cpu", f"--ckpt={newer}")
    assert rc == 1 and err.splitlines() == [f"sample.py: error: {newer}: incomplete, without model.safetensors; {run} "
                                            "has ckpt-0000007"], err
    # and as --init_from, where it was "no checkpoint at RUN/ckpt-0000009" (hunt 47-c C1)
    rc, out, err = cli(capsys, "--device=cpu", f"--init_from={newer}")
    assert rc == 1 and err.splitlines() == [f"sample.py: error: {newer}: incomplete, without model.safetensors; take "
                                            f"the run's newest complete one, --init_from={run / 'ckpt-0000007'}"], err


def test_checkpoints_that_lost_only_their_state_pt_are_sampled_with_a_note(capsys, tmp_path):
    # state.pt is the training state, which only a resume reads (what one removes to share or archive the weights):
    # such a run could not be sampled at all, "incomplete, without state.pt; RUN has no complete checkpoint", and
    # a newer such checkpoint was passed over for an older one (hunt 47-c, left; hunt 48-c C1)
    import shutil

    run = make_run(tmp_path / "run")  # ckpt-0000007
    newer = run / "ckpt-0000009"
    shutil.copytree(run / "ckpt-0000007", newer)
    meta = json.loads((newer / "meta.json").read_text())
    (newer / "meta.json").write_text(json.dumps({**meta, "step": 9}))
    (run / "latest").write_text("ckpt-0000009")
    (run / "best").write_text("ckpt-0000009")
    for ckpt in (newer, run / "ckpt-0000007"):
        (ckpt / "state.pt").unlink()
    note = (f"note: {newer} has no state.pt (its training state, which only a resume reads): its weights are taken; "
            "its run cannot be resumed from it")
    for args in ([f"--out_dir={run}"], [f"--out_dir={run}", "--ckpt=best"], [f"--ckpt={newer}"],
                 [f"--out_dir={run}", "--ckpt=ckpt-0000009"], [f"--init_from={run}"], [f"--init_from={newer}"]):
        rc, out, err = cli(capsys, *args, "--device=cpu", "--max_new_tokens=2", "--seed=1")
        assert rc == 0 and note in err.splitlines() and f"{newer} (step 9)" in err, (args, err)
        assert "warning" not in err, (args, err)
    # a run without its `latest`: the newest with its weights, not the older one
    (run / "latest").unlink()
    rc, out, err = cli(capsys, f"--out_dir={run}", "--device=cpu", "--max_new_tokens=2")
    assert rc == 0 and note in err.splitlines(), err
    # the Python API too
    from gpt.checkpoint import load_model
    model, ckpt = load_model(run)
    assert ckpt.path == newer and ckpt.meta["step"] == 9


def test_a_run_whose_only_checkpoint_lost_a_file_says_so_not_train_one(capsys, tmp_path):
    # it said "no checkpoint in RUN/ yet; train one with: python train.py --out_dir=RUN", of a run whose
    # checkpoint had lost a file, and that command starts the run over
    run = make_run(tmp_path / "run")  # ckpt-0000007
    (run / "ckpt-0000007" / "meta.json").unlink()  # (without state.pt alone it is sampled: the test above)
    expected = [f"sample.py: error: {run / 'ckpt-0000007'}: incomplete, without meta.json; {run} has no complete "
                "checkpoint"]
    for args in ([f"--out_dir={run}"], [f"--out_dir={run}", "--ckpt=best"], [f"--init_from={run}"]):
        rc, out, err = cli(capsys, *args, "--device=cpu", "--max_new_tokens=2")
        assert rc == 1 and out == "" and err.splitlines() == expected, (args, err)


def test_a_closed_stderr_keeps_json_on_stdout_clean(run_dir):
    # print(file=sys.stderr) with sys.stderr None (a closed descriptor 2) wrote the information lines to
    # stdout, between --json's records (hunt, session 27)
    import os

    proc = run_sample(run_dir, "--json", "--num_samples=2", preexec_fn=lambda: os.close(2), stderr=None)
    assert proc.returncode == 0
    assert [json.loads(line)["index"] for line in proc.stdout.decode().splitlines()] == [0, 1]


def test_a_padded_vocabulary_never_reaches_the_tokenizer(monkeypatch):
    # Near-uniform draws over 320 ids, 63 of them padding: without the limit about a fifth of the
    # ids fed to the tokenizer were ids it does not know, and the byte tokenizer dropped them
    # without a word (hunt 33-c S6)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=320, block_size=32, n_layer=1, n_head=2, n_embd=16)).eval()
    tok, fed = get_tokenizer("byte"), []
    decode_bytes = tok.decode_bytes
    monkeypatch.setattr(tok, "decode_bytes", lambda ids: (fed.extend(ids), decode_bytes(ids))[1])
    generate_samples(model, tok, [256], 2, 200, temperature=1000.0, generator=torch.Generator().manual_seed(0))
    assert len(fed) > 100 and max(fed) < 257


def test_a_model_one_id_short_of_its_tokenizer_is_refused():
    # a byte model of 256 ids has no embedding for end-of-text (256), the default prompt (hunt 33-c S7)
    from gpt.errors import ConfigError
    from gpt.generation import check_vocab

    with pytest.raises(ConfigError, match=r"the model's vocabulary \(256\) is smaller than the byte tokenizer's \(257\)"):
        check_vocab(256, BYTE)
    check_vocab(257, BYTE)
    check_vocab(320, BYTE)


def test_cpu_bf16_starts_at_its_threshold_where_the_cpu_computes_bf16(monkeypatch):
    # never reached on a CPU without native bf16 (hunt 33-c S8): the threshold's edge, on every machine
    import gpt.generation

    cpu = torch.device("cpu")
    monkeypatch.setattr(gpt.generation, "native_cpu_bf16", lambda: True)
    assert pick_inference_dtype("auto", cpu, gpt.generation.CPU_BF16_MIN_PARAMS)[0] is torch.bfloat16
    assert pick_inference_dtype("auto", cpu, gpt.generation.CPU_BF16_MIN_PARAMS - 1)[0] is torch.float32
    monkeypatch.setattr(gpt.generation, "native_cpu_bf16", lambda: False)
    assert pick_inference_dtype("auto", cpu, 10**12)[0] is torch.float32


def test_stdin_that_fails_as_it_is_read_is_one_line(capsys, run_dir, monkeypatch):
    # an I/O error (a terminal hung up) on --start=- or a --chat line was a traceback; FILE: said it (hunt 33-a F16)
    import errno

    class Failing(io.RawIOBase):
        def readable(self):
            return True

        def readinto(self, buffer):
            raise OSError(errno.EIO, "Input/output error")

    for args, message in ((["--start=-"], "cannot read the prompt from stdin (--start=-): Input/output error"),
                          (["--chat"], "cannot read the next --chat line from stdin: Input/output error")):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Failing())))
        rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--max_new_tokens=2", *args)
        assert rc == 1 and err.splitlines()[-1] == f"sample.py: error: {message}" and "Traceback" not in err, err


def test_stop_escapes_stand_for_their_characters():
    # only \n was exercised: a \t taken as "t" stopped every sample at its first letter t (hunt 33-c S23).
    # An unknown escape stays as typed
    assert sample._unescape(r"a\tb\nc\rd\\e\q") == "a\tb\nc\rd\\e\\q"


def test_auto_streams_to_a_terminal_only_and_never_json(monkeypatch):
    # inverted, a terminal saw nothing until the end, and no test noticed: piped output is the same (hunt 33-c S24)
    for tty in (True, False):
        monkeypatch.setattr(sys.stdout, "isatty", lambda: tty, raising=False)
        assert sample.streamed(sample.parse_args([])) is tty
        assert sample.streamed(sample.parse_args(["--stream=true"])) is True
        assert sample.streamed(sample.parse_args(["--stream=false"])) is False
        assert sample.streamed(sample.parse_args(["--json"])) is False


def test_instruction_answers_keep_the_stop_strings_and_the_seed(capsys, run_dir):
    # --stop and --seed were dropped on the way to --instruction's answers without a test noticing (hunt 33-c
    # S25, S26). Expected from the unstopped greedy text, and from plain sampling's seed rule
    greedy = ("--instruction=The", "--temperature=0", "--max_new_tokens=60")
    [full] = cli_json(capsys, run_dir, *greedy)
    text = full["text"]
    assert len(text) > 20
    stop = text[12:14]
    [cut] = cli_json(capsys, run_dir, *greedy, f"--stop={stop}")
    assert cut["text"] == text[:text.find(stop)] and cut["finish_reason"] == "stop"
    sampled = ("--instruction=abc", "--temperature=1", "--top_k=none", "--num_samples=3", "--max_new_tokens=24")
    a = [s["text"] for s in cli_json(capsys, run_dir, *sampled, "--seed=1")]
    b = [s["text"] for s in cli_json(capsys, run_dir, *sampled, "--seed=1")]
    c = [s["text"] for s in cli_json(capsys, run_dir, *sampled, "--seed=2")]
    assert a == b and a != c


def test_a_value_of_two_dashes_is_the_value_not_the_end_of_options(capsys, run_dir):
    """argparse (Python 3.11) took the "--" of --key=-- for the end of options and gave the option []:
    a traceback for --start=--, the stop string of --stop=-- dropped without a word."""
    assert sample.parse_args(["--start=--"]).start == "--"
    assert sample.parse_args(["--stop=--", "--stop=a"]).stop == ["--", "a"]
    assert sample.parse_args(["--instruction=--"]).instruction == "--"
    for bad in ("--seed=--", "--dtype=--", "--use_cache=--"):
        rc, out, err = cli(capsys, "--out_dir", run_dir, bad)
        assert rc == 1 and out == "" and err.startswith("sample.py: error: argument") and "Traceback" not in err, bad
    rc, out, err = cli(capsys, "--out_dir", run_dir, "--start=--", "--max_new_tokens=3", "--json")
    assert rc == 0 and json.loads(out)["prompt"] == "--"


def test_a_prompt_file_with_a_tilde_is_in_the_home_directory(tmp_path, monkeypatch):
    # --start=FILE:~/p.txt: the shell leaves it as it is, and it was "No such file or directory: '~/p.txt'",
    # while --out_dir=~/run is expanded (hunt 35-f F11)
    (tmp_path / "p.txt").write_text("to be", encoding="utf-8")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert sample.read_prompt("FILE:~/p.txt") == "to be"


def test_one_token_is_said_in_the_singular(capsys, run_dir):
    # "its first 1 tokens were dropped" and "1 tokens in" (hunt 44-b B5)
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", f"--start={'a' * 33}", "--max_new_tokens=1", "--device=cpu")
    assert rc == 0 and "the prompt is 33 tokens" in err and "its first token was dropped" in err
    assert "1 sample (1 at --max_new_tokens), 1 token in " in err


def test_one_layer_is_said_in_the_singular(capsys, tmp_path):
    # the header said "1 layers" of a one-layer model, beside the plurals hunt 44-b B5 mended (review, hunt 44-g G7)
    one_layer = make_run(tmp_path / "out", config={"n_layer": 1})
    rc, out, err = cli(capsys, f"--out_dir={one_layer}", "--max_new_tokens=1", "--device=cpu")
    assert rc == 0 and "M parameters, 1 layer, context 32," in err


@pytest.mark.parametrize("encoding, name", [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_utf16_or_utf32_prompt_is_one_line_naming_the_encoding(capsys, run_dir, tmp_path, monkeypatch, encoding,
                                                                   name):
    # as Notepad's "Unicode" or PowerShell 5's `>` save it: "not valid UTF-8 (invalid start byte at byte 0)" (hunt 44-b B4)
    data = ("\ufeff" if encoding == "utf-16-be" else "") + "ROMEO:\n"
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes(data.encode(encoding))
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", f"--start=FILE:{prompt}")
    said = f"{name} text (its byte order mark), not UTF-8: save it as UTF-8\n"
    assert rc == 1 and out == "" and err == f"sample.py: error: the prompt file {prompt}: {said}"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data.encode(encoding))))
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--instruction=-")
    assert rc == 1 and err == f"sample.py: error: stdin (--instruction=-): {said}"


@pytest.mark.parametrize("encoding, order", [("utf-16-le", "little-endian"), ("utf-16-be", "big-endian"),
                                             ("utf-32-le", "little-endian"), ("utf-32-be", "big-endian")])
def test_a_utf16_prompt_without_a_byte_order_mark_is_named_not_taken_with_its_nuls(capsys, run_dir, tmp_path, encoding,
                                                                                  order):
    # ASCII in UTF-16 without a mark (iconv's, Python's "utf-16-le") is valid UTF-8, a NUL beside each letter: it was
    # the prompt, NULs and all, without a word (review 44-g G10); data preparation names it (hunt 44-c C3)
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes("ROMEO:\nBut soft, what light\n".encode(encoding))
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", f"--start=FILE:{prompt}")
    # (and UTF-32, its ASCII three NULs beside each letter: taken with them, session 44's leftover)
    assert rc == 1 and out == "" and err == (f"sample.py: error: the prompt file {prompt}: {encoding[:6].upper()} text "
                                             f"({order}, without a byte order mark), not UTF-8: save it as UTF-8\n")
    prompt.write_bytes(b"ROMEO\0:\n")  # a NUL alone, no UTF-16: the prompt as given, as before
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", f"--start=FILE:{prompt}", "--max_new_tokens=1",
                       "--json")
    assert rc == 0 and json.loads(out)["prompt"] == "ROMEO\0:\n"


def test_the_repetition_penalty_never_counts_the_end_of_text_a_prompt_starts_from():
    # An empty --start, and every instruction and chat prompt, starts from end-of-text: penalised as a token seen,
    # it made every sample less likely to end (hunt 44-b B3). A model whose every position predicts end-of-text
    # first (logit 8, the others below 1):
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY)).eval()
    eot = BYTE.eot_token
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.copy_(model.transformer.wte.weight[eot])
        model.transformer.ln_f.bias.mul_(8 / (model.transformer.wte.weight[eot] @ model.transformer.ln_f.bias))
    for prompt in ([eot], [eot, *BYTE.encode("User: hi"), eot, *BYTE.encode("Assistant:")]):
        [s] = generate_samples(model, BYTE, prompt, 1, 5, temperature=0, repetition_penalty=1e9)
        assert (s.finish_reason, s.tokens) == ("eot", 1)
    # model.generate without eot_token counts every id, as before; with it, no end-of-text, the drawn ones included
    start = torch.tensor([[eot]])
    assert model.generate(start, 1, temperature=0)[0, 1] == eot
    assert model.generate(start, 1, temperature=0, repetition_penalty=1e9)[0, 1] != eot
    assert model.generate(start, 3, temperature=0, repetition_penalty=1e9, eot_token=eot)[0, 1:].tolist() == [eot] * 3


def test_a_sample_that_runs_past_the_context_says_so_once(capsys, run_dir, monkeypatch):
    # The window slid without a word: the model no longer saw the prompt's beginning (hunt 44-b B1). The prompt is
    # 5 bytes, the context 32: new token k is drawn from 5 + k - 1 tokens, so the 28th from all 32, the 29th from a
    # slid window (16 kept). Uncached, every pass takes the whole window: its lengths show where it slid
    lengths, forward = [], GPT.forward
    monkeypatch.setattr(GPT, "forward", lambda self, idx, *a, **k: (lengths.append(idx.shape[1]),
                                                                    forward(self, idx, *a, **k))[1])
    args = (f"--out_dir={run_dir}", "--device=cpu", "--start=hello", "--temperature=0", "--top_k=none",
            "--use_cache=false", "--json")
    rc, out, err = cli(capsys, *args, "--max_new_tokens=29")
    assert rc == 0 and json.loads(out)["tokens"] == 29 and lengths == [5 + i for i in range(28)] + [16]
    assert err.count("note:") == 1 and ("note: the sample ran past the model's context of 32 tokens, where the window "
                                        "slides: its tokens after the first 28 were drawn without the prompt's "
                                        "beginning (--max_new_tokens=28 or fewer keeps it in view)\n") in err
    rc, out, err = cli(capsys, *args, "--max_new_tokens=28")
    assert rc == 0 and json.loads(out)["tokens"] == 28 and "note:" not in err
    rc, out, err = cli(capsys, *args[:2], "--num_samples=3", "--max_new_tokens=40", "--json", "--start=hi")
    assert rc == 0 and "note: all 3 samples ran past" in err and "their tokens after the first 31 were drawn " \
                                                                 "without the prompt's beginning" in err
    # an empty prompt (end-of-text) has nothing to lose: no note, where a plain `python sample.py` had one at each run
    rc, out, err = cli(capsys, *args[:2], "--num_samples=3", "--max_new_tokens=40", "--json")
    assert rc == 0 and [json.loads(line)["tokens"] for line in out.splitlines()] == [40] * 3 and "note:" not in err
    # a prompt cut to the context: its warning says the beginning went; the note said "--max_new_tokens=1 or fewer
    # keeps it in view", which it does not (hunt 46-d D2)
    rc, out, err = cli(capsys, *args[:2], "--max_new_tokens=5", "--json", "--start=" + "0123456789" * 4)
    assert rc == 0 and "its first 8 tokens were dropped" in err and "note:" not in err
    # a prompt as long as the context, not cut: one token sees it all, said in the singular (hunt 46-d D3)
    rc, out, err = cli(capsys, *args[:2], "--max_new_tokens=5", "--json", "--start=" + "0123456789" * 3 + "01")
    assert rc == 0 and "dropped" not in err and ("its tokens after the first were drawn without the prompt's beginning "
                                                 "(--max_new_tokens=1 keeps it in view)\n") in err


def test_a_backslash_n_in_a_typed_prompt_is_taken_as_typed_and_said(capsys, run_dir):
    # --start="Once\nupon" was a backslash and an n without a word, beside --stop="\n", which reads escapes; a prompt
    # may hold a real backslash (C:\new, \nabla), so it is taken as typed, and said (hunt 44-b B2)
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--json", "--max_new_tokens=1",
                       r"--start=Once\nupon")
    assert rc == 0 and json.loads(out)["prompt"] == "Once\\nupon"
    assert "note: --start is taken as typed: its \\n is a backslash and an n, not a new line" in err
    assert "--start=FILE:path, --start=- (stdin)" in err
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--json", "--max_new_tokens=1",
                       "--start=Once\nupon", r"--stop=\n")  # a real new line, and escapes where they are read
    assert rc == 0 and json.loads(out)["prompt"] == "Once\nupon" and "note: --start" not in err


def test_the_end_of_text_marker_typed_in_a_prompt_is_text_and_said(capsys, run_dir):
    # Hugging Face's GPT-2 tokenizer reads "<|endoftext|>" as the token 50256, a usual prompt there: here it is text,
    # as in training data, and the model was conditioned on those 13 bytes without a word (hunt 49-o O2)
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--json", "--max_new_tokens=1",
                       "--start=<|endoftext|>Once")
    assert rc == 0 and json.loads(out)["prompt"] == "<|endoftext|>Once"
    assert ("note: --start holds the text '<|endoftext|>', which is tokenized as ordinary text (13 tokens), not as "
            "the end-of-text token; leave --start out to sample from end-of-text\n") in err
    rc, out, err = cli(capsys, f"--out_dir={run_dir}", "--device=cpu", "--json", "--max_new_tokens=1", "--start=Once")
    assert rc == 0 and "note: --start holds" not in err


def test_seed_help_says_the_samples_depend_on_num_samples_too(capsys, run_dir):
    # --help said "the same seed gives the same samples": the first sample of --num_samples=3 is not the one sample
    # of --num_samples=1 (one generator draws the batch's noise; the README's --seed row says so: hunt 44-b B7)
    alone = cli_json(capsys, run_dir, "--start=To", "--max_new_tokens=12")
    batch = cli_json(capsys, run_dir, "--start=To", "--max_new_tokens=12", "--num_samples=3")
    assert alone[0]["text"] != batch[0]["text"]
    seed_help = next(a.help for a in sample.make_parser()._actions if "--seed" in a.option_strings)
    assert "the same seed and --num_samples give the same samples" in seed_help


def test_help_names_the_default_of_every_option_that_has_one():
    # --stream's help said what auto does, not that auto is the default, where --compile and --cuda_graph beside it
    # say theirs (hunt 52-c C7); an option off by default (None, False, empty) is off where its help says nothing
    import argparse
    unsaid = [a.option_strings[-1] for a in sample.make_parser()._actions
              if a.default not in (None, False, "", [], argparse.SUPPRESS) and "default" not in a.help]
    assert unsaid == []


def test_the_readme_flag_table_names_sample_py_options_with_their_defaults():
    # The README's table of sample.py's flags is what a newcomer reads before --help: each flag it names must exist,
    # with the default it gives (hunt 49-e: a README walk; kept in step as the options change)
    import re
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("| flag | default | meaning |\n| --- | --- | --- |\n", 1)[1].split("\n\n", 1)[0]
    parser = sample.make_parser()
    options = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    rows = 0
    for line in table.splitlines():
        flags = re.findall(r"`(--\w+)`", line.split("|")[1])
        defaults = line.split("|")[2].replace("`", "").strip().split(" / ")
        assert len(defaults) == len(flags), line
        for flag, said in zip(flags, defaults):
            assert flag in options, flag
            default = options[flag].default
            if default is None:  # (resolved later: its help says the value)
                default = next(iter(re.findall(r"\(default: (\w+)\)", options[flag].help or "")), "")
            typed = {"": "", "empty": ""}.get(said, said)
            assert str(default if default != [] else "").lower() == typed.lower(), (flag, default, said)
            rows += 1
    assert rows >= 15
