"""Progress bars: tqdm's, without the thread it starts beside them."""

from __future__ import annotations

import os

from tqdm import tqdm

from gpt.errors import ConfigError


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
        check_settings(options)
        super().__init__(*args, miniters=miniters, **options)


def check_settings(options: dict) -> None:
    """refused_setting's line as a ConfigError, for a script to check before its work, with the options its
    bar will have: met where the bar starts, it came after train.py's setup (the data read, the model built
    and compiled, config.json and a W&B run made) and data/prepare.py's first read of its source (an --hf
    download), and from every process of a torchrun job, each saying it (hunt 42-d D1)."""
    if (refused := refused_setting(options)) is not None:
        raise ConfigError(refused)


def refused_setting(options: dict) -> str | None:
    """A TQDM_* setting of the environment that tqdm takes (its defaults, read as it imports:
    tqdm.utils.envwrap) but cannot draw a bar with, as one line; None where there is none. Each was a
    traceback where the bar starts, before train.py's first step or data/prepare.py's first shard
    (hunt 35-f F9, hunt 42-c C1); one it cannot read at all stops the import (gpt.errors._refused_environment).
    Refused whether or not the bar is shown: every process of a job meets it alike. `options`: the bar's own,
    which win over the environment's."""
    from_environment = getattr(vars(tqdm)["__init__"], "keywords", {})  # (a functools.partialmethod's)
    settings = {key: value for key, value in from_environment.items() if key not in options}
    for key, value in settings.items():
        why = None
        if key == "ascii" and isinstance(value, str) and len(value) == 1:  # (ZeroDivisionError as it draws)
            why = "a bar of one character, which tqdm cannot draw: give two or more (' #'), or unset it"
        elif key == "write_bytes":  # (any value is true: bytes written to a text stream, TypeError)
            why = "tqdm then writes bytes where these bars write text: unset it"
        elif key == "lock_args":  # (a string, where tqdm takes a tuple: TypeError)
            why = "tqdm cannot take it from the environment: unset it"
        elif key == "bar_format" and isinstance(value, str):
            try:
                tqdm.format_meter(0, 1, 0, bar_format=value)
            # (str.format's refusals of a template; TypeError: a number's format for a value that is None
            # at the start, `{rate:.2f}`, a traceback from this check itself: hunt 42-d D2)
            except (KeyError, IndexError, AttributeError, ValueError, TypeError) as e:
                why = f"tqdm cannot draw it ({type(e).__name__}: {e}): correct it or unset it"
        if why is not None:
            name = f"TQDM_{key.upper()}"
            return f"{name}={os.environ.get(name, '')}: {why}"
    return None
