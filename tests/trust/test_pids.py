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
    stale = tmp_path / f"{pids.PREFIX}-999999999-12345-{pids.maker_tag().rsplit('-', 1)[1]}-0badcafe"
    stale.mkdir()  # left by a grading process of this PID namespace that has ended
    made = Path.mkdir

    def kernel_mkdir(self, *args, **kwargs):
        made(self, *args, **kwargs)
        if self.parent == tmp_path:
            (self / "pids.max").write_text("max\n")

    monkeypatch.setattr(Path, "mkdir", kernel_mkdir)
    cap = pids.ProcessCap(limit=17, candidates=[Hierarchy(2, tmp_path)])
    assert cap.group.parent == tmp_path and cap.group.name.startswith(f"{pids.PREFIX}-{pids.maker_tag()}-")
    assert (cap.group / "pids.max").read_text() == "17"
    assert cap.environment() == {}
    assert not stale.exists()
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


def ended_process_tag() -> str:
    """The maker tag of a process that has ended."""
    child = subprocess.Popen(["sleep", "60"])
    tag = pids.maker_tag(child.pid)
    child.kill()
    child.wait()
    return tag


def test_a_maker_tag_names_one_process_and_says_when_it_has_ended():
    own = pids.maker_tag()
    assert own.startswith(f"{os.getpid()}-") and not pids.maker_ended(own)
    assert pids.maker_ended(ended_process_tag())
    pid, start, namespace = own.split("-")
    assert pids.maker_ended(f"{pid}-{int(start) + 1}-{namespace}")  # the same ID, reused by a later process
    assert not pids.maker_ended(f"{pid}-{int(start) + 1}-{int(namespace) + 1}")  # another namespace's: not seen here
    assert not pids.maker_ended(f"{pid}-{start}")  # the old two-part tags, and what is not a tag: never removed
    assert not pids.maker_ended("no-tag") and not pids.maker_ended("sandbox") and not pids.maker_ended("1-2-x")


@pytest.mark.skipif(os.geteuid() != 0, reason="a new PID namespace needs root")
def test_a_grader_in_another_pid_namespace_leaves_this_ones_filter_folder(tmp_path, monkeypatch):
    """Graders in two containers sharing a temporary folder: to the other one, this process's ID is one that has
    ended (or another process's), and it removed this one's live filter folder (red team 6, F2)."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ours = sandbox._filter_folder()
    other = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                            "from autograder.trust import sandbox; print(sandbox._filter_folder())"],
                           env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert other.returncode == 0, other.stderr
    assert ours.is_dir() and Path(other.stdout.strip()).parent == tmp_path


def test_closing_a_cap_ends_what_is_left_of_its_sandbox_before_removing_the_group(tmp_path, monkeypatch):
    """A dead kernel's sandbox is still ending when nbclient tidies up; on a loaded machine it took over the second
    the old close() waited, and the group stayed."""
    straggler = subprocess.Popen(["sleep", "60"])
    (tmp_path / "cgroup.procs").write_text(f"{straggler.pid}\n")
    monkeypatch.setattr(pids, "remove_group", lambda group: straggler.poll() is not None)  # busy while it lives
    cap = pids.ProcessCap(candidates=[])
    cap.group = tmp_path
    cap.close()
    assert straggler.poll() == -9 and cap.group is None


def test_making_a_filter_folder_removes_those_of_ended_processes_only(tmp_path, monkeypatch):
    """A grading process killed (or ended by os._exit) never runs its atexit: the next one removes its folder."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"{sandbox.FILTER_PREFIX}{ended_process_tag()}-abc_12"
    alive = tmp_path / f"{sandbox.FILTER_PREFIX}{pids.maker_tag(os.getppid())}-def_34"
    untagged = tmp_path / f"{sandbox.FILTER_PREFIX}xyz"
    for folder in (dead, alive, untagged):
        folder.mkdir()
        (folder / "no-new-processes.bpf").write_bytes(b"filter")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / f"{sandbox.FILTER_PREFIX}{ended_process_tag()}-link_5").symlink_to(target)  # not followed
    made = sandbox._filter_folder()
    assert made.name.startswith(f"{sandbox.FILTER_PREFIX}{pids.maker_tag()}-") and made.stat().st_mode & 0o777 == 0o700
    assert not dead.exists() and alive.is_dir() and untagged.is_dir() and target.is_dir()
