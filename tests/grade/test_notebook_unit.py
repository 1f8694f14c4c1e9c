"""Grading one notebook (autograder.grade.notebook) without running it: what makes a file ungradable, which metadata
changes are refused, and how an autograded notebook's test cells become the report.

Submissions are in-memory notebooks (written to tmp_path where read_submission needs a file); autograded notebooks
are built by hand in nbgrader's metadata format, so no nbgrader run is needed.
"""
import json
import os

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.contract import assignments
from autograder.grade import submission
from conftest import within
from autograder.grade.notebook import (ExerciseResult, GradeReport, UnusableNotebook, copy_notes, failure_message,
                                       metadata_changes, notes, read_submission, refusal, results)

NB = "01_nudging"


def answer(grade_id: str, source: str = "def f():\n    pass\n"):
    return new_code_cell(source, metadata={"nbgrader": {
        "grade": False, "grade_id": grade_id, "locked": False, "schema_version": 3, "solution": True, "task": False}})


def graded(grade_id: str, *cell_outputs, points: float = 2):
    cell = new_code_cell("run_check('f', globals())\n", metadata={"nbgrader": {
        "grade": True, "grade_id": grade_id, "locked": True, "points": points, "schema_version": 3,
        "solution": False, "task": False}})
    cell.outputs = list(cell_outputs)
    return cell


