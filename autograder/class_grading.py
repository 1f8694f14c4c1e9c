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

A task that fails (the grading process crashed, ran past its time or memory, or its Dask worker died) is retried once
in a fresh process, on another worker when there is one; a second failure is recorded with its reason. Ctrl-C
stops between submissions; what was recorded stays, and a re-run skips it.
"""
from __future__ import annotations

import csv
import json
import multiprocessing
import os
import resource
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from autograder.sandbox import Limits

# The grading process (nbgrader, the checks, torch) is trusted code, but it starts the learner's kernel, whose own
# limits (sandbox.KERNEL_LIMITS) must fit under these: an unprivileged process cannot raise a hard limit.
GRADING_LIMITS = Limits(cpu_seconds=3600, memory_bytes=16 << 30, file_bytes=1 << 30, open_files=4096)
TIMEOUT_S = 1800.0   # one submission, wall clock: a notebook's cells have 120 s each, its checks 240 s each
MAX_SUBMISSION_BYTES = 100 << 20  # what a task carries to its worker; a larger hand-in is refused with the reason
# Imported once by each worker's fork server, so a submission's process starts with them loaded (about 4 s of CPU
# per submission saved: nbgrader, nbconvert, the checks and torch).
PRELOAD = ["nbgrader.apps", "autograder.preprocessors"]
WORKER_CONFIG = "from autograder.course import configure\nconfigure(get_config(), release_directory='release', stage='execute')\n"
STOPPED = "not graded: the run was stopped"
LOGS = "autograde-logs"  # under the course folder: <assignment>.tsv (one line per submission), <assignment>/<student>.log


class ClassGradingError(Exception):
    """The run cannot start (unknown assignment or student, no gradebook); the message says what to do."""


@dataclass(frozen=True)
class Snapshot:
    """What every task of one assignment needs; sent to each worker once."""
    assignment: str
    gradebook: bytes                     # an SQLite copy of the course's gradebook
    source: dict[str, bytes]             # the assignment's source folder, by relative path
    timeout_s: float = TIMEOUT_S


@dataclass(frozen=True)
class Task:
    student: str
    files: dict[str, bytes]              # the submission folder, by relative path
    attempt: int = 1
    avoid: str | None = None             # the worker where the first attempt failed


@dataclass
class Executed:
    """What a worker hands back: executed notebooks (nbformat JSON text by notebook name), or why there are none."""
    student: str
    notebooks: dict[str, str]
    log: str
    seconds: float
    worker: str
    error: str | None = None


@dataclass
class Row:
    """One line of the run's log: every submission gets one, whatever happened to it."""
    student: str
    status: str                          # graded, failed, skipped, stopped
    score: float | None = None
    max_score: float | None = None
    seconds: float = 0.0
    note: str = ""
    attempts: int = 0

    def line(self) -> str:
        points = f"{self.score:g}/{self.max_score:g}" if self.score is not None else "-"
        timing = f"{self.seconds:6.1f} s" if self.attempts else " " * 8
        return f"{self.student:<20} {self.status:<8} {points:>9} {timing}  {self.note}".rstrip()


# ---------------------------------------------------------------------------------------------- on a Dask worker

def execute_submission(snapshot: Snapshot, task: Task) -> Executed:
    """Run one submission's notebooks and trusted verdicts in a fresh, limited process; hand back the outputs.

    Runs on a Dask worker. Never raises for a learner's doing: a submission that breaks its grading process comes
    back with ``error`` set.
    """
    started = time.monotonic()
    worker = _worker_address()
    with tempfile.TemporaryDirectory(prefix=f"grade-{snapshot.assignment}-") as scratch:
        root = Path(scratch)
        _write_tree(root / "source" / snapshot.assignment, snapshot.source)
        _write_tree(root / "submitted" / task.student / snapshot.assignment, task.files)
        (root / "gradebook.db").write_bytes(snapshot.gradebook)
        (root / "nbgrader_config.py").write_text(WORKER_CONFIG)
        error = _run_grading_process(root, snapshot.assignment, task.student, snapshot.timeout_s)
        report = root / "report.json"
        found = json.loads(report.read_text()) if report.is_file() else {}
        graded = root / "autograded" / task.student / snapshot.assignment
        notebooks = {p.stem: p.read_text() for p in sorted(graded.glob("*.ipynb"))}
        if error is None and not found.get("success"):
            error = _reason(found.get("log", "")) or "nbgrader did not say why it failed"
        if error is None and not notebooks:
            error = "nbgrader finished without writing an autograded notebook"
        return Executed(task.student, notebooks if error is None else {}, found.get("log", ""),
                        time.monotonic() - started, worker, error)


