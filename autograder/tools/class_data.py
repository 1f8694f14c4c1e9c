"""What the class got wrong, as data: a graded class read from nbgrader's gradebook, the autograded notebooks and
the class run's log (autograder.tools.report writes it out). Nothing here writes anything.

- The gradebook (``gradebook.db``): every submission's score per exercise, and the reason a submission that could
  not be graded was given (the class run stores it as the comment "Not graded: <reason>").
- The autograded notebooks (``autograded/<student>/<assignment>/``): each failing test cell's diagnosis, whose last
  line names its cause (``cause: <id>``, read by :func:`cause_of`).
- The class run's log (``autograde-logs/<assignment>.tsv``): each submission's grading seconds.
- The class run's journal (``autograde-logs/.recording/``, autograder.grade.journal): a record a run began and did
  not finish is a half record, whatever the gradebook holds of it, and shows as not graded.

The report holds the course's lock (the class run's) while it reads, so that it never reads a record being written.
"""
from __future__ import annotations

import csv
import re
from collections import defaultdict
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder.grade.journal import CourseLock

UNKNOWN = "unknown"          # a failing verdict whose diagnosis names no cause (graded before causes existed)
NOT_GRADED = "not-graded"    # every exercise of a submission that could not be graded at all
KNOCK_ON = "builds-on:"      # a cause that is another exercise's failure, not a slip of this one
CAUSE_LINE = re.compile(r"^cause: (\S+)$")
NOT_GRADED_COMMENT = "Not graded: "  # what the class run writes into the gradebook (class_run.Course.record_failure)
INTERRUPTED = "its record was interrupted (a class run ended while writing it): grade it again with autograde"
SLOWEST = 10                 # submissions listed as the slowest


def cause_of(diagnosis: str) -> str:
    """The cause id a failing verdict's diagnosis ends with (its last non-empty line, ``cause: <id>``), or UNKNOWN
    when it names none. Never raises: the text is the grader's, but it travels through learner-visible outputs."""
    from autograder.checks.causes import known  # the course's list: loaded by the report only

    lines = [line.strip() for line in (diagnosis or "").splitlines() if line.strip()]
    found = CAUSE_LINE.match(lines[-1]) if lines else None
    # Only a declared id: a cause line a submission wrote itself could hold markup for the charts or a formula
    # for a spreadsheet (a red team stopped the whole class's report with `$\foo$`, which matplotlib parses).
    return found.group(1) if found and known(found.group(1)) else UNKNOWN


def is_knock_on(cause: str) -> bool:
    """A knock-on failure: the exercise fails because one it builds on does (``builds-on:<exercise>``)."""
    return cause.startswith(KNOCK_ON)


@dataclass
class Outcome:
    """One exercise of one submission: nbgrader's points, and the cause of a failure (None when passed) with the
    failing input its diagnosis names, if any."""
    score: float
    max_score: float
    cause: str | None
    input: str | None = None


@dataclass
class Submission:
    student: str
    assignment: str
    score: float
    max_score: float
    exercises: dict[str, Outcome]
    graded: bool                  # False: the grader could not grade it (reason says why)
    reason: str = ""
    seconds: float | None = None  # grading seconds from the class run's log; None without one


