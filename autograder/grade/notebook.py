"""Grade one learner notebook against the hidden tests, through nbgrader, in a throwaway course directory."""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from autograder.contract import (REPO, TEST_PREFIX, assignments, cause_of, exercise_id, input_of, nbgrader_cells,
                                 nbgrader_meta, with_cause)
from autograder.course import configure, quiet_nbgrader
from autograder.course.limits import oversized
from autograder.grade.submission import UnsafeSubmissionError, nbgrader_reason, read_file
from autograder.trust.secret import course_secret, place

STUDENT = "learner"


class UnusableNotebook(Exception):
    """The file cannot be graded at all (missing, a link or special file, too large, not a notebook, no known
    assignment, cells deleted, or nbgrader could not grade it); the message is one line."""


@dataclass
class ExerciseResult:
    id: str
    score: float
    max_score: float
    message: str  # a failure's diagnosis, ending with its cause line; "" when passed

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score

    @property
    def cause(self) -> str | None:
        """The failure's cause id (autograder.checks.causes), None when the exercise passed."""
        return None if self.passed else cause_of(self.message)

    @property
    def input(self) -> str | None:
        """The failing input the diagnosis names (``input: ...``), None when it names none or the exercise passed."""
        return None if self.passed else input_of(self.message)


@dataclass
class GradeReport:
    notebook: str
    exercises: list[ExerciseResult] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)

    def to_json(self) -> str:
        return json.dumps({
            "notebook": self.notebook, "score": self.score, "max_score": self.max_score,
            "exercises": [{**asdict(e), "passed": e.passed, "cause": e.cause, "input": e.input} for e in self.exercises],
        }, indent=2)

    def to_table(self) -> str:
        width = max([len("exercise")] + [len(e.id) for e in self.exercises])
        lines = [f"{self.notebook}: {self.score:g} / {self.max_score:g} points", "",
                 f"{'exercise':<{width}}  points  diagnosis"]
        for e in self.exercises:
            text = (e.message or "passed").splitlines() or [""]
            lines.append(f"{e.id:<{width}}  {e.score:>2g}/{e.max_score:<3g}  {text[0]}")
            lines += [f"{'':<{width}}          {more}" for more in text[1:]]
        return "\n".join(lines)


def read_submission(path: Path) -> tuple[nbformat.NotebookNode, str]:
    """Load a learner notebook and find its assignment.

    Raises:
        UnusableNotebook: with a one-line reason a learner can act on; a link, a named pipe or a file over
            autograder.grade.submission.MAX_FILE_BYTES is refused before it is read.
    """
    if not os.path.lexists(path):  # lexists: a link is refused below as a link, wherever it points
        raise UnusableNotebook(f"{path}: no such file")
    if path.is_dir() and not path.is_symlink():
        raise UnusableNotebook(f"{path}: a folder, not a notebook file")
    try:  # read as data: not through a link, not from a named pipe (which would never end), not too large
        nb = read_notebook(read_file(path))
    except UnsafeSubmissionError as refused:
        raise UnusableNotebook(str(refused)) from None
    except UnreadableNotebook as unreadable:
        raise UnusableNotebook(f"{path}: not a readable Jupyter notebook ({unreadable})") from None
    present = {meta.get("grade_id") for meta in nbgrader_cells(nb)}
    expected = {name: [meta["grade_id"] for meta in nbgrader_cells(nbformat.read(source, as_version=4))]
                for name, source in assignments().items()}
    best = max(expected, key=lambda name: len(present & set(expected[name])), default=None)
    if best is None or not present & set(expected[best]):
        raise UnusableNotebook(f"{path}: not a notebook of this course (no exercise cells of any assignment in "
                               f"{', '.join(assignments())}); grade the copy you worked in under notebooks/")
    refused = refusal(nb, nbformat.read(assignments()[best], as_version=4))
    if refused:
        raise UnusableNotebook(f"{path}: {refused}. Save your answers elsewhere, restore a fresh copy (git checkout "
                               f"-- notebooks/{best}/{best}.ipynb), paste your answers back into its answer cells, "
                               "and grade that")
    return nb, best


class UnreadableNotebook(ValueError):
    """A file's bytes are not a valid Jupyter notebook; the message is the reader's, on one line."""


