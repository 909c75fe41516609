"""Instruction and conversation data: the one template shared by training (data/prepare.py,
train.py --data=pairs.jsonl) and answering (sample.py --instruction / --chat), so the two can
never drift apart.

Records (a .jsonl line, an element of a .json list, a .parquet/.csv row, a Hugging Face record):

    {"prompt": P, "response": R}
    {"instruction": I, "input": X, "output": O}            Alpaca; "input" may be missing or empty
    {"messages": [{"role": "system" | "user" | "assistant", "content": C}, ...]}

A record that has the text field (--text_field, default "text") is plain text, as before; only
records without it are read as one of these forms. A missing or empty field is an error that
names the file and line. A conversation needs at least one assistant message and must end with
one (a trailing user turn would teach nothing).

The template: plain-text role markers, each on its own line, and the tokenizer's end-of-text
after every assistant turn. No new token ids, so GPT-2 and our tokenizers work unchanged:

    System:\\n{system}\\n\\n                (for each system message, where it stands)
    User:\\n{user}\\n\\n
    Assistant:\\n{assistant}<|endoftext|>
    User:\\n{user}\\n\\n                    (the next turn follows the end-of-text directly)
    Assistant:\\n{assistant}<|endoftext|>

An Alpaca record's user turn is "{instruction}\\n\\n{input}" (just the instruction when input is
empty); {"prompt", "response"} is one user and one assistant turn.

Masking: only the tokens of assistant turns and the end-of-text that closes each are training
targets; everything else is context (target -1, which the loss ignores). The text between two
assistant turns and each assistant turn are tokenized separately, at exactly the points where
sample.py's prompt ends ("Assistant:\\n") and the answer begins, so training sees the tokens
that generation will produce. The last assistant turn's end-of-text is the document's own.

Answering: the prompt is end-of-text (every document but a shard's first follows one in the
packed training stream), then the conversation so far in the template, then "Assistant:\\n"; the
model writes the answer and stops at end-of-text.

This module needs only numpy (data preparation starts without importing torch).
"""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Iterable

import numpy as np

ROLES = ("system", "user", "assistant")
MARKERS = {"system": "System:\n", "user": "User:\n", "assistant": "Assistant:\n"}
TURN_END = "\n\n"  # after a system or user turn; an assistant turn ends with the end-of-text token
SUPERVISED_FIELDS = ("prompt", "response", "instruction", "output", "messages")

# A conversation in the template: (text, is_response) pieces. An end-of-text token follows
# each response piece. Tuples of plain types, so it pickles cheaply to tokenizer workers.
Segments = tuple[tuple[str, bool], ...]


class RecordError(ValueError):
    """A record that is not one of the forms above; the message names where it is."""


# ----------------------------------------------------------------------------- records -> messages


def json_kind(value) -> str:
    """A JSON value's kind in JSON's words ("null", "a number", "a list"): messages about the
    user's records named Python's types ("got NoneType", "is a int": hunts, sessions 24 and 27)."""
    if value is None:
        return "null"
    if kind := {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
                dict: "an object"}.get(type(value)):
        return kind
    # a .parquet's cells have kinds JSON lacks: a binary column was "is a bytes", a timestamp "is a Timestamp" (pandas'
    # own, which pyarrow gives for nanoseconds, the unit pandas writes: hunt 52-j J3). datetime before date, its base
    for types, kind in (((bytes, bytearray), "binary data"), (decimal.Decimal, "a number"),
                        (datetime.datetime, "a date and time"), (datetime.date, "a date"),
                        (datetime.time, "a time of day"), (datetime.timedelta, "a duration")):
        if isinstance(value, types):
            return kind
    return f"a {type(value).__name__}"