@dataclass
class ClassReport:
    course: str
    exercises: dict[str, list[str]]            # assignment -> exercise ids, in notebook order
    submissions: list[Submission]
    similar: list = field(default_factory=list)  # autograder.tools.similar.Pair

    def of(self, assignment: str) -> list[Submission]:
        return [s for s in self.submissions if s.assignment == assignment]

    def pass_rate(self, assignment: str, exercise: str) -> tuple[int, int]:
        """(submissions at full marks on ``exercise``, submissions in the gradebook)."""
        outcomes = [s.exercises[exercise] for s in self.of(assignment) if exercise in s.exercises]
        return sum(o.cause is None for o in outcomes), len(outcomes)

    def causes(self, assignment: str, exercise: str) -> dict[str, list[str]]:
        """Cause -> the students whose ``exercise`` failed with it, most shared first."""
        found = defaultdict(list)
        for s in self.of(assignment):
            outcome = s.exercises.get(exercise)
            if outcome is not None and outcome.cause is not None:
                found[outcome.cause].append(s.student)
        return dict(sorted(found.items(), key=lambda kv: (-len(kv[1]), kv[0])))

    def persisting(self) -> list[dict]:
        """Root causes that one student's submissions show in two or more assignments, with where."""
        seen = defaultdict(set)
        for s in self.submissions:
            for outcome in s.exercises.values():
                if outcome.cause and outcome.cause not in (UNKNOWN, NOT_GRADED) and not is_knock_on(outcome.cause):
                    seen[(s.student, outcome.cause)].add(s.assignment)
        order = list(self.exercises)
        return [{"student": student, "cause": cause, "assignments": sorted(found, key=order.index)}
                for (student, cause), found in sorted(seen.items()) if len(found) > 1]

    def slowest(self, count: int = SLOWEST) -> list[Submission]:
        timed = [s for s in self.submissions if s.seconds is not None]
        return sorted(timed, key=lambda s: -s.seconds)[:count]

    def failures(self) -> list[Submission]:
        return [s for s in self.submissions if not s.graded]

    def to_dict(self) -> dict:
        def submission(s: Submission) -> dict:
            return {**asdict(s), "exercises": {e: {**asdict(o), "passed": o.cause is None,
                                                   "knock_on": bool(o.cause and is_knock_on(o.cause))}
                                               for e, o in s.exercises.items()}}

        per_exercise = [{"assignment": a, "exercise": e, "passed": self.pass_rate(a, e)[0],
                         "submissions": self.pass_rate(a, e)[1], "causes": self.causes(a, e)}
                        for a, ids in self.exercises.items() for e in ids]
        return {"course": self.course, "exercises": per_exercise, "submissions": [submission(s) for s in
                                                                                  self.submissions],
                "persisting": self.persisting(), "similar": [asdict(p) for p in self.similar]}


def read_class(root: Path, assignments: list[str]) -> ClassReport:
    """Everything the report shows of ``assignments`` (none: every one the gradebook has submissions of), from the
    course folder ``root`` (see the module's docstring).

    Raises:
        ReportError: an assignment the gradebook does not have, a gradebook that cannot be read, or a class run
            grading the course now.
    """
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.coursedir import CourseDirectory
    from sqlalchemy.exc import DBAPIError

    from autograder.grade.class_run import JOURNAL, LOCK, LOGS, course_config  # as the class run reads them
    from autograder.grade.journal import CourseBusyError, Journal

    root = Path(root).resolve()
    config = course_config(root, "record")
    db_url, course_id = CourseDirectory(config=config).db_url, config.CourseDirectory.course_id
    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///"):]).is_file():
        raise ReportError(f"no gradebook at {db_url[len('sqlite:///'):]}: grade the class first "
                          "(python -m autograder autograde ASSIGNMENT)")
    report = ClassReport(course_id, {}, [])
    try:
        with _course_lock(root / LOGS / LOCK), Gradebook(db_url, course_id) as gradebook:
            half = set(Journal(root / LOGS / JOURNAL).unfinished())
            for assignment in assignments or [a.name for a in gradebook.assignments if a.submissions]:
                try:
                    found = gradebook.find_assignment(assignment)
                except MissingEntry:
                    raise ReportError(f"{assignment} is not in the gradebook {db_url}") from None
                sources = source_notebooks(root, config, assignment)
                report.exercises[assignment] = exercise_order(found, sources)
                seconds = logged_seconds(root / LOGS / f"{assignment}.tsv")
                for submitted in sorted(found.submissions, key=lambda s: s.student_id):
                    report.submissions.append(read_submission(root, assignment, submitted, seconds,
                                                              (assignment, submitted.student_id) in half))
    except DBAPIError as error:
        raise ReportError(f"the gradebook {db_url} cannot be read ({error.orig})") from None
    except CourseBusyError as busy:
        raise ReportError(f"{busy} (the report reads no record while one is being written)") from None
    return report


def _course_lock(path: Path):
    """The class run's lock on the course, for as long as the report reads; none where no class run ever ran (no
    log folder: then no record can be half written, and the report makes nothing)."""
    return CourseLock(path) if path.parent.is_dir() else nullcontext()


class ReportError(Exception):
    """The report cannot be made; the message says why and what to do."""


