"""Benchmarks: speed is measured here, never asserted by a test.

    python bench.py decode    # KV-cache decode vs uncached vs transformers.generate (issue 2, 5)
    python bench.py prepare   # tokenizer MB/s vs end-to-end data/prepare.py MB/s (issue 3)

Each command measures its reference in the same run and prints ratios against it.
"""

from __future__ import annotations

import argparse
import sys


# ----------------------------------------------------------------------------- decode


def bench_decode(args: argparse.Namespace) -> None:
    raise SystemExit("bench.py decode: not implemented yet")


def add_decode_args(p: argparse.ArgumentParser) -> None:
    pass


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
