"""A machine where bubblewrap cannot sandbox: a `bwrap` first on PATH that fails as an unprivileged container's does.
A learner's `make grade` works there with a warning, grading a class is refused unless asked for, `make demo` leaves
out its attacker and says so, and `make test` names the tests it skipped for that reason. CI, which has bubblewrap,
covers that machine through these."""
import os
import re
import subprocess
import sys
import tempfile

import nbformat
import pytest

from autograder.course import SCRATCH_COURSE_CONFIG, solution_version
from autograder.contract import assignments
from autograder.tools import demo
from autograder.trust import sandbox
from conftest import REPO, SANDBOX_SKIP, solution_notebook

SAID = "bwrap: No permissions to create new namespace"
SHIM = f'#!/bin/sh\necho "{SAID}" >&2\nexit 1\n'


@pytest.fixture
def no_bwrap(tmp_path) -> dict[str, str]:
    """The environment of a process on that machine, without the flag that allows grading there."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "bwrap").write_text(SHIM)
    (shim / "bwrap").chmod(0o755)
    env = {name: value for name, value in os.environ.items() if name != sandbox.WITHOUT_SANDBOX_ENV}
    env["PATH"] = f"{shim}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])  # this checkout's code
    return env


def autograder(*args: str, env: dict[str, str], cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_refusal_says_why_and_how_to_go_on(monkeypatch):
    monkeypatch.setattr(sandbox, "unusable", lambda: "there is no `bwrap` on PATH")
    monkeypatch.delenv(sandbox.WITHOUT_SANDBOX_ENV, raising=False)
    refused = sandbox.refusal()
    assert refused.startswith("refusing to grade without a sandbox: there is no `bwrap` on PATH. ")
    assert f"{sandbox.WITHOUT_SANDBOX_ENV}=1" in refused and "--without-sandbox" in refused
    monkeypatch.setenv(sandbox.WITHOUT_SANDBOX_ENV, "1")
    assert sandbox.refusal() is None
    monkeypatch.setattr(sandbox, "unusable", lambda: None)
    monkeypatch.delenv(sandbox.WITHOUT_SANDBOX_ENV)
    assert sandbox.refusal() is None


def test_grading_a_class_is_refused_without_the_flag(no_bwrap, tmp_path):
    done = autograder("autograder", "autograde", "01_nudging", "--course", str(tmp_path), env=no_bwrap)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"cannot grade: refusing to grade without a sandbox: `{tmp_path}/shim/bwrap` "
                                  f"cannot create namespaces here ({SAID})")


@pytest.mark.slow
def test_the_flag_lets_a_class_run_start_with_the_warning(no_bwrap, tmp_path):
    """An empty folder is no course, so the run stops there: past the refusal, with the warning printed first."""
    done = autograder("autograder", "autograde", "01_nudging", "--course", str(tmp_path), "--without-sandbox",
                      env=no_bwrap)
    assert "refusing" not in done.stderr
    assert done.stderr.startswith("WARNING: learner code is graded WITHOUT a sandbox, because ")


@pytest.mark.slow
def test_a_self_study_learner_is_graded_with_a_warning(no_bwrap):
    done = autograder("autograder", "grade", str(solution_notebook("01_nudging")), env=no_bwrap)
    assert done.returncode == 0, done.stdout + done.stderr  # full marks, unsandboxed
    assert "WARNING: learner code is graded WITHOUT a sandbox, because `" in done.stderr
    assert SAID in done.stderr


@pytest.mark.slow
def test_plain_nbgrader_autograde_refuses_before_any_learner_code_runs(no_bwrap, tmp_path):
    """The instructor's own `nbgrader autograde`: the submission fails with the reason, its notebook never run."""
    course = tmp_path / "course"
    (course / "source" / "01_nudging").mkdir(parents=True)
    nbformat.write(nbformat.read(assignments()["01_nudging"], as_version=4),
                   course / "source" / "01_nudging" / "01_nudging.ipynb")
    (course / "nbgrader_config.py").write_text(SCRATCH_COURSE_CONFIG)
    assert autograder("nbgrader", "generate_assignment", "01_nudging", env=no_bwrap, cwd=course).returncode == 0
    submitted = course / "submitted" / "ann" / "01_nudging" / "01_nudging.ipynb"
    submitted.parent.mkdir(parents=True)
    nbformat.write(solution_version(nbformat.read(assignments()["01_nudging"], as_version=4)), submitted)
    done = autograder("nbgrader", "autograde", "01_nudging", env=no_bwrap, cwd=course)
    assert done.returncode != 0
    assert "refusing to grade without a sandbox" in done.stdout + done.stderr
    assert not (course / "autograded" / "ann" / "01_nudging").exists()  # nbgrader removes a failed submission's folder


def test_make_test_names_the_tests_it_skipped_for_want_of_a_sandbox(no_bwrap):
    done = autograder("pytest", "-q", "-p", "no:cacheprovider", "tests/trust/test_sandbox.py", env=no_bwrap)
    assert done.returncode == 0, done.stdout[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    counted = re.search(r"SANDBOX TESTS SKIPPED \((\d+) in this run\): " + re.escape(SANDBOX_SKIP), last)
    assert counted and SAID in last, last
    assert int(counted[1]) == int(re.search(r"(\d+) skipped", done.stdout)[1]) > 0  # every test of the file
    # make test's last run, the browser tests', needs no sandbox: the line closes it all the same
    done = autograder("pytest", "-q", "-p", "no:cacheprovider", "tests/test_prerequisites.py", env=no_bwrap)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "SANDBOX TESTS SKIPPED (0 in this run): " in done.stdout.strip().splitlines()[-1]


def test_a_workers_matplotlib_settings_are_in_its_private_folder(no_bwrap):
    """Red team 21: without a sandbox matplotlib's folder was the host's /tmp/.matplotlib, where a matplotlibrc or
    font cache one worker wrote was read by every later one, of any submission."""
    code = ("from autograder.trust import remote\nwith remote.Worker() as w:\n"
            "    w.run('import os, matplotlib\\nfound = os.environ[\"HOME\"], matplotlib.get_configdir()\\n', '<cell>')\n"
            "    print(*w.evaluate('found'))\n")
    done = subprocess.run([sys.executable, "-c", code], env=no_bwrap, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    home, config = done.stdout.split()
    assert home.startswith(tempfile.gettempdir() + "/grading-worker-") and config == f"{home}/.matplotlib"


def test_the_demo_leaves_out_its_attacker_and_says_why(monkeypatch):
    everyone = dict.fromkeys(["full-marks", "untouched", "mistake", "attacker"])
    monkeypatch.setattr(demo, "submissions", lambda name: dict(everyone))
    monkeypatch.setattr(sandbox, "unusable", lambda: None)
    assert demo.without_sandbox() is None and list(demo.demo_class("01_nudging")) == list(everyone)
    monkeypatch.setattr(sandbox, "unusable", lambda: "there is no `bwrap` on PATH")
    assert list(demo.demo_class("01_nudging")) == ["full-marks", "untouched", "mistake"]
    said = demo.without_sandbox()
    assert said.startswith("!!! NO SANDBOX: there is no `bwrap` on PATH.\n!!! SKIPPED: the attacker student")
    assert "sandbox steps" in said
