"""What every part of the course agrees on (autograder.contract): how grade ids name exercises, which cells carry
grading metadata, and where the assignments are. Every grading path reads these, so they are pinned here."""
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.contract import SOURCE, assignments, exercise_id, nbgrader_cells, nbgrader_meta


@pytest.mark.parametrize("grade_id, exercise", [
    ("test_central_difference", "central_difference"),  # a test cell
    ("central_difference", "central_difference"),       # its answer cell
    ("test_test_x", "test_x"),                          # only one prefix goes
    ("testing", "testing"),                             # the prefix is "test_", not "test"
    ("my_test_x", "my_test_x"),
    ("test_", ""),
    ("", ""),
])
def test_exercise_id_drops_the_test_prefix_once(grade_id, exercise):
    assert exercise_id(grade_id) == exercise


def test_nbgrader_cells_are_the_answer_and_test_cells_in_notebook_order():
    test = {"grade": True, "grade_id": "test_f", "locked": True, "points": 2, "schema_version": 3,
            "solution": False, "task": False}
    answer = {"grade": False, "grade_id": "f", "locked": False, "schema_version": 3, "solution": True, "task": False}
    manual = {**answer, "grade_id": "essay", "grade": True, "points": 4}
    read_only = {"grade": False, "grade_id": "given", "locked": True, "schema_version": 3, "solution": False,
                 "task": False}
    nb = new_notebook(cells=[new_code_cell("x", metadata={"nbgrader": test}), new_markdown_cell("text"),
                             new_code_cell("y", metadata={"nbgrader": read_only}), new_code_cell("z"),
                             new_markdown_cell("essay", metadata={"nbgrader": manual}),
                             new_code_cell("w", metadata={"nbgrader": answer}),
                             new_code_cell("v", metadata={"nbgrader": {}})])
    assert nbgrader_cells(nb) == [test, manual, answer]


def test_nbgrader_cells_of_a_notebook_without_grading_metadata_is_empty():
    assert nbgrader_cells(new_notebook(cells=[new_code_cell("x"), new_markdown_cell("y")])) == []


def test_assignments_are_the_source_notebooks_named_as_their_folders_in_course_order():
    found = assignments()
    assert list(found) == sorted(found) and "01_nudging" in found
    assert all(path == SOURCE / name / f"{name}.ipynb" for name, path in found.items())



@pytest.mark.parametrize("metadata", [{}, {"nbgrader": None}, {"nbgrader": "x"}, {"nbgrader": [1]}])
def test_a_cell_without_an_nbgrader_mapping_has_no_grading_metadata(metadata):
    cell = new_code_cell("x", metadata=metadata)
    assert nbgrader_meta(cell) == {} and nbgrader_cells(new_notebook(cells=[cell])) == []
