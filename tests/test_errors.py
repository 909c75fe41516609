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
