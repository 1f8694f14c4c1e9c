"""What travels between a class run's processes: plain data that pickles without importing nbgrader or torch.

A :class:`Snapshot` and a :class:`Task` go from the command's process (autograder.grade.class_run) to a Dask worker
(autograder.grade.on_dask_worker), an :class:`Executed` comes back, and the command turns it into a :class:`Row`.

A submission's files become that data here, and only here: ``read_tree`` reads a submission folder as data (no link
followed, no special file opened, sizes capped), for the class run, ``python -m autograder grade`` (``read_file``)
and nbgrader's collect and autograde as the course configures them (autograder.course).
"""
from __future__ import annotations

import errno
import os
import stat
import unicodedata
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

# One submission's grading budget, in CPU seconds of its grading process and everything it starts (nbgrader, the
# sandboxed kernel, the check workers): far above what the sandboxes let learner code use (a notebook's kernel 300 CPU
# s, its checks 300 in all), so only a fault of the grader's reaches it. The machine's load decides nothing: the wall
# clock only backs it up (backstop_s), and that says the machine or the grader failed.
TIMEOUT_S = 1800.0
BACKSTOP_FACTOR = 4
# The wall seconds a submission may spend neither computing nor waiting for a CPU (it sleeps or blocks) before its
# sandboxes stop it, which no load brings on: the kernel's NOTEBOOK_IDLE_S (autograder.course.limits, 300) and the
# checks' IDLE_FACTOR × SUBMISSION_BUDGET_S (autograder.trust.remote, 3 × 300). Repeated here, a leaf module, and
# held equal to those by tests/grade/test_submission.py.
SANDBOXES_IDLE_S = 1200.0


def backstop_s(timeout_s: float) -> float:
    """The wall-clock seconds a submission whose CPU budget is ``timeout_s`` may take before the grader gives up on
    it as the machine's fault (too loaded, or a worker frozen): a grading process then had under a quarter of a core
    for its computing, after all the time its sandboxes let learner code sleep, so a sleeper is failed by its
    sandboxes, as its own fault, first."""
    return BACKSTOP_FACTOR * timeout_s + SANDBOXES_IDLE_S


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
    secret: bytes                        # the course's grading secret (autograder.trust.secret), for the verdicts
    timeout_s: float = TIMEOUT_S         # CPU seconds of one submission's grading process tree
    backstop_s: float = backstop_s(TIMEOUT_S)  # wall seconds, past which the machine is taken to have failed


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
    causes: str = ""                     # each failed exercise's cause, "exercise=cause id" joined by spaces

    def line(self) -> str:
        points = f"{self.score:g}/{self.max_score:g}" if self.score is not None else "-"
        timing = f"{self.seconds:6.1f} s" if self.attempts else " " * 8
        if self.cpu_seconds is not None:
            timing += f" {self.cpu_seconds:6.1f} CPU s"
        student, note = shown(self.student), shown(self.note)  # a learner's file name can be in the note
        return f"{self.assignment:<22} {student:<20} {self.status:<8} {points:>9} {timing}  {note}".rstrip()


