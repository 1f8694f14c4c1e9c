"""One check per graded exercise, looked up by the exercise id that the notebook cells and tests also use."""
from __future__ import annotations

from typing import Callable

_CHECKS: dict[str, Callable[[object], None]] = {}


def exercise(exercise_id: str):
    """Register the decorated function as the check for ``exercise_id``."""
    def register(fn):
        if exercise_id in _CHECKS:
            raise ValueError(f"two checks for exercise {exercise_id!r}")
        _CHECKS[exercise_id] = fn
        return fn
    return register


def check(exercise_id: str, answer) -> None:
    """Run every hidden check of one exercise on the learner's answer.

    Raises:
        CheckFailure: the answer is wrong; the message names the misconception.
        KeyError: no check has this id (a course bug, not a learner's).
    """
    if exercise_id not in _CHECKS:
        raise KeyError(f"no check for exercise {exercise_id!r}; known: {sorted(_CHECKS)}")
    _CHECKS[exercise_id](answer)
    print(f"{exercise_id}: all hidden checks passed.")


def exercise_ids() -> list[str]:
    return sorted(_CHECKS)


# Each module registers its checks on import; one module per notebook.
from autograder.checks import nudging  # noqa: E402,F401
