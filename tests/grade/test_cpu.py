"""autograder.grade.cpu.CpuMeter: CPU of a process and of everything it starts, from a cgroup (fast)."""
import subprocess
import sys
from pathlib import Path

from autograder.grade.cpu import CpuMeter

BURN = "import time\nstart = time.process_time()\nwhile time.process_time() - start < {seconds}: pass\n"


def cpu_measurable() -> bool:
    """Whether this machine lets a process make a cpuacct cgroup (root on cgroup v1, as here and in CI)."""
    meter = CpuMeter("probe")
    try:
        return meter.read() is not None
    finally:
        meter.close()


def own_group() -> str:
    return next(line for line in Path("/proc/self/cgroup").read_text().splitlines() if "cpuacct" in line)


def test_a_meter_counts_the_processes_it_starts_and_nests():
    before = own_group()
    outer = CpuMeter("outer")
    if outer.read() is None:  # no cgroup here: the meter says so rather than guessing
        assert outer.scope.startswith("not measured")
        return
    inner = CpuMeter("inner")
    subprocess.run([sys.executable, "-c", BURN.format(seconds=0.5)], check=True)
    inner_cpu = inner.read()
    inner.close()
    subprocess.run([sys.executable, "-c", BURN.format(seconds=0.3)], check=True)
    outer_cpu = outer.read()
    outer.close()
    assert 0.5 <= inner_cpu < 2.0  # the child's half second, plus starting Python
    assert outer_cpu >= inner_cpu + 0.3  # the outer group counts what the inner one measured, and the rest
    assert own_group() == before  # back where it was, and the meters' groups are gone
    assert not list((Path("/sys/fs/cgroup/cpuacct") / before.split(":", 2)[2].lstrip("/")).glob("outer-*"))


def test_without_a_cgroup_the_whole_machine_is_the_fallback(monkeypatch):
    import autograder.grade.cpu as cpu

    monkeypatch.setattr(cpu, "CPUACCT", Path("/nonexistent"))
    assert CpuMeter("nowhere").read() is None
    fallback = CpuMeter("nowhere", machine_fallback=True)
    subprocess.run([sys.executable, "-c", BURN.format(seconds=0.2)], check=True)
    assert fallback.scope.startswith("the whole machine") and fallback.read() >= 0.2
