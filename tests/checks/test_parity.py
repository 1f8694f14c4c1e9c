"""One verdict everywhere: every case of the check tests gets the same verdict, for the same cause, from the trusted
grader (the sandboxed worker that ``python -m autograder grade`` uses) as in the tests' own process, and a sample of
them the same again from ``run_check`` in a real kernel, run as a learner runs a notebook.

The cases are read out of tests/checks/test_checks_*.py (``catalogue.harvest``). In the worker each case is one
learner program judged by ``autograder.trust.verdicts.judged``, as one exercise of a grade is: a fresh worker forked
from one zygote per notebook. "The same cause" is what the check test asserts of the diagnosis (its phrases) against
the trusted grader, and the whole headline (the diagnosis's first line) between the kernel and the trusted grader.
"""
from __future__ import annotations

import functools

import pytest

from autograder.trust import remote, verdicts
from catalogue import Case, harvest, program_cells
from conftest import ASSIGNMENTS

# What the harvest cannot copy, and why: each of these tests changes a check's own constants (monkeypatch) or tests
# a piece of a check on a namespace it changes first. A test not listed here that yields no case fails the harness.
UNREAD = {
    "test_checks_scalar_engine::test_endless_walk_is_stopped_with_a_diagnosis[0]": "shortens the call timeout",
    "test_checks_scalar_engine::test_central_differences_run_the_program_that_was_graded[0]": "one program's replay",
    "test_checks_backward_functions::test_a_name_missing_from_the_notebook_is_named[0]#0": "a hand-made namespace",
    "test_checks_tensor_engine::test_whole_engine_programs_catch_what_they_run[0]": "one phase of a check",
    "test_checks_tensor_engine::test_the_drawn_graphs_prose_states_the_gradients_torch_computes[0]": "prose",
    "test_checks_modules_mnist::test_training_run_must_reach_the_floor[0]": "raises the accuracy floor",
    "test_checks_modules_mnist::"
    "test_torchs_default_initialisation_leaves_a_third_of_the_variance_as_section_5_2_says[0]": "prose",
}
# Where the trusted grader differs on purpose: it fails these too, for its own stated reason.
BY_DESIGN = {
    "test_checks_nudging::test_tanh_network_gradients_rejects_torch": "torch cannot be imported while grading",
}
PREFIX = "While running your notebook's cells: "


@functools.lru_cache(maxsize=None)
def catalogue():
    return harvest()


def cases_of(notebook: str) -> list[Case]:
    return [c for c in catalogue().cases if c.recipe.notebook == notebook]


def headline(message: str) -> str:
    """The diagnosis's first line: the cause it names (past what the trusted grader says of the cells first)."""
    if message.startswith(PREFIX):
        message = message.partition("\n")[2]
    return message.partition("\n")[0]


def trusted(cases: list[Case]) -> dict[str, verdicts.Verdict]:
    """Each case's verdict from a worker of its own, all forked from one zygote."""
    found = {}
    with remote.Zygote() as zygote:
        for case in cases:
            budget = remote.Budget(remote.SUBMISSION_BUDGET_S, "the checks of this notebook")
            run = verdicts.Judging(program_cells(case.recipe), {}, {}, zygote, budget)
            found[case.id] = verdicts.judged(case.exercise, run)
    return found


def disagreements(cases: list[Case], found: dict[str, verdicts.Verdict]) -> list[str]:
    """What the trusted grader said that the check tests do not: another verdict, or a diagnosis without a phrase."""
    wrong = []
    for case in cases:
        verdict = found[case.id]
        by_design = next((why for test, why in BY_DESIGN.items() if case.id.startswith(test + "[")), None)
        if verdict.passed != case.passes:
            wrong.append(f"{case.id} ({case.exercise}): the tests say {'pass' if case.passes else 'fail'}, the "
                         f"trusted grader {'passes' if verdict.passed else 'fails'}: {verdict.message[:300]}")
        elif not verdict.passed and by_design is None and not all(p in verdict.message for p in case.phrases):
            missing = [p for p in case.phrases if p not in verdict.message]
            wrong.append(f"{case.id} ({case.exercise}): the trusted diagnosis lacks {missing}: {verdict.message[:300]}")
    return wrong


def test_the_catalogue_holds_every_case_of_the_check_tests():
    found = catalogue()
    assert found.unread.keys() == UNREAD.keys(), {k: v for k, v in found.unread.items() if k not in UNREAD}
    for notebook in ASSIGNMENTS:
        kinds = {c.passes for c in cases_of(notebook)}
        assert kinds == {True, False}, f"{notebook}: no {'rejection' if True in kinds else 'acceptance'} case read"
    assert len(found.cases) >= 370  # what the check tests held when the harness was written


@pytest.mark.slow  # grades every case of one notebook through the sandboxed workers (half a minute to a minute)
@pytest.mark.parametrize("notebook", ASSIGNMENTS)
def test_the_trusted_grader_gives_every_case_the_verdict_the_check_tests_give(notebook):
    cases = cases_of(notebook)
    wrong = disagreements(cases, trusted(cases))
    assert not wrong, f"{len(wrong)} of {len(cases)} cases differ:\n" + "\n".join(wrong)
