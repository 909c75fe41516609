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
    raise SystemExit("bench.py prepare: not implemented yet")


def add_prepare_args(p: argparse.ArgumentParser) -> None:
    pass


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