def parse_json(text: str):
    """json.loads of the user's text (a data record, a --chat --json line). Hostile text fails it
    in two more ways than malformed JSON: nesting deeper than Python's recursion limit
    (RecursionError) and an integer longer than int() converts (ValueError: Python's 4,300-digit
    limit). Both are raised as json.JSONDecodeError too, so the caller's one line or error record
    covers them: they were tracebacks that ended a --chat --json session (hunt, session 27)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None
    except ValueError as e:  # "Exceeds the limit (4300 digits) for integer string conversion: ...; use ..."
        raise json.JSONDecodeError(str(e).split(";")[0], text, 0) from None


def json_error_reason(e: json.JSONDecodeError) -> str:
    """json's reason, with its column where the reason ends in "at": a tab or a line break written as itself in a
    string (not \\t, \\n: a record written by hand or by string formatting) was "not valid JSON (Invalid control
    character at)", and a string never closed "(Unterminated string starting at)", at nothing, in data preparation
    (hunt 52-d D8) and in chat --json's error records (hunt 52-j J2)."""
    return f"{e.msg} column {e.colno}" if e.msg.endswith(" at") else e.msg


def is_supervised(record, text_field: str = "text") -> bool:
    """A record in one of the forms above (and without the plain-text field, which wins)."""
    return isinstance(record, dict) and text_field not in record and any(k in record for k in SUPERVISED_FIELDS)


def _text(record: dict, key: str, where: str, *, optional: bool = False) -> str:
    value = record.get(key)
    if value is None and optional:
        return ""
    if key not in record:
        raise RecordError(f"{where}: field {key!r} is missing (the record has: {', '.join(map(str, record))})")
    if not isinstance(value, str):
        raise RecordError(f"{where}: field {key!r} is {json_kind(value)}, not text")
    if not value.strip() and not optional:
        raise RecordError(f"{where}: field {key!r} is empty")
    return value


def to_messages(record, where: str, *, answered: bool = True) -> list[dict]:
    """A record of any of the three forms as [{"role", "content"}, ...].

    answered=True (training data): the response is required and the last message is the
    assistant's. answered=False (a question for sample.py): the response, output, or a final
    assistant message is left out if present (so a training file can be fed back for answers),
    and the last message must be the user's (or a system message)."""
    if not isinstance(record, dict):
        raise RecordError(f"{where}: expected a JSON object, got {json_kind(record)}")
    if "messages" in record:
        messages = _messages(record["messages"], where)
        if not answered and messages[-1]["role"] == "assistant":
            messages = messages[:-1]
    elif "instruction" in record or "output" in record:
        user = _text(record, "instruction", where)
        extra = _text(record, "input", where, optional=True)
        messages = [{"role": "user", "content": f"{user}\n\n{extra}" if extra.strip() else user}]
        if answered:
            messages.append({"role": "assistant", "content": _text(record, "output", where)})
    elif "prompt" in record or "response" in record:
        messages = [{"role": "user", "content": _text(record, "prompt", where)}]
        if answered:
            messages.append({"role": "assistant", "content": _text(record, "response", where)})
    else:
        raise RecordError(f"{where}: expected a record with prompt/response, instruction/input/output or messages "
                          f"(the record has: {', '.join(map(str, record)) or 'no fields'})")
    if answered and messages[-1]["role"] != "assistant":
        raise RecordError(f"{where}: the last message must be the assistant's (a trailing "
                          f"{messages[-1]['role']} turn has nothing to learn from)")
    if not answered and (not messages or messages[-1]["role"] == "assistant"):
        raise RecordError(f"{where}: nothing to answer: give a user message to reply to")
    return messages


def _messages(messages, where: str) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise RecordError(f"{where}: field 'messages' must be a non-empty list of "
                          '{"role": ..., "content": ...} objects')
    out = []
    for i, message in enumerate(messages):
        at = f"{where}: messages[{i}]"
        if not isinstance(message, dict):
            raise RecordError(f"{at}: expected an object with role and content, got {json_kind(message)}")
        role = _text(message, "role", at)
        if role not in ROLES:
            raise RecordError(f"{at}: role {role!r} is not one of {', '.join(ROLES)}")
        out.append({"role": role, "content": _text(message, "content", at)})
    return out


# ----------------------------------------------------------------------------- messages -> template


