"""A table of answers memorised from one grade earns nothing, for every registered exercise.

The attack: run the check once with a correct answer, record every (arguments -> result) it asks of the learner's
functions, then hand in a "memoriser" that looks each call's arguments up by value (arrays by dtype, shape and bytes,
numbers by repr) and returns the recorded result, or raises for an input it never saw. Replayed under the seed it was
recorded with, the memoriser passes (the test checks this first, or it would prove nothing); under the seed the
trusted grader gives the program that holds the table (autograder.trust.verdicts.program_seed), it must fail.

Every exercise is either attacked or exempt with its reason, and each exemption is itself checked: an answer whose
results cannot be replayed from a table fails even where the table was recorded, and an answer without a function
has nothing to memorise.
"""
from __future__ import annotations

import copy
import functools
import types
from collections import defaultdict
from dataclasses import dataclass

import nbformat
import numpy as np
import pytest

from autograder.checks import CheckFailure, answer_names, check, exercise_ids
from autograder.checks.harness.diagnostics import case_seed
from autograder.contract import assignments
from autograder.tools.exercise_tests import assignment_of
from autograder.tools.solutions import solution_namespace
from autograder.trust import verdicts
from conftest import COURSE_SECRET, solution_notebook

# Answers that are functions, but whose results are not values a table can hold: what they return must be the check's
# own objects, or what they do is change them. A table replays copies, which fails where it was recorded.
NOT_REPLAYABLE = {
    "topological_order": "returns the check's own graph nodes, in order: a recorded list holds copies of other nodes",
    "backward": "returns nothing: it writes .grad into the check's own nodes",
    "apply_op": "the Tensor it returns must record the check's own inputs (recipe.inputs is x), and no_grad switches "
                "GradMode: a replayed copy does neither",
    "topological_sort": "returns the check's own tensors, in order: a recorded list holds copies of other tensors",
    "backprop": "returns nothing: it writes .grad into the check's own tensors",
    "training": "train_epoch steps the check's own model and optimizer, and accuracy judges the check's own models: a "
                "replayed list of losses trains nothing",
}
# Answers with no function to memorise: the answer is a class, whose every result is a new object tied to the check's
# own (graph edges, gradients written back, parameters updated in place), or data. A class can still recognise the
# fixed probes' values; the checks of these classes (and of apply_op and backward) draw cases from the case seed
# too, and tests/checks/test_checks_*.py keep an answer right only on the fixed probes that must fail them.
NO_FUNCTION = {
    "value_node": "the answer is the class Value",
    "derived_operators": "the answer is the class Value (its operators), run on random programs",
    "nonlinearities": "the answer is the class Value (its nonlinearities), run on random programs",
    "mlp": "the answers are the classes MLP and Neuron",
    "operators": "the answer is the class Tensor (its operators), run on random programs",
    "module": "the answer is the class Module",
    "linear": "the answer is the class Linear",
    "sequential": "the answers are the classes Sequential and ReLU",
    "sgd": "the answer is the class SGD, which updates the check's own parameters in place",
    "predict_leaf_grads": "the answer is a prediction, data: a fixed question about torch by design",
    "predict_detach_clone": "the answer is a prediction, data: a fixed question about torch by design",
    "predict_accumulation": "the answer is a prediction, data: a fixed question about torch by design",
}
ATTACKED = [e for e in exercise_ids() if e not in NOT_REPLAYABLE and e not in NO_FUNCTION]
SLOW = {"training"}  # its check trains a network on MNIST digits: half a minute per run
# Answers whose results are graphs on their Tensor argument: a table holds each one's value and Jacobian (Linearised).
LINEARISED = {"cross_entropy"}


def fingerprint(value):
    """What a learner's code can tell of an argument, as a hashable key: arrays by dtype, shape and bytes, numbers and
    text by repr, containers element by element, other objects by their type and plain-data attributes (a Tensor by
    its array); a callable by its type alone (calling it is not looking it up)."""
    if isinstance(value, np.ndarray):
        return "array", value.dtype.str, value.shape, value.tobytes()
    if value is None or isinstance(value, (bool, int, float, complex, str, np.generic)):
        return "value", type(value).__name__, repr(value)
    if isinstance(value, (list, tuple)):
        return type(value).__name__, tuple(fingerprint(v) for v in value)
    if isinstance(value, dict):
        return "dict", tuple((repr(k), fingerprint(v)) for k, v in value.items())
    plain = sorted((k, fingerprint(v)) for k, v in getattr(value, "__dict__", {}).items()
                   if v is None or isinstance(v, (np.ndarray, bool, int, float, str)))
    return "object", type(value).__qualname__, tuple(plain)


