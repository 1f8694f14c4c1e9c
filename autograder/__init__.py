"""Hidden-test machinery for Backprop from Scratch.

A hidden test cell calls ``check(exercise_id, learner_object)``. The check compares the learner's object with
torch.autograd in float64 and with central finite differences, runs misconception probes, and raises
:class:`CheckFailure` with a diagnosis when something is wrong.
"""
from autograder.diagnostics import CheckFailure
from autograder.checks import check

__all__ = ["CheckFailure", "check"]
