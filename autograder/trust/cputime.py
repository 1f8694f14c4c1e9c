"""CPU seconds used by a sandbox's processes, read from /proc by the trusted side (Linux only).

A sandbox is a tree of processes under the one the trusted side started (bubblewrap, then the sandbox's own init,
then the worker or kernel and whatever learner code starts; an orphan is adopted by the sandbox's init, inside the
tree). Its CPU is the user and system time of every process alive in the tree, plus the time of the children each of
them has reaped (a dead process's time moves into its parent's counters when it is waited for). The outside sees
the sandbox's processes under their global PIDs whatever PID namespace they live in, so no PID needs mapping.
"""
from __future__ import annotations

import os

TICK_S = 1 / os.sysconf("SC_CLK_TCK")  # the unit of /proc/<pid>/stat's times


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of process ``root`` and its descendants, counting the children they reaped; 0.0 once it is gone.

    A process that ends while the tree is read may be missed until its parent has reaped it (then its time is in
    the parent's counters): a reading can be low by one process's time, never high. Never raises.
    """
    total, pending, seen = 0.0, [root], set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _own_and_reaped(pid)
        pending.extend(_children(pid))
    return total


def _own_and_reaped(pid: int) -> float:
    """utime + stime + cutime + cstime of one process, in seconds (0.0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(ticks) for ticks in fields[11:15]) * TICK_S  # fields 14-17 of proc(5), after pid and comm


def _children(pid: int) -> list[int]:
    """The PIDs of every thread's children of one process (empty when it is gone)."""
    found = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children", "rb") as children:
                found.extend(int(child) for child in children.read().split())
        except OSError:
            continue
    return found
