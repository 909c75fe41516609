"""gpt/chat.py and sample.py --instruction / --chat: the context keeps the newest turns, the chat
loop carries the conversation (and forgets it on /reset), answers are greedy generation on the
template's prompt, for Hugging Face GPT-2 directories and LoRA runs too; bad combinations of
options are one line. (A trained model answering through stdin: tests/test_instruct.py.)"""

import io
import json
from pathlib import Path

import pytest
import torch

import sample
from gpt.chat import Answerer, answer_instruction, chat, fit_context
from gpt.checkpoint import load_base_model, save_checkpoint
from gpt.errors import UsageError
from gpt.generation import Sample
from gpt.instruct import prompt_ids
from gpt.lora import LoRAConfig, apply_lora
from gpt.model import GPT, GPTConfig
from gpt.tokenizer import get_tokenizer

BYTE = get_tokenizer("byte")
GPT2 = get_tokenizer("gpt2")


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


# ----------------------------------------------------------------------------- the context


def test_everything_fits_nothing_is_dropped():
    messages = [user("a"), assistant("b"), user("c")]
    kept, dropped = fit_context(BYTE, messages, block_size=256, room=64)
    assert (kept, dropped) == (messages, 0)


def test_oldest_turns_go_first_system_and_newest_stay():
    system = {"role": "system", "content": "Be brief."}
    messages = [system, user("q1" * 10), assistant("a1" * 10), user("q2"), assistant("a2"), user("q3")]
    newest = prompt_ids(BYTE, [system, user("q2"), assistant("a2"), user("q3")])
    kept, dropped = fit_context(BYTE, messages, block_size=len(newest) + 10, room=10)
    assert kept == [system, user("q2"), assistant("a2"), user("q3")] and dropped == 1  # a question with its answer
    # (it counted that turn's messages, 2, as dropped_turns: hunt 30-d F2)
    assert prompt_ids(BYTE, kept) == newest
    kept, dropped = fit_context(BYTE, messages, block_size=len(newest) + 9, room=10)
    assert kept == [system, user("q3")] and dropped == 2
    kept, dropped = fit_context(BYTE, messages, block_size=20, room=10)  # even the newest alone is too long
    assert kept == [system, user("q3")] and len(prompt_ids(BYTE, kept)) > 10  # sample.py then keeps its last tokens, with a warning


def fit_context_by_retokenizing(tokenizer, messages, block_size, room):
    """fit_context as it was written first (and still means): drop the oldest turn, tokenize the prompt again
    (it returned that prompt too, which is prompt_ids of the messages kept)."""
    messages, dropped = list(messages), 0
    ids = prompt_ids(tokenizer, messages)
    while len(ids) + room > block_size:
        oldest = next((i for i, m in enumerate(messages[:-1]) if m["role"] != "system"), None)
        if oldest is None:
            break
        end = oldest + 1
        while end < len(messages) - 1 and messages[end]["role"] == "assistant":
            end += 1
        dropped += 1
        del messages[oldest:end]
        ids = prompt_ids(tokenizer, messages)
    return messages, dropped


def test_the_context_fitted_from_pieces_is_the_one_tokenizing_each_try_fits():
    # fit_context counts a drop's prompt from the template's pieces, tokenized once, where it tokenized the whole
    # prompt again after each drop (2,000 turns: 31.3 s, now 0.05 s; hunt 44-b B6). The same prompt, kept messages
    # and count on random conversations: system messages anywhere, answers first, questions in a row, contents that
    # merge across the template's markers under GPT-2's BPE.
    fits_as_retokenizing_each_try(seed=0, words_per_message=6, largest_block=120, largest_room=40)


def fits_as_retokenizing_each_try(seed: int, words_per_message: int, largest_block: int, largest_room: int) -> None:
    """fit_context against fit_context_by_retokenizing on 300 random conversations for each tokenizer."""
    import random

    rng = random.Random(seed)
    words = ["hi", " the", "\n", "  ", "é", "Assistant:", "User:\n", "<|endoftext|>", "ok.", "\n\n", "xxxxx", "日本"]
    for tokenizer in (GPT2, BYTE):
        for _ in range(300):
            messages = [{"role": rng.choice(["system", "user", "user", "assistant", "assistant"]),
                         "content": "".join(rng.choice(words) for _ in range(rng.randint(0, words_per_message)))}
                        for _ in range(rng.randint(1, 12))]
            block_size, room = rng.randint(4, largest_block), rng.randint(0, largest_room)
            assert (fit_context(tokenizer, messages, block_size, room)
                    == fit_context_by_retokenizing(tokenizer, messages, block_size, room)), (messages, block_size, room)


def test_pieces_counted_only_up_to_one_token_past_the_context_fit_as_counted_whole(monkeypatch):
    # fit_context counts a long piece from near its end, only up to block_size + 1 tokens (hunt 50-f F1): every piece
    # so counted here (LONG_TEXT_CHARS 0), the same turns are kept as counting each try's prompt whole
    import gpt.chat

    monkeypatch.setattr(gpt.chat, "LONG_TEXT_CHARS", 0)
    fits_as_retokenizing_each_try(seed=3, words_per_message=12, largest_block=60, largest_room=20)


