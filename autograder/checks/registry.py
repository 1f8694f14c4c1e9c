"""The registry of checks: one per graded exercise, under the exercise id its cells and tests also use.

A notebook's check module registers each check with :func:`exercise`; autograder.checks runs them.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Check:
    exercise_id: str
    run: Callable[..., None]
    names: tuple[str, ...]      # the learner's names the check reads: its parameters
    builds_on: tuple[str, ...]  # earlier exercises whose code this one calls, checked first


_CHECKS: dict[str, Check] = {}


def exercise(exercise_id: str, builds_on: tuple[str, ...] = ()):
    """Register the decorated function as the check for ``exercise_id``.

    Its parameters name what the exercise must define in the notebook (``def check_backprop(backprop, Tensor)``).
    ``builds_on`` lists exercises whose code the learner's answer calls; they must be registered already.

    Raises:
        ValueError: a second check for one id, a parameter that is not a plain name, or an unknown earlier exercise
            (course bugs, raised at import).
    """
    def register(fn):
        if exercise_id in _CHECKS:
            raise ValueError(f"two checks for exercise {exercise_id!r}")
        params = inspect.signature(fn).parameters.values()
        if any(p.kind is not p.POSITIONAL_OR_KEYWORD or p.default is not p.empty for p in params):
            raise ValueError(f"check {exercise_id!r}: every parameter must be a learner's name, without a default")
        unknown = [e for e in builds_on if e not in _CHECKS]
        if unknown:
            raise ValueError(f"check {exercise_id!r} builds on unknown exercises {unknown}")
        _CHECKS[exercise_id] = Check(exercise_id, fn, tuple(p.name for p in params), tuple(builds_on))
        return fn
    return register


def answer_names(exercise_id: str) -> tuple[str, ...]:
    """The names an exercise's check reads from the notebook, in its signature's order."""
    return _CHECKS[exercise_id].names


def prerequisites(exercise_id: str) -> tuple[str, ...]:
    """The exercises ``exercise_id`` builds on, directly."""
    return _CHECKS[exercise_id].builds_on


def has_check(exercise_id: str) -> bool:
    return exercise_id in _CHECKS



def exercise_ids() -> list[str]:
    return sorted(_CHECKS)
