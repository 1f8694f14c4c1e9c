"""How many processes and threads one sandbox may hold at once: a pids cgroup of its own, or RLIMIT_NPROC.

Threads are allowed in a sandbox (numpy's BLAS starts them), so without a cap an answer could start threads until
the host has no process IDs left (``/proc/sys/kernel/pid_max``, 32,768 here) and nothing on the machine can start.
A :class:`ProcessCap` makes a group ``sandbox-<pid>-<random>`` in the ``pids`` controller's hierarchy, below the
grading process's own group (cgroup v1's ``pids`` hierarchy, or the unified v2 one where ``pids`` is enabled for
new groups), writes its ``pids.max``, and puts the sandbox's first process into it before that process becomes
prlimit and bubblewrap (:meth:`ProcessCap.command`), so that every task of the sandbox starts inside the group
and counts. The kernel then refuses the fork or thread past the cap (EAGAIN; Python says "can't start new thread").

Where no group can be made (no hierarchy mounted, no permission, v2 without the controller), the cap falls back on
RLIMIT_NPROC, set by the sandbox's init inside its own user namespace (``SANDBOX_NPROC``, sandbox_init.py), where
the count is the sandbox's own (Linux 5.14 and later count it per user namespace). That does not bind a sandbox
whose user is the host's root (the kernel exempts root from RLIMIT_NPROC): :func:`fallback_warning` says so.
"""
from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import uuid
from pathlib import Path

from autograder.grade.cpu import Hierarchy, remove_group, this_machine

PIDS_MAX = 256  # tasks of one sandbox: a kernel holds about 20 threads, a worker 2; far below the host's 32,768
PREFIX = "sandbox"
CLOSE_S = 10  # how long close() keeps killing what is left in a group: a loaded machine reaps a sandbox slowly
# Run before prlimit and bubblewrap, as the sandbox's first process: enter the group ($0), then become the rest of
# the command line ("$@") in the same process, so nothing of the sandbox ever runs outside the group.
ENTER = 'echo $$ > "$0" && exec "$@"'


class ProcessCap:
    """A pids cgroup for one sandbox, made now and removed by :meth:`close`, or the reason none could be made.

    Args:
        limit: how many tasks (processes and threads) the sandbox may hold at once.
        candidates: the hierarchies to try, in order (default: this machine's ``pids`` hierarchies).

    Attributes:
        group: the group's folder, or None when none could be made.
        why_not: why no group could be made (a sentence), None when there is one.
    """

    def __init__(self, limit: int = PIDS_MAX, candidates: list[Hierarchy] | None = None):
        self.limit = limit
        self.group: Path | None = None
        failures = []
        for hierarchy in this_machine("pids") if candidates is None else candidates:
            try:
                self.group = _make(hierarchy, limit)
                break
            except OSError as error:
                failures.append(f"cgroup v{hierarchy.version} at {hierarchy.group}: {error}")
        self.why_not = None if self.group else "; ".join(failures) or "no pids cgroup hierarchy is mounted"

    @classmethod
    def rlimit_only(cls) -> "ProcessCap":
        """A cap with no group, made without looking for one: the sandbox's init caps it with RLIMIT_NPROC."""
        return cls(candidates=[])

    def command(self, argv: list[str]) -> list[str]:
        """``argv``, started inside the group (unchanged where there is none: the init's RLIMIT_NPROC caps it)."""
        if self.group is None:
            return argv
        return ["/bin/sh", "-c", ENTER, str(self.group / "cgroup.procs"), *argv]

    def environment(self) -> dict[str, str]:
        """What the sandbox's init needs to cap its processes itself: nothing where the group does it."""
        return {} if self.group else {"SANDBOX_NPROC": str(self.limit)}

    def close(self) -> None:
        """End whatever of the sandbox is still in the group and remove the group. A sandbox whose first process
        has died takes a moment to end the rest (its PID namespace's processes are killed one by one; on a loaded
        machine that took over a second), so close() kills what it finds, for up to CLOSE_S seconds; a group still
        busy then stays, and a later cap removes it once its maker has ended."""
        group, self.group = self.group, None
        if group is None:
            return
        deadline = time.monotonic() + CLOSE_S
        while not remove_group(group) and time.monotonic() < deadline:
            _kill_members(group)
            time.sleep(0.02)


def maker_tag(pid: int | None = None) -> str:
    """``<pid>-<start>-<namespace>``: a process's ID, its start time (clock ticks after boot, field 22 of
    /proc/PID/stat, proc(5)) and the inode of the PID namespace those are counted in, which together name one process
    for good: an ID alone is reused once its process has ended, and graders in other PID namespaces (containers that
    share a temporary folder) count from 1 too. "" when the process does not exist."""
    pid = os.getpid() if pid is None else pid
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{pid}-{stat.rsplit(')', 1)[1].split()[19]}-{namespace}"  # after the name in parentheses (it may hold spaces)


def maker_ended(tag: str) -> bool:
    """Whether the process a :func:`maker_tag` named has ended. False for a tag that is not one and for a process of
    another PID namespace, which this one cannot see: kept, not removed."""
    parts = tag.split("-")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return False
    own = maker_tag()
    return own.rsplit("-", 1)[1] == parts[2] and maker_tag(int(parts[0])) != tag


def _kill_members(group: Path) -> None:
    """SIGKILL every process still in ``group`` (the sandbox's; one that ended meanwhile is passed over)."""
    with contextlib.suppress(OSError):
        for line in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                os.kill(int(line), signal.SIGKILL)


def _make(hierarchy: Hierarchy, limit: int) -> Path:
    """A new group below ``hierarchy``'s own, capped at ``limit`` tasks. Raises OSError, leaving nothing behind, when
    the group cannot be made or has no ``pids.max`` (v2 without the controller enabled for it)."""
    _sweep(hierarchy.group)
    group = hierarchy.group / f"{PREFIX}-{maker_tag()}-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        if not (group / "pids.max").exists():
            raise OSError(f"no pids.max in a new group (the pids controller is not enabled for {hierarchy.group})")
        (group / "pids.max").write_text(str(limit))
    except OSError:
        remove_group(group)
        raise
    return group


def _sweep(parent: Path) -> None:
    """Remove the groups left by grading processes that have ended (a group still holding a process stays)."""
    for stale in parent.glob(f"{PREFIX}-*-*-*-*"):
        if maker_ended(stale.name.split("-", 1)[1].rsplit("-", 1)[0]):
            remove_group(stale)


@functools.lru_cache(maxsize=1)
def fallback_warning() -> str | None:
    """A warning, once per process, where sandboxes cannot get a pids cgroup here; None where they can."""
    probe = ProcessCap()
    probe.close()
    if probe.why_not is None:
        return None
    root = (" Grading runs as root, whom the kernel exempts from that limit, so a thread bomb can use up the "
            "machine's process IDs." if os.geteuid() == 0 else "")
    return (f"WARNING: no pids cgroup for the sandboxes ({probe.why_not}), so each sandbox's processes and threads "
            f"are capped at {PIDS_MAX} by RLIMIT_NPROC in its own user namespace instead.{root}")
