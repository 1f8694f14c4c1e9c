"""`pip install .` (not editable) gives a grader with every module: the wheel setuptools builds from a clean copy of
the tracked files holds every file of `autograder/` and `labtools/`, Python or not, and the course's source notebooks
(through the link autograder/course_source); installed into a fresh virtual environment, it grades solutions to full
marks without the checkout."""
from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ASSIGNMENTS, REPO, solution_notebook
from autograder.trust import sandbox

PACKAGES = ("autograder", "labtools")


def tracked_files() -> list[str]:
    """The repository's tracked files, relative to its root, or a skip where this is not a git checkout."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: which files belong to the package is git's list")
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [name for name in listing.decode().split("\0") if name]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel built from a copy of the tracked files: a build in the checkout would see whatever untracked files
    lie there (and leave build/ and an egg-info behind)."""
    tree = tmp_path_factory.mktemp("tree")
    for name in tracked_files():
        if (REPO / name).is_symlink():  # autograder/course_source: the wheel packs what it points at
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(REPO / name), tree / name)
        elif (REPO / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tree / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--wheel-dir", str(out), str(tree)], check=True)
    [built] = out.glob("*.whl")
    return zipfile.ZipFile(built)


def packaged_files() -> set[str]:
    """The tracked files of the packages as a wheel names them: a tracked link to a folder stands for its files."""
    found = set()
    for name in tracked_files():
        if name.split("/")[0] not in PACKAGES:
            continue
        if (REPO / name).is_symlink() and (REPO / name).is_dir():
            found.update(f"{name}/{path.relative_to(REPO / name)}" for path in (REPO / name).rglob("*")
                         if path.is_file())
        else:
            found.add(name)
    return found


def test_the_wheel_holds_every_file_of_the_packages(wheel):
    expected = packaged_files()
    packed = set(wheel.namelist())
    assert any(name.startswith("autograder/checks/tensor_engine/") for name in expected)  # the one once left out
    assert {f"autograder/course_source/{name}/{name}.ipynb" for name in ASSIGNMENTS} <= expected
    assert sorted(expected - packed) == []


def test_the_wheel_holds_nothing_but_the_packages(wheel):
    """Tests, notebooks and solutions stay out: a grader installed on a cluster worker needs only the code."""
    tops = {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert tops == set(PACKAGES)



def fresh_venv(root: Path, wheel_path: str) -> Path:
    """A new virtual environment at ``root`` with the wheel pip-installed (not editable) and, beside it, this
    environment's dependencies linked one top-level entry at a time (torch alone is hundreds of megabytes to
    download again). The checkout's editable install, its ``.pth`` files and its metadata are left out, so the only
    ``autograder`` there is the wheel's. Returns the new environment's ``bin/``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    [site] = root.glob("lib/python*/site-packages")
    ours = Path(importlib.metadata.distribution("backprop-from-scratch").locate_file(""))
    for entry in ours.iterdir():
        if not entry.name.startswith(("__editable__", "backprop_from_scratch", "__pycache__")) and entry.suffix != ".pth":
            (site / entry.name).symlink_to(entry)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(root / "bin" / "python"), "install", "--quiet",
                    "--no-deps", "--no-index", "--disable-pip-version-check", wheel_path], check=True)
    # nbgrader starts `alembic` by name from PATH; a linked package brings no script, so it gets one of this venv's
    [alembic] = importlib.metadata.entry_points(group="console_scripts", name="alembic")
    module, function = alembic.value.split(":")
    script = root / "bin" / "alembic"
    script.write_text(f"#!{root / 'bin' / 'python'}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n")
    script.chmod(0o755)
    return root / "bin"


# Every file is in the wheel (test_the_wheel_holds_every_file_of_the_packages) and every solution passes its checks
# from the checkout (tests/course/test_notebooks.py); what an install can still break is how code finds its files:
# notebook 4's checks are a package of their own (the one once left out of the wheel), notebook 5's load MNIST
# through labtools and train. Grading the other three too cost a minute of `make test` and reads nothing new.
INSTALLED_GRADES = ("04_tensor_engine", "05_modules_mnist")


@pytest.mark.slow
def test_a_wheel_installed_grader_grades_solutions_to_full_marks(wheel, tmp_path):
    """The grader of a fresh venv, started isolated (``-I``: no PYTHONPATH, no working folder on sys.path) outside
    the checkout, imports its own copy and grades solutions with the source notebooks the wheel holds."""
    bin_dir = fresh_venv(tmp_path / "venv", wheel.filename)
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "HOME": str(home), "JUPYTER_CONFIG_DIR": str(home / "jc"),
           "JUPYTER_DATA_DIR": str(home / "jd"), "JUPYTER_RUNTIME_DIR": str(home / "jr"), "IPYTHONDIR": str(home / "ip"),
           **{name: os.environ[name] for name in (sandbox.WITHOUT_SANDBOX_ENV,) if name in os.environ}}
    python = [str(bin_dir / "python"), "-I"]
    where = subprocess.run([*python, "-c", "import autograder; print(autograder.__file__)"], cwd=home, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "venv"), where
    for name in INSTALLED_GRADES:
        done = subprocess.run([*python, "-m", "autograder", "grade", str(solution_notebook(name)), "--json"],
                              cwd=home, env=env, capture_output=True, text=True)
        report = json.loads(done.stdout)
        assert done.returncode == 0 and report["exercises"], (name, report, done.stderr[-2000:])
        assert report["score"] == report["max_score"], (name, report)
