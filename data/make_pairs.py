"""Make a small instruction data set from the embedded plays: "Who says: <line>" -> the speaker.

    python data/make_pairs.py                        # Hamlet -> data/who-says.jsonl
    python data/make_pairs.py --play macbeth --max_pairs 300 --out data/macbeth.jsonl

One {"prompt": "Who says: <the first line of a speech>", "response": "<SPEAKER>"} record per line,
for speeches whose first line has at least --min_chars characters (shorter ones, "My lord?", are
said by everyone), each line once (the first speaker to say it), in the play's order. Train on it
with train.py --data=data/who-says.jsonl (see README, "Instruction tuning").
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpt.sources import PrepareError, shakespeare_files, shakespeare_play_text, shakespeare_speeches  # noqa: E402


def who_says(play: str, min_chars: int, max_pairs: int) -> list[dict]:
    files = [f for f in shakespeare_files() if play.lower().replace(" ", "-") in f.stem]
    if len(files) != 1:
        names = ", ".join(f.stem for f in (files or shakespeare_files()))
        raise PrepareError(f"--play {play!r} matches {len(files)} plays; choose one of: {names}")
    pairs, seen = [], set()
    for speaker, lines in shakespeare_speeches(shakespeare_play_text(files[0].read_text(encoding="utf-8"))):
        line = lines[0]
        if len(line) >= min_chars and line not in seen:
            seen.add(line)
            pairs.append({"prompt": f"Who says: {line}", "response": speaker})
    return pairs[:max_pairs]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="data/make_pairs.py", description=__doc__.splitlines()[0])
    p.add_argument("--play", default="hamlet", help="a play's file name or part of it (default: hamlet)")
    p.add_argument("--min_chars", type=int, default=20, help="shortest first line to ask about (default: 20)")
    p.add_argument("--max_pairs", type=int, default=1000, help="at most this many pairs (default: 1000)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "who-says.jsonl"),
                   help="the JSONL file to write (default: data/who-says.jsonl)")
    args = p.parse_args(argv)
    try:
        pairs = who_says(args.play, args.min_chars, args.max_pairs)
    except PrepareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    Path(args.out).write_text("".join(json.dumps(pair) + "\n" for pair in pairs), encoding="utf-8")
    speakers = len({pair["response"] for pair in pairs})
    print(f"wrote {len(pairs)} pairs ({speakers} speakers) to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