def test_a_long_conversation_is_tokenized_a_bounded_number_of_times(monkeypatch):
    # (what made 2,000 turns take 45.5 s: each of its ~2,000 drops tokenized all that was left; hunt 44-b B6)
    messages = [m for i in range(2000) for m in (user(f"question {i} about things"), assistant(f"answer {i}"))]
    messages.append(user("and the last?"))
    calls = []
    real = type(GPT2).encode_numpy
    monkeypatch.setattr(type(GPT2), "encode_numpy", lambda self, text: calls.append(text) or real(self, text))
    kept, dropped = fit_context(GPT2, messages, block_size=1024, room=256)
    assert len(messages) < len(calls) < 3 * len(messages)  # each piece once, and each drop's head
    assert len(prompt_ids(GPT2, kept)) + 256 <= 1024 < len(prompt_ids(GPT2, messages[2 * dropped - 2:])) + 256
    assert kept == messages[2 * dropped:]


def test_questions_with_no_answer_between_are_fitted_as_tokenizing_each_try_would(monkeypatch):
    # With no answer left to split the prompt at, each drop tokenized all that was left: 2,000 questions in a row
    # took 11.4 s (quadratic; hunt 48-b B1). The first try that fits is now searched by halves: the same prompt,
    # kept messages and count as one drop at a time, and a bounded number of tokenizer calls.
    import random

    rng = random.Random(1)
    words = ["hi", " the", "\n", "  ", "é", "Assistant:", "User:\n", "System:", "<|endoftext|>", "\n\n", "日本", " "]
    for tokenizer in (GPT2, BYTE, get_tokenizer("shakespeare-bpe")):
        for _ in range(200):
            messages = [{"role": rng.choice(["system", "user", "user", "user"]),
                         "content": "".join(rng.choice(words) for _ in range(rng.randint(0, 6)))}
                        for _ in range(rng.randint(1, 14))]
            if rng.random() < 0.5:  # answers before them, which go first
                messages[:0] = [user("an older question"), assistant("its answer")]
            block_size, room = rng.randint(4, 120), rng.randint(0, 40)
            assert (fit_context(tokenizer, messages, block_size, room)
                    == fit_context_by_retokenizing(tokenizer, messages, block_size, room)), (messages, block_size, room)
    messages = [user(f"question number {i} about the weather?") for i in range(2000)]
    calls = []
    real = type(GPT2).encode_numpy
    monkeypatch.setattr(type(GPT2), "encode_numpy", lambda self, text: calls.append(text) or real(self, text))
    kept, dropped = fit_context(GPT2, messages, block_size=1024, room=256)
    assert len(calls) < 40  # log2 of the 2,000 tries, and a few more (it was 1,941: one per drop)
    assert len(prompt_ids(GPT2, kept)) + 256 <= 1024 < len(prompt_ids(GPT2, messages[dropped - 1:])) + 256
    assert kept == messages[dropped:]


def test_the_answers_room_is_at_most_half_the_context(monkeypatch):
    # sample.py's default --max_new_tokens=500 asked for more room than a 128-token model has: every
    # earlier turn was dropped, and --chat remembered nothing (the chat tests stub Answerer.answer: hunt 32-b CH4)
    import gpt.chat

    asked = []
    monkeypatch.setattr(gpt.chat, "generate_samples", lambda model, tokenizer, ids, *args, **kwargs: asked.append(ids))
    model = GPT(GPTConfig(vocab_size=257, block_size=128, n_layer=1, n_head=2, n_embd=16))
    history = [user("hi"), assistant("hello"), user("and?")]
    assert len(prompt_ids(BYTE, history)) <= 64
    _, kept, dropped = Answerer(model, BYTE, max_new_tokens=500).answer(history)
    assert (kept, dropped) == (history, 0) and asked == [prompt_ids(BYTE, history)]
    longer = [user("x" * 40), assistant("y" * 40), *history]  # past the 64 tokens left for it: its oldest turn goes
    _, kept, dropped = Answerer(model, BYTE, max_new_tokens=500).answer(longer)
    assert (kept, dropped) == (history, 1)


def test_plain_chat_says_once_that_the_conversation_outgrew_the_context(monkeypatch):
    # it said nothing: with the README's example model every question was asked alone, the turn before
    # it dropped, while the README said "remembered" (hunt 42-e E2); --json counts dropped_turns instead
    import io

    import gpt.chat

    monkeypatch.setattr(gpt.chat, "generate_samples",
                        lambda model, tokenizer, ids, *args, **kwargs: [Sample(0, "y" * 20, 21, "eot", 0.1)])
    model = GPT(GPTConfig(vocab_size=257, block_size=128, n_layer=1, n_head=2, n_embd=16))
    warned, out = [], io.StringIO()
    answerer = Answerer(model, BYTE, max_new_tokens=500, warn=warned.append)
    errors, _ = chat(answerer, ["x" * 20 + "\n", "hello\n", "x" * 20 + "\n", "again\n"], out)
    assert errors == 0 and out.getvalue() == ("y" * 20 + "\n") * 4  # stdout holds the answers alone
    assert warned == ["the conversation outgrew the model's context of 128 tokens, 64 of them kept free for the "
                      "answer: its oldest turn was dropped, which the model no longer sees, and older turns go as "
                      "it grows (said once; a --max_new_tokens below 64 keeps more of it, /reset starts afresh)"]
    # the way on is exact: "a smaller --max_new_tokens" was followed with 100, and the same turns went, the room
    # being at most half the context (hunt 47-c C3)
    said = warned[:]
    warned.clear()
    chat(Answerer(model, BYTE, max_new_tokens=100, warn=warned.append),
         ["x" * 20 + "\n", "hello\n", "x" * 20 + "\n", "again\n"], io.StringIO())
    assert warned == said
    warned.clear()  # room for the conversation: nothing dropped, nothing said
    chat(Answerer(model, BYTE, max_new_tokens=5, warn=warned.append), ["x" * 20 + "\n", "hello\n"], io.StringIO())
    assert warned == []


