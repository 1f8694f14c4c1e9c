"""Grade a whole class in parallel on Dask distributed, into nbgrader's own gradebook.

``python -m autograder autograde ASSIGNMENT`` splits ``nbgrader autograde`` at its Execute step (the stages of
autograder.course.configure):

- On a Dask worker, one task per submission: a fresh process, forked from a server that has nbgrader and the checks
  imported already, runs nbgrader's autograde for that one student in a scratch course (a snapshot of the gradebook,
  the assignment's source folder, the submission) with the "execute" stage only, under the limits below. Learner
  code runs in that process's sandboxes, as in any trusted grading. The task hands back the executed notebooks as
  text: plain data.
- Here, in one process: nbgrader's own autograde for that student on the real course, "record" stage, whose Execute
  step replays those notebooks (ReplayExecution). Sanitizing, SaveAutoGrades and late penalties are nbgrader's, so
  the gradebook holds what a serial ``nbgrader autograde`` writes, and only this process writes it.

A task that fails (the grading process crashed, ran past its CPU budget or memory, or its Dask worker died) is
retried once in a fresh process, on another worker when there is one; a second failure is recorded with its reason.
A stop signal (Ctrl-C, SIGTERM, SIGHUP) stops between submissions; what was recorded stays, and a re-run skips
it. Each record is journaled (autograder.grade.journal): one killed halfway is removed by the next run and graded
again, never trusted.
"""
from __future__ import annotations

import csv
import logging
import math
import os
import pickle
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import nbformat

from autograder.contract import course_errors
from autograder.course import configure, quiet_nbgrader, set_stage
from autograder.grade.notebook import UnreadableNotebook, notes, read_notebook, refusal, results
from autograder.grade.journal import CourseBusyError, CourseLock, Journal
from autograder.grade.on_dask_worker import STARTED, execute_submission, guarded
from autograder.grade.submission import (TIMEOUT_S, Executed, Row, Snapshot, Task, UnsafeSubmissionError,
                                         TIMESTAMP, backstop_s, nbgrader_reason, read_tree, student_name_refusal)
from autograder.trust.cputime import descendants
from autograder.trust.secret import GradingSecretError, course_secret

STOPPED = "not graded: the run was stopped"
INTERRUPTED = "not graded: a second Ctrl-C stopped its recording; the next run grades it again"
# Under the course folder: <assignment>.tsv (one line per submission), <assignment>/<student>.log (nbgrader's),
# and the run's own state: the lock, the journal of records being written, the scratch folder of the running run.
LOGS = "autograde-logs"
LOCK, JOURNAL, SCRATCH = ".lock", ".recording", ".scratch"
TEMPORARY, TEMPORARY_PREFIX = "temporary-folder", "class-run-"  # a local cluster's folder, and what its file says
# The longest --timeout: past it, waiting on a grading process overflows (threading.TIMEOUT_MAX is about 9e9 s here).
MAX_TIMEOUT_S = 7 * 24 * 3600.0


class ClassGradingError(Exception):
    """The run cannot start (unknown assignment or student, no gradebook); the message says what to do."""


class GradebookLockedError(ClassGradingError):
    """The gradebook cannot be written (another program holds its write lock past RECORD_WAIT_S): the run stops, and
    every submission not recorded is left not graded, for the next run."""



# ------------------------------------------------------------------------------------------ the one recording process

