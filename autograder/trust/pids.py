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

import functools
import os
import time
import uuid
from pathlib import Path

from autograder.grade.cpu import Hierarchy, this_machine

PIDS_MAX = 256  # tasks of one sandbox: a kernel holds about 20 threads, a worker 2; far below the host's 32,768
PREFIX = "sandbox"
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
        """Remove the group once the sandbox has ended (its killed processes may take a moment to leave). One still
        busy after a second stays, and a later cap of a grading process removes it once its maker has ended."""
        group, self.group = self.group, None
        if group is None:
            return
        for _ in range(50):
            if _remove(group):
                return
            time.sleep(0.02)


def _make(hierarchy: Hierarchy, limit: int) -> Path:
    """A new group below ``hierarchy``'s own, capped at ``limit`` tasks. Raises OSError, leaving nothing behind, when
    the group cannot be made or has no ``pids.max`` (v2 without the controller enabled for it)."""
    _sweep(hierarchy.group)
    group = hierarchy.group / f"{PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        if not (group / "pids.max").exists():
            raise OSError(f"no pids.max in a new group (the pids controller is not enabled for {hierarchy.group})")
        (group / "pids.max").write_text(str(limit))
    except OSError:
        _remove(group)
        raise
    return group


def _sweep(parent: Path) -> None:
    """Remove the groups left by grading processes that have ended (a group still holding a process stays)."""
    for stale in parent.glob(f"{PREFIX}-*-*"):
        maker = stale.name.split("-")[1]
        if maker.isdigit() and not Path("/proc", maker).exists():
            _remove(stale)


def _remove(group: Path) -> bool:
    """Remove a cgroup if no process is left in it (the kernel refuses otherwise); whether it is gone."""
    try:
        group.rmdir()
        return True
    except OSError:
        return not group.exists()


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
