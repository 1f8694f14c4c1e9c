"""`pip install .` (not editable) gives a grader with every module: the wheel setuptools builds from a clean copy of
the tracked files holds every file of `autograder/` and `labtools/`, Python or not."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import REPO

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
        if (REPO / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tree / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--wheel-dir", str(out), str(tree)], check=True)
    [built] = out.glob("*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_holds_every_file_of_the_packages(wheel):
    expected = {name for name in tracked_files() if name.split("/")[0] in PACKAGES}
    packed = set(wheel.namelist())
    assert any(name.startswith("autograder/checks/tensor_engine/") for name in expected)  # the one once left out
    assert sorted(expected - packed) == []


def test_the_wheel_holds_nothing_but_the_packages(wheel):
    """Tests, notebooks and solutions stay out: a grader installed on a cluster worker needs only the code."""
    tops = {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert tops == set(PACKAGES)