class Recorder(Answerer):
    """An Answerer that records what it was asked and answers with the number of the question."""

    def __init__(self):
        self.asked, self.generator = [], None  # (Answerer's attributes that chat() reads)

    def answer(self, messages, num_samples=1, on_text=None, where=""):
        self.asked.append(list(messages))
        return [Sample(0, f"answer {len(self.asked)}", 3, "eot", 0.1)], messages, 0


def test_a_streamed_answer_stopped_by_a_signal_still_ends_its_line():
    # plain sampling ended its streamed line in a finally; --chat did not (hunt 30-e F3)
    import io

    class Interrupted(Recorder):
        def answer(self, messages, num_samples=1, on_text=None, where=""):
            on_text(0, "half an ans")
            raise KeyboardInterrupt

    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        chat(Interrupted(), ["who?\n"], out, stream=True)
    assert out.getvalue() == "half an ans\n"
    out = io.StringIO()  # --instruction's streamed answer too: its line was left open
    with pytest.raises(KeyboardInterrupt):
        answer_instruction(Interrupted(), "who?", 1, out, stream=True)
    assert out.getvalue() == "half an ans\n"

    class InterruptedOnce(Recorder):  # at a terminal's prompt: Ctrl-C stops the first answer, the session goes on
        def answer(self, messages, num_samples=1, on_text=None, where=""):
            if not self.asked:
                self.asked.append(list(messages))
                on_text(0, "half an ans")
                raise KeyboardInterrupt
            on_text(0, "whole")
            return super().answer(messages, num_samples, on_text)

    out = io.StringIO()  # its line ended once, not followed by an empty line (hunt 42-f F1: nothing checked it)
    answerer, warned = InterruptedOnce(), []
    answerer.warn = warned.append
    chat(answerer, ["who?\n", "and you?\n"], out, stream=True, prompt=lambda: None)
    assert out.getvalue() == "half an ans\nwhole\n" and len(warned) == 1 and answerer.asked[1] == [user("and you?")]


def test_an_answer_stopped_by_max_new_tokens_is_said_to_be_so():
    # printed alone, "BER" (BERNARDO stopped at --max_new_tokens=2) read as a whole answer: plain
    # sampling counts such samples in its closing line, --json says finish_reason, these said nothing (hunt 42-e E5)
    import io

    class Cut(Recorder):
        max_new_tokens = 2

        def __init__(self, reasons):
            super().__init__()
            self.reasons, self.warned = reasons, []
            self.warn = self.warned.append

        def answer(self, messages, num_samples=1, on_text=None, where=""):
            self.asked.append(list(messages))
            return [Sample(i, "BER", 2, reason, 0.1) for i, reason in enumerate(self.reasons[:num_samples])], messages, 0

    answerer = Cut(["length"])
    answer_instruction(answerer, "Who says: ...?", 1, io.StringIO())
    assert answerer.warned == ["the answer stopped at --max_new_tokens=2, before the model ended it: cut short, perhaps"]
    answerer = Cut(["eot", "length", "length"])
    answer_instruction(answerer, "Who says: ...?", 3, io.StringIO())
    assert answerer.warned == ["2 of 3 answers stopped at --max_new_tokens=2, before the model ended them: cut short, "
                               "perhaps"]
    answerer = Cut(["eot"])
    answer_instruction(answerer, "Who says: ...?", 1, io.StringIO())
    answer_instruction(answerer, "Who says: ...?", 1, io.StringIO(), as_json=True)
    assert answerer.warned == []
    answerer, out = Cut(["length"]), io.StringIO()
    chat(answerer, ["Who says: ...?\n", "and then?\n"], out)
    assert out.getvalue() == "BER\nBER\n" and answerer.warned == [
        "the answer stopped at --max_new_tokens=2, before the model ended it: cut short, perhaps"] * 2
    answerer = Cut(["length"])
    chat(answerer, ['{"prompt": "Who says: ...?"}\n'], io.StringIO(), as_json=True)  # its record says "length"
    assert answerer.warned == []


def test_chat_carries_the_conversation_and_forgets_it_on_reset(capsys):
    answerer = Recorder()
    out = []

    class Out:
        write = out.append

        def flush(self):
            pass

    errors, answers = chat(answerer, ["hello\n", "\n", "and then?\n", "/reset\n", "again\n"], Out())
    assert errors == 0 and "".join(out) == "answer 1\nanswer 2\nanswer 3\n"
    assert answerer.asked == [[user("hello")], [user("hello"), assistant("answer 1"), user("and then?")],
                              [user("again")]]


# ----------------------------------------------------------------------------- sample.py


def tiny_run(out_dir: Path) -> Path:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=257, block_size=64, n_layer=2, n_head=2, n_embd=32)
    save_checkpoint(out_dir, 5, GPT(cfg), state={}, meta={"model_config": cfg.to_dict(), "tokenizer": "byte",
                                                          "vocab_size": 257, "config": {}})
    return out_dir


