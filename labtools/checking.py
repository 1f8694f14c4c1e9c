"""The course's checks in the learner's own notebook: the first line of every test cell.

``run_check`` shows, below the test cell, the diagnosis that grading gives: the misconception, the smallest input
that shows it, expected against received. It is the same check code that grades (``autograder.check``), so the two
cannot disagree on a verdict; the grade itself still comes from nbgrader's hidden block in the same cell, computed
outside the learner's kernel (README, "Trusted grading").
"""
from __future__ import annotations

import sys

# CPython's default recursion limit, the least a check runs with. An answer cell's sys.setrecursionlimit(120) left the
# course's imports without the stack they need: every test cell raised a bare RecursionError (red team 7). A grading
# worker puts a lowered limit back the same way before it runs learner code.
RECURSION_FLOOR = 1000


def run_check(exercise_id: str, namespace) -> None:
    """Run the course's check of one exercise on this notebook's names, printing a line when it passes.

    Args:
        exercise_id: the exercise's id, the same as its answer cell's nbgrader ``grade_id``.
        namespace: the notebook's ``globals()``; the check reads the names the exercise defines from it.

    Raises:
        autograder.CheckFailure: the answer is wrong. JupyterLab shows its diagnosis alone, without a traceback.

    A release handed out without the course's checks (the ``autograder`` package) gets a note instead, and the
    visible tests after this line still run.
    """
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_FLOOR))
    try:
        try:  # a learner release has no autograder: see below
            from autograder import check
        except ModuleNotFoundError as missing:
            if missing.name != "autograder":
                raise
            print("(The course's checks are not installed here, so only the visible tests below run.)")
            return
        check(exercise_id, namespace)
    finally:
        sys.setrecursionlimit(limit)
