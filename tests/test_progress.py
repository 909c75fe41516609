import functools
import io
import time

import pytest
from tqdm import tqdm

from gpt.errors import UsageError
from gpt.progress import ProgressBar, refused_setting
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


def test_a_tqdm_setting_tqdm_cannot_draw_with_is_one_line(monkeypatch):
    # tqdm takes its defaults from TQDM_* as it imports; these it takes but cannot draw a bar with, which
    # was a traceback before train.py's first step and data/prepare.py's first shard (hunt 35-f F9, hunt 42-c C1)
    init = vars(tqdm)["__init__"]
    init = getattr(init, "func", init)  # (tqdm's own, without this environment's settings)
    for name, value, read in (("TQDM_ASCII", "1", "1"), ("TQDM_WRITE_BYTES", "0", True), ("TQDM_LOCK_ARGS", "x", "x"),
                              ("TQDM_BAR_FORMAT", "{x}", "{x}"),
                              # a number's format for what is None until a rate is measured: a TypeError, which
                              # was this check's own traceback (hunt 42-d D2)
                              ("TQDM_BAR_FORMAT", "{rate:.2f}", "{rate:.2f}")):
        monkeypatch.setenv(name, value)
        monkeypatch.setattr(tqdm, "__init__", functools.partialmethod(init, **{name[5:].lower(): read}))
        with pytest.raises(UsageError) as e:
            ProgressBar(total=3, file=io.StringIO())
        assert str(e.value).startswith(f"{name}={value}: "), e.value
        assert "\n" not in str(e.value)
        monkeypatch.delenv(name)
    monkeypatch.setattr(tqdm, "__init__", functools.partialmethod(init, ascii="1"))
    assert refused_setting({"ascii": True}) is None  # (the bar's own options win over the environment's)
    # settings tqdm can draw with draw
    for name, value in (("ascii", " #"), ("bar_format", "{l_bar}{bar}| {n_fmt}")):
        monkeypatch.setattr(tqdm, "__init__", functools.partialmethod(init, **{name: value}))
        out = io.StringIO()
        bar = ProgressBar(total=3, file=out)
        bar.update(3)
        bar.close()
        assert "3" in out.getvalue()
