"""How learner code is called and how a failure is shown."""
import os
import subprocess
import sys
import time

import pytest

from autograder.checks.harness import diagnostics
from autograder.checks.harness.diagnostics import Abandon, CheckFailure, Slip, as_float, call_learner


def test_failure_renders_without_frames_or_source():
    failure = CheckFailure("some_exercise", "line one\nline two")
    rendered = "\n".join(failure._render_traceback_())
    assert "line one" in rendered and "line two" in rendered and "some_exercise" in rendered
    assert "File" not in rendered and "check(" not in rendered


def test_learner_exception_becomes_failure_naming_the_input():
    with pytest.raises(CheckFailure, match=r"ZeroDivisionError.*for input x = 0") as info:
        call_learner("ex", lambda x: 1 / x, 0, shown_input="x = 0")
    assert isinstance(info.value.cause, ZeroDivisionError)


def test_stub_is_reported_as_not_implemented():
    def stub(x):
        raise NotImplementedError()
    with pytest.raises(CheckFailure, match="`test_stub_is_reported_as_not_implemented.<locals>.stub` is not written"):
        call_learner("ex", stub, 1)
    with pytest.raises(CheckFailure, match=r"\[ex\] `ex` is not written yet"):  # called through a lambda: no better name
        call_learner("ex", lambda x: (_ for _ in ()).throw(NotImplementedError()), 1)


def test_runaway_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(diagnostics, "CALL_TIMEOUT_S", 0.2)

    def loop(x):
        while True:
            try:
                time.sleep(0.01)
            except Exception:  # a learner's catch-all must not swallow the time limit
                pass
    started = time.monotonic()
    with pytest.raises(Abandon, match="did not finish within 1.2 s on the wall clock"):  # past hypothesis: no shrinking
        call_learner("ex", loop, 1)
    assert time.monotonic() - started < 5


def test_learner_code_in_this_process_is_timed_by_its_cpu_and_may_wait_a_while(monkeypatch):
    monkeypatch.setattr(diagnostics, "CALL_TIMEOUT_S", 0.2)

    def busy(x):
        while True:
            pass

    with pytest.raises(Abandon, match="did not finish within 0.2 s of CPU time"):
        call_learner("ex", busy, 1)
    assert call_learner("ex", lambda x: time.sleep(0.5) or x, 7) == 7  # past 0.2 s of wall time, but no CPU


def blas_threads() -> set[int]:
    from threadpoolctl import threadpool_info

    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_learner_code_checked_in_this_process_gets_one_blas_thread_as_in_grading():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2):  # what a 2-core machine gives numpy by default
        with diagnostics.kernel_limits():
            assert call_learner("ex", blas_threads) == {1}
            with diagnostics.kernel_limits():  # an exercise it builds on: the same limits, not entered again
                assert call_learner("ex", blas_threads) == {1}
        assert blas_threads() == {2}  # put back


def test_an_exercises_calls_in_this_process_share_one_cpu_budget(monkeypatch):
    """As a worker's exercise budget: many calls, each well within its own limit, stop once they add up to it."""
    monkeypatch.setattr(diagnostics.remote, "EXERCISE_BUDGET_S", 0.6)

    def busy(seconds):
        started = time.process_time()
        while time.process_time() - started < seconds:
            pass
        return seconds

    with diagnostics.kernel_limits():
        assert call_learner("ex", busy, 0.2) == call_learner("ex", busy, 0.2) == 0.2  # 0.4 s: within it
        with pytest.raises(Abandon, match="the checks of this exercise used more than 0.6 s of CPU time") as info:
            call_learner("ex", busy, 0.5, shown_input="x = 0.5")
    assert "while running for input x = 0.5" in info.value.failure.message
    with diagnostics.kernel_limits():  # the next check starts afresh
        assert call_learner("ex", busy, 0.3) == 0.3


@pytest.mark.parametrize("value", ["3", [1.0, 2.0], None])
def test_as_float_rejects_non_numbers(value):
    with pytest.raises(CheckFailure):
        as_float("ex", value, "the slope")


def test_missing_return_is_named():
    with pytest.raises(CheckFailure, match="forget its `return`"):
        as_float("ex", None, "the slope")


def test_checks_leave_no_hypothesis_folder_where_they_run(tmp_path):
    """A learner's notebook folder and nbgrader's autograded/ folder stay as they were: hypothesis keeps its cache in
    the temp folder, even for a caller that did not choose a place."""
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_STORAGE_DIRECTORY"}
    code = ("from autograder import check\nfrom autograder.tools.solutions import solution_namespace\n"
            "check('unbroadcast', solution_namespace('03_backward_functions'), quiet=True)")
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=300)
    assert not (tmp_path / ".hypothesis").exists()


def test_a_probe_names_the_slip_its_wrong_answer_matches():
    slips = (Slip(3.0, "off by one", "ex/off-by-one"), Slip(2.0, "forgot to square", "ex/not-squared"))
    probes = [diagnostics.Probe("f(2)", lambda: 4.0, 4.0), diagnostics.Probe("g(2)", lambda: 2.0, 4.0, slips)]
    told = r"forgot to square\ng\(2\): expected 4, received 2\.\ninput: g\(2\)\ncause: ex/not-sq"
    with pytest.raises(CheckFailure, match=told):
        diagnostics.run_probes("ex", probes)
    nan = diagnostics.Probe("h(0)", lambda: float("nan"), 0.0, (Slip(float("nan"), "divided by 0", "ex/divides"),))
    with pytest.raises(CheckFailure, match=r"divided by 0\n.*\ninput: h\(0\)\ncause: ex/divides$"):  # a NaN matches a NaN slip
        diagnostics.run_probes("ex", [nan])


