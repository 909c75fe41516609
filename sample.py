"""Sample text from a trained model.

    python sample.py                                        # the newest checkpoint of the default run (out/)
    python sample.py --out_dir=out --ckpt=best --start="ROMEO:" --num_samples=3 --max_new_tokens=200
    python sample.py --start=FILE:prompt.txt --stop="\\n\\n" --temperature=0      # greedy, stop at a blank line
    echo "To be, or not" | python sample.py --start=- --json                     # one JSON object per sample
    python sample.py --init_from=gpt2 --start="The meaning of life is" --top_p=0.9   # OpenAI's GPT-2 (network)
    python sample.py --init_from=path/to/hf-gpt2-dir                                 # a Hugging Face GPT-2 directory
    python sample.py --out_dir=out-instruct --instruction="Who says: ..." --temperature=0  # answer (instruction data)
    python sample.py --out_dir=out-instruct --chat                                   # a conversation on stdin

To a terminal the first sample is streamed token by token (the others of the batch follow it,
whole); otherwise each sample is printed whole (its prompt, then the continuation) followed by a
line of dashes. With --json, stdout holds one JSON object per line and sample:
{"index", "prompt", "text" (the continuation, without the prompt), "tokens" (new tokens, the
end-of-text or stop-string tokens included), "finish_reason" ("stop": a stop string, cut before
it; "eot": end-of-text, or the eos_token_id a Hugging Face model names; "length": max_new_tokens;
"interrupted": Ctrl-C or SIGTERM, the text until then), "tokens_per_s", "seconds"}. Information and
warnings go to stderr. Ctrl-C or SIGTERM while generating ends every sample at its next token: they
are printed as far as they got, then the process ends as interrupted; a second signal stops at once, once
the line being written is out: every line on stdout is whole.

The context: a prompt longer than the model's block_size keeps its last block_size tokens (a
warning says how many were dropped; a prompt of over 100,000 characters is tokenized from a line start near
its end, the same tokens, not counted). Generation may run past block_size: the model then sees a
sliding window; when it is full it keeps its last block_size // 2 tokens, prefills them again and
continues through the KV cache (the cached and uncached paths produce the same tokens in float32).
Samples of a prompt that ran past it, whose last tokens were drawn without the prompt's beginning, get a
note on stderr, with the --max_new_tokens that keeps the prompt in view.

Models fine-tuned on instruction data (prompt/response, Alpaca or messages records; see
gpt/instruct.py for the template): --instruction=TEXT (or FILE:path, or -) wraps the text in the
training template and prints only the answer, which ends at end-of-text. --chat reads stdin: each
line is the next user message, answered in turn, the oldest turns dropped when the conversation
outgrows the context; with --json each line is one JSON request and gets one JSON answer
(see gpt/chat.py for both formats).

Exit status: 0 done; 1 bad option or value, missing or mismatched checkpoint, a hub model out of
reach, non-finite logits, a stdout that cannot be written (one line on stderr, no traceback), or,
at the end, --chat lines that were not requests; 130 interrupted (Ctrl-C), 143 stopped by SIGTERM
(the samples so far printed first).
"""

from __future__ import annotations

import sys

INTERRUPTED = "sample.py: interrupted"
if __name__ == "__main__":  # Ctrl-C while torch imports (the first seconds): that line too, not a traceback
    from gpt.errors import one_line_on_ctrl_c

    one_line_on_ctrl_c(INTERRUPTED)

import argparse
import contextlib
import os
import re
import shlex
import signal
import threading
from pathlib import Path

import torch

from gpt.config import parse_auto_bool, parse_bool, parse_int, preset_training
from gpt.errors import (CheckedStdout, OneLineParser, Terminated, UsageError, did_you_mean, exit_status_of,
                        first_of_its_machine, reported_oom, under_torchrun, unquoted_value, wait_while_another_says_it,
                        world_size)
from gpt.generation import COMPILE_MIN_TOKENS
from gpt.tokenizer import ENDOFTEXT

DEFAULT_OUT_DIR = "out"
SEPARATOR = "---------------"  # nanoGPT's, between samples




# ----------------------------------------------------------------------------- options


