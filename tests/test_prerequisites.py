"""autograder.prerequisites, which `make setup` runs: one line per missing piece, with the command that installs it."""
import re
import subprocess
import sys
import tomllib

from autograder import prerequisites
from conftest import REPO


def test_the_python_it_asks_for_is_pyprojects():
    wanted = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert wanted == ">=" + ".".join(map(str, prerequisites.MIN_PYTHON))


def test_it_runs_on_the_standard_library_alone_before_any_venv_exists():
    """-S: no site-packages at all, as the system's python3 has before `make setup` made .venv."""
    done = subprocess.run([sys.executable, "-S", "-m", "autograder.prerequisites"], cwd=REPO, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_an_old_python_is_a_learners_missing_piece_with_its_install_command(monkeypatch):
    monkeypatch.setattr(prerequisites.shutil, "which", lambda name: "/usr/bin/" + name if name == "apt-get" else None)
    first_role, first = prerequisites.missing(version=(3, 9, 2))[0]
    assert first_role == "learner"
    assert re.fullmatch(r"missing \(learner\): Python 3\.11 \(this is 3\.9\.2\), .* -- (sudo )?apt install python3\.11",
                        first)


def test_off_linux_grading_is_one_line_and_a_learner_can_go_on():
    found = prerequisites.missing(system="Darwin")
    assert [role for role, _ in found] == ["grading"]
    assert "Linux (this is Darwin)" in found[0][1]


def test_a_bwrap_that_cannot_make_namespaces_is_named_with_what_it_said(monkeypatch, tmp_path):
    shim = tmp_path / "bwrap"
    shim.write_text('#!/bin/sh\necho "bwrap: No permissions to create new namespace" >&2\nexit 1\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{prerequisites.os.environ['PATH']}")
    lines = [line for role, line in prerequisites.missing() if role == "grading"]
    assert len(lines) == 1 and "a usable bubblewrap" in lines[0]
    assert "(bwrap: No permissions to create new namespace)" in lines[0]
    assert "kernel.unprivileged_userns_clone=1" in lines[0]


def test_a_missing_bwrap_gets_the_package_that_has_it(monkeypatch):
    real = prerequisites.shutil.which
    monkeypatch.setattr(prerequisites.shutil, "which", lambda name: None if name == "bwrap" else real(name))
    lines = [line for role, line in prerequisites.missing() if role == "grading"]
    assert any(line.startswith("missing (grading): bubblewrap, ") for line in lines), lines
    if real("apt-get"):
        assert any(line.endswith("apt install bubblewrap") for line in lines), lines


def test_the_command_names_each_systems_own_package(monkeypatch):
    for tool, expected in (("dnf", "dnf install libseccomp"), ("apt-get", "apt install libseccomp2")):
        monkeypatch.setattr(prerequisites.shutil, "which", lambda name, tool=tool: name if name == tool else None)
        assert prerequisites.install("libseccomp").endswith(expected)
    monkeypatch.setattr(prerequisites.shutil, "which", lambda name: None)
    assert prerequisites.install("bubblewrap") == "install bubblewrap (Debian's name) with this system's package manager"
