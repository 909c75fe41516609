"""Answering with a model fine-tuned on instruction data: sample.py --instruction and --chat.
The template itself is gpt/instruct.py's, the one training used.

The context: the conversation is put in the template and must leave room for the answer
(max_new_tokens, at most half the model's block_size). When it does not fit, the oldest turns
go first (a user message together with the answers that follow it); system messages and the
newest message stay. Plain --chat says so on stderr the first time (--json: "dropped_turns").
Should the newest message alone still be too long, the prompt keeps its last block_size tokens,
as sample.py does with any prompt, with a warning (a message of over 100,000 characters is tokenized
from near its end: the same tokens, not counted): the system messages and the "User:" marker go with
the message's beginning, and the answer starts where the window
slides (hunt 34-e E6: this said "its beginning is dropped", as if the rest stayed). An answer longer than
the room left for it (max_new_tokens above half the block_size) slides the window too: said once on stderr.

--chat reads stdin. In plain mode each non-empty line is the next user message and the answer
follows on stdout; the conversation is remembered ("/reset" on a line of its own forgets it).
With --json each line is one JSON object answered on its own (its random draws too, from --seed),
whole conversations included:
{"prompt": ...}, {"instruction": ..., "input": ...} or {"messages": [...]} (a response, an
output or a final assistant message in it is left out, so a training file can be fed back);
each gets one JSON line back: {"line", "text", "tokens", "finish_reason", "dropped_turns",
"tokens_per_s", "seconds"}, or {"line", "error"} for a line that is not such a record (the
others are still answered, and the exit status is then 1). A line that is not valid UTF-8 gets
that error record, or in plain mode a warning on stderr; it too makes the exit status 1."""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
from typing import IO, Callable, ContextManager, Iterable, Iterator

import torch

from gpt.errors import Terminated, UsageError, WideText
from gpt.files import decode_utf8
from gpt.generation import Sample, generate_samples, json_line, past_context_note
from gpt.instruct import RecordError, Segments, json_error_reason, last_prompt_ids, parse_json, segments, to_messages
from gpt.tokenizer import LONG_TEXT_CHARS

SEPARATOR = "---------------"  # sample.py's, between samples


