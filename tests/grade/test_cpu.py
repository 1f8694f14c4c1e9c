"""autograder.grade.cpu.CpuMeter: CPU of a process and of everything it starts, from a cgroup v1 or v2 (fast)."""
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grade.cpu import CpuMeter, Hierarchy, hierarchies, this_machine

BURN = "import time\nstart = time.process_time()\nwhile time.process_time() - start < {seconds}: pass\n"
# /proc/self/mounts and /proc/self/cgroup on systemd's hybrid layout (v1 controllers, v2 mounted beside them) and on
# a pure v2 machine (most current distributions).
HYBRID_MOUNTS = ("cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n"
                 "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid 0 0\n")
HYBRID_CGROUP = "4:memory:/x\n3:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice/s.scope\n0::/user.slice/s.scope\n"
V2_MOUNTS = "proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n"


def test_hierarchies_finds_v1_cpuacct_first_then_v2():
    assert hierarchies(HYBRID_CGROUP, HYBRID_MOUNTS) == [
        Hierarchy(1, Path("/sys/fs/cgroup/cpu,cpuacct/user.slice")),
        Hierarchy(2, Path("/sys/fs/cgroup/unified/user.slice/s.scope"))]


def test_hierarchies_on_a_pure_v2_machine():
    assert hierarchies("0::/user.slice/user-1000.slice/session-2.scope\n", V2_MOUNTS) == [
        Hierarchy(2, Path("/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope"))]


def test_hierarchies_needs_the_hierarchy_mounted():
    """A container often shows its groups in /proc/self/cgroup without mounting /sys/fs/cgroup."""
    assert hierarchies(HYBRID_CGROUP, "proc /proc proc rw 0 0\n") == []


def test_v2_usage_is_read_from_cpu_stat_in_microseconds(tmp_path):
    (tmp_path / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
    assert Hierarchy(2, tmp_path).usage(tmp_path) == 1.5
    (tmp_path / "cpu.stat").write_text("user_usec 1000000\n")
    with pytest.raises(ValueError, match="usage_usec"):
        Hierarchy(2, tmp_path).usage(tmp_path)


def test_v1_usage_is_read_from_cpuacct_usage_in_nanoseconds(tmp_path):
    (tmp_path / "cpuacct.usage").write_text("2500000000\n")
    assert Hierarchy(1, tmp_path).usage(tmp_path) == 2.5


def test_a_group_whose_counter_cannot_be_read_falls_back_and_says_why(tmp_path):
    """A fake v2 hierarchy: folders are made, but a new one has no cpu.stat, as a kernel's always would."""
    meter = CpuMeter("fake", candidates=[Hierarchy(2, tmp_path)])
    assert meter.read() is None
    assert meter.scope.startswith("not measured (no cgroup to measure in: cgroup v2: ")
    assert "cpu.stat" in meter.scope
    assert not list(tmp_path.glob("fake-*"))  # nothing left behind
    meter.close()


def test_without_any_hierarchy_the_whole_machine_is_the_fallback():
    assert CpuMeter("nowhere", candidates=[]).read() is None
    assert CpuMeter("nowhere", candidates=[]).scope == "not measured (no cgroup to measure in: no cgroup hierarchy mounted)"
    fallback = CpuMeter("nowhere", machine_fallback=True, candidates=[])
    subprocess.run([sys.executable, "-c", BURN.format(seconds=0.2)], check=True)
    assert fallback.scope.startswith("the whole machine (") and fallback.read() >= 0.2


def cpu_measurable() -> bool:
    """Whether this machine lets a process make a cgroup to measure in (root on cgroup v1 or v2, as here and in CI)."""
    meter = CpuMeter("probe")
    try:
        return meter.read() is not None
    finally:
        meter.close()


def own_group(version: int) -> Path:
    return next(h.group for h in this_machine() if h.version == version)


@pytest.mark.parametrize("version", [1, 2])
def test_a_meter_counts_the_processes_it_starts_and_nests(version):
    """On the real hierarchy of that version, where this machine has one and lets this process make groups in it
    (root on cgroup v1 and v2 here and in CI); skipped, with the meter's reason, where it cannot measure."""
    if not any(h.version == version for h in this_machine()):
        pytest.skip(f"no cgroup v{version} hierarchy counts CPU here")
    before = own_group(version)
    outer = CpuMeter("outer", candidates=[Hierarchy(version, before)])
    if outer.read() is None:
        pytest.skip(f"cannot measure here: {outer.scope}")
    assert outer.scope == f"this process and everything it starts (cgroup v{version}{' cpuacct' if version == 1 else ''})"
    inner = CpuMeter("inner", candidates=[Hierarchy(version, own_group(version))])
    subprocess.run([sys.executable, "-c", BURN.format(seconds=0.5)], check=True)
    inner_cpu = inner.read()
    inner.close()
    subprocess.run([sys.executable, "-c", BURN.format(seconds=0.3)], check=True)
    outer_cpu = outer.read()
    outer.close()
    assert 0.5 <= inner_cpu < 2.0  # the child's half second, plus starting Python
    assert outer_cpu >= inner_cpu + 0.3  # the outer group counts what the inner one measured, and the rest
    assert own_group(version) == before  # back where it was, and the meters' groups are gone
    assert not list(before.glob("outer-*"))
