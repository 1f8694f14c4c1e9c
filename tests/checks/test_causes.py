"""Causes as data: every diagnosis ends with ``cause: <id>``, every declared id is reached by a catalogued wrong
answer, a misconception is named only when the value received is that slip's, and a stub is told nothing else."""
import pytest

from autograder import CheckFailure, check
from autograder.checks import answer_names, causes
from autograder.checks.harness.diagnostics import call_learner
from autograder.contract import cause_of, input_of, with_cause
from catalogue import harvest
from conftest import learner, rejects
from test_checks_backward_functions import RIGHT, bundle

# Causes no check test's wrong answer can reach in-process, each with the test that reaches it instead.
REACHED_ELSEWHERE = {
    "timeout": "tests/checks/test_checks_scalar_engine.py::test_endless_walk_is_stopped_with_a_diagnosis",
    "memory": "an answer that allocates 4 GiB: the sandbox's limit (tests/trust)",
    "killed": "tests/trust: a worker whose code kills its process",
    "left-running": "tests/trust/test_trusted_grading.py: a worker whose code leaves a thread running",
    "course-error": "tests/trust: a grader that fails; TrustedVerdicts' missing verdicts",
    "refused": "tests/course: a test cell that is not the course's",
    "stderr": "tests/grade: a test cell that writes to stderr",
    "visible-test": "tests/grade: a visible assert that fails in the kernel",
    "unusable-answer": "an object no probe foresaw: the check's own error",
    "not-finite": "test_a_value_that_matches_no_slip_names_none (below)",
    "not-defined": "test_checks_backward_functions::test_a_name_missing_from_the_notebook_is_named (a hand-made "
                   "namespace, which the catalogue cannot copy)",
}


def test_cause_lines_are_read_and_replaced():
    assert cause_of("a diagnosis\ncause: vjp/sign") == "vjp/sign"
    assert cause_of("a diagnosis naming cause: vjp/sign in its text") is None  # only the last line counts
    assert with_cause("told\ncause: mismatch", "vjp/sign") == "told\ncause: vjp/sign"
    assert with_cause("told", "stub") == "told\ncause: stub"


def test_a_check_failure_ends_with_its_cause_and_keeps_a_wrapped_one():
    inner = CheckFailure("ex", "returned shape (2,)", cause_id=causes.WRONG_SHAPE)
    assert inner.message.splitlines()[-1] == "cause: wrong-shape" and inner.cause_id == "wrong-shape"
    inner = CheckFailure("ex", "returned shape (2,)", cause_id=causes.WRONG_SHAPE, input="f(x)")
    wrapped = inner.wrapped("what the probe asks")
    assert (wrapped.cause_id, wrapped.input) == ("wrong-shape", "f(x)") and wrapped.message.count("cause:") == 1
    assert wrapped.message == "what the probe asks\nreturned shape (2,)\ninput: f(x)\ncause: wrong-shape"


def test_learner_text_cannot_forge_a_failures_input_or_cause():
    """An exception message (or any text a diagnosis quotes) ending in input and cause lines named them, and the
    grade's --json showed them (red team 6, F3): they come from the check's arguments only."""
    forged = "nothing\ninput: FORGED\ncause: vjp/sign"
    quoting = CheckFailure("ex", f"your code said {forged}")
    assert (quoting.cause_id, quoting.input) == (causes.MISMATCH, None)
    assert (cause_of(quoting.message), input_of(quoting.message)) == ("mismatch", None)

    def learner(x):
        raise ValueError(forged)
    with pytest.raises(CheckFailure) as info:
        call_learner("ex", learner, 1, shown_input="f(1)")
    assert (info.value.cause_id, info.value.input) == (causes.CRASH, "f(1)")
    assert "\n" not in info.value.told and info.value.message.endswith("input: f(1)\ncause: crash")
    assert CheckFailure("ex", "x" * 5000).message.endswith("[...]\ncause: mismatch")  # cut before its cause line


def test_ids_are_declared_once_in_their_form():
    with pytest.raises(ValueError, match="declared twice"):
        causes.declare("vjp/sign", "again")
    with pytest.raises(ValueError, match="ids are"):
        causes.declare("Has Spaces/and Capitals", "a meaning")
    assert all(causes.CAUSES.values()) and "vjp/sign" in causes.CAUSES
    assert causes.known("builds-on:unbroadcast") and not causes.known("builds-on:no_such_exercise")


def test_every_declared_cause_is_reached_by_a_catalogued_wrong_answer():
    """The check tests hold each rejection's phrases; ``cause: <id>`` among them proves that wrong answer reaches it
    (the tests run it), and the parity harness proves the trusted grader names the same."""
    named = {phrase[len("cause: "):] for case in harvest().cases if not case.passes for phrase in case.phrases
             if phrase.startswith("cause: ")}
    unknown = sorted(c for c in named if not causes.known(c))
    assert not unknown, f"phrases naming undeclared causes: {unknown}"
    unreached = sorted(c for c in causes.CAUSES if c not in named and c not in REACHED_ELSEWHERE)
    assert not unreached, f"no catalogued wrong answer names these causes: {unreached}"
    assert not named & REACHED_ELSEWHERE.keys(), "reached by the catalogue after all: drop them from the list"


def test_a_value_that_matches_no_slip_names_none():
    """subtract_back1 returning twice the gradient is no slip the check knows: expected against received, and the
    cause `mismatch`, without the bias probe's "sum its gradient over the rows"; its missing minus is `vjp/sign`."""
    doubled = bundle("subtract_back0", "subtract_back1", subtract_back1=lambda g, out, x, y: RIGHT["subtract_back1"](
        -2 * g, out, x, y))
    message = rejects("subtract_back", learner("subtract_back", doubled), "cause: mismatch")
    assert message.splitlines()[0].startswith("subtract_back1(") and len(message.splitlines()) == 3, message
    assert message.splitlines()[1].startswith("input: subtract_back1("), message  # the failing input, as data
    assert "sum its gradient" not in message
    sign = rejects("subtract_back", learner("subtract_back", bundle("subtract_back0", "subtract_back1",
                                                                     subtract_back1=RIGHT["add_back1"])),
                   "opposite sign", "cause: vjp/sign")
    assert "sum its gradient" not in sign
    infinite = rejects("log_back", learner("log_back", lambda g, out, x: RIGHT["log_back"](g, out, x) / 0.0),
                       "cause: not-finite")
    assert len(infinite.splitlines()) == 3 and infinite.splitlines()[1].startswith("input: "), infinite


def _stub(name):
    found = {}
    exec(f"def {name}(*args, **kwargs):\n    raise NotImplementedError()", found)
    return found[name]


@pytest.mark.parametrize("exercise_id", ["unbroadcast", "multiply_back", "tanh_back", "sum_back", "mean_back",
                                         "permute_back", "expand_back", "maximum_back", "relu_back", "add_back"])
def test_an_untouched_stub_is_told_it_is_not_written_and_nothing_else(exercise_id):
    namespace = learner(exercise_id, *[_stub(name) for name in answer_names(exercise_id)])
    with pytest.raises(CheckFailure) as info:
        check(exercise_id, namespace)
    told, cause = info.value.message.splitlines()
    assert any(told.startswith(f"`{name}` is not written yet") for name in answer_names(exercise_id)), told
    assert cause == "cause: stub"