@dataclass
class Course:
    """A course folder as nbgrader sees it, with the "record" stage configured."""
    root: Path
    config: object
    db_url: str
    scratch: Path           # this run's own files (the gradebook snapshot, the executed notebooks); removed after
    secret: bytes           # its grading secret, sent with the gradebook's snapshot

    @classmethod
    def open(cls, root: Path, scratch: Path) -> "Course":
        """Raises ClassGradingError: the course's grading secret cannot be read or made."""
        from nbgrader.coursedir import CourseDirectory

        root = Path(root).resolve()
        config = course_config(root, "record")
        try:
            key = course_secret(root)
        except GradingSecretError as error:
            raise ClassGradingError(str(error)) from None
        course = cls(root, config, CourseDirectory(config=config).db_url, scratch, key)
        config.ReplayExecution.directory = str(course.scratch / "executed")
        return course

    def submitted(self, assignment: str) -> dict[str, Path]:
        """Student id -> submission folder, for every ``submitted/<student>/<assignment>/``."""
        # Every folder, a hidden one too (glob's "*" skips names starting with a dot): each gets a row.
        found = sorted(folder / assignment for folder in (self.root / "submitted").iterdir()) \
            if (self.root / "submitted").is_dir() else []
        return {p.parent.name: p for p in found if p.is_dir() or p.is_symlink()}

    def source_notebooks(self, assignment: str) -> dict[str, nbformat.NotebookNode]:
        """The assignment's source notebooks by name: what each submitted notebook is checked against."""
        folder = self.root / self.config.CourseDirectory.source_directory / assignment
        return {path.stem: nbformat.read(path, as_version=4) for path in sorted(folder.glob("*.ipynb"))}

    def check_assignment(self, assignment: str) -> None:
        from nbgrader.api import Gradebook, MissingEntry

        if not self.db_url.startswith("sqlite:///"):
            raise ClassGradingError(f"class grading snapshots an SQLite gradebook; this course uses {self.db_url}")
        from sqlalchemy.exc import DBAPIError

        try:
            with Gradebook(self.db_url, self.config.CourseDirectory.course_id) as gradebook:
                gradebook.find_assignment(assignment)
        except MissingEntry:
            raise ClassGradingError(f"{assignment} is not in the gradebook: run `nbgrader generate_assignment "
                                    f"{assignment}` in {self.root} first") from None
        except DBAPIError as error:  # sqlite3's own error, wrapped: "database is locked", "file is not a database"
            raise ClassGradingError(unusable_gradebook(self.db_url, error.orig)) from None
        check_writable(Path(self.db_url[len("sqlite:///"):]))

    def already_graded(self, assignment: str, student: str) -> bool:
        """nbgrader's own rule: an autograded copy of each of the assignment's notebooks exists and the submission is
        not newer than it; and the gradebook has the submission."""
        from nbgrader.api import Gradebook, MissingEntry
        from nbgrader.coursedir import CourseDirectory

        submitted = self.root / "submitted" / student / assignment
        graded = self.root / "autograded" / student / assignment
        with Gradebook(self.db_url, self.config.CourseDirectory.course_id) as gradebook:
            try:
                gradebook.find_submission(assignment, student)
            except MissingEntry:
                return False
            names = [n.name for n in gradebook.find_assignment(assignment).notebooks]
        if not all((graded / f"{name}.ipynb").is_file() for name in names):
            return False
        coursedir = CourseDirectory(config=self.config)
        try:
            new, old = coursedir.get_existing_timestamp(str(submitted)), coursedir.get_existing_timestamp(str(graded))
        except Exception:  # an unreadable timestamp.txt: nbgrader itself stumbles on it; grade the submission again
            return False
        if new is None and (submitted / TIMESTAMP).exists():  # an empty one: nobody can say it is not newer
            return False
        return not (new is not None and old is not None and new > old)

    def snapshot(self, assignment: str, timeout_s: float, wall_s: float | None = None) -> Snapshot:
        """The gradebook (a consistent SQLite copy) and the assignment's source folder; each submission's grading
        may use ``timeout_s`` CPU seconds and ``wall_s`` wall seconds (default: backstop_s of the CPU's)."""
        copy = self.scratch / "gradebook-snapshot.db"
        try:
            with sqlite3.connect(self.db_url[len("sqlite:///"):]) as live, sqlite3.connect(copy) as target:
                live.backup(target)
        except sqlite3.Error as error:
            raise ClassGradingError(unusable_gradebook(self.db_url, error)) from None
        source = self.root / self.config.CourseDirectory.source_directory / assignment
        try:  # the course's own folder, but it travels as a submission does
            files = read_tree(source, self.ignored)
        except UnsafeSubmissionError as refused:
            raise ClassGradingError(f"{source} cannot be sent to the workers: {refused}") from None
        return Snapshot(assignment, copy.read_bytes(), files, pickle.dumps(course_config(self.root, "execute")),
                        self.secret, timeout_s, backstop_s(timeout_s) if wall_s is None else wall_s)

    @property
    def ignored(self) -> list[str]:
        return list(self.config.CourseDirectory.ignore)

    def record(self, assignment: str, executed: Executed) -> Row:
        """Write an executed submission into the gradebook and autograded/, through nbgrader's own autograde."""
        from nbgrader.api import Gradebook
        from nbgrader.apps import NbGraderAPI
        folder = self.scratch / "executed" / executed.student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in executed.notebooks.items():  # ReplayExecution reads and validates them
            (folder / f"{name}.ipynb").write_text(text, encoding="utf-8")
        outcome = NbGraderAPI(config=self.config).autograde(assignment, executed.student, force=True, create=True)
        if (outcome.get("error") or "").rstrip().endswith("KeyboardInterrupt"):  # nbgrader took it, and stopped
            return Row(executed.student, "failed", note=INTERRUPTED)
        if not outcome.get("success"):
            return Row(executed.student, "failed", note="nbgrader could not record it: " +
                       (nbgrader_reason(outcome.get("log") or outcome.get("error") or "") or "see the log"))
        with Gradebook(self.db_url, self.config.CourseDirectory.course_id) as gradebook:
            submission = gradebook.find_submission(assignment, executed.student)
            broken = [ex for text in executed.notebooks.values() for ex in course_errors(nbformat.reads(text, 4))]
            note = f"course error in the check of {', '.join(broken)} (see the log)" if broken else ""
            row = Row(executed.student, "graded", submission.score, submission.max_score, note=note)
        row.causes = self.causes(assignment, executed.student)
        return row

    def causes(self, assignment: str, student: str) -> str:
        """The cause of each failed exercise of a recorded submission, as its autograded notebooks show them:
        "exercise=cause" joined by spaces, in notebook order."""
        found = []
        for path in sorted(self.autograded(assignment, student).glob("*.ipynb")):
            found += [f"{r.id}={r.cause}" for r in results(nbformat.read(path, as_version=4)) if r.cause]
        return " ".join(found)

    def record_failure(self, assignment: str, student: str, reason: str) -> None:
        """A submission that could not be graded, in the gradebook: 0 on every graded cell, ``reason`` as the
        comment of each notebook's first commented cell, so that ``nbgrader export`` and Formgrader show it. No
        autograded copy: the next run grades it again."""
        from nbgrader.api import Gradebook

        with Gradebook(self.db_url, self.config.CourseDirectory.course_id) as gradebook:
            gradebook.update_or_create_student(student)
            submission = gradebook.update_or_create_submission(assignment, student)
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    grade.auto_score, grade.needs_manual_grade = 0.0, False
                for comment in notebook.comments[:1]:
                    comment.auto_comment = f"Not graded: {reason}"
            gradebook.db.commit()

    def autograded(self, assignment: str, student: str) -> Path:
        return self.root / "autograded" / student / assignment

    def wait_writable(self) -> None:
        """Wait up to RECORD_WAIT_S for the gradebook's write lock (check_writable).

        Raises:
            GradebookLockedError: another program holds it still, or SQLite refuses the file.
        """
        try:
            check_writable(Path(self.db_url[len("sqlite:///"):]), RECORD_WAIT_S)
        except ClassGradingError as error:
            raise GradebookLockedError(str(error)) from None

    def forget(self, assignment: str, student: str) -> None:
        """Remove whatever is recorded of a submission (its autograded copy, its gradebook entry), so that the next
        run grades it again; nothing when there is none."""
        from nbgrader.api import Gradebook, MissingEntry

        shutil.rmtree(self.autograded(assignment, student), ignore_errors=True)
        with Gradebook(self.db_url, self.config.CourseDirectory.course_id) as gradebook:
            try:
                gradebook.remove_submission(assignment, student)
            except MissingEntry:
                pass


WRITE_WAIT_S = 5  # how long the start waits for another program's write to the gradebook to end
# How long each record waits for it (SQLite's busy timeout): a Formgrader save takes well under a second, and a
# record cut short by the lock would cost a whole submission's grading.
RECORD_WAIT_S = 30


def check_writable(gradebook: Path, wait_s: float | None = None) -> None:
    """Take the gradebook's write lock and let it go at once, writing nothing: another program's write transaction
    (nbgrader, Formgrader, an SQLite shell) holds it, and reading alone would not notice, so that every record would
    fail with "database is locked" after the class had been graded.

    Raises:
        ClassGradingError: the lock is not free within ``wait_s`` seconds (default WRITE_WAIT_S), or SQLite refuses
            the file.
    """
    try:
        with closing(sqlite3.connect(gradebook, timeout=WRITE_WAIT_S if wait_s is None else wait_s,
                                     isolation_level=None)) as probe:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
    except sqlite3.Error as error:
        raise ClassGradingError(unusable_gradebook(f"sqlite:///{gradebook}", error)) from None


def unusable_gradebook(db_url: str, error: Exception) -> str:
    """What to tell the instructor about a gradebook SQLite refuses to read."""
    said = str(error)
    if "locked" in said:
        advice = "another program is writing it (nbgrader, Formgrader, an SQLite shell): let it finish or close it"
    else:
        advice = "restore it from a backup, or move it away and run `nbgrader generate_assignment` to start a new one"
    return f"the gradebook {db_url[len('sqlite:///'):]} cannot be read ({said}): {advice}"


def course_config(root: Path, stage: str):
    """The course's nbgrader config (its nbgrader_config.py, else the course defaults) for one grading stage."""
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    if (root / "nbgrader_config.py").is_file():
        config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    else:
        config = Config()
        configure(config, release_directory="release")
    set_stage(config, stage)
    config.CourseDirectory.root = str(root)
    return config


