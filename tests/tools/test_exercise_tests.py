"""`make check EX=<id>`: which tests one exercise's loop runs."""
import pytest

from autograder.tools.exercise_tests import assignment_of, main, pytest_arguments


def test_an_exercise_runs_its_check_module_and_its_notebooks_consistency_tests():
    arguments = pytest_arguments("unbroadcast")
    assert arguments[0].endswith("tests/checks/test_checks_backward_functions.py")
    assert arguments[1].endswith("tests/course")
    assert arguments[arguments.index("-k") + 1] == "unbroadcast or 03_backward_functions"
    assert arguments[arguments.index("-m") + 1] == "not slow"


def test_every_exercise_finds_its_notebook():
    assert assignment_of("central_difference") == "01_nudging"
    assert assignment_of("training") == "05_modules_mnist"


def test_an_unknown_exercise_is_refused_with_the_ids_there_are(capsys):
    assert main(["no_such_exercise"]) == 2
    said = capsys.readouterr().err
    assert "no exercise 'no_such_exercise'" in said and "unbroadcast" in said
    with pytest.raises(KeyError):
        assignment_of("no_such_exercise")
