"""What every part of the course agrees on: where the assignments are, how cells name exercises, the cell tags, and
the flag that says trusted grading decides.

A leaf module: it imports nothing of the project and nothing heavier than the standard library, so the kernel, the
grading processes, the sandboxed worker's client and the tools can all read it.
"""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The source notebooks that grading compares a submission with. In a checkout the link resolves to source/; a wheel
# holds the notebooks themselves there (pyproject.toml's package data), so an installed grader needs no checkout.
SOURCE = (Path(__file__).resolve().parent / "course_source").resolve()
COURSE_ID = "backprop-from-scratch"
TEST_PREFIX = "test_"
TRUSTED_GRADING_ENV = "BACKPROP_TRUSTED_GRADING"  # set for nbgrader's kernels when verdicts come from outside
# nbclient's own tag for cells it skips: a widget cell waits for a person, and an unattended run (grading, validate,
# solutions/) must not wait with it -- nbclient sometimes stalls a full cell timeout on one.
INTERACTIVE_TAG = "skip-execution"
WIDGET_FUNCTIONS = ("h_explorer", "backward_stepper")  # labtools functions that return a live widget
MEASURED_TAG = "measured"  # a cell whose outputs are timings: solutions/ keeps it without outputs
# The ename of a graded test cell's output when its check failed by itself (a course error, not the answer's): the
# class run's rows look for it in the graded notebooks.
COURSE_ERROR_ENAME = "CourseError"


def course_errors(nb) -> list[str]:
    """The exercises of a graded notebook whose checks failed by themselves: their test cells' course error outputs
    (``[exercise] course error: ...``), in notebook order."""
    return [output.get("evalue", "")[1:].partition("]")[0] for cell in nb.cells if cell.get("cell_type") == "code"
            for output in cell.get("outputs", []) if output.get("ename") == COURSE_ERROR_ENAME]


def assignments() -> dict[str, Path]:
    """Assignment name -> source notebook path, in course order."""
    return {p.parent.name: p for p in sorted(SOURCE.glob("*/*.ipynb")) if p.stem == p.parent.name}


def nbgrader_meta(cell) -> dict:
    """A cell's nbgrader metadata, or {} when it has none. A submission's metadata is the learner's data: nbformat
    accepts ``"nbgrader": null`` or a string there, which reads as no metadata at all."""
    meta = (cell.get("metadata") or {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


def nbgrader_cells(nb) -> list[dict]:
    """The nbgrader metadata of every answer or test cell, in notebook order."""
    found = []
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("grade") or meta.get("solution"):
            found.append(meta)
    return found


def exercise_id(grade_id: str) -> str:
    """The exercise id of a test cell (``test_<id>``) or of an answer cell (``<id>``)."""
    return grade_id[len(TEST_PREFIX):] if grade_id.startswith(TEST_PREFIX) else grade_id


# Every failed check's diagnosis ends with one line naming its cause by a stable id (autograder.checks.causes lists
# them): the grade's --json, the class run's log and the instructor's report read it from there.
CAUSE_PREFIX = "cause: "


def cause_of(message: str) -> str | None:
    """The cause id on a diagnosis's last line (``cause: <id>``), or None when the message has none."""
    last = message.rstrip("\n").rpartition("\n")[2]
    return last[len(CAUSE_PREFIX):].strip() or None if last.startswith(CAUSE_PREFIX) else None


# Where there is one, the smallest input the check found failing comes on the line before the cause line, as data
# (``input: <the call, on one line>``): the grade's --json and the report read it there.
INPUT_PREFIX = "input: "


def input_of(message: str) -> str | None:
    """The failing input a diagnosis names on the line before its cause line (``input: ...``), or None."""
    lines = message.rstrip("\n").split("\n")
    if len(lines) < 2 or cause_of(message) is None or not lines[-2].startswith(INPUT_PREFIX):
        return None
    return lines[-2][len(INPUT_PREFIX):].strip() or None


def with_input(message: str, shown: str | None) -> str:
    """``message`` (ending with its cause line) with ``shown`` as its input line, on one line, in place of the one it
    had; without ``shown``, without one."""
    cause = cause_of(message)
    body = message.rstrip("\n")
    if cause is not None:
        body = body.rpartition("\n")[0]
        if input_of(message) is not None:
            body = body.rpartition("\n")[0]
    one_line = " ".join((shown or "").split())
    lines = [line for line in (body, one_line and f"{INPUT_PREFIX}{one_line}",
                               cause and f"{CAUSE_PREFIX}{cause}") if line]
    return "\n".join(lines)


def with_cause(message: str, cause: str) -> str:
    """``message`` ending with the line ``cause: <cause>``, in place of the cause line it ended with, if any."""
    body = message.rstrip("\n")
    if cause_of(body) is not None:
        body = body.rpartition("\n")[0]
    return f"{body}\n{CAUSE_PREFIX}{cause}" if body else f"{CAUSE_PREFIX}{cause}"