def student_refusal(folder: Path) -> str | None:
    """Why the student folder above a submission folder cannot be graded, or None: its name (student_name_refusal),
    or a link, which would grade another folder (perhaps another student's) under this name, as a linked assignment
    folder would."""
    student = folder.parent
    refused = student_name_refusal(student.name)
    if refused:
        return f"the student folder name {refused}: rename the folder (and the student in the gradebook)"
    if student.is_symlink():
        return f"the student folder {student.name} is a symbolic link; copy the submission into a real folder"
    return None


def preflight(folder: Path, ignored: list[str], course_nbs: dict[str, nbformat.NotebookNode]
              ) -> tuple[dict[str, bytes] | None, str]:
    """(files, note) of a submission folder; files is None when it cannot be graded at all, and note says why.

    Nothing reads the folder before this: a student folder named as a pattern or linked (student_refusal), a
    link, a special file or too much in it is refused here (read_tree), and so is a submission holding none of the
    assignment's notebooks (nbgrader would stop on it in a worker, with advice meant for its own setup).
    Each notebook of the assignment (``course_nbs``: the source notebooks by name) is checked as
    ``python -m autograder grade`` checks one (autograder.grade.notebook): what that refuses fails here, with the
    same reason, and what it notes (a copied cell, another kernel) is noted. So is a timestamp.txt that holds no
    time nbgrader can read.
    """
    refused = student_refusal(folder)
    if refused:
        return None, refused
    try:
        files = read_tree(folder, ignored)
    except UnsafeSubmissionError as refused:
        return None, str(refused)
    expected = [f"{name}.ipynb" for name in sorted(course_nbs)]
    if expected and not any(name in files for name in expected):  # one missing of several: nbgrader scores it 0
        return None, f"the submission holds no {' or '.join(expected)}"
    said = []
    for name in sorted(n for n in files if n.endswith(".ipynb") and "/" not in n):
        try:
            nb = read_notebook(files[name])
        except UnreadableNotebook as unreadable:
            return None, f"{name} is not a readable notebook ({unreadable})"
        course_nb = course_nbs.get(name[:-len(".ipynb")])
        if course_nb is None:  # not one of the assignment's notebooks: nbgrader does not grade it
            continue
        refused = refusal(nb, course_nb)
        if refused:
            return None, f"{name}: {refused}. {FRESH_COPY}"
        said += [f"{name} {note}" for note in notes(nb, course_nb)]
    unreadable = timestamp_refusal(files.get(TIMESTAMP))
    return (None, unreadable) if unreadable else (files, "; ".join(said))


FRESH_COPY = ("Save the answers elsewhere, fetch a fresh copy of the assignment, paste the answers back into its "
              "answer cells, and submit that")


def timestamp_refusal(content: bytes | None) -> str | None:
    """Why a submission's timestamp.txt cannot be used, or None: there is none, it is empty (nbgrader then records
    no time), or it holds a time nbgrader reads. nbgrader itself stops on any other with an AttributeError."""
    from nbgrader.utils import parse_utc

    if content is None:
        return None
    try:
        text = content.decode("utf-8").strip()
        if text:
            parse_utc(text)
    except Exception:  # a decoding error, or dateutil's: ParserError, OverflowError and others
        shown = content[:40].decode("utf-8", errors="replace").strip()
        return (f"{TIMESTAMP} holds no time nbgrader can read ({shown!r}): write the time the submission was handed "
                "in there, as nbgrader does (2026-11-30 09:15:00.000000 UTC), or remove the file")
    return None


# What stops a run: Ctrl-C, `kill` (SIGTERM, a batch system's or systemd's stop), the terminal closing (SIGHUP).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopRequest:
    """A stop signal (STOP_SIGNALS) asks the run to stop after the submission being recorded; a second stops at once.

    A second one cuts the record being written short: inside nbgrader (most of the time), nbgrader removes what it
    wrote and the submission is recorded as not graded (INTERRUPTED); anywhere else KeyboardInterrupt ends the
    recording, the journal's marker stays (the next run removes the half record and grades it again), and the run
    ends with a stopped line for it and for every submission not recorded, and its summary.

    The run stops itself the same way when the gradebook stays locked (``because``).

    Attributes:
        requested: whether the run was asked to stop.
        signum: the signal that asked first (None: none did).
        because: what stopped the run when no signal did, raised once its summary is out (None: nothing did).
    """

    def __init__(self):
        self.requested, self.signum, self.because = False, None, None
        # Signal handlers can only be set from the main thread; elsewhere (a test's thread) the signals are not ours.
        self._ours = threading.current_thread() is threading.main_thread()
        self._previous = {}
        self._terminal = [fd for fd in (1, 2) if os.isatty(fd)]  # now: after a hangup, isatty says False

    @property
    def exit_code(self) -> int:
        """The shell's code for a command ended by the signal that stopped it: 128 + its number."""
        return 128 + (self.signum or signal.SIGINT)

    def __enter__(self):
        if self._ours:
            self._previous = {number: signal.signal(number, self._handle) for number in STOP_SIGNALS}
        return self

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested, self.signum = True, signum
        if signum == signal.SIGHUP:
            _leave_the_terminal(self._terminal)
        print(f"\nStopping after the submissions being recorded ({signal.Signals(signum).name}); run the same command "
              "again to resume.", file=sys.stderr)

    def __exit__(self, *exc):
        for number, previous in self._previous.items():
            signal.signal(number, previous)


def _leave_the_terminal(fds: list[int]) -> None:
    """Point ``fds``, the standard output and error that were a terminal, at /dev/null: after a hangup every write
    to it fails (EIO), and the failure would end the run wherever it was, in the middle of a record, say (red team
    6, F1). The run's log files still get every row."""
    quiet = os.open(os.devnull, os.O_WRONLY)
    for fd in fds:
        os.dup2(quiet, fd)
    os.close(quiet)


def _start_shielded(stop: StopRequest, start):
    """``start()`` in a thread of its own that blocks SIGINT, so every process it starts (a local cluster's workers,
    and what they start) starts with SIGINT blocked: Ctrl-C in the terminal then reaches only this process, which
    stops them in order, instead of each dying with a traceback. The sandboxes unblock it (sandbox.Limits.prlimit).

    The calling thread keeps taking Ctrl-C meanwhile (``stop``): a run stopped while its cluster starts ends as soon
    as the start has, the cluster closed by the caller. Returns what ``start()`` returned, or raises what it raised.
    """
    from multiprocessing import resource_tracker

    # Started here first: when the thread that spawns a process starts multiprocessing's resource tracker, it
    # unblocks SIGINT in itself afterwards, and every process it spawns from then on would take Ctrl-C again.
    resource_tracker.ensure_running()
    outcome = {}

    def run():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            outcome["started"] = start()
        except BaseException as error:  # raised again in the calling thread
            outcome["error"] = error

    thread = threading.Thread(target=run, name="class-run-cluster-start", daemon=True)
    thread.start()
    while thread.is_alive():
        try:
            thread.join(POLL_S)
        except KeyboardInterrupt:  # a second Ctrl-C: what is being started must still be closed
            stop.requested = True
    if "error" in outcome:
        raise outcome["error"]
    return outcome["started"]