def read_notebook(content: bytes) -> nbformat.NotebookNode:
    """A notebook from a file's bytes, validated against nbformat's schema (nbgrader fails later on what is not).

    Raises:
        UnreadableNotebook: "<error type>: <the first line of what the reader said>" (not JSON, not UTF-8, not
            valid).
    """
    try:
        nb = nbformat.reads(content.decode("utf-8"), as_version=4)
        nbformat.validate(nb)  # reads() only logs what is wrong
    except Exception as error:  # nbformat raises JSON, validation and encoding errors of many types
        said = (str(error).splitlines() or [""])[0][:200]
        raise UnreadableNotebook(f"{type(error).__name__}: {said}") from None
    return nb


# The one check of a submission against its course notebook, for `grade` and the class run alike: what refuses it,
# and what is worth a note.

def refusal(nb, course_nb) -> str | None:
    """Why a notebook of the assignment whose source is ``course_nb`` is not graded at all, or None: too many cells,
    grading metadata changed (metadata_changes), or exercise cells deleted or stripped of their metadata. One
    line, without the file's name or a remedy (each caller adds its own)."""
    too_many = oversized(0, len(nb.cells))
    if too_many:
        return too_many
    tampered = metadata_changes(nb, course_nb)
    if tampered:
        return f"the grading metadata of its cells was changed ({'; '.join(tampered)})"
    present = {meta.get("grade_id") for meta in nbgrader_cells(nb)}
    missing = [meta["grade_id"] for meta in nbgrader_cells(course_nb) if meta["grade_id"] not in present]
    if missing:
        return f"exercise cells were deleted or lost their metadata ({', '.join(missing)})"
    return None


def notes(nb, course_nb) -> list[str]:
    """What grading a notebook that ``refusal`` accepts does differently from what the notebook asks: each copied
    cell of the course (copy_notes), and a kernel other than the course's. Each starts with a verb, for
    "<notebook> <note>"."""
    found = copy_notes(nb, course_nb)
    kernel = nb.metadata.get("kernelspec", {}).get("name")
    expected = course_nb.metadata.get("kernelspec", {}).get("name")
    if kernel != expected:  # nbgrader grades with the course's kernel anyway
        found.append(f"asks for the kernel {kernel!r}; it is graded with the course's, {expected!r}")
    return found


def copy_notes(nb, course_nb) -> list[str]:
    """A note per course cell the notebook holds more than once (cells numbered from 1), naming the copy that counts.

    A test cell, or any other cell of the course's: the first copy keeps its id (SeparateCopiedCells) and is graded;
    the others run as ordinary cells. An answer cell: every copy runs in turn, in the kernel and in trusted grading
    (autograder.trust.verdicts.program), so its test checks what the last copy above the test defines.
    """
    course = {meta["grade_id"]: meta for meta in (nbgrader_meta(c) for c in course_nb.cells) if meta.get("grade_id")}
    where: dict[str, list[int]] = {}
    for number, cell in enumerate(nb.cells, start=1):
        grade_id = nbgrader_meta(cell).get("grade_id")
        if grade_id in course:
            where.setdefault(grade_id, []).append(number)
    found = []
    for grade_id, numbers in where.items():
        if len(numbers) < 2:
            continue
        cells = f"cells {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}"
        if not course[grade_id].get("solution"):
            kind = "test cell" if course[grade_id].get("grade") else "course's cell"
            found.append(f"has the {kind} {grade_id} in {cells}: the first (cell {numbers[0]}) is graded, the "
                         "others run as ordinary cells")
            continue
        test = where.get(f"{TEST_PREFIX}{grade_id}", [len(nb.cells) + 1])[0]
        above = [n for n in numbers if n < test] or numbers
        found.append(f"has the answer cell {grade_id} in {cells}: each runs in turn, so what its test checks is what "
                     f"the last of them above the test defines (cell {above[-1]})")
    return found


FLAGS = {"grade": False, "solution": False, "locked": False, "points": None}  # nbgrader's flags, absent = default


def metadata_changes(nb, course_nb) -> list[str]:
    """How a submission's nbgrader metadata differs from the course's: re-flagged or added graded cells.

    The trusted grade never reads these flags (it takes every test from the course), but nbgrader would stumble on
    them, so the command line refuses such a file with the reason instead of a traceback. A copied graded cell is
    not a change: grading keeps the first copy (autograder.course.preprocessors.SeparateCopiedCells).
    """
    course = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"] for c in course_nb.cells
              if c.metadata.get("nbgrader", {}).get("grade_id")}
    seen, changes = set(), []
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        grade_id = meta.get("grade_id")
        if not grade_id or not (grade_id in course or meta.get("grade") or meta.get("solution")) or grade_id in seen:
            continue
        seen.add(grade_id)
        if grade_id not in course:
            changes.append(f"{grade_id} is a graded cell the course does not have")
            continue
        changed = [f"{flag} {meta.get(flag)!r} (course: {course[grade_id].get(flag)!r})"
                   for flag, absent in FLAGS.items() if meta.get(flag, absent) != course[grade_id].get(flag, absent)]
        if changed:
            changes.append(f"{grade_id}: " + ", ".join(changed))
    return changes


def grade(path: Path, feedback: Path | None = None, on_start=None) -> GradeReport:
    """Autograde a learner notebook with the hidden tests and return per-exercise scores and diagnoses.

    Args:
        path: the learner's .ipynb.
        feedback: where to write nbgrader's feedback HTML (hidden tests stripped); None for no feedback.
        on_start: called with the assignment name once the notebook is known to be gradable.

    The cases are drawn with the grading secret of this repository, the course folder whose ``source/`` it grades
    against (autograder.trust.secret; made there if it has none): the cases ``nbgrader autograde`` draws there for
    the same submission.

    Raises:
        UnusableNotebook: the file cannot be graded (see read_submission), or nbgrader could not grade it (the
            line of its log that says why).
        GradingSecretError: the course's grading secret cannot be read or made.
    """
    nb, assignment = read_submission(path)
    key = course_secret(REPO)
    # nbgrader, the checks and torch load only now: an unusable file was refused without waiting for them.
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    if on_start:
        on_start(assignment)
    for note in notes(nb, nbformat.read(assignments()[assignment], as_version=4)):
        print(f"note: {path} {note}.", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="autograde-") as root:
        root = Path(root)
        shutil.copytree(assignments()[assignment].parent, root / "source" / assignment)
        submitted = root / "submitted" / STUDENT / assignment / f"{assignment}.ipynb"
        submitted.parent.mkdir(parents=True)
        nbformat.write(nb, submitted)
        place(root, key)

        config = Config()
        configure(config, release_directory="release")
        config.CourseDirectory.root = str(root)
        api = NbGraderAPI(config=config)
        quiet_nbgrader()
        steps = [("generate_assignment", lambda: api.generate_assignment(assignment)),
                 ("autograde", lambda: api.autograde(assignment, STUDENT))]
        if feedback:
            steps.append(("generate_feedback", lambda: api.generate_feedback(assignment, STUDENT)))
        for step, run in steps:
            outcome = run()
            if not outcome["success"]:
                why = nbgrader_reason(outcome.get("error") or outcome.get("log") or "") or "no reason in its log"
                raise UnusableNotebook(f"{path}: nbgrader {step} failed: {why}")
        if feedback:
            Path(feedback).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(root / "feedback" / STUDENT / assignment / f"{assignment}.html", feedback)
        graded = nbformat.read(root / "autograded" / STUDENT / assignment / f"{assignment}.ipynb", as_version=4)
        return GradeReport(notebook=str(path), exercises=results(graded))


def results(graded) -> list[ExerciseResult]:
    """Scores (by nbgrader's own rule) and diagnoses from the test cells of an autograded notebook."""
    from nbgrader.utils import determine_grade

    found = []
    for cell in graded.cells:
        meta = nbgrader_meta(cell)
        if not meta.get("grade") or meta.get("solution"):
            continue
        score, max_score = determine_grade(cell)
        found.append(ExerciseResult(exercise_id(meta["grade_id"]), float(score), max_score,
                                    "" if score >= max_score else failure_message(cell.outputs)))
    return found


def failure_message(outputs) -> str:
    """Why a test cell lost its points: its last error, or else what it wrote to stderr."""
    from autograder.checks import causes  # with the checks: loaded when grading starts
    from autograder.course.preprocessors import diagnosis  # nbgrader and the checks: loaded when grading starts

    errors = [out for out in outputs if out.output_type == "error"]
    if errors:
        return diagnosis(errors[-1])
    stderr = "".join(out.text for out in outputs if out.output_type == "stream" and out.name == "stderr")
    return with_cause(f"the cell wrote to stderr, which nbgrader scores as a failure: {stderr.strip()[:200]}",
                      causes.STDERR)
