"""CPU seconds used by a sandbox's processes, and how long they were runnable, read from /proc by the trusted side
(Linux only).

A sandbox is a tree of processes under the one the trusted side started (bubblewrap, then the sandbox's own init,
then the worker or kernel and whatever learner code starts; an orphan is adopted by the sandbox's init, inside the
tree). Its CPU is the user and system time of every process alive in the tree, plus the time of the children each of
them has reaped (a dead process's time moves into its parent's counters when it is waited for). The outside sees
the sandbox's processes under their global PIDs whatever PID namespace they live in, so no PID needs mapping.

A loaded machine makes a sandbox wait for a CPU, not sleep: :class:`Runnable` tells the two apart, from each task's
``schedstat`` (the scheduler's nanoseconds on a CPU and waiting in a run queue, Documentation/scheduler/sched-stats
in the kernel's tree), so that a limit on the time a sandbox was *not* runnable catches code that sleeps or blocks
whatever the load, and never blames code that was starved.
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


def descendants(root: int) -> list[int]:
    """The PIDs of every process below ``root`` alive now, children before their own (empty once it is gone)."""
    found, pending = [], _children(root)
    while pending:
        pid = pending.pop(0)
        if pid not in found:
            found.append(pid)
            pending.extend(_children(pid))
    return found


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


class Runnable:
    """CPU seconds of a sandbox, and how long its tasks have been runnable (running, or waiting for a CPU), since
    this was made: the trusted side takes the time a sandbox was *not* runnable as wall time minus that.

    It sums, over every task (thread) of the tree seen so far, its running and run-queue time as last sampled: a
    task that ends keeps what it had at its last sample (so sample often: every wait of the trusted side does), and
    CPU time of tasks never seen (reaped between samples) counts as runnable too. Several tasks runnable at once
    count each: a sandbox with one sleeping and one busy thread is not idle.

    Args:
        root: the PID of the process at the root of the sandbox's tree.
    """

    def __init__(self, root: int):
        self.root = root
        self._last: dict[int, tuple[int, int]] = {}  # tid -> (running ns, waiting ns) at its last sample
        self._reused_ns = 0  # of tasks whose IDs came back with smaller counters: new tasks under an old ID
        self._start = (0.0, 0.0)
        self._start = self.sample()

    def sample(self) -> tuple[float, float]:
        """(CPU seconds, runnable seconds) since this was made. Never raises; a sandbox that is gone reads no
        more CPU (its readings may fall: keep the highest)."""
        cpu = tree_cpu_seconds(self.root)
        for tid, counters in _tree_schedstats(self.root).items():
            last = self._last.get(tid)
            if last is not None and counters[0] < last[0]:
                self._reused_ns += sum(last)
            self._last[tid] = counters
        running = sum(run for run, _ in self._last.values()) / 1e9
        runnable = (self._reused_ns + sum(map(sum, self._last.values()))) / 1e9 + max(0.0, cpu - running)
        return cpu - self._start[0], runnable - self._start[1]


def _tree_schedstats(root: int) -> dict[int, tuple[int, int]]:
    """{tid: (ns on a CPU, ns waiting in a run queue)} of every task of ``root``'s tree alive now."""
    found, pending, seen = {}, [root], set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                with open(f"/proc/{pid}/task/{thread}/schedstat", "rb") as stat:
                    running, waiting = stat.read().split()[:2]
                found[int(thread)] = (int(running), int(waiting))
            except (OSError, ValueError):
                continue
        pending.extend(_children(pid))
    return found