def grade_class(root: Path, assignments, *, students: list[str] = (), force: bool = False,
                workers: int | None = None, scheduler=None, timeout_s: float = TIMEOUT_S,
                execute=execute_submission, out=None, stop: StopRequest | None = None) -> list[Row]:
    """Grade every submission of one or more assignments under ``root/submitted/`` on Dask; a Row per submission.

    Args:
        root: the course folder (with nbgrader_config.py, source/, submitted/, gradebook.db).
        assignments: an assignment name, or several: one cluster grades them all.
        students: grade only these (default: every submission).
        force: grade again what is already graded.
        workers: size of the local Dask cluster (default: one per core); ignored with ``scheduler``.
        scheduler: a running Dask scheduler's address (tcp://host:8786), or a Dask cluster object (dask-jobqueue's,
            dask-gateway's), to use instead of a local cluster.
        timeout_s: CPU seconds one submission's grading may use (its grading process, kernel and checks); past
            backstop_s of it in wall seconds the machine is taken to have failed (submission.TIMEOUT_S).
        execute: the task run per submission (tests replace it).
        out: where progress and log lines go (default: stderr).
        stop: takes the stop signals while the run grades (default: a StopRequest of its own); afterwards it says
            whether one stopped the run, and which.

    Raises:
        ClassGradingError: the run cannot start; the message says what to do.
    """
    names = [assignments] if isinstance(assignments, str) else list(assignments)
    if workers is not None and workers < 1:
        raise ClassGradingError(f"--workers must be 1 or more, not {workers}")
    if not (math.isfinite(timeout_s) and 0 < timeout_s <= MAX_TIMEOUT_S):  # nan and inf pass a plain `<= 0`
        raise ClassGradingError(f"--timeout must be a positive number of seconds up to {MAX_TIMEOUT_S:g} (a week), "
                                f"not {timeout_s:g}")
    if scheduler is None and execute is execute_submission:  # its kernels' sockets go in this TMPDIR
        _check_socket_room(names)
    run = Run(list(students), force, workers, scheduler, timeout_s, execute, out or sys.stderr)
    quiet_nbgrader()
    check_course(Path(root))
    logs = Path(root).resolve() / LOGS
    try:
        lock = CourseLock(logs / LOCK).__enter__()
    except CourseBusyError as busy:
        raise ClassGradingError(str(busy)) from None
    try:
        # Under the lock, every scratch folder there is a dead run's (killed before it could remove its own).
        remove_scratch(logs / SCRATCH)
        course = Course.open(root, logs / SCRATCH / uuid.uuid4().hex[:8])
        course.scratch.mkdir(parents=True)
        try:
            with stop or StopRequest() as taken:
                return _grade(course, names, run, taken)
        finally:
            remove_scratch(logs / SCRATCH)
    finally:
        lock.__exit__()


def check_course(root: Path) -> None:
    """Refuse a folder that is not a course, before anything is made in it (the lock, the secret, a gradebook).

    Raises:
        ClassGradingError: ``root`` is not a folder, has neither nbgrader_config.py nor gradebook.db, or its
            configured SQLite gradebook does not exist (nbgrader would make an empty one).
    """
    from nbgrader.coursedir import CourseDirectory

    root = root.resolve()
    if not root.is_dir() or not any((root / name).is_file() for name in ("nbgrader_config.py", "gradebook.db")):
        raise ClassGradingError(f"{root} is not a course folder (it has no nbgrader_config.py or gradebook.db): "
                                "give the course's folder with --course, or run the command there")
    db_url = CourseDirectory(config=course_config(root, "record")).db_url
    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///"):]).is_file():
        raise ClassGradingError(f"the gradebook {db_url[len('sqlite:///'):]} is missing: restore it from a backup, "
                                "or run `nbgrader generate_assignment` to start a new one")


# The longest socket path a worker's kernel makes below the temporary folder, past its own path and the assignment's
# name: /class-run-XXXXXXXX/grade-<assignment>-XXXXXXXX/tmp/kernel-XXXXXXXX/ipc-N (61 bytes, 62 with two digits),
# against the 107 bytes of a Unix socket's path (sun_path in sys/un.h, 108 with its final NUL).
SOCKET_PATH_OVERHEAD, SOCKET_PATH_MAX = 62, 107


def _check_socket_room(assignments: list[str]) -> None:
    """Raises ClassGradingError when a local cluster's kernel sockets would not fit under this TMPDIR."""
    temporary = os.fsencode(tempfile.gettempdir())
    longest = max(len(name.encode()) for name in assignments)
    if len(temporary) + longest + SOCKET_PATH_OVERHEAD > SOCKET_PATH_MAX:
        room = SOCKET_PATH_MAX - SOCKET_PATH_OVERHEAD - longest
        raise ClassGradingError(f"the temporary folder {tempfile.gettempdir()} ({len(temporary)} bytes) is too long "
                                f"for the kernels' sockets: set TMPDIR to a folder of at most {room} bytes "
                                "(TMPDIR=/tmp, say)")


@dataclass(frozen=True)
class Run:
    """How one class run grades, as grade_class was asked (its arguments say what each means)."""
    students: list[str]
    force: bool
    workers: int | None
    scheduler: object
    timeout_s: float
    execute: object
    out: object


def _grade(course, names: list[str], run: Run, stop: StopRequest) -> list[Row]:
    found = {}
    for assignment in names:
        course.check_assignment(assignment)
        found[assignment] = course.submitted(assignment)
    unknown = sorted(set(run.students) - {student for submitted in found.values() for student in submitted})
    if unknown:
        raise ClassGradingError(f"no submission of {' or '.join(names)} for {', '.join(unknown)} under "
                                f"{course.root / 'submitted'}")
    journal = Journal(course.root / LOGS / JOURNAL)
    repaired = repair(course, journal, run.out)
    run_id = f"{datetime.now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:4]}"
    logs = {assignment: RunLog(course.root, assignment, run.out, run_id) for assignment in names}
    rows, tasks = [], []
    for assignment, submitted in found.items():
        sources = course.source_notebooks(assignment)
        for student in [s for s in dict.fromkeys(run.students) if s in submitted] if run.students else list(submitted):
            # Before already_graded, which reads the submission's timestamp.txt: nothing reads a submission unchecked.
            files, note = preflight(submitted[student], course.ignored, sources)
            if files is None:  # never sent: recorded as failed at once
                refused = Executed(student, {}, "", 0.0, "", note)
                rows.append(_record(course, logs[assignment], Task(student, {}, assignment=assignment, attempt=0),
                                    refused, journal))
            elif not run.force and course.already_graded(assignment, student):
                skipped = Row(student, "skipped", note="already graded (--force grades it again)")
                rows.append(logs[assignment].add(skipped))
            else:
                if (assignment, student) in repaired:
                    note = "; ".join(n for n in (REPAIRED, note) if n)
                tasks.append(Task(student, files, note, assignment=assignment))
    if tasks:
        rows += _run_tasks(course, tasks, logs, run, journal, stop)
    for assignment, log in logs.items():
        log.summary([row for row in rows if row.assignment == assignment])
    if stop.because is not None:
        raise stop.because
    return rows


