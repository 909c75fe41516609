import os
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT

FAST_TEST = "tests/test_bench.py::test_quality_defaults_name_known_recipes_and_positive_budgets"


def run_pytest(deadline) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTEST_DEADLINE": deadline if isinstance(deadline, str) else f"{deadline:.0f}"}
    env.pop("PYTEST_TIMES_DIR", None)  # (a .ci/gpu stage's: this inner run's tests are not the stage's)
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


def test_a_cut_run_leaves_the_names_of_its_running_tests_and_the_times_of_its_finished_ones(tmp_path):
    # .ci/gpu's stages are cut by SIGINT at their time limit; pytest-xdist then prints no summary
    (tmp_path / "test_two.py").write_text(
        "import os, time\n"
        "def test_quick():\n    pass\n"
        "def test_slow():\n    open(os.environ['READY'], 'w').close()\n    time.sleep(120)\n")
    times, ready = tmp_path / "times", tmp_path / "ready"
    env = {**os.environ, "PYTEST_TIMES_DIR": str(times), "READY": str(ready)}
    env.pop("PYTEST_DEADLINE", None)
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                             f"--rootdir={tmp_path}", str(tmp_path / "test_two.py")],  # (node ids from there, whatever
                            cwd=ROOT, env=env, stdout=subprocess.PIPE,  # configuration file a parent directory holds)
                            stderr=subprocess.STDOUT, text=True,
                            # SIGINT reaches it even where this suite inherited it ignored (a shell's background job)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=60)[0]
    assert ready.exists() and proc.returncode == 2, output  # (2: interrupted)
    running = [p.read_text() for p in (times / "running").iterdir()]
    assert len(running) == 1 and running[0].startswith("test_two.py::test_slow (started "), running
    finished = (times / "times.tsv").read_text().splitlines()
    assert len(finished) == 1 and finished[0].endswith("\ttest_two.py::test_quick"), finished
    assert float(finished[0].split("\t")[0]) < 60


def test_a_suite_started_with_sigint_ignored_delivers_it_to_its_tests(tmp_path):
    # a shell's background job (`pytest &`) starts so: the tests of Ctrl-C then failed (hunt 50-t T1)
    (tmp_path / "test_one.py").write_text(
        "import signal, subprocess, sys\n"
        "def test_sigint():\n"
        "    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
        "    child = 'import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)'\n"
        "    assert subprocess.run([sys.executable, '-c', child], capture_output=True, text=True).stdout == 'True\\n'\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_DEADLINE", "PYTEST_TIMES_DIR")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                           f"--rootdir={tmp_path}", str(tmp_path / "test_one.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr
