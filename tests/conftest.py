"""Shared set-up: Jupyter and IPython state in a temp folder, the venv's tools on PATH, and paths to notebooks."""
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

# Before anything imports Jupyter: nothing may land in $HOME, and kernels/alembic come from this environment.
_STATE = Path(tempfile.mkdtemp(prefix="bfs-tests-"))
for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                 ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")):
    os.environ[var] = str(_STATE / sub)
    (_STATE / sub).mkdir()
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])

REPO = Path(__file__).resolve().parent.parent

from autograder.trust import sandbox  # noqa: E402 (after PATH is set: bwrap is looked up there)

# Where bubblewrap cannot sandbox, the tests that need it skip with this reason, and the run's last lines count them;
# the rest grade unsandboxed, as a self-study learner's `make grade` does there (the refusal has its own tests).
NO_SANDBOX = sandbox.unusable()
SANDBOX_SKIP = "no sandbox: "
requires_sandbox = pytest.mark.skipif(bool(NO_SANDBOX), reason=f"{SANDBOX_SKIP}{NO_SANDBOX}")
if NO_SANDBOX:
    os.environ[sandbox.WITHOUT_SANDBOX_ENV] = "1"
ASSIGNMENTS = sorted(p.parent.name for p in REPO.glob("source/*/*.ipynb") if p.stem == p.parent.name)


# What a submission must never read, show or leak: the content of a file outside it, which its links point at.
SECRET = b"the instructor's secret, 7f3a9c"
# A course's grading secret (autograder.trust.secret), for the tests that call the trusted verdicts directly.
COURSE_SECRET = bytes.fromhex("5e" * 32)


@contextmanager
def within(seconds: float):
    """Fail, instead of hanging, when the block takes longer (a named pipe opened for reading waits for a writer).
    Main thread only (SIGALRM)."""
    def stop(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def learner_notebook(name: str) -> Path:
    return REPO / "notebooks" / name / f"{name}.ipynb"


def solution_notebook(name: str) -> Path:
    return REPO / "solutions" / name / f"{name}.ipynb"


@pytest.fixture(params=ASSIGNMENTS)
def assignment(request) -> str:
    return request.param


def flat(phrases) -> tuple:
    """The phrases a rejection must show: a test table's row may give several in a tuple (a headline and the
    ``cause: <id>`` line) where its other rows give one."""
    return tuple(p for phrase in phrases for p in (phrase if isinstance(phrase, tuple) else (phrase,)))


def rejects(exercise_id, namespace, *phrases):
    """Run a check that must fail; every phrase must appear in its diagnosis, and the check must leave no trace in
    the process or the namespace's classes (what a learner's kernel keeps for its next cell). Returns the diagnosis."""
    from autograder import CheckFailure, check

    phrases = flat(phrases)
    before = traces(namespace)
    with pytest.raises(CheckFailure) as info:
        check(exercise_id, namespace)
    for phrase in phrases:
        assert phrase in info.value.message, info.value.message
    assert traces(namespace) == before, f"{exercise_id}'s check left a trace: {info.value.message}"
    return info.value.message


def traces(namespace) -> dict:
    """What a check run in a learner's kernel could leave behind for the cells after it: the recursion limit, numpy's
    error state, both random states, running threads, the garbage collector's frozen objects, and the plain class
    attributes (switches such as GradMode.enabled, counters) of the classes the notebook defined."""
    import gc
    import random
    import threading

    import numpy as np

    kind, keys, position, gauss, cached = np.random.get_state()
    own = [v for v in namespace.values() if isinstance(v, type) and v.__module__ == namespace.get("__name__")]
    return {"recursion limit": sys.getrecursionlimit(), "numpy errors": np.geterr(), "random": random.getstate(),
            "np.random": (kind, keys.tobytes(), position, gauss, cached), "threads": threading.active_count(),
            "frozen for the collector": gc.get_freeze_count(),
            "classes": {f"{cls.__qualname__}.{name}": value for cls in own for name, value in vars(cls).items()
                        if type(value) in (bool, int, float, str, type(None)) and not name.startswith("__")}}


@functools.lru_cache(maxsize=None)
def _solution(assignment: str) -> dict:
    from autograder.tools.solutions import solution_namespace

    return solution_namespace(assignment)


def learner(exercise_id, *answer) -> dict:
    """A notebook namespace whose own names for ``exercise_id`` hold ``answer`` (one object per name the check reads,
    or one dict of them by name), everything else being the solution's: the exercises it builds on pass."""
    from autograder.checks import answer_names
    from autograder.tools.exercise_tests import assignment_of

    names = answer_names(exercise_id)
    own = answer[0] if len(answer) == 1 and len(names) > 1 and isinstance(answer[0], dict) else dict(zip(names, answer))
    return {**_solution(assignment_of(exercise_id)), **own}



@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (--dist loadgroup, as `make test` runs)
def pytest_collection_modifyitems(config, items):
    """Order and group the tests for two xdist workers that take one test at a time: a module whose tests share a
    fixture wider than a test (a built wheel, a graded class) is one group, run by one worker, so the fixture is
    made once; and the modules with slow tests come first, so that no long test starts when the other worker has
    nothing left to run. Within a module the order stays as written."""
    for item in items:
        module = item.nodeid.partition("::")[0]
        if any(d.scope != "function" and d.baseid == module
               for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs):
            item.add_marker(pytest.mark.xdist_group(module))
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test item, so a fixture's teardown can tell a failed test (test_browser)."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def pytest_unconfigure(config):
    """Say loudly, as the run's last lines, when the browser tests, the hub's or the sandbox's tests could not run: a
    green run without them has not tested JupyterLab, the JupyterHub, or trusted grading's containment. The
    sandbox's line closes every run on a machine without one, so that it also closes `make test`, whose last run is
    the browser tests'."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    skipped = getattr(reporter, "stats", {}).get("skipped", [])
    browser = [r for r in skipped if "test_browser" in r.nodeid]
    if browser:
        reporter.write_sep("!", f"BROWSER TESTS SKIPPED ({len(browser)}): {_skip_reason(browser[0])}", red=True,
                           bold=True)
    hub = [r for r in skipped if "test_hub.py" in r.nodeid]
    if hub:  # no accounts can be made here (not root), or no proxy: the JupyterHub's whole flow went untested
        reporter.write_sep("!", f"HUB TEST SKIPPED ({len(hub)}): {_skip_reason(hub[0])}", red=True, bold=True)
    if NO_SANDBOX:
        count = sum(SANDBOX_SKIP in _skip_reason(r) for r in skipped)
        reporter.write_sep("!", f"SANDBOX TESTS SKIPPED ({count} in this run): {SANDBOX_SKIP}{NO_SANDBOX}", red=True,
                           bold=True)


def _skip_reason(report) -> str:
    return report.longrepr[2] if isinstance(report.longrepr, tuple) else ""


crowds_cpu_0 = pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2,
                                  reason="needs taskset and two CPUs")


def _die_with_parent() -> None:
    """In a child before it runs its program: SIGKILL it when this process ends, however it ends (a test run stopped
    with SIGTERM once left eight hogs loading the machine for the next run)."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG, linux/prctl.h; kept across exec


@contextmanager
def hogs_on_cpu_0(count: int = 8):
    """``count`` busy processes on CPU 0, at the same priority as everything else, each in a session of its own (with
    the scheduler's autogroups, processes of one session share one slice: a sandbox, in its own session, would get
    half the core whatever their number)."""
    started = [subprocess.Popen(["taskset", "-c", "0", "yes"], stdout=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_die_with_parent) for _ in range(count)]
    try:
        yield
    finally:
        for hog in started:
            hog.kill()
            hog.wait()
