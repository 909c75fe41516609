import importlib

import pytest

from gpt.errors import install_hint


def test_install_hint_says_install_only_where_the_package_itself_is_absent():
    with pytest.raises(ImportError) as absent:
        importlib.import_module("no_such_package_here")
    assert install_hint(absent.value, "no-such-package-here", "no_such_package_here") == \
        "pip install no-such-package-here"
    # installed, but one of its own imports fails (a dependency missing, or a release made for a newer
    # torch): installing it again would change nothing, so the hint names the package's version and why
    dependency = ModuleNotFoundError("No module named 'dill'", name="dill")
    hint = install_hint(dependency, "pytest")
    assert hint.startswith(f"pytest {pytest.__version__} is installed but does not import here "
                           "(No module named 'dill'): install a release that fits")
    newer = ImportError("cannot import name 'ScalingType' from 'torch.nn.functional'")
    assert "is installed but does not import here (cannot import name 'ScalingType'" in install_hint(newer, "pytest")


class FailingStream:
    """A stdout whose writes fail with `error` after its first `keep` writes."""

    def __init__(self, error: OSError, keep: int = 0):
        self.error, self.keep, self.written = error, keep, []

    def write(self, text):
        if len(self.written) >= self.keep:
            raise self.error
        self.written.append(text)
        return len(text)

    def flush(self):
        pass


def test_a_log_whose_stdout_fails_says_so_once_and_the_work_goes_on(capsys):
    # `train.py > /dev/full` was a traceback at its first line and lost the run (hunt 33-a F4)
    import errno

    from gpt.errors import CheckedStdout

    stream = FailingStream(OSError(errno.ENOSPC, "No space left on device"), keep=1)
    out = CheckedStdout(stream, "train.py")
    assert out.write("step 1\n") == 7 and out.write("step 2\n") == 7 and out.write("step 3\n") == 7
    out.flush()
    assert stream.written == ["step 1\n"] and out.exit_status(0) == 1 and out.exit_status(2) == 2
    assert capsys.readouterr().err == ("train.py: error: writing to stdout failed: No space left on device; the rest "
                                       "of its output is dropped, and the work goes on\n")
    # a reader gone (`| head`) is the reader's choice: nothing said, and status 0
    out = CheckedStdout(FailingStream(BrokenPipeError(errno.EPIPE, "Broken pipe")), "train.py")
    assert out.write("step 1\n") == 7 and out.exit_status(0) == 0 and capsys.readouterr().err == ""


def test_a_product_whose_stdout_fails_stops_at_once():
    import errno

    from gpt.errors import CheckedStdout, UsageError

    out = CheckedStdout(FailingStream(OSError(errno.EIO, "Input/output error")), "sample.py", stop="the samples")
    with pytest.raises(UsageError, match=r"^writing the samples to stdout failed: Input/output error$"):
        out.write("text")
    out = CheckedStdout(FailingStream(BrokenPipeError(errno.EPIPE, "Broken pipe")), "sample.py", stop="the samples")
    with pytest.raises(BrokenPipeError):  # for the script to end quietly
        out.write("text")
