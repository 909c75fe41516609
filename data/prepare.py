"""Tokenize text into train/val token shards: python data/prepare.py --help

With no arguments, prepares the Shakespeare plays with the GPT-2 tokenizer into data/shakespeare-gpt2.
The work is done by gpt/prepare.py; this file only makes `python data/prepare.py` work from anywhere.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if __name__ == "__main__":  # Ctrl-C while the imports below run: main's line, not a traceback
    from gpt.errors import one_line_on_ctrl_c

    one_line_on_ctrl_c("interrupted: nothing was written", on_sigterm="terminated: nothing was written")

from gpt.prepare import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