def kept(result):
    """A deep copy of ``result``, or ``result`` itself where it cannot be copied (no_grad's context manager holds a
    generator): all a table can hold of it."""
    try:
        return copy.deepcopy(result)
    except TypeError:
        return result


@dataclass(frozen=True)
class Linearised:
    """A recorded Tensor result that is a graph on a Tensor argument (cross_entropy's losses on the logits), kept as
    its value and its Jacobian there: replayed as value + J·(x - x0), built with the engine's own operations, it has
    the recorded value and the recorded gradients, as a table of both would."""
    position: int            # which argument the result is a graph on
    at: np.ndarray           # that argument's array when recorded, flattened: float64 (n,)
    value: np.ndarray        # the result's array: float64, any shape of m elements
    jacobian: np.ndarray     # d value / d argument: float64 (m, n)

    @staticmethod
    def of(fn, args, kwargs, result) -> Linearised:
        """The linearisation of ``result = fn(*args, **kwargs)`` on its first argument that requires grad, by one
        backward pass per output element on fresh copies of that argument."""
        position = next(n for n, a in enumerate(args) if getattr(a, "requires_grad", False))
        Tensor, value = type(result), np.asarray(result.array, dtype=np.float64)
        rows = []
        for seed in np.eye(value.size):
            leaf = Tensor(np.array(args[position].array), requires_grad=True)
            fn(*args[:position], leaf, *args[position + 1:], **kwargs).backward(Tensor(seed.reshape(value.shape)))
            rows.append(np.asarray(leaf.grad.array, dtype=np.float64).reshape(-1))
        return Linearised(position, np.asarray(args[position].array, dtype=np.float64).reshape(-1), value,
                          np.array(rows))

    def replay(self, args):
        x = args[self.position]
        Tensor = type(x)
        offset = self.value.reshape(-1) - self.jacobian @ self.at
        return (Tensor(self.jacobian) @ x.reshape((self.at.size,)) + Tensor(offset)).reshape(self.value.shape)


class Table:
    """Recorded calls of one learner function: (fingerprint of the arguments, how often seen before) -> outcome, the
    result (``kept``, or Linearised when ``linearised``) or the exception raised."""

    def __init__(self, linearised: bool = False):
        self.outcomes, self._seen, self.linearised = {}, defaultdict(int), linearised

    def key(self, args, kwargs):
        arguments = fingerprint((args, kwargs))
        self._seen[arguments] += 1
        return arguments, self._seen[arguments]

    def recorder(self, fn):
        """``fn``, recording each outcome under its arguments."""
        def recorded(*args, **kwargs):
            key = self.key(args, kwargs)
            try:
                result = fn(*args, **kwargs)
            except Exception as error:
                self.outcomes[key] = error
                raise
            self.outcomes[key] = Linearised.of(fn, args, kwargs, result) if self.linearised else kept(result)
            return result
        return recorded

    def memoriser(self):
        """A function that replays the outcome recorded for its arguments, and raises KeyError for arguments the table
        does not hold."""
        self._seen.clear()

        def memorised(*args, **kwargs):
            outcome = self.outcomes[self.key(args, kwargs)]
            if isinstance(outcome, Exception):
                raise type(outcome)(*outcome.args)
            if isinstance(outcome, Linearised):
                return outcome.replay(args)
            return kept(outcome)
        return memorised


@functools.lru_cache(maxsize=None)
def solution(assignment: str) -> dict:
    """One solution namespace per notebook; the tests pass copies of it with their own functions in."""
    return solution_namespace(assignment)


def functions_of(exercise: str, namespace: dict) -> list[str]:
    """The names an exercise's check reads that hold plain functions in ``namespace``."""
    return [name for name in answer_names(exercise) if isinstance(namespace[name], types.FunctionType)]


def passes(exercise: str, namespace: dict, seed: int) -> bool:
    with case_seed(seed):
        try:
            check(exercise, namespace, quiet=True)
        except CheckFailure:
            return False
    return True


def table_cell(tables: dict[str, Table]) -> verdicts.Cell:
    """The cell a learner adds to hold the tables: what the worker runs, so the program's seed counts it."""
    keys = {name: sorted(repr(key) for key in table.outcomes) for name, table in tables.items()}
    return verdicts.Cell("cell 99", f"TABLES = {keys!r}", answer=False)


def solution_program(assignment: str) -> list[verdicts.Cell]:
    nb = nbformat.read(solution_notebook(assignment), as_version=4)
    return verdicts.program(nb, nbformat.read(assignments()[assignment], as_version=4))[0]