def fit_context(tokenizer, messages: list[dict], block_size: int, room: int) -> tuple[list[dict], int]:
    """(the messages kept, how many turns were dropped) such that their prompt (prompt_ids) + room <= block_size
    where dropping the oldest turns can achieve it.

    The oldest turn goes first (a message that is not a system message, with the answers that follow it), one at a
    time, until the prompt fits. The prompt after each drop is not tokenized again: the template (gpt/instruct.py)
    tokenizes the context before each answer and the answer apart, so a drop changes the pieces up to the first
    answer left, and the pieces after it are the full conversation's, tokenized once. Fitting a conversation of 2,000
    turns took 31.3 s, what was left of it tokenized again after each drop (0.05 s now; hunt 44-b B6). Where no
    answer is left (questions in a row), the first try that fits is searched by halves (hunt 48-b B1).
    A piece of more than LONG_TEXT_CHARS characters is counted from near its end, up to block_size + 1 tokens, which
    no context holds, so each try fits or not as it would counted whole (a 50 MB --instruction was tokenized whole,
    three times, to keep 32 tokens of it: hunt 50-f F1)."""
    messages, n = list(messages), len(messages)
    cap, counted = block_size + 1, {}  # counted: a long text's count, once (a line with no line start in it
    # is tokenized whole, the tries and the heads of the answers meet the same text again)

    def count(text: str) -> int:
        if len(text) <= LONG_TEXT_CHARS:
            return len(tokenizer.encode_numpy(text))
        if text not in counted:
            counted[text] = len(tokenizer.encode_last(text, cap)[0])
        return counted[text]

    def length(pieces: Segments) -> int:  # len(encode(tokenizer, pieces)[0]), or cap or more where that is cap or more
        return sum(count(text) + target for text, target in pieces)

    pieces = segments(messages, generation_prompt=True)  # (context, answer) pieces per answer, then what follows
    after = list(itertools.accumulate(reversed([length((piece,)) for piece in pieces]),
                                      initial=0))[::-1]  # after[k]: the tokens of pieces k and later
    answers = [i for i, m in enumerate(messages) if m["role"] == "assistant"]

    def prompt_length(front: list[dict], start: int) -> int:  # len(prompt_ids(front + messages[start:])), in pieces
        j = bisect.bisect_left(answers, start)  # the first answer kept
        if j == len(answers):
            return 1 + length(segments(front + messages[start:], generation_prompt=True))
        head = length(segments(front + messages[start:answers[j] + 1]))
        return 1 + head + after[2 * j + 2]  # end-of-text, the head's pieces, the pieces after answer j

    def drop_oldest(start: int) -> tuple[int, int] | None:  # (the oldest turn's first message, the next start)
        oldest = next((i for i in range(start, n - 1) if messages[i]["role"] != "system"), None)
        if oldest is None:
            return None
        end = oldest + 1
        while end < n - 1 and messages[end]["role"] == "assistant":  # its answers go with it
            end += 1
        return oldest, end

    front, start, dropped = [], 0, 0  # kept: the system messages before `start`, and all from it on
    while prompt_length(front, start) + room > block_size:
        if bisect.bisect_left(answers, start) == len(answers):
            # No answer left to split the prompt into pieces: each try tokenizes all that is left, and a conversation
            # of user messages alone took quadratic time (2,000 turns: 11.4 s; hunt 48-b B1). So the first try that
            # fits is searched by halves among the tries left. Exact because a drop never lengthens the prompt: it
            # takes out a whole "User:" turn, which starts after the "\n\n" ending the turn before, and GPT-2's
            # pre-tokenizing regex (the byte tokenizer's, GPT-2's and shakespeare-bpe's chunks) always cuts there,
            # so the tokens around it stay as they were. (A test checks it against tokenizing each try.)
            starts = [start]
            while (drop := drop_oldest(starts[-1])) is not None:
                starts.append(drop[1])

            def front_at(k: int) -> list[dict]:  # the system messages kept by try k: all of them up to its start
                return front + [m for m in messages[start:starts[k]] if m["role"] == "system"]

            fits = bisect.bisect_left(range(1, len(starts)), True,
                                      key=lambda k: prompt_length(front_at(k), starts[k]) + room <= block_size)
            drops = min(1 + fits, len(starts) - 1)  # none fits: every turn that can go has gone, as one at a time
            front, start, dropped = front_at(drops), starts[drops], dropped + drops
            break
        drop = drop_oldest(start)
        if drop is None:
            break
        dropped += 1  # a turn, however many messages (it counted the messages: hunt 30-d F2)
        front, start = front + messages[start:drop[0]], drop[1]
    return front + messages[start:], dropped


