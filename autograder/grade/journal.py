"""What keeps a class run's records whole: one run per course at a time, and a journal of the records being written.

nbgrader records a submission in many steps (gradebook rows in several transactions, then the autograded folder), so
a process killed in between leaves a half record that looks graded: a gradebook row without scores, an autograded
notebook that is empty or unexecuted. The journal brackets each record with a marker file, written and synced before
the first step and removed once the record is complete and on disk. A marker that is still there when the next run
starts names a record that was cut short; that run removes what it finds of it, so the submission is graded again.

Markers are trusted only while one run holds the course: two runs at once would each take the other's markers for
half records, and grade everything twice. :class:`CourseLock` makes the second run stop with a clear message.
"""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path


class CourseBusyError(Exception):
    """Another class run holds the course; the message says which process and since when."""


class CourseLock:
    """An exclusive lock on a course folder (``fcntl.flock`` on ``path``), held for the whole run.

    The kernel drops it when the holding process ends, however it ends (SIGKILL included), so a lock never outlives
    its run. The file holds the holder's pid and start time, for the message a second run prints.
    """

    def __init__(self, path: Path):
        self.path, self._fd = path, None

    def __enter__(self) -> "CourseLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "a process that did not say"
            os.close(fd)
            raise CourseBusyError(f"another class run is grading this course ({holder}); wait for it to end, or stop "
                                  "it, then run this command again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, started {datetime.now():%Y-%m-%d %H:%M:%S}".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        os.close(self._fd)  # closing releases the lock; the file stays, harmless, for the next run to take


class Journal:
    """Marker files ``<folder>/<assignment>/<student>``, one per record being written."""

    def __init__(self, folder: Path):
        self.folder = folder

    def unfinished(self) -> list[tuple[str, str]]:
        """(assignment, student) of every record an earlier run began and did not finish, sorted."""
        if not self.folder.is_dir():
            return []
        return sorted((marker.parent.name, marker.name) for marker in self.folder.glob("*/*") if marker.is_file())

    @contextmanager
    def recording(self, assignment: str, student: str, written: Path):
        """Bracket one record: the marker is durable before the block runs, and goes once the block has returned
        and everything under ``written`` (the record's files) is synced. An exception leaves the marker."""
        marker = self.folder / assignment / student
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        _sync(marker)
        _sync(marker.parent)
        yield
        sync_tree(written)
        self.done(assignment, student)

    def done(self, assignment: str, student: str) -> None:
        """Forget a record's marker: it is complete, or what there was of it has been removed."""
        marker = self.folder / assignment / student
        marker.unlink(missing_ok=True)
        _sync(marker.parent)


def sync_tree(folder: Path) -> None:
    """fsync every file and folder under ``folder`` (nothing when it does not exist): a record is on disk, not only
    in the page cache, before its marker goes."""
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            _sync(path)
    for path in [*sorted(p for p in folder.rglob("*") if p.is_dir()), folder, folder.parent]:
        _sync(path)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