def _run_grading_process(root: Path, assignment: str, student: str, timeout_s: float) -> str | None:
    """Run ``_grade_here`` in a process forked from this worker's fork server; the reason it failed, or None."""
    if multiprocessing.current_process().daemon:
        return ("this Dask worker is a daemon process and cannot start grading processes: start workers with "
                "DASK_DISTRIBUTED__WORKER__DAEMON=False (see the README)")
    process = _fork_server().Process(target=_grade_here, args=(str(root), assignment, student), daemon=False)
    process.start()
    process.join(timeout_s)
    if process.exitcode is None:
        process.kill()
        process.join()
        return f"grading did not finish within {timeout_s:g} s and was stopped"
    if process.exitcode < 0:
        name = signal.Signals(-process.exitcode).name
        hint = " (it ran out of memory or CPU time)" if name in ("SIGKILL", "SIGXCPU", "SIGSEGV") else ""
        return f"the grading process was killed by {name}{hint}"
    return None


_FORK_SERVER = None
_FORK_LOCK = threading.Lock()


def _fork_server():
    """This process's multiprocessing context whose fork server has PRELOAD imported (started on first use)."""
    global _FORK_SERVER
    with _FORK_LOCK:
        if _FORK_SERVER is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOAD)
            _FORK_SERVER = context
        return _FORK_SERVER


def _grade_here(root: str, assignment: str, student: str) -> None:
    """The grading process: nbgrader's autograde, "execute" stage, for one student in the scratch course ``root``.

    Writes ``report.json`` (success and nbgrader's log) and leaves without Python's slow teardown.
    """
    try:
        report = _autograde_here(root, assignment, student)
    except BaseException:  # noqa: B036 -- whatever stops nbgrader is the reason this submission failed
        import traceback
        report = {"success": False, "log": traceback.format_exc()}
    Path(root, "report.json").write_text(json.dumps(report))
    os._exit(0)