class Answerer:
    """A model, its tokenizer and the sampling settings: answer(messages) -> samples."""

    def __init__(self, model, tokenizer, max_new_tokens: int, *, generator: torch.Generator | None = None,
                 decode_step: Callable | None = None, warn: Callable[[str], None] | None = None, **sampling):
        self.model, self.tokenizer, self.max_new_tokens = model, tokenizer, max_new_tokens
        self.generator, self.decode_step, self.sampling = generator, decode_step, sampling
        self.warn = warn or (lambda message: None)
        self.stopped: Callable[[], bool] | None = None  # generate_samples' (sample.py's Ctrl-C: see kept_when_interrupted)

    @property
    def room(self) -> int:
        """Tokens of the context kept free for the answer: max_new_tokens, at most half the model's."""
        return min(self.max_new_tokens, self.model.config.block_size // 2)

    def dropped_warning(self, dropped: int) -> str:
        """Plain --chat's word, the first time the conversation outgrows the context (--json's records
        count dropped_turns). It said nothing: with the README's example model (context 128, 64 kept
        for the answer at the default --max_new_tokens) every question was asked alone, the turns
        before it dropped, while the README said "remembered" (hunt 42-e E2). The way on names the
        --max_new_tokens that keeps more: "a smaller one" was followed with 100 where 64 were kept free
        (the room is at most half the context), and the same turns went (hunt 47-c C3)."""
        turns = "turn was" if dropped == 1 else f"{dropped} turns were"
        fewer = f"a --max_new_tokens below {self.room} keeps more of it, " if self.room > 1 else ""
        return (f"the conversation outgrew the model's context of {self.model.config.block_size} tokens, {self.room} "
                f"of them kept free for the answer: its oldest {turns} dropped, which the model no longer sees, "
                f"and older turns go as it grows (said once; {fewer}/reset starts afresh)")

    def cut_warning(self, cut: int, of: int = 1) -> str:
        """Plain --instruction's and --chat's word for answers that max_new_tokens stopped: printed
        alone, "BER" for BERNARDO read as a whole answer (hunt 42-e E5); --json says finish_reason,
        plain sampling counts them in its closing line."""
        which = "the answer" if of == 1 else f"{cut} of {of} answers" if cut < of else f"all {of} answers"
        return (f"{which} stopped at --max_new_tokens={self.max_new_tokens}, before the model ended "
                f"{'it' if of == 1 else 'them'}: cut short, perhaps")

    def past_context_warning(self, samples: list[Sample]) -> str | None:
        """The word for answers that ran past the context (max_new_tokens above the room kept for them, or a
        message too long for it), said once: the model no longer saw the conversation's beginning (hunt 44-b B1)."""
        if not any(s.past_context for s in samples):
            return None
        return past_context_note(samples, self.model.config.block_size, what="answer", prompt="the conversation")

    def answer(self, messages: list[dict], num_samples: int = 1, on_text: Callable[[int, str], None] | None = None,
               where: str = "") -> tuple[list[Sample], list[dict], int]:
        """(the answers, the messages that fitted the context, how many were dropped). where: what the warning
        begins with ("line 3: " for --chat --json's, whose lines are answered apart)."""
        block_size = self.model.config.block_size
        kept, dropped = fit_context(self.tokenizer, messages, block_size, self.room)
        ids, cropped = last_prompt_ids(self.tokenizer, kept, block_size)
        if cropped is None:  # (a long message, tokenized from near its end: not counted; every turn that can go
            # went, what is kept is the system messages, a long one perhaps, and the message)
            chars = sum(len(m["content"]) for m in kept)
            self.warn(f"{where}the message ({chars:,} characters{' with the system messages' if len(kept) > 1 else ''}) "
                      f"is longer in the template than the model's context of {block_size}: all but its last "
                      f"{block_size} tokens were dropped")
        elif cropped:
            # Kept beside it, the system messages stand first and go first: a message of 2 characters after a long
            # system message was "the message is 77 tokens in the template ...: its first 45 tokens were dropped",
            # where the message was whole and the system message cut (hunt 52-g G2)
            what, its = ("the message with the system messages before it", "their") if len(kept) > 1 else \
                ("the message", "its")
            first = f"{its} first {cropped} tokens were" if cropped > 1 else f"{its} first token was"  # (hunt 44-b B5)
            self.warn(f"{where}{what} is {len(ids) + cropped} tokens in the template, longer than the "
                      f"model's context of {block_size}: {first} dropped")
        samples = generate_samples(self.model, self.tokenizer, ids, num_samples, self.max_new_tokens,
                                   generator=self.generator, decode_step=self.decode_step, on_text=on_text,
                                   stopped=self.stopped, **self.sampling)
        if cropped != 0:  # the warning above said the beginning went, which no --max_new_tokens brings back: no past-context
            for s in samples:  # note, whose "(--max_new_tokens=1 or fewer keeps it in view)" said one would (hunt 46-d D2)
                s.in_view = None
        return samples, kept, dropped


def _streamer(out: IO[str]) -> Callable[[int, str], None]:
    def on_text(i: int, piece: str) -> None:
        if i == 0:
            out.write(piece)
            out.flush()
    return on_text


def _record(s: Sample, dropped_turns: int | None = None, **first) -> str:
    # The keys in the order documented (module docstring, README): `first` (index and prompt, or
    # line), the sample, dropped_turns after finish_reason, then the timings. dropped_turns came
    # second, before "text" (hunt, session 24).
    record = {**first, "text": s.text, "tokens": s.tokens, "finish_reason": s.finish_reason}
    if dropped_turns is not None:
        record["dropped_turns"] = dropped_turns
    record.update(tokens_per_s=round(s.tokens_per_s, 2), seconds=round(s.seconds, 4))
    return json_line(record)


def answer_instruction(answerer: Answerer, instruction: str, num_samples: int, out: IO[str], *,
                       as_json: bool = False, stream: bool = False) -> list[Sample]:
    """sample.py --instruction: only the answers are printed (several separated by dashes); with
    as_json one object per answer, sample.py's fields with "prompt" holding the instruction."""
    try:
        samples, _, _ = answerer.answer([{"role": "user", "content": instruction}], num_samples,
                                        _streamer(out) if stream else None)
    except BaseException:  # a streamed answer stopped by Ctrl-C or SIGTERM still ends its line, as --chat's
        if stream:
            out.write("\n")
        raise
    for s in samples:
        if as_json:
            out.write(_record(s, index=s.index, prompt=instruction))
        else:
            out.write(("" if stream and s.index == 0 else s.text) + "\n")
            if num_samples > 1:
                out.write(SEPARATOR + "\n")
    out.flush()
    if not as_json and (cut := sum(s.finish_reason == "length" for s in samples)):
        answerer.warn(answerer.cut_warning(cut, len(samples)))
    if note := answerer.past_context_warning(samples):
        answerer.warn(note)
    return samples


def _read_or_say(lines: Iterable[str | bytes]) -> Iterator[str | bytes]:
    """The lines, with a read that fails (an I/O error, a terminal hung up) as one line (hunt 33-a F16)."""
    try:
        yield from lines
    except OSError as e:
        raise UsageError(f"cannot read the next --chat line from stdin: {e.strerror or e}") from None


def chat(answerer: Answerer, lines: Iterable[str | bytes], out: IO[str], *, as_json: bool = False,
         stream: bool = False, prompt: Callable[[], None] | None = None,
         end_echoed_line: Callable[[], None] | None = None,
         answering: Callable[[], ContextManager[Callable[[], bool] | None]] | None = None) -> tuple[int, list[Sample]]:
    """sample.py --chat over lines of input (see the module docstring): text, or bytes decoded
    line by line, so that a line of invalid UTF-8 is refused on its own; prompt() is called before
    each line is read (an interactive "> "). There, in plain mode, Ctrl-C during an answer stops that answer,
    not the conversation: the question and what was said of the answer are left out of it, and the prompt
    comes back (a REPL's way; it ended the session, and the conversation with it: hunt 42-e E7). Ctrl-C at
    the prompt, SIGTERM, Ctrl-C where no prompt is shown (a pipe) and Ctrl-C during a --json answer (no
    conversation to keep; this said "there" of --json too: hunt 42-f F2) end it as before. Where the answer so
    stopped was not streamed, end_echoed_line() is called before its warning: the terminal echoed "^C" at the
    start of the line the warning would take (sample.py: a new line on stderr where stderr is a terminal).
    A stream in UTF-16 or UTF-32, told by its first line, ends it (WideText): not one line of it is UTF-8.
    answering(): the context of each answer and its output, yielding the answerer's `stopped` (sample.py's
    kept_when_interrupted, for --json and for plain --chat without a prompt: a signal there ends the answer,
    which is written, --json's record "interrupted", and the session ends; the answer under way was lost:
    hunt 49-n N2). Not with a prompt in plain mode, whose Ctrl-C stops one answer (KeyboardInterrupt, above).
    Returns (lines that were not valid requests, answers)."""
    history: list[dict] = []
    errors, answers = 0, []
    # --json: each line's draws start from --seed, so that a line gives the same answer alone as in a file (one
    # stream for the whole input made a line's answer depend on how much the lines before it drew: hunt 42-e E3)
    seed = answerer.generator.initial_seed() if answerer.generator is not None else None
    said_dropped = said_past_context = False

    def refuse(message: str) -> None:  # this line only: the next ones are still answered
        nonlocal errors
        errors += 1
        if as_json:
            out.write(json_line({"line": lineno, "error": message}))
        else:
            answerer.warn(message)

    if prompt:
        prompt()
    for lineno, line in enumerate(_read_or_say(lines), 1):
        try:
            text = (line if isinstance(line, str) else decode_utf8(line, f"line {lineno}", start_of_text=lineno == 1)
                    ).rstrip("\r\n")
        except WideText:  # (the whole stream is UTF-16 or UTF-32: each line after the first, a NUL before each
            raise  # letter, is valid UTF-8 and was answered, NULs and all: hunt 44-h H1)
        except UsageError as e:
            refuse(str(e))
            text = ""  # refused: nothing to answer
        if not text.strip():
            pass
        elif as_json:
            try:
                messages = to_messages(parse_json(text), f"line {lineno}", answered=False)
            except (json.JSONDecodeError, RecordError) as e:
                refuse(f"line {lineno}: not valid JSON ({json_error_reason(e)})" if isinstance(e, json.JSONDecodeError)
                       else str(e))
            else:
                if seed is not None:
                    answerer.generator.manual_seed(seed)
                with (answering or contextlib.nullcontext)() as answerer.stopped:
                    # (its warning names the line: one of a file's thousand lines was cut without saying which:
                    # hunt 50-f F4)
                    [s], _, dropped = answerer.answer(messages, where=f"line {lineno}: ")
                    out.write(_record(s, line=lineno, dropped_turns=dropped))
                answerer.stopped = None
                answers.append(s)
                if not said_past_context and (note := answerer.past_context_warning([s])):
                    out.flush()
                    answerer.warn(f"line {lineno}: {note}")
                    said_past_context = True
        elif text.strip() == "/reset":
            history = []
        else:
            with (answering or contextlib.nullcontext)() as answerer.stopped:
                line_ended = not stream
                try:
                    [s], history, dropped = answerer.answer(history + [{"role": "user", "content": text}],
                                                            on_text=_streamer(out) if stream else None)
                except KeyboardInterrupt as e:
                    if prompt is None or isinstance(e, Terminated):
                        raise
                    if not line_ended:  # (the warning on a line of its own, not after the answer's last word)
                        out.write("\n")
                        line_ended = True
                    elif end_echoed_line:  # (nor after the terminal's "^C": hunt 42-f, hunt 43-a A4)
                        end_echoed_line()
                    out.flush()
                    answerer.warn("answer stopped (Ctrl-C): the question is left out of the conversation; Ctrl-C at "
                                  "the prompt, or Ctrl-D, ends it")
                    prompt()
                    continue
                finally:  # a streamed answer stopped by Ctrl-C or SIGTERM still ends its line (hunt 30-e F3)
                    if not line_ended:
                        out.write("\n")
                if not stream:
                    out.write(s.text + "\n")
                history.append({"role": "assistant", "content": s.text})
                answers.append(s)
                said = [answerer.cut_warning(1)] if s.finish_reason == "length" else []
                if dropped and not said_dropped:
                    said.append(answerer.dropped_warning(dropped))
                    said_dropped = True
                if not said_past_context and (note := answerer.past_context_warning([s])):
                    said.append(note)
                    said_past_context = True
                if said:  # after the answer: on a terminal, under it
                    out.flush()
                    for message in said:
                        answerer.warn(message)
            answerer.stopped = None
        out.flush()
        if prompt:
            prompt()
    return errors, answers
