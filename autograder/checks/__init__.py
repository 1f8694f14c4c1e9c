"""One check per graded exercise, looked up by the exercise id that the notebook cells and tests also use.

The answer contract: a check's parameters are the learner's names it reads. ``check("backprop", globals())`` binds
them from the notebook's namespace by name (as otter-grader binds a test's parameters), so the hidden cell, the
visible ``run_check`` line, the trusted grader and the tests all pass one thing, the namespace, and the check's own
signature is the single list of what an exercise must define. ``builds_on`` names the exercises whose code this one
calls; their checks run first, and a failure there is reported as this exercise's cause.
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Mapping

import numpy as np
from hypothesis.errors import Flaky, FlakyFailure

from autograder.trust import remote
from autograder.contract import TRUSTED_GRADING_ENV
from autograder.checks import causes
from autograder.checks.registry import _CHECKS, Check, answer_names, exercise, exercise_ids, has_check, prerequisites  # noqa: F401 (the public API)
from autograder.checks.harness.diagnostics import (Abandon, CheckFailure, heap_frozen, kernel_limits, quoted,
                                                   recursion_limit_kept)
from autograder.checks.harness.faults import CourseError, course_fault
from autograder.checks.harness.traces import left_as_found, torch_defaults


def skipped_in_kernel(exercise_id: str) -> bool:
    """Under `nbgrader autograde` with the course's config, a check's in-kernel copy decides nothing.

    Both conditions are needed: nbgrader sets NBGRADER_EXECUTION only while autograding (validate still runs the
    checks), and only the course's Execute settings set the flag that says TrustedVerdicts comes next.
    """
    return (os.environ.get("NBGRADER_EXECUTION") == "autograde" and os.environ.get(TRUSTED_GRADING_ENV) == "1"
            and has_check(exercise_id) and not remote.in_use())


def check(exercise_id: str, namespace: Mapping, quiet: bool = False,
          settled: dict[str, CheckFailure | None] | None = None) -> None:
    """Run every hidden check of one exercise on the names the notebook defines.

    Args:
        exercise_id: the exercise's id (its cells' grade_id).
        namespace: the notebook's names (``globals()`` in a notebook; a mapping of ``autograder.trust.remote`` objects
            under trusted grading; a solution's namespace in tests).
        quiet: print nothing when the check passes.
        settled: verdicts already known in this grading run (exercise id -> its failure, or None when it passed);
            the exercises this one builds on are looked up here before being checked again, and every verdict
            reached is added.

    Raises:
        CheckFailure: the answer is wrong; the message names the misconception, or the earlier exercise at fault.
        KeyError: no check has this id (a course bug, not a learner's).
        TypeError: ``namespace`` is not a mapping (a course bug: the cell must pass ``globals()``).
    """
    if exercise_id not in _CHECKS:
        raise KeyError(f"no check for exercise {exercise_id!r}; known: {sorted(_CHECKS)}")
    if not isinstance(namespace, Mapping):
        raise TypeError(f"check({exercise_id!r}, ...) takes the notebook's namespace, globals(), not "
                        f"{type(namespace).__name__}")
    if skipped_in_kernel(exercise_id):
        print(f"{exercise_id}: checked outside this kernel.")  # nbgrader autograde: TrustedVerdicts decides
        return
    with kernel_limits(), heap_frozen():  # the exercises it builds on share its limits, as they share its worker
        if settled is not None:  # a grading run: its own verdicts only, nothing this process remembers
            _verify(exercise_id, namespace, settled)
        elif (exercise_id, _cell_run()) != _passed_last:  # a hidden block, then run_check, in one cell: once is enough
            settled = _still_valid(namespace)  # a learner's kernel or a test: reuse what it found, for the same objects
            try:
                _verify(exercise_id, namespace, settled)
            finally:
                _keep(settled, namespace)
            _remember_pass(exercise_id)
    if not quiet:
        print(f"{exercise_id}: all hidden checks passed.")


def _verify(exercise_id: str, namespace: Mapping, settled: dict[str, CheckFailure | None]) -> None:
    """The earlier exercises first, each at most once per grading run, then this one's own check."""
    spec = _CHECKS[exercise_id]
    for earlier in spec.builds_on:
        if earlier not in settled:
            try:
                _verify(earlier, namespace, settled)
            except CheckFailure:
                pass  # recorded in settled
        if settled[earlier] is not None:
            failure = _knock_on(exercise_id, getattr(settled[earlier], "root", settled[earlier]))
            settled[exercise_id] = failure
            raise failure
    try:
        _run(spec, namespace)
    except CheckFailure as failure:
        settled[exercise_id] = failure
        raise
    settled[exercise_id] = None


def _knock_on(exercise_id: str, root: CheckFailure) -> CheckFailure:
    """The failure of ``exercise_id`` that the failure ``root`` of an exercise it builds on explains. Its cause is
    ``builds-on:<root's exercise>`` either way; when the grader itself failed there (a course error), the learner
    is told that it is not their answer that stands in the way."""
    told = root.told  # its cause line is that exercise's; this one's is builds-on
    if root.cause_id == causes.COURSE_ERROR:
        said = (f"this exercise runs your code from {root.exercise}, whose check failed because of the grader, not "
                f"because of your answer (a course error), so this one cannot be graded until the course is fixed; "
                f"please tell your instructor. {told}")
    else:
        said = (f"this exercise runs your code from {root.exercise}, which fails its own check, so it earns no "
                f"points until that one passes. Fix {root.exercise} first: {told}")
    failure = CheckFailure(exercise_id, said, cause_id=causes.builds_on(root.exercise))
    failure.root = root
    return failure


# exercise id -> (the objects its check judged, its verdict): the latest check of each exercise in this process.
_latest: dict[str, tuple[tuple, CheckFailure | None]] = {}


def _still_valid(namespace: Mapping) -> dict[str, CheckFailure | None]:
    """The latest passes whose names in ``namespace`` still hold the very objects judged: a test cell then does not
    check again the exercises it builds on. A failure is always checked again (the learner may have patched the
    same class since). The objects are kept alive, so an identity cannot be reused."""
    valid = {}
    for exercise_id, (objects, verdict) in _latest.items():
        names = _CHECKS[exercise_id].names
        if verdict is None and all(name in namespace and namespace[name] is obj for name, obj in zip(names, objects)):
            valid[exercise_id] = None
    return valid


def _keep(settled: dict[str, CheckFailure | None], namespace: Mapping) -> None:
    for exercise_id, verdict in settled.items():
        names = _CHECKS[exercise_id].names
        if all(name in namespace for name in names):
            _latest[exercise_id] = (tuple(namespace[name] for name in names), verdict)


def _bind(spec: Check, namespace: Mapping) -> dict:
    missing = [name for name in spec.names if name not in namespace]
    if missing:
        raise CheckFailure(spec.exercise_id, f"`{missing[0]}` is not defined in your notebook: run the cell that "
                                             "defines it (was it renamed, or its cell deleted or failing?).",
                           cause_id=causes.NOT_DEFINED)
    return {name: namespace[name] for name in spec.names}


def _run(spec: Check, namespace: Mapping) -> None:
    """One check, with every way a learner's answer can break it turned into a CheckFailure."""
    exercise_id = spec.exercise_id
    try:
        # nbgrader scores a test cell that writes to stderr as failed, so warnings must not escape.
        with warnings.catch_warnings(), np.errstate(all="ignore"), recursion_limit_kept(exercise_id), \
                left_as_found(namespace), torch_defaults():
            warnings.simplefilter("ignore")
            spec.run(**_bind(spec, namespace))
    except CheckFailure:
        raise
    except Abandon as stop:
        raise stop.failure from None
    except remote.Stopped as stop:  # the worker died or stalled outside call_learner (reading an attribute, ...)
        raise CheckFailure(exercise_id, stop.reason, cause_id=causes.of_stop(stop.reason)) from None
    except (Flaky, FlakyFailure):
        raise CheckFailure(exercise_id, "your code gave different answers for the same input when run again: does it "
                                        "keep state between calls (a counter, a cache, a global), or depend on the "
                                        "order in which a set is iterated (which changes from run to run)?",
                           cause_id=causes.NONDETERMINISTIC) from None
    except Exception as error:
        if course_fault(error):  # the check's own bug: said so, with the exercise, and logged where it is graded
            raise CourseError(exercise_id, error) from None
        # an answer of a shape no probe foresaw: still a diagnosis, never hidden frames
        raise CheckFailure(exercise_id, f"the check could not use your answer ({type(error).__name__}: {quoted(error)}); "
                                        "make sure it returns what the exercise asks for.",
                           cause_id=causes.UNUSABLE) from None


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


# Each module registers its checks on import; one module per notebook.
# Course order: an exercise may build on those registered before it.
from autograder.checks import nudging, scalar_engine, backward_functions, tensor_engine, modules_mnist  # noqa: E402,F401