def greedy_answer(model, tok, text: str, n: int) -> str:
    ids = prompt_ids(tok, [user(text)])
    new = model.eval().generate(torch.tensor([ids]), n, temperature=0, vocab_limit=tok.n_vocab)[0, len(ids):].tolist()
    return tok.decode(new[:new.index(tok.eot_token)] if tok.eot_token in new else new)


def cli(capsys, *args):
    rc = sample.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_instruction_prints_only_the_greedy_answer_to_the_template(capsys, tmp_path):
    from gpt.checkpoint import load_model

    run = tiny_run(tmp_path / "run")
    rc, out, err = cli(capsys, f"--out_dir={run}", "--instruction=Who says: to be?", "--temperature=0",
                       "--max_new_tokens=12", "--device=cpu", "--dtype=float32")
    assert rc == 0, err
    model, _ = load_model(run)
    assert out == greedy_answer(model, BYTE, "Who says: to be?", 12) + "\n"
    rc, out, _ = cli(capsys, f"--out_dir={run}", "--instruction=Who says: to be?", "--num_samples=2",
                     "--max_new_tokens=12", "--device=cpu", "--json")
    assert rc == 0 and [json.loads(line)["prompt"] for line in out.splitlines()] == ["Who says: to be?"] * 2
    assert list(json.loads(out.splitlines()[0])) == ["index", "prompt", "text", "tokens", "finish_reason",
                                                     "tokens_per_s", "seconds"]  # sample.py --json's


def test_instruction_works_with_hugging_face_and_lora_models(capsys, tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = tmp_path / "hf"
    transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=50257, n_positions=64, n_embd=16, n_layer=2,
                                                         n_head=2)).save_pretrained(hf)
    args = ("--instruction=Hello there", "--temperature=0", "--max_new_tokens=8", "--device=cpu", "--dtype=float32")
    rc, out, err = cli(capsys, f"--init_from={hf}", *args)
    assert rc == 0, err
    assert out == greedy_answer(load_base_model(str(hf)), GPT2, "Hello there", 8) + "\n"

    model = apply_lora(load_base_model(str(hf)), LoRAConfig(rank=2, alpha=8.0))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("lora_B"):
                p.normal_(0, 0.5)
    save_checkpoint(tmp_path / "lora", 3, model, state={},
                    meta={"model_config": model.config.to_dict(), "tokenizer": "gpt2", "vocab_size": 50257,
                          "config": {}, "lora": {"base": str(hf), "config": LoRAConfig(rank=2, alpha=8.0).to_dict()}})
    rc, lora_out, err = cli(capsys, f"--out_dir={tmp_path / 'lora'}", *args)
    assert rc == 0, err
    assert lora_out == greedy_answer(model, GPT2, "Hello there", 8) + "\n" != out


def test_ctrl_d_at_the_interactive_prompt_ends_its_line(capsys, tmp_path, monkeypatch):
    # the "> " prompt was left open: the shell's prompt came on its line, "> $ " (hunt 42-e E4)
    import io

    class Terminal:
        buffer = io.BytesIO(b"hi\n")

        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Terminal())
    rc, out, err = cli(capsys, f"--out_dir={tiny_run(tmp_path / 'run')}", "--chat", "--max_new_tokens=2",
                       "--device=cpu")
    assert rc == 0 and out.endswith("\n")  # the answer, on its line
    assert err.count("> ") == 2 and err.endswith("> \n"), err


def test_a_ctrl_c_stopped_answer_not_streamed_starts_its_warning_after_the_terminals_echoed_line(capsys, tmp_path,
                                                                                               monkeypatch):
    # --stream=false (or stdout piped) at a terminal: the terminal echoes "^C" where the answer would have
    # started, and the warning came on its line, "^Cwarning: answer stopped ..." (hunt 42-f, hunt 43-a A4)
    import io
    import sys

    from gpt.chat import Answerer

    class Terminal:
        buffer = io.BytesIO(b"hi\nthere\n")

        def isatty(self):
            return True

    run = tiny_run(tmp_path / "run")
    real_answer, asked = Answerer.answer, []

    def answer(self, messages, *args, **kwargs):
        asked.append(messages)
        if len(asked) == 1:
            raise KeyboardInterrupt  # Ctrl-C during the first answer
        return real_answer(self, messages, *args, **kwargs)

    monkeypatch.setattr(Answerer, "answer", answer)
    monkeypatch.setattr("sys.stdin", Terminal())
    for stderr_is_a_terminal, new_line in ((True, "\n"), (False, "")):
        Terminal.buffer.seek(0)
        asked.clear()
        capsys.readouterr()
        monkeypatch.setattr(sys.stderr, "isatty", lambda: stderr_is_a_terminal)
        rc, out, err = cli(capsys, f"--out_dir={run}", "--chat", "--stream=false", "--max_new_tokens=2",
                           "--device=cpu")
        assert rc == 0 and len(asked) == 2, err
        assert f"\n> {new_line}warning: answer stopped (Ctrl-C): " in err, err  # (a file: no empty line)


