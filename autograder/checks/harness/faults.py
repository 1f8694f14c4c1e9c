"""Whose fault an exception is when it escapes a check's own code: the answer's, or the course's.

A check turns what learner code does into a CheckFailure where it calls that code (``call_learner``). An exception
that gets past that comes from the check's own code working on what the answer gave back. An answer of a shape no
probe expected gives the errors that operations on data raise (a TypeError from ``float(...)``, a ValueError from a
shape mismatch, a RuntimeError from torch): the learner is told the check could not use the answer. Anything else
(a NameError, an ImportError, a failed ``assert``, a hypothesis error) comes from the check itself, and counts as a
course error: the exercise fails, as any exercise that cannot be checked does, but the message, nbgrader's log and
the class run's row say it is the course's bug and name the exercise.
"""
from __future__ import annotations

import sysconfig
from pathlib import Path

from hypothesis.errors import HypothesisException

from autograder.checks import causes
from autograder.checks.harness.diagnostics import CheckFailure

# The errors an operation on an unexpected value raises; NotImplementedError (a RuntimeError) is a stub's.
ANSWER_ERRORS = (TypeError, ValueError, AttributeError, LookupError, ArithmeticError, RuntimeError, MemoryError)
# Where the course's code and the libraries it calls live: a frame anywhere else is learner code (a notebook cell).
NOT_LEARNER = tuple(str(Path(p).resolve()) for p in (
    Path(__file__).resolve().parents[2],  # the autograder package
    Path(__file__).resolve().parents[3] / "labtools",
    *{sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}))


class CourseError(CheckFailure):
    """A check failed by itself, not because of the answer: a bug in the course."""

    def __init__(self, exercise: str, error: BaseException):
        super().__init__(exercise, f"course error: the check of `{exercise}` itself failed "
                                   f"({type(error).__name__}: {str(error)[:300]}). That is a bug in the course, not "
                                   "in your answer; please tell your instructor, with this message.", cause=error,
                         cause_id=causes.COURSE_ERROR)


def course_fault(error: BaseException) -> bool:
    """Whether ``error``, which escaped a check's own code, is the course's fault (see the module's docstring).

    The learner's, whatever its type: an exception raised by learner code, here (its innermost frame is not the
    course's or a library's) or in a sandboxed worker (remote marks those with ``raised_in``), or one raised while
    handling such an exception."""
    chain, seen = [], error
    while seen is not None and len(chain) < 20:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    if any(hasattr(e, "raised_in") or _raised_by_learner(e) for e in chain):
        return False
    if isinstance(error, HypothesisException):  # how the check draws its cases (InvalidArgument is a TypeError)
        return True
    return not isinstance(error, ANSWER_ERRORS) or isinstance(error, NotImplementedError)


def _raised_by_learner(error: BaseException) -> bool:
    frame = error.__traceback__
    if frame is None:
        return False
    while frame.tb_next is not None:
        frame = frame.tb_next
    filename = frame.tb_frame.f_code.co_filename
    return not (filename.startswith("<frozen ") or str(Path(filename).resolve()).startswith(NOT_LEARNER))
