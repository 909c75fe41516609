"""Benchmarks: speed is measured here, never asserted by a test.

    python bench.py decode    # KV-cache decode vs uncached vs transformers.generate, model and CLI (issues 2, 5)
    python bench.py prepare   # tokenizer MB/s vs end-to-end data/prepare.py MB/s (issue 3)
    python bench.py train --nanogpt_cpu --dtypes=float32,bfloat16   # train.py's loop on nanoGPT's CPU shape (issue 4)
    python bench.py train --nanogpt_gpu --fp8 -- --config=gpt2-124m --data=data/shakespeare-gpt2 \\
        --gradient_accumulation_steps=1   # on a GPU: MFU, tokens/s vs a same-run nanoGPT step, --fp8's gain
    python bench.py quality   # bits per byte in 5 minutes: the default vs the recipes issue 11 names (issue 11)

Each command measures its reference in the same run and prints ratios against it.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # Ctrl-C while torch imports (building the parsers imports it: seconds), or a TORCH_LOGS
    # torch refuses: one line, not a traceback, as the other scripts say it (SIGTERM there ended it without a word)
    from gpt.errors import one_line_on_ctrl_c

    one_line_on_ctrl_c("bench.py: interrupted")  # (main's line once a command runs: "bench.py COMMAND: interrupted")

import argparse
import contextlib
import os
import re
import shlex
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.abspath(__file__))  # where sample.py and train.py are, whatever the caller's cwd


# ----------------------------------------------------------------------------- decode


@contextlib.contextmanager
def fresh_compile_cache():
    """torch.compile's on-disk caches (inductor's and Triton's) in a new, empty directory while
    inside, for this process and the processes it starts: compile times measured there are a first
    run's, as on a fresh machine, whatever earlier runs left in /tmp (a warm cache makes a recipe's
    or the decode step's compile almost free). Yields that directory."""
    names = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    saved = {k: os.environ.get(k) for k in names}
    with temporary_directory("compile") as tmp:
        os.environ["TORCHINDUCTOR_CACHE_DIR"], os.environ["TRITON_CACHE_DIR"] = tmp, os.path.join(tmp, "triton")
        try:
            yield tmp
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _sigterm_when_bench_dies(prctl, sigterm: int, parent: int) -> None:
    """In a child, before it runs its command (Linux): a SIGTERM when bench.py's process ends,
    however it ends. Killed (kill -9, the out-of-memory killer, a CI timeout), bench.py left its
    train.py to run its whole budget, on the GPU the next measurement needed (hunt 30-c F4). It
    imports nothing: a forked child of a process with threads must not (subprocess's preexec_fn)."""
    prctl(1, sigterm)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # bench.py ended before the line above: nothing would send it
        os.kill(os.getpid(), sigterm)


def remove_killed_benches_runs() -> None:
    """Remove the temporary directories (temporary_directory's) of a bench.py that was killed outright:
    its quality runs' checkpoints, a gigabyte for GPT-2 124M (hunt 30-c F4), and the others' that no one
    else removed either: prepare's copies of the text and their shards (three times its --mb: 43 MB for
    --mb=10), decode's GPT-2 124M checkpoint, a train row's run, a compile cache (hunt 48-h H3). Only
    this machine's: a process id says whether a bench.py is alive only on its own machine, and with TMPDIR
    on a filesystem that machines share another machine's live bench lost its directories (hunt 48-i I1)."""
    import shutil
    import socket
    from pathlib import Path

    if sys.platform != "linux":  # (where /proc says which processes run)
        return
    # (the name's last part is tempfile's, without a "-": a host "a" does not take host "a-b"'s directories)
    ours = re.compile(rf"bench-(?:{'|'.join(TEMPORARY_KINDS)})-(\d+)-{re.escape(socket.gethostname())}-[^-]+")
    for leftover in Path(tempfile.gettempdir()).glob("bench-*"):
        if (match := ours.fullmatch(leftover.name)) and not Path(f"/proc/{match[1]}").exists():
            shutil.rmtree(leftover, ignore_errors=True)


# What bench.py's temporary directories hold (temporary_directory)
TEMPORARY_KINDS = ("quality", "prepare", "decode", "train", "compile")


def temporary_directory(kind: str) -> tempfile.TemporaryDirectory:
    """A temporary directory named bench-KIND-PID-HOST-..., this process's: the next bench.py on this
    machine removes it where this one was killed outright (remove_killed_benches_runs)."""
    import socket

    assert kind in TEMPORARY_KINDS
    return tempfile.TemporaryDirectory(prefix=f"bench-{kind}-{os.getpid()}-{socket.gethostname()}-")


def run_child(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, **kwargs), and a SIGTERM to bench.py (Terminated, under main's
    sigterm_raises) is passed on to the child, which ends as it does on SIGTERM (train.py and
    prepare.py clean up and say so) before bench.py removes its temporary directories. Python's
    default SIGTERM ended bench.py at once, leaving them and a train.py that ran on for its whole
    budget, writing checkpoints into one (hunt, session 26). Ctrl-C reaches the child itself. A
    bench.py killed outright sends the child its SIGTERM through the kernel, on Linux."""
    import functools

    from gpt.errors import Terminated

    if kwargs.pop("capture_output", False):
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if sys.platform == "linux":
        import ctypes
        import signal

        kwargs.setdefault("preexec_fn", functools.partial(_sigterm_when_bench_dies, ctypes.CDLL(None).prctl,
                                                          signal.SIGTERM, os.getpid()))
    with subprocess.Popen(cmd, **kwargs) as proc:
        try:
            out, err = proc.communicate()
        except Terminated:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
        except BaseException:  # (as subprocess.run: Ctrl-C, after the child's 0.25 s to end by it)
            proc.kill()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _timed(fn, repeat: int = 1) -> tuple[float, object]:
    """(seconds, output) of the fastest of `repeat` runs of fn(): the least-noisy figure."""
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - t0
        if best is None or seconds < best[0]:
            best = (seconds, out)
    return best


def first_difference(same) -> str:
    """', the first difference at new token N' for a (B, T) bool tensor of equal tokens, or ''."""
    differ = (~same).any(dim=0).nonzero()
    return f", the first difference at new token {int(differ[0]) + 1}" if len(differ) else ""


def eager_step_with_cudnn(model):
    """The model's eager decode step as a step function of ours: generate_tokens then keeps the
    caller's attention settings (cuDNN allowed) for the step, where its own eager step goes without
    cuDNN on CUDA; prefills go without it either way. It is the step as a CUDA graph captures it."""
    return lambda *args, **kwargs: model.decode_token(*args, **kwargs)


def random_gpt2(n_layer: int, n_head: int, n_embd: int):
    """(the GPT-2-shaped model every decode row times, random weights from seed 0, its tokenizer).
    Speed does not depend on the weights' values; end-of-text never wins, so every row runs its
    full length."""
    import torch

    from gpt.model import GPT, GPTConfig
    from gpt.tokenizer import get_tokenizer

    tok = get_tokenizer("gpt2")
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=n_layer, n_head=n_head, n_embd=n_embd)).eval()
    with torch.no_grad():
        model.transformer.wte.weight[tok.eot_token].zero_()
    return model, tok


@contextlib.contextmanager
def cudnn_attention_off():
    """scaled_dot_product_attention without its cuDNN backend while inside (flash, memory-efficient
    or math instead): cuDNN attention is the default for bf16 on an H100 and builds a plan per shape."""
    import torch

    was = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        yield
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)


def another_length(ids: list[int], block_size: int) -> list[int]:
    """The prompt of cold_and_warm_generate's second call: about half as long again, within the
    context (generate keeps a longer prompt's last block_size tokens: "501 tokens longer" was 24
    longer at --prompt_len=1000, hunt 34-d D12), or half as long where the first fills it."""
    room = block_size - len(ids)
    return ids + ids[: min(len(ids) // 2 + 1, room)] if room > 0 else ids[: max(1, len(ids) // 2)]


def cold_and_warm_generate(n_layer: int, n_head: int, n_embd: int, ids: list[int], tokens: int, device: str,
                           repeat: int, graphed: bool = False, cudnn_attention: bool = True,
                           ) -> tuple[float, float, float]:
    """Seconds of the first model.generate of `tokens` tokens after loading, of the next one with a
    prompt of another length (what a new length costs once the process is warm: a per-shape plan
    would show here), and of the fastest of `repeat` later ones with the first prompt: bf16 weights,
    sample.py's default sampling (temperature 0.8, top-k 200). bench_decode runs it in a fresh
    process, so the first call is a user's first call: no kernel choices, attention plans or
    library handles left from other rows (issue 9: within 1.5x).
    graphed: the decode step replayed from a CUDA graph (`GraphedDecodeStep`), its capture in the cold call.
    cudnn_attention False: scaled_dot_product_attention may not use cuDNN (which loads its library
    and builds a plan per shape at first use); generate's own eager step on CUDA goes without it
    anyway, so True with graphed False runs the eager step through a function of ours, which keeps
    the caller's settings (cuDNN allowed) for the step (prefills go without cuDNN on every path)."""
    import torch

    from gpt.generation import GraphedDecodeStep

    if not cudnn_attention:
        torch.backends.cuda.enable_cudnn_sdp(False)

    model, _ = random_gpt2(n_layer, n_head, n_embd)
    model.to(device=device, dtype=torch.bfloat16)
    prompt = torch.tensor([ids], device=device)
    generator = torch.Generator(device).manual_seed(0)
    step = (GraphedDecodeStep(model) if graphed else eager_step_with_cudnn(model) if cudnn_attention and prompt.is_cuda
            else "auto")
    run = lambda: model.generate(prompt, tokens, temperature=0.8, top_k=200, generator=generator,  # noqa: E731
                                 decode_step=step)
    cold, _ = _timed(run)
    other = torch.tensor([another_length(ids, model.config.block_size)], device=device)
    new_length, _ = _timed(lambda: model.generate(other, tokens, temperature=0.8, top_k=200, generator=generator,
                                                  decode_step=step))
    warm, _ = _timed(run, repeat)
    if graphed and step.failed:
        raise SystemExit("the CUDA-graph capture of the decode step failed (see the warning above)")
    return cold, new_length, warm


def bench_decode(args: argparse.Namespace) -> None:
    """decode_rows, compiling into an empty cache of its own: its first compile of the decode step
    is a first run's, as sample.py's on a fresh machine (the compile break-even's cost), and the
    compiled sample.py rows after it reuse that compilation."""
    from gpt.runtime import kernel_settings, set_kernel_settings

    check_decode_args(args)
    saved = kernel_settings()  # decode_rows turns TF32 on, as sample.py does: undone for in-process callers
    try:
        with fresh_compile_cache():
            decode_rows(args)
    finally:
        set_kernel_settings(saved)


# What decode_rows holds at its peak on the CPU, in copies of the model's float32 weights: its own
# process about 3.9 (peak resident 2.5 GB for the 124M shape, 5.1 GB for a 294M one: the model, its
# bf16 copy, transformers' model, the checkpoint written and read back), and the fresh process of
# the cold/warm row about one more beside it (session 35, bench.py decode --skip_uncached). Counting
# the weights once let a 100,000-layer shape through to the OOM killer (hunt 34-d).
DECODE_FP32_COPIES = 5


def check_decode_args(args: argparse.Namespace) -> None:
    """Shapes and paths that cannot run, refused in one line before the first row rather than with a
    traceback after minutes of rows (audit, 2026-11-26). --sample_wall_out_dir is made absolute:
    its rows then read the same directory from wherever bench.py was started."""
    from gpt.errors import ConfigError
    from gpt.model import GPTConfig

    config = GPTConfig(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd)  # a ConfigError names a bad one
    # Every row builds the model in float32 on the CPU first: a shape larger than the memory is one
    # line here, not an allocator's traceback (hunt, session 26). Its parameters, counted from the
    # config in Python's integers (a meta-device model overflows torch's sizes first):
    import torch

    from gpt.generation import batch_bytes
    from gpt.runtime import check_fits

    params = config.num_params()
    try:
        check_fits(DECODE_FP32_COPIES * 4 * params, torch.device("cpu"),
                   f"its rows, about {DECODE_FP32_COPIES} copies of its float32 weights,")
    except MemoryError as e:
        raise ConfigError(f"the model of --n_layer={args.n_layer} --n_embd={args.n_embd} ({params / 1e6:,.0f}M "
                          f"parameters) does not fit: {e}") from None
    # --batch=1e23 was an OverflowError traceback building the prompt, and a batch past the memory the
    # allocator's, after the model was built (hunt 43-e E5)
    need = batch_bytes(config, args.batch, min(args.prompt_len + args.new_tokens, config.block_size))
    try:
        check_fits(need, torch.device("cpu"), "their KV cache and logits")
    except MemoryError as e:
        raise ConfigError(f"--batch={args.batch:,} rows of model.generate at once do not fit: {e}") from None
    if args.prompt_len > config.block_size:  # (1e5 ids were one argument too long for a child: hunt 32-c F11)
        raise ConfigError(f"--prompt_len {args.prompt_len:,} is past the model's context of {config.block_size:,}: "
                          f"generate keeps only the prompt's last {config.block_size:,} tokens, so the rows would not "
                          f"time the prompt they name; give at most {config.block_size:,}")
    if args.break_even_tokens is not None and not args.sample_wall_out_dir:  # (ignored without a word: hunt 48-h H6)
        raise ConfigError("--break_even_tokens is the length of --sample_wall_out_dir's sample.py runs, which this "
                          "run does not time: give --sample_wall_out_dir=RUN with it, or leave it out")
    if args.uncached_samples and args.skip_uncached:  # (it skipped the row, saying "--uncached_samples runs it")
        raise ConfigError("--uncached_samples times an uncached row, which --skip_uncached skips: give one of them")
    positions = GPTConfig().block_size
    if not args.skip_transformers and args.prompt_len + args.new_tokens > positions:
        raise ConfigError(f"--prompt_len + --new_tokens = {args.prompt_len + args.new_tokens:,} is past GPT-2's "
                          f"{positions:,} positions, where transformers' generate (the reference) stops: give fewer "
                          "tokens, or --skip_transformers")
    if args.sample_wall_out_dir:
        from gpt.checkpoint import find_checkpoint

        # (~ first: `--sample_wall_out_dir=~/run` was looked for in a folder named ~ here, as sample.py
        # itself would not: hunt 35-f F11)
        args.sample_wall_out_dir = os.path.abspath(os.path.expanduser(args.sample_wall_out_dir))
        try:
            find_checkpoint(args.sample_wall_out_dir)
        except FileNotFoundError as e:
            raise ConfigError(f"--sample_wall_out_dir: {e}") from None


