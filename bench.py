"""Benchmarks: speed is measured here, never asserted by a test.

    python bench.py decode    # KV-cache decode vs uncached vs transformers.generate (issue 2, 5)
    python bench.py prepare   # tokenizer MB/s vs end-to-end data/prepare.py MB/s (issue 3)

Each command measures its reference in the same run and prints ratios against it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time


# ----------------------------------------------------------------------------- decode


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def bench_decode(args: argparse.Namespace) -> None:
    import torch

    from gpt.model import GPT, GPTConfig

    torch.manual_seed(0)
    config = GPTConfig(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd)
    model = GPT(config).eval()  # random weights: speed does not depend on their values
    prompt = torch.randint(0, config.vocab_size - 1, (args.batch, args.prompt_len))
    new = args.new_tokens
    print(f"decode: GPT-2 shape {args.n_layer}L/{args.n_head}H/{args.n_embd}C ({model.num_params() / 1e6:.1f}M), "
          f"batch {args.batch}, prompt {args.prompt_len}, {new} new tokens, greedy, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    rows: list[tuple[str, float]] = []

    def ours(label: str, dtype: torch.dtype, use_cache: bool, n: int):
        m = model.to(dtype)
        m.generate(prompt, 4, temperature=0, use_cache=use_cache)  # warm-up
        seconds, out = _timed(lambda: m.generate(prompt, n, temperature=0, use_cache=use_cache))
        rows.append((label, args.batch * n / seconds))
        print(f"  {label:<34} {rows[-1][1]:8.1f} tokens/s  ({seconds:.2f} s)", flush=True)
        return out

    tokens_fp32 = ours("ours, KV cache, fp32", torch.float32, True, new)
    if not args.skip_uncached:
        ours("ours, no cache, fp32", torch.float32, False, new)
    ours("ours, KV cache, bf16 weights", torch.bfloat16, True, new)
    model.to(torch.float32)

    hf_tokens = None
    if not args.skip_transformers:
        try:
            from transformers import GPT2LMHeadModel
        except ImportError:
            print("  transformers not installed: no reference")
        else:
            with tempfile.TemporaryDirectory() as tmp:
                model.save_pretrained(tmp)  # the very same weights
                hf = GPT2LMHeadModel.from_pretrained(tmp).eval()
            kw = dict(do_sample=False, use_cache=True, pad_token_id=config.vocab_size - 1)
            with torch.inference_mode():
                hf.generate(prompt, max_new_tokens=4, min_new_tokens=4, **kw)
                seconds, hf_tokens = _timed(lambda: hf.generate(
                    prompt, max_new_tokens=new, min_new_tokens=new, **kw))
            rows.append(("transformers generate, cache, fp32", args.batch * new / seconds))
            print(f"  {rows[-1][0]:<34} {rows[-1][1]:8.1f} tokens/s  ({seconds:.2f} s)")

    speeds = dict(rows)
    print("ratios (same run):")
    ref = speeds.get("transformers generate, cache, fp32")
    uncached = speeds.get("ours, no cache, fp32")
    if uncached:
        print(f"  cached fp32 / uncached fp32:       {speeds['ours, KV cache, fp32'] / uncached:6.2f}x  (target >= 5)")
    if ref:
        print(f"  cached fp32 / transformers fp32:   {speeds['ours, KV cache, fp32'] / ref:6.2f}x  (target >= 1.0)")
        print(f"  cached bf16 / transformers fp32:   {speeds['ours, KV cache, bf16 weights'] / ref:6.2f}x  (target >= 2.0)")
        same = (hf_tokens == tokens_fp32).float().mean().item()
        print(f"  greedy tokens equal to transformers': {same:.1%}")


def add_decode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n_layer", type=int, default=12)
    p.add_argument("--n_head", type=int, default=12)
    p.add_argument("--n_embd", type=int, default=768)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt_len", type=int, default=64)
    p.add_argument("--new_tokens", type=int, default=256)
    p.add_argument("--skip_uncached", action="store_true", help="skip the slow uncached baseline")
    p.add_argument("--skip_transformers", action="store_true", help="skip the transformers reference")


# ----------------------------------------------------------------------------- prepare


def bench_prepare(args: argparse.Namespace) -> None:
    """Single-process tokenizer speed vs data/prepare.py end to end (text files in -> shards on
    disk, all cores, in a fresh process) on the same text: the Shakespeare plays copied until
    there are args.mb MB. Then peak memory of prepare and its workers, and the loader's speed."""
    import json
    import math
    import os
    import re
    import subprocess
    from pathlib import Path

    from gpt.sources import shakespeare_files, shakespeare_play_text

    cores = args.num_proc or len(os.sched_getaffinity(0))
    plays = [(p.stem, shakespeare_play_text(p.read_text(encoding="utf-8"))) for p in shakespeare_files()]
    corpus_bytes = sum(len(text.encode()) for _, text in plays)
    copies = math.ceil(args.mb * 1e6 / corpus_bytes)
    with tempfile.TemporaryDirectory(prefix="bench-prepare-") as tmp:
        text_dir, out_dir = Path(tmp) / "text", Path(tmp) / "shards"
        for c in range(copies):  # one file per play and copy: one document each
            (text_dir / f"copy{c:03d}").mkdir(parents=True)
            for name, text in plays:
                (text_dir / f"copy{c:03d}" / f"{name}.txt").write_text(text, encoding="utf-8")
        total_mb = copies * corpus_bytes / 1e6
        print(f"prepare: {total_mb:.1f} MB of text (the Shakespeare plays x {copies}, {copies * len(plays)} files), "
              f"{args.tokenizer} tokenizer, {cores} cores")

        # End to end in a fresh process, as a user runs it, reporting its own and its workers' peak
        # RSS. It starts first, while this process is small: a child's ru_maxrss starts at its parent's.
        script = ("import json, resource, sys; from gpt.prepare import main; rc = main(sys.argv[1:]); "
                  "print(json.dumps([resource.getrusage(w).ru_maxrss for w in "
                  "(resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)])); sys.exit(rc)")
        cmd = [sys.executable, "-c", script, "--input", str(text_dir), "--out_dir", str(out_dir),
               "--tokenizer", args.tokenizer, "--num_proc", str(cores)]
        start = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parent)
        seconds = time.perf_counter() - start
        if run.returncode:
            raise SystemExit(f"prepare failed:\n{run.stderr}")
        main_kb, worker_kb = json.loads(run.stdout.splitlines()[-1])
        inner = re.search(r"in ([\d.]+)s", run.stdout)  # prepare's own time, from the tokenizer loaded to the rename

        # The reference: one process encoding the same text (gpt2: tok.encode is tiktoken's encode_ordinary).
        from gpt.tokenizer import get_tokenizer

        tok = get_tokenizer(args.tokenizer)
        encoded, start = 0, time.perf_counter()
        while time.perf_counter() - start < args.seconds:
            for _, text in plays:
                tok.encode(text)
            encoded += corpus_bytes
        single = encoded / 1e6 / (time.perf_counter() - start)
        name = "tiktoken encode_ordinary" if tok.name == "gpt2" else f"{tok.name}.encode"
        print(f"  tokenizer, 1 process ({name}): {single:.1f} MB/s; x {cores} cores = {cores * single:.1f} MB/s")
        e2e = total_mb / seconds
        print(f"  data/prepare.py end to end, {cores} processes: {e2e:.1f} MB/s = {e2e / (cores * single):.2f} x "
              f"(cores x single-process)  [target >= 0.80]  ({seconds:.1f} s with interpreter start and imports)")
        if inner:
            steady = total_mb / float(inner.group(1))
            print(f"    without process start (prepare's own {inner.group(1)} s): {steady:.1f} MB/s = "
                  f"{steady / (cores * single):.2f} x")
        together = (main_kb + cores * worker_kb) / 1024
        print(f"  peak RSS: main process {main_kb / 1024:.0f} MB, largest worker {worker_kb / 1024:.0f} MB; "
              f"all {cores + 1} processes together <= {together:.0f} MB  [target < 1024 MB]")

        # The loader: assembling CPU batches from the memmapped shards just written.
        from gpt.data import TrainBatches

        loader = TrainBatches(out_dir, args.batch_size, args.block_size)
        for _ in range(3):
            loader.next_batch()
        batches, start = 0, time.perf_counter()
        while time.perf_counter() - start < args.seconds:
            loader.next_batch()
            batches += 1
        rate = batches * args.batch_size * args.block_size / (time.perf_counter() - start)
        print(f"  loader: TrainBatches.next_batch {args.batch_size} x {args.block_size} on CPU: "
              f"{rate / 1e6:.0f}M tokens/s  [target >= 10M]")


def add_prepare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mb", type=float, default=100, help="MB of text to prepare (default: 100)")
    p.add_argument("--tokenizer", default="gpt2", choices=("gpt2", "byte"), help="(default: gpt2)")
    p.add_argument("--num_proc", type=int, default=None, help="prepare's processes (default: all cores)")
    p.add_argument("--seconds", type=float, default=3.0, help="time per single-process / loader measurement")
    p.add_argument("--batch_size", type=int, default=64, help="loader batch size (default: 64)")
    p.add_argument("--block_size", type=int, default=1024, help="loader block size (default: 1024)")


# ----------------------------------------------------------------------------- main

COMMANDS = {
    "decode": (bench_decode, add_decode_args, "decode tokens/s: cached, uncached, transformers"),
    "prepare": (bench_prepare, add_prepare_args, "data preparation MB/s and peak memory"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, add_args, help_text) in COMMANDS.items():
        add_args(sub.add_parser(name, help=help_text))
    args = parser.parse_args(argv)
    COMMANDS[args.command][0](args)


if __name__ == "__main__":
    main(sys.argv[1:])
