import io
import time

from gpt.progress import ProgressBar
from tests.conftest import tqdm_monitors


def test_a_bar_leaves_no_thread_and_prints_an_update_that_comes_late(no_tqdm_monitor):
    # tqdm's monitor thread outlived its bars, and the next fork of the process (a second preparation's
    # tokenizer processes) happened beside it: Python 3.12 on warns of it (session 41)
    out = io.StringIO()
    bar = ProgressBar(total=10_000, file=out, mininterval=0.05)
    assert tqdm_monitors() == []
    for _ in range(9_000):  # fast updates: tqdm's own bar would print every few hundred of them from here on
        bar.update()
    for n in range(9_001, 9_004):  # then slow ones: each printed at once (the monitor's job, which this bar has not)
        time.sleep(0.06)
        bar.update()
        assert f"{n}/10000" in out.getvalue()
    bar.close()
    assert tqdm_monitors() == []
