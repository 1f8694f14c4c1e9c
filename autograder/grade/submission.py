"""What travels between a class run's processes: plain data that pickles without importing nbgrader or torch.

A :class:`Snapshot` and a :class:`Task` go from the command's process (autograder.grade.class_run) to a Dask worker
(autograder.grade.on_dask_worker), an :class:`Executed` comes back, and the command turns it into a :class:`Row`.
"""
from __future__ import annotations

from dataclasses import dataclass

TIMEOUT_S = 1800.0   # one submission, wall clock: a notebook's cells have 120 s each, its checks 240 s each


@dataclass(frozen=True)
class Snapshot:
    """What every task of one assignment needs; sent to each worker once."""
    assignment: str
    gradebook: bytes                     # an SQLite copy of the course's gradebook
    source: dict[str, bytes]             # the assignment's source folder, by relative path
    # The course's nbgrader config, "execute" stage: a pickled traitlets Config, loaded only by the grading process.
    # Its values name nbgrader's and our preprocessor classes, so a Dask worker that unpickled it would import
    # nbgrader, the checks and torch (about 5 s of CPU per worker) for nothing.
    config: bytes
    timeout_s: float = TIMEOUT_S


@dataclass(frozen=True)
class Task:
    student: str
    files: dict[str, bytes]              # the submission folder, by relative path
    note: str = ""                       # what preflight noticed, for the log line
    assignment: str = ""
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
    cpu_seconds: float | None = None     # the grading process and everything it started (kernel, check workers)


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
    assignment: str = ""                 # set by RunLog.add
    cpu_seconds: float | None = None     # the submission's grading processes, on its worker (None: not measured)

    def line(self) -> str:
        points = f"{self.score:g}/{self.max_score:g}" if self.score is not None else "-"
        timing = f"{self.seconds:6.1f} s" if self.attempts else " " * 8
        if self.cpu_seconds is not None:
            timing += f" {self.cpu_seconds:6.1f} CPU s"
        return f"{self.assignment:<22} {self.student:<20} {self.status:<8} {points:>9} {timing}  {self.note}".rstrip()


def nbgrader_reason(log: str) -> str:
    """The line of nbgrader's log that says why grading failed: the last exception, else the last error."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    raised = [line for line in lines if line.split(":")[0].endswith(("Error", "Exception"))]
    errors = [line for line in lines if "[ERROR]" in line or "| ERROR]" in line]
    return (raised or errors or [""])[-1][:500]

