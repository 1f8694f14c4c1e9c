"""A class run's task on a Dask worker: one submission graded in a fresh process, its outputs handed back as text.

The process is forked from this worker's fork server (which imports PRELOAD once) and runs
autograder.grade.grading_process; this side only writes the scratch course, waits within the time limit and reads
what the process left.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import tempfile
import time
import traceback
from pathlib import Path

from autograder.grade.grading_process import _grade_here
from autograder.grade.submission import Executed, Snapshot, Task, nbgrader_reason
from autograder.trust import secret
from autograder.trust.cputime import tree_cpu_seconds

# Imported once by each worker's fork server, so a submission's process starts with them loaded (about 5 s of CPU
# per submission saved: nbgrader, nbconvert, the checks and torch). Two more are what the checks' first calls of
# torch would import, about 0.5 s each that every grading process would otherwise pay again: torch.autograd.grad
# imports symbolic_shapes (and with it sympy), an optimizer's step imports torch._dynamo.
# The Dask event topic under which a task's key is logged once its grading process has started: the run's deadline
# for the task counts from then, not from the fork server's start or the task's wait in the worker's queue.
STARTED = "class-run-grading-started"
PRELOAD = ["torch", "torch.fx.experimental.symbolic_shapes", "torch._dynamo", "nbgrader.apps", "autograder.course.preprocessors"]


def execute_submission(snapshot: Snapshot, task: Task) -> Executed:
    """Run one submission's notebooks and trusted verdicts in a fresh, limited process; hand back the outputs.

    Runs on a Dask worker. Never raises for a learner's doing: a submission that breaks its grading process comes
    back with ``error`` set.
    """
    worker = _worker_address()
    # In the temporary folder, whose path must stay short: the kernel's sockets live below it (at most 107 bytes).
    with tempfile.TemporaryDirectory(prefix=f"grade-{snapshot.assignment}-") as scratch:
        root = Path(scratch)
        _write_tree(root / "source" / snapshot.assignment, snapshot.source)
        _write_tree(root / "submitted" / task.student / snapshot.assignment, task.files)
        (root / "gradebook.db").write_bytes(snapshot.gradebook)
        secret.place(root, snapshot.secret)  # the course's, so its cases are the ones serial grading draws
        error, seconds = _run_grading_process(root, snapshot, task.student)
        found = _report(root / "report.json")
        graded = root / "autograded" / task.student / snapshot.assignment
        notebooks = {p.stem: p.read_text(encoding="utf-8") for p in sorted(graded.glob("*.ipynb"))}
        if error is None and not found.get("success"):
            error = nbgrader_reason(found.get("log", "")) or "nbgrader did not say why it failed"
        if error is None and not notebooks:
            error = "nbgrader finished without writing an autograded notebook"
        return Executed(task.student, notebooks if error is None else {}, found.get("log", ""), seconds, worker,
                        error, found.get("cpu_seconds"))


def guarded(execute, snapshot: Snapshot, task: Task) -> Executed:
    """``execute(snapshot, task)``, with whatever it raises turned into an Executed that says so.

    An exception travels back from a Dask worker only if it pickles; one that does not (raised, say, while a scratch
    folder is removed) would leave the task's future unfinished for good. A string always arrives.
    """
    try:
        return execute(snapshot, task)
    except BaseException as error:  # whatever ends a task must reach the run as a failed row
        return Executed(task.student, {}, traceback.format_exc(), 0.0, _worker_address(),
                        f"grading raised {_describe(error)}")


def _describe(error: BaseException) -> str:
    try:
        said = str(error)
    except Exception:  # an exception whose message itself raises
        said = "(its message cannot be shown)"
    return f"{type(error).__name__}: {said}"[:300]


def _run_grading_process(root: Path, snapshot: Snapshot, student: str) -> tuple[str | None, float]:
    """Run ``_grade_here`` in a process forked from this worker's fork server.

    Returns the reason it failed (None when it did not) and the seconds it ran, counted from its start: on a worker's
    first task, starting the fork server (importing PRELOAD, several seconds) is the worker's start-up, not grading.
    """
    if multiprocessing.current_process().daemon:
        return ("this Dask worker is a daemon process and cannot start grading processes: start workers with "
                "DASK_DISTRIBUTED__WORKER__DAEMON=False (see the README)"), 0.0
    process = _fork_server().Process(target=_grade_here, args=(str(root), snapshot.assignment, student,
                                                                 snapshot.config), daemon=False)
    try:
        process.start()  # returns once the fork server (started now if it is not running) has forked the process
    except (OSError, EOFError):  # the fork server ended before it could say it had
        return FORK_SERVER_ENDED, 0.0
    started = time.monotonic()
    announce_start()
    over = _watch(process, snapshot, started)
    seconds = time.monotonic() - started
    if over is not None:
        _kill_group(process.pid)  # it leads its own process group: what it started without a sandbox goes too
        process.join()
        return over, seconds
    if process.exitcode == FORK_SERVER_LOST:
        return FORK_SERVER_ENDED, seconds
    if process.exitcode < 0:
        name = signal.Signals(-process.exitcode).name
        hint = (" (it ran out of memory, CPU time or file size)" if name in ("SIGKILL", "SIGXCPU", "SIGXFSZ", "SIGSEGV")
                else "")
        return f"the grading process was killed by {name}{hint}", seconds
    return None, seconds


CPU_POLL_S = 1.0  # how often the worker reads the grading process tree's CPU time


def _watch(process, snapshot: Snapshot, started: float) -> str | None:
    """Wait for the grading process to end; None when it did, else why it must be stopped: its tree used up the
    submission's CPU budget (``snapshot.timeout_s``), or the wall-clock backstop passed first (the machine's fault).

    The tree's CPU (cputime.tree_cpu_seconds) may read low by a process that ended unreaped, never high: the
    highest reading so far counts."""
    cpu = 0.0
    while True:
        process.join(CPU_POLL_S)
        if process.exitcode is not None:
            return None
        cpu = max(cpu, tree_cpu_seconds(process.pid))
        if cpu > snapshot.timeout_s:
            return (f"grading used more than its {snapshot.timeout_s:g} CPU seconds (nbgrader, the notebook's kernel "
                    "and its checks together) and was stopped")
        if time.monotonic() - started > snapshot.backstop_s:
            return (f"the machine was too loaded to grade it: no result within {snapshot.backstop_s:g} s, after "
                    f"{cpu:.0f} of its {snapshot.timeout_s:g} CPU seconds; grade it again (not the submission's fault)")


# multiprocessing's exit code for a process whose fork server ended before reporting how the process ended. The
# grading process itself always leaves with 0 (os._exit, after its report) or by a signal. Its parent-death signal
# kills it with the fork server, so its report is never written.
FORK_SERVER_LOST = 255
FORK_SERVER_ENDED = ("this Dask worker's fork server (the process that forks each grading process) ended while the "
                     "submission was graded: killed, or out of memory; the worker starts a new one for its next task")


def _kill_group(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except ProcessLookupError:
            pass


def _report(path: Path) -> dict:
    """What the grading process wrote, or {} when it wrote nothing readable (it was killed while writing)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _fork_server():
    """This process's multiprocessing context whose fork server imports PRELOAD (when it starts, on first use)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def _write_tree(folder: Path, files: dict[str, bytes]) -> None:
    for relative, content in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def announce_start() -> None:
    """Log the running task's key under STARTED on the scheduler, for the run's deadline (class_run.Dispatch.watch).
    Nothing outside a Dask worker (tests)."""
    try:
        from distributed import get_worker
        worker = get_worker()
    except ValueError:  # called outside a worker
        return
    worker.log_event(STARTED, worker.get_current_task())


def _worker_address() -> str:
    try:
        from distributed import get_worker
        return get_worker().address
    except ValueError:  # called outside a worker (tests)
        return "local"


