"""The course's checks in the learner's own notebook: the first line of every test cell.

``run_check`` shows, below the test cell, the diagnosis that grading gives: the misconception, the smallest input
that shows it, expected against received. It is the same check code that grades (``autograder.check``), so the two
cannot disagree on a verdict; the grade itself still comes from nbgrader's hidden block in the same cell, computed
outside the learner's kernel (README, "Trusted grading").
"""
from __future__ import annotations


def run_check(exercise_id: str, answer) -> None:
    """Run the course's check of one exercise on ``answer`` here, printing a line when it passes.

    Args:
        exercise_id: the exercise's id, the same as its answer cell's nbgrader ``grade_id``.
        answer: what the exercise asks for: the learner's function or class, or a dict of them by name.

    Raises:
        autograder.CheckFailure: the answer is wrong. JupyterLab shows its diagnosis alone, without a traceback.

    A release handed out without the course's checks (the ``autograder`` package) gets a note instead, and the
    visible tests after this line still run.
    """
    try:
        from autograder import check
    except ModuleNotFoundError as missing:
        if missing.name != "autograder":
            raise
        print("(The course's checks are not installed here, so only the visible tests below run.)")
        return
    check(exercise_id, answer)
