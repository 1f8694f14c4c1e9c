"""The ``autograder`` package as nbgrader's grading kernel sees it (bound over the real one's ``__init__.py``).

The kernel runs learner code, and its outputs never earn a point: every test cell's verdict is computed outside it
(autograder.course.preprocessors.TrustedVerdicts). So it gets only the names the course's cells call, and none of
the checks: those hold the reference answers (notebook 3's backward rules, notebook 4's engine), which a learner's
cell could otherwise print into its own feedback (a red team did).

Runs *inside the sandbox*: standard library only.
"""


class CheckFailure(AssertionError):
    """The real checks' failure type, so that a learner's ``except autograder.CheckFailure`` still parses."""


def check(exercise_id: str, namespace, quiet: bool = False, settled=None) -> None:
    """What ``autograder.check`` does in a grading kernel: nothing but say that the verdict comes from outside."""
    print(f"{exercise_id}: checked outside this kernel.")