def test_a_json_line_gives_the_same_sampled_answer_alone_as_after_other_lines():
    # the lines drew from one random stream: at a temperature above 0 a request's answer depended on how much
    # the lines before it drew, and a line taken out of a file to look at gave another answer (hunt 42-e E3)
    tok = get_tokenizer("byte")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.n_vocab, block_size=64, n_layer=1, n_head=2, n_embd=16)).eval()

    def texts(lines):
        out = []

        class Out:
            write = out.append

            def flush(self):
                pass

        answerer = Answerer(model, tok, 16, generator=torch.Generator().manual_seed(7), temperature=1.5)
        chat(answerer, lines, Out(), as_json=True)
        return [json.loads(line)["text"] for line in "".join(out).splitlines()]

    asked, other = b'{"prompt": "Who says: hi"}\n', b'{"prompt": "Who says: something else entirely"}\n'
    alone = texts([asked])
    assert texts([other, asked])[1] == alone[0] and texts([other, other, asked])[2] == alone[0]
    assert texts([asked, asked]) == alone * 2  # (the same line twice: the same answer, as with one seed)


@pytest.mark.parametrize("stream", [False, True])
def test_ctrl_c_during_an_answer_at_the_prompt_stops_that_answer_not_the_conversation(monkeypatch, stream):
    # Ctrl-C mid-answer ended the whole interactive session, the conversation with it (hunt 42-e E7); now
    # it stops the answer, the question is left out, and the next line is answered with the turns before.
    # Through a pipe (no prompt) and for SIGTERM it still ends the session.
    from gpt.errors import Terminated

    tok = get_tokenizer("byte")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.n_vocab, block_size=256, n_layer=1, n_head=2, n_embd=16)).eval()
    warnings, out, prompts = [], [], []

    class Out:
        write = out.append

        def flush(self):
            pass

    answerer = Answerer(model, tok, 4, warn=warnings.append, temperature=0)
    real_answer, asked = Answerer.answer, []

    def answer(self, messages, *args, **kwargs):
        asked.append([m["content"] for m in messages])
        if len(asked) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the second question is answered
        return real_answer(self, messages, *args, **kwargs)

    monkeypatch.setattr(Answerer, "answer", answer)
    try:
        errors, answers = chat(answerer, [b"one\n", b"two\n", b"three\n"], Out(), stream=stream,
                               prompt=lambda: prompts.append("> "))
    except KeyboardInterrupt:  # (not let through to pytest, which takes it for the user's)
        pytest.fail("Ctrl-C during an answer ended the conversation")
    assert errors == 0 and len(answers) == 2 and len(prompts) == 4  # a prompt before each line and at the end
    assert asked == [["one"], ["one", answers[0].text, "two"], ["one", answers[0].text, "three"]]  # "two" left out
    stopped = ("answer stopped (Ctrl-C): the question is left out of the conversation; Ctrl-C at the prompt, or "
               "Ctrl-D, ends it")
    assert [w for w in warnings if w.startswith("answer stopped")] == [stopped]
    for stop, prompt in ((KeyboardInterrupt, None), (Terminated, lambda: None)):  # a pipe; SIGTERM at a terminal
        asked.clear()
        monkeypatch.setattr(Answerer, "answer", lambda self, *args, **kwargs: (_ for _ in ()).throw(stop()))
        with pytest.raises(stop):
            chat(answerer, [b"one\n", b"two\n"], Out(), stream=stream, prompt=prompt)


def test_a_ctrl_c_at_the_start_of_a_generation_leaves_the_model_able_to_answer(monkeypatch):
    # generate_tokens marked the model as generating, then called self.eval() outside its try: a Ctrl-C landing
    # there left it marked, and the next --chat answer (the session goes on since hunt 42-e E7) was "this model
    # is generating already", a traceback (hunt 42-f F3)
    tok = get_tokenizer("byte")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.n_vocab, block_size=64, n_layer=1, n_head=2, n_embd=16)).eval()
    real_eval, calls = GPT.eval, []

    def eval_(self):
        calls.append(self)
        if len(calls) == 1:
            raise KeyboardInterrupt  # (the user's Ctrl-C, in the first generation's self.eval())
        return real_eval(self)

    monkeypatch.setattr(GPT, "eval", eval_)
    warned = []
    errors, answers = chat(Answerer(model, tok, 4, warn=warned.append, temperature=0), ["one\n", "two\n"],
                           io.StringIO(), prompt=lambda: None)
    assert errors == 0 and len(answers) == 1 and warned[0].startswith("answer stopped (Ctrl-C)")
    assert not model.training  # (as it was)


@pytest.mark.parametrize("args, needle", [
    (["--instruction=hi", "--chat"], "give one of them"),
    (["--instruction=hi", "--start=ROMEO"], "--start is for plain continuation"),
    (["--chat", "--num_samples=2"], "one sample at a time"),
])
def test_conflicting_options_give_one_line_and_status_1(capsys, tmp_path, args, needle):
    rc, out, err = cli(capsys, f"--out_dir={tmp_path}", *args)
    assert rc == 1 and out == ""
    assert err.count("\n") == 1 and needle in err, err


