"""The course's grading secret (autograder.trust.secret): made once, kept private, read by every grading path, and
what keeps a learner from trying edits out against the cases a trusted grade will draw.

The red team's seed grinding: the seed of the randomized cases was a hash of the learner's cells, the course code is
public, so a learner could edit a comment until the cases drawn missed a bug (a clipping ``__mul__``). Here that
attack is ground against the seed a grade without a secret would use, then graded with the course's secret.
"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import CheckFailure, check
from autograder.checks.harness.diagnostics import case_seed
from autograder.contract import assignments
from autograder.tools.solutions import solution_namespace
from autograder.trust import sandbox, secret, verdicts
from conftest import COURSE_SECRET, REPO, requires_sandbox, solution_notebook

# ------------------------------------------------------------------------------------------------ the file


def test_a_course_gets_one_secret_on_first_use_readable_by_its_owner_alone(tmp_path):
    before = os.umask(0)  # whatever the umask, the file is private
    try:
        made = secret.course_secret(tmp_path)
    finally:
        os.umask(before)
    path = tmp_path / secret.FILE
    assert len(made) == secret.SIZE and path.read_text() == made.hex() + "\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert secret.course_secret(tmp_path) == made  # kept, not made again
    assert sorted(p.name for p in tmp_path.iterdir()) == [secret.FILE]  # no temporary file left behind
    other = tmp_path / "other"
    other.mkdir()
    assert secret.course_secret(other) != made  # another course, another secret


def test_two_graders_that_both_found_none_agree_on_the_first_one_written(tmp_path, monkeypatch):
    first = secret.place(tmp_path, COURSE_SECRET)
    monkeypatch.setattr(secret.os.path, "lexists", lambda path: False)  # this one looked before the other wrote
    assert secret.course_secret(tmp_path) == COURSE_SECRET
    assert first.read_text() == COURSE_SECRET.hex() + "\n"


def as_folder(path):
    path.mkdir()


def open_to_others(path):
    path.write_text(COURSE_SECRET.hex() + "\n")
    path.chmod(0o644)


def garbage(path):
    path.write_text("not a secret\n")
    path.chmod(0o600)


def too_short(path):
    path.write_text("5e" * 16 + "\n")
    path.chmod(0o600)


@pytest.mark.parametrize("spoil, phrase", [(as_folder, "cannot be read"), (open_to_others, "chmod 600"),
                                           (garbage, "does not hold a grading secret"),
                                           (too_short, "does not hold a grading secret")],
                         ids=["a folder", "mode 0644", "not hex", "16 bytes"])
def test_a_secret_that_cannot_be_used_is_refused_with_the_reason_and_left_as_it_was(tmp_path, spoil, phrase):
    path = tmp_path / secret.FILE
    spoil(path)
    kept = path.read_bytes() if path.is_file() else None
    with pytest.raises(secret.GradingSecretError, match=phrase) as refused:
        secret.course_secret(tmp_path)
    assert str(path) in str(refused.value)
    assert (path.read_bytes() if path.is_file() else None) == kept and path.exists()


def test_a_secret_that_cannot_be_made_says_where():
    with pytest.raises(secret.GradingSecretError, match="cannot make the grading secret /nonexistent/course"):
        secret.course_secret(Path("/nonexistent/course"))


def test_a_scratch_course_gets_a_private_copy_once(tmp_path):
    path = secret.place(tmp_path, COURSE_SECRET)
    assert secret.read(path) == COURSE_SECRET and stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(secret.GradingSecretError, match="exists already"):
        secret.place(tmp_path, bytes(32))
    assert secret.read(path) == COURSE_SECRET
    with pytest.raises(secret.GradingSecretError, match="32 bytes, not 3"):
        secret.place(tmp_path / "other", b"abc")


@requires_sandbox
def test_no_sandbox_mounts_a_folder_that_holds_a_courses_secret(tmp_path):
    """The kernel sees its submission's copy and the course's kernel-side code, a check worker its own scripts;
    neither the repository's course folder nor a scratch course (where grade and the class run put their copies)
    is in reach of either."""
    from autograder.trust import remote

    course = tmp_path / "course"
    folder = course / "autograded" / "ann" / "01_nudging"
    folder.mkdir(parents=True)
    private = tmp_path / "private"
    private.mkdir()
    for command in (sandbox.kernel_command(["python", "-m", "ipykernel_launcher"], private, str(folder)),
                    sandbox.wrap(["python", "-I", remote.INSIDE_SCRIPT], binds=dict(remote.GRADER_FILES))):
        mounted = [Path(command[i + 1]) for i, word in enumerate(command) if word in ("--ro-bind", "--bind")]
        assert mounted, "no mounts found: the command's form changed"
        for kept in (REPO / secret.FILE, course / secret.FILE):
            assert not [m for m in mounted if m == kept or m in kept.parents], (kept, mounted)


# ------------------------------------------------------------------------------------------------ the cases drawn

NB1 = "01_nudging"
# Right on the probe and on every drawn case, until the ninth call: then it names the cases it was given, so that a
# grade's diagnosis shows which cases were drawn.
REVEALING = '''
SEEN = []


def central_difference(f, x, h):
    SEEN.append((x, h))
    if len(SEEN) > 8:
        raise ValueError(f"drawn {SEEN[1:9]}")
    return (f(x + h) - f(x - h)) / (2 * h)
'''
DRAWN = re.compile(r"drawn \[[^\]]*\]")


def revealing_notebook() -> nbformat.NotebookNode:
    nb = nbformat.read(solution_notebook(NB1), as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "central_difference").source = REVEALING
    return nb


def drawn_here(nb, key: bytes) -> str:
    """The cases central_difference's check draws for ``nb`` under the course secret ``key``, in this process."""
    cells = verdicts.program(nb, nbformat.read(assignments()[NB1], as_version=4))[0]
    namespace = dict(solution_namespace(NB1))
    exec(REVEALING, namespace)
    with case_seed(verdicts.program_seed(cells, key)), pytest.raises(CheckFailure) as failed:
        check("central_difference", namespace, quiet=True)
    return DRAWN.search(failed.value.message).group(0)