def nbgrader_reason(log: str) -> str:
    """The line of nbgrader's log that says why grading failed: the last exception, else the last error."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    raised = [line for line in lines if line.split(":")[0].endswith(("Error", "Exception"))]
    errors = [line for line in lines if "[ERROR]" in line or "| ERROR]" in line]
    return (raised or errors or [""])[-1][:500]



# ------------------------------------------------------------------------------------------ a student's name

# nbgrader turns a student id into a glob pattern (its converters' _format_source), and with force=True removes the
# autograded notebook of every student the pattern matches: a name with these is refused, never graded.
GLOB_CHARACTERS = "*?["
# The longest student name whose files (<student>.log, the class run's journal marker) still fit a file name (255 bytes).
MAX_STUDENT_BYTES = 200


def student_name_refusal(name: str) -> str | None:
    """Why ``name`` cannot be a student's id in a class run or a collect, or None. The reason begins with the name
    (quoted, control characters escaped) and says what nbgrader or a terminal would make of it.

    A glob character makes nbgrader match other students; leading or trailing whitespace is stripped by nbgrader,
    which then looks for another student; a name longer than MAX_STUDENT_BYTES fits no file named after it; a
    control character (Unicode category C: escapes, carriage returns, newlines, format characters) would move the
    cursor or forge lines where the name is printed, on the instructor's terminal.
    """
    used = sorted({c for c in name if c in GLOB_CHARACTERS})
    if used:
        return f"{name!r} holds {' '.join(used)}, which nbgrader reads as a pattern matching other students"
    if name != name.strip():
        return f"{name!r} begins or ends with whitespace, which nbgrader drops"
    control = sorted({f"U+{ord(c):04X}" for c in name if unicodedata.category(c).startswith("C")})
    if control:  # bytes that are not UTF-8 too: Python names them by lone surrogates (category Cs)
        return f"{name!r} holds control characters ({' '.join(control)}), which a terminal acts on where it is printed"
    if len(name.encode()) > MAX_STUDENT_BYTES:
        return f"is {len(name.encode())} bytes long, too long for the files named after it (at most {MAX_STUDENT_BYTES})"
    return None


def shown(text: str) -> str:
    """``text`` (a name, or a sentence quoting one) as printed on a terminal or in a log: itself, or its quoted repr
    when it holds what a terminal acts on (escapes, carriage returns, newlines)."""
    return text if text.isprintable() else repr(text)


# ------------------------------------------------------------------------------------------ a submission, read as data

# A submission is data: its folder is read by the instructor's processes (collect, the class run, nbgrader's
# autograde), which can read what the learner cannot. So nothing in it is followed, and only regular files are read.
MAX_FILE_BYTES = 10 << 20          # one file: the executed solution notebooks hold 0.1-0.3 MiB; room for many figures
MAX_SUBMISSION_BYTES = 100 << 20   # the whole folder: what a class run's task carries to its worker, in memory
MAX_ENTRIES = 1000                 # files and folders, ignored ones included: the walk itself must stay short
MAX_DEPTH = 16                     # nested folders: each level holds an open folder while the walk is below it
# A file's path in the submission: its copy under submitted/<student>/<assignment>/ must fit PATH_MAX (4096 bytes),
# which the walk, opening each folder relative to the one above it, never meets itself.
MAX_PATH_BYTES = 1024
TIMESTAMP = "timestamp.txt"        # nbgrader's: when the submission was handed in (Submit writes it) or collected
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: were a named pipe swapped in after its check, opening it must not wait for a writer.
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeSubmissionError(Exception):
    """A submission holds what is not plain data, or too much of it; the message is one line naming what and why,
    quoted (``shown``) when a name in it holds what a terminal acts on."""

    def __init__(self, message: str):
        super().__init__(shown(message))


def read_tree(folder: Path, ignored: list[str] = (), owners: set[int | None] | None = None) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, read without following any link, leaving out nbgrader's
    ignore patterns (checkpoints, caches: neither read nor looked into).

    Each folder is opened relative to the one above it and nothing is opened through a link (O_NOFOLLOW), so a
    learner who swaps a file or folder for a link while it is read gets a refusal, not the link's target. A file's
    size is checked before it is read, and at most MAX_FILE_BYTES of it are: the walk holds no more than
    MAX_SUBMISSION_BYTES and one file in memory.

    Raises:
        UnsafeSubmissionError: ``folder`` or something in it is a symbolic link (wherever it points, even inside the
            folder), a named pipe, a socket or a device, cannot be read, or the folder holds more than
            MAX_FILE_BYTES in one file, MAX_SUBMISSION_BYTES in all, MAX_ENTRIES entries, MAX_DEPTH levels or a
            path longer than MAX_PATH_BYTES; or, when ``owners`` (uids) is given, the folder it opened is owned by
            another account.
    """
    walk = _Walk(list(ignored))
    shown = "the submission folder"
    try:
        mode = os.lstat(folder).st_mode
        if stat.S_ISLNK(mode):
            raise _link(shown)
        top = os.open(folder, _FOLDER)
    except OSError as error:
        raise _unreadable(shown, error) from None
    try:
        owner = os.fstat(top).st_uid
        if owners is not None and owner not in owners:  # of what was opened: it may have been swapped since a check
            raise UnsafeSubmissionError(f"the submission folder is owned by uid {owner}, not by its student")
        _read_folder(walk, top, "")
    finally:
        os.close(top)
    return walk.found