@pytest.mark.parametrize("name", ["byte", "shakespeare-bpe"])
def test_a_line_that_is_not_utf8_is_refused_alone_and_a_lone_surrogate_is_answered(name):
    """A JSON "\\ud800" escape reaches the tokenizer as a lone surrogate: it is text like U+FFFD, not a
    crash that ends the session; a line of invalid bytes gets its error and the next is still answered."""
    tok = get_tokenizer(name)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.n_vocab, block_size=64, n_layer=1, n_head=2, n_embd=16)).eval()
    warnings, out = [], []

    class Out:
        write = out.append

        def flush(self):
            pass

    answerer = Answerer(model, tok, 4, warn=warnings.append, temperature=0)
    lines = [b'{"prompt": "\\ud800"}\n', b"\xff\xfe hi\n", b'{"prompt": "\\ufffd"}\n']
    errors, answers = chat(answerer, lines, Out(), as_json=True)
    records = [json.loads(line) for line in "".join(out).splitlines()]
    assert errors == 1 and [r["line"] for r in records] == [1, 2, 3]
    assert records[1] == {"line": 2, "error": "line 2: not valid UTF-8 (invalid start byte at byte 0)"}
    assert records[0]["text"] == records[2]["text"]  # the lone surrogate is read as U+FFFD
    # the keys in the documented order (gpt/chat.py, README): dropped_turns came before "text" (hunt, session 24)
    assert list(records[0]) == ["line", "text", "tokens", "finish_reason", "dropped_turns", "tokens_per_s", "seconds"]

    out.clear()
    errors, answers = chat(answerer, [b"\xff hi\n", "Who says: hi\n".encode()], Out())  # (b"\xff\xfe" begins UTF-16)
    cut = ["the answer stopped at --max_new_tokens=4, before the model ended it: cut short, perhaps"]  # (hunt 42-e E5)
    assert errors == 1 and warnings == ["line 1: not valid UTF-8 (invalid start byte at byte 0)",
                                        *(cut if answers[0].finish_reason == "length" else [])]
    assert len(answers) == 1 and "".join(out) == answers[0].text + "\n"


def test_a_json_error_record_naming_a_unicode_line_break_is_one_line():
    # an error record quoting a key that holds U+2028 (which JSON leaves as it is) was two lines to Python's
    # str.splitlines(), neither JSON (hunt 51-s S3)
    tok = get_tokenizer("byte")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.n_vocab, block_size=64, n_layer=1, n_head=2, n_embd=16)).eval()
    out = io.StringIO()
    chat(Answerer(model, tok, 4, warn=lambda message: None, temperature=0),
         ['{"promp\u2028t": "hi"}\n', '{"prompt": "hi"}\n'], out, as_json=True)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["line"] for r in records] == [1, 2] and "promp\u2028t" in records[0]["error"]


def test_hostile_json_lines_get_their_error_record_and_the_next_line_is_answered():
    # Deep nesting (RecursionError) and a 5,000-digit integer (ValueError) were tracebacks that ended
    # the session; a null line was "got NoneType" (hunt, session 27)
    tok = get_tokenizer("byte")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.n_vocab, block_size=64, n_layer=1, n_head=2, n_embd=16)).eval()
    out = []

    class Out:
        write = out.append

        def flush(self):
            pass

    answerer = Answerer(model, tok, 4, warn=lambda message: None, temperature=0)
    lines = ["[" * 100_000 + "]" * 100_000 + "\n", '{"prompt": 1' + "0" * 5000 + "}\n", "null\n", "[1]\n",
             '{"prompt": "hi"}\n']
    errors, answers = chat(answerer, lines, Out(), as_json=True)
    records = [json.loads(line) for line in "".join(out).splitlines()]
    assert errors == 4 and len(answers) == 1 and [r["line"] for r in records] == [1, 2, 3, 4, 5]
    assert records[0] == {"line": 1, "error": "line 1: not valid JSON (nested too deeply)"}
    assert records[1] == {"line": 2, "error": "line 2: not valid JSON (Exceeds the limit (4300 digits) for integer "
                                              "string conversion: value has 5001 digits)"}
    assert records[2] == {"line": 3, "error": "line 3: expected a JSON object, got null"}
    assert records[3] == {"line": 4, "error": "line 4: expected a JSON object, got a list"}
    assert records[4]["text"] == answers[0].text


def test_a_json_line_that_fails_at_a_character_says_its_column():
    # a tab written as itself in a string, as hand-made lines have it, was "not valid JSON (Invalid control character
    # at)", and a string never closed "(Unterminated string starting at)", at nothing: data preparation says where
    # since hunt 52-d D8, and chat --json now says it alike (hunt 52-j J2)
    tok = get_tokenizer("byte")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.n_vocab, block_size=64, n_layer=1, n_head=2, n_embd=16)).eval()
    out, warned = io.StringIO(), []
    lines = ['{"prompt": "hi\tthere"}\n', '{"prompt": "hi\n', '{"prompt": "hi" "there"}\n']
    errors, _ = chat(Answerer(model, tok, 4, warn=warned.append, temperature=0), lines, out, as_json=True)
    assert errors == 3 and [json.loads(line)["error"] for line in out.getvalue().splitlines()] == [
        "line 1: not valid JSON (Invalid control character at column 15)",
        "line 2: not valid JSON (Unterminated string starting at column 12)",
        "line 3: not valid JSON (Expecting ',' delimiter)"]  # (a reason that names no place: as it was)


def sampling_answerer(max_new_tokens=8, block_size=64, **kw):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=257, block_size=block_size, n_layer=1, n_head=2, n_embd=16)).eval()
    return Answerer(model, BYTE, max_new_tokens, generator=torch.Generator().manual_seed(0), temperature=1.0, **kw)


@pytest.mark.parametrize("stream", [False, True])
def test_several_answers_print_each_once_and_whole_between_separators(stream):
    # streamed, sample 0 alone is written as it comes, and the rest once they are done: a mutant that
    # streamed every sample into the first line, one that dropped samples 1.. and one without the
    # dashes for two samples all passed (hunt 33-c S18-S20). Expected: the documented format, built
    # from the samples returned
    import io

    from gpt.chat import SEPARATOR, answer_instruction

    out = io.StringIO()
    samples = answer_instruction(sampling_answerer(), "hi", 2, out, stream=stream)
    assert len(samples) == 2 and samples[0].text != samples[1].text
    assert out.getvalue() == "".join(s.text + "\n" + SEPARATOR + "\n" for s in samples)


