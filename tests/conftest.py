import sys
from pathlib import Path

# Tests import the project the way the scripts do: from the repository root.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import os  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def fail_writes(monkeypatch):
    """fail_writes(errno.ENOSPC, keep=4096): from then on, gpt/atomic.py's writes land `keep`
    characters and then raise that error, as a full disk (ENOSPC) or a size limit (EFBIG) does."""
    import gpt.atomic

    def arm(code: int, keep: int) -> None:
        def failing_open(name, mode="r", **kwargs):
            f = open(name, mode, **kwargs)
            write = f.write

            def cut(text):
                write(text[:keep])
                raise OSError(code, os.strerror(code), str(name))

            f.write = cut
            return f

        monkeypatch.setattr(gpt.atomic, "open", failing_open, raising=False)

    return arm
