"""A check that fails by itself is the course's bug: told as a course error naming the exercise, in the kernel and
in a trusted grade alike, and marked so that nbgrader's log and the class run's row can say so. An answer the check
cannot use, or learner code that raises where the check did not expect it, stays the learner's."""
import dataclasses

import nbformat
import numpy as np
import pytest

from autograder import CheckFailure, check
from autograder import checks
from autograder.checks import nudging, registry
from autograder.contract import assignments, course_errors
from autograder.course.preprocessors import outputs
from autograder.trust import verdicts
from conftest import COURSE_SECRET, learner, requires_sandbox, solution_notebook

EXERCISE = "central_difference"
# The learner's answer, wrong in a way a check's code meets only outside call_learner: a NameError of its own.
TYPO = "def central_difference(f, x, h):\n    return undefined_name\n"


def course_code(source: str):
    """A step of a check, compiled as the course's own code (its frames are in autograder/checks/nudging.py)."""
    found = {"np": np}
    exec(compile(source, nudging.__file__, "exec"), found)
    return found["step"]


# The check's own bugs: a typo, a failed invariant, a misused library.
expected = course_code("def step(answer):\n    return expectd\n")
failed_assert = course_code("def step(answer):\n    assert answer is None, 'an invariant of the check'\n")
empty_draw = course_code("def step(answer):\n    import hypothesis.strategies as st\n"
                         "    st.sampled_from([]).example()\n")
# What an answer of an unforeseen shape makes the check's own code raise.
unusable = course_code("def step(answer):\n    return float(answer(lambda x: x, 1.0, 0.1) + 'a string')\n")


def broken(bug, exercise=EXERCISE):
    """The exercise's check with a first step that fails with ``bug``."""
    spec = registry._CHECKS[exercise]

    def run(**names):
        bug(names[exercise])
        spec.run(**names)

    return dataclasses.replace(spec, run=run)


def learners_typo(central_difference):
    return central_difference(lambda x: x, 1.0, 0.1)  # learner code called directly, as a check calls a method


COURSE_BUGS = {"NameError in the check": expected, "a failed assert": failed_assert, "a hypothesis error": empty_draw}
LEARNERS = {"an answer the check cannot use": unusable, "the learner's own NameError": learners_typo}


def namespace(bug) -> dict:
    names = learner(EXERCISE)
    if bug is learners_typo:
        names = dict(names)
        exec(compile(TYPO, "<cell 3>", "exec"), names)
    return names


@pytest.mark.parametrize("bug", COURSE_BUGS.values(), ids=COURSE_BUGS.keys())
def test_a_check_that_fails_by_itself_is_a_course_error_naming_the_exercise(monkeypatch, bug):
    monkeypatch.setitem(registry._CHECKS, EXERCISE, broken(bug))
    with pytest.raises(CheckFailure) as info:
        check(EXERCISE, namespace(bug))
    assert type(info.value).__name__ == "CourseError"
    assert info.value.message.startswith(f"course error: the check of `{EXERCISE}` itself failed (")
    assert "not in your answer" in info.value.message and "could not use your answer" not in info.value.message


def test_an_exercise_built_on_one_whose_check_failed_by_itself_says_the_grader_failed_not_the_learner(monkeypatch):
    """Issue 24: multiply_back runs the learner's unbroadcast; a course error in unbroadcast's check is not the
    learner's to fix, and the knock-on failure says so (its cause still names the exercise it builds on)."""
    monkeypatch.setitem(registry._CHECKS, "unbroadcast", broken(expected, "unbroadcast"))
    monkeypatch.setattr(checks, "_latest", {})  # passes this process remembers for the same objects
    with pytest.raises(CheckFailure) as info:
        check("multiply_back", learner("multiply_back"))
    told = info.value.message
    assert type(info.value) is CheckFailure and info.value.cause_id == "builds-on:unbroadcast", told
    assert "failed because of the grader, not because of your answer" in told and "Fix unbroadcast first" not in told
    assert "course error: the check of `unbroadcast` itself failed (NameError" in told


@pytest.mark.parametrize("bug", LEARNERS.values(), ids=LEARNERS.keys())
def test_what_the_answer_makes_a_check_raise_stays_the_learners(monkeypatch, bug):
    monkeypatch.setitem(registry._CHECKS, EXERCISE, broken(bug))
    with pytest.raises(CheckFailure) as info:
        check(EXERCISE, namespace(bug))
    assert type(info.value) is CheckFailure
    assert "the check could not use your answer" in info.value.message and "course" not in info.value.message


@requires_sandbox
@pytest.mark.slow  # a worker per case
@pytest.mark.parametrize("bug", [*COURSE_BUGS.values(), *LEARNERS.values()],
                         ids=[*COURSE_BUGS.keys(), *LEARNERS.keys()])
def test_the_trusted_grade_tells_a_course_error_as_the_kernel_does(monkeypatch, bug):
    monkeypatch.setitem(registry._CHECKS, EXERCISE, broken(bug))
    nb = nbformat.read(solution_notebook("01_nudging"), as_version=4)
    if bug is learners_typo:
        next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == EXERCISE).source = TYPO
    found = verdicts.verdicts(nb, nbformat.read(assignments()["01_nudging"], as_version=4), secret=COURSE_SECRET)
    verdict = found[EXERCISE]
    assert not verdict.passed and verdict.course_error == (bug in COURSE_BUGS.values()), verdict.message
    if verdict.course_error:
        assert verdict.message.startswith(f"course error: the check of `{EXERCISE}` itself failed (")
    else:
        assert "the check could not use your answer" in verdict.message
    assert found["numerical_gradient"].passed or bug is learners_typo  # it builds on the answer, not on the check


def test_a_graded_notebook_marks_its_course_errors_for_the_class_runs_row():
    nb = nbformat.v4.new_notebook()
    broken_cell, wrong_cell = nbformat.v4.new_code_cell(), nbformat.v4.new_code_cell()
    broken_cell.outputs = outputs(verdicts.Verdict(EXERCISE, False, "course error: ...", course_error=True), False)
    wrong_cell.outputs = outputs(verdicts.Verdict("numerical_gradient", False, "a wrong answer"), False)
    nb.cells = [broken_cell, wrong_cell]
    assert course_errors(nbformat.reads(nbformat.writes(nb), 4)) == [EXERCISE]