def meta(nb, grade_id: str) -> dict:
    return next(c.metadata["nbgrader"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def error(ename: str, evalue: str = ""):
    return new_output("error", ename=ename, evalue=evalue, traceback=[])


def stream(name: str, text: str):
    return new_output("stream", name=name, text=text)


# ------------------------------------------------------------------------------------------------ metadata_changes

def course():
    return new_notebook(cells=[new_markdown_cell("# course"), new_code_cell("import math"), answer("f"),
                               graded("test_f"), answer("g"), graded("test_g", points=3)])


def test_an_untouched_submission_has_no_metadata_changes():
    assert metadata_changes(course(), course()) == []


@pytest.mark.parametrize("grade_id, change, said", [
    ("test_f", {"grade": False}, "test_f: grade False (course: True)"),
    ("test_f", {"points": 100}, "test_f: points 100 (course: 2)"),
    ("f", {"solution": False}, "f: solution False (course: True)"),
    ("f", {"locked": True}, "f: locked True (course: False)"),
    ("f", {"points": 5}, "f: points 5 (course: None)"),                    # points on an answer cell
    ("test_g", {"points": 0, "locked": False}, "test_g: locked False (course: True), points 0 (course: 3)"),
])
def test_a_changed_flag_is_named_with_the_courses_value(grade_id, change, said):
    nb = course()
    meta(nb, grade_id).update(change)
    assert metadata_changes(nb, course()) == [said]


def test_a_flag_absent_on_one_side_and_at_its_default_on_the_other_is_no_change():
    """nbgrader reads an absent flag as its default, so writing the default out changes nothing."""
    nb = course()
    meta(nb, "f")["points"] = None
    del meta(nb, "test_f")["solution"]
    assert metadata_changes(nb, course()) == []


def test_a_graded_cell_the_course_does_not_have_is_a_change():
    nb = course()
    nb.cells.append(graded("test_mine"))
    nb.cells.append(answer("mine"))
    assert metadata_changes(nb, course()) == ["test_mine is a graded cell the course does not have",
                                              "mine is a graded cell the course does not have"]


def test_an_unflagged_cell_with_a_grade_id_of_its_own_is_an_ordinary_cell():
    nb = course()
    nb.cells.append(new_code_cell("x = 1", metadata={"nbgrader": {"grade_id": "scratch", "grade": False,
                                                                  "solution": False}}))
    assert metadata_changes(nb, course()) == []


def test_a_copied_graded_cell_is_no_change_whatever_its_flags():
    """Grading keeps the first copy (SeparateCopiedCells), so only the first copy's flags are compared."""
    nb = course()
    tampered_copy = graded("test_f", points=100)
    nb.cells.append(tampered_copy)
    assert metadata_changes(nb, course()) == []
    nb.cells.insert(1, graded("test_f", points=50))  # now the tampered cell comes first
    assert metadata_changes(nb, course()) == ["test_f: points 50 (course: 2)"]


def test_deleted_cells_are_not_metadata_changes():
    """read_submission names them separately (test_a_deleted_exercise_cell_is_named_with_how_to_recover)."""
    nb = course()
    del nb.cells[3]
    assert metadata_changes(nb, course()) == []


# ------------------------------------------------------------------------------------------------ refusal and notes
# What `grade` and the class run both refuse or note (the class run's side: test_class_grading.py).

def test_an_untouched_notebook_is_neither_refused_nor_noted():
    assert refusal(course(), course()) is None and notes(course(), course()) == []


def test_a_deleted_cell_and_a_stripped_answer_cell_are_refused_by_grade_id_in_course_order():
    nb = course()
    del nb.cells[3]  # test_f
    nb.cells[3].metadata = {}  # the answer cell g, now fourth, without its nbgrader metadata
    assert refusal(nb, course()) == "exercise cells were deleted or lost their metadata (test_f, g)"


def test_changed_metadata_is_refused_first_with_what_changed():
    nb = course()
    del nb.cells[3]
    meta(nb, "f")["locked"] = True
    assert refusal(nb, course()) == "the grading metadata of its cells was changed (f: locked True (course: False))"


def test_the_copy_notes_name_the_first_test_cell_and_the_last_answer_cell_above_its_test():
    """An answer cell's copies all run, so the last one above the test is what the test checks (the trusted side:
    tests/trust/test_trusted_grading.py); a test cell's first copy keeps its id."""
    nb = course()
    nb.cells.insert(3, answer("f", "def f():\n    return 1\n"))  # cell 4, between cell 3 (f) and its test
    nb.cells += [answer("f"), graded("test_g")]  # cells 8 and 9: below f's test, and a second test_g
    assert copy_notes(nb, course()) == [
        "has the answer cell f in cells 3, 4 and 8: each runs in turn, so what its test checks is what the last of "
        "them above the test defines (cell 4)",
        "has the test cell test_g in cells 7 and 9: the first (cell 7) is graded, the others run as ordinary cells"]


def test_a_copied_cell_of_the_learners_own_is_not_noted():
    nb = course()
    nb.cells += [new_code_cell("x", metadata={"nbgrader": {"grade_id": "mine"}})] * 2
    assert copy_notes(nb, course()) == []


def test_another_kernel_is_noted_with_the_one_that_grades():
    nb, source = course(), course()
    nb.metadata["kernelspec"], source.metadata["kernelspec"] = {"name": "julia"}, {"name": "python3"}
    assert notes(nb, source) == ["asks for the kernel 'julia'; it is graded with the course's, 'python3'"]


# ------------------------------------------------------------------------------------------------ read_submission

def write(tmp_path, nb, name="submission.ipynb"):
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def course_notebook(name=NB):
    return nbformat.read(assignments()[name], as_version=4)


def unusable(path) -> str:
    with pytest.raises(UnusableNotebook) as info:
        read_submission(path)
    return str(info.value)


def test_the_courses_own_notebook_is_read_with_its_assignment(tmp_path):
    nb, assignment = read_submission(write(tmp_path, course_notebook()))
    assert assignment == NB and nb == course_notebook()


def test_the_assignment_is_the_one_whose_exercise_cells_the_notebook_holds(tmp_path):
    """Found by grade ids, whatever the file is called."""
    nb, assignment = read_submission(write(tmp_path, course_notebook("03_backward_functions"), f"{NB}.ipynb"))
    assert assignment == "03_backward_functions"


def test_a_missing_file_is_unusable(tmp_path):
    assert unusable(tmp_path / "nope.ipynb") == f"{tmp_path / 'nope.ipynb'}: no such file"


def test_a_folder_is_unusable(tmp_path):
    assert unusable(tmp_path) == f"{tmp_path}: a folder, not a notebook file"


def test_a_link_to_a_notebook_is_unusable_before_its_target_is_read(tmp_path):
    """Even a link to the course's own source notebook, which holds the solutions: the file itself, or nothing."""
    (tmp_path / "linked.ipynb").symlink_to(assignments()[NB])
    assert unusable(tmp_path / "linked.ipynb") == (f"{tmp_path / 'linked.ipynb'} is a symbolic link: put a copy of "
                                                   "what it points to in its place")


def test_a_dangling_link_is_unusable_as_a_link(tmp_path):
    (tmp_path / "gone.ipynb").symlink_to(tmp_path / "nothing.ipynb")
    assert "gone.ipynb is a symbolic link" in unusable(tmp_path / "gone.ipynb")


def test_a_named_pipe_is_unusable_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe.ipynb")
    with within(10):
        assert unusable(tmp_path / "pipe.ipynb") == f"{tmp_path / 'pipe.ipynb'} is a named pipe (FIFO), not a file"


def test_a_notebook_over_the_cap_is_unusable(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "MAX_FILE_BYTES", 1 << 20)
    path = write(tmp_path, course_notebook())
    path.write_bytes(path.read_bytes() + b" " * (1 << 20))
    assert unusable(path) == (f"{path} holds more than 1 MiB, the limit for one file: clear the notebook's outputs, "
                              "or leave the file out")


@pytest.mark.parametrize("content, kind", [
    (b"{ not json", "NotJSONError: Notebook does not appear to be JSON"),
    (b"", "NotJSONError"),
    (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code"}]}', "ValidationError"),
    (b"\xff\xfe", "UnicodeDecodeError"),
], ids=["not-json", "empty", "invalid", "not-utf8"])
def test_a_file_that_is_not_a_notebook_is_unusable_with_the_readers_reason(tmp_path, content, kind):
    path = tmp_path / "broken.ipynb"
    path.write_bytes(content)
    said = unusable(path)
    assert said.startswith(f"{path}: not a readable Jupyter notebook (") and kind in said
    assert "\n" not in said  # one line a learner can act on


def test_a_notebook_of_no_assignment_is_unusable(tmp_path):
    nb = new_notebook(cells=[new_code_cell("x = 1"), answer("not_an_exercise")])
    said = unusable(write(tmp_path, nb))
    assert "not a notebook of this course" in said and ", ".join(assignments()) in said


def test_changed_grading_metadata_makes_a_notebook_unusable_with_the_reason(tmp_path):
    nb = course_notebook()
    meta(nb, "test_central_difference")["points"] = 100
    said = unusable(write(tmp_path, nb))
    assert "the grading metadata of its cells was changed (test_central_difference: points 100 (course: 2))" in said
    assert f"git checkout -- notebooks/{NB}/{NB}.ipynb" in said


def test_a_deleted_exercise_cell_is_named_with_how_to_recover(tmp_path):
    nb = course_notebook()
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_numerical_gradient"]
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "log_square_trace").metadata = {}
    said = unusable(write(tmp_path, nb))
    assert "exercise cells were deleted or lost their metadata (test_numerical_gradient, log_square_trace)" in said
    assert f"git checkout -- notebooks/{NB}/{NB}.ipynb" in said


@pytest.mark.parametrize("nbgrader", [None, "x"])
def test_an_exercise_cell_whose_metadata_is_not_a_mapping_is_named_as_lost(tmp_path, nbgrader):
    """nbformat accepts any value under "nbgrader": a cell whose value is not nbgrader's mapping has lost it."""
    nb = course_notebook()
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "log_square_trace"
         ).metadata["nbgrader"] = nbgrader
    assert "lost their metadata (log_square_trace)" in unusable(write(tmp_path, nb))


def test_a_copied_exercise_cell_keeps_a_notebook_usable(tmp_path):
    nb = course_notebook()
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_central_difference")
    nb.cells.append(nbformat.from_dict({**cell, "id": "copied"}))
    assert read_submission(write(tmp_path, nb))[1] == NB


# ------------------------------------------------------------------------------------------------ results

def autograded():
    """Test cells as TrustedVerdicts leaves them, among cells that are not scored."""
    manual = answer("essay", "my answer")
    manual.metadata["nbgrader"].update(grade=True, points=4)  # a manually graded answer: no score of nbgrader's
    return new_notebook(cells=[
        new_markdown_cell("# nb"), new_code_cell("import math"), answer("f"),
        graded("test_f", stream("stdout", "f: all hidden checks passed\n")),
        answer("g"),
        graded("test_g", error("CheckFailure", "[g] expected 1, got 2\ncause: g/off-by-one"), points=3),
        manual,
        graded("test_h", stream("stderr", "RuntimeWarning: overflow\n"), points=1),
        graded("test_k"),  # no outputs at all: nbgrader's rule gives it full points
    ])


def test_results_score_each_test_cell_by_nbgraders_rule_with_a_diagnosis():
    assert results(autograded()) == [
        ExerciseResult("f", 2.0, 2.0, ""),
        ExerciseResult("g", 0.0, 3.0, "expected 1, got 2\ncause: g/off-by-one"),
        ExerciseResult("h", 0.0, 1.0, "the cell wrote to stderr, which nbgrader scores as a failure: "
                                      "RuntimeWarning: overflow\ncause: stderr"),
        ExerciseResult("k", 2.0, 2.0, ""),
    ]
    assert all(type(e.score) is float for e in results(autograded()))
    assert [e.cause for e in results(autograded())] == [None, "g/off-by-one", "stderr", None]


def test_failure_message_is_the_diagnosis_of_the_last_error():
    assert failure_message([error("ValueError", "first"), stream("stderr", "noise"),
                            error("NotImplementedError")]).startswith("a function it calls is not written yet")


def test_failure_message_without_an_error_quotes_the_first_200_characters_of_stderr():
    said = failure_message([stream("stderr", "  warning one\n"), stream("stdout", "ignored"),
                            stream("stderr", "x" * 300 + "\n")])
    told = "the cell wrote to stderr, which nbgrader scores as a failure: " + ("warning one\n" + "x" * 300)[:200]
    assert said == told + "\ncause: stderr"


# ------------------------------------------------------------------------------------------------ GradeReport

def report():
    return GradeReport("nb.ipynb", [ExerciseResult("central_difference", 2.0, 2.0, ""),
                                    ExerciseResult("f", 0.0, 3.0, "expected 1\ngot 2\ncause: mismatch")])


def test_the_json_report_gives_totals_and_each_exercise_with_passed():
    assert json.loads(report().to_json()) == {
        "notebook": "nb.ipynb", "score": 2.0, "max_score": 5.0,
        "exercises": [{"id": "central_difference", "score": 2.0, "max_score": 2.0, "message": "", "passed": True,
                       "cause": None, "input": None},
                      {"id": "f", "score": 0.0, "max_score": 3.0, "message": "expected 1\ngot 2\ncause: mismatch",
                       "passed": False, "cause": "mismatch", "input": None}]}


def test_the_table_aligns_exercises_and_indents_the_lines_of_a_diagnosis():
    assert report().to_table().splitlines() == [
        "nb.ipynb: 2 / 5 points",
        "",
        "exercise            points  diagnosis",
        "central_difference   2/2    passed",
        "f                    0/3    expected 1",
        "                            got 2",
        "                            cause: mismatch",
    ]


def test_an_empty_report_scores_zero_of_zero():
    empty = GradeReport("nb.ipynb")
    assert (empty.score, empty.max_score) == (0, 0)
    assert empty.to_table().splitlines() == ["nb.ipynb: 0 / 0 points", "", "exercise  points  diagnosis"]


# ------------------------------------------------------------------------------------------------ the class run's log

def test_the_class_runs_log_row_carries_each_failed_exercises_cause(tmp_path):
    """Course.causes reads a recorded submission's autograded notebooks; RunLog writes them in the `causes` column."""
    import csv
    import types

    from autograder.grade import class_run

    folder = tmp_path / "autograded" / "ann" / NB
    folder.mkdir(parents=True)
    nbformat.write(autograded(), folder / f"{NB}.ipynb")
    course = types.SimpleNamespace(autograded=lambda assignment, student: tmp_path / "autograded" / student / NB)
    causes = class_run.Course.causes(course, NB, "ann")
    assert causes == "g=g/off-by-one h=stderr"
    log = class_run.RunLog(tmp_path, NB, open(os.devnull, "w"), "run-1")
    log.add(submission.Row("ann", "graded", 2.0, 6.0, causes=causes))
    log.add(submission.Row("bob", "failed", note="not a readable notebook"))
    rows = list(csv.DictReader(log.table.open(), delimiter="\t"))
    assert [(r["student"], r["causes"], r["note"]) for r in rows] == [
        ("ann", "g=g/off-by-one h=stderr", ""), ("bob", "", "not a readable notebook")]
