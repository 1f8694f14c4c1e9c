"""One check per graded exercise, looked up by the exercise id that the notebook cells and tests also use."""
from __future__ import annotations

import os
import warnings
from typing import Callable

import numpy as np
from hypothesis.errors import Flaky, FlakyFailure

from autograder import remote
from autograder.course import TRUSTED_GRADING_ENV
from autograder.diagnostics import CALL_TIMEOUT_S, Abandon, CheckFailure, recursion_limit_kept

_CHECKS: dict[str, Callable[[object], None]] = {}


def exercise(exercise_id: str):
    """Register the decorated function as the check for ``exercise_id``."""
    def register(fn):
        if exercise_id in _CHECKS:
            raise ValueError(f"two checks for exercise {exercise_id!r}")
        _CHECKS[exercise_id] = fn
        return fn
    return register


def builds_on(exercise_id: str, earlier: str, answer) -> None:
    """Run an earlier exercise's check first, so that its failure is named here instead of surfacing as a puzzle.

    Raises:
        CheckFailure: for ``exercise_id``, quoting the earlier exercise's diagnosis.
    """
    try:
        _CHECKS[earlier](answer)
    except CheckFailure as failure:
        raise CheckFailure(exercise_id, f"this exercise builds on {earlier}, which fails first: {failure.message}") from None


def skipped_in_kernel(exercise_id: str) -> bool:
    """Under `nbgrader autograde` with the course's config, a check's in-kernel copy decides nothing.

    Both conditions are needed: nbgrader sets NBGRADER_EXECUTION only while autograding (validate still runs the
    checks), and only the course's Execute settings set the flag that says TrustedVerdicts comes next.
    """
    return (os.environ.get("NBGRADER_EXECUTION") == "autograde" and os.environ.get(TRUSTED_GRADING_ENV) == "1"
            and has_check(exercise_id) and not remote.in_use())


def has_check(exercise_id: str) -> bool:
    return exercise_id in _CHECKS


def check(exercise_id: str, answer, quiet: bool = False) -> None:
    """Run every hidden check of one exercise on the learner's answer (local objects or ``autograder.remote`` ones).

    Raises:
        CheckFailure: the answer is wrong; the message names the misconception.
        KeyError: no check has this id (a course bug, not a learner's).
    """
    if exercise_id not in _CHECKS:
        raise KeyError(f"no check for exercise {exercise_id!r}; known: {sorted(_CHECKS)}")
    if skipped_in_kernel(exercise_id):
        print(f"{exercise_id}: checked outside this kernel.")  # nbgrader autograde: TrustedVerdicts decides
        return
    if (exercise_id, _cell_run()) == _passed_last:  # a source notebook's hidden block, then run_check: once is enough
        return
    try:
        # nbgrader scores a test cell that writes to stderr as failed, so warnings must not escape.
        with warnings.catch_warnings(), np.errstate(all="ignore"), recursion_limit_kept(exercise_id):
            warnings.simplefilter("ignore")
            _CHECKS[exercise_id](answer)
    except CheckFailure:
        raise
    except Abandon as stop:
        raise stop.failure from None
    except remote.Stopped as stop:  # the worker died or stalled outside call_learner (reading an attribute, ...)
        why = f"your code did not finish within {CALL_TIMEOUT_S} s: is there a loop that never ends?" \
            if stop.timeout else stop.reason
        raise CheckFailure(exercise_id, why) from None
    except (Flaky, FlakyFailure):
        raise CheckFailure(exercise_id, "your code gave different answers for the same input when run again: does it "
                                        "keep state between calls (a counter, a cache, a global), or depend on the "
                                        "order in which a set is iterated (which changes from run to run)?") from None
    except Exception as error:  # an answer of a shape no probe foresaw: still a diagnosis, never hidden frames
        raise CheckFailure(exercise_id, f"the check could not use your answer ({type(error).__name__}: {error}); "
                                        "make sure it returns what the exercise asks for.") from None
    _remember_pass(exercise_id)
    if not quiet:
        print(f"{exercise_id}: all hidden checks passed.")


_passed_last: tuple[str, int] | None = None  # (exercise id, IPython cell run) of the last check that passed


def _cell_run() -> int | None:
    """Which cell run of an IPython kernel this is (its execution count), or None outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return None if shell is None else shell.execution_count


def _remember_pass(exercise_id: str) -> None:
    """A second call for the same exercise in the same cell run (a test cell's hidden block and its visible
    run_check line) checks the same objects again: it is skipped. Running the cell again checks again."""
    global _passed_last
    run = _cell_run()
    _passed_last = None if run is None else (exercise_id, run)


def exercise_ids() -> list[str]:
    return sorted(_CHECKS)


# Each module registers its checks on import; one module per notebook.
from autograder.checks import backward_functions, modules_mnist, nudging, scalar_engine, tensor_engine  # noqa: E402,F401
