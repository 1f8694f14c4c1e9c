"""The course's grading secret: what keeps a trusted grade's randomized cases out of a learner's reach.

A trusted grade draws its cases from a seed hashed from the submission's program (autograder.trust.verdicts
.program_seed). The course code is public, so a seed from the program alone could be computed by a learner, who
could then edit a comment until the drawn cases miss a bug. The seed is therefore keyed with this secret: 32 random
bytes, made once per course and kept in the course folder, beside the gradebook, as the file :data:`FILE` (64 hex
digits, mode 0600). Every grading path of one course reads the same file, so the same submission draws the same
cases under ``nbgrader autograde``, ``python -m autograder grade`` and the class run, which sends a copy to its
scratch courses with the gradebook's snapshot. No sandbox sees it: it is never in a release, a submission or a folder
mounted for learner code. Losing it changes nothing recorded, but a regrade then draws other cases.

Standard library only: the grading processes, the class run and the command line all read it.
"""
from __future__ import annotations

import os
import secrets
import stat
import tempfile
from pathlib import Path

FILE = "grading-secret"
SIZE = 32  # bytes


class GradingSecretError(Exception):
    """The course's secret cannot be read or made; the message names the file and what to do."""


def course_secret(course: Path) -> bytes:
    """The grading secret of the course folder ``course``, made there first if it has none.

    Two processes that both find none agree on one: the first file written wins and the other reads it.

    Returns:
        SIZE bytes.

    Raises:
        GradingSecretError: the file cannot be read, is open to other users, does not hold a secret, or cannot be
            made in ``course``.
    """
    path = Path(course) / FILE
    if not os.path.lexists(path):
        _make(path, secrets.token_bytes(SIZE), exclusive=False)
    return read(path)


def place(course: Path, secret: bytes) -> Path:
    """Write a copy of ``secret`` into a scratch course folder (which must not have one), readable by its owner
    alone; the path written.

    Raises:
        GradingSecretError: ``secret`` is not SIZE bytes, or the file cannot be written.
    """
    if len(secret) != SIZE:
        raise GradingSecretError(f"a grading secret has {SIZE} bytes, not {len(secret)}")
    path = Path(course) / FILE
    _make(path, secret, exclusive=True)
    return path


def read(path: Path) -> bytes:
    """The secret in ``path``.

    Raises:
        GradingSecretError: as course_secret.
    """
    try:
        mode = os.stat(path).st_mode
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as error:
        raise GradingSecretError(f"the grading secret {path} cannot be read ({_why(error)}): restore it from the "
                                 "backup kept with the gradebook, or fix its permissions") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise GradingSecretError(f"the grading secret {path} is open to other users (mode {stat.filemode(mode)}): "
                                 f"anyone who reads it can predict the graded cases; run `chmod 600 {path}`")
    try:
        secret = bytes.fromhex(text.strip())
    except ValueError:
        secret = b""
    if len(secret) != SIZE:
        raise GradingSecretError(f"{path} does not hold a grading secret ({2 * SIZE} hex digits): restore it from the "
                                 "backup kept with the gradebook, or remove it to make a new one (regrades then draw "
                                 "other cases)")
    return secret


def _make(path: Path, secret: bytes, exclusive: bool) -> None:
    """Write ``secret`` to ``path`` whole or not at all: a temporary file (mode 0600), then a hard link to it, which
    fails if the path exists. Unless ``exclusive``, a file there already is kept."""
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{FILE}-")
    except OSError as error:
        raise GradingSecretError(f"cannot make the grading secret {path} ({_why(error)})") from None
    try:
        with os.fdopen(handle, "w", encoding="ascii") as out:
            out.write(secret.hex() + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.link(temporary, path)
    except FileExistsError:
        if exclusive:
            raise GradingSecretError(f"{path} exists already; a scratch course gets the course's secret once") \
                from None
    except OSError as error:
        raise GradingSecretError(f"cannot make the grading secret {path} ({_why(error)})") from None
    finally:
        os.unlink(temporary)


def _why(error: Exception) -> str:
    return getattr(error, "strerror", None) or type(error).__name__
