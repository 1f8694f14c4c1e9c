"""CPU seconds used by a process and everything it starts, read from a Linux cgroup (v1 ``cpuacct``).

A cgroup counts every process started inside it, sandboxes and kernels in their own namespaces included, and
whether they exit or are killed; per-process rusage misses a sandbox that is killed rather than waited for.
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class CpuMeter:
    """CPU seconds of this process, and of everything it starts from now on, since the meter was made.

    The process moves into a new cgroup below the one it is in, so meters nest: an outer meter (the grading
    benchmark's) still counts what an inner one (one submission's) measures. Where no cgroup can be made (no cgroup
    v1 cpuacct, no permission), ``read`` falls back to the whole machine's CPU from /proc/stat when
    ``machine_fallback`` is set, and otherwise returns None.

    Attributes:
        scope: what the figures cover, in words.
    """

    def __init__(self, name: str, machine_fallback: bool = False):
        self._group: Path | None = None
        self._start = 0.0
        try:
            parent = _current_group()
            for stale in parent.glob(f"{name}-*"):  # left by a meter whose process ended before its last child
                _remove(stale)
            group = parent / f"{name}-{uuid.uuid4().hex[:8]}"
            group.mkdir()
            try:
                (group / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                _remove(group)
                raise
            self._group, self.scope = group, "this process and everything it starts"
        except OSError:
            self.scope = ("the whole machine (no cgroup to measure in)" if machine_fallback else
                          "not measured (no cgroup to measure in)")
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
            if _remove(group):
                return
            time.sleep(0.02)

    def _total(self) -> float | None:
        if self._group is not None:
            return int((self._group / "cpuacct.usage").read_text()) / 1e9
        if self._fallback:
            fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
            return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
        return None


def _remove(group: Path) -> bool:
    """Remove a cgroup if no process is left in it (the kernel refuses otherwise); whether it is gone."""
    try:
        group.rmdir()
        return True
    except OSError:
        return not group.exists()


def _current_group() -> Path:
    """This process's cpuacct cgroup folder (from /proc/self/cgroup, e.g. "2:cpuacct:/bench-grading-1a2b")."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return CPUACCT / path.lstrip("/")
    raise OSError("no cpuacct cgroup")
