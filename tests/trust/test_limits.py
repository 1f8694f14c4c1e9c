"""Limits on learner code in the check workers: deadlines in CPU seconds and in seconds not runnable (not the wall
clock: a crowded CPU decides nothing), a submission budget that never resets, a wall-clock limit that only names an
overloaded machine, and failing closed when a worker cannot be had. For each limit, a case it must stop and one it
must not."""
import os
import signal
import subprocess
import sys
import threading
import time

import nbformat
import numpy as np
import pytest

from autograder.trust import cputime, remote, sandbox, verdicts
from autograder.contract import assignments
from conftest import COURSE_SECRET, crowds_cpu_0, hogs_on_cpu_0, solution_notebook

NB = "01_nudging"
BUSY = "import time\nstarted = time.process_time()\nwhile time.process_time() - started < {seconds}:\n    pass\n"
forks = pytest.mark.parametrize("forked", [False, True], ids=["own sandbox", "from a zygote"])


def sandbox_pids(worker: remote.Worker) -> list[int]:
    """Every process of the worker's sandbox, from its root down."""
    found, pending = [], [worker._root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(cputime._children(pid))
    return found


def test_the_cpu_of_a_process_tree_counts_its_children_alive_and_reaped():
    script = ("import os, time\n"
              "def busy():\n    t = time.process_time()\n    while time.process_time() - t < 0.5: pass\n"
              "if os.fork() == 0:\n    busy()\n    os._exit(0)\n"
              "os.wait()\nbusy()\nprint('asleep', flush=True)\ntime.sleep(30)\n")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "asleep\n"  # both busy halves done, however loaded the machine
        assert 0.9 <= cputime.tree_cpu_seconds(process.pid) < 2.0
    finally:
        process.kill()
        process.wait()
    assert cputime.tree_cpu_seconds(process.pid) == 0.0  # gone


@forks
def test_a_busy_loop_is_stopped_when_its_cpu_time_is_used_up(forked):
    with remote.Zygote() as zygote, remote.Worker(zygote=zygote if forked else None) as worker:
        with pytest.raises(remote.Stopped, match="did not finish within 1 s of CPU time"):
            worker.run("while True:\n    pass", "<cell>", timeout=1)
        assert 1 <= worker.cpu_seconds() < 1.6  # stopped promptly, in CPU time (the wall's depends on the load)


@forks
def test_a_worker_starved_of_the_cpu_is_not_stopped(forked):
    """SIGSTOPped for 2.5 s in the middle of a 0.4 s computation with a 1 s limit: wall time is no CPU time."""
    with remote.Zygote() as zygote, remote.Worker(zygote=zygote if forked else None) as worker:
        worker.run("import time", "<cell>")
        pids = sandbox_pids(worker)

        def starve():
            time.sleep(0.1)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            time.sleep(2.5)
            for pid in pids:
                os.kill(pid, signal.SIGCONT)

        starver = threading.Thread(target=starve)
        started = time.monotonic()
        starver.start()
        worker.run(BUSY.format(seconds=0.4), "<cell>", timeout=1)
        starver.join()
        assert time.monotonic() - started > 2.5 and worker.evaluate("1") == 1


@forks
def test_a_worker_past_its_cpu_rlimit_is_told_so_not_blamed_for_killing(forked):
    """The operating system's limit (2 s here, under every deadline and budget) ends the worker by SIGXCPU, which is
    reported as CPU time used up; with the soft limit equal to the hard one it was SIGKILL ("does your code kill
    processes?"). Code within the limit runs on."""
    with remote.Zygote() as zygote, remote.Worker(sandbox.Limits(cpu_seconds=2), zygote=zygote if forked else None) \
            as worker:
        worker.run(BUSY.format(seconds=0.3), "<cell>", timeout=30)
        with pytest.raises(remote.Stopped, match="used up the CPU time left for checking it"):
            worker.run("while True:\n    pass", "<cell>", timeout=30)


def test_code_that_sleeps_is_stopped_once_it_has_not_been_runnable_for_three_times_its_cpu_limit():
    with remote.Worker() as worker:
        worker.run("import time\ntime.sleep(1)", "<cell>", timeout=0.5)  # past 0.5 s of wall, but no CPU
        started = time.monotonic()
        with pytest.raises(remote.Stopped, match="spent 1.5 s neither computing nor waiting for a CPU"):
            worker.run("time.sleep(60)", "<cell>", timeout=0.5)
        assert time.monotonic() - started < 1.5 + 1.5


def test_many_short_requests_add_up_to_the_exercise_budget():
    with remote.Worker(budget_s=1.5) as worker:
        worker.run("import time\ndef busy():\n" + "\n".join("    " + line for line in
                                                           BUSY.format(seconds=0.05).splitlines()), "<cell>")
        busy = worker.evaluate("busy")
        for _ in range(20):  # 1 s in all: under the budget
            busy()
        with pytest.raises(remote.Stopped, match="the checks of this exercise used more than 1.5 s of CPU time"):
            for _ in range(40):
                busy()


def test_the_submission_budget_is_shared_by_its_workers_and_never_given_back():
    shared = remote.Budget(2.0, "the checks of this notebook")
    for _ in range(2):  # 0.5 s each: 1 s in all, within 2 s
        with remote.Worker(shared=shared) as worker:
            worker.run(BUSY.format(seconds=0.5), "<cell>")
    # Both counted, once each: counted twice it would be 2 s, used up. What a worker spends starting (its imports)
    # counts too, and that grows with the machine's load (0.43 s for two workers seen on CI), so no tighter bound.
    assert 1.0 <= shared.spent < 2.0 and not shared.exhausted()
    with remote.Worker(shared=shared) as worker:  # a fresh worker, but not a fresh budget
        with pytest.raises(remote.Stopped, match="the checks of this notebook used more than 2 s of CPU time"):
            worker.run(BUSY.format(seconds=3), "<cell>")
    assert shared.exhausted()


def test_a_budget_counts_seconds_not_runnable_and_its_wall_clock_limit_names_the_machine_not_the_code():
    budget = remote.Budget(1.0, "the checks of this notebook", wall_s=0.3)
    assert budget.exhausted(idling=2.9) is None
    assert "spent more than 3 s in all neither computing nor waiting" in budget.exhausted(idling=3.1)
    time.sleep(0.4)
    with pytest.raises(remote.Overloaded, match="through no fault of your code: the machine was too loaded"):
        budget.exhausted()


def worker_on_cpu_0(zygote: remote.Zygote | None = None) -> remote.Worker:
    """A worker whose sandbox runs on CPU 0 alone (it inherits this process's CPUs as it starts: a zygote's starts
    with its first worker); this process keeps its own."""
    everywhere = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    try:
        return remote.Worker(zygote=zygote)
    finally:
        os.sched_setaffinity(0, everywhere)


@pytest.mark.slow  # about 20 s of a crowded core
@crowds_cpu_0
def test_on_a_crowded_core_a_loop_is_told_as_a_loop_a_sleep_as_a_sleep_and_slow_correct_code_passes():
    """Eight hogs on the sandbox's core: 0.9 CPU s takes about 8 s of wall time, which a wall-clock limit of six
    times the 1 s CPU limit took for sleeping; time spent waiting for the CPU is runnable time, so it is not."""
    with hogs_on_cpu_0():
        with worker_on_cpu_0() as worker:
            started = time.monotonic()
            worker.run(BUSY.format(seconds=0.9), "<cell>", timeout=1)
            assert time.monotonic() - started > 3, "the core was not crowded: this proves nothing"
            started = time.monotonic()
            with pytest.raises(remote.Stopped, match="neither computing nor waiting for a CPU"):
                worker.run("import time\ntime.sleep(600)", "<cell>", timeout=1)
            assert time.monotonic() - started < 3 + 2
        with worker_on_cpu_0() as worker:
            with pytest.raises(remote.Stopped, match="did not finish within 1 s of CPU time"):
                worker.run("while True:\n    pass", "<cell>", timeout=1)


def course(name=NB):
    return nbformat.read(assignments()[name], as_version=4)


def with_answer(grade_id: str, source: str):
    nb = nbformat.read(solution_notebook(NB), as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id).source = source
    return nb


def test_a_runaway_cell_cannot_spend_more_than_the_submissions_budget():
    """With a per-exercise budget only, each exercise after a runaway cell would start afresh."""
    loop = "while True:\n    pass\n"
    found = verdicts.verdicts(with_answer("numerical_gradient", loop), course(), budget_s=3.0, secret=COURSE_SECRET)
    assert found["central_difference"].passed  # checked before the runaway
    for exercise in ("numerical_gradient", "log_square_trace", "tanh_network_gradients"):
        assert not found[exercise].passed
        assert "the checks of this notebook used more than 3 s of CPU time" in found[exercise].message


def test_a_worker_that_cannot_start_fails_every_exercise_with_the_reason(monkeypatch):
    def cannot(*args, **kwargs):
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(remote, "_sandboxed_worker", cannot)
    found = verdicts.verdicts(nbformat.read(solution_notebook(NB), as_version=4), course(), secret=COURSE_SECRET)
    assert len(found) == 4 and not any(v.passed for v in found.values())
    assert all("could not start the process that runs your code (Resource temporarily unavailable)" in v.message
               for v in found.values())


def test_a_worker_that_ends_before_its_first_answer_is_the_graders_failure(monkeypatch):
    monkeypatch.setattr(remote, "_sandboxed_worker", lambda *args, **kwargs: subprocess.Popen(["true"]))
    with pytest.raises(remote.Unavailable, match="could not start the process that runs your code"):
        remote.Worker()


def test_the_graders_own_failure_costs_the_exercise_not_the_whole_grade(monkeypatch):
    working = verdicts.check

    def broken(check_id, *args, **kwargs):
        if check_id == "log_square_trace":
            raise RuntimeError("an oracle broke")
        return working(check_id, *args, **kwargs)

    monkeypatch.setattr(verdicts, "check", broken)
    found = verdicts.verdicts(nbformat.read(solution_notebook(NB), as_version=4), course(), secret=COURSE_SECRET)
    assert not found["log_square_trace"].passed
    assert "could not check this exercise (RuntimeError: an oracle broke)" in found["log_square_trace"].message
    assert all(found[e].passed for e in ("central_difference", "numerical_gradient", "tanh_network_gradients"))


def test_a_cell_python_cannot_take_costs_its_own_exercise_with_the_reason():
    found = verdicts.verdicts(with_answer("numerical_gradient", "a = 1\n\tb = 2\n  c = 3\n"), course(), secret=COURSE_SECRET)
    assert not found["numerical_gradient"].passed
    assert "numerical_gradient raised" in found["numerical_gradient"].message, found["numerical_gradient"].message
    assert all(found[e].passed for e in ("central_difference", "log_square_trace", "tanh_network_gradients"))


# A sleeping answer that first starts a thread which lowers its own weight with the scheduler every way it can, then
# spins (red team 5, 02): runnable all the time while it hardly runs, it kept the sandbox from counting as asleep,
# and with the share of a CPU it got it would take far longer than the wall-clock limit to spend its CPU time.
SLEEPS_BESIDE_A_LOW_PRIORITY_SPINNER = """
import os, threading, time
def lowered(act):
    try:
        act()
    except OSError:
        pass
def autogroup():  # every process of its session (the sandbox is one) shares the weight this sets
    with open("/proc/self/autogroup", "w") as own:
        own.write("19")
def spin():
    lowered(autogroup)
    lowered(lambda: os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0)))
    lowered(lambda: os.nice(19))
    while True:
        pass
def answer():
    threading.Thread(target=spin, daemon=True).start()
    time.sleep(600)
"""


@pytest.mark.slow  # about 10 s of a crowded core
@crowds_cpu_0
@forks
def test_a_sleeping_answer_beside_a_spinner_at_idle_priority_is_stopped_within_its_cpu_time(forked):
    """On a crowded core, with every lowering of its priority refused, the spinner gets a fair share of the CPU and
    uses up the request's CPU time; allowed, it hardly ran, and the request was held until the wall-clock limit
    called the machine overloaded (no verdict). Four hogs: a fair share is a fifth of the core, far above the
    thirtieth that limit stands for."""
    with hogs_on_cpu_0(4), remote.Zygote() as zygote:
        with worker_on_cpu_0(zygote if forked else None) as worker:
            worker.run(SLEEPS_BESIDE_A_LOW_PRIORITY_SPINNER, "<cell>")
            with pytest.raises(remote.Stopped) as stopped:
                worker.evaluate("answer()", timeout=1)
    assert type(stopped.value) is remote.Stopped, stopped.value.reason
    assert "did not finish within 1 s of CPU time" in stopped.value.reason


@forks
def test_a_large_request_to_a_worker_starved_of_the_cpu_waits_for_it_instead_of_calling_it_dead(forked):
    """A frame larger than the socket holds takes as long to send as the worker takes to read it; on a loaded machine
    that was longer than one wait of the trusted side, which took the unfinished send for the worker's death and the
    zygote, asked how it died, killed it (notebook 5's training check: "killed by signal SIGKILL"). SIGSTOPped
    for 3 s while 8 MB are sent, it stands in for a starved worker."""
    with remote.Zygote() as zygote, remote.Worker(zygote=zygote if forked else None) as worker:
        worker.run("def size(a):\n    return a.size", "<cell>")
        size = worker.evaluate("size")
        pids = sandbox_pids(worker)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        resume = threading.Timer(3.0, lambda: [os.kill(pid, signal.SIGCONT) for pid in pids])
        resume.start()
        try:
            assert size(np.zeros(1_000_000)) == 1_000_000
        finally:
            resume.join()