def decode_rows(args: argparse.Namespace) -> None:
    """Decode tokens/s of the GPT-2 124M shape (random weights): the model's generate (cached fp32,
    uncached fp32, cached bf16 weights), transformers' generate on the very same weights, and the
    command line (`sample.main`, from a checkpoint written here) at batch 1 and --num_samples.
    Every row is the best of --repeat runs, ours and transformers' alike; the slow uncached
    baseline runs once. The command line's figure is its own generation time (prefill included,
    loading excluded), read from its --json output. Then the ratios of those rows, and sample.py's
    wall time on --sample_wall_out_dir's run."""
    import torch

    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True  # as sample.py sets it: every row alike
    from gpt.runtime import Dist, pick_device

    device = pick_device(args.device if args.device != "auto" or torch.cuda.is_available() else "cpu", Dist())
    model, tok = random_gpt2(args.n_layer, args.n_head, args.n_embd)
    text, ids = decode_prompt(tok, args.prompt_len)
    prompt = torch.tensor([ids] * args.batch, device=device)
    print(f"decode: GPT-2 shape {args.n_layer}L/{args.n_head}H/{args.n_embd}C ({model.num_params() / 1e6:.1f}M), "
          f"prompt {args.prompt_len}, {args.new_tokens} new tokens, greedy, on {device}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; each row the best of {args.repeat} run(s), the uncached ones 1 run")
    rows = DecodeRows()
    tokens_fp32 = model_generate_rows(args, model, prompt, ids, device, rows)
    hf = None if args.skip_transformers else transformers_reference(model, device)
    hf_tokens = None
    if hf is not None:
        hf_tokens = transformers_row(rows, "transformers generate, cache, fp32", hf, prompt, args.new_tokens,
                                     args.repeat, model.config.vocab_size)
    command_line_rows(args, model, tok.n_vocab, text, device, hf, prompt, rows)
    decode_ratios(args, rows, tokens_fp32, hf_tokens)
    if args.sample_wall_out_dir:
        sample_wall_rows(args, device)
        sample_compile_break_even(args.sample_wall_out_dir, args.break_even_tokens or BREAK_EVEN_TOKENS, str(device))


def decode_prompt(tok, prompt_len: int) -> tuple[str, list[int]]:
    """(the prompt every decode row starts from, its ids): prompt_len words, one GPT-2 token each."""
    words = "the quick brown fox jumps over the lazy dog".split()
    text = "".join(" " + words[i % len(words)] for i in range(prompt_len))
    ids = tok.encode(text)
    assert len(ids) == prompt_len, (len(ids), prompt_len)
    return text, ids


class DecodeRows:
    """The decode rows said so far: each row's tokens/s by its label (the ratios' terms), and the dtype
    sample.py's --dtype=auto chose, by row (its ratio's target)."""

    def __init__(self):
        self.speeds: dict[str, float] = {}
        self.auto_dtypes: dict[str, str] = {}

    def say(self, label: str, tokens: int, seconds: float, runs: int, note: str = "") -> None:
        self.speeds[label] = tokens / seconds
        runs_note = f"best of {runs}" if runs > 1 else "1 run"
        print(f"  {label:<44} {self.speeds[label]:8.1f} tokens/s  ({seconds:.2f} s, {runs_note}){note}", flush=True)


def model_generate_rows(args: argparse.Namespace, model, prompt, ids: list[int], device, rows: DecodeRows):
    """The model's generate at batch --batch (the rows of issue 2): cached and uncached fp32, the cold
    and warm calls in a fresh process, cached bf16 weights, and on CUDA the steps that replay from a
    graph or are compiled. Leaves the model in float32 on the device; returns the cached fp32 row's tokens
    (transformers' must equal them)."""
    import torch

    print(f"model.generate, batch {args.batch}:")
    model.to(device)

    def ours(label: str, dtype: torch.dtype, use_cache: bool, runs: int):
        m = model.to(dtype)
        m.generate(prompt, 4, temperature=0, use_cache=use_cache)  # warm-up
        seconds, out = _timed(lambda: m.generate(prompt, args.new_tokens, temperature=0, use_cache=use_cache), runs)
        rows.say(label, args.batch * args.new_tokens, seconds, runs)
        return out

    tokens_fp32 = ours("ours, KV cache, fp32", torch.float32, True, args.repeat)
    if not args.skip_uncached:
        ours("ours, no cache, fp32", torch.float32, False, 1)
    fresh_process_rows(args, ids, device, model.config.block_size)
    tokens_bf16 = ours("ours, KV cache, bf16 weights", torch.bfloat16, True, args.repeat)
    if device.type == "cuda":
        bf16 = model.to(torch.bfloat16)
        graph_rows(args, bf16, prompt, rows, tokens_bf16)
        compiled_step_rows(args, bf16, prompt, device, rows)
        rows_without_cudnn_attention(args, bf16, prompt, rows)
    model.to(torch.float32)
    return tokens_fp32


def fresh_process_rows(args: argparse.Namespace, ids: list[int], device, block_size: int) -> None:
    """Issue 9's cold / warm model.generate (cold_and_warm_generate), each variant in a process of its
    own: the eager step alone off CUDA; on CUDA also the graphed step, and both without cuDNN attention."""
    import json

    spec = dict(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd, ids=ids, tokens=args.cold_tokens,
                device=str(device), repeat=args.repeat)
    code = "import bench, json, sys; print(json.dumps(bench.cold_and_warm_generate(**json.loads(sys.argv[1]))))"
    variants = [(False, True)]  # (graphed, cuDNN attention allowed)
    if device.type == "cuda":
        variants += [(True, True), (False, False), (True, False)]
    for graphed, cudnn in variants:
        proc = run_child([sys.executable, "-c", code, json.dumps({**spec, "graphed": graphed,
                                                                        "cudnn_attention": cudnn})],
                              capture_output=True, text=True, cwd=ROOT)
        if proc.returncode:
            raise SystemExit(f"bench.py decode: the fresh-process generate failed:\n{proc.stderr[-3000:]}")
        cold, new_length, warm = json.loads(proc.stdout.splitlines()[-1])
        how = ("" if device.type != "cuda" else ", CUDA graph of the eager step" if graphed
               else ", eager step with cuDNN attention" if cudnn else ", eager step (generate's default)")
        how += "" if cudnn or not graphed else ", no cuDNN attention"
        added = len(another_length(ids, block_size)) - len(ids)
        print(f"  cold / warm model.generate in a fresh process, bf16, sample.py's sampling, {args.cold_tokens} tokens"
              f"{how}: {cold:.2f} s / {warm:.2f} s = {cold / warm:.2f}x  (target <= 1.5x); the next call, "
              f"a prompt {abs(added)} tokens {'longer' if added > 0 else 'shorter'}: {new_length:.2f} s = "
              f"{new_length / warm:.2f}x")


def graph_rows(args: argparse.Namespace, m, prompt, rows: DecodeRows, tokens_bf16) -> None:
    """On CUDA, the bf16 model m's eager step with cuDNN attention allowed (which generate's own goes
    without), then that step replayed from a CUDA graph (no compile), whose greedy tokens must equal both
    eager steps' (tokens_bf16: generate's own)."""
    from gpt.generation import GraphedDecodeStep

    new, repeat = args.new_tokens, args.repeat
    with_cudnn = eager_step_with_cudnn(m)
    m.generate(prompt, 4, temperature=0, decode_step=with_cudnn)
    seconds, tokens_cudnn = _timed(lambda: m.generate(prompt, new, temperature=0, decode_step=with_cudnn), repeat)
    rows.say("ours, eager step with cuDNN attention, bf16", args.batch * new, seconds, repeat)
    graphed_step = GraphedDecodeStep(m)
    capture_s, _ = _timed(lambda: m.generate(prompt, 4, temperature=0, decode_step=graphed_step))
    if graphed_step.failed:
        raise SystemExit("bench.py decode: capturing the decode step in a CUDA graph failed (see the warning "
                         "above)")
    seconds, tokens_graphed = _timed(lambda: m.generate(prompt, new, temperature=0, decode_step=graphed_step),
                                     repeat)
    rows.say("ours, CUDA graph of the eager step, bf16", args.batch * new, seconds, repeat,
             note=f"  [a first 4-token generate, capture included: {capture_s:.2f} s]")
    for what, eager in (("as captured", tokens_cudnn), ("of generate's eager step", tokens_bf16)):
        same = tokens_graphed[:, args.prompt_len:] == eager[:, args.prompt_len:]  # the new tokens only
        print(f"  its greedy tokens equal to the eager step's, {what}: {same.float().mean().item():.1%}"
              f"{first_difference(same)}")


def compiled_step_rows(args: argparse.Namespace, m, prompt, device, rows: DecodeRows) -> None:
    """On CUDA, the bf16 model m's compiled CUDA-graph step (sampling inside): in generate, alone at fixed
    inputs (what the generate loop costs), when compiling it pays off against the eager and the graphed
    step (their rows before), and with sample.py's top-k sampling."""
    import torch

    from gpt.generation import compiled_decode_step

    new, repeat = args.new_tokens, args.repeat
    step = compiled_decode_step(m)
    compile_s = step.warm_up(args.batch)  # the first compile (bench_decode): the break-even's cost
    step.warm_up(args.batch, temperature=0.8, top_k=200)  # the sampling row's own graph, untimed
    if step.failed:  # it fell back to the eager step (the warning above): its rows would not be compiled ones
        raise SystemExit("bench.py decode: the compiled CUDA-graph decode step failed (see the warning above)")
    seconds, _ = _timed(lambda: m.generate(prompt, new, temperature=0, decode_step=step), repeat)
    rows.say("ours, compiled CUDA graph step, bf16", args.batch * new, seconds, repeat,
             note=f"  [compiled in {compile_s:.1f} s]")

    def step_alone():  # the same step at fixed inputs, no generate loop around it, one wait at the end
        tok, pos = m.decode_inputs
        with torch.inference_mode():
            for i in range(new):
                step(tok, pos.fill_((args.prompt_len + i) % m.config.block_size), None, None, temperature=0,
                     top_k=None, top_p=None, repetition_penalty=1.0, vocab_limit=m.config.vocab_size)
        torch.cuda.synchronize(device)
    alone, _ = _timed(step_alone, repeat)
    rows.say("ours, compiled step alone (no generate loop)", args.batch * new, alone, repeat,
             note=f"  [generate reaches {alone / seconds:.0%} of it]")
    for what, uncompiled in (("eager", "ours, KV cache, bf16 weights"),
                             ("graphed", "ours, CUDA graph of the eager step, bf16")):
        compiled = rows.speeds["ours, compiled CUDA graph step, bf16"]
        print(f"  {break_even(compile_s, rows.speeds[uncompiled], compiled, what)}")
    sampled, _ = _timed(lambda: m.generate(prompt, new, temperature=0.8, top_k=200, decode_step=step,
                                           generator=torch.Generator(device).manual_seed(0)), repeat)
    rows.say("ours, compiled, bf16, top-k 200 sampling", args.batch * new, sampled, repeat)


def rows_without_cudnn_attention(args: argparse.Namespace, m, prompt, rows: DecodeRows) -> None:
    """On CUDA, the bf16 model m's graphed and compiled steps again without cuDNN attention (issue 9: choose
    the attention backend of decoding by measurement)."""
    import torch

    from gpt.generation import GraphedDecodeStep, compiled_decode_step

    new, repeat = args.new_tokens, args.repeat
    torch._dynamo.reset()  # compile again: the backend is chosen when the graph is traced
    with cudnn_attention_off():
        graphed_step = GraphedDecodeStep(m)
        m.generate(prompt, 4, temperature=0, decode_step=graphed_step)  # captures
        seconds, _ = _timed(lambda: m.generate(prompt, new, temperature=0, decode_step=graphed_step), repeat)
        if graphed_step.failed:
            raise SystemExit("bench.py decode: capturing the decode step in a CUDA graph failed (see above)")
        rows.say("ours, CUDA graph of the eager step, bf16, no cuDNN attention", args.batch * new, seconds, repeat)
        step = compiled_decode_step(m)
        compile_s = step.warm_up(args.batch)
        if step.failed:
            raise SystemExit("bench.py decode: the compiled CUDA-graph decode step failed (see the warning above)")
        seconds, _ = _timed(lambda: m.generate(prompt, new, temperature=0, decode_step=step), repeat)
        rows.say("ours, compiled CUDA graph step, bf16, no cuDNN attention", args.batch * new, seconds, repeat,
                 note=f"  [compiled in {compile_s:.1f} s]")


def transformers_reference(model, device):
    """transformers' GPT2LMHeadModel with the very same weights as model (saved and loaded back), on
    device: the reference of the decode ratios; None where transformers is not installed."""
    try:
        from transformers import GPT2LMHeadModel
    except ImportError:
        print("  transformers not installed: no reference")
        return None
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with temporary_directory("decode") as tmp:
        model.save_pretrained(tmp)  # the very same weights
        return GPT2LMHeadModel.from_pretrained(tmp).eval().to(device)