def test_json_answers_time_themselves():
    # "seconds" held tokens/s in a mutant that passed (hunt 33-c S21)
    import io

    from gpt.chat import answer_instruction

    out = io.StringIO()
    answer_instruction(sampling_answerer(), "hi", 2, out, as_json=True)
    for record in map(json.loads, out.getvalue().splitlines()):
        seconds, tokens = record["seconds"], record["tokens"]
        assert 0 < seconds < 60
        # (seconds are rounded to 0.1 ms, tokens/s to 0.01: the quotient within those roundings)
        assert tokens / (seconds + 5e-5) - 0.005 <= record["tokens_per_s"] <= tokens / max(seconds - 5e-5, 1e-9) + 0.005


def test_a_message_longer_than_the_context_keeps_its_last_block_size_tokens(monkeypatch):
    # as sample.py keeps a prompt's: a mutant that kept block_size - room passed (hunt 33-c S22). By
    # hand: 80 x's are 100 tokens in the template; the context is 64
    import gpt.chat

    prompts, warned = [], []
    generate = gpt.chat.generate_samples
    monkeypatch.setattr(gpt.chat, "generate_samples", lambda model, tok, ids, *a, **k: (prompts.append(ids),
                                                                                        generate(model, tok, ids, *a, **k))[1])
    messages = [user("x" * 80)]
    assert len(prompt_ids(BYTE, messages)) == 100
    sampling_answerer(max_new_tokens=30, warn=warned.append).answer(messages)
    assert prompts == [prompt_ids(BYTE, messages)[-64:]]
    assert warned == ["the message is 100 tokens in the template, longer than the model's context of 64: its first 36 "
                      "tokens were dropped"]
    # and no past-context note after it: it said "(--max_new_tokens=1 or fewer keeps it in view)" of the message's
    # beginning, which no --max_new_tokens brings back (hunt 46-d D2)
    warned.clear()
    chat(sampling_answerer(max_new_tokens=30, warn=warned.append), ["x" * 80 + "\n"], io.StringIO())
    assert warned[0].startswith("the message is 100 tokens") and not [w for w in warned if "ran past" in w], warned


@pytest.mark.parametrize("name", ["gpt2", "shakespeare-bpe"])
def test_a_long_message_is_tokenized_from_near_its_end_into_the_prompt_tokenizing_it_whole_gives(monkeypatch, name):
    # A 50 MB --instruction=FILE: was tokenized whole three times (fit_context's count, its try, the prompt) to keep
    # the last 32 tokens: 28 s and 1.8 GB on a GPT-2 run (3.3 s and 0.75 GB now; hunt 50-f F1). A message of more
    # than 100,000 characters is now counted and tokenized from near its end (Tokenizer.encode_last): the same
    # prompt, turns kept and dropped as tokenizing it whole; the warning gives its characters, not its tokens.
    import gpt.chat
    import gpt.tokenizer

    tok = get_tokenizer(name)
    text = "".join(f"{i} To be, or not to be:\n  that is the question.\n\n" for i in range(5000))
    assert len(text) == 253_890
    system = {"role": "system", "content": "Be brief."}
    newest_long = [system, user("q1"), assistant("a1"), user(text)]
    older_long = [system, user(text), assistant("a1"), user("and now?")]
    expected = {id(newest_long): (prompt_ids(tok, [system, user(text)])[-64:], [system, user(text)], 1),
                id(older_long): (prompt_ids(tok, [system, user("and now?")]), [system, user("and now?")], 1)}
    tokenized, prompts, warned = [], [], []
    for method in ("encode", "encode_numpy"):
        real = getattr(gpt.tokenizer.BPETokenizer, method)
        monkeypatch.setattr(gpt.tokenizer.BPETokenizer, method,
                            lambda self, t, real=real: tokenized.append(len(t)) or real(self, t))
    monkeypatch.setattr(gpt.chat, "generate_samples", lambda model, tokenizer, ids, *a, **k: prompts.append(ids) or
                        [Sample(0, "ok", 1, "eot", 1.0)])
    model = GPT(GPTConfig(vocab_size=tok.n_vocab, block_size=64, n_layer=1, n_head=2, n_embd=16)).eval()
    answerer = Answerer(model, tok, 8, warn=warned.append)
    for messages in (newest_long, older_long):
        prompts.clear()
        _, kept, dropped = answerer.answer(messages)
        assert (prompts[0], kept, dropped) == expected[id(messages)]
    assert tokenized and max(tokenized) < len(text) // 2
    assert warned == [f"the message ({len(text) + 9:,} characters with the system messages) is longer in the template "
                      "than the model's context of 64: all but its last 64 tokens were dropped"]