def test_a_probe_without_a_matching_slip_gives_just_the_numbers():
    with pytest.raises(CheckFailure, match=r"^\[ex\] h: expected 1, received 5\.\ninput: h\ncause: mismatch$"):
        diagnostics.run_probes("ex", [diagnostics.Probe("h", lambda: 5.0, 1.0, (Slip(2.0, "no", "ex/two"),))])
    with pytest.raises(CheckFailure, match=r"^\[ex\] h: expected 1, received inf\.\ninput: h\ncause: not-finite$"):
        diagnostics.run_probes("ex", [diagnostics.Probe("h", lambda: float("inf"), 1.0)])
    diagnostics.run_probes("ex", [diagnostics.Probe("h", lambda: 1.0 + 1e-13, 1.0)])  # within AGAINST_TORCH


def test_bounded_shrinking_reports_the_latest_failure_after_its_calls():
    """Hypothesis stops SHRINK_CALLS calls after the first failure, with the smallest failure found by then."""
    from hypothesis import given, strategies as st

    calls = []

    @diagnostics.RANDOM_CASES
    @given(st.lists(st.integers(0, 1000), min_size=10))  # unbounded, hypothesis shrinks this in about 190 calls
    def case(values):
        calls.append(sum(values))
        if sum(values) > 3000:
            raise CheckFailure("ex", f"sum {sum(values)}")

    with pytest.raises(Abandon) as info:
        case()
    failing = [total for total in calls if total > 3000]
    assert len(calls) - calls.index(failing[0]) - 1 == diagnostics.SHRINK_CALLS
    assert info.value.failure.message == f"sum {failing[-1]}\ncause: mismatch" and failing[-1] < failing[0]


def test_a_time_limit_outlives_a_nested_call(monkeypatch):
    """A probe's call runs learner code through call_learner again: the inner limit must not switch the outer off."""
    monkeypatch.setattr(diagnostics, "CALL_TIMEOUT_S", 1)

    def probe_call():
        call_learner("ex", lambda: None, shown_input="a nested call")
        deadline = time.monotonic() + 5  # learner code that runs on after the nested call (bounded, so a bug fails)
        while time.monotonic() < deadline:
            pass

    with pytest.raises(Abandon):
        call_learner("ex", probe_call, shown_input="a probe")


def test_a_grading_run_checks_again_whatever_passed_before_in_the_same_cell_run(monkeypatch):
    """Graded from one IPython cell (nbgrader's API in a notebook), one student's pass must not excuse the next one's
    answer: skipping a second check in the same cell run (a test cell's hidden block, then its run_check) is for the
    learner's kernel only (red team 4, F4: an exercise passed unchecked so)."""
    import autograder.checks as checks
    from autograder.tools.solutions import solution_namespace

    monkeypatch.setattr(checks, "_cell_run", lambda: 7)  # every call below in one cell run
    monkeypatch.setattr(checks, "_passed_last", None)
    checks.check("central_difference", solution_namespace("01_nudging"), quiet=True, settled={})
    forward = solution_namespace("01_nudging", {"central_difference": [
        ("return (f(x + h) - f(x - h)) / (2 * h)", "return (f(x + h) - f(x)) / h")]})
    with pytest.raises(CheckFailure):
        checks.check("central_difference", forward, quiet=True, settled={})


def test_a_check_keeps_the_heap_out_of_the_collectors_scans_only_while_it_runs():
    import gc
    import weakref

    class Cyclic:
        pass

    assert gc.get_freeze_count() == 0
    with diagnostics.heap_frozen():
        assert gc.get_freeze_count() > 0
        cycle = Cyclic()
        cycle.itself, made = cycle, weakref.ref(cycle)
        del cycle
        gc.collect()  # garbage made during the check is still collected
        assert made() is None
    assert gc.get_freeze_count() == 0
    gc.freeze()  # frozen by something else: left to it
    try:
        frozen = gc.get_freeze_count()
        with diagnostics.heap_frozen():
            pass
        # neither unfrozen nor frozen again (frozen objects may die meanwhile: the count can only fall)
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_run_check_gives_the_checks_the_stack_a_lowered_recursion_limit_took_and_puts_it_back():
    """An answer cell's sys.setrecursionlimit(120) made every later test cell raise a bare RecursionError while the
    checks were imported (red team 7); the grade passed the same answers. The limit is the learner's again after."""
    from autograder.tools.solutions import solution_namespace
    from labtools import run_check

    namespace = solution_namespace("01_nudging")
    limit = sys.getrecursionlimit()
    code = ("import sys\nfrom labtools import run_check\n"  # a notebook's first cell, before any answer
            "sys.setrecursionlimit(120)\nrun_check('central_difference', {})\n")
    try:  # first in a fresh process, where the import is what needs the stack, then here
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert "RecursionError" not in done.stderr and "is not defined in your notebook" in done.stderr, done.stderr
        sys.setrecursionlimit(120)
        run_check("central_difference", namespace)
        assert sys.getrecursionlimit() == 120
    finally:
        sys.setrecursionlimit(limit)