def transformers_row(rows: DecodeRows, label: str, hf, batch_prompt, new: int, repeat: int, vocab_size: int):
    """transformers' greedy generate of `new` tokens after batch_prompt, cached: its row, and its tokens."""
    import torch

    kw = dict(do_sample=False, use_cache=True, pad_token_id=vocab_size - 1,
              attention_mask=torch.ones_like(batch_prompt))
    with torch.inference_mode():
        hf.generate(batch_prompt, max_new_tokens=4, min_new_tokens=4, **kw)
        seconds, out = _timed(lambda: hf.generate(batch_prompt, max_new_tokens=new, min_new_tokens=new, **kw),
                              repeat)
    rows.say(label, batch_prompt.size(0) * new, seconds, repeat)
    return out


def command_line_rows(args: argparse.Namespace, model, n_vocab: int, text: str, device, hf, prompt,
                      rows: DecodeRows) -> None:
    """The command line: sample.main on a checkpoint of model written here, prompted with text, at
    batch 1 and at --num_samples (one shared prefill, with transformers' row at that batch beside it)."""
    from gpt.checkpoint import save_checkpoint

    ns, repeat = args.num_samples, args.repeat
    with temporary_directory("decode") as run_dir:
        save_checkpoint(run_dir, 0, model.cpu(), state={}, meta={
            "model_config": model.config.to_dict(), "tokenizer": "gpt2", "vocab_size": n_vocab, "config": {}})
        model.to(device)

        def cli_row(label: str, num_samples: int, extra: list[str], runs: int) -> None:
            sample_py_row(rows, label, [f"--out_dir={run_dir}", f"--start={text}", f"--num_samples={num_samples}"],
                          [f"--device={device}", *extra], args.new_tokens, runs)

        plain = ["--compile=false", "--cuda_graph=false"]  # the eager step (sample.py's default on a CPU)
        graph = ["--compile=false", "--cuda_graph=true"]  # sample.py's default on CUDA
        print("sample.py (the command line), batch 1:")
        cli_row("sample.py, KV cache, fp32", 1, [*plain, "--dtype=float32"], repeat)
        cli_row("sample.py, KV cache, --dtype=auto", 1, [*plain, "--dtype=auto"], repeat)
        if not args.skip_uncached:
            cli_row("sample.py, no cache, fp32", 1, [*plain, "--dtype=float32", "--use_cache=false"], 1)
        if device.type == "cuda":
            cli_row("sample.py, compiled static cache (CUDA graphs)", 1, ["--compile=true", "--dtype=auto"], repeat)
            # sample.py captures at the first token: unlike a compile, the capture is in the row's time
            cli_row("sample.py, CUDA graph of the eager step", 1, [*graph, "--dtype=auto"], repeat)
        if hf is not None:
            print("  (transformers at batch 1: the model.generate section's row)")
        print(f"sample.py --num_samples={ns} (one shared prefill):")
        cli_row(f"sample.py x{ns}, KV cache, fp32", ns, [*plain, "--dtype=float32"], repeat)
        cli_row(f"sample.py x{ns}, KV cache, --dtype=auto", ns, [*plain, "--dtype=auto"], repeat)
        if args.uncached_samples and not args.skip_uncached:
            cli_row(f"sample.py x{ns}, no cache, fp32", ns, [*plain, "--dtype=float32", "--use_cache=false"], 1)
        else:
            print(f"  sample.py x{ns}, no cache: skipped (about {ns}x the batch-1 uncached time; --uncached_samples runs it)")
        if device.type == "cuda":
            cli_row(f"sample.py x{ns}, compiled static cache (CUDA graphs)", ns, ["--compile=true", "--dtype=auto"], repeat)
            cli_row(f"sample.py x{ns}, CUDA graph of the eager step", ns, [*graph, "--dtype=auto"], repeat)
        if hf is not None:
            transformers_row(rows, f"transformers generate x{ns}, cache, fp32", hf,
                             prompt[:1].expand(ns, -1).contiguous(), args.new_tokens, repeat, model.config.vocab_size)


def sample_py_row(rows: DecodeRows, label: str, run: list[str], extra: list[str], new: int, runs: int) -> None:
    """The fastest of `runs` greedy sample.py runs of `new` tokens (sample_py_generation), after a 4-token one
    (warm-up, and with --compile compilation); `auto_dtypes` takes the dtype its --dtype=auto chose."""
    sample_py_generation(run, extra, 4)  # warm-up (and, with --compile, compilation)
    best = None
    for _ in range(runs):
        tokens, seconds, info = sample_py_generation(run, extra, new)
        best = (tokens, seconds, info) if best is None or seconds < best[1] else best
    if "--compile=true" in extra and not best[2].endswith("compile on"):  # fell back to eager
        raise SystemExit(f"bench.py decode: sample.py {' '.join(extra[1:])} did not compile: {best[2]}")
    chose = re.search(r"^[^,]*, (\w+)", best[2])
    if "auto" in label and chose:
        rows.auto_dtypes[label] = chose[1]
    rows.say(label, best[0], best[1], runs, note=f"  [auto: {chose[1]}]" if "auto" in label and chose else "")


def sample_py_generation(run: list[str], extra: list[str], max_new: int) -> tuple[int, float, str]:
    """(tokens, generation seconds, sample.py's description of the model) of one greedy sample.main run in
    this process: `run` (its --out_dir, --start and --num_samples), --max_new_tokens=max_new, and `extra`
    (its --device first). Its seconds are its own --json figure: prefill included, loading excluded."""
    import io
    import json

    import sample
    from gpt.errors import Terminated

    out, err = io.StringIO(), io.StringIO()
    argv = [*run, f"--max_new_tokens={max_new}", "--temperature=0", "--json", *extra]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = sample.main(argv)
    if status in (130, 143):  # Ctrl-C or SIGTERM, which sample.main took: bench.py's own stop, not a failure
        raise Terminated if status == 143 else KeyboardInterrupt
    if status:
        raise SystemExit(f"sample.py {' '.join(argv[1:])} failed:\n{err.getvalue()}")
    if "CUDA graph failed" in err.getvalue():  # it warned and decoded eagerly: not the row it says
        raise SystemExit(f"bench.py decode: sample.py {' '.join(argv[1:])}:\n{err.getvalue()[-2000:]}")
    samples = [json.loads(line) for line in out.getvalue().splitlines()]
    assert all(s["tokens"] == max_new for s in samples), "a sample ended early"
    info = next((line for line in err.getvalue().splitlines() if " | " in line), "")
    return sum(s["tokens"] for s in samples), max(s["seconds"] for s in samples), info.split(" | ")[-1]


def decode_ratios(args: argparse.Namespace, rows: DecodeRows, tokens_fp32, hf_tokens) -> None:
    """The ratios of the rows (same run; targets from issues 2 and 5): ours against our uncached
    baseline and transformers', sample.py's likewise, and whether the greedy tokens equal transformers'."""
    speeds, ns = rows.speeds, args.num_samples

    def ratio(label: str, num: str, den: str | None, target: str) -> None:
        if den in speeds and num in speeds:
            print(f"  {label + ':':<52} {speeds[num] / speeds[den]:6.2f}x  (target >= {target})")

    print("ratios (same run; targets from issues 2 and 5):")
    ref, ref_n = "transformers generate, cache, fp32", f"transformers generate x{ns}, cache, fp32"
    ratio("cached fp32 / uncached fp32", "ours, KV cache, fp32", "ours, no cache, fp32", "5")
    ratio("cached fp32 / transformers fp32", "ours, KV cache, fp32", ref, "1.0")
    ratio("cached bf16 / transformers fp32", "ours, KV cache, bf16 weights", ref, "2.0")
    if hf_tokens is not None:
        same = hf_tokens[:, args.prompt_len:] == tokens_fp32[:, args.prompt_len:]  # the new tokens only
        print(f"  greedy tokens equal to transformers': {same.float().mean().item():.1%}")
    ratio("sample.py cached / uncached, fp32, batch 1", "sample.py, KV cache, fp32", "sample.py, no cache, fp32", "5")
    def auto_target(row_label: str) -> str:  # 2.0 where auto decodes in bf16; fp32 (no native bf16, or a model
        # under 20M parameters) is the fp32 row again: its target was "2.0 on this CPU" there too (hunt, session 24)
        return "1.0: auto is float32 here" if rows.auto_dtypes.get(row_label) == "float32" else "2.0"

    if args.batch == 1:
        ratio("sample.py fp32 / transformers fp32, batch 1", "sample.py, KV cache, fp32", ref, "1.0")
        auto = "sample.py, KV cache, --dtype=auto"
        ratio("sample.py --dtype=auto / transformers fp32, batch 1", auto, ref, auto_target(auto))
    ratio(f"sample.py fp32 / transformers fp32, x{ns}", f"sample.py x{ns}, KV cache, fp32", ref_n, "1.0")
    auto = f"sample.py x{ns}, KV cache, --dtype=auto"
    ratio(f"sample.py --dtype=auto / transformers fp32, x{ns}", auto, ref_n, auto_target(auto))
    compiled = speeds.get("ours, compiled CUDA graph step, bf16")
    if compiled and args.batch == 1:
        print(f"  compiled CUDA-graph decode, bf16, batch 1: {compiled:,.0f} tokens/s  (target >= 2,000 on an H100)")


