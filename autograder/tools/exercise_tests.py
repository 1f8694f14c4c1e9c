"""`make check EX=<id>`: the tests of one exercise and the consistency tests of its notebook, for a maintainer
working on one check.

Selects, with pytest's ``-k``, the tests of ``tests/checks/test_checks_<module>.py`` whose names mention the
exercise id (every test of an exercise carries it: ``test_<id>_...`` or a parameter), and the tests of
``tests/course/`` for the exercise's notebook. Neither set starts a Jupyter kernel.
"""
from __future__ import annotations

import sys

import nbformat

from autograder.contract import REPO, assignments, exercise_id, nbgrader_cells


def assignment_of(exercise: str) -> str:
    """The assignment whose notebook holds ``exercise``.

    Raises:
        KeyError: no notebook of the course has that exercise; the message lists the ids there are.
    """
    known = {}
    for name, path in assignments().items():
        for meta in nbgrader_cells(nbformat.read(path, as_version=4)):
            known[exercise_id(meta["grade_id"])] = name
    if exercise not in known:
        raise KeyError(f"no exercise {exercise!r}; the course has {', '.join(sorted(known))}")
    return known[exercise]


def pytest_arguments(exercise: str) -> list[str]:
    """What ``pytest`` runs for one exercise: its check tests, then its notebook's consistency tests."""
    assignment = assignment_of(exercise)
    module = assignment.split("_", 1)[1]  # "03_backward_functions" -> the check module backward_functions
    return [str(REPO / "tests" / "checks" / f"test_checks_{module}.py"), str(REPO / "tests" / "course"),
            "-m", "not slow", "-k", f"{exercise} or {assignment}", "-q"]


def main(argv: list[str]) -> int:
    import pytest  # a maintainer's tool: pytest is there, the graders never import this module

    if len(argv) != 1:
        print("usage: python -m autograder.tools.exercise_tests <exercise id>", file=sys.stderr)
        return 2
    try:
        arguments = pytest_arguments(argv[0])
    except KeyError as unknown:
        print(unknown.args[0], file=sys.stderr)
        return 2
    return pytest.main(arguments)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