REPAIRED = "its record was cut short by an earlier run's end and has been removed"


def repair(course, journal: Journal, out) -> set[tuple[str, str]]:
    """Remove every half record the journal names (an earlier run was killed while writing it); say so.

    Returns the (assignment, student) pairs repaired. Their submissions are no longer graded, so this run grades
    them (a run restricted to other students leaves them for the next).
    """
    repaired = set()
    for assignment, student in journal.unfinished():
        course.forget(assignment, student)
        journal.done(assignment, student)
        print(f"repaired: {student}'s record of {assignment} was half written when an earlier run ended; removed, to "
              "be graded again", file=out)
        repaired.add((assignment, student))
    return repaired


POLL_S = 0.2      # how often the run looks for finished tasks
WATCH_S = 2.0     # how often it asks the scheduler what each worker is doing
SETTLE_S = 1.0    # after Ctrl-C: time for results already on their way to arrive and be recorded
CONNECT_S = 10    # a scheduler that does not answer within this cannot be used
NO_WORKERS_S = 30  # a scheduler with no worker for this long: the run cannot start, or has lost its cluster
# A task whose grading process has not started this long after the scheduler listed it as running is given up on
# (past its deadline): its worker's fork server imports PRELOAD first, which took about a minute at load 18 on 2 cores.
START_S = 180
# A local cluster's scheduler removes a worker whose heartbeats (every 0.5 s, from the worker's event loop, whatever
# its task is doing) stop for this long: a frozen worker (SIGSTOP, a hung node) is noticed in a minute, not five.
WORKER_TTL = "60s"
# A local cluster's housekeeping, for dashboards this run does not show: the workers' profiler samples every 10 ms,
# the event loops tick every 20 ms, the nannies read memory every 100 ms, the scheduler looks for work to steal every
# 100 ms (none to steal: it queues tasks itself). Together about 0.1 core on an idle 2-worker cluster, 0.01 without.
QUIET_CLUSTER = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
                 "distributed.worker.memory.monitor-interval": "1s", "distributed.admin.system-monitor.interval": "5s",
                 "distributed.scheduler.work-stealing": False}


def worker_timeout(timeout_s: float) -> float:
    """The grading process's wall-clock backstop: the submission's deadline (``timeout_s`` wall seconds) less the
    worker's time to stop it and report, so that a healthy worker always reports before the run gives up on it
    (Dispatch.watch)."""
    return timeout_s - min(30.0, timeout_s / 10)


def _run_tasks(course, tasks: list[Task], logs: dict[str, "RunLog"], run: Run, journal: Journal,
               stop: StopRequest) -> list[Row]:
    import dask
    import distributed  # noqa: F401 -- before dask.config.set: it loads distributed's defaults, which set's exit
    from tqdm.auto import tqdm  # would otherwise delete along with the values it restores

    # Our own retry (once, fresh process, other worker) replaces Dask's, so a task that kills its worker is not
    # re-run behind our back (a scheduler started elsewhere needs the same setting: see the README); the scheduler
    # hands a worker one task at a time, so a worker that dies takes only its own task with it. Workers must not be
    # daemons: a grading process is their child.
    settings = {"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0,
                "distributed.worker.daemon": False, "distributed.scheduler.worker-ttl": WORKER_TTL, **QUIET_CLUSTER}
    rows, recording = [], None
    what_runs = next(iter(logs)) if len(logs) == 1 else f"{len(logs)} assignments"
    out = next(iter(logs.values())).out
    with dask.config.set(settings), _client(course, run, stop) as client, \
            tqdm(total=len(tasks), desc=f"grading {what_runs}", unit="submission", file=out, dynamic_ncols=True) as bar:
        try:
            for task, executed, what in _outcomes(course, client, tasks, run, stop):
                log = logs[task.assignment]
                if what == "retrying":
                    bar.write(f"{task.student}: {executed.error}; retrying once in a fresh process", file=out)
                elif what == "stopped":
                    rows.append(log.add(Row(task.student, "stopped", note=STOPPED)))
                elif what == "lost":  # its record, if it had one, stays as it was
                    rows.append(log.add(Row(task.student, "failed", note=executed.error)))
                elif stop.because is not None:  # the gradebook is locked: nothing more is recorded
                    rows.append(log.add(Row(task.student, "stopped", note=GRADEBOOK_LOCKED)))
                else:
                    recording = task
                    try:
                        rows.append(_record(course, log, task, executed, journal))
                    except GradebookLockedError as locked:  # the run stops; _grade raises it after the summary
                        stop.requested, stop.because = True, locked
                        rows.append(log.add(Row(task.student, "stopped", note=GRADEBOOK_LOCKED)))
                    recording = None
                    bar.update(1)
        except KeyboardInterrupt:  # a second stop signal, outside nbgrader: every submission not recorded stops
            rows += _stopped_at_once(tasks, rows, logs, recording)
    return rows


CUT_SHORT = "not graded: a second stop signal cut its record short; the next run removes it and grades it again"


def _stopped_at_once(tasks: list[Task], rows: list[Row], logs: dict[str, "RunLog"], recording: Task | None
                     ) -> list[Row]:
    """A stopped row for each task without a row yet: CUT_SHORT for the one being recorded (its journal marker
    stays), STOPPED for the others."""
    done = {(row.assignment, row.student) for row in rows}
    stopped = []
    for task in tasks:
        if (task.assignment, task.student) not in done:
            cut = recording is not None and (task.assignment, task.student) == (recording.assignment, recording.student)
            stopped.append(logs[task.assignment].add(Row(task.student, "stopped", note=CUT_SHORT if cut else STOPPED)))
            done.add((task.assignment, task.student))
    return stopped


def _outcomes(course, client, tasks: list[Task], run: Run, stop: StopRequest):
    """Dispatch.outcomes of the tasks on the client; every task "stopped", none sent, after a Ctrl-C while the
    cluster started."""
    if stop.requested:
        return [(task, None, "stopped") for task in tasks]
    deadline_s = backstop_s(run.timeout_s)  # wall seconds: a frozen worker, or a machine too loaded to grade
    snapshots = {a: course.snapshot(a, run.timeout_s, worker_timeout(deadline_s))
                 for a in dict.fromkeys(t.assignment for t in tasks)}
    own = client.cluster if run.scheduler is None else None  # a worker dropped from the run's own cluster is replaced
    return Dispatch(client, snapshots, run.execute, deadline_s, own).outcomes(tasks, stop)