def sample_wall_rows(args: argparse.Namespace, device) -> None:
    """`python sample.py --out_dir=--sample_wall_out_dir --max_new_tokens=300` end to end in a fresh
    process, interpreter start and loading included: its default, and on CUDA also without a graph."""
    for extra in ([], ["--cuda_graph=false"]) if device.type == "cuda" else ([],):  # the default: a graph on CUDA
        cmd = [sys.executable, "sample.py", f"--out_dir={args.sample_wall_out_dir}", "--max_new_tokens=300",
               *extra, *([f"--device={args.device}"] if args.device != "auto" else [])]  # where the other rows ran
        t0 = time.perf_counter()
        proc = run_child(cmd, capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - t0
        if proc.returncode or "CUDA graph failed" in proc.stderr:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
        print(f"  {' '.join(cmd[1:])}: {wall:.1f} s wall, interpreter start and loading included  (target <= 3 s)")


def break_even(compile_s: float, uncompiled: float, compiled: float, what: str = "eager", cuda: bool = True) -> str:
    """From how many tokens per call compiling the decode step pays for its compile time:
    compile seconds / (1 / uncompiled tokens/s - 1 / compiled tokens/s), against sample.py's rule
    (on CUDA only: off it, --compile=auto never compiles); `what` names the uncompiled step (eager, graphed)."""
    from gpt.generation import COMPILE_MIN_TOKENS

    rule = (f"(sample.py's --compile=auto threshold: {COMPILE_MIN_TOKENS:,})" if cuda
            else "(sample.py's --compile=auto compiles on CUDA only)")
    if compiled <= uncompiled:
        return f"compiling never pays off: compiled {compiled:,.0f} <= {what} {uncompiled:,.0f} tokens/s {rule}"
    return (f"compiling pays off from {compile_s / (1 / uncompiled - 1 / compiled):,.0f} tokens per call: "
            f"{compile_s:.1f} s to compile, {uncompiled:,.0f} tokens/s {what}, {compiled:,.0f} compiled {rule}")


def sample_compile_break_even(out_dir: str, tokens: int, device: str) -> None:
    """The compile break-even of a trained run's own model (issue 9: the GPU default's, not only
    GPT-2 124M): `sample.py --max_new_tokens=TOKENS --json` with --compile=false and =true, each in
    a fresh process, with sample.py's default sampling (and --cuda_graph's: the uncompiled step is
    the graphed one on CUDA); the compiling one from an empty compile cache, as a first run on a
    fresh machine. The speeds are sample.py's own (--json), the compile time the one it prints."""
    import json
    import re

    def sample_py(compile: str) -> tuple[float, int, str]:
        cmd = [sys.executable, "sample.py", f"--out_dir={out_dir}", f"--max_new_tokens={tokens}", "--json",
               f"--compile={compile}", f"--device={device}"]
        proc = run_child(cmd, capture_output=True, text=True, cwd=ROOT)
        if proc.returncode:
            raise SystemExit(f"{' '.join(cmd[1:])} failed:\n{proc.stderr[-3000:]}")
        sample = json.loads(proc.stdout.splitlines()[-1])
        return sample["tokens_per_s"], sample["tokens"], proc.stderr

    eager, made_eager, _ = sample_py("false")
    with fresh_compile_cache():
        compiled, made_compiled, err = sample_py("true")
    took = re.search(r"compiled the decode step in ([\d.]+) s", err)
    if not took:  # sample.py warns and decodes eagerly when compiling fails: no break-even to report
        raise SystemExit(f"sample.py --out_dir={out_dir} --compile=true did not compile:\n{err[-3000:]}")
    print(f"  sample.py --out_dir={out_dir} --max_new_tokens={tokens} --compile=false / true (fresh processes; "
          f"{made_eager} / {made_compiled} tokens made): "
          f"{break_even(float(took[1]), eager, compiled, 'uncompiled', cuda=device.startswith('cuda'))}")


def positive_int(text: str) -> int:
    """An argparse type: bad values are argparse's one-line error, not a traceback in the middle of a run."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


# --init_from=resume in a run of bench.py's: train.py said "no complete checkpoint in /tmp/bench-train-..."
RESUME_REFUSED = ("--init_from=resume continues the run in --out_dir, which bench.py makes anew for every run (a "
                  "temporary directory): there is nothing to resume; a run's directory (--init_from=out) starts from its "
                  "weights")


def checked_train_config(argv: list[str], measured: str):
    """train.py's config of the command line argv, checked as train.py checks it (a ConfigError): train and
    quality check every run's before the first runs, where a bad one was found after the runs before it.
    `measured` is what the benchmark takes of a run ("time"), which --eval_only leaves nothing to."""
    from gpt.config import check_options_apply, command_line_keys, parse_args
    from gpt.errors import ConfigError

    cfg = parse_args(argv)[0]
    cfg.validate(1)
    if cfg.eval_only:  # (it trained nothing, wrote no checkpoint or metrics.jsonl, and bench.py's read was a traceback)
        raise ConfigError(f"--eval_only trains nothing to {measured}: leave it out")
    if cfg.init_from == "resume":  # (train.py refused it once the runs before it had run, or prepared their data:
        # hunt 48-h H4)
        raise ConfigError(RESUME_REFUSED)
    check_options_apply(cfg, command_line_keys(argv))  # (as train.py does: review 29)
    return cfg


def without_valid_options(e: Exception) -> str:
    """A train.py option's error without the list of valid options that follows an unknown one's (train.py
    --help's)."""
    return str(e).split("\nvalid options:")[0]


def refuse_its_own(argv: list[str], own: dict[str, str], command: str) -> None:
    """Refuses a train.py option the benchmark sets itself: it was replaced without a word (a typed
    --out_dir ran in a temporary directory: hunt 32-c)."""
    from gpt.config import command_line_keys
    if typed := [k for k in own if k in command_line_keys(argv)]:
        raise SystemExit(f"bench.py {command}: error: " + "; ".join(f"--{k} is set by bench.py ({own[k]})" for k in typed)
                         + f": leave {'it' if len(typed) == 1 else 'them'} out")


def distinct(values: str, option: str) -> list[str]:
    """A comma-separated option's values, each once: a repeated one would run twice under one name,
    pooling its records (train) or sharing its run directories (quality)."""
    from gpt.errors import UsageError

    # (UsageError: `bench.py COMMAND: error: ...` as the other bad values; it was `bench.py: ...`: hunt 44-c C6)
    items = values.split(",")
    if "" in items:  # (an empty --recipes= ran the default recipes, some 15 minutes of them: hunt, session 26)
        raise UsageError(f"{option} has an empty value: give {option}=A or {option}=A,B")
    if twice := sorted({v for v in items if items.count(v) > 1}):
        raise UsageError(f"{option} names {', '.join(twice)} more than once")
    return items


def positive_float(text: str) -> float:
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be > 0 and finite, got {text}")
    if value < sys.float_info.min:  # (a subnormal: quality --time_budget=1e-320 ran every recipe for its warm-up,
        # "budgeted 9.99989e-321 s", the value it had kept of the one given: hunt 44-c C8)
        raise argparse.ArgumentTypeError(f"must be at least {sys.float_info.min:.6g} (the smallest normal float), "
                                         f"got {text}")
    return value


BREAK_EVEN_TOKENS = 1000  # --break_even_tokens's default


def add_decode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sample_wall_out_dir", default="", help="also time `python sample.py --out_dir=THIS "
                                                            "--max_new_tokens=300` end to end (e.g. out, after the "
                                                            "default GPU run)")
    p.add_argument("--break_even_tokens", type=positive_int, default=None,
                   help="with --sample_wall_out_dir: tokens of its compile-off and compile-on sample.py runs, "
                        f"whose speeds and compile time give the compile break-even of that model (default: "
                        f"{BREAK_EVEN_TOKENS:,})")
    # (the shape's defaults are GPT-2 124M's, which the README's decode figures are for: --help showed no value)
    p.add_argument("--n_layer", type=positive_int, default=12,
                   help="blocks of the model, random weights of GPT-2's vocabulary (default: 12, GPT-2 124M's)")
    p.add_argument("--n_head", type=positive_int, default=12, help="attention heads (default: 12)")
    p.add_argument("--n_embd", type=positive_int, default=768, help="embedding width (default: 768)")
    p.add_argument("--batch", type=positive_int, default=1, help="batch of the model.generate rows (default: 1)")
    p.add_argument("--num_samples", type=positive_int, default=8, help="the command line's batched rows (default: 8)")
    p.add_argument("--prompt_len", type=positive_int, default=64, help="prompt tokens (default: 64)")
    p.add_argument("--new_tokens", type=positive_int, default=256,
                   help="tokens generated in each timed row (default: 256)")
    p.add_argument("--cold_tokens", type=positive_int, default=200,
                   help="tokens of the cold and warm generate calls in a fresh process (default: 200, issue 9's)")
    p.add_argument("--repeat", type=positive_int, default=3,
                   help="time every row this many times and report the fastest (default: 3); uncached rows run once")
    p.add_argument("--device", default="auto", help="auto (cuda if available, else cpu), cpu, cuda")
    p.add_argument("--skip_uncached", action="store_true", help="skip the slow uncached baselines")
    p.add_argument("--uncached_samples", action="store_true",
                   help="also time the uncached baseline at --num_samples (minutes on a CPU)")
    p.add_argument("--skip_transformers", action="store_true", help="skip the transformers reference")


# ----------------------------------------------------------------------------- prepare


def bench_prepare(args: argparse.Namespace) -> None:
    """Single-process tokenizer speed vs data/prepare.py end to end (text files in -> shards on
    disk, all cores, in a fresh process) on the same text: the Shakespeare plays copied until
    there are args.mb MB. Then peak memory of prepare and its workers, and the loader's speed."""
    import math
    from pathlib import Path

    from gpt.errors import UsageError
    from gpt.prepare import _cpu_count, check_num_proc
    from gpt.sources import PrepareError, shakespeare_files, shakespeare_play_text

    try:  # prepare.py's own check, before the copies are written (review 32)
        check_num_proc(args.num_proc)
    except PrepareError as e:
        raise UsageError(str(e)) from None
    cores = args.num_proc if args.num_proc is not None else _cpu_count()  # (prepare's own default: one a core)
    core_s, process_s = ("core", "process") if cores == 1 else ("cores", "processes")
    plays = [(p.stem, shakespeare_play_text(p.read_text(encoding="utf-8"))) for p in shakespeare_files()]
    corpus_bytes = sum(len(text.encode()) for _, text in plays)
    copies = math.ceil(args.mb * 1e6 / corpus_bytes)
    # The loader's batch of windows must fit in the train split: TrainBatches refused it only once the text was
    # prepared (hunt 50-a A2). Each play is a document, ended by an end-of-text; a batch past all the copies' tokens
    # can never fit (one within them may still be refused after preparing: the train split is known only then).
    from gpt.tokenizer import get_tokenizer

    tok = get_tokenizer(args.tokenizer)
    prepared = copies * sum(len(tok.encode(text)) + 1 for _, text in plays)
    if (one_batch := args.batch_size * (args.block_size + 1)) > prepared:
        raise UsageError(f"the loader's batch of --batch_size {args.batch_size:,} windows of --block_size + 1 = "
                         f"{args.block_size + 1:,} tokens is {one_batch:,} tokens, more than the {prepared:,} that "
                         f"--mb {args.mb:g} prepares (both splits): give a smaller --batch_size or --block_size, or a "
                         f"larger --mb")
    with temporary_directory("prepare") as tmp:
        text_dir, out_dir = Path(tmp) / "text", Path(tmp) / "shards"
        write_text_copies(tmp, text_dir, plays, copies, corpus_bytes, args.mb)
        total_mb = copies * corpus_bytes / 1e6
        print(f"prepare: {total_mb:.1f} MB of text (the Shakespeare plays x {copies}, {copies * len(plays)} files), "
              f"{args.tokenizer} tokenizer, {cores} {core_s}")
        seconds, inner, main_kb, worker_kb = prepare_end_to_end(text_dir, out_dir, args.tokenizer, cores)
        single = tokenizer_mb_s(tok, plays, corpus_bytes, args.seconds)
        name = "tiktoken encode_ordinary" if tok.name == "gpt2" else f"{tok.name}.encode"
        print(f"  tokenizer, 1 process ({name}): {single:.1f} MB/s; x {cores} {core_s} = {cores * single:.1f} MB/s")
        e2e = total_mb / seconds
        print(f"  data/prepare.py end to end, {cores} {process_s}: {e2e:.1f} MB/s = {e2e / (cores * single):.2f} x "
              f"(cores x single-process)  [target >= 0.80]  ({seconds:.1f} s with interpreter start and imports)")
        if inner:
            steady = float(inner.group(2))
            print(f"    without process start (prepare's own {inner.group(1)} s): {steady:.1f} MB/s = "
                  f"{steady / (cores * single):.2f} x")
        if cores == 1:  # prepare tokenizes in its own process: no worker to report
            print(f"  peak RSS: {main_kb / 1024:.0f} MB, one process  [target < 1024 MB]")
        else:
            together = (main_kb + cores * worker_kb) / 1024
            print(f"  peak RSS: main process {main_kb / 1024:.0f} MB, largest worker {worker_kb / 1024:.0f} MB; "
                  f"all {cores + 1} processes together <= {together:.0f} MB  [target < 1024 MB]")
        loader_row(out_dir, args.batch_size, args.block_size, args.seconds)


def write_text_copies(tmp: str, text_dir, plays: list[tuple[str, str]], copies: int, corpus_bytes: int,
                      mb: float) -> None:
    """The plays, `copies` times, in text_dir under tmp: one file per play and copy, one document each."""
    import shutil
    from pathlib import Path

    from gpt.errors import UsageError
    from gpt.files import describe_error

    # the copies and their shards (2 bytes a token: twice the text with the byte tokenizer): a --mb
    # past the disk filled it, and a write that failed was a traceback (hunt 32-c F8)
    need, free = 3 * copies * corpus_bytes, shutil.disk_usage(tmp).free
    if need > free:
        raise UsageError(f"--mb {mb:g} needs about {need / 1e6:,.0f} MB in {Path(tmp).parent} for the text "
                         f"and its shards, which has {free / 1e6:,.0f} MB free")
    try:
        for c in range(copies):  # one file per play and copy: one document each
            (text_dir / f"copy{c:03d}").mkdir(parents=True)
            for name, text in plays:
                (text_dir / f"copy{c:03d}" / f"{name}.txt").write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"writing the text copies in {tmp}: {describe_error(e)}") from None


def prepare_end_to_end(text_dir, out_dir, tokenizer: str, cores: int):
    """(seconds, prepare's own time and rate as it printed them (a re.Match, or None), the peak RSS in kB of its
    main process and of its largest worker) of data/prepare.py on text_dir, end to end in a fresh process, as a
    user runs it."""
    import json

    # Its own peak RSS is VmHWM, the peak of its memory since exec: Linux carries ru_maxrss over
    # fork and exec, so the child of this process (which has imported torch) reported this
    # process's 728 MB where data/prepare.py alone peaks at 80 MB (hunt, session 24). Its
    # workers, forked from it, start from its size.
    script = ("import json, resource, sys; from gpt.prepare import main; rc = main(sys.argv[1:]); "
              "hwm = [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')]; "
              "print(json.dumps([hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
              "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss])); sys.exit(rc)")
    cmd = [sys.executable, "-c", script, "--input", str(text_dir), "--out_dir", str(out_dir),
           "--tokenizer", tokenizer, "--num_proc", str(cores)]
    start = time.perf_counter()
    run = run_child(cmd, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    if run.returncode:
        raise SystemExit(f"prepare failed:\n{run.stderr}")
    main_kb, worker_kb = json.loads(run.stdout.splitlines()[-1])
    # prepare's own time, from the tokenizer loaded to the rename, and its rate from its unrounded time (the
    # MB over the time it prints, rounded to 0.1 s, said 24.8 MB/s where prepare measured 26.2 and 32.2)
    inner = re.search(r"in ([\d.]+)s \(([\d.]+) MB/s of text", run.stdout)
    return seconds, inner, main_kb, worker_kb


def tokenizer_mb_s(tok, plays: list[tuple[str, str]], corpus_bytes: int, seconds: float) -> float:
    """The reference: MB/s of one process encoding the same text for `seconds`, one pass at least (gpt2:
    tok.encode is tiktoken's encode_ordinary)."""
    encoded, start = 0, time.perf_counter()
    while not encoded or time.perf_counter() - start < seconds:  # one pass at least, however short
        for _, text in plays:
            tok.encode(text)
        encoded += corpus_bytes
    return encoded / 1e6 / (time.perf_counter() - start)


def loader_row(out_dir, batch_size: int, block_size: int, seconds: float) -> None:
    """The loader: assembling CPU batches from the memmapped shards just written, for `seconds`, one batch
    at least."""
    from gpt.data import TrainBatches
    from gpt.errors import UsageError
    from gpt.shards import ShardError

    try:
        loader = TrainBatches(out_dir, batch_size, block_size)
    except ShardError as e:  # it named a shard of the temporary directory, gone by then, and said "prepare more
        # text", which is --mb here (hunt 50-a A2)
        reason = str(e).removeprefix(f"{e.path}: ").split("; ")[0]
        # (a shard's name; a refusal of the whole split names the data directory, whose name, "shards", is the
        # temporary directory's, not one to give: hunt 50-d D6)
        shard = f"{e.path.name}: " if e.path.suffix == ".bin" else ""
        raise UsageError(f"the loader's batch does not fit in the prepared train split ({shard}{reason}): "
                         f"give a smaller --batch_size or --block_size, or a larger --mb") from None
    for _ in range(3):
        loader.next_batch()
    batches, start = 0, time.perf_counter()
    while not batches or time.perf_counter() - start < seconds:  # one batch at least
        loader.next_batch()
        batches += 1
    rate = batches * batch_size * block_size / (time.perf_counter() - start)
    print(f"  loader: TrainBatches.next_batch {batch_size} x {block_size} on CPU: "
          f"{rate / 1e6:.0f}M tokens/s  [target >= 10M]")


def add_prepare_args(p: argparse.ArgumentParser) -> None:
    # the text is whole copies of the plays: --mb 3 prepared 5 MB under a help that said 3 (hunt 52-n N1)
    p.add_argument("--mb", type=positive_float, default=100,
                   help="MB of text to prepare, at least: whole copies of the plays, 5 MB each (default: 100)")
    from gpt.tokenizer import TOKENIZER_NAMES

    p.add_argument("--tokenizer", default="gpt2", choices=TOKENIZER_NAMES, help="(default: gpt2)")
    p.add_argument("--num_proc", type=positive_int, default=None, help="prepare's processes (default: all cores)")
    p.add_argument("--seconds", type=positive_float, default=3.0,
                   help="time per single-process / loader measurement (default: 3)")
    p.add_argument("--batch_size", type=positive_int, default=64, help="loader batch size (default: 64)")
    p.add_argument("--block_size", type=positive_int, default=1024, help="loader block size (default: 1024)")


# ----------------------------------------------------------------------------- train

# nanoGPT's CPU recipe (its README: 4 layers, 4 heads, 128 wide, block 64, batch 12, fp32, eager,
# AdamW), with our byte tokenizer. The issue measured nanoGPT's own train.py at ~33 ms/iter on the
# 2-core development machine; bench.py also times a stand-in for it in the same run (below). Its
# optimizer and architecture too (AdamW, learned positions, no QK-norm), where train.py's defaults
# differ since issue 11: a step of Muon against the stand-in's AdamW compared two optimizers (0.61x
# where AdamW gave 0.94x: hunt, session 26). --optimizers=adamw,muon, or --with=--pos_encoding=rope,
# times the default's choices in the same run.
NANOGPT_CPU_SHAPE = ["--n_layer=4", "--n_head=4", "--n_embd=128", "--block_size=64", "--batch_size=12",
                     "--dropout=0.0", "--compile=false", "--device=cpu", "--tokenizer=byte", "--optimizer=adamw",
                     "--pos_encoding=learned", "--qk_norm=false", "--qk_scale=1"]
# The stand-in's side of that shape: nanoGPT's 65 characters, and the shape above
NANOGPT_CPU_REFERENCE = dict(V=65, T=64, B=12, C=128, L=4, H=4)
NANOGPT_CPU_MS_PER_ITER = 33.0


# nanoGPT's GPT-2 124M shape on a GPU (its bench.py and train.py: 12 layers, 12 heads, 768 wide,
# block 1024, vocab 50304, no biases, bf16 autocast, torch.compile, fused AdamW). Issue 9 measured
# nanoGPT itself at batch 32 on an H100: 68.6 ms/iter, 477,700 tokens/s (docs/gpu-measurements.md,
# "Before issue 9").
NANOGPT_GPU_SHAPE = dict(V=50304, T=1024, C=768, L=12, H=12)
NANOGPT_GPU_BATCH = 32  # its batch, unless --nanogpt_batch says another


def same_shape(config: dict, *, T: int, B: int, C: int, L: int, H: int, V: int) -> bool:
    """Whether a train row's model and micro-batch (its config as it ran) are a reference's: a row of
    another shape (--with=--n_layer=1) "met" the target against it (hunt 34-d D7, review 34 R6)."""
    return (config["block_size"], config["batch_size"], config["n_embd"], config["n_layer"], config["n_head"],
            config["vocab_size"]) == (T, B, C, L, H, V)


def nanogpt_reference_ms(steps: int, warmup: int, *, V: int, T: int, B: int, C: int, L: int, H: int,
                         device: str = "cpu", dtype: str = "float32", compile: bool = False, record: int = 1) -> float:
    """Median ms per iteration of a stand-in for nanoGPT's train.py, timed in this process so
    that the ratio does not depend on the machine's mood. It does per iteration what nanoGPT does,
    as its code documents: a batch gathered from a fresh np.memmap of uint16 tokens with
    torch.stack (pinned and copied asynchronously on CUDA), the forward of a no-bias GPT with
    exact (erf) GELU and SDPA causal attention under autocast (bf16 on a GPU), cross-entropy over
    every position, backward, gradient clipping at 1.0, AdamW (fused on CUDA only, as nanoGPT),
    zero_grad(set_to_none=True); torch.compile where nanoGPT compiles (CUDA). Like nanoGPT's
    train.py, it waits for the device (loss.item()) only once per `record` iterations, when it
    would log; the median is over those records' means (per iteration with record=1)."""
    import contextlib
    import os
    import statistics

    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C, bias=False), nn.LayerNorm(C, bias=False)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C, bias=False), nn.Linear(C, C, bias=False)
            self.mlp = nn.Sequential(nn.Linear(C, 4 * C, bias=False), nn.GELU(), nn.Linear(4 * C, C, bias=False))

        def forward(self, x):
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.c_proj(y)
            return x + self.mlp(self.ln_2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            self.h, self.ln_f = nn.ModuleList(Block() for _ in range(L)), nn.LayerNorm(C, bias=False)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for block in self.h:
                x = block(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
            return F.cross_entropy(logits.view(-1, V).float(), targets.view(-1), ignore_index=-1)

    torch.manual_seed(0)
    cuda = device.startswith("cuda")
    model = Model().to(device)
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99), fused=cuda)
    step_model = torch.compile(model) if compile else model
    autocast = (torch.autocast(device_type="cuda", dtype=getattr(torch, dtype)) if cuda and dtype != "float32"
                else contextlib.nullcontext())
    with temporary_directory("train") as tmp:
        path = os.path.join(tmp, "train.bin")
        np.random.default_rng(0).integers(0, V, max(1_000_000, 4 * B * T), dtype=np.uint16).tofile(path)

        def get_batch():
            data = np.memmap(path, dtype=np.uint16, mode="r")
            ix = torch.randint(len(data) - T, (B,))
            x = torch.stack([torch.from_numpy(data[i:i + T].astype(np.int64)) for i in ix])
            y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + T].astype(np.int64)) for i in ix])
            if cuda:
                return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
            return x, y

        times, x, y = [], *get_batch()
        for it in range(warmup + steps):
            if it % record == 0:
                t0 = time.perf_counter()
            with autocast:
                loss = step_model(x, y)
            x, y = get_batch()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if (it + 1) % record == 0 or it + 1 == warmup + steps:
                loss.item()  # waits for the device: the time is real
                if it >= warmup:
                    times.append(1000 * (time.perf_counter() - t0) / (it % record + 1))
    return statistics.median(times)


