"""Every cause a failed check can name, by a stable id with a one-line meaning: the list the grade, the class run's
log and the instructor's report count by.

A diagnosis ends with the line ``cause: <id>`` (autograder.contract.CAUSE_PREFIX). The generic causes are declared
here; each notebook's check module declares its misconceptions next to the probes and slip catalogues that detect
them (``declare``), so importing ``autograder.checks`` fills ``CAUSES`` with all of them. An id is
``<exercise>/<slip>`` for a misconception of one exercise, a bare word for a generic cause, and
``builds-on:<exercise>`` for a failure that an earlier exercise's failure explains.
"""
from __future__ import annotations

import re

from autograder.checks.registry import has_check

CAUSES: dict[str, str] = {}  # cause id -> what it means, one line
BUILDS_ON = "builds-on:"
_ID = re.compile(r"[a-z][a-z0-9_-]*(/[a-z0-9][a-z0-9-]*)?")


def declare(cause_id: str, meaning: str) -> str:
    """Add ``cause_id`` to the list; returns it, for the check module to keep as a constant.

    Raises:
        ValueError: an id not of the form above, an empty meaning, or an id declared twice (course bugs, at import).
    """
    if not _ID.fullmatch(cause_id) or not meaning.strip():
        raise ValueError(f"cause id {cause_id!r}: ids are `word` or `exercise/slip-name` (lowercase), with a meaning")
    if cause_id in CAUSES:
        raise ValueError(f"cause id {cause_id!r} declared twice")
    CAUSES[cause_id] = meaning
    return cause_id


def builds_on(exercise: str) -> str:
    """The cause of a failure explained by ``exercise``'s own failure: ``builds-on:<exercise>``."""
    return f"{BUILDS_ON}{exercise}"


def known(cause_id: str) -> bool:
    """Whether ``cause_id`` is declared, or names an exercise that has a check after ``builds-on:``."""
    if cause_id.startswith(BUILDS_ON):
        return has_check(cause_id[len(BUILDS_ON):])
    return cause_id in CAUSES


STUB = declare("stub", "the function is not written yet: its body still raises NotImplementedError")
NOT_DEFINED = declare("not-defined", "a name the exercise must define is missing from the notebook")
CRASH = declare("crash", "the learner's code raised an exception on a valid input")
TIMEOUT = declare("timeout", "the learner's code ran past its CPU-time (or wall-clock backstop) limit")
MEMORY = declare("memory", "the learner's code ran out of memory")
RECURSION = declare("recursion", "a recursive walk hit Python's recursion limit, or the code raised that limit")
KILLED = declare("killed", "the learner's code ended or killed the process that runs it")
LEFT_RUNNING = declare("left-running", "the learner's code left a thread or process running after it returned")
WRONG_SHAPE = declare("wrong-shape", "a result of the wrong shape (or not an array where one is asked for)")
WRONG_DTYPE = declare("wrong-dtype", "a result of the wrong dtype: integers, float32 or another type")
WRONG_TYPE = declare("wrong-type", "a result of the wrong kind: None, text, a torch tensor, another class")
NOT_FINITE = declare("not-finite", "a result holding inf or NaN where the exact value is finite")
CHANGED_INPUT = declare("changed-input", "the code wrote into an array it was given")
NONDETERMINISTIC = declare("nondeterministic", "the same input gave different answers when run again")
MISMATCH = declare("mismatch", "a wrong value that matches none of the exercise's known slips")
UNUSABLE = declare("unusable-answer", "the check could not use the answer at all (an object of an unforeseen kind)")
COURSE_ERROR = declare("course-error", "the grader itself failed on this exercise: not the learner's fault")
REFUSED = declare("refused", "not judged: the submission was refused, or the test cell is not one of the course's")
STDERR = declare("stderr", "the test cell wrote to stderr, which nbgrader scores as a failure")
VISIBLE_TEST = declare("visible-test", "a visible assert of the test cell failed in the notebook's kernel")

_STOPPED = ((MEMORY, ("out of memory",)), (RECURSION, ("segmentation fault", "recursion")),
            (KILLED, ("killed by signal", "ended the process", "not an answer")), (LEFT_RUNNING, ("still running when",)),
            (TIMEOUT, ("did not finish", "CPU time", "took more than", "stopped answering", "neither computing")))


def of_stop(reason: str) -> str:
    """The cause of a sandboxed worker's stop, from the reason autograder.trust.remote gives (its sentences are the
    only record of which limit was passed)."""
    return next((cause for cause, words in _STOPPED if any(w in reason for w in words)), COURSE_ERROR)