def source_notebooks(root: Path, config, assignment: str) -> dict:
    import nbformat

    folder = root / config.CourseDirectory.source_directory / assignment
    return {p.stem: nbformat.read(p, as_version=4) for p in sorted(folder.glob("*.ipynb"))}


def exercise_order(assignment, sources: dict) -> list[str]:
    """The assignment's exercise ids: in its source notebooks' order, else the gradebook's."""
    from autograder.contract import exercise_id, nbgrader_cells  # a leaf module

    graded = [exercise_id(cell.name) for nb in assignment.notebooks for cell in nb.grade_cells]
    ordered = [exercise_id(m["grade_id"]) for nb in sources.values() for m in nbgrader_cells(nb)
               if m.get("grade") and not m.get("solution")]
    return [e for e in ordered if e in graded] + sorted(set(graded) - set(ordered))


def read_submission(root: Path, assignment: str, submitted, seconds: dict[str, float],
                    interrupted: bool = False) -> Submission:
    """One gradebook submission, with the causes of its failures from its autograded notebooks; not graded when
    ``interrupted`` (the journal names its record as half written)."""
    import nbformat

    from autograder.contract import exercise_id, input_of  # a leaf module
    from autograder.grade.notebook import results  # nbgrader's scoring rule and the diagnoses of test cells

    student, exercises, reasons = submitted.student_id, {}, []
    folder = root / "autograded" / student / assignment
    graded = not interrupted and all((folder / f"{nb.name}.ipynb").is_file() for nb in submitted.notebooks)
    if interrupted:
        reasons.append(INTERRUPTED)
    said = {}
    for nb in submitted.notebooks if graded else []:
        try:
            said |= {r.id: r.message for r in results(nbformat.read(folder / f"{nb.name}.ipynb", as_version=4))}
        except Exception as error:  # nbformat's JSON and schema errors, of many types: shown, not fatal
            graded = False
            reasons.append(f"its autograded notebook {nb.name}.ipynb cannot be read ({type(error).__name__}): "
                           "grade it again")
    for nb in submitted.notebooks:
        reasons += [c.comment[len(NOT_GRADED_COMMENT):] for c in nb.comments
                    if (c.comment or "").startswith(NOT_GRADED_COMMENT)]
        for grade in nb.grades:
            exercise, score = exercise_id(grade.name), float(grade.score or 0.0)
            if score >= grade.max_score:
                cause = None
            else:
                cause = cause_of(said.get(exercise, "")) if graded else NOT_GRADED
            failing = input_of(said.get(exercise, "")) if cause not in (None, UNKNOWN, NOT_GRADED) else None
            exercises[exercise] = Outcome(score, float(grade.max_score), cause, failing)
    reason = "" if graded else (reasons[0] if reasons else "no autograded notebook: grade it again")
    return Submission(student, assignment, float(submitted.score), float(submitted.max_score), exercises, graded,
                      reason, seconds.get(student) if graded else None)


def logged_seconds(table: Path) -> dict[str, float]:
    """Student -> grading seconds of their latest graded row in a class run's log (none without the log)."""
    if not table.is_file():
        return {}
    found = {}
    with open(table, newline="") as rows:
        for row in csv.DictReader(rows, delimiter="\t"):
            if row.get("status") == "graded":
                try:
                    found[row["student"]] = float(row["seconds"])
                except (KeyError, TypeError, ValueError):  # a row cut short by a killed run: no time to show
                    pass
    return found


def add_similar(report: ClassReport, root: Path) -> None:
    """Flag similar pairs among the graded submissions' answer cells (read from their autograded copies, which
    nbgrader wrote after the submission passed the class run's checks)."""
    import nbformat

    from autograder.grade.class_run import course_config  # the course's folders, as the class run reads them
    from autograder.tools.similar import answer_code, course_code, similar_pairs

    config = course_config(Path(root).resolve(), "record")
    for assignment in report.exercises:
        for name, course_nb in source_notebooks(Path(root).resolve(), config, assignment).items():
            answers = {}
            for s in report.of(assignment):
                path = Path(root).resolve() / "autograded" / s.student / assignment / f"{name}.ipynb"
                if s.graded and path.is_file():
                    answers[s.student] = answer_code(nbformat.read(path, as_version=4), course_nb)
            report.similar += similar_pairs(assignment, answers, course_code(course_nb))