def row_of_flags(flags: str) -> str:
    """A --with row, its flags split as a shell splits words and joined again quoted (the row's label,
    which shlex.split gives back): a flag with a space (`--data=my data`) was split in two at the space,
    with no quoting to keep it whole (hunt 35-f F13, hunt 42-c C4); several flags (`--fp8=true
    --fp8_head=true`) read as before."""
    try:
        return shlex.join(shlex.split(flags))
    except ValueError as e:  # (an unclosed quote; a backslash at the end)
        raise SystemExit(f"bench.py train: error: --with={flags}: {str(e).lower()}: its flags are split as a "
                         "shell would, so quote one with a space or a quote inside, e.g. --with=\"--data='my data'\"") \
            from None


def bench_train(args: argparse.Namespace) -> None:
    """train.py's own loop timed in this process: each variant (every dtype of --dtypes with every
    optimizer of --optimizers), then each row (the first variant with a flag added: --fp8, --with,
    --deterministic, --read_every_step) against the first variant's tokens/s, --rounds times alternating;
    then every row's tokens/s against a same-run stand-in for nanoGPT's step (--nanogpt_gpu, --nanogpt_cpu)."""
    rows = flag_rows(args)
    dtypes, optimizers = distinct(args.dtypes, "--dtypes"), distinct(args.optimizers, "--optimizers")
    refuse_what_train_sets(args, rows, dtypes, optimizers)
    nanogpt_batch = args.nanogpt_batch or NANOGPT_GPU_BATCH
    overrides = list(args.overrides)
    if args.nanogpt_cpu:
        overrides = NANOGPT_CPU_SHAPE + overrides
    record = max(1, args.warmup)  # train.py logs, and waits for the device, once per record of this many steps
    if args.read_every_step and record == 1:  # (its row ran the first row again and gave a ratio to itself)
        raise SystemExit(f"bench.py train: --read_every_step with --warmup={args.warmup} times the first row again, "
                         "which waits for the device at every step too: give --warmup=2 or more")
    timed = [f"--max_iters={args.warmup + args.steps}", "--eval_interval=1000000", f"--log_interval={record}",
             "--eval_iters=1"]
    variants = [(d, o) for d in dtypes for o in optimizers]
    check_every_train_command(args, overrides, variants, rows, timed)
    deterministic_workspace(rows, overrides)
    ref_tok_s = None
    if args.nanogpt_gpu:  # first: a run cut short by a time limit keeps its reference
        ref_tok_s = gpu_reference_tokens_per_s(args, nanogpt_batch, record)
    figures = time_variants_and_rows(args, overrides, variants, rows, timed, record)
    if ref_tok_s is not None:
        compare_with_gpu_reference(figures, ref_tok_s, nanogpt_batch)
    if args.nanogpt_cpu:
        compare_with_cpu_reference(args, figures, record)


def flag_rows(args: argparse.Namespace) -> list[str]:
    """The rows: the cost or gain of a flag, in the same run, a row each, the first row's settings with
    the flag(s) added. The levers of issue 9's throughput target first, so a run cut short by a time
    limit has them."""
    rows = (["--fp8=true"] if args.fp8 else []) + [row_of_flags(f) for f in args.with_flags] \
        + (["--deterministic=true"] if args.deterministic else []) \
        + (["--log_interval=1"] if args.read_every_step else [])  # the last: a wait for the device at every step
    if len(set(rows)) < len(rows):
        raise SystemExit(f"bench.py train: a flag is timed twice: {' '.join(rows)}")
    if "" in rows:  # (it ran the first row again, unlabelled, and gave its ratio to itself: hunt, session 26)
        raise SystemExit("bench.py train: --with needs a train.py flag, e.g. --with=--batch_size=64")
    return rows


def refuse_what_train_sets(args: argparse.Namespace, rows: list[str], dtypes: list[str],
                           optimizers: list[str]) -> None:
    """Refuses a train.py option typed after -- or in a row that bench.py train sets itself or replaces in
    every run, and --nanogpt_batch without the reference it is the batch of."""
    from gpt.config import command_line_keys

    # (a row's flags come after the timing's, and so replace them, but for --out_dir)
    refuse_its_own([f for row in rows for f in shlex.split(row)], {"out_dir": "a temporary run directory"}, "train")
    refuse_its_own(args.overrides, {"out_dir": "a temporary run directory", "max_iters": "--warmup + --steps",
                                    "log_interval": "--warmup", "eval_interval": "no evaluation while timing",
                                    "eval_iters": "1, for the closing evaluation"}, "train")
    # A --dtype or --optimizer typed for train.py is what an "auto" variant runs with; where every variant names
    # its own, each replaced it (its flag comes after), and the run timed none of it without a word
    typed = command_line_keys(args.overrides)
    for key, values in (("dtype", dtypes), ("optimizer", optimizers)):
        if key in typed and "auto" not in values:
            raise SystemExit(f"bench.py train: error: --{key} after -- is replaced by --{key}s={','.join(values)} "
                             f"in every run: name it in --{key}s (or add auto there, which runs it), or leave it out")
    if args.nanogpt_batch is not None and not args.nanogpt_gpu:  # (it was ignored without a word: hunt 48-h H2)
        raise SystemExit("bench.py train: error: --nanogpt_batch is the batch of --nanogpt_gpu's reference, which "
                         "this run does not time: give --nanogpt_gpu with it, or leave it out")


def train_argv(overrides: list[str], variant: tuple[str, str], timed: list[str], flag: str | None = None) -> list[str]:
    """The train.py command line of a variant (dtype, optimizer), or of a row: the first variant's with the
    row's flag(s) last, which replace the timing's. A variant's auto adds no flag: the --config's choice,
    else train.py's default."""
    chosen = [f"--{k}={v}" for k, v in zip(("dtype", "optimizer"), variant) if v != "auto"]
    return [*overrides, *chosen, *timed, *(shlex.split(flag) if flag is not None else [])]


def check_every_train_command(args: argparse.Namespace, overrides: list[str], variants: list[tuple[str, str]],
                              rows: list[str], timed: list[str]) -> None:
    """Every row's command line, checked before the first row runs: a bad value in the last row was
    found after the rows before it had run (minutes of GPT-2 124M on a GPU: hunt, session 26)."""
    from gpt.errors import ConfigError, UsageError
    from gpt.runtime import Dist, check_fp8, pick_device

    # in the order they run: a row's flags after the timing's, which they replace (checked before them,
    # a row's --log_interval=0 or --max_iters=0 passed and ran, or failed, after the other rows)
    for what, argv in [*((f"{d} {o}", train_argv(overrides, (d, o), timed)) for d, o in variants),
                       *((flag, train_argv(overrides, variants[0], timed, flag)) for flag in rows)]:
        try:
            cfg = checked_train_config(argv, "time")
            device = pick_device(cfg.device, Dist())  # a device this machine lacks failed once the rows before it had run
            if cfg.fp8:  # so did a GPU without float8 matmuls, or a torchao that does not import (hunt 37-e E5)
                check_fp8(device)
        except UsageError as e:
            raise ConfigError(f"train.py {what}: {without_valid_options(e)}") from None
        if cfg.max_iters <= args.warmup:  # a row's own count: no step past the warm-up to time (0: a budget)
            raise SystemExit(f"bench.py train: error: {what}: --max_iters={cfg.max_iters} leaves no step to time "
                             f"after --warmup={args.warmup}: give it more than {args.warmup}")