def test_the_last_ids_of_the_prompt_taken_piece_by_piece_are_those_of_the_whole_prompt():
    # (Answerer.answer's prompt: last_prompt_ids, where it cropped prompt_ids; hunt 50-f F1)
    import random

    from gpt.instruct import last_prompt_ids

    rng = random.Random(2)
    words = ["hi", " the", "\n", "  ", "é", "Assistant:", "User:\n", "<|endoftext|>", "\n\n", "xxxxx", "日本", " "]
    for tokenizer in (GPT2, BYTE, get_tokenizer("shakespeare-bpe")):
        for _ in range(200):
            messages = [{"role": rng.choice(["system", "user", "assistant"]),
                         "content": "".join(rng.choice(words) for _ in range(rng.randint(0, 8)))}
                        for _ in range(rng.randint(1, 8))]
            n = rng.randint(0, 80)
            ids = prompt_ids(tokenizer, messages)
            assert last_prompt_ids(tokenizer, messages, n) == (ids[max(0, len(ids) - n):], max(0, len(ids) - n))

def test_a_json_request_cut_to_the_context_is_named_by_its_line():
    # --chat --json answers each line apart: the warnings of a long file's lines did not say which (hunt 50-f F4)
    warned = []
    lines = ['{"prompt": "hi"}\n', json.dumps({"prompt": "x" * 80}) + "\n"]
    chat(sampling_answerer(max_new_tokens=100, warn=warned.append), lines, io.StringIO(), as_json=True)
    assert warned[0].startswith("line 1: the answer ran past the model's context of 64 tokens, where the window slides")
    assert warned[1:] == ["line 2: the message is 100 tokens in the template, longer than the model's context of 64: its "
                          "first 36 tokens were dropped"]

def test_a_short_message_after_system_messages_too_long_for_the_context_is_not_said_to_be_long():
    # A request of "hi" after a long system message: the prompt's first tokens dropped are the system message's, the
    # message is whole. The warning said "the message is 100 tokens in the template ... its first 36 tokens were
    # dropped" of a message of 2 characters (hunt 52-g G2)
    warned = []
    system = {"role": "system", "content": "x" * 68}
    messages = [system, user("hi")]
    assert len(prompt_ids(BYTE, messages)) == 100  # eot, System:\n, 68 x's, \n\n: 79; User:\nhi\n\nAssistant:\n: 21
    _, kept, _ = sampling_answerer(max_new_tokens=30, warn=warned.append).answer(messages)
    assert kept == messages
    assert warned == ["the message with the system messages before it is 100 tokens in the template, longer than the "
                      "model's context of 64: their first 36 tokens were dropped"]


def test_a_message_one_token_longer_than_the_context_says_it_in_the_singular():
    # "its first 1 tokens were dropped" (hunt 44-b B5); 80 x's are 100 tokens in the template, so 45 are 65
    warned = []
    messages = [user("x" * 45)]
    assert len(prompt_ids(BYTE, messages)) == 65
    sampling_answerer(max_new_tokens=1, warn=warned.append).answer(messages)
    assert warned == ["the message is 65 tokens in the template, longer than the model's context of 64: its first "
                      "token was dropped"]


@pytest.mark.parametrize("encoding, said", [("utf-16", "its byte order mark"),
                                             ("utf-16-le", "little-endian, without a byte order mark"),
                                             ("utf-32-be", "big-endian, without a byte order mark")])
def test_a_conversation_in_utf16_names_the_encoding_and_answers_none_of_it(encoding, said):
    # PowerShell 5's `Get-Content q.txt | python sample.py --chat` pipes UTF-16: its first line was "not valid UTF-8
    # (invalid start byte at byte 0)" (hunt 44-b B4). The whole stream is UTF-16, not its first line: each line after
    # it, a NUL before each letter ("\0A\0n\0d..."), is valid UTF-8 and was answered, NULs and all (hunt 44-h H1)
    warned, out = [], io.StringIO()
    lines = io.BytesIO("Who says: hi\nAnd then?\n".encode(encoding))
    with pytest.raises(UsageError) as refused:
        chat(sampling_answerer(max_new_tokens=1, warn=warned.append), lines, out)
    assert str(refused.value) == f"line 1: {encoding[:6].upper()} text ({said}), not UTF-8: save it as UTF-8"
    assert warned == [] and out.getvalue() == ""


def test_an_answer_that_runs_past_the_context_says_so_once():
    # max_new_tokens above the room kept for the answer: the window slid, and the model no longer saw the question,
    # without a word (hunt 44-b B1). The context is 64, the template of "hi" is 22 tokens: 43 answer tokens see it.
    # A model that never ends: end-of-text is not among the ids it may draw
    warned, out = [], io.StringIO()
    answerer = sampling_answerer(max_new_tokens=50, warn=warned.append)
    answerer.model.transformer.wte.weight.data[BYTE.eot_token] = -1e3
    assert len(prompt_ids(BYTE, [user("hi")])) == 22
    errors, answers = chat(answerer, ["hi\n", "/reset\n", "hi\n"], out)
    assert errors == 0 and [(s.tokens, s.finish_reason, s.in_view) for s in answers] == [(50, "length", 43)] * 2
    note = ("the answer ran past the model's context of 64 tokens, where the window slides: its tokens after the first "
            "43 were drawn without the conversation's beginning (--max_new_tokens=43 or fewer keeps it in view)")
    assert warned.count(note) == 1 and len(warned) == 3  # with the cut answers' two
    warned.clear()
    answer_instruction(answerer, "hi", 2, io.StringIO())
    assert warned[-1] == note.replace("the answer", "all 2 answers").replace("its tokens", "their tokens")
    warned.clear()
    chat(sampling_answerer(max_new_tokens=43, warn=warned.append), ["hi\n"], io.StringIO())
    assert not [w for w in warned if "ran past" in w]