def segments(messages: Iterable[dict], *, generation_prompt: bool = False) -> Segments:
    """The template as (text, is_response) pieces; with generation_prompt, the context pieces
    end with "Assistant:\\n", ready for the model to answer."""
    pieces: list[tuple[str, bool]] = []
    context = ""
    for message in messages:
        role, content = message["role"], message["content"]
        context += MARKERS[role]
        if role == "assistant":
            pieces += [(context, False), (content, True)]
            context = ""
        else:
            context += content + TURN_END
    if generation_prompt:
        context += MARKERS["assistant"]
    if context:
        pieces.append((context, False))
    return tuple(pieces)


def render(messages: Iterable[dict]) -> str:
    """The template as one string, end-of-text written as <|endoftext|> (for reading, not training)."""
    return "".join(text + ("<|endoftext|>" if target else "") for text, target in segments(messages))


def encode(tokenizer, pieces: Segments) -> tuple[np.ndarray, np.ndarray]:
    """(token ids, target mask) of a conversation: each piece tokenized on its own, an end-of-text
    after each response piece; the mask is 1 on response tokens and their end-of-text."""
    ids, mask = [], []
    eot = np.array([tokenizer.eot_token], dtype=np.uint32)
    for text, target in pieces:
        piece = tokenizer.encode_numpy(text)
        if target:
            piece = np.concatenate([piece, eot])
        ids.append(piece)
        mask.append(np.full(len(piece), target, dtype=np.uint8))
    if not ids:
        return np.zeros(0, np.uint32), np.zeros(0, np.uint8)
    return np.concatenate(ids).astype(np.uint32), np.concatenate(mask)


def response_bytes(pieces: Segments) -> int:
    """UTF-8 bytes of the responses: what bits per byte is counted over for supervised data."""
    return sum(len(text.encode("utf-8", errors="replace")) for text, target in pieces if target)


def prompt_ids(tokenizer, messages: list[dict]) -> list[int]:
    """What the model sees before it answers: end-of-text, the conversation, "Assistant:\\n"."""
    ids, _ = encode(tokenizer, segments(messages, generation_prompt=True))
    return [tokenizer.eot_token, *ids.tolist()]


def last_prompt_ids(tokenizer, messages: list[dict], n: int) -> tuple[list[int], int | None]:
    """prompt_ids(tokenizer, messages)[-n:] and how many ids come before them: None where a long piece was
    tokenized from near its end (tokenizer.encode_last: the same ids), so they were not counted. Each piece of
    the template is tokenized on its own (encode), so the last ids of the prompt are the last ids of its last
    pieces: a 50 MB --instruction was tokenized whole to keep the model's last 32 (hunt 50-f F1)."""
    eot = tokenizer.eot_token
    pieces = [("", [eot])] + [(text, [eot] if target else [])
                              for text, target in segments(messages, generation_prompt=True)]
    kept: list[int] = []  # the last ids, from the last
    before: int | None = 0
    for text, end in reversed(pieces):
        need = max(0, n - len(kept))
        ids, dropped = tokenizer.encode_last(text, max(0, need - len(end)))
        ids = ids + end
        cut = max(0, len(ids) - need)
        kept += reversed(ids[cut:])
        before = None if before is None or dropped is None else before + dropped + cut
    return kept[::-1], before


def first_question(data, eot: int, block_size: int) -> list[int]:
    """End-of-text and the context before the first answer token of the data (validation's, else
    training's), within block_size tokens: the first question in the instruction template, ready to be
    answered ("...Assistant:\n"); just end-of-text where there is none (plain text first: mixed data).
    `data`: a gpt.shards.DataDir of instruction data. (train.py's --sample_tokens: hunt 42-e E6.)"""
    chunk = 1 << 20
    for split in ("val", "train"):
        for shard in data.open_shards(split, full_check=False):
            if shard.loss_mask is None:
                continue
            for start in range(0, len(shard), chunk):
                hits = np.flatnonzero(shard.loss_mask[start:start + chunk])
                if hits.size:
                    first = start + int(hits[0])
                    before = np.asarray(shard.tokens[max(0, first - block_size):first])
                    ends = np.flatnonzero(before == eot)
                    return [eot, *before[ends[-1] + 1 if ends.size else 0:].tolist()]
    return [eot]