def record(exercise: str, seed: int) -> tuple[dict, dict[str, Table]]:
    """The solution's namespace, and a table per function of ``exercise``, recorded from one passing check under
    ``seed``."""
    namespace = solution(assignment_of(exercise))
    tables = {name: Table(exercise in LINEARISED) for name in functions_of(exercise, namespace)}
    recording = {**namespace, **{name: table.recorder(namespace[name]) for name, table in tables.items()}}
    assert passes(exercise, recording, seed), f"the solution fails {exercise} while recording"
    return namespace, tables


def memorising(namespace: dict, tables: dict[str, Table]) -> dict:
    return {**namespace, **{name: table.memoriser() for name, table in tables.items()}}


def marked(exercises):
    return [pytest.param(e, marks=pytest.mark.slow) if e in SLOW else e for e in exercises]


def test_every_exercise_is_attacked_or_exempt_with_a_reason():
    assert not set(NOT_REPLAYABLE) & set(NO_FUNCTION)
    assert set(NOT_REPLAYABLE) | set(NO_FUNCTION) <= set(exercise_ids()), "an exemption names no exercise"
    assert all(reason for reason in {**NOT_REPLAYABLE, **NO_FUNCTION}.values())
    assert ATTACKED and not (SLOW | LINEARISED) - set(exercise_ids())


@pytest.mark.parametrize("exercise", marked(ATTACKED))
def test_a_table_recorded_from_one_grade_fails_once_the_program_holds_it(exercise):
    program = solution_program(assignment_of(exercise))
    recorded_seed = verdicts.program_seed(program, COURSE_SECRET)
    namespace, tables = record(exercise, recorded_seed)
    assert passes(exercise, memorising(namespace, tables), recorded_seed), \
        "the memoriser fails where it was recorded: this attack proves nothing"
    seed_with_table = verdicts.program_seed(program + [table_cell(tables)], COURSE_SECRET)
    assert seed_with_table != recorded_seed
    assert not passes(exercise, memorising(namespace, tables), seed_with_table)


@pytest.mark.parametrize("exercise", marked(NOT_REPLAYABLE))
def test_an_answer_a_table_cannot_replay_fails_even_where_the_table_was_recorded(exercise):
    namespace, tables = record(exercise, 0)
    assert tables, f"{exercise} has no function to memorise: it belongs in NO_FUNCTION"
    assert not passes(exercise, memorising(namespace, tables), 0), \
        f"a table passes {exercise}: give its check randomized cases and move it out of NOT_REPLAYABLE"


@pytest.mark.parametrize("exercise", sorted(NO_FUNCTION))
def test_an_answer_without_a_function_has_nothing_to_memorise(exercise):
    assert not functions_of(exercise, solution(assignment_of(exercise)))


def pasted_table(recorded: dict) -> str:
    """The cell a learner adds below the answer cell of central_difference: the recorded slopes by x, h and f(x + h)
    (which tells the check's functions apart), and a central_difference that looks them up."""
    return (f"SLOPES = {recorded!r}\n\n"
            "def central_difference(f, x, h=1e-5):\n"
            "    return SLOPES[(repr(x), repr(h), repr(float(f(x + h))))]\n")


@pytest.mark.slow  # grades a whole notebook through the sandboxed workers
def test_a_table_pasted_into_an_added_cell_fails_the_trusted_grade(monkeypatch):
    """The attack end to end: slopes recorded under the seed the trusted grader gives the solution, pasted into a cell
    added below the untouched answer. A seed blind to that cell (as one hashed from the answer cells alone) hands the
    table the inputs it holds and the grade passes; the program's own seed does not."""
    name = assignment_of("central_difference")
    nb = nbformat.read(solution_notebook(name), as_version=4)
    recorded_seed = verdicts.program_seed(solution_program(name), COURSE_SECRET)
    namespace, slopes = solution(name), {}

    def recording(f, x, h=1e-5):
        key = (repr(x), repr(h), repr(float(f(x + h))))
        slopes[key] = float(namespace["central_difference"](f, x, h))  # a literal, not np.float64
        return slopes[key]

    assert passes("central_difference", {**namespace, "central_difference": recording}, recorded_seed)
    at = next(n for n, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "central_difference")
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(pasted_table(slopes)))
    course = nbformat.read(assignments()[name], as_version=4)
    with monkeypatch.context() as blind:
        blind.setattr(verdicts, "program_seed", lambda cells, secret: recorded_seed)
        assert verdicts.verdicts(nb, course, secret=COURSE_SECRET)["central_difference"].passed
    verdict = verdicts.verdicts(nb, course, secret=COURSE_SECRET)["central_difference"]
    assert not verdict.passed and "KeyError" in verdict.message, verdict.message