def _autograde_here(root: str, assignment: str, student: str) -> dict:
    for limit, value in ((resource.RLIMIT_CPU, GRADING_LIMITS.cpu_seconds), (resource.RLIMIT_AS, GRADING_LIMITS.memory_bytes),
                         (resource.RLIMIT_FSIZE, GRADING_LIMITS.file_bytes), (resource.RLIMIT_NOFILE, GRADING_LIMITS.open_files)):
        resource.setrlimit(limit, (value, value))
    os.chdir(root)
    jupyter = Path(root) / ".jupyter"
    for folder in ("config", "data", "runtime", "ipython"):
        (jupyter / folder).mkdir(parents=True, exist_ok=True)
    os.environ.update({
        "JUPYTER_CONFIG_DIR": str(jupyter / "config"), "JUPYTER_DATA_DIR": str(jupyter / "data"),
        "JUPYTER_RUNTIME_DIR": str(jupyter / "runtime"), "IPYTHONDIR": str(jupyter / "ipython"),
        "HYPOTHESIS_STORAGE_DIRECTORY": str(Path(root) / ".hypothesis"),
        # One BLAS/OpenMP thread per process: one grading per core, and small matrices run faster single-threaded.
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    import torch
    from nbgrader.apps import NbGraderAPI
    from threadpoolctl import threadpool_limits
    from traitlets.config.loader import PyFileConfigLoader

    torch.set_num_threads(1)
    threadpool_limits(1)
    config = PyFileConfigLoader("nbgrader_config.py", path=root).load_config()
    config.CourseDirectory.root = root
    outcome = NbGraderAPI(config=config).autograde(assignment, student, force=True, create=True)
    return {"success": bool(outcome.get("success")), "log": outcome.get("log") or outcome.get("error") or ""}


def _reason(log: str) -> str:
    """The line of nbgrader's log that says why grading failed: the last exception, else the last error."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    raised = [line for line in lines if line.split(":")[0].endswith(("Error", "Exception"))]
    errors = [line for line in lines if "| ERROR]" in line]
    return (raised or errors or [""])[-1][:500]


def _write_tree(folder: Path, files: dict[str, bytes]) -> None:
    for relative, content in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def _worker_address() -> str:
    try:
        from distributed import get_worker
        return get_worker().address
    except ValueError:  # called outside a worker (tests)
        return "local"


# ------------------------------------------------------------------------------------------ the one recording process

@dataclass
class Course:
    """A course folder as nbgrader sees it, with the "record" stage configured."""
    root: Path
    config: object
    db_url: str
    scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="class-grading-")))

    @classmethod
    def open(cls, root: Path) -> "Course":
        from nbgrader.coursedir import CourseDirectory
        from traitlets.config import Config
        from traitlets.config.loader import PyFileConfigLoader

        from autograder.course import configure

        root = Path(root).resolve()
        config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config() \
            if (root / "nbgrader_config.py").is_file() else Config()
        release = config.CourseDirectory.get("release_directory", "release")
        configure(config, release_directory=release, stage="record")
        config.CourseDirectory.root = str(root)
        course = cls(root, config, CourseDirectory(config=config).db_url)
        config.ReplayExecution.directory = str(course.scratch / "executed")
        return course

    def submitted(self, assignment: str) -> dict[str, Path]:
        """Student id -> submission folder, for every ``submitted/<student>/<assignment>/``."""
        return {p.parent.name: p for p in sorted((self.root / "submitted").glob(f"*/{assignment}"))
                if p.is_dir() and not p.parent.name.startswith(".")}

    def check_assignment(self, assignment: str) -> None:
        from nbgrader.api import Gradebook, MissingEntry

        if not self.db_url.startswith("sqlite:///"):
            raise ClassGradingError(f"class grading snapshots an SQLite gradebook; this course uses {self.db_url}")
        with Gradebook(self.db_url, self.config.CourseDirectory.course_id) as gradebook:
            try:
                gradebook.find_assignment(assignment)
            except MissingEntry:
                raise ClassGradingError(f"{assignment} is not in the gradebook: run `nbgrader generate_assignment "
                                        f"{assignment}` in {self.root} first") from None

    def already_graded(self, assignment: str, student: str) -> bool:
        """nbgrader's own rule: an autograded copy exists and the submission is not newer than it; and it has grades."""
        from nbgrader.api import Gradebook, MissingEntry
        from nbgrader.coursedir import CourseDirectory

        submitted = self.root / "submitted" / student / assignment
        graded = self.root / "autograded" / student / assignment
        if not all((graded / p.name).is_file() for p in submitted.glob("*.ipynb")) or not graded.is_dir():
            return False
        coursedir = CourseDirectory(config=self.config)
        new, old = coursedir.get_existing_timestamp(str(submitted)), coursedir.get_existing_timestamp(str(graded))
        if new is not None and old is not None and new > old:
            return False
        with Gradebook(self.db_url, self.config.CourseDirectory.course_id) as gradebook:
            try:
                gradebook.find_submission(assignment, student)
            except MissingEntry:
                return False
        return True

    def snapshot(self, assignment: str, timeout_s: float) -> Snapshot:
        """The gradebook (a consistent SQLite copy) and the assignment's source folder."""
        copy = self.scratch / "gradebook-snapshot.db"
        with sqlite3.connect(self.db_url[len("sqlite:///"):]) as live, sqlite3.connect(copy) as target:
            live.backup(target)
        source = self.root / self.config.CourseDirectory.source_directory / assignment
        return Snapshot(assignment, copy.read_bytes(), read_tree(source, self.ignored), timeout_s)

    @property
    def ignored(self) -> list[str]:
        return list(self.config.CourseDirectory.ignore)

    def record(self, assignment: str, executed: Executed) -> Row:
        """Write an executed submission into the gradebook and autograded/, through nbgrader's own autograde."""
        import nbformat
        from nbgrader.api import Gradebook
        from nbgrader.apps import NbGraderAPI

        from sqlalchemy.exc import SAWarning

        # nbgrader 0.9.6 trips SQLAlchemy's autoflush warnings on every autograde; they say nothing about the class.
        warnings.filterwarnings("ignore", category=SAWarning)
        folder = self.scratch / "executed" / executed.student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in executed.notebooks.items():
            nbformat.write(nbformat.reads(text, as_version=4), folder / f"{name}.ipynb")
        outcome = NbGraderAPI(config=self.config).autograde(assignment, executed.student, force=True, create=True)
        if not outcome.get("success"):
            return Row(executed.student, "failed", note="nbgrader could not record it: " +
                       (_reason(outcome.get("log") or "") or "see the log"))
        with Gradebook(self.db_url, self.config.CourseDirectory.course_id) as gradebook:
            submission = gradebook.find_submission(assignment, executed.student)
            return Row(executed.student, "graded", submission.score, submission.max_score)


def read_tree(folder: Path, ignored: list[str]) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, leaving out nbgrader's ignore patterns (checkpoints, caches)."""
    from fnmatch import fnmatch

    found = {}
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if path.is_file() and not any(fnmatch(part, pattern) for part in parts for pattern in ignored):
            found[str(path.relative_to(folder))] = path.read_bytes()
    return found


def preflight(folder: Path, ignored: list[str]) -> tuple[dict[str, bytes] | None, str]:
    """(files, note) of a submission folder; files is None when it cannot be graded at all, and note says why.

    A copied graded cell is graded (autograder.preprocessors.SeparateCopiedCells); the note names it.
    """
    import nbformat

    from autograder.preprocessors import copied_cells

    files = read_tree(folder, ignored)
    size = sum(map(len, files.values()))
    if size > MAX_SUBMISSION_BYTES:
        return None, f"the submission folder holds {size >> 20} MiB; the limit is {MAX_SUBMISSION_BYTES >> 20} MiB"
    notes = []
    for name in sorted(n for n in files if n.endswith(".ipynb") and "/" not in n):
        try:
            nb = nbformat.reads(files[name].decode("utf-8"), as_version=4)
        except Exception as error:  # nbformat raises JSON, validation and encoding errors of many types
            return None, f"{name} is not a readable notebook ({type(error).__name__}: {str(error).splitlines()[0][:200]})"
        copies = copied_cells(nb)
        if copies:
            notes.append(f"{name}: copied cell(s) {', '.join(copies)} graded once, the first copy")
    return files, "; ".join(notes)


class StopRequest:
    """Ctrl-C asks the run to stop after the submission being recorded; a second Ctrl-C stops at once."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\nStopping after the submissions being recorded; run the same command again to resume.", file=sys.stderr)

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def grade_class(root: Path, assignment: str, *, students: list[str] = (), force: bool = False,
                workers: int | None = None, scheduler=None, timeout_s: float = TIMEOUT_S,
                execute=execute_submission, out=None) -> list[Row]:
    """Grade every submission of ``assignment`` under ``root/submitted/`` on Dask; one Row per submission.

    Args:
        root: the course folder (with nbgrader_config.py, source/, submitted/, gradebook.db).
        students: grade only these (default: every submission).
        force: grade again what is already graded.
        workers: size of the local Dask cluster (default: one per core); ignored with ``scheduler``.
        scheduler: a running Dask scheduler's address (tcp://host:8786), or a Dask cluster object (dask-jobqueue's,
            dask-gateway's), to use instead of a local cluster.
        timeout_s: wall-clock limit for one submission's grading.
        execute: the task run per submission (tests replace it).
        out: where progress and log lines go (default: stderr).

    Raises:
        ClassGradingError: the run cannot start; the message says what to do.
    """
    course = Course.open(root)
    course.check_assignment(assignment)
    found = course.submitted(assignment)
    unknown = sorted(set(students) - set(found))
    if unknown:
        raise ClassGradingError(f"no submission of {assignment} for {', '.join(unknown)} under "
                                f"{course.root / 'submitted'} (found {len(found)})")
    log = RunLog(course.root, assignment, out or sys.stderr)
    rows, tasks = [], []
    for student in students or list(found):
        if not force and course.already_graded(assignment, student):
            rows.append(log.add(Row(student, "skipped", note="already graded (--force grades it again)")))
            continue
        files, note = preflight(found[student], course.ignored)
        if files is None:
            rows.append(log.add(Row(student, "failed", note=note)))
        else:
            tasks.append((Task(student, files), note))
    try:
        if tasks:
            rows += _run_tasks(course, assignment, tasks, log, workers, scheduler, timeout_s, execute)
    finally:
        shutil.rmtree(course.scratch, ignore_errors=True)
    log.summary(rows)
    return rows


def _run_tasks(course, assignment, tasks, log, workers, scheduler, timeout_s, execute) -> list[Row]:
    import dask
    from distributed import Client, LocalCluster, wait
    from tqdm.auto import tqdm

    notes = {task.student: note for task, note in tasks}
    rows = []
    # Our own retry (once, fresh process, other worker) replaces Dask's: a task that kills its worker is not re-run
    # behind our back. Workers must not be daemons: a grading process is their child.
    settings = {"distributed.scheduler.allowed-failures": 0, "distributed.worker.daemon": False}
    with dask.config.set(settings), StopRequest() as stop:
        cluster = None if scheduler is not None else LocalCluster(
            n_workers=workers or os.cpu_count(), threads_per_worker=1, processes=True, dashboard_address=None,
            silence_logs=40)
        try:
            with Client(cluster if scheduler is None else scheduler) as client:
                snapshot = client.scatter(course.snapshot(assignment, timeout_s), broadcast=True)
                token = uuid.uuid4().hex[:8]

                def submit(task):
                    others = [w for w in client.scheduler_info()["workers"] if w != task.avoid]
                    where = {"workers": others, "allow_other_workers": True} if task.avoid and others else {}
                    return client.submit(execute, snapshot, task, key=f"{assignment}/{task.student}/{task.attempt}-{token}",
                                         **where)

                pending = {submit(task): task for task, _ in tasks}
                bar = tqdm(total=len(tasks), desc=f"grading {assignment}", unit="submission", file=log.out,
                           dynamic_ncols=True)
                with bar:
                    while pending and not stop.requested:
                        try:
                            done, _ = wait(list(pending), timeout=0.5, return_when="FIRST_COMPLETED")
                        except TimeoutError:
                            continue
                        for future in done:
                            task = pending.pop(future)
                            executed = _result(future, task)
                            if executed.error and stop.requested:  # Ctrl-C reaches the grading processes too
                                rows.append(log.add(Row(task.student, "stopped", note=STOPPED), bar=bar))
                                continue
                            if executed.error and task.attempt == 1:
                                bar.write(f"{task.student}: {executed.error}; retrying once in a fresh process", file=log.out)
                                retry = Task(task.student, task.files, attempt=2, avoid=executed.worker)
                                pending[submit(retry)] = retry
                                continue
                            recording = time.monotonic()
                            row = (Row(task.student, "failed", note=executed.error) if executed.error
                                   else course.record(assignment, executed))
                            # Grading time, not time spent queueing: the worker's run plus recording it here.
                            row.seconds = executed.seconds + time.monotonic() - recording
                            row.attempts = task.attempt
                            row.note = "; ".join(n for n in (row.note, notes[task.student]) if n)
                            rows.append(log.add(row, executed.log, bar))
                            bar.update(1)
                for future, task in pending.items():
                    future.cancel()
                    rows.append(log.add(Row(task.student, "stopped", note=STOPPED)))
        finally:
            if cluster is not None:
                cluster.close()
    return rows


def _result(future, task: Task) -> Executed:
    """A task's Executed; a task that raised (its worker died, say) becomes an Executed with the reason."""
    try:
        return future.result()
    except Exception as error:  # KilledWorker, CommClosedError, a bug in the task: all recorded, never fatal
        worker = getattr(error, "last_worker", None)
        return Executed(task.student, {}, "", 0.0, getattr(worker, "address", "") or "",
                        f"its Dask worker failed ({type(error).__name__}: {str(error)[:300]})")


class RunLog:
    """The per-submission log: a line on the terminal, a row in autograde-logs/<assignment>.tsv, nbgrader's log."""

    def __init__(self, root: Path, assignment: str, out):
        self.folder = root / LOGS / assignment
        self.folder.mkdir(parents=True, exist_ok=True)
        self.table = root / LOGS / f"{assignment}.tsv"
        self.out, self.assignment = out, assignment
        self.started = time.monotonic()

    def add(self, row: Row, nbgrader_log: str = "", bar=None) -> Row:
        if bar is not None:
            bar.write(row.line(), file=self.out)
        else:
            print(row.line(), file=self.out)
        new = not self.table.exists()
        with open(self.table, "a", newline="") as table:
            writer = csv.writer(table, delimiter="\t")
            if new:
                writer.writerow(["time", "student", "status", "score", "max_score", "seconds", "note"])
            writer.writerow([datetime.now().isoformat(timespec="seconds"), row.student, row.status,
                             "" if row.score is None else row.score, "" if row.max_score is None else row.max_score,
                             f"{row.seconds:.1f}", row.note])
        if nbgrader_log:
            (self.folder / f"{row.student}.log").write_text(nbgrader_log)
        return row

    def summary(self, rows: list[Row]) -> None:
        counts = {status: sum(r.status == status for r in rows) for status in ("graded", "failed", "skipped", "stopped")}
        said = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
        print(f"{self.assignment}: {said or 'no submissions'} in {time.monotonic() - self.started:.0f} s. "
              f"Log: {self.table}", file=self.out)
        if counts["stopped"]:
            print("Run the same command again to grade the rest.", file=self.out)
