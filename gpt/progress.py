"""Progress bars: tqdm's, without the thread it starts beside them."""

from __future__ import annotations

from tqdm import tqdm


class ProgressBar(tqdm):
    """tqdm's bar without its monitor thread, which outlives every bar (tqdm 4.66-4.70) and is still
    there at the next fork of the process: the tokenizer processes of a second preparation in it
    (train.py then data/prepare.py in a test, a notebook) forked beside it, which may deadlock a child
    on a lock the thread held, and which Python 3.12 on warns of ("This process is multi-threaded, use
    of fork() may lead to deadlocks": test_prepare's out-of-memory test on 3.13 and 3.14, session 41).
    The monitor only shortens the wait of a bar whose miniters grew (updates that slowed down); this
    one's stay at 1: it prints at the first update mininterval after the last."""

    monitor_interval = 0

    def __init__(self, *args, miniters: int = 1, **options):
        super().__init__(*args, miniters=miniters, **options)
