"""autograder.trust.pids: each sandbox's processes and threads are capped, in a pids cgroup of its own or by the
init's RLIMIT_NPROC. The placement logic runs against fake hierarchies (fast); the cap itself against this
machine's (a sandbox each: slow)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grade.cpu import Hierarchy, hierarchies
from autograder.trust import pids, sandbox
from conftest import requires_sandbox

HYBRID_MOUNTS = ("cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
                 "cgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n"
                 "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n")
HYBRID_CGROUP = "8:pids:/user.slice/u.slice\n3:cpu,cpuacct:/user.slice\n0::/user.slice/s.scope\n"
# Start as many threads as it can, up to 1000, each parked on an event; print how many started.
THREAD_BOMB = ("import threading\nthreading.stack_size(256 * 1024)\nstop, started = threading.Event(), []\n"
               "for _ in range(1000):\n    try:\n        t = threading.Thread(target=stop.wait)\n        t.start()\n"
               "    except RuntimeError:\n        break\n    started.append(t)\n"
               "print(len(started))\nstop.set()\n")


def test_the_pids_hierarchies_are_v1_pids_then_v2():
    assert hierarchies(HYBRID_CGROUP, HYBRID_MOUNTS, "pids") == [
        Hierarchy(1, Path("/sys/fs/cgroup/pids/user.slice/u.slice")),
        Hierarchy(2, Path("/sys/fs/cgroup/unified/user.slice/s.scope"))]
    assert hierarchies(HYBRID_CGROUP, HYBRID_MOUNTS)[0].group == Path("/sys/fs/cgroup/cpu,cpuacct/user.slice")


def test_a_v2_group_without_the_controller_falls_back_to_rlimit_and_says_why(tmp_path):
    """A fake v2 hierarchy whose new groups get no pids.max, as where the parent does not enable pids."""
    cap = pids.ProcessCap(candidates=[Hierarchy(2, tmp_path)])
    assert cap.group is None and "pids.max" in cap.why_not
    assert cap.environment() == {"SANDBOX_NPROC": str(pids.PIDS_MAX)}
    assert cap.command(["true"]) == ["true"]
    assert not list(tmp_path.iterdir())  # nothing left behind


def test_a_v2_group_is_made_below_our_own_capped_and_entered_before_the_program_starts(tmp_path, monkeypatch):
    """A fake v2 hierarchy that makes a group's files as the kernel would; the command's first process writes its
    PID into the group and then becomes the program, keeping that PID."""
    (tmp_path / f"{pids.PREFIX}-999999999-0badcafe").mkdir()  # left by a grading process that has ended
    made = Path.mkdir

    def kernel_mkdir(self, *args, **kwargs):
        made(self, *args, **kwargs)
        if self.parent == tmp_path:
            (self / "pids.max").write_text("max\n")

    monkeypatch.setattr(Path, "mkdir", kernel_mkdir)
    cap = pids.ProcessCap(limit=17, candidates=[Hierarchy(2, tmp_path)])
    assert cap.group.parent == tmp_path and cap.group.name.startswith(f"{pids.PREFIX}-{os.getpid()}-")
    assert (cap.group / "pids.max").read_text() == "17"
    assert cap.environment() == {}
    assert not (tmp_path / f"{pids.PREFIX}-999999999-0badcafe").exists()
    done = subprocess.run(cap.command([sys.executable, "-c", "import os; print(os.getpid())"]),
                          capture_output=True, text=True, check=True)
    assert (cap.group / "cgroup.procs").read_text().split() == done.stdout.split()


def test_a_machine_without_a_pids_hierarchy_falls_back():
    cap = pids.ProcessCap(candidates=[])
    assert cap.group is None and cap.why_not == "no pids cgroup hierarchy is mounted"


def this_machines_cap() -> pids.ProcessCap:
    cap = pids.ProcessCap()
    if cap.group is None:
        pytest.skip(f"no pids cgroup here: {cap.why_not}")
    return cap


@pytest.mark.slow  # a sandbox
@requires_sandbox
def test_a_thread_bomb_stops_at_the_sandboxs_cap_and_its_group_is_removed():
    cap = this_machines_cap()
    group = cap.group
    done = subprocess.run(sandbox.wrap([sys.executable, "-I", "-c", THREAD_BOMB], cap=cap), capture_output=True,
                          text=True, timeout=60)
    cap.close()
    assert done.returncode == 0, done.stderr
    assert 100 < int(done.stdout) < pids.PIDS_MAX  # threads start, up to the cap less the sandbox's own processes
    assert not group.exists()


@pytest.mark.slow  # a sandbox
@requires_sandbox
def test_without_a_group_the_init_sets_rlimit_nproc_in_the_sandboxs_own_user_namespace():
    limit = "import resource; print(resource.getrlimit(resource.RLIMIT_NPROC)[0])"
    done = subprocess.run(sandbox.wrap([sys.executable, "-I", "-c", limit], cap=pids.ProcessCap.rlimit_only()),
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == [str(pids.PIDS_MAX)], done.stderr
    if os.geteuid() != 0:  # root is exempt from RLIMIT_NPROC (the fallback's warning says so)
        bomb = subprocess.run(sandbox.wrap([sys.executable, "-I", "-c", THREAD_BOMB]), capture_output=True,
                              text=True, timeout=60)
        assert int(bomb.stdout) < pids.PIDS_MAX, bomb.stderr
