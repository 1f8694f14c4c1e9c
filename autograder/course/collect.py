"""``nbgrader collect``, reading each submission in the exchange as data.

The exchange is world-writable and a learner owns their submission's folder in it, while collect runs with the
instructor's rights. nbgrader's own copy (shutil.copytree) follows links: a submission holding a link to the course's
source notebook would be collected as that notebook, solutions and all, and a named pipe fails the copy, which stops
the collect of every student after it. And nbgrader takes the student's name and the time from the folder's name,
which whoever made the folder chose: anyone with an account could hand in as a classmate (nbgrader's check_owner
only warns), dated in 2099 so that nothing the classmate hands in later displaces it, and a folder whose name holds
no time stopped the collect of everyone. ``configure`` (autograder.course) makes :class:`CollectAsData` nbgrader's
collect, for ``nbgrader collect`` and Formgrader's Collect button alike; and :class:`ReleaseWithStickyInbound` its
release, so that no learner can rename a classmate's submission folder in inbound or swap it for their own.
"""
from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from nbgrader.utils import parse_utc

from autograder.grade.submission import TIMESTAMP, UnsafeSubmissionError, read_tree, shown, student_name_refusal

# How far ahead of this machine's clock a submission's time may be (another machine's clock, on a shared exchange).
CLOCK_SKEW = timedelta(minutes=10)


class CollectAsData(ExchangeCollect):
    """nbgrader's collect, except that each submission is read by read_tree (no link followed, no special file
    opened, sizes capped) and nbgrader copies what was read, not the exchange's folder; and that a submission is
    refused, before nbgrader picks each student's latest, when its folder is not the student's own (its_refusal).

    A refused submission is not collected, and an earlier copy of it stays in submitted/ (it is refused before
    ``--update`` would remove that copy); the log names the learner and the reason. The others are collected, then
    the command fails, so that the refusals are not missed.
    """

    def init_src(self):
        self.refused = []
        self.owner_rule = self.check_owner  # copy_files turns nbgrader's own check off, not this course's
        for folder in (self.root, os.path.join(self.root, self.coursedir.course_id),
                       os.path.join(self.root, self.coursedir.course_id, "inbound")):
            refused = _exchange_refusal(folder)
            if refused:
                self.fail(f"not collecting from {folder}: {refused}")
        super().init_src()  # nbgrader picks each student's latest among the records _path_to_record makes
        self.src_records = [record for record in self.src_records if self._kept(record)]

    def _path_to_record(self, path):
        """nbgrader's record of one inbound folder; a refused one is keyed apart from every student's, so that nbgrader
        never picks it over the student's own, and is dropped (logged) after nbgrader's choice."""
        try:
            record = super()._path_to_record(path)
            refused = None
        except Exception as bad:  # ParserError, OverflowError, and dateutil's warnings turned errors ("..": a tz key)
            record = {"filename": os.path.basename(path), "timestamp": datetime.min}
            refused = f"its folder's name holds no time nbgrader can read ({type(bad).__name__}: {bad})"
        record["student"] = _student(path)
        try:
            refused = refused or self.its_refusal(path, record["student"], record["timestamp"])
        except Exception as bad:  # one folder, whatever is wrong with it, never stops the collect of the others
            refused = f"it cannot be checked ({type(bad).__name__}: {bad})"
        if refused:
            record.update(username=("refused", record["filename"]), refused=refused)
        return record

    def its_refusal(self, path: str, student: str, timestamp: datetime) -> str | None:
        """Why the inbound folder ``path``, named as ``student``'s submission at ``timestamp`` (UTC), is not theirs to
        collect, or None.

        The folder's owner must be the student's account or the instructor's (whoever runs collect): nobody else can
        make a folder theirs. nbgrader's ``c.ExchangeCollect.check_owner = False`` turns that rule off, for an
        exchange where one account holds every learner's files (where anyone can then hand in under any name). A time
        later than this machine's clock (past CLOCK_SKEW) and a name nbgrader or the class run would refuse are
        refused too.
        """
        named = student_name_refusal(student)
        if named:
            return f"the student name {named}"
        try:
            owner = os.lstat(path).st_uid
        except OSError as gone:
            return f"its folder cannot be read ({gone.strerror})"
        if self.owner_rule and owner not in (_uid(student), os.geteuid()):
            return (f"its folder is owned by {_account(owner)}, not by {student}: another account handed it in under "
                    "their name")
        if timestamp - datetime.now(timezone.utc).replace(tzinfo=None) > CLOCK_SKEW:  # both UTC, as parse_utc gives
            return f"it is dated {timestamp:%Y-%m-%d %H:%M:%S} UTC, later than this machine's clock"
        return None

    def do_copy(self, src, dest, log=None):
        files = self._read(src)  # again: what is copied is what is read now, whatever the learner changed since
        if files is None:
            return
        with tempfile.TemporaryDirectory(prefix="collect-") as copy:
            for relative, content in files.items():
                (Path(copy) / relative).parent.mkdir(parents=True, exist_ok=True)
                (Path(copy) / relative).write_bytes(content)
            try:  # nbgrader's copy: its include, size and group-sharing rules still apply
                super().do_copy(copy, dest, log)
            except (RuntimeError, OSError) as failed:  # "Directory size is too big" (its own cap, under read_tree's)
                shutil.rmtree(dest, ignore_errors=True)
                with contextlib.suppress(OSError):  # the student's folder nbgrader made for it, when it is empty
                    os.rmdir(os.path.dirname(dest))
                self._refuse(src, f"nbgrader could not copy it ({failed})")

    def copy_files(self):
        # nbgrader's loop stats each folder again for its owner warning, uncaught: a learner's own folder renamed
        # away after it was read stopped the collect of everyone after it. The rules above have checked the owner.
        self.check_owner = False
        try:
            super().copy_files()
        finally:
            self.check_owner = self.owner_rule
        if self.refused:
            self.fail(f"not collected, each for the reason logged above: {', '.join(sorted(self.refused))}")

    def _kept(self, record) -> bool:
        src = str(Path(self.inbound_path) / record["filename"])
        if "refused" in record:
            self._refuse(src, record["refused"])
            return False
        return self._read(src) is not None

    def _read(self, src: str) -> dict[str, bytes] | None:
        """The submission's files, or None (logged, and its learner listed in ``refused``) when it is refused."""
        try:
            owners = {_uid(_student(src)), os.geteuid()} if self.owner_rule else None
            files = read_tree(Path(src), self.coursedir.ignore, owners)  # the owner of the very folder it reads
            refused = self.times_refusal(src, files)
        except UnsafeSubmissionError as unsafe:
            refused = str(unsafe)
        except OSError as gone:  # the learner removed or renamed their own folder since it was listed
            refused = f"the submission folder cannot be read ({gone.strerror})"
        if refused:
            self._refuse(src, refused)
            return None
        return files

    def times_refusal(self, src: str, files: dict[str, bytes]) -> str | None:
        """Why the times of the inbound folder ``src``, read as ``files``, are not to be trusted, or None.

        nbgrader's Submit writes the time of the folder's name into its timestamp.txt, which nbgrader's autograde
        takes for lateness and ``--update`` reads back (a timestamp.txt with no time in it stopped the next collect of
        everyone): another time there is refused. And no learner can set a file's change time (st_ctime) back, so a
        folder whose files changed more than CLOCK_SKEW after its time was handed in later than it says, or altered
        since; one the instructor made is theirs, and ``check_owner = False`` trusts the exchange's times too.
        """
        claimed = super()._path_to_record(src)["timestamp"]  # its_refusal has parsed it already
        written = files.get(TIMESTAMP)
        if written is not None:
            try:
                said = parse_utc(written.decode().strip())
            except Exception as bad:  # as _path_to_record: whatever dateutil raises
                return f"its {TIMESTAMP} holds no time nbgrader can read ({type(bad).__name__})"
            if said != claimed:
                return f"its {TIMESTAMP} says {said:%Y-%m-%d %H:%M:%S} UTC, its folder's name {claimed:%Y-%m-%d %H:%M:%S}"
        if not self.owner_rule or os.lstat(src).st_uid == os.geteuid():
            return None
        changed = _last_change(src)
        if changed - claimed > CLOCK_SKEW:
            return (f"it is dated {claimed:%Y-%m-%d %H:%M:%S} UTC, but its files were last changed at "
                    f"{changed:%Y-%m-%d %H:%M:%S} UTC: it was handed in or altered after the time it claims")
        return None

    def _refuse(self, src: str, reason: str) -> None:
        student = shown(_student(src))
        self.log.error("Not collecting %s's submission %s: %s", student, shown(src), shown(reason))
        self.refused.append(student)