def deterministic_workspace(rows: list[str], overrides: list[str]) -> None:
    """cuBLAS's deterministic workspace for every row where one runs with --deterministic: it is read once
    per process, at its first call, and the rows share this process, so it is set before the first row."""
    import torch

    from gpt.runtime import CUBLAS_DETERMINISTIC

    if any("--deterministic" in arg for arg in [*rows, *overrides]) and "CUBLAS_WORKSPACE_CONFIG" not in os.environ:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_DETERMINISTIC
        if torch.cuda.is_available():  # (a CUDA setting: nothing to say on the CPU)
            print(f"train: CUBLAS_WORKSPACE_CONFIG={CUBLAS_DETERMINISTIC} for every row (under --deterministic, "
                  "torch 2.9 needs it from the process's first cuBLAS call)", flush=True)


def gpu_reference_tokens_per_s(args: argparse.Namespace, nanogpt_batch: int, record: int) -> float:
    """The tokens/s of a stand-in for nanoGPT's GPT-2 124M step on the GPU (compiled, bf16), said."""
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("bench.py train --nanogpt_gpu needs a CUDA GPU")
    ref = nanogpt_reference_ms(args.steps, args.warmup, B=nanogpt_batch, device="cuda", dtype="bfloat16",
                               compile=True, record=record, **NANOGPT_GPU_SHAPE)
    ref_tok_s = nanogpt_batch * NANOGPT_GPU_SHAPE["T"] / ref * 1000
    print(f"  reference, nanoGPT's GPU step (stand-in, batch {nanogpt_batch}, compiled, bf16): "
          f"{ref:.1f} ms/iter, {ref_tok_s:,.0f} tokens/s (issue 9 measured nanoGPT's bench.py, which waits for "
          f"the GPU at every step, at 477,700)", flush=True)
    return ref_tok_s


def run_train(argv: list[str], what: str) -> tuple[list[dict], dict]:
    """train.py in this process with a fresh torch.compile state, so no variant runs into dynamo's
    limit of graphs per function (past it, it would silently run eager): its metric records and
    its config as it ran (a --config's settings applied), with its model's vocab_size."""
    import json
    from pathlib import Path

    import torch
    import train
    from gpt.checkpoint import unmark_removed_lora_run

    torch._dynamo.reset()
    with temporary_directory("train") as out:
        # (quoted for a shell: `--data=my data` read as a command that is not the one run: hunt 35-f F5)
        print(f"train {what}: python train.py {shlex.join(argv)}", flush=True)
        status = train.main([*argv, f"--out_dir={out}"])
        unmark_removed_lora_run(Path(out))  # (a LoRA row on a run's checkpoint pinned it: removed below)
        if status in (130, 143):  # its checkpoint for a resume was in a directory removed here
            print(f"bench.py train: interrupted (train.py {what}); its run directory, which train.py names "
                  "for a resume, is removed: run the row again", file=sys.stderr)
            raise SystemExit(status)
        if status != 0:
            raise SystemExit(f"bench.py train: train.py {what} exited with status {status}")
        latest = (Path(out) / "latest").read_text().strip()  # (its model's vocabulary: the stand-in's, below)
        config = {**json.load(open(f"{out}/config.json")),
                  "vocab_size": json.load(open(f"{out}/{latest}/meta.json"))["model_config"]["vocab_size"]}
        return [json.loads(line) for line in open(f"{out}/metrics.jsonl")], config


def ran_as(config: dict) -> str:
    """"bfloat16 adamw": the dtype and optimizer a run's config resolves to, as train.py resolves them."""
    from gpt.runtime import Dist, dtype_name, pick_device, pick_dtype

    device = pick_device(config["device"], Dist())
    return f"{dtype_name(pick_dtype(config['dtype'], device)[0])} {config['optimizer']}"


def ran_on(config: dict) -> str:
    """The device type a row ran on: "cuda", "cpu" (its --device as train.py resolves it)."""
    from gpt.runtime import Dist, pick_device

    return pick_device(config["device"], Dist()).type


class TrainFigures:
    """The records of bench.py train's runs, over the rounds, and the figures said of them: each variant's
    steps' ms, tokens/s and MFU, its loss by step (first round) and config; each row's steps and first
    round's records; and, once said, the medians' tokens/s and the config of every label."""

    def __init__(self, args: argparse.Namespace, variants: list[tuple[str, str]], rows: list[str], record: int):
        self.args, self.variants, self.rows, self.record = args, variants, rows, record
        self.ran_with = {}  # each variant's dtype and optimizer as train.py took them
        self.config_of = {}  # each variant's config as it ran
        # Two variants can run alike only through an "auto" beside another value of its list (a named dtype or
        # optimizer runs as named; --dtypes=auto,float32 on the CPU): there, a variant's label says what was asked
        # too. Known before the first run, so a round's line and the medians give a run the same label: the rounds
        # said "(asked: ...)" wherever what ran differed from what was asked, the medians only where two variants
        # ran alike (hunt 42-d N4, hunt 43-a A2)
        dtypes, optimizers = {d for d, _ in variants}, {o for _, o in variants}
        self.two_may_run_alike = any("auto" in asked and len(asked) > 1 for asked in (dtypes, optimizers))
        self.ms_of, self.tok_s_of, self.mfu_of = ({v: [] for v in variants} for _ in range(3))
        self.loss_of = {}  # each variant's loss by step, first round (the same seed and data every round)
        self.tokens_per_s = {}  # by row label: what ran ("float32 adamw"), and what was asked where two ran alike
        self.config_by_label = {}  # by row label: its config as it ran, with its vocab_size (the stand-in's shape)
        self.row_steps = {flag: [] for flag in rows}  # each row's timed records, over the rounds
        self.row_records = {}  # each row's records of the first round: its loss drift against the first row's

    def variant_label(self, dtype: str, optimizer: str) -> str:
        ran, asked = self.ran_with[dtype, optimizer], f"{dtype} {optimizer}"
        return f"{ran} (asked: {asked})" if self.two_may_run_alike and ran != asked else ran

    def timed_steps(self, records: list[dict]) -> list[dict]:
        """A run's records of timed steps: those past the warm-up (its compile and caches)."""
        return [r for r in records if "ms_per_step" in r and r["step"] > self.args.warmup]

    def add_variant_run(self, dtype: str, optimizer: str, records: list[dict], config: dict) -> list[dict]:
        """One run of a variant: its records kept; its timed steps."""
        self.config_of[dtype, optimizer] = config
        self.ran_with[dtype, optimizer] = ran_as(config)
        steps = self.timed_steps(records)
        self.loss_of.setdefault((dtype, optimizer),
                                {r["step"]: r["loss"] for r in records if r.get("loss") is not None})
        self.ms_of[dtype, optimizer] += [r["ms_per_step"] for r in steps]
        self.tok_s_of[dtype, optimizer] += [r["tokens_per_s"] for r in steps]
        self.mfu_of[dtype, optimizer] += [r["mfu"] for r in steps if "mfu" in r]
        return steps

    def add_row_run(self, flag: str, records: list[dict], config: dict) -> list[dict]:
        """One run of a row: its records kept; its timed steps."""
        self.config_by_label[flag] = config
        self.row_records.setdefault(flag, records)
        steps = self.timed_steps(records)
        self.row_steps[flag] += steps
        return steps

    def say_variants(self) -> None:
        import statistics

        args, record = self.args, self.record
        for (dtype, optimizer) in self.variants:
            ms, mfu = statistics.median(self.ms_of[dtype, optimizer]), self.mfu_of[dtype, optimizer]
            label = self.variant_label(dtype, optimizer)
            self.tokens_per_s[label] = statistics.median(self.tok_s_of[dtype, optimizer])
            self.config_by_label[label] = self.config_of[dtype, optimizer]
            print(f"  {label}: {ms:.1f} ms/step, {self.tokens_per_s[label]:,.0f} tokens/s"
                  + (f", MFU {statistics.median(mfu):.1%}" if mfu else ", MFU n/a (CPU or unknown GPU)")
                  + f"  (median of {len(self.ms_of[dtype, optimizer])} records of up to {record} steps' mean, after "
                     f"{args.warmup} warm-up, {args.rounds} round(s))")

    def say_row(self, flag: str) -> None:
        import statistics

        args, record, tokens_per_s = self.args, self.record, self.tokens_per_s
        base_label, base_loss = next(iter(tokens_per_s)), self.loss_of[self.variants[0]]
        steps = self.row_steps[flag]
        ms = statistics.median(r["ms_per_step"] for r in steps)
        mfu = [r["mfu"] for r in steps if "mfu" in r]
        # the steps both rows logged: a flag that changes the logging or the length compares fewer
        both = [(r["loss"], base_loss[r["step"]]) for r in self.row_records[flag]
                if r.get("step") in base_loss and r.get("loss") is not None]
        drift = (f"its losses differ from that row's by at most {max(abs(a - b) for a, b in both):.4f} at the "
                 f"{len(both)} step(s) both rows logged" if both else "no step logged by both rows to compare losses")
        tokens_per_s[flag] = statistics.median(r["tokens_per_s"] for r in steps)
        print(f"  {flag}{' (a wait for the device at every step)' if flag == '--log_interval=1' else ''}: "
              f"{ms:.1f} ms/step, {tokens_per_s[flag]:,.0f} tokens/s"
              + (f", MFU {statistics.median(mfu):.1%} (bf16 peak, bf16 FLOPs)" if mfu else "")
              + f", {tokens_per_s[flag] / tokens_per_s[base_label]:.2f}x the tokens/s of the first row; {drift} "
                f"(one in {record})" + (f"  (median of {len(steps)} records, {args.rounds} rounds)"
                                        if args.rounds > 1 else ""))

    def say_run(self, round_index: int, label: str, steps: list[dict], first_tok_s: float | None = None) -> float:
        """One run's figures, the medians of its records, as soon as it has run: its tokens/s."""
        import statistics

        tok_s = statistics.median(r["tokens_per_s"] for r in steps)
        mfu = [r["mfu"] for r in steps if "mfu" in r]
        print(f"  round {round_index + 1} of {self.args.rounds}, {label}: "
              f"{statistics.median(r['ms_per_step'] for r in steps):.1f} ms/step, {tok_s:,.0f} tokens/s"
              + (f", MFU {statistics.median(mfu):.1%}" if mfu else "")
              + (f", {tok_s / first_tok_s:.2f}x the first row's in this round" if first_tok_s else "")
              + f"  (median of {len(steps)} records)", flush=True)
        return tok_s


def time_variants_and_rows(args: argparse.Namespace, overrides: list[str], variants: list[tuple[str, str]],
                           rows: list[str], timed: list[str], record: int) -> TrainFigures:
    """Every variant, then every row, --rounds times, each run's figures said; the medians said at the end.
    Rounds alternate the variants and the rows, so a load swing hits them alike: the rows ran once,
    after every round of the first row, whatever --rounds said (hunt 41-a A11). With rounds, each run's
    figures are said as soon as it has run, the medians over the rounds at the end: said in the last round
    only, they were lost to a row failing in an earlier round, or to a time limit (hunt 42-b B1)."""
    figures = TrainFigures(args, variants, rows, record)
    for round_index in range(args.rounds):
        first_tok_s = None  # the first row's tokens/s in this round, for its rows' ratios
        for dtype, optimizer in variants:
            records, config = run_train(train_argv(overrides, (dtype, optimizer), timed), f"{dtype} {optimizer}")
            steps = figures.add_variant_run(dtype, optimizer, records, config)
            if args.rounds > 1:
                tok_s = figures.say_run(round_index, figures.variant_label(dtype, optimizer), steps)
                first_tok_s = first_tok_s or tok_s
        if args.rounds == 1:
            figures.say_variants()
        for flag in rows:
            records, config = run_train(train_argv(overrides, variants[0], timed, flag), flag)
            steps = figures.add_row_run(flag, records, config)
            if args.rounds == 1:
                figures.say_row(flag)
            else:
                figures.say_run(round_index, flag, steps, first_tok_s)
    if args.rounds > 1:
        print(f"train: the medians of the {args.rounds} rounds:")
        figures.say_variants()
        for flag in rows:
            figures.say_row(flag)
    return figures


def compare_with_gpu_reference(figures: TrainFigures, ref_tok_s: float, nanogpt_batch: int) -> None:
    """Every row's tokens/s against the GPU stand-in's, where the row is of its shape and ran on the GPU."""
    # (a row on another device than the reference's was compared all the same: --nanogpt_cpu -- --device=cuda
    # on a GPU set the GPU's tokens/s against the CPU stand-in's, "[target >= 2x]", hunt 48-h H5)
    for label, tok_s in figures.tokens_per_s.items():
        if not same_shape(figures.config_by_label[label], B=nanogpt_batch, **NANOGPT_GPU_SHAPE):
            print(f"  {label}: not compared with the reference, GPT-2 124M at batch {nanogpt_batch}")
            continue
        if ran_on(figures.config_by_label[label]) != "cuda":
            print(f"  {label}: not compared with the reference, which runs on the GPU")
            continue
        print(f"  {label}: {tok_s / ref_tok_s:.2f}x the reference's tokens/s  [target >= 1.2x; MFU >= 50%]")