@contextmanager
def _client(course, run: Run, stop: "StopRequest"):
    """A Dask client on the run's cluster: a local one started here (and closed after), or the one asked for.

    Raises:
        ClassGradingError: no scheduler answers at the address given, or it has had no worker for NO_WORKERS_S.
    """
    import dask
    from distributed import Client, LocalCluster
    from distributed.security import Security

    cluster, temporary = None, None
    if run.scheduler is None:
        # Every temporary file of the cluster (Dask's folders, the workers' scratch courses, the fork servers' and
        # kernels' sockets) in one folder of the run's, named in its scratch folder so that the next run removes it
        # if this one is killed. In the temporary folder, not in the course: a socket's path has at most 107 bytes.
        temporary = Path(tempfile.mkdtemp(prefix=TEMPORARY_PREFIX))
        (course.scratch / TEMPORARY).write_text(str(temporary))
        # The setting covers what Dask makes while the cluster starts; local_directory is in every worker's spec,
        # so a worker started later (one replacing a dropped worker, Dispatch._drop) keeps its folder here too.
        with dask.config.set({"temporary-directory": str(temporary)}):
            # TLS with a key and certificates made for this run, held in memory: only this process and the
            # workers it starts can talk to the scheduler, so a submission on this machine cannot submit tasks
            # or read results, whatever it reaches.
            cluster = _start_shielded(stop, lambda: LocalCluster(
                n_workers=run.workers or os.cpu_count(), threads_per_worker=1, processes=True,
                security=Security.temporary(), env={"TMPDIR": str(temporary)}, local_directory=str(temporary),
                dashboard_address=None,
                # Its ERRORs are what the run reports itself, in the submissions' rows (a dropped worker's
                # "No valid workers found" among them): printed, they would only break the progress bar.
                silence_logs=logging.CRITICAL))
    try:
        try:
            client = Client(cluster or run.scheduler, timeout=CONNECT_S)
        except Exception as error:  # OSError, TimeoutError, ValueError for a malformed address
            raise ClassGradingError(f"no Dask scheduler answers at {run.scheduler} within {CONNECT_S} s ({error}); "
                                    "start one, or leave out --scheduler for a local cluster") from None
        with client:
            if isinstance(run.scheduler, str):
                _wait_for_a_worker(client, run.scheduler, stop)
            yield client
    finally:
        if cluster is not None:
            # What the workers started, grading processes in sessions of their own among it: closing the cluster
            # ends the workers, and a fork server or grading process could outlive them (and write into the
            # temporary folder once removed). Whatever of it is left once the cluster is closed is killed.
            started = _processes_under([nanny.pid for nanny in cluster.workers.values() if nanny.pid])
            cluster.close()
            _end_processes(started)
            shutil.rmtree(temporary, ignore_errors=True)


END_WAIT_S = 10  # how long the end of a run waits for the processes it killed to be gone


def _processes_under(roots: list[int]) -> dict[int, str]:
    """PID -> start time of each process of ``roots`` and below them, alive now."""
    found = {}
    for pid in [*roots, *(below for root in roots for below in descendants(root))]:
        started = _start_time(pid)
        if started is not None:
            found[pid] = started
    return found


def _end_processes(started: dict[int, str]) -> None:
    """SIGKILL each process of ``started`` still alive, and whatever it started since, until none is left or
    END_WAIT_S has passed. A PID whose start time changed is another process now, and is left alone."""
    deadline = time.monotonic() + END_WAIT_S
    while time.monotonic() < deadline:
        alive = [pid for pid, when in started.items() if _start_time(pid) == when]
        if not alive:
            return
        started = _processes_under(alive)  # before the kill: what they started goes too, reparented or not
        for pid in started:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(POLL_S / 4)


