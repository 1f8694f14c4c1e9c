"""Kill a class run with SIGKILL at every chosen point of its recording window, then run it again; report both.

Used by test_class_grading.py (run as ``python kill_recording.py COURSE EXECUTED OUT MOST``). A *point* is one
step that changes the course on disk, counted from the first record of the run on: a file or folder opened for
writing, created, renamed or removed (Python's audit events) or an SQL statement that writes the gradebook, or a
commit (SQLAlchemy's engine events). The run is killed just before point K (after it, for an SQL statement).

A clean run first counts the points; then, for at most MOST of them K spread over the window, a child process
(forked, so nbgrader is imported once) grades a fresh copy of COURSE and is killed at point K, and a second child
grades that copy again, as an instructor would rerun the command. Each child uses an in-process Dask cluster, and
hands back the pickled execution in EXECUTED instead of grading (what matters here is recording). Writes
OUT/report.json: per run, whether it was killed, what the rerun printed, the gradebook's cells, the autograded
notebooks and any journal marker or scratch folder left.
"""
import json
import os
import pickle
import shutil
import signal
import sys
import time
from pathlib import Path

import sqlalchemy.event
from sqlalchemy.engine import Engine

from autograder.grade import class_run
from autograder.tools.bench_grading import gradebook_cells
from autograder.trust import sandbox

NB = "01_nudging"
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
CHANGES = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "shutil.rmtree", "os.truncate", "os.replace"}


class Replay:
    """The task: hand back one stored execution for every student."""

    def __init__(self, executed):
        self.executed = executed

    def __call__(self, snapshot, task):
        return class_run.Executed(task.student, self.executed.notebooks, "log", 0.1, "replay")


class Points:
    """Counts the run's points once armed (its first record began), killing the process at point ``kill_at``."""

    def __init__(self, kill_at: int | None):
        self.kill_at, self.armed, self.count = kill_at, False, 0

    def step(self) -> None:
        if not self.armed:
            return
        self.count += 1
        if self.count == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def audit(self, event: str, args) -> None:
        if event == "open":
            mode, flags = args[1], args[2]
            if (mode and set(mode) & set("wax+")) or (not mode and flags & WRITES):
                self.step()
        elif event in CHANGES:
            self.step()

    def sql(self, conn, cursor, statement, *rest) -> None:
        if not statement.lstrip().upper().startswith(("SELECT", "PRAGMA")):
            self.step()

    def install(self) -> None:
        sys.addaudithook(self.audit)
        sqlalchemy.event.listen(Engine, "after_cursor_execute", self.sql)
        sqlalchemy.event.listen(Engine, "commit", lambda conn: self.step())
        record = class_run._record

        def armed(*args, **kwargs):
            self.armed = True
            return record(*args, **kwargs)

        class_run._record = armed


def grade(course: Path, executed, kill_at: int | None, said: Path) -> int:
    """In a child process: grade ``course``, killed at point ``kill_at`` (None: never); the points counted."""
    import dask
    from distributed import LocalCluster

    points = Points(kill_at)
    points.install()
    # The cluster is this script's, not the run's: its folders are kept out of the temporary folder the test checks.
    with dask.config.set({"temporary-directory": str(said.parent / "dask")}), \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            open(said, "w") as out:
        class_run.grade_class(course, NB, scheduler=cluster.scheduler_address, execute=Replay(executed), out=out)
    return points.count


def in_child(work) -> int:
    """Run ``work()`` in a forked child; its result (a small int), or -9 when it was killed."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.write(write, str(work()).encode())
        os._exit(0)
    os.close(write)
    said = os.read(read, 100)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else int(said)


def state(course: Path) -> dict:
    notebooks = {str(p.relative_to(course)): p.read_text() for p in sorted((course / "autograded").rglob("*.ipynb"))}
    cells = {json.dumps(key): [str(v) if v is not None else None for v in value]
             for key, value in gradebook_cells(course, NB).items()}
    return {"cells": cells, "notebooks": notebooks}


def spread(total: int, most: int) -> list[int]:
    """At most ``most`` points of 1..total, evenly spaced, the first and the last included."""
    if total <= most:
        return list(range(1, total + 1))
    return sorted({1 + round(i * (total - 1) / (most - 1)) for i in range(most)})


def main(course: Path, executed_path: Path, out: Path, most: int) -> None:
    started = time.monotonic()
    # Made here, before the children fork, as the command makes it at its sandbox check: the children end by
    # os._exit (no atexit), so a folder of their own would outlive every one that is not killed.
    sandbox.no_new_processes()
    executed = pickle.loads(executed_path.read_bytes())
    report = {}
    for kill_at in [None, *spread(run(course, executed, out, None, report), most)]:
        if kill_at is not None:
            run(course, executed, out, kill_at, report)
    print(f"{len(report)} runs in {time.monotonic() - started:.0f} s", file=sys.stderr)
    (out / "report.json").write_text(json.dumps(report))


def run(course: Path, executed, out: Path, kill_at: int | None, report: dict) -> int:
    """Grade a copy of ``course`` (killed at ``kill_at``, then again); what it left goes into ``report``."""
    copy = out / f"run-{kill_at}"
    shutil.copytree(course, copy)
    first = in_child(lambda: grade(copy, executed, kill_at, out / f"first-{kill_at}.txt"))
    entry = {"first": first}
    if kill_at is not None:
        in_child(lambda: grade(copy, executed, None, out / f"rerun-{kill_at}.txt"))
        entry["rerun said"] = (out / f"rerun-{kill_at}.txt").read_text()
    logs = copy / class_run.LOGS
    left = [*logs.glob(f"{class_run.JOURNAL}/*/*"), *logs.glob(f"{class_run.SCRATCH}/*")]
    report[str(kill_at)] = {**entry, **state(copy), "left": sorted(str(p.relative_to(copy)) for p in left)}
    return first


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