def compare_with_cpu_reference(args: argparse.Namespace, figures: TrainFigures, record: int) -> None:
    """The CPU stand-in for nanoGPT's step, timed at the first variant's shape, and every row's tokens/s
    against it where the row is of that shape and ran on the CPU (and, at the recipe's shape, against the
    issue's figure for nanoGPT itself)."""
    from gpt.tokenizer import get_tokenizer

    # The stand-in at the shape that ran: with shape overrides, a smaller model against the recipe's
    # reference "met" the target (hunt, session 26); the issue's figure and target are the recipe's
    config = figures.config_of[figures.variants[0]]
    shape = dict(NANOGPT_CPU_REFERENCE, T=config["block_size"], B=config["batch_size"], C=config["n_embd"],
                 L=config["n_layer"], H=config["n_head"])
    recipe = shape == NANOGPT_CPU_REFERENCE and config["vocab_size"] == get_tokenizer("byte").n_vocab
    if not recipe:  # its vocabulary too: GPT-2's 50,257 against the recipe's 65 read 0.08x (hunt 33-b B2)
        shape["V"] = config["vocab_size"]
    ref = nanogpt_reference_ms(args.steps, args.warmup, **shape, record=record)
    ref_tok_s, issue_tok_s = shape["B"] * shape["T"] / ref * 1000, 12 * 64 / NANOGPT_CPU_MS_PER_ITER * 1000
    print("  reference, nanoGPT's CPU step (stand-in, see bench.py), "
          + ("its recipe's shape: " if recipe else
             f"the shape that ran ({shape['L']} layer{'s' * (shape['L'] != 1)} of {shape['C']}, {shape['H']} "
             f"head{'s' * (shape['H'] != 1)}, {shape['B']} x {shape['T']} tokens, {shape['V']:,} ids; not "
             "nanoGPT's recipe): ")
          + f"{ref:.1f} ms/iter, {ref_tok_s:,.0f} tokens/s"
          + (f" (the issue measured nanoGPT itself at {NANOGPT_CPU_MS_PER_ITER} ms/iter)" if recipe else ""))
    for label, tok_s in figures.tokens_per_s.items():
        if not same_shape(figures.config_by_label[label], **{k: shape[k] for k in "TBCLH"}, V=config["vocab_size"]):
            print(f"  {label}: not compared with the reference, whose shape is the first row's")
            continue
        if ran_on(figures.config_by_label[label]) != "cpu":
            print(f"  {label}: not compared with the reference, which runs on the CPU")
            continue
        print(f"  {label}: {tok_s / ref_tok_s:.2f}x the reference's tokens/s"
              + (f", {tok_s / issue_tok_s:.2f}x the issue's nanoGPT figure  [target >= 2x]" if recipe else ""))


def add_train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("overrides", nargs="*", help="train.py options, e.g. --config=gpt2-124m --data=... (after --)")
    p.add_argument("--steps", type=positive_int, default=30, help="timed steps (default: 30)")
    p.add_argument("--warmup", type=non_negative_int, default=10,
                   help="untimed steps first (compile, caches); also the steps in each timed record: train.py "
                        "waits for the device only when it logs, and logs their mean (default: 10)")
    p.add_argument("--dtypes", default="auto",
                   help="comma-separated, e.g. float32,bfloat16 (default: auto: a --dtype after --, else the "
                        "--config's dtype, else train.py's choice: bf16 on a GPU, fp32 on the CPU)")
    from gpt.config import TrainConfig

    p.add_argument("--optimizers", default="auto",
                   help=f"comma-separated, e.g. adamw,muon (default: auto, train.py's choice: an --optimizer "
                        f"after --, else the --config's optimizer, else {TrainConfig.optimizer})")
    p.add_argument("--rounds", type=positive_int, default=1,
                   help="runs of every variant and row (--fp8, --with, ...), alternating; past 1, each run's "
                        "figures as it ends, and the medians over the rounds at the end (default: 1)")
    p.add_argument("--nanogpt_cpu", action="store_true",
                   help="nanoGPT's CPU recipe (its shape and AdamW), against a same-run stand-in for its step and "
                        "the issue's 33 ms/iter; with shape overrides, the stand-in takes the shape that ran")
    p.add_argument("--nanogpt_gpu", action="store_true", help="also time a stand-in for nanoGPT's GPT-2 124M step on "
                                                              "the GPU (compiled, bf16), for a same-run tokens/s ratio")
    p.add_argument("--nanogpt_batch", type=positive_int, default=None,
                   help=f"with --nanogpt_gpu: the GPU reference's batch size (default: {NANOGPT_GPU_BATCH})")
    p.add_argument("--deterministic", action="store_true", help="also time the run with --deterministic=true")
    p.add_argument("--fp8", action="store_true", help="also time the run with --fp8=true (float8 matmuls)")
    p.add_argument("--read_every_step", action="store_true",
                   help="also time the run with --log_interval=1, which waits for the device at every step as "
                        "train.py did before issue 9 (the gain of not waiting, in the same run)")
    p.add_argument("--with", dest="with_flags", action="append", default=[], metavar="FLAG",
                   help="also time the run with this train.py flag added, e.g. --with=--batch_size=64, or with "
                        "several, e.g. --with='--fp8=true --fp8_head=true', split as a shell would (a path with a "
                        "space: --with=\"--data='my data'\"; repeatable: a row each; its loss drift "
                        "means something where the flags keep the data). Rows run in this order: --fp8, each --with, "
                        "--deterministic, --read_every_step")


# ----------------------------------------------------------------------------- quality

# The recipes issue 11 measures the default against, at equal wall-clock. Each is a train.py
# command line; `--max_iters=0 --time_budget=S` is added to every one, so each takes as many steps
# as fit in S seconds on the machine at hand.
# The GPU preset's context and batch until issue 9's sixth GPU session (256 bytes, 64 windows): the
# GPU recipes measured on it keep them, so that each stays what was measured.
GPU_PRESET_256 = ["--config=shakespeare-gpu", "--block_size=256", "--batch_size=64"]
# Its context and batch from the sixth GPU session to the seventh (512 bytes, 32 windows), kept likewise.
GPU_PRESET_512 = ["--config=shakespeare-gpu", "--block_size=512", "--batch_size=32"]
QUALITY_RECIPES = {
    "default": [],
    # The CPU default when issue 11 was filed (2.066 bits per byte in 2,900 steps on the VM of then):
    # AdamW alone, learned positions, no QK-norm; the rest (BPE, 4 x 128, batch 16) as today.
    "adamw-before": ["--optimizer=adamw", "--pos_encoding=learned", "--qk_norm=false", "--qk_scale=1"],
    # nanoGPT's CPU recipe (its shape, as `train --nanogpt_cpu`, with the hyperparameters of its
    # shakespeare_char config: AdamW 1e-3 to 1e-4, warmup 100), on bytes rather than its characters.
    "nanogpt-cpu": [*(a for a in NANOGPT_CPU_SHAPE if not a.startswith("--device")), "--learning_rate=1e-3",
                    "--min_lr=1e-4", "--warmup_iters=100"],
    # Issue 9's GPU default run (python train.py where a GPU is found; its target: <= 1.75 bits per
    # byte within 90 s on one H100). "gpu-before" is configs/shakespeare-gpu.toml as that issue
    # found it (1.852 in 82.7 s there): nanoGPT's shakespeare_char recipe on bytes, spelt out so it
    # stays the reference whatever the preset becomes (since issue 9's fourth GPU session the preset's
    # step replays from CUDA graphs; its context was 512 bytes at batch 32 from its sixth, and is 1,024
    # at batch 16 since its seventh).
    "gpu-before": ["--config=shakespeare-gpu", "--tokenizer=byte", "--n_layer=6", "--n_head=6", "--n_embd=384",
                   "--block_size=256", "--dropout=0.2", "--batch_size=64", "--learning_rate=1e-3", "--min_lr=1e-4",
                   "--warmup_iters=100", "--optimizer=adamw", "--pos_encoding=learned", "--qk_norm=false",
                   "--qk_scale=1", "--compile=auto"],
    # The candidate: that preset with the optimizer, positions and attention issue 11 chose on the
    # CPU (the CPU default's Muon, rotary positions, QK-norm and learning rates). H100:
    # docs/gpu-measurements.md.
    "gpu-muon": [*GPU_PRESET_256, "--optimizer=muon", "--pos_encoding=rope", "--qk_norm=true",
                 "--qk_scale=2", "--learning_rate=4e-3", "--min_lr=4e-4", "--muon_learning_rate=0.015",
                 "--compile=auto"],  # (as measured: before the preset's CUDA graphs)
    # The same, a size up (8 x 512, 2.4x the blocks' parameters): the preset sees Shakespeare's
    # ~5M bytes some 15 times in 90 s on an H100, where a larger model with dropout may fit better
    # in fewer passes (H100: docs/gpu-measurements.md).
    "gpu-muon-wide": [*GPU_PRESET_256, "--optimizer=muon", "--pos_encoding=rope", "--qk_norm=true",
                      "--qk_scale=2", "--learning_rate=4e-3", "--min_lr=4e-4", "--muon_learning_rate=0.015",
                      "--n_layer=8", "--n_head=8", "--n_embd=512", "--compile=auto"],
    # gpu-muon compiling one block's graph for all blocks (--compile=regional): the compile is part
    # of the 90 s, and took half the time on the CPU at the same step time (the first step, training and
    # evaluation graphs, 21.2 + 2.2 s against 39.6 + 8.6 s: commit 5a3e6a0's message). H100:
    # docs/gpu-measurements.md.
    "gpu-muon-regional": [*GPU_PRESET_256, "--optimizer=muon", "--pos_encoding=rope", "--qk_norm=true",
                          "--qk_scale=2", "--learning_rate=4e-3", "--min_lr=4e-4", "--muon_learning_rate=0.015",
                          "--compile=regional"],
    # The preset with its forward and backward replayed from CUDA graphs (--compile=reduce-overhead):
    # its 10.8M-parameter step took 7.0 to 13.6 ms on an H100 from run to run, at an MFU of 9 to 17%
    # (train.py's FLOPs count at those times, computed: docs/gpu-measurements.md), which pointed at a
    # step that waits on the host launching its kernels. Measured there: 5.9 ms
    # against 7.0 in one bench.py train run (1.18x), so the preset took it; its 90 s result, 1.837
    # against 1.850 in one round, is within the runs' spread (README "On a GPU"). The recipe stays
    # spelt out.
    "gpu-graphs": [*GPU_PRESET_256, "--compile=reduce-overhead"],
    # The same a size up (8 x 512, as gpu-muon-wide): if the graphs take the host's launches out of
    # the step, the 90 s may hold more steps than the preset's 10.8M parameters use. H100: 1.855
    # (5,174 steps of 10.2 ms) against gpu-graphs' 1.837 in the same run.
    "gpu-graphs-wide": [*GPU_PRESET_256, "--compile=reduce-overhead", "--n_layer=8", "--n_head=8",
                        "--n_embd=512"],
    # gpu-muon with the preset's CUDA graphs: Muon reached 1.831 in 4,061 steps where AdamW reached
    # 1.837 in 8,680 (H100, without graphs), so it gains most per step; its optimizer step runs
    # outside the graphs. H100: 1.851 (3,238 steps of 10.6 ms) against a bare train.py's 1.831
    # (9,046 steps of 5.9 ms) in the same run: the graphs took ~1.1 ms off either step (11.7 -> 10.6,
    # 7.0 -> 5.9 ms in other runs), which leaves Muon's 1.8 times AdamW's.
    "gpu-graphs-muon": [*GPU_PRESET_256, "--compile=reduce-overhead", "--optimizer=muon",
                        "--pos_encoding=rope", "--qk_norm=true", "--qk_scale=2", "--learning_rate=4e-3", "--min_lr=4e-4",
                        "--muon_learning_rate=0.015"],
    # Candidates, each one change to the preset of then (in graphs), measured in issue 9's sixth GPU
    # session (bash .ci/gpu quality). The preset's 90 s took 9,000 steps of 64 x 256 bytes: 34
    # passes over the 4.3 MB of training text, and from 5,000 steps to 9,000 its result moved only
    # from 1.850 to 1.831-1.837.
    # bench.py quality's fit line (training against validation loss, and whether an earlier
    # evaluation was better) says which way to go next: more regularisation, or more tokens.
    # - twice the batch at a sqrt(2) higher rate: the step ran at 20% MFU (its 5.9 ms by train.py's
    #   FLOPs count, computed), so it may cost much less than twice the time (H100: 10.4 ms against
    #   5.9; 1.838 against 1.824; docs/gpu-measurements.md);
    "gpu-batch128": [*GPU_PRESET_256, "--batch_size=128", "--learning_rate=1.4e-3", "--min_lr=1.4e-4"],
    # - more dropout for 34 passes over the data (H100: 1.834 against 1.824);
    "gpu-dropout3": [*GPU_PRESET_256, "--dropout=0.3"],
    # - a context twice as long at the same tokens a step. H100: 1.775 against a bare train.py's 1.824
    #   in the same run (gpu-batch128 1.838, gpu-dropout3 1.834), 8,923 steps of 6.2 ms; the preset
    #   from issue 9's sixth GPU session to its seventh, spelt out.
    "gpu-block512": GPU_PRESET_512,
    # Candidates, each one change to that preset, measured in issue 9's seventh GPU session (bash
    # .ci/gpu quality). The 512-byte context had gained 0.049 where twice the batch and more dropout
    # lost; its fit line: training loss 1.057 (dropout on) against validation 1.230 nats, and the
    # evaluation at step 8,000 slightly better than the last. Of its 92 s, 18.8 s went to compiling
    # and 10.1 s to 19 evaluations with their checkpoints. H100, one round: a bare train.py 1.788
    # (6,000 steps of 6.2 ms: 27.7 s of its 90 went to compiling that time). Each figure here:
    # docs/gpu-measurements.md, its sixth and seventh sessions.
    # - a context twice as long again, at the same tokens a step. H100: 1.740 (6,098 steps of 6.8 ms),
    #   -0.047 against the bare train.py's 1.788; the preset since, so this recipe is the preset spelt out;
    "gpu-block1024": ["--config=shakespeare-gpu", "--block_size=1024", "--batch_size=16"],
    # - and again, 2,048 bytes at batch 8: attention's FLOPs grow with the context (a token's
    #   4 T d in a layer against 24 d^2 in its matmuls, T / 6d: 0.22 at 512 bytes, 0.89 at 2,048,
    #   before the causal mask halves them), so the longest context costs steps. H100: 1.801 (5,966
    #   steps of 8.1 ms; training loss 1.201 against validation 1.248: fewer passes, less fit), +0.013;
    "gpu-block2048": ["--config=shakespeare-gpu", "--block_size=2048", "--batch_size=8"],
    # - half the evaluations: about 5 s of the 90 back to training steps (~800 of 6.2 ms; an estimate
    #   written before the run). H100: 1.777 (7,520 steps; evaluations 4.9 s against 8.3), -0.010,
    #   within the spread of one round.
    "gpu-evals1000": [*GPU_PRESET_512, "--eval_interval=1000"],
    # The next candidates, each one change to the preset now (1,024 bytes at batch 16), none measured
    # yet (bash .ci/gpu quality). Its two 90 s runs in the seventh session ended with their best
    # evaluation (1.740; a bare train.py after them 1.724), training loss 1.095 (dropout on) against
    # validation 1.206 nats: still learning, less overfit than the 512-byte context's 1.057 / 1.230.
    # - half the evaluations again (-0.010 with the 512-byte context);
    "gpu-1024-evals1000": ["--config=shakespeare-gpu", "--eval_interval=1000"],
    # - less dropout, now that the run ends still learning (0.3 lost 0.010 against 0.2 at 256 bytes);
    "gpu-1024-dropout1": ["--config=shakespeare-gpu", "--dropout=0.1"],
    # - a learning rate twice as high, for a run that ends still learning.
    "gpu-1024-lr2e-3": ["--config=shakespeare-gpu", "--learning_rate=2e-3", "--min_lr=2e-4"],
}
# What `bench.py quality` compares, and for how long, where train.py would run on the CPU (issue 11:
# 5 minutes) and where it would find a GPU (issue 9: 90 s). The first recipe is the base.
QUALITY_DEFAULTS = {"cpu": ("default,adamw-before,nanogpt-cpu", 300.0), "gpu": ("default,gpu-before", 90.0)}