def _bool(value: str) -> bool:  # argparse wants ArgumentTypeError for a readable message
    try:
        return parse_bool(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _or_none(parse, what: str):
    """An argparse type: `parse`, or None (off) for "none" or "". --top_p takes it as --top_k did:
    the refusal of a bad top_p said "None to disable", which its command line refused (hunt, session 24)."""
    def convert(value: str):
        if value.lower() in ("none", ""):
            return None
        try:
            return parse(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what} or none, got {value!r}") from None
    return convert


def _unescape(value: str) -> str:
    r"""\n, \t, \r and \\ in a stop string stand for newline, tab, carriage return, backslash."""
    table = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
    return re.sub(r"\\(.)", lambda m: table.get(m[1], m[0]), value)


class _Parser(OneLineParser):
    def error(self, message: str):  # a UsageError, which main says as every other one (one line, status 1)
        raise UsageError(message)


def make_parser() -> _Parser:
    p = _Parser(prog="sample.py", usage="python sample.py [--key=value ...]", description=__doc__,
                allow_abbrev=False, add_help=False,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.add_argument
    # None until check_args: --out_dir=out typed beside --init_from is refused as any other run is,
    # where comparing with the default let it through silently (hunt, session 24)
    a("--out_dir", default=None, help=f"run directory to sample from (default: {DEFAULT_OUT_DIR})")
    a("--ckpt", default="latest", help="'latest' (newest complete checkpoint), 'best' (lowest validation loss), "
                                       "or a checkpoint directory (a bare name: in --out_dir) (default: %(default)s)")
    a("--init_from", default=None, help="instead of a run: gpt2|gpt2-medium|gpt2-large|gpt2-xl (network, or the "
                                      "hub cache), a Hugging Face GPT-2 directory, or one of our run directories")
    a("--lora_base", default=None, metavar="PATH",
      help="where a LoRA run's base is now, if it was moved: its run directory or its ckpt-* directory (a Hugging "
           "Face base: its directory), taken only where its weights' fingerprint is the one recorded")
    a("--start", default="", help="the prompt: text (as typed: \\n is a backslash and an n), FILE:path (read a "
                                  "file), or - (read stdin); empty: start from end-of-text (default)")
    a("--num_samples", type=int, default=1, help="samples drawn together, as one batch sharing one prefill (default: 1)")
    a("--max_new_tokens", type=int, default=500,
      help="new tokens per sample, at most (default: %(default)s); may exceed the model's block_size: the "
           "context then slides, keeping its last block_size // 2 tokens each time it fills")
    a("--temperature", type=float, default=0.8, help="0 = greedy (argmax); higher = more random (default: %(default)s)")
    a("--top_k", type=_or_none(parse_int, "an integer"), default=200, help="sample among the k most likely tokens; none = off (default: %(default)s)")
    a("--top_p", type=_or_none(float, "a number"), default=1.0, help="nucleus sampling, in (0, 1]; 1 or none = off "
                                                          "(default: %(default)s)")
    a("--repetition_penalty", type=float, default=1.0, help="> 1 makes tokens already present less likely; 1 = off (default: %(default)s)")
    # (the same seed alone: the first of 3 samples is not the sample drawn alone, and --help said it was: hunt 51-s S2)
    a("--seed", type=int, default=1337, help="random seed: the same seed and --num_samples give the same samples "
                                             "(a batch's samples draw from one generator) (default: %(default)s)")
    a("--stop", action="extend", nargs="+", default=[], metavar="STRING",
      help="end a sample at the first occurrence of this string, cut before it (repeat for several; \\n, \\t "
           "are newline and tab). End-of-text always ends a sample")
    a("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps (default: auto)")
    a("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"),
      help="weights' dtype; auto: bf16 on CUDA; on a CPU, bf16 for models of 20M+ parameters where the CPU "
           "computes bf16 natively (measured faster there), else fp32 (default: auto)")
    a("--compile", default="auto", type=parse_auto_bool, choices=("auto", "true", "false"),
      help="torch.compile the per-token decode step, sampling included (static KV cache; CUDA graphs on CUDA); "
           f"auto: on CUDA when num_samples x max_new_tokens >= {COMPILE_MIN_TOKENS:,}, where compiling pays for "
           "itself against --cuda_graph (default: auto)")
    a("--cuda_graph", default="auto", type=parse_auto_bool, choices=("auto", "true", "false"),
      help="on CUDA, when the step is not compiled: replay the eager decode step from a CUDA graph (one launch "
           "per token, captured in one step, no compile; 4x the eager step's tokens/s for GPT-2 124M on an "
           "H100); auto: on CUDA (default: auto)")
    a("--use_cache", type=_bool, default=True, help="KV cache (default: true); false recomputes the whole context "
                                                    "for every token: for comparison and debugging")
    a("--json", type=_bool, nargs="?", const=True, default=False, help="one JSON object per sample on stdout; "
                                                                         "with --chat, one per stdin line")
    # None, not "": an explicitly empty --instruction (an unset shell variable) is refused as " " is,
    # where "" read as "not given" and sampled unconditionally (hunt, session 24)
    a("--instruction", default=None, help="answer this (text, FILE:path, or -) in the instruction template; "
                                          "prints only the answer")
    a("--chat", type=_bool, nargs="?", const=True, default=False,
      help="a conversation: each stdin line is the next user message (--json: one JSON request per line)")
    a("--stream", default="auto", type=parse_auto_bool, choices=("auto", "true", "false"),
      help="print tokens as they are produced (never with --json); auto: when stdout is a terminal (default: auto)")
    a("-h", "--help", action="store_true", help="show this help and exit")
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = make_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        arg = unknown[0]
        if not arg.startswith("--"):
            i = argv.index(arg)
            if unquoted := unquoted_value(argv, i, text=("start", "stop", "instruction")):  # (`--start=To be`)
                raise UsageError(unquoted + (" (several stop strings: repeat --stop)"
                                             if argv[i - 1].startswith("--stop=") else ""))
            raise UsageError(f"unexpected argument {arg!r}: options are --key=value (see python sample.py --help)")
        key = arg[2:].split("=", 1)[0]
        valid = [o[2:] for o in parser._option_string_actions if o.startswith("--")]
        raise UsageError(f"unknown option --{key}{did_you_mean(key, valid, n=2)}; see python sample.py --help")
    return args


def check_args(args: argparse.Namespace) -> None:
    """Every value checked before anything is loaded."""
    from gpt.errors import unusable_path
    from gpt.sampling import check_sampling_args

    check_sampling_args(args.temperature, args.top_k, args.top_p, args.repetition_penalty)
    if args.num_samples < 1:
        raise UsageError(f"num_samples must be >= 1, got {args.num_samples}")
    if not 0 <= args.seed < 2**64:  # torch takes [-2**63, 2**64); -1 is "random" to some tools, not here
        raise UsageError(f"seed must be in [0, 2**64 - 1], got {args.seed} (the same seed gives the same samples)")
    if args.max_new_tokens < 0:
        raise UsageError(f"max_new_tokens must be >= 0, got {args.max_new_tokens}")
    args.stop = [_unescape(argv_text(s, "--stop")) for s in args.stop]
    if args.instruction is not None and args.chat:
        raise UsageError("--instruction answers one message, --chat a conversation: give one of them")
    if (args.instruction is not None or args.chat) and args.start:
        raise UsageError("--start is for plain continuation; --instruction and --chat build the prompt from the "
                         "instruction template")
    if args.init_from and (args.out_dir is not None or args.ckpt not in ("latest", "best")):
        # they name the model too, and were silently ignored (audit, 2026-11-26)
        raise UsageError("--init_from names the model to sample: leave out --out_dir and --ckpt=PATH "
                         "(--ckpt=best picks the best checkpoint of an --init_from run directory)")
    # Path("") is ".": an unset shell variable sampled the current directory (hunt, session 27)
    if args.out_dir is not None and not args.out_dir.strip():
        raise UsageError("--out_dir is empty: name a run directory (default: out)")
    if not args.ckpt.strip():
        raise UsageError("--ckpt is empty: give latest, best, or a checkpoint's name or path")
    if args.init_from is not None and not args.init_from.strip():  # (the run in out/ was sampled: hunt 32-c F14)
        raise UsageError("--init_from is empty: name a hub model (gpt2, ...), a Hugging Face directory or a run")
    # `--out_dir=~/run`: the shell leaves a ~ after = as it is (train.py expands it: hunt 34-b B9)
    args.out_dir, args.ckpt, args.init_from, args.lora_base = (os.path.expanduser(v) if v else v for v in (
        args.out_dir, args.ckpt, args.init_from, args.lora_base))
    if args.lora_base is not None and not args.lora_base.strip():  # (Path("") is the current directory)
        raise UsageError("--lora_base is empty: name the directory a LoRA run's base was moved to")
    for option, value in (("--out_dir", args.out_dir), ("--ckpt", args.ckpt), ("--init_from", args.init_from),
                          ("--lora_base", args.lora_base)):
        if value and (why := unusable_path(value)):  # (a traceback from the first check: hunt 32-c F12)
            raise UsageError(f"{option}={value}: {why}")
    ckpt_path = Path(args.ckpt)
    if args.out_dir is not None and len(ckpt_path.parts) > 1 and \
            ckpt_path.parent.resolve() != Path(args.out_dir).resolve():  # (it was ignored without a word: hunt 34-a A10)
        # (its name offered only where --out_dir has it: `--out_dir=out --ckpt=out-nobias/ckpt-0000004` offered
        # ckpt-0000004 of an out that had none, hunt 52-n N2; os.path's, False where --out_dir cannot be searched:
        # Path.is_dir's PermissionError was a traceback, hunt 52-y Y3)
        has_it = os.path.isdir(Path(args.out_dir) / ckpt_path.name)
        raise UsageError(f"--ckpt={args.ckpt} is not in --out_dir={args.out_dir}: give one of them, or --ckpt the name "
                         f"of a checkpoint of {args.out_dir}" + (f" ({ckpt_path.name}, say)" if has_it else ""))
    if args.out_dir is None:
        args.out_dir = DEFAULT_OUT_DIR
    reads = [f"{o}=-" for o, v in (("--start", args.start), ("--instruction", args.instruction)) if v == "-"]
    if (reads or args.chat) and sys.stdin is None:  # (Python's sys.stdin for a closed descriptor 0: hunt, session 27)
        raise UsageError(f"stdin is closed: nothing to read for {(reads or ['--chat'])[0]}")
    if args.json and args.stream == "true":  # (ignored without a word: hunt 32-c F14)
        raise UsageError("--stream=true prints the text as it comes, --json whole records: give one of them")
    if args.chat and args.num_samples != 1:
        raise UsageError(f"--chat answers with one sample at a time, got --num_samples={args.num_samples}")
    if any(not s for s in args.stop):
        raise UsageError("stop strings must not be empty")


# ----------------------------------------------------------------------------- model and prompt


def load(args: argparse.Namespace, device: torch.device):
    """(model on device, tokenizer, where it came from, the ids that end a sample beside the end-of-text) from
    --init_from, --ckpt or --out_dir; a model and tokenizer that do not belong together are refused."""
    from gpt.checkpoint import (CKPT_PREFIX, NoBestCheckpoint, incomplete_checkpoints, is_hf_gpt2_dir, list_checkpoints,
                                load_base_model, load_model, lost_files, refuse_a_pointer,
                                refuse_another_hf_tokenizer, weights_dir, without_state, worse_than_its_start)
    from gpt.errors import UnreadableFile
    from gpt.generation import check_vocab
    from gpt.rundir import lock_holder
    from gpt.shards import holds_prepared_data
    from gpt.tokenizer import get_tokenizer

    weights = weights_dir(args.init_from) if args.init_from else None  # (None: a hub name)
    if args.init_from and not (weights and not is_hf_gpt2_dir(weights)):
        if args.ckpt != "latest":
            raise UsageError(f"--ckpt={args.ckpt}: {args.init_from} is not one of our runs, which have checkpoints")
        if args.lora_base:  # (a LoRA run's; hunt 36-c A6)
            raise UsageError(f"--lora_base={args.lora_base}: {args.init_from} is not a LoRA run, which alone has a "
                             "base to point to: leave out --lora_base")
        if weights:
            refuse_another_hf_tokenizer(weights)
        else:
            refuse_a_pointer(args.init_from)
        model = load_base_model(args.init_from)  # a hub name out of reach is one line (HubUnreachable)
        tokenizer, source, meta = get_tokenizer("gpt2"), args.init_from, {}
        if not weights and (args.instruction is not None or args.chat):  # OpenAI's GPT-2, which never saw the
            # template: it answered without the word a run of plain text gets (hunt 50-f F3; a Hugging Face directory
            # may be an export of an instruction run: not known)
            print(f"warning: {source} is OpenAI's GPT-2, trained on plain text (WebText), not on instruction data: its "
                  "answers in the instruction template are continuations of text it never saw so; fine-tune it first "
                  f"(python train.py --config=instruct --init_from={source} --data=pairs.jsonl)", file=sys.stderr)
        end_tokens = other_end_tokens(model, tokenizer, source)
    else:  # one of our runs or checkpoints: they end at their tokenizer's end-of-text
        if args.init_from:
            path, which = Path(args.init_from), args.ckpt
        elif args.ckpt in ("latest", "best"):
            path, which = Path(args.out_dir), args.ckpt
        else:
            path, which = Path(args.ckpt), "latest"
            # train.py says "latest ckpt-0000112": a bare name is the run's checkpoint, where it was "no
            # checkpoint at ckpt-0000112" beside out/ckpt-0000112 (hunt, session 24); the run's first, then
            # one here (the working directory's of another run was sampled without a word: review 34 R4)
            if len(path.parts) == 1 and ((Path(args.out_dir) / path).exists() or not path.exists()):
                path = Path(args.out_dir) / path
            refuse_a_pointer(str(path), "--ckpt")  # (--ckpt=out/best: said, with the checkpoint it names)
        try:
            model, ckpt = load_model(path, which, device=device, lora_base=args.lora_base)
        except FileNotFoundError as e:
            if args.init_from and isinstance(e, NoBestCheckpoint):  # its own way on is --out_dir's, --ckpt=PATH,
                # which --init_from refuses (hunt 35-a A2)
                raise UsageError(f"no best checkpoint in {e.path}: {e.why}; leave out --ckpt=best, or sample a "
                                 f"checkpoint, e.g. --init_from={shlex.quote(str(e.newest))}") from None
            if not str(e).startswith("no complete checkpoint"):
                raise  # e.g. a LoRA checkpoint's base model is gone: its own message
            if args.init_from and (lost := lost_files(path)):  # (a checkpoint that lost a file, named as --init_from,
                raise UsageError(lost) from None  # was "no checkpoint at RUN/ckpt-0000030": hunt 47-c C1)
            if args.init_from or args.ckpt in ("latest", "best"):  # a run whose checkpoints all lost a file: said,
                # where it was "no checkpoint in RUN/ yet; train one with: ...", which starts the run over
                if said := [why for _, why in incomplete_checkpoints(path)]:
                    raise UsageError(f"{said[-1]}; {path} has no complete checkpoint") from None
                # a run training there that has saved nothing yet: "train one with: python train.py --out_dir=..."
                # sent the user to train.py's refusal, "in use by another training run" (hunt 47-d D1)
                if holder := lock_holder(path):
                    raise UsageError(f"no checkpoint in {path}/ yet: the training run there ({holder}) has saved "
                                     "none so far; sample once it saves its first, at its first evaluation") from None
            if args.init_from:
                raise UsageError(f"no checkpoint at {path}") from None
            if args.ckpt not in ("latest", "best"):  # what there is to choose from (hunt, session 24)
                if said := [why for p, why in incomplete_checkpoints(path.parent) if p == path]:
                    # the run the checkpoint is in, not --out_dir's (another run's, or "there is no out/")
                    raise UsageError(f"{said[0]}; {run_checkpoints(str(path.parent))}") from None  # (hunt, session 27)
                where = f"{args.ckpt} (nor {path})" if Path(args.ckpt) != path else str(path)
                raise UsageError(f"no checkpoint at {where}; {run_checkpoints(args.out_dir)}") from None
            if holds_prepared_data(path):  # (its advice was a run written into the data: hunt 47-d, left)
                raise UsageError(f"{path} holds prepared data (token shards), not a training run: train on it with "
                                 f"python train.py --data={shlex.quote(str(path))} --out_dir=RUN, then sample "
                                 "--out_dir=RUN") from None
            # quoted, as train.py's "Sample with: ..." is: a name with a space was two words when pasted
            how = preset_training(args.out_dir) or ("python train.py" + (
                "" if args.out_dir == DEFAULT_OUT_DIR else f" --out_dir={shlex.quote(args.out_dir)}"))
            raise UsageError(f"no checkpoint in {path}/ yet; train one with: {how}") from None
        except UnreadableFile as e:  # e.g. truncated weights: name the file, offer the others
            own = e.path.parent
            if not own.name.startswith(CKPT_PREFIX) or path.resolve() not in (own.resolve(), own.parent.resolve()):
                # not a file of the checkpoint asked for: a LoRA run's base checkpoint, whose run's other
                # checkpoints were offered, other weights without the adapters (hunt 35-a A2)
                raise
            run = own.parent
            others = [p for p in list_checkpoints(run) if p != own]
            # as --init_from takes it beside it: --ckpt=PATH is refused there (hunt 35-a A2)
            option = "--init_from" if args.init_from else "--ckpt"
            hint = f"choose another with {option}, e.g. {option}={shlex.quote(str(others[-1]))}" if others else f"no other checkpoint in {run}"
            raise UsageError(f"{e}; {hint}") from None
        if which == "latest" and ckpt.path.parent == path:  # a newer one that lost a file: said, not passed over
            newest = "the newest complete one" if not without_state(ckpt.path) else "the newest with its weights"
            for _, why in incomplete_checkpoints(path, newer_than=ckpt.path):  # in silence (hunt, session 27)
                print(f"warning: {why}; sampling {ckpt.path.name}, {newest}", file=sys.stderr)
        if note := without_state(ckpt.path):  # (weights kept without their training state: hunt 48-c C1)
            print(f"note: {note}", file=sys.stderr)
        meta = ckpt.meta
        tokenizer = get_tokenizer(meta.get("tokenizer", "gpt2"))
        source = str(ckpt.path) + (f" (step {meta['step']})" if meta.get("step") is not None else "")
        if (args.instruction is not None or args.chat) and meta.get("supervised") is False:
            # (it answered in the template a model of plain text never saw, without a word: hunt 30-d F1;
            # checkpoints saved before meta.json said it are not known either way)
            print(f"warning: {source} was trained on plain text ({meta.get('data')}), not on instruction data: "
                  "its answers in the instruction template are continuations of text it never saw so",
                  file=sys.stderr)
        elif args.instruction is None and not args.chat and not args.start and meta.get("supervised") is True:
            # train.py's closing line named this command for an instruction run, whose samples from
            # end-of-text then came back empty, without a word (hunt 42-e E1)
            print(f"warning: {source} was trained on instruction data ({meta.get('data')}), its loss on the answers "
                  "only (and on any plain text beside them): sampled from end-of-text, as here, it writes what it "
                  "never learned to but for such text; ask it with --instruction=TEXT or --chat", file=sys.stderr)
        if worse := worse_than_its_start(ckpt, source):
            print(f"warning: {worse}", file=sys.stderr)
        # (and at those of the Hugging Face directory the run was fine-tuned from, as its export does: hunt 51-f F1)
        end_tokens = other_end_tokens(model, tokenizer,
                                      f"{source}, like the Hugging Face model it was fine-tuned from,")
    check_vocab(model.config.vocab_size, tokenizer, meta.get("vocab_size"), where=source)
    return model.to(device), tokenizer, source, end_tokens


def other_end_tokens(model, tokenizer, source: str) -> tuple[int, ...]:
    """Where transformers' generate ends this model's samples (its eos_token_id) besides the end-of-text, said in a
    note: a fine-tune that names another id than GPT-2's end-of-text, "\\n" say, was sampled on past it to
    --max_new_tokens (hunt 49-c C1)."""
    end_tokens = tuple(t for t in model.end_tokens if t != tokenizer.eot_token and t < tokenizer.n_vocab)
    if end_tokens:
        ids = ", ".join(map(str, end_tokens))
        print(f"note: {source} names {'id' if len(end_tokens) == 1 else 'ids'} {ids} as its end of sequence "
              f"(eos_token_id), where transformers' generate stops: samples end there too, and at GPT-2's "
              f"end-of-text", file=sys.stderr)
    return end_tokens


def run_checkpoints(out_dir: str, newest: int = 5) -> str:
    """The checkpoints of a run, the newest few, named as --ckpt takes them."""
    from gpt.checkpoint import list_checkpoints, name_of

    ckpts = [name_of(p) for p in list_checkpoints(out_dir)]  # (a stranded copy by its name: review 31 F9)
    if not ckpts:
        return f"{out_dir} has no complete checkpoint either" if Path(out_dir).is_dir() else f"there is no {out_dir}/"
    shown = ", ".join(ckpts[-newest:])
    return (f"{out_dir} has {shown}" if len(ckpts) <= newest else
            f"{out_dir} has {len(ckpts)} checkpoints, the newest: {shown}")


def streamed(args: argparse.Namespace) -> bool:
    """Whether the text is printed as it comes: --stream, where auto is "when stdout is a terminal"."""
    return not args.json and (args.stream == "true" or (args.stream == "auto" and sys.stdout.isatty()))


def read_prompt(start: str, option: str = "--start") -> str:
    """The text of --start or --instruction: TEXT, FILE:path or - (stdin), refused unless UTF-8."""
    from gpt.files import decode_utf8

    if start == "-":
        try:
            data = sys.stdin.buffer.read()
        except OSError as e:  # (an I/O error, a terminal hung up: a traceback, where FILE: said it: hunt 33-a F16)
            raise UsageError(f"cannot read the prompt from stdin ({option}=-): {e.strerror or e}") from None
        return _said_if_empty(decode_utf8(data, f"stdin ({option}=-)", start_of_text=True), "stdin", option)
    if start.startswith("FILE:"):
        if not start[5:]:  # Path("") is ".": "cannot read the prompt file .: Is a directory" (hunt, session 24)
            raise UsageError(f"{option}=FILE: names no file: give FILE:path")
        path = Path(start[5:]).expanduser()  # (FILE:~/p.txt: the shell leaves it as it is: hunt 35-f F11)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise UsageError(f"cannot read the prompt file {path}: {e}") from None
        return _said_if_empty(decode_utf8(data, f"the prompt file {path}", start_of_text=True), str(path), option)
    if start[:5].upper() == "FILE:" and names_a_file(start[5:]):  # (file: was taken as text without a word:
        # hunt 32-c F14)
        print(f"warning: {option}={start} is taken as text; {option}=FILE:{start[5:]} (in capitals) reads the file",
              file=sys.stderr)
    if "\\n" in start:  # --stop's escapes are not the prompt's, which may hold a real backslash (C:\new, \nabla):
        # taken as typed, as nanoGPT takes it, but said, where --start="Once\nupon" was a backslash and an n
        # without a word (hunt 44-b B2)
        print(f"note: {option} is taken as typed: its \\n is a backslash and an n, not a new line (only --stop reads "
              f"escapes); for new lines give {option}=FILE:path, {option}=- (stdin) or bash's $'...\\n...'",
              file=sys.stderr)
    return argv_text(start, option)


def _said_if_empty(text: str, source: str, option: str) -> str:
    """A prompt read from a file or stdin that holds nothing (a producer that failed, the wrong file):
    --start samples from end-of-text, as its empty default does, but says so (hunt 34-a A11);
    --instruction refuses it (sample())."""
    if not text and option == "--start":
        print(f"warning: {option}: {source} is empty: sampling from end-of-text", file=sys.stderr)
    return text


def names_a_file(text: str) -> bool:
    """Whether `text`, taken as a path, names a file (a prompt's text may be no path at all: too long
    a name, a NUL)."""
    try:
        return Path(text).is_file()
    except (OSError, ValueError):
        return False


def argv_text(value: str, option: str) -> str:
    """A command-line value, refused unless UTF-8: Python hands undecodable argv bytes over as
    lone surrogates (PEP 383), which the tokenizers would otherwise turn into U+FFFD."""
    from gpt.files import decode_utf8

    try:
        value.encode("utf-8")  # text the locale decoded is fine whatever the locale (Latin-1 too)
        return value
    except UnicodeEncodeError:  # the bytes Python could not decode: refused, naming where
        return decode_utf8(os.fsencode(value), option)


# ----------------------------------------------------------------------------- main


def sample(args: argparse.Namespace) -> int:
    from gpt.generation import (GraphedDecodeStep, compile_pays_off, compiled_decode_step, generate_samples,
                                pick_inference_dtype)
    from gpt.runtime import Dist, dtype_name, pick_device

    check_args(args)
    if (processes := world_size()) > 1:  # torchrun's: every process printed the same samples (hunt, session 26)
        raise UsageError(f"sample.py runs in one process: start it with python, not torchrun (its "
                         f"{processes} processes would each print the same samples)")
    device = pick_device(args.device, Dist())
    prompt_text = read_prompt(args.start)
    asked = args.instruction is not None
    instruction = read_prompt(args.instruction, "--instruction").rstrip("\r\n") if asked else ""
    if asked and not instruction.strip():  # as --chat --json refuses an empty prompt (audit, 2026-11-26)
        raise UsageError(f"--instruction={args.instruction}: the instruction is empty")
    model, tok, source, end_tokens = load(args, device)
    dtype, dtype_why = pick_inference_dtype(args.dtype, device, model.num_params(non_embedding=False))
    model = model.to(dtype).eval()
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True

    check_batch_fits(model, args.num_samples, args.use_cache, device)

    # the prompt's last block_size tokens (a long prompt is tokenized from near its end: tok.encode_last)
    prompt, dropped = tok.encode_last(prompt_text, model.config.block_size) if prompt_text else ([tok.eot_token], 0)
    if ENDOFTEXT in prompt_text:  # Hugging Face's GPT-2 tokenizer reads it as the token 50256, a usual prompt there:
        # here it is text, as in training data, and --start="<|endoftext|>" conditioned the model on that text without a
        # word (hunt 49-o O2)
        print(f"note: --start holds the text {ENDOFTEXT!r}, which is tokenized as ordinary text "
              f"({len(tok.encode(ENDOFTEXT))} tokens), not as the end-of-text token; leave --start out to sample from "
              f"end-of-text", file=sys.stderr)
    if dropped is None:  # (not counted: hunt 50-a A1)
        print(f"warning: the prompt ({len(prompt_text):,} characters) is longer than the model's context of "
              f"{model.config.block_size}: all but its last {model.config.block_size} tokens were dropped",
              file=sys.stderr)
    elif dropped:
        first = f"its first {dropped} tokens were" if dropped > 1 else "its first token was"  # (hunt 44-b B5)
        print(f"warning: the prompt is {len(prompt) + dropped} tokens, longer than the model's context of "
              f"{model.config.block_size}: {first} dropped", file=sys.stderr)

    if args.temperature == 0 and args.num_samples > 1:  # (HF's generate refuses it; here it was N copies, no word:
        # hunt 43-b B6)
        print(f"note: --temperature=0 is greedy decoding, which has one answer: the {args.num_samples} samples are "
              "the same (a temperature above 0 draws different ones)", file=sys.stderr)
    compile_wanted = compile_pays_off(args.compile, device, args.num_samples * args.max_new_tokens)
    decode_step, compiled = "auto", False  # auto: the static-shape step on CUDA (see GPT.generate_tokens)
    if compile_wanted and not args.use_cache:
        print("note: --compile applies to the cached decode step; ignored with --use_cache=false", file=sys.stderr)
    elif compile_wanted:
        step = compiled_decode_step(model)
        seconds = step.warm_up(args.num_samples, args.temperature, args.top_k, args.top_p, args.repetition_penalty,
                               tok.n_vocab)
        if not step.failed:
            decode_step, compiled = step, True
            print(f"sample.py: compiled the decode step in {seconds:.1f} s", file=sys.stderr)
    graphed = args.cuda_graph != "false" and not compiled and args.use_cache and device.type == "cuda"
    if graphed:
        decode_step = GraphedDecodeStep(model)
    elif args.cuda_graph == "true":  # (typed where it does nothing, it was ignored without a word: hunt 31-a F4)
        why = (f"on {device.type}" if device.type != "cuda" else "with --use_cache=false" if not args.use_cache
               else "beside the compiled step, which has its own")
        print(f"note: --cuda_graph applies to the eager cached decode step on CUDA; ignored {why}", file=sys.stderr)
    cfg = model.config
    print(f"sample.py: {source}: {model.num_params(False) / 1e6:.2f}M parameters, {cfg.n_layer} layer{'s' if cfg.n_layer != 1 else ''}, "
          f"context {cfg.block_size}, {tok.name} tokenizer | {device}, {dtype_name(dtype)} "
          f"weights ({dtype_why}), {'KV cache' if args.use_cache else 'no cache'}, "
          f"compile {'on' if compiled else 'off'}{', CUDA graph' if graphed else ''}", file=sys.stderr)
    if asked or args.chat:
        with reported_oom(f"generating {args.num_samples:,} samples at once", "give a smaller --num_samples"):
            return answer(args, instruction, model, tok, decode_step, device, end_tokens)

    stream = streamed(args)
    out = sys.stdout

    def on_text(i: int, piece: str) -> None:
        if i == 0:
            out.write(piece)
            out.flush()

    if stream:
        out.write(prompt_text)
        out.flush()
    generator = torch.Generator(device=device).manual_seed(args.seed)
    with kept_when_interrupted(stream) as stopped:
        try:
            with reported_oom(f"generating {args.num_samples:,} samples at once", "give a smaller --num_samples"):
                samples = generate_samples(model, tok, prompt, args.num_samples, args.max_new_tokens,
                                           temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                                           repetition_penalty=args.repetition_penalty, stop=tuple(args.stop),
                                           generator=generator, use_cache=args.use_cache, decode_step=decode_step,
                                           end_tokens=end_tokens, on_text=on_text if stream else None,
                                           stopped=stopped)
        finally:
            if stream:
                out.write("\n")
                out.flush()
        print_samples(samples, prompt_text, args.json, stream, dropped != 0, model.config.block_size)
    return 0


def print_samples(samples: list, prompt_text: str, as_json: bool, stream: bool, cut: bool, block_size: int) -> None:
    """The samples on stdout (the first one's text already there, streamed), then their notes and closing line."""
    from gpt.generation import json_line, past_context_note

    out = sys.stdout
    for s in samples:
        if as_json:
            out.write(json_line({"index": s.index, "prompt": prompt_text, "text": s.text, "tokens": s.tokens,
                                 "finish_reason": s.finish_reason, "tokens_per_s": round(s.tokens_per_s, 2),
                                 "seconds": round(s.seconds, 4)}))
        elif stream and s.index == 0:
            out.write(SEPARATOR + "\n")
        else:
            out.write(prompt_text + s.text + "\n" + SEPARATOR + "\n")
    out.flush()
    # Not for an empty prompt (the end-of-text, which no one typed): there is nothing of it to lose, and the default
    # 500 tokens run past a small model's context at every plain `python sample.py` (review 44-g G6). Nor for a prompt
    # cut to the context: its warning said its beginning was dropped, which no --max_new_tokens brings back, where the
    # note's "(--max_new_tokens=1 or fewer keeps it in view)" said one would (hunt 46-d D2)
    if prompt_text and not cut and (note := past_context_note(samples, block_size)):
        print(f"note: {note}", file=sys.stderr)
    tokens = sum(s.tokens for s in samples)
    seconds = max((s.seconds for s in samples), default=0.0)
    # how they ended, in words ("1 length" was --json's finish_reason, not a sentence)
    reasons = ", ".join(f"{n} {said}" for r, said in (("eot", "at end-of-text"), ("stop", "at a stop string"),
                                                      ("length", "at --max_new_tokens"),
                                                      ("interrupted", "interrupted"))
                        if (n := sum(s.finish_reason == r for s in samples)))
    print(f"sample.py: {len(samples)} sample{'s' if len(samples) != 1 else ''} ({reasons}), {tokens} token{'s' if tokens != 1 else ''} in "
          f"{seconds:.2f} s: {tokens / seconds if seconds else 0:.1f} tokens/s", file=sys.stderr)


@contextlib.contextmanager
def kept_when_interrupted(streamed: bool):
    """Generation and the output of its samples, inside the block (`streamed`: the first sample's text printed
    as it comes); yields the `stopped` of generate_samples. Ctrl-C or SIGTERM there only sets a flag: the
    samples end at the next token, finish_reason "interrupted", are printed as far as they got, in their
    format (--json: whole records), and the process then ends as interrupted (main: its one line, status
    130 / 143). Every sample was lost but a streamed one's text (hunt 49-n N1). A second signal stops at
    once (StopSignal's at_once), printing nothing more once the write under way is out (CheckedStdout writes
    it whole: hunt 51-s S1). A reader gone with the same Ctrl-C (`sample.py | head`:
    the terminal's reaches the whole pipeline) still ends it as interrupted. Only the main thread takes
    signals: elsewhere (sample.main run in a thread) nothing changes."""
    from gpt.runtime import StopSignal

    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    stop = StopSignal(announce=False, at_once=lambda signum, where: INTERRUPTED)

    def stopped() -> bool:  # asked once after the signal: generation ends there
        if stop.signum == signal.SIGINT and not streamed and sys.stderr.isatty():
            print(file=sys.stderr)  # the terminal echoed "^C" where the samples or their closing line would begin
        return stop.signum is not None

    try:
        with stop.interruptible("sampling"):
            yield stopped
    except BrokenPipeError:
        if stop.signum is None:
            raise
    finally:
        stop.restore()
    if stop.signum is not None:
        interrupted = Terminated() if stop.signum == signal.SIGTERM else KeyboardInterrupt()
        interrupted.line_ended = True  # main's line follows the samples' output, on a line of its own
        raise interrupted


def check_batch_fits(model, num_samples: int, use_cache: bool, device: torch.device) -> None:
    """What a batch of num_samples needs at least, checked before anything is allocated for it: the
    KV cache (keys and values of every layer over the whole context, in the weights' dtype) and a
    few float32 rows of the vocabulary per sample (logits, noise, probabilities). Too many samples
    were the allocator's traceback, or, at 10^8, minutes building their Python objects first (hunt,
    session 27)."""
    from gpt.generation import batch_bytes
    from gpt.runtime import check_fits

    need = batch_bytes(model.config, num_samples, model.config.block_size, model.transformer.wte.weight.element_size(),
                       use_cache)
    with reported_oom(f"for {num_samples:,} samples at once", "give a smaller --num_samples"):
        check_fits(need, device, "their KV cache and logits")


def answer(args: argparse.Namespace, instruction: str, model, tok, decode_step, device: torch.device,
           end_tokens: tuple[int, ...] = ()) -> int:
    """--instruction and --chat (gpt/chat.py), in the template the model was fine-tuned with."""
    from gpt.chat import Answerer, answer_instruction, chat

    answerer = Answerer(model, tok, args.max_new_tokens, generator=torch.Generator(device=device).manual_seed(args.seed),
                        decode_step=decode_step, warn=lambda message: print(f"warning: {message}", file=sys.stderr),
                        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                        repetition_penalty=args.repetition_penalty, stop=tuple(args.stop), use_cache=args.use_cache,
                        end_tokens=end_tokens)
    stream = streamed(args)
    if args.instruction is not None:
        with kept_when_interrupted(stream) as answerer.stopped:
            answer_instruction(answerer, instruction, args.num_samples, sys.stdout, as_json=args.json, stream=stream)
        return 0
    interactive = sys.stdin.isatty()
    # A signal during an answer keeps it, as --instruction's, but at a terminal in plain mode, where Ctrl-C stops one
    # answer (chat's own way); one while chat waits for the next line ends the session at once, as before
    errors, _ = chat(answerer, sys.stdin.buffer, sys.stdout, as_json=args.json, stream=stream,  # bytes: see chat()
                     prompt=(lambda: print("> ", end="", file=sys.stderr, flush=True)) if interactive else None,
                     end_echoed_line=(lambda: print(file=sys.stderr)) if sys.stderr.isatty() else None,
                     answering=(lambda: kept_when_interrupted(stream)) if args.json or not interactive else None)
    if interactive:  # Ctrl-D at the "> " prompt ends the line, where the shell's prompt came on it (hunt 42-e E4)
        print(file=sys.stderr, flush=True)
    return 1 if errors else 0


def samples_out(stream, as_json: bool, what: str = "the samples") -> CheckedStdout:
    """The script's stdout, checked and wrapped: refused when closed; where its encoding is not
    UTF-8 (a Latin-1 locale, Windows' cp1252 through a pipe), --json is written in UTF-8, JSON's
    own encoding (RFC 8259), and text with '?' for what the encoding lacks (not UTF-16's), said once. Generated
    text can hold any character, and both were UnicodeEncodeError tracebacks after generating
    (hunt, session 27)."""
    import codecs

    if stream is None:  # (Python's sys.stdout for a closed descriptor 1)
        raise UsageError("stdout is closed: nowhere to write the samples (redirect it, e.g. > samples.txt)")
    encoding = getattr(stream, "encoding", None) or "utf-8"
    name = codecs.lookup(encoding).name
    if name != "utf-8" and hasattr(stream, "reconfigure"):
        if as_json:
            stream.reconfigure(encoding="utf-8")
        elif not name.startswith("utf-"):  # (UTF-16, utf-8-sig: every character has its bytes there, and the
            # warning that it lacks some was false: hunt 52-r R2)
            stream.reconfigure(errors="replace")
            print(f"warning: stdout's encoding is {encoding}: characters it lacks are printed as '?' "
                  "(PYTHONIOENCODING=utf-8 keeps them)", file=sys.stderr)
    return CheckedStdout(stream, "sample.py", stop=what)


def main(argv: list[str] | None = None) -> int:
    from gpt.runtime import kernel_settings, set_kernel_settings

    argv = sys.argv[1:] if argv is None else list(argv)
    saved_kernel_settings = kernel_settings()  # TF32 is global: undone for in-process callers (tests, bench.py)
    stdout = sys.stdout
    if sys.stderr is None:  # a closed descriptor 2: print(file=None) wrote the information lines to stdout,
        sys.stderr = open(os.devnull, "w")  # into --json's records (hunt, session 27)
    try:
        args = parse_args(argv)
        # (before --help too: `--help > /dev/full` was a traceback; then said "the samples": hunt 34-a A9)
        sys.stdout = samples_out(stdout, args.json, "the help" if args.help else "the samples")
        if args.help:
            print(make_parser().format_help())
            status = 0
        else:
            status = sample(args)
        sys.stdout.flush()  # a buffered stdout's failure is met here, not after main at the interpreter's exit
        return status
    except UsageError as e:  # raised where the problem is found (gpt/errors.py); anything else is a bug
        message = re.sub(r"\s*\n\s*", " ", str(e).strip())  # always one line
        # (started by torchrun, every process meets it alike; sample.py refuses torchrun, so where WORLD_SIZE
        # says one process, a LOCAL_RANK left in the environment silenced every error: hunt 34-a A8)
        if first_of_its_machine() or not under_torchrun():
            print(f"sample.py: error: {message}", file=sys.stderr)
        else:
            wait_while_another_says_it()
        return e.exit_status
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (Terminated, set up with the imports: gpt/errors.py)
        # (a new line first only on a terminal, after its ^C; elsewhere it was an empty line: hunt, session 27)
        print(("\n" if sys.stderr.isatty() and not getattr(e, "line_ended", False) else "") + INTERRUPTED,
              file=sys.stderr)
        return exit_status_of(e)  # (130, 143, or the second signal's that stopped at once: StoppedAtOnce)
    finally:
        sys.stdout = stdout
        set_kernel_settings(saved_kernel_settings)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. piped into `head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