def _start_time(pid: int) -> str | None:
    """A live process's start time (field 22 of /proc/<pid>/stat), which tells it from a later one under its PID;
    None when there is none, or only its zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in (b"Z", b"X") else fields[19].decode()


def _wait_for_a_worker(client, scheduler: str, stop: StopRequest) -> None:
    """Wait until the scheduler has a worker, in slices, so that a Ctrl-C meanwhile ends the wait at once (the run then
    stops every task unsent) instead of after NO_WORKERS_S.

    Raises:
        ClassGradingError: no worker for NO_WORKERS_S seconds.
    """
    deadline = time.monotonic() + NO_WORKERS_S
    while not stop.requested:
        try:
            client.wait_for_workers(1, timeout=min(1.0, max(deadline - time.monotonic(), 0.01)))
            return
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise ClassGradingError(f"the Dask scheduler at {scheduler} has had no worker for {NO_WORKERS_S} s; "
                                        f"start some (`dask worker {scheduler}`)") from None


def remove_scratch(folder: Path) -> None:
    """Remove the scratch folders under ``folder`` and the local clusters' temporary folders they name (only folders
    this command makes: a name that was tampered with removes nothing else). A killed run's seccomp filter folder is
    removed by the next process that makes one (autograder.trust.sandbox)."""
    for named in folder.glob(f"*/{TEMPORARY}"):
        temporary = Path(named.read_text().strip())
        if temporary.name.startswith(TEMPORARY_PREFIX) and temporary.parent == Path(tempfile.gettempdir()):
            shutil.rmtree(temporary, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)


class Dispatch:
    """Tasks on a Dask client: submitted under one name (so the scheduler queues them), each retried once, each
    given up on when it runs past its deadline, and all of them when the cluster is lost.

    A task's deadline counts from the start of its grading process (the worker logs it under STARTED); one whose
    worker never says so (frozen before, or a worker of an older release) is given START_S more, from when the
    scheduler first lists it as running. A worker dropped for a stalled task is replaced when ``cluster`` (the
    run's own local cluster) is given.
    """

    def __init__(self, client, snapshots: dict[str, Snapshot], execute, deadline_s: float, cluster=None):
        from distributed import as_completed

        self.client, self.execute, self.snapshots, self.deadline_s = client, execute, snapshots, deadline_s
        self.cluster = cluster
        self.scattered = {name: client.scatter(snapshot, broadcast=True) for name, snapshot in snapshots.items()}
        self.name, self.count = f"grade-{uuid.uuid4().hex[:8]}", 0
        # Results are fetched in the background as tasks end: a worker that freezes while holding one must not
        # block the run (future.result() would wait for it), only that task, which then runs past its deadline.
        self.arrived = as_completed(with_results=True, raise_errors=False)
        # Task key -> when it was first seen running, seen with its grading process started, seen ended.
        self.seen: dict[str, float] = {}
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.watched, self.workerless_since = 0.0, None
        # (assignment, student) -> when first sent; keys of tasks Dask itself ended (_ended_by_dask).
        self.first_sent: dict[tuple[str, str], float] = {}
        self.ended_by_dask: set[str] = set()

    def submit(self, task: Task):
        if self.scattered[task.assignment].status != "finished":  # every worker holding it died: send it again
            # To the run's own cluster once the worker replacing a dropped one has started (it imports PRELOAD).
            wait = {"timeout": START_S} if self.cluster is not None else {}
            self.scattered[task.assignment] = self.client.scatter(self.snapshots[task.assignment], broadcast=True,
                                                                  **wait)
        others = [w for w in self.client.scheduler_info()["workers"] if w != task.avoid]
        where = {"workers": others, "allow_other_workers": True} if task.avoid and others else {}
        self.count += 1
        self.first_sent.setdefault((task.assignment, task.student), time.monotonic())
        future = self.client.submit(guarded, self.execute, self.scattered[task.assignment], task,
                                    key=f"{self.name}-{self.count}", **where)
        self.arrived.add(future)
        return future

    def outcomes(self, tasks: list[Task], stop: "StopRequest"):
        """Yield (task, executed, what) as tasks end: what is "done", "retrying" (it is sent again), "stopped"
        (Ctrl-C came first; executed is None) or "lost" (the cluster is gone; executed.error says how)."""
        pending = {}
        try:
            for task in tasks:
                pending[self.submit(task)] = task
        except Exception as error:  # the scheduler went away while the tasks were being sent
            yield from self._lost(tasks[len(pending):], f"{type(error).__name__}: {error}")
        while pending:
            if stop.requested:
                time.sleep(SETTLE_S)
            lost, stalled = self.watch(pending)
            if lost:
                yield from self._lost(pending.values(), lost)
                return
            done = self._arrivals(pending, settle=stop.requested)
            for future, worker in stalled:
                self._give_up(future, worker)
                started = future.key in self.started or future.done()
                done.append((future, _stalled(pending[future], worker, self.deadline_s, started)))
            for future, executed in done:
                task = pending.pop(future)
                if executed.error and stop.requested:  # most likely the interrupt itself
                    yield task, None, "stopped"
                elif executed.error and self._never_began(future, task):
                    resent = replace(task, avoid=executed.worker)  # the same attempt, away from that worker
                    try:
                        pending[self.submit(resent)] = resent
                    except Exception as error:  # no worker to take the snapshot, or the scheduler went away
                        yield from self._lost([resent], f"{type(error).__name__}: {error}")
                elif executed.error and task.attempt == 1:
                    yield task, executed, "retrying"
                    retry = replace(task, attempt=2, avoid=executed.worker)
                    try:
                        pending[self.submit(retry)] = retry
                    except Exception as error:  # no worker to take the snapshot, or the scheduler went away
                        yield from self._lost([retry], f"{type(error).__name__}: {error}")
                else:
                    yield task, executed, "done"
            if stop.requested:
                break
            if not done:
                time.sleep(POLL_S)
        for future, task in pending.items():
            future.cancel()
            yield task, None, "stopped"

    def _arrivals(self, pending, settle: bool) -> list[tuple[object, Executed]]:
        """(future, Executed) of the tasks whose results have arrived. With ``settle`` (after Ctrl-C), first waits
        a little for the results of tasks that have ended already, so that they are recorded, not stopped."""
        # Only pending futures: one given up on (past its deadline) may still arrive, and is no longer ours.
        arrived = [(f, r) for f, r in self.arrived.next_batch(block=False) if f in pending]
        give_up = time.monotonic() + 5 * SETTLE_S
        while settle and {f for f in pending if f.done()} - {f for f, _ in arrived} and time.monotonic() < give_up:
            time.sleep(POLL_S)
            arrived += [(f, r) for f, r in self.arrived.next_batch(block=False) if f in pending]
        self.ended_by_dask |= {future.key for future, result in arrived if _ended_by_dask(result)}
        return [(future, _result(result, pending[future])) for future, result in arrived]

    def _never_began(self, future, task: Task) -> bool:
        """Whether Dask ended a task (_ended_by_dask) before its grading process started, within the deadline and
        START_S of its first sending: then it is sent again as the same attempt. A scheduler removes a frozen
        worker after WORKER_TTL and, allowed no failures, fails the tasks queued on it too, which had never run (one
        worker, frozen, then its replacement: a submission failed twice without being graded once); removing the
        only worker that held the snapshot cancels every task waiting for it."""
        waited = time.monotonic() - self.first_sent.get((task.assignment, task.student), time.monotonic())
        return (future.key in self.ended_by_dask and future.key not in self._announced()
                and waited <= self.deadline_s + START_S)

    def watch(self, pending) -> tuple[str | None, list[tuple[object, str]]]:
        """(why the cluster is lost, or None; [(future, worker)] of the tasks running past their deadline)."""
        if self.client.status != "running":
            return f"its scheduler stopped answering (client {self.client.status})", []
        now = time.monotonic()
        if now - self.watched < WATCH_S:
            return None, []
        self.watched = now
        try:
            processing = self.client.processing()
        except Exception as error:  # the scheduler went away between the check above and this call
            return f"its scheduler stopped answering ({type(error).__name__})", []
        self.workerless_since = (self.workerless_since or now) if not processing else None
        if self.workerless_since is not None and now - self.workerless_since > NO_WORKERS_S:
            return f"no Dask worker for {NO_WORKERS_S} s", []
        running = {key: worker for worker, keys in processing.items() for key in keys}
        announced = self._announced()
        stalled = []
        for future in pending:
            key = future.key
            if key in running:
                self.seen.setdefault(key, now)
            if key in announced:
                self.started.setdefault(key, now)
            if future.done():  # ended, its result not yet here: it has its deadline again to arrive
                since, allowed = self.ended.setdefault(key, now), self.deadline_s
            elif key in self.started:
                since, allowed = self.started[key], self.deadline_s
            else:
                since, allowed = self.seen.get(key, now), self.deadline_s + START_S
            if now - since > allowed:
                # Only the worker running it now is to blame. A task that has ended blames none: Dask fetches
                # results in batches, so a frozen worker also holds back results that healthy workers hold.
                stalled.append((future, running.get(key, "")))
        return None, stalled

    def _announced(self) -> set[str]:
        """Keys of the tasks whose grading process has started (none when the scheduler cannot say)."""
        try:
            return {message for _, message in self.client.get_events(STARTED)}
        except Exception:  # the scheduler went away: the next watch() says so
            return set()

    def _give_up(self, future, worker: str) -> None:
        """Stop waiting for a stalled task: remove the worker running it (when one is), then cancel it. In the other
        order the scheduler hands the frozen worker the next task in its queue, which the removal then kills (a
        class-run attack saw a full-marks submission recorded failed so, without ever having run)."""
        if worker:
            self._drop(worker)
        future.cancel()

    def _drop(self, worker: str) -> None:
        """Ask the scheduler to remove a worker that has gone silent, so that it is given no other task. Best
        effort: a scheduler elsewhere may not be able to load this function (then its worker-ttl does it later)."""
        try:
            name = self.client.scheduler_info()["workers"].get(worker, {}).get("name")
            self.client.run_on_scheduler(_remove_worker, address=worker)
        except Exception:  # the retry avoids that worker anyway
            name = None
        if self.cluster is not None and name in self.cluster.worker_spec:
            # Dask's LocalCluster keeps a removed worker's spec and never starts it again: without a new one,
            # every task after it would wait for a worker that never comes. The spec goes under a new name (under
            # its own, the cluster would take the worker it still lists for the new one); scale() starts it.
            self.cluster.worker_spec[f"replacing-{name}"] = self.cluster.worker_spec.pop(name)
            self.cluster.scale(len(self.cluster.worker_spec))
        # The snapshots were broadcast to that worker too; Dask may drop a key whose holder was removed, and with
        # it every task that needs it, so the retries get fresh copies. With no worker left there is nowhere to
        # send them: submit() tries again, and watch() ends the run if none comes back.
        try:
            self.scattered = {name: self.client.scatter(snapshot, broadcast=True, timeout=WATCH_S)
                              for name, snapshot in self.snapshots.items()}
        except Exception:
            pass

    @staticmethod
    def _lost(tasks, why: str):
        for task in tasks:
            yield task, Executed(task.student, {}, "", 0.0, "", f"not graded: the Dask cluster was lost ({why})"), "lost"


async def _remove_worker(dask_scheduler, address: str) -> None:
    await dask_scheduler.remove_worker(address, stimulus_id="class-run-stalled", close=True)


def _stalled(task: Task, worker: str, deadline_s: float, started: bool = True) -> Executed:
    """A task given up on: past its deadline, or (``started`` False) its grading process not begun within START_S
    and the deadline."""
    where = f"its Dask worker {worker}" if worker else "its Dask worker"
    waited = f"no result within {deadline_s:g} s" if started else \
        f"no grading process started and no result within {deadline_s + START_S:g} s"
    return Executed(task.student, {}, "", deadline_s, worker, f"{waited} from {where} (frozen, cut off, or the machine "
                    "too loaded); stopped: grade it again (not the submission's fault)")


def _record(course, log, task: Task, executed: Executed, journal: Journal) -> Row:
    """The final outcome of one submission, in the gradebook and the log: a whole record or none (the journal).

    Raises:
        GradebookLockedError: the gradebook stayed locked by another program; nothing of this record is left but
            its journal marker (when the lock came only once it had begun), which the next run repairs.
    """
    recording = time.monotonic()
    course.wait_writable()  # else nbgrader, after its own 5 s, fails this record and then each one after it
    with journal.recording(task.assignment, task.student, course.autograded(task.assignment, task.student)):
        try:
            row = _record_or_forget(course, task, executed)
        except Exception as error:  # a write refused while removing what there was of the record
            if LOCKED in str(error):
                raise GradebookLockedError(_locked(course)) from None
            raise
    # Grading time, not time spent queueing: the worker's run plus recording it here.
    row.seconds, row.attempts = executed.seconds + time.monotonic() - recording, task.attempt
    row.cpu_seconds = executed.cpu_seconds
    row.note = "; ".join(n for n in (row.note, task.note) if n)
    return log.add(row, executed.log)


def _record_or_forget(course, task: Task, executed: Executed) -> Row:
    """Record a graded submission; anything that did not end in a whole record leaves none."""
    if not executed.error:
        try:
            row = course.record(task.assignment, executed)
        except Exception as error:  # the gradebook or the file system refused: a failed row, not a dead run
            row = Row(task.student, "failed", note=f"could not record it ({type(error).__name__}: {error})"[:500])
        if row.status == "graded":
            return row
        if LOCKED in row.note:  # another program took the lock after wait_writable: the marker stays
            raise GradebookLockedError(_locked(course))
    else:
        row = Row(task.student, "failed", note=executed.error)
    course.forget(task.assignment, task.student)
    try:
        course.record_failure(task.assignment, task.student, row.note)
    except Exception as error:  # the row still says why; the gradebook could not take it
        row.note += f"; not in the gradebook either ({type(error).__name__}: {error})"[:300]
    return row


LOCKED = "database is locked"  # SQLite's word for a write refused past its busy timeout
GRADEBOOK_LOCKED = ("not graded: the gradebook was locked by another program (nbgrader, Formgrader, an SQLite shell); "
                    "the next run grades it")


def _locked(course) -> str:
    return unusable_gradebook(course.db_url, sqlite3.OperationalError(LOCKED))


def _ended_by_dask(result) -> bool:
    """Whether what as_completed handed back says Dask ended the task, not the task itself: KilledWorker (the
    worker running it died or was removed) or a cancellation (an input it waited for was lost with its holder).
    The run's own cancellations never come here: it stops watching a future before it cancels it."""
    from concurrent.futures import CancelledError  # Dask's FutureCancelledError is one

    from distributed import KilledWorker  # distributed is imported only where a cluster is used

    error = result[1] if isinstance(result, tuple) else result
    return isinstance(error, (KilledWorker, CancelledError))


def _result(result, task: Task) -> Executed:
    """A task's Executed from what as_completed handed back: the Executed itself, or what ended the task (its
    worker died, it was cancelled, a bug in the task) as an Executed with the reason."""
    if isinstance(result, Executed):
        return result
    error = result[1] if isinstance(result, tuple) else result  # a task's error comes as (type, exception, traceback)
    worker = getattr(error, "last_worker", None)
    return Executed(task.student, {}, "", 0.0, getattr(worker, "address", "") or "",
                    f"its Dask worker failed ({type(error).__name__}: {str(error)[:300]})")


class RunLog:
    """The per-submission log: a line on the terminal, a row in autograde-logs/<assignment>.tsv, nbgrader's log.

    The table's first column is the run's id, so the lines of one run can be told from those of the runs before."""

    HEADER = ["run", "time", "student", "status", "score", "max_score", "seconds", "causes", "note"]

    def __init__(self, root: Path, assignment: str, out, run_id: str):
        self.folder = root / LOGS / assignment
        self.folder.mkdir(parents=True, exist_ok=True)
        self.table = root / LOGS / f"{assignment}.tsv"
        self.out, self.assignment, self.run_id = out, assignment, run_id
        self.started = time.monotonic()
        if self.table.exists() and self.table.open().readline().rstrip("\n").split("\t") != self.HEADER:
            self.table.rename(self.table.with_suffix(".old.tsv"))  # an earlier release's columns: kept aside

    def add(self, row: Row, nbgrader_log: str = "") -> Row:
        from tqdm.auto import tqdm

        row.assignment = self.assignment
        tqdm.write(row.line(), file=self.out)  # above the progress bar, if one is showing
        new = not self.table.exists()
        # a folder name that is not UTF-8 is written with its odd bytes escaped (\udcff), not a failed run
        with open(self.table, "a", newline="", encoding="utf-8", errors="backslashreplace") as table:
            writer = csv.writer(table, delimiter="\t")
            if new:
                writer.writerow(self.HEADER)
            writer.writerow([self.run_id, datetime.now().isoformat(timespec="seconds"), row.student, row.status,
                             "" if row.score is None else row.score, "" if row.max_score is None else row.max_score,
                             f"{row.seconds:.1f}", row.causes, row.note])
        if nbgrader_log:
            (self.folder / f"{row.student}.log").write_text(nbgrader_log)
        return row

    def summary(self, rows: list[Row]) -> None:
        statuses = ("graded", "failed", "skipped", "stopped")
        counts = {status: sum(r.status == status for r in rows) for status in statuses}
        said = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
        print(f"{self.assignment}: {said or 'no submissions'} in {time.monotonic() - self.started:.0f} s. "
              f"Log: {self.table} (run {self.run_id})", file=self.out)
        if counts["stopped"]:
            print("Run the same command again to grade the rest.", file=self.out)
