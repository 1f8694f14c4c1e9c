"""CPU seconds used by a process and everything it starts, read from a Linux cgroup: v1's ``cpuacct`` controller or
v2's unified hierarchy (``cpu.stat``, which every v2 group has, with or without the cpu controller).

A cgroup counts every process started inside it, sandboxes and kernels in their own namespaces included, and
whether they exit or are killed; per-process rusage misses a sandbox that is killed rather than waited for.
"""
from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

PROC_CGROUP = Path("/proc/self/cgroup")
MOUNTS = Path("/proc/self/mounts")


@dataclass(frozen=True)
class Hierarchy:
    """A mounted cgroup hierarchy that counts CPU, and the group this process is in there.

    Attributes:
        version: 1 (the ``cpuacct`` controller's hierarchy) or 2 (the unified one).
        group: this process's group folder, e.g. ``/sys/fs/cgroup/user.slice/session-2.scope``.
    """
    version: int
    group: Path

    def usage(self, group: Path) -> float:
        """CPU seconds used so far by the processes of ``group``, a folder of this hierarchy. Raises OSError when
        the folder or its counter cannot be read, ValueError when the counter is not the kernel's format."""
        if self.version == 1:
            return int((group / "cpuacct.usage").read_text()) / 1e9  # nanoseconds
        for line in (group / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        raise ValueError(f"no usage_usec in {group / 'cpu.stat'}")

    def __str__(self) -> str:
        return "cgroup v1 cpuacct" if self.version == 1 else "cgroup v2"


def hierarchies(proc_cgroup: str, mounts: str, controller: str = "cpuacct") -> list[Hierarchy]:
    """The hierarchies that can count this process's CPU (or serve another v1 ``controller``: the sandboxes' process
    caps ask for ``pids``), v1's first (where both are mounted, as on systemd's hybrid layout, it is the one whose
    counter has always been there). A v2 hierarchy is listed whatever controllers it enables: whether a new group
    there has the controller's files shows only once it is made.

    Args:
        proc_cgroup: the text of /proc/self/cgroup, lines such as ``2:cpuacct:/a`` (v1) or ``0::/a`` (v2).
        mounts: the text of /proc/self/mounts, where each hierarchy is mounted.
        controller: the v1 controller whose hierarchy to find.
    """
    v1_root = v2_root = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        fstype, where, options = fields[2], fields[1], fields[3].split(",")
        if fstype == "cgroup" and controller in options and v1_root is None:
            v1_root = Path(where)
        elif fstype == "cgroup2" and v2_root is None:
            v2_root = Path(where)
    found = []
    for line in proc_cgroup.splitlines():
        number, controllers, path = line.split(":", 2)
        if v1_root is not None and controller in controllers.split(","):
            found.append(Hierarchy(1, v1_root / path.lstrip("/")))
        elif v2_root is not None and number == "0" and controllers == "":
            found.append(Hierarchy(2, v2_root / path.lstrip("/")))
    return sorted(found, key=lambda h: h.version)


def this_machine(controller: str = "cpuacct") -> list[Hierarchy]:
    """The hierarchies of this process on this machine (:func:`hierarchies`); none where /proc cannot be read (not
    Linux)."""
    try:
        return hierarchies(PROC_CGROUP.read_text(), MOUNTS.read_text(), controller)
    except OSError:
        return []


class CpuMeter:
    """CPU seconds of this process, and of everything it starts from now on, since the meter was made.

    The process moves into a new cgroup below the one it is in, so meters nest: an outer meter (the grading
    benchmark's) still counts what an inner one (one submission's) measures. Where no cgroup can be made (neither
    hierarchy mounted, no permission), ``read`` falls back to the whole machine's CPU from /proc/stat when
    ``machine_fallback`` is set, and otherwise returns None; ``scope`` says which, and why.

    Args:
        name: the new group's name, before a random suffix.
        machine_fallback: measure the whole machine where no group can be made.
        candidates: the hierarchies to try, in order (default: :func:`this_machine`).

    Attributes:
        scope: what the figures cover, in words, e.g. "this process and everything it starts (cgroup v2)" or
            "not measured (no cgroup to measure in: cgroup v2: [Errno 13] Permission denied: ...)".
    """

    def __init__(self, name: str, machine_fallback: bool = False, candidates: list[Hierarchy] | None = None):
        self._hierarchy: Hierarchy | None = None
        self._group: Path | None = None
        failures = []
        for hierarchy in this_machine() if candidates is None else candidates:
            try:
                self._group, self._hierarchy = _enter(hierarchy, name), hierarchy
                break
            except (OSError, ValueError) as error:
                failures.append(f"{hierarchy}: {error}")
        if self._group is not None:
            self.scope = f"this process and everything it starts ({self._hierarchy})"
        else:
            reason = "; ".join(failures) or "no cgroup hierarchy mounted"
            where = "the whole machine" if machine_fallback else "not measured"
            self.scope = f"{where} (no cgroup to measure in: {reason})"
        self._fallback = machine_fallback and self._group is None
        self._start = self._total() or 0.0

    def read(self) -> float | None:
        """CPU seconds since the meter was made, or None when nothing can be measured."""
        total = self._total()
        return None if total is None else total - self._start

    def close(self) -> None:
        """Move this process back to the group it came from and remove the meter's group. If something it
        started still runs there after a second, the group stays; the next meter of the same name removes it."""
        if self._group is None:
            return
        group, self._group = self._group, None
        (group.parent / "cgroup.procs").write_text(str(os.getpid()))
        for _ in range(50):  # a kernel or sandbox that was just shut down may take a moment to leave
            if remove_group(group):
                return
            time.sleep(0.02)

    def _total(self) -> float | None:
        if self._group is not None:
            return self._hierarchy.usage(self._group)
        if self._fallback:
            fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
            return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
        return None


def _enter(hierarchy: Hierarchy, name: str) -> Path:
    """Make a group ``name-<random>`` below this process's own and move this process into it; its folder. Raises
    OSError (or ValueError for a counter it cannot read) and leaves nothing behind when that fails."""
    for stale in hierarchy.group.glob(f"{name}-*"):  # left by a meter whose process ended before its last child
        remove_group(stale)
    group = hierarchy.group / f"{name}-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        hierarchy.usage(group)  # before moving in: a group whose counter cannot be read is no use
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except (OSError, ValueError):
        remove_group(group)
        raise
    return group


def remove_group(group: Path) -> bool:
    """Remove a cgroup if no process is left in it (the kernel refuses otherwise); whether it is gone."""
    try:
        group.rmdir()
        return True
    except OSError:
        return not group.exists()
