import os
import subprocess
import sys
import time

from tests.conftest import ROOT

FAST_TEST = "tests/test_bench.py::test_quality_defaults_name_known_recipes_and_positive_budgets"


def run_pytest(deadline) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTEST_DEADLINE": deadline if isinstance(deadline, str) else f"{deadline:.0f}"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", FAST_TEST],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_tests_past_the_stages_deadline_are_skipped_and_named_in_the_summary():
    # .ci/gpu's test stages set PYTEST_DEADLINE, so a stage cut by its time still prints pytest's summary
    late = run_pytest(time.time() - 1)  # (status 2: not all tests ran, as an interrupted run's)
    assert late.returncode == 2 and "1 skipped" in late.stdout, late.stdout + late.stderr
    assert f"not run: the stage's time was spent (PYTEST_DEADLINE): {FAST_TEST}" in late.stdout  # named
    in_time = run_pytest(time.time() + 600)
    assert in_time.returncode == 0 and "1 passed" in in_time.stdout, in_time.stdout + in_time.stderr


def test_a_malformed_deadline_is_one_line_not_a_traceback_per_test():
    proc = run_pytest("tomorrow")
    assert proc.returncode == 4 and "PYTEST_DEADLINE must be seconds since the epoch, got 'tomorrow'" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