# train.py's line where a budgeted run's second look (before an evaluation or between them) shortens its count
# (shorten_to_budget)
SECOND_LOOK = re.compile(r"steps take \d+ ms since the count was fixed: stopping at step \d{1,3}(?:,\d{3})* instead of "
                         r"\d{1,3}(?:,\d{3})*")

# train.py's closing account of a budgeted run (gpt.budget.budget_spent): its seconds up to the end
BUDGET_SPENT = re.compile(r"time budget [\d.]+ s: ([\d.]+) s spent: .*")


def fit_line(records: list[dict], dropout: float) -> str:
    """How a quality run's model fits its data, from its metrics.jsonl records: its training loss
    at the end (the mean of its last five records; with the run's dropout on, where it has one)
    against its last validation loss, both in nats, and the best validation where an earlier one
    was better than the last (the model overfits by the end)."""
    import statistics

    train_losses = [r["loss"] for r in records if r.get("loss") is not None][-5:]
    evaluations = [r for r in records if "val_loss" in r]
    last, best = evaluations[-1], min(evaluations, key=lambda r: r["val_loss"])
    line = (f"training loss {statistics.fmean(train_losses):.3f} at the end (last {len(train_losses)} records"
            f"{f', dropout {dropout:g} on' if dropout else ''}), validation loss {last['val_loss']:.3f}")
    if best["val_loss"] < last["val_loss"]:
        line += (f"; an earlier evaluation was better: validation loss {best['val_loss']:.3f} "
                 f"({best['val_bpb']:.3f} bits per byte) at step {best['step']:,}")
    return line


def exact_number(x: float) -> str:
    """x as train.py should read it back: short (24, not 24.0) where that is exact, else all its digits. `{:g}`'s
    six digits gave --time_budget=1234567 to train.py as 1.23457e+06, 1,234,570 s (hunt 44-c C8)."""
    return f"{x:g}" if float(f"{x:g}") == x else repr(x)


def bench_quality(args: argparse.Namespace) -> None:
    """Validation bits per byte after `--time_budget` seconds of `python train.py`, for the default
    and the reference recipes, each a fresh process timed from its start (as `time python train.py`),
    rounds alternating the recipes so a swing of the machine's speed hits them alike. Each recipe
    first runs one untimed step, which prepares its data: preparing is not in anyone's budget.
    Compiling is (on a GPU, where train.py compiles): every timed run starts from an empty compile
    cache, as a user's first `python train.py`."""
    import json
    import statistics
    import subprocess
    from pathlib import Path

    from gpt.checkpoint import unmark_removed_lora_run
    from gpt.errors import ConfigError
    from gpt.runtime import Dist, pick_device

    where = "cpu" if pick_device("auto", Dist()).type == "cpu" else "gpu"  # train.py's choice of preset
    args.recipes = args.recipes if args.recipes is not None else QUALITY_DEFAULTS[where][0]
    args.time_budget = args.time_budget if args.time_budget is not None else QUALITY_DEFAULTS[where][1]
    names = distinct(args.recipes, "--recipes")
    refuse_its_own(args.overrides, {"out_dir": "a temporary run directory per run", "max_iters": "0, for the budget",
                                    "time_budget": "bench.py's --time_budget"}, "quality")
    unknown = [n for n in names if n not in QUALITY_RECIPES]
    if unknown:
        raise SystemExit(f"bench.py quality: error: unknown recipe(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(QUALITY_RECIPES)}")
    for name in names:  # every run's command line, before the first (a bad one was found after the others ran)
        argv = [*QUALITY_RECIPES[name], *args.overrides, "--max_iters=0",
                f"--time_budget={exact_number(args.time_budget)}"]
        try:
            checked_train_config(argv, "measure")
        except ConfigError as e:
            raise ConfigError(f"{name}: {without_valid_options(e)}") from None
    root = Path(ROOT)
    final_bpb = {n: [] for n in names}
    with temporary_directory("quality") as tmp:
        def run(name: str, out: str, *extra: str) -> float:
            """Seconds of one train.py run, compiling from an empty cache: as a user's first run, and
            alike for every recipe (one that an earlier run compiled would start minutes ahead)."""
            cmd = [sys.executable, "train.py", *QUALITY_RECIPES[name], *args.overrides, *extra, f"--out_dir={out}"]
            with open(f"{out}.log", "w") as log, fresh_compile_cache():
                start = time.perf_counter()
                status = run_child(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=root).returncode
                seconds = time.perf_counter() - start
            unmark_removed_lora_run(Path(out))  # (a LoRA run on a run's checkpoint pinned it: removed with the rest)
            if status != 0:
                raise SystemExit(f"bench.py quality: {' '.join(cmd[1:])} exited with status {status}; "
                                 f"its output:\n{Path(f'{out}.log').read_text()[-2000:]}")
            return seconds

        for name in names:
            run(name, f"{tmp}/prepare-{name}", "--max_iters=1", "--eval_iters=1", "--compile=false")
        for round_index in range(args.rounds):
            for name in names:
                out = f"{tmp}/{name}-{round_index}"
                budget = ["--max_iters=0", f"--time_budget={exact_number(args.time_budget)}"]
                print(f"{name}: python train.py {shlex.join([*QUALITY_RECIPES[name], *args.overrides, *budget])}",
                      flush=True)
                seconds = run(name, out, *budget)
                records = [json.loads(line) for line in open(f"{out}/metrics.jsonl")]
                last = [r for r in records if "val_bpb" in r][-1]
                ms = statistics.median(r["ms_per_step"] for r in records if "ms_per_step" in r)
                final_bpb[name].append(last["val_bpb"])
                log = Path(f"{out}.log").read_text()  # train.py's plan, and whether it was cut short
                plan = re.search(r"time budget [\d.]+ s: ([\d,]+) steps of (\d+) ms \(the warmup's mean\)", log)
                cuts = SECOND_LOOK.findall(log)  # why the run's count was shortened, if it was
                planned = f" (planned {plan[1]} at the warmup's {plan[2]} ms{', shortened' if cuts else ''})" if plan else ""
                print(f"  {last['step']:,} steps{planned}, median {ms:.1f} ms/step, {seconds:.0f} s wall "
                      f"({round(seconds - args.time_budget):+d} s against the budget): "
                      f"validation {last['val_bpb']:.3f} bits per byte", flush=True)
                for cut in cuts:
                    print(f"    shortened: {cut}", flush=True)  # (not always at an evaluation: review, session 24)
                dropout = json.loads(Path(f"{out}/config.json").read_text())["dropout"]
                print(f"    {fit_line(records, dropout)}", flush=True)
                if spent := BUDGET_SPENT.search(log):  # where the wall's seconds went, the interpreter's own last
                    print(f"    {spent[0]}; {seconds - float(spent[1]):.1f} s more in the process's start and exit",
                          flush=True)
    # (train.py runs at least its warm-up, whatever the budget: the wall times above say what each took)
    print(f"validation bits per byte of runs budgeted {args.time_budget:g} s, mean of {args.rounds} round(s):")
    print("\n".join(quality_table(final_bpb, names)))


def quality_table(final_bpb: dict[str, list[float]], names: list[str]) -> list[str]:
    """Each recipe's mean bits per byte, and the others' difference from the first's (+: worse)."""
    import statistics

    base = statistics.fmean(final_bpb[names[0]])
    return [f"  {name}: {mean:.3f}" + (f"  ({mean - base:+.3f} against {names[0]})" if name != names[0] else "")
            for name, mean in ((n, statistics.fmean(final_bpb[n])) for n in names)]


def add_quality_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("overrides", nargs="*", help="train.py options for every recipe (after --)")
    cpu, gpu = QUALITY_DEFAULTS["cpu"], QUALITY_DEFAULTS["gpu"]
    p.add_argument("--time_budget", type=positive_float, default=None,
                   help=f"seconds per run, start-up included (default: {cpu[1]:g} on the CPU, {gpu[1]:g} on a GPU)")
    p.add_argument("--recipes", default=None,
                   help=f"comma-separated, from {', '.join(QUALITY_RECIPES)}; the first is the one the others are "
                        f"compared with (default: {cpu[0]} on the CPU, {gpu[0]} on a GPU)")
    p.add_argument("--rounds", type=positive_int, default=1, help="runs of every recipe, alternating (default: 1)")


# ----------------------------------------------------------------------------- main

COMMANDS = {
    "decode": (bench_decode, add_decode_args, "decode tokens/s: cached, uncached, transformers"),
    "prepare": (bench_prepare, add_prepare_args, "data preparation MB/s and peak memory"),
    "train": (bench_train, add_train_args, "training tokens/s, ms/step and (on GPU) MFU of train.py's own loop"),
    "quality": (bench_quality, add_quality_args, "validation bits per byte at equal wall-clock: the default vs "
                                                 "issue 11's reference recipes"),
}


def main(argv: list[str] | None = None) -> None:
    from gpt.errors import CheckedStdout, OneLineParser, UsageError, first_of_its_machine, sigterm_raises, under_torchrun, \
        wait_while_another_says_it

    # (its subcommands' parsers are of its class too)
    parser = OneLineParser(prog="bench.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    commands = {name: sub.add_parser(name, help=help_text) for name, (_, _, help_text) in COMMANDS.items()}
    for name, (_, add_args, _) in COMMANDS.items():
        add_args(commands[name])
    stdout = sys.stdout
    if stdout is None:  # (Python's sys.stdout for a closed descriptor 1: every row ran for nothing, then a traceback)
        raise SystemExit("bench.py: error: stdout is closed: nowhere to write the figures (redirect it, e.g. > bench.txt)")
    # (the figures are the product: a stdout that fails stops it, in one line: hunt 33-a F4)
    sys.stdout = CheckedStdout(stdout, "bench.py", stop="the figures")
    try:
        try:  # (--help too, where its 0 hid a failed write: review 33b)
            args, unknown = parser.parse_known_args(argv)
            if unknown:  # (the command's error, as its other bad options': it was `bench.py: error: ...`, hunt 44-c C6)
                commands[args.command].error(commands[args.command].not_taken(unknown))
        except SystemExit as e:
            if e.code in (0, None):
                sys.stdout.flush()
            raise
    except BaseException as e:  # (argparse's exits, --help's included: stdout as it was for in-process callers)
        sys.stdout = stdout
        if isinstance(e, UsageError):
            raise SystemExit(f"bench.py: error: {e}") from None
        raise
    if under_torchrun():  # (hunt 35-b B8: each process's rows ran in a run directory of its own, and every
        # rank but the first, which alone writes, met a traceback reading its empty one's checkpoint)
        sys.stdout = stdout
        if not first_of_its_machine():
            wait_while_another_says_it()
            raise SystemExit(1)
        raise SystemExit("bench.py: error: bench.py runs in one process: start it with python, not torchrun (its rows "
                         "time one process; each of torchrun's would run them all)")
    remove_killed_benches_runs()  # (every command's: each may have left some, killed outright)
    try:
        with sigterm_raises():  # SIGTERM as Ctrl-C: temporary directories removed, children stopped, one line
            COMMANDS[args.command][0](args)
        sys.stdout.flush()  # a buffered stdout's failure is met here, not at the interpreter's exit
    except UsageError as e:  # a bad value found past argparse (a device, a shape): one line, as the scripts do
        raise SystemExit(f"bench.py {args.command}: error: {e}") from None
    except KeyboardInterrupt as e:  # (Terminated, SIGTERM's, is one: status 143)
        print(f"bench.py {args.command}: interrupted", file=sys.stderr)
        raise SystemExit(getattr(e, "exit_status", 130)) from None
    finally:
        sys.stdout = stdout


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except BrokenPipeError:  # piped into `head`: stop quietly, as sample.py does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