def test_one_submission_draws_other_cases_under_another_courses_secret():
    nb = revealing_notebook()
    assert drawn_here(nb, COURSE_SECRET) == drawn_here(nb, COURSE_SECRET)
    assert drawn_here(nb, COURSE_SECRET) != drawn_here(nb, bytes(32))


@pytest.mark.slow  # grades one notebook 1 twice: nbgrader in a course of its own, and the command line
@requires_sandbox
def test_one_courses_secret_draws_the_same_cases_under_nbgrader_and_the_command_line(tmp_path):
    """`python -m autograder grade` reads the repository's secret (the course it grades against); a course folder
    holding the same secret, graded by `nbgrader autograde`, draws the same cases, and both are the cases that
    secret draws here."""
    from autograder.course import SCRATCH_COURSE_CONFIG

    key = secret.course_secret(REPO)
    nb = revealing_notebook()
    course = tmp_path / "course"
    shutil.copytree(REPO / "source" / NB1, course / "source" / NB1, ignore=shutil.ignore_patterns(".hypothesis"))
    (course / "nbgrader_config.py").write_text(SCRATCH_COURSE_CONFIG)
    secret.place(course, key)  # before the release, which keeps a secret it finds
    submitted = course / "submitted" / "ann" / NB1 / f"{NB1}.ipynb"
    submitted.parent.mkdir(parents=True)
    nbformat.write(nb, submitted)
    for step in (["generate_assignment", NB1], ["autograde", NB1]):
        done = subprocess.run([sys.executable, "-m", "nbgrader", *step], cwd=course, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    graded = nbformat.read(course / "autograded" / "ann" / NB1 / f"{NB1}.ipynb", as_version=4)
    cell = next(c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_central_difference")
    by_nbgrader = DRAWN.search(cell.outputs[0]["evalue"]).group(0)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", "--json", str(submitted)], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    graded = {e["id"]: e["message"] for e in json.loads(done.stdout)["exercises"]}
    assert DRAWN.search(graded["central_difference"]).group(0) == by_nbgrader == drawn_here(nb, key)


def test_the_class_run_sends_its_courses_secret_to_the_grading_processes_course(tmp_path, monkeypatch):
    """The recording process reads the course's secret (made there on first use) into the snapshot; on the worker it
    is in the scratch course before the grading process starts, where the trusted verdicts read it."""
    import pickle

    from autograder.grade import class_run, on_dask_worker
    from autograder.grade.submission import Snapshot, Task

    course = tmp_path / "course"
    shutil.copytree(REPO / "source" / NB1, course / "source" / NB1, ignore=shutil.ignore_patterns(".hypothesis"))
    (course / "nbgrader_config.py").write_text("from autograder.course import configure\nconfigure(get_config())\n")
    secret.place(course, COURSE_SECRET)
    (tmp_path / "scratch").mkdir()
    opened = class_run.Course.open(course, tmp_path / "scratch")
    snapshot = Snapshot(NB1, b"", {}, pickle.dumps(None), opened.secret)
    seen = {}

    def grading_process(root, snapshot, student):
        seen["secret"] = secret.read(root / secret.FILE)
        return "stopped here", 0.0

    monkeypatch.setattr(on_dask_worker, "_run_grading_process", grading_process)
    on_dask_worker.execute_submission(snapshot, Task("ann", {}))
    assert opened.secret == seen["secret"] == COURSE_SECRET


def test_a_class_run_cannot_start_without_a_usable_secret(tmp_path):
    from autograder.grade import class_run

    (tmp_path / secret.FILE).write_text("not a secret\n")
    (tmp_path / secret.FILE).chmod(0o600)
    with pytest.raises(class_run.ClassGradingError, match="does not hold a grading secret"):
        class_run.Course.open(tmp_path, tmp_path / "scratch")


# ------------------------------------------------------------------------------------------------ seed grinding

NB2 = "02_scalar_engine"
# The red team's wrong answer: a product whose factors are clipped to ±3.1. The fixed probes multiply numbers up to 3,
# so they pass; a drawn factor beyond 3.1 shows it, unless every factor drawn happens to lie within (about 1 seed in 10).
CLIPPED_MUL = '''
_exact_mul = Value.__mul__


def _clip(number):
    return max(-3.1, min(3.1, number))


def _clipped_mul(self, other):
    out = _exact_mul(self, other)
    out.data = _clip(self.data) * _clip(other.data if isinstance(other, Value) else other)
    return out


Value.__mul__ = _clipped_mul
'''


def ground(attempts: int = 300) -> tuple[nbformat.NotebookNode, list[verdicts.Cell], dict]:
    """The grinding attack: the clipped product pasted below the solved answer, with a comment edited until the
    cases drawn from the seed of a grade without a secret all miss the clipping."""
    nb = nbformat.read(solution_notebook(NB2), as_version=4)
    course = nbformat.read(assignments()[NB2], as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "value_node")
    solved, namespace = cell.source, solution_namespace(NB2, extra=CLIPPED_MUL)
    for attempt in range(attempts):
        cell.source = f"{solved}\n# attempt {attempt}\n{CLIPPED_MUL}"
        cells = verdicts.program(nb, course)[0]
        if passes(namespace, verdicts.program_seed(cells, b"")):
            return nb, cells, namespace
    raise AssertionError(f"no comment among {attempts} hides the clipping from a grade without a secret")


def failure(namespace: dict, seed: int) -> str | None:
    """Why value_node's check fails under ``seed`` in this process, or None when it passes."""
    with case_seed(seed):
        try:
            check("value_node", namespace, quiet=True)
        except CheckFailure as failed:
            return failed.message
    return None


def passes(namespace: dict, seed: int) -> bool:
    return failure(namespace, seed) is None


def test_an_answer_ground_against_a_seed_without_the_secret_fails_under_the_courses_secret():
    nb, cells, namespace = ground()
    assert not passes(namespace, verdicts.program_seed(cells, COURSE_SECRET))
    # Not by luck of one secret: the grind holds under about 1 secret in 10, as any answer with that bug would.
    held = sum(passes(namespace, verdicts.program_seed(cells, bytes([n]) * 32)) for n in range(40))
    assert held <= 10, held


@pytest.mark.slow  # the trusted grade of a whole notebook 2
def test_the_ground_answer_fails_the_trusted_grade():
    nb, cells, namespace = ground()
    verdict = verdicts.verdicts(nb, nbformat.read(assignments()[NB2], as_version=4), secret=COURSE_SECRET)["value_node"]
    assert not verdict.passed
    assert verdict.message == failure(namespace, verdicts.program_seed(cells, COURSE_SECRET))  # the cases drawn here