def read_file(path: Path) -> bytes:
    """One file's bytes, by read_tree's rules: not through a link, a regular file of at most MAX_FILE_BYTES.

    Raises:
        UnsafeSubmissionError: naming ``path``; also when there is no such file.
    """
    return _read_file(os.fspath(path), None, str(path))


@dataclass
class _Walk:
    """What read_tree has found so far."""
    ignored: list[str]
    found: dict[str, bytes] = field(default_factory=dict)
    entries: int = 0
    size: int = 0


def _read_folder(walk: _Walk, fd: int, prefix: str) -> None:
    """Read the folder open as ``fd``, whose relative path is ``prefix``, into ``walk``."""
    if prefix.count("/") > MAX_DEPTH:
        raise UnsafeSubmissionError(f"{prefix.rstrip('/')} is nested more than {MAX_DEPTH} folders deep")
    for name in sorted(os.listdir(fd)):
        walk.entries += 1
        if walk.entries > MAX_ENTRIES:
            raise UnsafeSubmissionError(f"the submission folder holds more than {MAX_ENTRIES} files and folders: "
                                        "hand in the notebook and the files it needs")
        if any(fnmatch(name, pattern) for pattern in walk.ignored):
            continue
        shown = prefix + name
        if any(0xD800 <= ord(c) <= 0xDFFF for c in name):  # bytes that are not UTF-8, as Python names them
            raise UnsafeSubmissionError(f"{shown} is named with bytes that are not UTF-8 text: rename it")
        if len(shown.encode()) > MAX_PATH_BYTES:
            raise UnsafeSubmissionError(f"{shown[:100]}... is a path of more than {MAX_PATH_BYTES} bytes, too long "
                                        "to be copied: shorten its folders' and files' names")
        try:
            is_folder = stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
            sub = os.open(name, _FOLDER, dir_fd=fd) if is_folder else None
        except OSError as error:
            raise _unreadable(shown, error) from None
        if sub is not None:
            try:
                _read_folder(walk, sub, shown + "/")
            finally:
                os.close(sub)
            continue
        walk.found[shown] = _read_file(name, fd, shown)
        walk.size += len(walk.found[shown])
        if walk.size > MAX_SUBMISSION_BYTES:
            raise UnsafeSubmissionError(f"the submission folder holds more than {_mib(MAX_SUBMISSION_BYTES)}, the "
                                        "limit: hand in the notebook and the files it needs")


def _read_file(name: str, dir_fd: int | None, shown: str) -> bytes:
    """The regular file ``name`` (relative to the folder open as ``dir_fd``, if any); ``shown`` names it."""
    try:
        _refuse_kind(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode, shown)
        fd = os.open(name, _FILE, dir_fd=dir_fd)
    except OSError as error:
        raise _unreadable(shown, error) from None
    with open(fd, "rb") as file:
        info = os.fstat(fd)
        _refuse_kind(info.st_mode, shown)  # what was opened, in case it was swapped after the check above
        if info.st_size > MAX_FILE_BYTES:
            raise _too_large(shown)
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:  # it grew while being read
        raise _too_large(shown)
    return data


def _refuse_kind(mode: int, shown: str) -> None:
    """Refuse anything but a regular file."""
    if stat.S_ISLNK(mode):
        raise _link(shown)
    if not stat.S_ISREG(mode):
        kind = ("a folder" if stat.S_ISDIR(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else
                "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else
                "a special file")
        raise UnsafeSubmissionError(f"{shown} is {kind}, not a file")


def _link(shown: str) -> UnsafeSubmissionError:
    return UnsafeSubmissionError(f"{shown} is a symbolic link: put a copy of what it points to in its place")


def _unreadable(shown: str, error: OSError) -> UnsafeSubmissionError:
    if error.errno == errno.ELOOP:  # O_NOFOLLOW met a link that was not there when it was checked
        return _link(shown)
    return UnsafeSubmissionError(f"{shown} cannot be read ({error.strerror})")


def _too_large(shown: str) -> UnsafeSubmissionError:
    return UnsafeSubmissionError(f"{shown} holds more than {_mib(MAX_FILE_BYTES)}, the limit for one file: clear "
                                 "the notebook's outputs, or leave the file out")


def _mib(size: int) -> str:
    return f"{size / (1 << 20):g} MiB"
