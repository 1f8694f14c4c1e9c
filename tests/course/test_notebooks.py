"""Notebooks run as learners and instructors run them (the slow ones start a Jupyter kernel), and the generated
folders in sync with source/."""
import json
import re

import nbformat
import pytest
from nbclient import NotebookClient

from autograder.course.build import release, solutions
from autograder.contract import INTERACTIVE_TAG, assignments
from autograder.course import KERNEL_ARGS, solution_version
from conftest import learner_notebook, solution_notebook


def execute(nb, cwd, allow_errors=False):
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=allow_errors, extra_arguments=KERNEL_ARGS,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


@pytest.mark.slow
def test_untouched_learner_notebook_fails_only_on_its_stubs(assignment):
    """Every test cell says which function is still a stub (run_check's diagnosis, without a traceback); an ungraded
    cell that calls a stub raises its NotImplementedError, and one after it may miss a name the failed cell would
    have defined (the trained model of notebook 5): JupyterLab's Run All stops at the first error anyway."""
    path = learner_notebook(assignment)
    nb = execute(nbformat.read(path, as_version=4), path.parent, allow_errors=True)
    stub_failed = False
    for cell in nb.cells:
        graded = cell.metadata.get("nbgrader", {}).get("grade", False)
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                if graded:
                    assert out.ename == "CheckFailure", f"{out.ename}: {out.evalue} in\n{cell.source}"
                    assert "is not written yet" in out.evalue or "not answered yet" in out.evalue, out.evalue
                    assert not any("File " in line or "Cell In" in line for line in out.traceback), out.traceback
                else:
                    cascade = out.ename == "NameError" and stub_failed
                    assert out.ename == "NotImplementedError" or cascade, f"{out.ename}: {out.evalue} in\n{cell.source}"
                stub_failed = True
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert all(any(o.output_type == "error" for o in c.outputs) for c in graded), "a test cell passed on a stub"


def test_notebooks_folder_is_in_sync_with_source(tmp_path, assignment):
    [fresh] = release(tmp_path, names=[assignment])
    committed = learner_notebook(assignment)
    assert json.loads(fresh.read_text()) == json.loads(committed.read_text()), \
        f"{committed} is stale: run `make release NB={assignment}` and commit"


@pytest.mark.slow
def test_solutions_folder_is_in_sync_with_source_and_every_check_passes_in_it(tmp_path):
    """Each source notebook runs once per test run, here: as its solution version, top to bottom. Execution is
    deterministic (widget ids are renumbered), so the run must reproduce every byte of the committed JSON; and each
    test cell's visible run_check line ran the exercise's check in the kernel, which must have passed."""
    for fresh in solutions(tmp_path):
        committed = solution_notebook(fresh.parent.name)
        (ran, ran_images), (kept, kept_images) = (without_images(json.loads(path.read_text()))
                                                  for path in (fresh, committed))
        assert ran == kept, f"{committed} is stale: run `make solutions` and commit"
        assert [image.shape for image in ran_images] == [image.shape for image in kept_images]
        for image, other in zip(ran_images, kept_images):  # the same picture, to a CPU's float32 round-off
            assert (abs(image - other).sum(axis=-1) > 0.05).mean() < 0.001, f"{committed}: a picture changed"
        code = [c for c in nbformat.read(committed, as_version=4).cells if c.cell_type == "code"]
        executed = [c for c in code if INTERACTIVE_TAG not in c.metadata.get("tags", [])]
        assert all(c.execution_count for c in executed), "committed solutions must be executed"
        assert all(not c.outputs for c in code if c not in executed), "widget cells are left for the learner to run"
        assert not any(o.output_type == "error" for c in executed for o in c.outputs)
        for cell in code:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if cell.metadata.get("nbgrader", {}).get("grade"):
                printed = "".join(o.get("text", "") for o in cell.outputs)
                assert f"{grade_id[len('test_'):]}: all hidden checks passed." in printed, (grade_id, printed)


def without_images(nb: dict) -> tuple[dict, list]:
    """The notebook's JSON with each PNG output's bytes taken out, and those pictures as pixel arrays: the same run
    draws a plot a few pixels apart on another CPU (notebook 1's float32 round-off: 2 of 273,000 pixels between an
    AMD and an Intel machine), and PNG bytes differ with any pixel."""
    import base64
    import io

    import matplotlib.image

    images = []
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                images.append(matplotlib.image.imread(io.BytesIO(base64.b64decode(data.pop("image/png")))))
    return nb, images


def test_release_keeps_a_learners_edited_notebook_unless_forced(tmp_path):
    name = next(iter(assignments()))
    target = tmp_path / name / f"{name}.ipynb"
    target.parent.mkdir()
    target.write_text("my answers")  # outside git: treated as edited
    release(tmp_path, keep_edited=True, names=[name])
    assert target.read_text() == "my answers"
    release(tmp_path, names=[name])
    assert target.read_text() == learner_notebook(name).read_text()


def test_solution_version_strips_hidden_tests_and_markers(assignment):
    nb = solution_version(nbformat.read(assignments()[assignment], as_version=4))
    text = "".join(c.source for c in nb.cells)
    assert "HIDDEN TESTS" not in text and "### BEGIN SOLUTION" not in text
    assert not re.search(r"(?<!run_)check\(\"", text), "a hidden check call is left (run_check is visible by design)"
