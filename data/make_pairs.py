"""Make a small instruction data set from the embedded plays: "Who says: <line>" -> the speaker.

    python data/make_pairs.py                        # Hamlet -> data/who-says.jsonl
    python data/make_pairs.py --play macbeth --max_pairs 300 --out data/macbeth.jsonl

One {"prompt": "Who says: <the first line of a speech>", "response": "<SPEAKER>"} record per line,
for speeches whose first line has at least --min_chars characters (shorter ones, "My lord?", are
said by everyone), each line once (the first speaker to say it), in the play's order. Train on it
with train.py --data=data/who-says.jsonl (see README, "Instruction tuning").
"""

import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpt.atomic import NotDurable, write_text_atomic  # noqa: E402
from gpt.errors import OneLineParser, stdout_checked  # noqa: E402
from gpt.sources import (PrepareError, shakespeare_files, shakespeare_play_text, shakespeare_speakers,  # noqa: E402
                         shakespeare_speeches)

STAGE_DIRECTION = re.compile(r"\[[^\]]*\]")  # a line of its own, e.g. [Aside to GUILDENSTERN]


def find_play(play: str) -> Path:
    """The play whose file name is `play` (spaces as hyphens); else the one whose name contains it.
    The exact name wins, since some names are inside others (henry-v in henry-viii, richard-ii in richard-iii)."""
    key = play.lower().replace(" ", "-")
    every = shakespeare_files()
    files = [f for f in every if f.stem == key] or [f for f in every if key in f.stem]
    if len(files) != 1:
        names = ", ".join(f.stem for f in (files or every))
        raise PrepareError(f"--play {play!r} matches {len(files)} plays; choose one of: {names}")
    return files[0]


def who_says(play: str, min_chars: int, max_pairs: int) -> list[dict]:
    if max_pairs < 1 or min_chars < 0:
        raise PrepareError(f"--max_pairs must be >= 1 and --min_chars >= 0, got {max_pairs} and {min_chars}")
    path = find_play(play)
    markdown = path.read_text(encoding="utf-8")
    speakers = shakespeare_speakers(markdown)
    pairs, seen = [], set()
    for speaker, lines in shakespeare_speeches(shakespeare_play_text(markdown)):
        line = lines[0]
        # A verse line ending in ':' after a stage direction ("Friends both, go join you with some
        # further aid:") is no speaker, and "[Aside to GUILDENSTERN]" no line to ask about (hunt 34-e E3)
        if speaker not in speakers or STAGE_DIRECTION.fullmatch(line):
            continue
        if len(line) >= min_chars and line not in seen:
            seen.add(line)
            pairs.append({"prompt": f"Who says: {line}", "response": speaker})
    if not pairs:  # an empty file would only fail later, in data/prepare.py, as "no text found"
        raise PrepareError(f"no speech in {path.stem} has a first line of at least {min_chars} characters; "
                           "lower --min_chars")
    return pairs[:max_pairs]


@stdout_checked("data/make_pairs.py")
def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="data/make_pairs.py", description=__doc__.splitlines()[0])
    p.add_argument("--play", default="hamlet",
                   help="a play's file name, or part of one that names a single play (default: hamlet)")
    p.add_argument("--min_chars", type=int, default=20, help="shortest first line to ask about (default: 20)")
    p.add_argument("--max_pairs", type=int, default=1000, help="at most this many pairs (default: 1000)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "who-says.jsonl"),
                   help="the JSONL file to write (default: data/who-says.jsonl in this checkout, whatever the working "
                        "directory)")
    args = p.parse_args(argv)
    if not args.out.strip():
        p.error("--out names no file")
    try:
        pairs = who_says(args.play, args.min_chars, args.max_pairs)
    except PrepareError as e:
        return p.fail(e)
    # `--out=~/pairs.jsonl`: the shell leaves a ~ after = as it is, and the write failed, "No such file or directory"
    # (or went into a folder named ~ here), where data/prepare.py's --out_dir=~/... is expanded (hunt 47-a A3)
    out = Path(os.path.expanduser(args.out))
    # a link's target is replaced, not the link (the new pairs went into a file put in the link's place, the shared
    # file it named kept the old ones: hunt 43-d D10), as data/prepare.py replaces a linked --out_dir's target
    # (os.path.realpath, not Path.resolve: a link to itself was resolve's RuntimeError, a traceback, where the
    # write says "Too many levels of symbolic links" in one line: hunt 43-f F4)
    out = Path(os.path.realpath(out)) if out.is_symlink() else out
    try:  # all at once: a full disk or an interrupt never leaves a cut-off file in place of an older one
        write_text_atomic(out, "".join(json.dumps(pair) + "\n" for pair in pairs))
    except OSError as e:
        return p.fail(f"{args.out}: {e.strerror or e}{'' if isinstance(e, NotDurable) else '; nothing was written'}")
    speakers = len({pair["response"] for pair in pairs})
    print(f"wrote {len(pairs)} pairs ({speakers} speakers) to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