class ReleaseWithStickyInbound(ExchangeReleaseAssignment):
    """nbgrader's release, which makes the course's inbound folder writable by everyone (0o2733), plus the sticky bit:
    anyone can still hand in, but only a folder's owner (and the instructor) can rename or remove it there."""

    def init_dest(self):
        super().init_dest()
        os.chmod(self.inbound_path, stat.S_IMODE(os.lstat(self.inbound_path).st_mode) | stat.S_ISVTX)


def _exchange_refusal(folder: str) -> str | None:
    """Why the exchange's root, the course's folder in it, or its inbound folder is not the instructor's, or None.

    Every learner can write into the root and into inbound: a folder there owned by anyone else, or a link, is one
    that a learner put in the course's place, to read classmates' submissions as they arrive and hide them.
    """
    try:
        info = os.lstat(folder)
    except OSError as error:
        return f"it cannot be read ({error.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder (a link, or a file), which only a learner could have put there: remove it"
    if info.st_uid not in (os.geteuid(), 0):
        return (f"it is owned by {_account(info.st_uid)}, not by you or root: a learner may have put it in the "
                "course's place; move it away and release the assignment again")
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        return (f"anyone can rename or remove what is in it: `chmod +t {folder}` (the course's release and "
                "configure_exchange set it)")
    return None


def _last_change(folder: str) -> datetime:
    """The latest change time (UTC) of ``folder`` and everything under it, following no link."""
    try:
        times = [os.lstat(folder).st_ctime]
        for parent, folders, names in os.walk(folder, onerror=_raise):
            times += [os.lstat(os.path.join(parent, name)).st_ctime for name in folders + names]
    except OSError as error:
        raise UnsafeSubmissionError(f"the submission folder cannot be read ({error.strerror})") from None
    return datetime.fromtimestamp(max(times), timezone.utc).replace(tzinfo=None)


def _raise(error: OSError):
    raise error


def _student(path: str) -> str:
    """The student an inbound folder's name claims, as nbgrader reads it: all before its last three '+'."""
    return os.path.basename(path).rsplit("+", 3)[0]


def _uid(account: str) -> int | None:
    try:
        return pwd.getpwnam(account).pw_uid
    except KeyError:
        return None


def _account(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
