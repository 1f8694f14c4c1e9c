"""What the class got wrong: ``python -m autograder report ASSIGNMENT...`` reads a graded class
(autograder.tools.class_data) and writes, into ``--out`` (default ``<course>/autograde-logs/report/``):
``report.html`` (one self-contained page, charts embedded as PNG, no script, readable without a server),
``report.json``, ``results.csv`` (one row per submission and exercise), ``causes.csv`` (one row per exercise and
cause) and ``similar.csv`` (the flagged pairs). The report never changes a grade.
"""
from __future__ import annotations

import csv
import json
import sys
from datetime import datetime
from pathlib import Path

from autograder.tools.class_data import ClassReport, ReportError, add_similar, is_knock_on, read_class
from autograder.tools.report_page import page

# A cell starting with one of these is run as a formula by spreadsheet programs (OWASP, "CSV Injection"); learner
# text reaches the files (a failing input quoting their own exception), so such a cell gets a leading quote.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def write(report: ClassReport, out: Path) -> Path:
    """Write the page and its data files into ``out`` (made if missing); returns the page's path.

    Raises:
        OSError: ``out`` cannot be made or written.
    """
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report.to_dict(), indent=1))
    with open(out / "results.csv", "w", newline="") as f:
        row = _rows(f)
        row(["assignment", "student", "exercise", "score", "max_score", "passed", "cause", "knock_on",
                         "graded", "seconds", "input"])
        for s in report.submissions:
            for exercise in report.exercises[s.assignment]:
                o = s.exercises.get(exercise)
                if o is not None:
                    row([s.assignment, s.student, exercise, o.score, o.max_score, o.cause is None,
                                     o.cause or "", bool(o.cause and is_knock_on(o.cause)), s.graded,
                                     "" if s.seconds is None else s.seconds, o.input or ""])
    with open(out / "causes.csv", "w", newline="") as f:
        row = _rows(f)
        row(["assignment", "exercise", "passed", "submissions", "cause", "knock_on", "students"])
        for assignment, ids in report.exercises.items():
            for exercise in ids:
                passed, total = report.pass_rate(assignment, exercise)
                for cause, students in report.causes(assignment, exercise).items():
                    row([assignment, exercise, passed, total, cause, is_knock_on(cause),
                                     " ".join(students)])
    with open(out / "similar.csv", "w", newline="") as f:
        row = _rows(f)
        row(["assignment", "student_a", "student_b", "similarity_a", "similarity_b", "shared"])
        for p in report.similar:
            row([p.assignment, *p.students, f"{p.similarity[0]:.3f}", f"{p.similarity[1]:.3f}", p.shared])
    (out / "report.html").write_text(page(report, generated=datetime.now().isoformat(timespec="seconds")),
                                     encoding="utf-8")
    return out / "report.html"


def _rows(file):
    """A function writing one CSV row to ``file``, text cells that a spreadsheet would run quoted."""
    writer = csv.writer(file)
    return lambda cells: writer.writerow([f"'{c}" if isinstance(c, str) and c.startswith(FORMULA_START) else c
                                          for c in cells])


def run(course: Path, assignments: list[str], out: Path | None = None, stdout=None) -> int:
    """``python -m autograder report``: read the class in the folder ``course`` (``assignments``; none: every one
    the gradebook has submissions of), write the report into ``out`` and print where it is.

    Returns 0 when written, 2 when it cannot be (the reason on stderr).
    """
    from autograder.grade.class_run import LOGS  # where the class run keeps what it writes

    out = out or Path(course) / LOGS / "report"
    try:
        report = read_class(course, assignments)
        add_similar(report, course)
        written = write(report, out)
    except ReportError as error:
        print(f"cannot report: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the folder cannot be made or written: nothing read is lost, the gradebook untouched
        print(f"cannot write the report into {out}: {error.strerror or error}", file=sys.stderr)
        return 2
    print(f"report: {written.resolve()} ({len(report.submissions)} submissions, {len(report.failures())} not "
          f"graded, {len(report.similar)} similar pairs flagged)", file=stdout or sys.stdout)
    return 0
